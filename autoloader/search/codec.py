"""Stored records: each declared once, read and written here.

A stored record is a frozen dataclass deriving from ``Stored``: its annotations say what each
field holds, ``stored(...)`` what its type alone does not (NOTE [ One declaration per stored
field ]). ``to_dict`` writes it as JSON holds it; ``from_dict`` reads it back with every field
checked, raising ``InvalidRecord`` naming the field by its place (``trials[3].config.num_workers
is 99, ...``), the value found and what it must be.

# NOTE [ One declaration per stored field ]
# A record is stored as a mapping of its fields in declaration order, each under its name.
# What a field's declaration may add (``stored``):
# - ``key``: the stored name where it differs; ``old``: names it had in older records, read and
#   never written; a dotted key (``memory.pick``) reads inside a stored mapping.
# - the rule the type does not say: ``signed`` (a number or count of either sign), ``positive``,
#   ``least``/``most`` (a count's bounds; ``most`` a number's too), ``choices``, ``pattern``
#   (a text that names something: a regular expression and its words), ``nonempty``, ``scalar``
#   (a setting's value: a number, text, true or false, or null), ``full`` (a config stored with
#   every knob, not its keywords).
# - ``then``: what the record derives from its fields, written after this one for the file's
#   readers and never read back (the record computes it again); ``after``: written after that
#   field (where the file's order is not the constructor's); ``sparse``: written only when it
#   holds something; ``flat``: a record whose fields stand at its holder's level (a holder
#   without any of them reads None); ``read``/``write`` False: kept out of the file.
# Reading, a field absent takes its default (an older record did not have it: ``absent``, or the
# constructor's); one without either must be there. Null is a value: fine where the type says
# ``| None``, else read as the constructor's default, else refused. Each value is checked for its
# type and rule before the record is built; a record whose fields must agree says so in
# ``_read_back``, which returns the record as read (a ValueError for what no run writes). JSON
# has no infinity: a number that is not finite is written null.
#
# NOTE [ Bounds of a stored record ]
# A stored figure is checked for what the code that reads it needs: a count of CPUs, a batch size
# or a prefetch depth sizes the model's loops, so a damaged file saying 10**18 would hang a report
# rather than fail it. Past MAX_CPUS, MAX_BATCH_SIZE or MAX_PREFETCH, far beyond any machine or
# loader, or any number past MAX_FIGURE (it would overflow the arithmetic), the record is damaged.
# A config's workers are bounded by the CPUs of the machine it is read for (``limit``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from typing import Any, Callable

from .policy import MAX_WORKERS_PER_CPU
from .settings import SETTINGS, WORKERS
from .space import LoaderConfig

MAX_CPUS = 1 << 16
MAX_BATCH_SIZE = 1 << 24
MAX_PREFETCH = 1 << 12
MAX_FIGURE = 1e18
_MISSING = dataclasses.MISSING
_RULES = frozenset({"signed", "positive", "least", "most", "choices", "pattern", "nonempty", "scalar", "full"})


class InvalidRecord(ValueError):
    """Why a stored record cannot be used."""


def stored(default: Any = _MISSING, *, key: str | None = None, old: tuple[str, ...] = (), then: tuple = (),
           after: str | None = None, sparse: bool = False, flat: bool = False, read: bool = True,
           write: bool = True, absent: Any = _MISSING, **rule: Any) -> Any:
    """A stored field's declaration beyond its type: NOTE [ One declaration per stored field ]."""
    unknown = set(rule) - _RULES
    if unknown:
        raise TypeError(f"stored() takes no rule {', '.join(sorted(unknown))}")
    return dataclasses.field(default=default, metadata={"stored": dict(
        key=key, old=old, then=then, after=after, sparse=sparse, flat=flat, read=read, write=write, rule=rule,
        absent=absent)})


_DECLARED = stored().metadata["stored"]   # a field without ``stored``


class Stored:
    """A record stored as JSON: ``to_dict`` writes it, ``from_dict`` reads it back, checked."""

    def to_dict(self) -> dict:
        return write(self)

    @classmethod
    def from_dict(cls, data: object, at: str = "", limit: int | None = None):
        """The record ``data`` holds, every field checked; ``at``: where it is, for the error's
        words; ``limit``: the most workers a config in it may have."""
        return read(cls, data, at, limit)


def read(cls: type, data: object, at: str = "", limit: int | None = None):
    """The ``cls`` record (or LoaderConfig) that ``data`` holds (``Stored.from_dict``)."""
    if cls is LoaderConfig:
        return _config(data, at or "config", limit)
    return _plan(cls).read(data, at, limit)


def write(record: Any) -> dict:
    return _plan(type(record)).write(record)


# --- the plan of a record: its fields' readers and writers, made once from its declaration ---------

