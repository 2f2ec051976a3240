"""The one reader of a stored result file: ``load_result``, the door every result comes in by.

# NOTE [ A bad result file ]
# A result file is read whole and checked field by field (TuneResult.from_dict) before anything
# uses it: the previous result a tune compares with, the warm start, ``show``, ``report``, a
# retune's history. One that fails (not JSON, a field no run writes, a bound it breaks) is a
# StoredStateWarning naming the file and the field, and the result is absent. A reader (``show``,
# ``report``, ``dashboard``, every listing, ``stored_result``) leaves the file as it is: a command
# that reads never writes, and a file named on its command line may be anything. Only a tune
# (``tune``, ``best_loader``, ``retune``), reading its own key's result (``set_aside=True``), sets
# a damaged one aside: renamed to ``<name>.corrupt-<UTC time>`` beside it (nothing is deleted;
# the name no longer ends in .json, so no reader globs it again), and the run measures afresh and
# writes a good one. So a damaged file costs one warning, never the tune after it, and never
# every later tune of its key. A file that is there but not one to set aside is only ignored,
# by tunes too: a folder where the file should be, one that cannot be read, and one written by a
# newer autoloader (it is good, for that autoloader).
"""

from __future__ import annotations

import datetime
import json
import os
import warnings

from ..search.codec import InvalidRecord
from .result import TuneResult
from .validate import FORMAT, StoredStateWarning


def load_result(path: str, cpus: int | None = None, batch_sizes: tuple[int, ...] | None = None, *,
                set_aside: bool = False) -> TuneResult | None:
    """The result file at ``path`` as its checked record (its ``where`` the path), or None when
    there is none; None with a warning naming the file when it cannot be used (NOTE [ A bad
    result file ]). ``cpus`` and ``batch_sizes``: this machine's usable CPUs and the problem's
    batch sizes, which bound what a result handed out here may say. ``set_aside``: a tune reading
    its own key's result, which sets a damaged one aside; a reader leaves it where it is."""
    _set_aside = _setting_aside if set_aside else _left
    try:
        with open(path) as fh:
            text = fh.read()
    except (FileNotFoundError, NotADirectoryError):   # none there (a part of the path is a file)
        return None
    except IsADirectoryError:
        return _ignored(path, "it is a folder, not a file")
    except (OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            return _set_aside(path, f"it is not text ({exc})")
        return _ignored(path, f"it cannot be read ({exc})")
    try:
        data = json.loads(text)
    except ValueError as exc:
        return _set_aside(path, f"it is not JSON ({exc})")
    except RecursionError:   # nested past what Python's parser walks: no run writes that
        return _set_aside(path, "it is nested deeper than any result")
    try:
        return TuneResult.from_dict(data, path, cpus, batch_sizes)
    except InvalidRecord as exc:
        if _newer(data):
            return _ignored(path, str(exc))
        return _set_aside(path, str(exc))
    except RecursionError:
        return _set_aside(path, "it is nested deeper than any result")


def _newer(data: object) -> bool:
    fmt = data.get("format") if isinstance(data, dict) else None
    return isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT


def set_aside(path: str) -> str | None:
    """Rename the file at ``path`` to ``<path>.corrupt-<UTC time>`` (``-2``, ``-3``... when taken);
    the new path, or None when it could not be renamed (gone meanwhile, or a read-only folder)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target, n = f"{path}.corrupt-{stamp}", 1
    while os.path.lexists(target):
        n += 1
        target = f"{path}.corrupt-{stamp}-{n}"
    try:
        os.rename(path, target)
    except OSError:
        return None
    return target


def _setting_aside(path: str, why: str) -> None:
    moved = set_aside(path)
    where = (f"set aside as {moved}" if moved else "it could not be set aside (the folder refused the rename); "
             "move it away to keep it")
    warnings.warn(f"ignored the stored result {path}: {why}. It is not used; {where}, and a new tune of its "
                  "dataset writes a good one", StoredStateWarning, stacklevel=3)
    return None


def _left(path: str, why: str) -> None:
    warnings.warn(f"ignored the stored result {path}: {why}. It is not used, and left as it is (a tune of its "
                  "dataset on the hardware it was tuned on sets it aside and writes a good one)", StoredStateWarning,
                  stacklevel=3)
    return None


def _ignored(path: str, why: str) -> None:
    warnings.warn(f"ignored the stored result {path}: {why}. It is not used; a new tune replaces it "
                  "(move it aside to keep it)", StoredStateWarning, stacklevel=3)
    return None
