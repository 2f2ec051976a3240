"""The one reader of a stored result file: ``load_result``, the door every result comes in by.

# NOTE [ A bad result file ]
# A result file is read whole and checked field by field (TuneResult.from_dict) before anything
# uses it. One that fails (not JSON, a field no run writes, a bound it breaks) is a
# StoredStateWarning naming the file and the field, and the result is absent. A reader (``show``,
# ``report``, ``dashboard``, every listing, ``stored_result``) leaves the file as it is: a command
# that reads never writes. Only a tune reading its own key's result (``set_aside=True``) sets a
# damaged one aside, renamed to ``<name>.corrupt-<UTC time>`` beside it (no longer a .json, so no
# reader globs it again), and writes a good one: a damaged file costs one warning, never a tune.
# A folder where the file should be, a file that cannot be read, and one written by a newer
# autoloader (good, for that autoloader) are only ignored, by tunes too.
"""

from __future__ import annotations

import datetime
import json
import os
import warnings

from ..errors import StoredStateWarning
from ..search.codec import InvalidRecord
from .durable import aside_name
from .result import FORMAT, TuneResult


def load_result(path: str, cpus: int | None = None, batch_sizes: tuple[int, ...] | None = None, *,
                set_aside: bool = False) -> TuneResult | None:
    """The result file at ``path`` as its checked record, or None when there is none or, with a
    warning naming it, when it cannot be used (NOTE [ A bad result file ]). ``cpus`` and
    ``batch_sizes``: TuneResult.from_dict's; ``set_aside``: a tune reading its own key's result."""
    try:
        return _read(path, cpus, batch_sizes)
    except _Unusable as exc:
        why, damaged = exc.args
    if not damaged:
        then = "; a new tune replaces it (move it aside to keep it)"
    elif set_aside:
        moved = _aside(path)
        then = "; " + (f"set aside as {moved}" if moved else "it could not be set aside (the folder refused the "
                       "rename); move it away to keep it") + ", and a new tune of its dataset writes a good one"
    else:
        then = (", and left as it is (a tune of its dataset on the hardware it was tuned on sets it aside and writes "
                "a good one)")
    warnings.warn(f"ignored the stored result {path}: {why}. It is not used{then}", StoredStateWarning, stacklevel=2)
    return None


class _Unusable(Exception):
    """Why a result file cannot be used, and whether it is damaged (a tune sets it aside)."""


def _read(path: str, cpus: int | None, batch_sizes: tuple[int, ...] | None) -> TuneResult | None:
    try:
        with open(path) as fh:
            text = fh.read()
    except (FileNotFoundError, NotADirectoryError):   # none there (a part of the path is a file)
        return None
    except IsADirectoryError:
        raise _Unusable("it is a folder, not a file", False) from None
    except UnicodeDecodeError as exc:
        raise _Unusable(f"it is not text ({exc})", True) from None
    except OSError as exc:
        raise _Unusable(f"it cannot be read ({exc})", False) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _Unusable(f"it is not JSON ({exc})", True) from None
    except RecursionError:   # nested past what Python's parser walks: no run writes that
        raise _Unusable("it is nested deeper than any result", True) from None
    try:
        return TuneResult.from_dict(data, path, cpus, batch_sizes)
    except InvalidRecord as exc:   # written by a newer autoloader: good, for that one
        raise _Unusable(str(exc), not _newer(data)) from None
    except RecursionError:
        raise _Unusable("it is nested deeper than any result", True) from None


def _newer(data: object) -> bool:
    fmt = data.get("format") if isinstance(data, dict) else None
    return isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT


def _aside(path: str) -> str | None:
    """Rename the file at ``path`` to ``<path>.corrupt-<UTC time>``; the new path, or None."""
    target = aside_name(path, datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    try:
        os.rename(path, target)
    except OSError:
        return None
    return target
