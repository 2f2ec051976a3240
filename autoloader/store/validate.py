"""The format a stored record carries, and a study's trial record read by it.

A result file and a study's trial carry a ``"format"`` field (FORMAT); one without it is format 1.
Every value is checked before a record is used (NOTE [ One declaration per stored field ] in
search/codec.py), so a record edited by hand, written by a newer autoloader or damaged is never
applied and never a traceback: it is ignored with a ``StoredStateWarning`` naming it and the field.
"""

from __future__ import annotations

from ..errors import StoredStateWarning
from ..search.codec import InvalidRecord, read
from ..search.results import TrialResult

__all__ = ["FORMAT", "InvalidRecord", "StoredStateWarning", "record_format", "trial_record"]

# Format 2 added the field itself and, in the study, the digest of the code a trial ran.
FORMAT = 2


def record_format(data: object) -> int:
    """The record's format (1 when absent); InvalidRecord for no mapping, or a format not read here."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the record is {type(data).__name__}, not a mapping")
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise InvalidRecord(f"format {fmt!r} is not a format number")
    if fmt > FORMAT:
        raise InvalidRecord(f"format {fmt} was written by a newer autoloader (this one reads 1 to {FORMAT})")
    return fmt


def trial_record(data: object, max_workers: int | None = None) -> TrialResult:
    """The TrialResult a study's record holds, or InvalidRecord saying what is wrong with it."""
    record_format(data)
    return read(TrialResult, data, limit=max_workers)