class _Plan:
    """Each field of a record as stored: its declaration, ``path`` (its key's steps), ``check``
    (value, at, limit) -> value and ``put`` value -> stored form."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields = []
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            meta = {**_DECLARED, **f.metadata.get("stored", {})}
            absent, flat = meta.pop("absent"), meta.pop("flat")
            kind, optional = _unoptional(hints[f.name])
            check, put = _kind(kind, meta.pop("rule"), optional)
            self.fields.append(types.SimpleNamespace(
                **meta, name=f.name, path=tuple((meta["key"] or f.name).split(".")), check=check, put=put,
                default=f.default, absent=f.default if absent is _MISSING else absent, optional=optional,
                flat=kind if flat else None))

    def read(self, data: object, at: str, limit: int | None):
        _mapping(data, at or "the record", limit)
        values = {}
        for f in self.fields:
            if not f.read:
                continue
            if f.flat is not None:
                own = {g.path[0] for g in _plan(f.flat).fields}
                values[f.name] = None if f.optional and not own & data.keys() else _plan(f.flat).read(data, at, limit)
                continue
            value, where = _lookup(data, f, at)
            if value is _MISSING and f.absent is not _MISSING:
                values[f.name] = dict(f.absent) if isinstance(f.absent, dict) else f.absent
            elif value is None and not f.optional and f.default is not _MISSING:
                values[f.name] = f.default   # an older writer's null for a field that now has a value
            else:
                values[f.name] = f.check(None if value is _MISSING else value, where, limit)
        try:
            record = self.cls(**values)
            return record._read_back() if hasattr(record, "_read_back") else record
        except InvalidRecord as exc:
            raise _within(at, exc) from None
        except (TypeError, ValueError, KeyError) as exc:
            raise _within(at, InvalidRecord(str(exc))) from None

    def write(self, record: Any) -> dict:
        out: dict = {}
        waiting: dict[str, list] = {}
        for f in self.fields:
            if f.write and f.after:
                waiting.setdefault(f.after, []).append(f)
        for f in self.fields:
            if f.write and not f.after:
                self._put(record, f, out, waiting)
        return out

    def _put(self, record: Any, f, out: dict, waiting: dict) -> None:
        value = getattr(record, f.name)
        if f.flat is not None:
            out.update(write(value) if value is not None else {})
        elif value or not f.sparse:
            out[f.path[0]] = f.put(value)
        for entry in f.then:
            key, how = (entry, entry) if isinstance(entry, str) else entry
            found = how(record) if callable(how) else getattr(record, how)
            found = found() if callable(found) else found
            if key == "**":
                out.update(found)
            else:
                out[key] = found
        for g in waiting.pop(f.name, ()):
            self._put(record, g, out, waiting)


@functools.lru_cache(maxsize=None)
def _plan(cls: type) -> _Plan:
    return _Plan(cls)


def _lookup(data: dict, f, at: str) -> tuple[object, str]:
    node, where = data, at
    for step in f.path[:-1]:
        where = _at(where, step)
        node = node.get(step)
        if node is None:
            return _MISSING, _at(where, f.path[-1])
        _mapping(node, where, None)
    for key in (f.path[-1], *f.old):
        if key in node:
            return node[key], _at(where, key)
    return _MISSING, _at(where, f.path[-1])


def _at(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _within(at: str, exc: InvalidRecord) -> InvalidRecord:
    text = str(exc)
    if not at:
        return exc
    if re.match(r"[A-Za-z_][\w.\[\]]* (is|has) ", text):
        return InvalidRecord(f"{at}.{text}")
    return InvalidRecord(f"{at}: {text}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + " ..."


def _unoptional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(typing.get_args(tp))
        raise TypeError(f"a stored field holds one type (or None), not {tp}")
    return tp, False


# --- each kind of value: its check and its stored form ---------------------------------------------

def _kind(tp: Any, rule: dict, optional: bool) -> tuple[Callable, Callable]:
    check, put = _of(tp, rule)
    return (lambda v, at, limit: None if v is None and optional else check(v, at, limit)), \
        (lambda v: None if v is None else put(v))


def _of(tp: Any, rule: dict) -> tuple[Callable, Callable]:
    if typing.get_origin(tp) is tuple:
        return _sequence(typing.get_args(tp), rule)
    if tp is LoaderConfig:
        return _config, (LoaderConfig.to_dict if rule.get("full") else LoaderConfig.loader_kwargs)
    if isinstance(tp, type) and issubclass(tp, Stored):
        return (lambda v, at, limit: _plan(tp).read(v, at, limit)), tp.to_dict
    if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):   # a NamedTuple: a mapping
        return (lambda v, at, limit: tp(*(_mapping(v, at, limit).get(k) for k in tp._fields))), \
            (lambda v: dict(zip(tp._fields, v)))
    if tp in (bool, int, float, str):
        return {bool: _flag, int: _count, float: _number, str: _text}[tp](rule), (_finite if tp is float else _same)
    if tp is dict:
        return _mapping, _same
    if tp in (object, Any):
        return (_number({"signed": True, "scalar": True}) if rule.get("scalar") else _same), _same
    raise TypeError(f"no stored form for {tp}")


def _same(value: Any, *_: Any) -> Any:
    return value


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _checker(ok: Callable[[Any], bool], words: str) -> Callable:
    """A check that passes a value ``ok`` holds, and refuses any other as not ``words``."""
    def check(value, at, limit):
        if not ok(value):
            raise InvalidRecord(f"{at} is {_shown(value)}, not {words}")
        return value
    return check


_mapping = _checker(lambda value: isinstance(value, dict), "a mapping")


def _flag(rule: dict) -> Callable:
    return _checker(lambda value: isinstance(value, bool), "true or false")


def _count(rule: dict) -> Callable:
    signed = rule.get("signed", False)
    least, most = rule.get("least", -MAX_FIGURE if signed else 0), rule.get("most", MAX_FIGURE)
    words = ("a whole number" if signed else "a count" + (f" of {least} or more" if least else "")
             + (f" up to {most:.0f}" if most < MAX_FIGURE else ""))
    return _checker(lambda v: not isinstance(v, bool) and isinstance(v, int) and least <= v <= most, words)


def _number(rule: dict) -> Callable:
    signed, positive, most = rule.get("signed", False), rule.get("positive", False), rule.get("most", MAX_FIGURE)
    low = -MAX_FIGURE if signed else 0
    words = ("a positive " if positive else "a " if signed else "a non-negative ") + "finite number" + (
        f" up to {most:.0f}" if most < MAX_FIGURE else "")
    scalar = rule.get("scalar", False)   # a setting's value: text, true or false, or null too
    return _checker(lambda v: (scalar and (v is None or isinstance(v, (bool, str))))
                    or (type(v) in (int, float) and low <= v <= most and not (positive and v <= 0)), words)


def _text(rule: dict) -> Callable:
    choices, pattern, nonempty = rule.get("choices"), rule.get("pattern"), rule.get("nonempty", False)

    def check(value, at, limit):
        if choices is not None and value not in choices:
            raise InvalidRecord(f"{at} is {_shown(value)}, not one of {', '.join(choices)}")
        if pattern is not None and not (isinstance(value, str) and re.fullmatch(pattern[0], value)):
            raise InvalidRecord(f"{at} is {_shown(value)}, not {pattern[1]}")
        if not isinstance(value, str):
            raise InvalidRecord(f"{at} is {_shown(value)}, not text")
        if nonempty and not value:
            raise InvalidRecord(f"{at} is empty")
        return value
    return check


def _sequence(args: tuple, rule: dict) -> tuple[Callable, Callable]:
    fixed = not (len(args) == 2 and args[1] is Ellipsis)
    kinds = [_kind(kind, rule, optional) for kind, optional in map(_unoptional, args if fixed else args[:1])]

    def check(value, at, limit):
        if not isinstance(value, list):
            raise InvalidRecord(f"{at} is {_shown(value)}, not a list")
        if fixed and len(value) != len(kinds):
            raise InvalidRecord(f"{at} is {_shown(value)}, not a list of {len(kinds)} items")
        return tuple((kinds[i] if fixed else kinds[0])[0](x, f"{at}[{i}]", limit) for i, x in enumerate(value))
    return check, lambda value: [(kinds[i] if fixed else kinds[0])[1](x) for i, x in enumerate(value)]


def _config(value: object, at: str, limit: int | None) -> LoaderConfig:
    """A stored config, each setting checked by its knob's ``stored`` rule and within the bounds."""
    _mapping(value, at, limit)
    for knob in SETTINGS:
        problem = knob.stored(knob.name, value) if knob.stored is not None else None
        if problem is not None:
            raise InvalidRecord(f"{at}.{problem}")
        if knob is WORKERS and limit is not None and value[knob.name] > limit:
            raise InvalidRecord(f"{at}.{knob.name} is {value[knob.name]}, more than the {limit} a run on this "
                                f"hardware tries ({MAX_WORKERS_PER_CPU} per CPU)")
    try:
        config = LoaderConfig.from_dict(value)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRecord(f"{at} {_shown(value)}: {exc}") from None
    if config.batch_size > MAX_BATCH_SIZE:
        raise InvalidRecord(f"{at}.batch_size is {config.batch_size}, more than any loader's ({MAX_BATCH_SIZE})")
    if config.prefetch_factor is not None and config.prefetch_factor > MAX_PREFETCH:
        raise InvalidRecord(f"{at}.prefetch_factor is {config.prefetch_factor}, more than any loader's "
                            f"({MAX_PREFETCH})")
    return config


__all__ = ["MAX_BATCH_SIZE", "MAX_CPUS", "MAX_FIGURE", "MAX_PREFETCH", "InvalidRecord", "Stored", "read",
           "stored", "write"]
