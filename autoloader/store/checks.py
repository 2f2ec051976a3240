"""The checks a stored value passes before a record is built from it, each naming its field.

A stored record (a result file, a study's trial, a run's mark) is checked field by field when it
is read (store/parts.py, store/result.py, validate.py): each check takes the value and its name as
the reader says it (``profile.cpus``, ``trials[3].config.num_workers``) and returns the value, or
raises ``InvalidRecord`` stating the field, the value found and what it must be. Pure: no files.

# NOTE [ Bounds of a stored record ]
# A stored figure is checked for what the code that reads it needs, not only for its type: a
# count of CPUs, a batch size or a prefetch depth sizes the loops of the model and the what-ifs
# (a worker ladder of 4 x CPUs rungs, a simulated pool of batch-size samples), so a damaged file
# saying 10**18 would hang a report rather than fail it. Past MAX_CPUS, MAX_BATCH_SIZE or
# MAX_PREFETCH, far beyond any machine or loader a run measures, the record is damaged. Numbers
# past MAX_FIGURE (in any unit autoloader stores: seconds, bytes, samples/s) would overflow the
# arithmetic done on them, so they fail too.
"""

from __future__ import annotations

import math
import re

MAX_CPUS = 1 << 16
MAX_BATCH_SIZE = 1 << 24
MAX_PREFETCH = 1 << 12
MAX_FIGURE = 1e18


class InvalidRecord(ValueError):
    """Why a stored record cannot be used."""


def within(name: str, exc: InvalidRecord, own: str | None = None) -> InvalidRecord:
    """``exc`` said of a part, as the whole's field ``name`` holds it: a field of the part is
    named under it (``trials[3].samples_per_s``), the part itself (``own``: what the part's own
    check calls it) by ``name``, anything else after it."""
    text = str(exc)
    if own is not None and text.startswith(own + " "):
        return InvalidRecord(name + text[len(own):])
    if re.match(r"[A-Za-z_][\w.\[\]]* (is|has) ", text):
        return InvalidRecord(f"{name}.{text}")
    return InvalidRecord(f"{name}: {text}")


def mapping(value: object, name: str, optional: bool = False) -> dict | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise InvalidRecord(f"{name} is {value!r}, not a mapping")
    return value


def items(value: object, name: str) -> list:
    """A list (absent: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRecord(f"{name} is {value!r}, not a list")
    return value


def number(value: object, name: str, *, optional: bool = True, positive: bool = False,
           signed: bool = False) -> float | int | None:
    """A finite number: non-negative (``positive``: above 0; ``signed``: either sign)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or abs(value) > MAX_FIGURE or (value < 0 and not signed) or (positive and value <= 0):
        kind = "positive " if positive else "" if signed else "non-negative "
        raise InvalidRecord(f"{name} is {value!r}, not a {kind}finite number")
    return value


def count(value: object, name: str, *, optional: bool = True, least: int = 0,
          most: float = MAX_FIGURE) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least or value > most:
        raise InvalidRecord(f"{name} is {value!r}, not a count" + (f" of {least} or more" if least else "")
                            + (f" up to {most:.0f}" if most < MAX_FIGURE else ""))
    return value


def flag(value: object, name: str, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise InvalidRecord(f"{name} is {value!r}, not true or false")
    return value


def text(value: object, name: str, optional: bool = True) -> str | None:
    if not (isinstance(value, str) or (value is None and optional)):
        raise InvalidRecord(f"{name} is {value!r}, not text")
    return value


def moment(value: object, name: str) -> str | None:
    """A time as results are dated (ISO 8601): it names a history file, so nothing else passes."""
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"[0-9][0-9A-Za-z:+.-]*", value)):
        raise InvalidRecord(f"{name} is {value!r}, not a time")
    return value


def numbers(value: object, name: str, *, positive: bool = False, signed: bool = False) -> tuple:
    """A list of finite numbers (``number``'s kinds), as a tuple."""
    found = items(value, name)
    low = -MAX_FIGURE if signed else 0
    # At once where every one is sound (a profile holds hundreds); one by one to name the one that is not.
    if all(type(x) in (int, float) and low <= x <= MAX_FIGURE and (x > 0 or not positive) for x in found):
        return tuple(found)
    return tuple(number(x, f"{name}[{i}]", optional=False, positive=positive, signed=signed)
                 for i, x in enumerate(found))


def pairs(value: object, name: str, signed: bool = False) -> tuple[tuple[int, float], ...]:
    """A list of [count, number] pairs (a curve, a growth's readings)."""
    out = []
    for i, pair in enumerate(items(value, name)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidRecord(f"{name}[{i}] is {pair!r}, not a pair")
        out.append((count(pair[0], f"{name}[{i}][0]", optional=False),
                    number(pair[1], f"{name}[{i}][1]", optional=False, signed=signed)))
    return tuple(out)


def named_seconds(value: object, name: str) -> tuple[tuple[str, float], ...]:
    """A list of [what, seconds] pairs (a profile's stages)."""
    out = []
    for i, pair in enumerate(items(value, name)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidRecord(f"{name}[{i}] is {pair!r}, not [what, seconds]")
        out.append((text(pair[0], f"{name}[{i}][0]", optional=False),
                    number(pair[1], f"{name}[{i}][1]", optional=False)))
    return tuple(out)


def scalar(value: object, name: str) -> object:
    """A setting's value as JSON holds it: a number, text, true or false, or null."""
    if value is None or isinstance(value, (bool, str)):
        return value
    return number(value, name, signed=True)
