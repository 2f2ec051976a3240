"""What is kept between runs, and how it is kept trustworthy: the study of every trial
(``study``, with which of its verdicts stand, and ``runs``), the result record (``result``,
``records``, read only through ``door``), where they lie (``paths``, ``storage``) and how they
are written (``durable``), the earlier results (``history``) and the snippet.
"""

# The folder's public face: the modules other folders (and users) import from it; the others are
# its own. tests/test_units.py checks every import across folders against it.
__all__ = ["door", "durable", "history", "paths", "records", "result", "runs", "snippet", "storage", "study",
           "versions"]
