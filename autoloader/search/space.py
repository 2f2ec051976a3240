"""The search space: DataLoader configurations and the pure functions that enumerate them, each
reading the knobs' declarations (settings.py) rather than naming them."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import usage
from .policy import MAX_WORKERS_PER_CPU
from .settings import (BATCH, DATALOADER, PREFETCH_CHOICES, REQUIRED, SETTINGS, TUNED_SETTINGS, WORKERS, Knob,
                       check_batch_size, context)

__all__ = ["LoaderConfig", "PREFETCH_CHOICES", "SearchSpace", "TUNED_SETTINGS", "check_batch_size",
           "parse_batch_sizes", "search_space"]


def _rebuilt(items: tuple) -> "LoaderConfig":
    return LoaderConfig(**dict(items))


@functools.total_ordering
class LoaderConfig:
    """One point of the space: the DataLoader keyword arguments autoloader tunes, one value per
    knob of the settings table (NOTE [ The settings table ] in settings.py), read as attributes
    (``config.num_workers``) or by knob (``config[WORKERS]``).

    Positional arguments go in the table's order; a knob not given holds DataLoader's default.
    DataLoader's own rule applies: a knob that needs workers (``prefetch_factor``, ...) holds its
    default without them (``make`` sees to it). Frozen, hashable and ordered as a frozen
    dataclass of those fields would be; not one, since its fields are the table's.
    """

    __slots__ = ("_values", "_items", "_hash")

    def __init__(self, *args: Any, **kwargs: Any):
        knobs = SETTINGS.knobs()
        if len(args) > len(knobs):
            raise TypeError(f"LoaderConfig takes at most {len(knobs)} settings, {len(args)} given")
        values = dict(zip((k.name for k in knobs), args))
        for name, value in kwargs.items():
            if name not in SETTINGS:
                raise TypeError(f"LoaderConfig got an unexpected setting {name!r}")
            if name in values:
                raise TypeError(f"LoaderConfig got {name!r} twice")
            values[name] = value
        for k in knobs:
            if k.name not in values:
                if k.default is REQUIRED:
                    raise TypeError(f"LoaderConfig is missing the setting {k.name!r}")
                values[k.name] = k.default
        _check(knobs, values)
        items = tuple((k.name, values[k.name]) for k in knobs)
        object.__setattr__(self, "_values", dict(items))
        object.__setattr__(self, "_items", items)
        object.__setattr__(self, "_hash", hash(items))

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_values")[name]
        except KeyError:
            raise AttributeError(f"LoaderConfig has no setting {name!r}") from None

    def __getitem__(self, knob: Knob | str) -> Any:
        return self._values[knob if isinstance(knob, str) else knob.name]

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not LoaderConfig:
            return NotImplemented
        return self._items == other._items

    def __lt__(self, other: "LoaderConfig") -> bool:
        if other.__class__ is not LoaderConfig:
            return NotImplemented
        return tuple(v for _, v in self._items) < tuple(v for _, v in other._items)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"LoaderConfig({', '.join(f'{name}={value!r}' for name, value in self.to_dict().items())})"

    def __reduce__(self):
        return (_rebuilt, (self._items,))

    def applies(self, knob: Knob) -> bool:
        return knob.applies(self._values)

    @classmethod
    def make(cls, *args: Any, **kwargs: Any) -> "LoaderConfig":
        """Build a valid config: a knob not given (or given None) takes its ``start``, and one that
        does not apply (a worker-only knob with no workers) its default."""
        knobs = SETTINGS.knobs()
        values = {**dict(zip((k.name for k in knobs), args)), **kwargs}
        if len(args) > len(knobs) or not values.keys() <= SETTINGS.names or \
                any(k.default is REQUIRED and k.name not in values for k in knobs):
            return cls(*args, **kwargs)   # which says what is wrong
        for k in knobs:
            if k.default is not REQUIRED and values.get(k.name) is None:
                values[k.name] = k.first
        _check_counts(knobs, values)
        return cls(**{k.name: values[k.name] if k.applies(values) else k.default for k in knobs})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LoaderConfig":
        """The config a ``loader_kwargs()`` or ``to_dict()`` mapping describes (KeyError for a
        required knob it lacks)."""
        return cls.make(**{k.name: data[k.name] if k.default is REQUIRED else data.get(k.name, k.default)
                           for k in SETTINGS})

    def to_dict(self) -> dict:
        """The stored form: every knob of the config's loader (those that do not apply at their
        defaults), and any other that applies; a DataLoader config's holds no nodes knob."""
        loader = self._values.get("loader", DATALOADER)
        return {name: value for name, value in self._items
                if loader in SETTINGS[name].loaders
                or (SETTINGS[name].applies(self._values) and not (name == "loader" and value == DATALOADER))}

    def loader_kwargs(self) -> dict:
        """The keyword arguments to pass to ``torch.utils.data.DataLoader`` (a config of another
        loader: that loader's): the knobs that apply, less an ``omit_default`` one at its default."""
        loader = self._values.get("loader", DATALOADER)
        return {k.name: self._values[k.name] for k in SETTINGS if loader in k.loaders and self.applies(k)
                and not (k.omit_default and self._values[k.name] == k.default)}

    @property
    def key(self) -> str:
        """A stable name built from the parameters: one record per experiment."""
        tokens = (k.token(self._values[k.name]) for k in SETTINGS if self.applies(k))
        return "-".join(t for t in tokens if t)

    def replace(self, **changes: Any) -> "LoaderConfig":
        return LoaderConfig.make(**{**self._values, **changes})

    def cost(self) -> tuple:
        """Ordering for ties, by what a config costs over a whole run: each knob's ``cost`` in
        the order of ``tie_rank`` (fewer workers first); a knob that does not apply costs 0."""
        loader = self._values.get("loader", DATALOADER)
        return tuple(k.cost(self._values[k.name]) if self.applies(k) else 0 for k in SETTINGS.by_tie_rank()
                     if loader in k.loaders or (self.applies(k) and k.name != "loader"))


