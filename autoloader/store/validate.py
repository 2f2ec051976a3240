"""The format a stored record carries, and a study's trial record read by it.

A result file and a study's trial carry a ``"format"`` field (FORMAT); a record without one was
written before it existed and is read as format 1, the same fields. Every value is checked for its
type and range before a record is used (the codec, NOTE [ One declaration per stored field ] in
search/codec.py), so a file edited by hand, written by a newer autoloader or damaged on disk is
never applied and never a traceback: it is ignored with a warning that names it and the field
(``StoredStateWarning``; the CLI shows it), and a result file is set aside (door.py).
"""

from __future__ import annotations

from ..errors import StoredStateWarning
from ..search.codec import InvalidRecord, read
from ..search.results import TrialResult

__all__ = ["FORMAT", "InvalidRecord", "StoredStateWarning", "record_format", "trial_record"]

# Format 2 added the field itself and, in the study, the digest of the code a trial ran.
FORMAT = 2


def record_format(data: object) -> int:
    """The record's format: 1 when absent; an InvalidRecord when ``data`` is no mapping, or not of
    a format this version reads."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the record is {type(data).__name__}, not a mapping")
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise InvalidRecord(f"format {fmt!r} is not a format number")
    if fmt > FORMAT:
        raise InvalidRecord(f"format {fmt} was written by a newer autoloader (this one reads 1 to {FORMAT})")
    return fmt


def trial_record(data: object, max_workers: int | None = None) -> TrialResult:
    """The TrialResult a study's record holds, or InvalidRecord saying what is wrong with it.
    ``max_workers``: the most workers a run on the hardware it is read for tries."""
    record_format(data)
    return read(TrialResult, data, limit=max_workers)
