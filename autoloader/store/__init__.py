"""What is kept between runs, and how it is kept trustworthy.

Serves ``tuning`` (a run records its trials and result here), ``api`` (a stored result is looked
up here) and ``fleet`` (re-tunes, ``show``, ``dashboard`` read it):

- ``study``: the Optuna study, the record of every trial (``StudyStore``); ``runs``: which run
  measured each trial, and which are complete; ``retry``: which stored verdicts still stand;
- ``result``: ``TuneResult``, the result record; its own small records (its what-ifs among them)
  in ``records``, its comparison in ``comparison``, each declared once and read and written by
  search/codec.py (``from_dict``, ``to_dict``), every field checked as it is read;
  ``validate``: the format a stored record carries, and a study's trial read by it;
  ``door``: ``load_result``, the one reader of a result file, which sets a damaged one aside;
  ``versions``: which autoloader measured it;
- ``paths``: where results and studies lie (every glob is here); ``storage``: Optuna storage URLs;
  ``durable``: writes that survive a full disk, a kill or a damaged file; ``saving``: a run's
  files and study written, or what happened to each; ``push``: a run's trials pushed to the fleet
  storage (NOTE [ Local first ]); ``history``: the
  previous result of a problem, and the dated history; ``snippet``: the self-contained snippet.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["comparison", "door", "durable", "history", "paths", "push", "records", "result", "retry", "runs",
           "saving", "snippet", "storage", "study", "validate", "versions"]