def _check_counts(knobs: Sequence[Knob], values: dict) -> None:
    # The knobs that apply always first: the others' ``when`` reads them.
    for k in knobs:
        if k.when is None and k.check is not None and k.name in values:
            k.check(values[k.name])


def _check(knobs: Sequence[Knob], values: dict) -> None:
    _check_counts(knobs, values)
    off = [k for k in knobs if not k.applies(values) and values[k.name] != k.default]
    if off:
        names = [k.name for k in off]
        rule = " and ".join(sorted({k.when.text for k in off}))
        raise usage(f"{', '.join(names)} {'needs' if len(off) == 1 else 'need'} {rule}",
                    {k.name: values[k.name] for k in off},
                    f"leave {'it' if len(off) == 1 else 'them'} at DataLoader's default when not {rule} "
                    "(LoaderConfig.make does this)")
    for k in knobs:
        if k.when is not None and k.check is not None and k.applies(values):
            k.check(values[k.name])


@dataclass(frozen=True, init=False)
class SearchSpace:
    """What may vary: ``batch_sizes``, the workers up to ``max_workers``, and each other knob's
    values (``choices`` by name, its domain here unless given: ``SearchSpace((16,), 8,
    pin_memory=(False,))``); ``unlocked``: the gate options the user opened."""

    batch_sizes: tuple[int, ...]
    max_workers: int
    choices: tuple[tuple[str, tuple], ...]
    unlocked: frozenset[str]

    def __init__(self, batch_sizes: Sequence[int], max_workers: int, *, unlocked: Sequence[str] = (),
                 **choices: Sequence):
        if not batch_sizes:
            raise usage("at least one batch size is needed", batch_sizes, "pass --batch-size N")
        for size in batch_sizes:
            check_batch_size(size)
        if max_workers < 0:
            raise usage("max_workers must be 0 or more", max_workers, "use a CPU count")
        varying = [k for k in SETTINGS if k.domain is not None]
        unknown = sorted(set(choices) - {k.name for k in varying})
        if unknown:
            raise usage("a search space's choices are for the knobs of the settings table", unknown,
                        f"pass choices for {', '.join(k.name for k in varying)}")
        here = context()
        object.__setattr__(self, "batch_sizes", tuple(batch_sizes))
        object.__setattr__(self, "max_workers", max_workers)
        object.__setattr__(self, "choices", tuple((k.name, tuple(choices[k.name]) if k.name in choices
                                                   else tuple(k.domain(here))) for k in varying))
        object.__setattr__(self, "unlocked", frozenset(unlocked))

    def capped(self, max_workers: int) -> "SearchSpace":
        """The same space with at most ``max_workers`` workers."""
        return SearchSpace(self.batch_sizes, min(self.max_workers, max_workers), unlocked=self.unlocked,
                           **dict(self.choices))

    def values(self, knob: Knob) -> Sequence:
        """Every value the space holds for ``knob``, its gate aside."""
        if knob is BATCH:
            return self.batch_sizes
        if knob is WORKERS:
            return range(self.max_workers + 1)
        return dict(self.choices).get(knob.name, (knob.first,))

    def offered(self, knob: Knob) -> Sequence:
        """The values the search may try: only the start of a knob whose gate is closed."""
        values = self.values(knob)
        if knob.gate is not None and knob.gate.option not in self.unlocked:
            return (knob.first,) if knob.first in values else tuple(values[:1])
        return values

    def first(self, knob: Knob) -> Any:
        offered = self.offered(knob)
        return knob.first if knob.first in offered else offered[0]

    def contains(self, config: LoaderConfig) -> bool:
        return all(config[k] in self.values(k) for k in SETTINGS if config.applies(k))

    def default_config(self, num_workers: int, batch_size: int | None = None) -> LoaderConfig:
        """Every knob but the workers at its start where the space offers it."""
        return LoaderConfig.make(batch_size=batch_size or self.batch_sizes[0], num_workers=num_workers,
                                 **{k.name: self.first(k) for k in SETTINGS if k.domain is not None})


def search_space(batch_sizes: Sequence[int], cpus: int, device: str, unlocked: Sequence[str] = (),
                 platform: str | None = None, start_method: str | None = None,
                 loader: str = DATALOADER) -> SearchSpace:
    """What a tuning run may vary on this machine: workers up to MAX_WORKERS_PER_CPU per CPU, each
    other knob over its domain here; ``unlocked``: the gates the user opened."""
    here = context(device, cpus, platform, start_method, loader)
    return SearchSpace(tuple(batch_sizes), MAX_WORKERS_PER_CPU * cpus, unlocked=unlocked,
                       **{k.name: tuple(k.domain(here)) for k in SETTINGS if k.domain is not None})


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """Parse ``--batch-sizes 64,128,256``."""
    fix = "write e.g. --batch-sizes 64,128,256"
    parts = [part.strip() for part in text.split(",")]
    while len(parts) > 1 and not parts[-1]:   # "16,32,": a trailing comma asks for nothing more
        parts.pop()
    if text.strip() and "" in parts:   # "16,,32": a size left out, not one fewer asked for
        raise usage("--batch-sizes takes comma-separated integers, none of them empty", text, fix)
    try:
        sizes = tuple(int(part) for part in parts if part)
    except ValueError:
        raise usage("--batch-sizes takes comma-separated integers", text, fix) from None
    if not sizes or any(s < 1 for s in sizes):
        raise usage("batch sizes must be positive integers", text, fix)
    return tuple(sorted(set(sizes)))
