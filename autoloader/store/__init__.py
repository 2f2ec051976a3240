"""What is kept between runs, and how it is kept trustworthy.

Serves ``tuning`` (a run records its trials and result here), ``api`` (a stored result is looked
up here) and ``fleet`` (re-tunes, ``show``, ``dashboard`` read it):

- ``study``: the Optuna study, the record of every trial (``StudyStore``); ``runs``: which run
  measured each trial, and which are complete; ``retry``: which stored verdicts still stand;
- ``validate``: every stored record checked on load, and ``load_result``, the one reader of a
  result file; ``versions``: which autoloader measured it;
- ``paths``: where results and studies lie (every glob is here); ``storage``: Optuna storage URLs;
  ``durable``: writes that survive a full disk, a kill or a damaged file; ``history``: the
  previous result of a problem, and the dated history; ``snippet``: the self-contained snippet.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["durable", "history", "paths", "retry", "runs", "snippet", "storage", "study", "validate",
           "versions"]
