"""The search space: DataLoader configurations and the pure functions that enumerate them.

Nothing here measures or imports torch; every function is pure so the search strategy
and the tests can reason about candidates without running them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from ..errors import usage
from .policy import MAX_WORKERS_PER_CPU

# Up to 16: a deep queue lets the other workers run on while a slow batch holds the head of
# the in-order queue; memory decides whether it fits (the guard predicts every config).
PREFETCH_CHOICES: tuple[int, ...] = (2, 4, 8, 16)


def check_batch_size(size: object, fix: str = "pass --batch-size 1 or more, e.g. 128") -> int:
    """The one check of a batch size: a positive integer (a bool is no count)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise usage("the batch size must be a positive integer", size, fix)
    return size


@dataclass(frozen=True, order=True)
class LoaderConfig:
    """One point of the space: the DataLoader keyword arguments autoloader tunes.

    DataLoader's own rule applies: ``prefetch_factor`` and ``persistent_workers`` only mean
    something when ``num_workers > 0``, so they are ``None``/``False`` otherwise.
    """

    batch_size: int
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    # False lets a worker's finished batch overtake a slow one ahead of it (DataLoader's
    # in_order): it changes the order of batches, so it is tried only when the user allows it.
    in_order: bool = True

    def __post_init__(self) -> None:
        check_batch_size(self.batch_size)
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise usage("num_workers must be 0 or more", self.num_workers, "use 0 or a positive count")
        if self.num_workers == 0 and not self.in_order:
            raise usage("in_order=False needs num_workers > 0", self.in_order,
                        "leave in_order at True when num_workers is 0 (LoaderConfig.make does this)")
        if self.num_workers == 0 and (self.prefetch_factor is not None or self.persistent_workers):
            raise usage("prefetch_factor and persistent_workers need num_workers > 0",
                        (self.prefetch_factor, self.persistent_workers),
                        "leave them unset when num_workers is 0 (LoaderConfig.make does this)")
        if self.num_workers > 0 and (self.prefetch_factor is None or self.prefetch_factor < 1):
            raise usage("prefetch_factor must be 1 or more when num_workers > 0",
                        self.prefetch_factor, "use 2 (DataLoader's default) or more")

    @classmethod
    def make(cls, batch_size: int, num_workers: int, pin_memory: bool,
             prefetch_factor: int | None = 2, persistent_workers: bool = True, in_order: bool = True) -> "LoaderConfig":
        """Build a valid config, dropping the worker-only settings when there are no workers."""
        if num_workers == 0:
            return cls(batch_size, 0, pin_memory, None, False, True)
        return cls(batch_size, num_workers, pin_memory, prefetch_factor or 2, persistent_workers, in_order)

    @classmethod
    def from_dict(cls, data: dict) -> "LoaderConfig":
        """The config a ``loader_kwargs()`` or ``to_dict()`` mapping describes (the one way back)."""
        return cls.make(data["batch_size"], data["num_workers"], data["pin_memory"],
                        data.get("prefetch_factor"), data.get("persistent_workers", False), data.get("in_order", True))

    def to_dict(self) -> dict:
        """Every field, worker-only ones included (None/False without workers): the stored form."""
        return dataclasses.asdict(self)

    def loader_kwargs(self) -> dict:
        """The keyword arguments to pass to ``torch.utils.data.DataLoader``."""
        kwargs = {"batch_size": self.batch_size, "num_workers": self.num_workers,
                  "pin_memory": self.pin_memory}
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
            if not self.in_order:
                kwargs["in_order"] = False
        return kwargs

    @property
    def key(self) -> str:
        """A stable name built from the parameters: one record per experiment."""
        name = f"bs{self.batch_size}-w{self.num_workers}-pin{int(self.pin_memory)}"
        if self.num_workers:
            name += f"-pf{self.prefetch_factor}-pw{int(self.persistent_workers)}"
            if not self.in_order:
                name += "-ooo"
        return name

    def replace(self, **changes) -> "LoaderConfig":
        merged = {**dataclasses.asdict(self), **changes}
        return LoaderConfig.make(**merged)

    def cost(self) -> tuple:
        """Ordering for ties, by what a config costs over a whole run: fewer worker processes,
        shallower prefetch (memory in flight), no pinning (page-locked memory), then kept
        workers, since fresh ones pay their start-up again every epoch, and batches in order."""
        return (self.num_workers, self.prefetch_factor or 0, int(self.pin_memory),
                int(not self.persistent_workers) if self.num_workers else 0, int(not self.in_order),
                self.batch_size)


# The DataLoader settings autoloader tunes, in LoaderConfig's order.
TUNED_SETTINGS = tuple(f.name for f in dataclasses.fields(LoaderConfig))


@dataclass(frozen=True)
class SearchSpace:
    """What may vary. ``batch_sizes`` has one value unless the user asked to search it."""

    batch_sizes: tuple[int, ...]
    max_workers: int
    pin_choices: tuple[bool, ...]
    prefetch_choices: tuple[int, ...] = PREFETCH_CHOICES
    persistent_choices: tuple[bool, ...] = (True, False)

    def __post_init__(self) -> None:
        if not self.batch_sizes:
            raise usage("at least one batch size is needed", self.batch_sizes, "pass --batch-size N")
        for size in self.batch_sizes:
            check_batch_size(size)
        if self.max_workers < 0:
            raise usage("max_workers must be 0 or more", self.max_workers, "use a CPU count")

    def contains(self, config: LoaderConfig) -> bool:
        return (config.batch_size in self.batch_sizes and config.num_workers <= self.max_workers
                and config.pin_memory in self.pin_choices
                and (config.num_workers == 0 or (config.prefetch_factor in self.prefetch_choices
                                                 and config.persistent_workers in self.persistent_choices)))

    def default_config(self, num_workers: int, batch_size: int | None = None) -> LoaderConfig:
        """The config the worker sweep uses: DataLoader's prefetch default, kept workers, and
        pinning when pinning is on the table (it is only offered for a CUDA device)."""
        return LoaderConfig.make(batch_size or self.batch_sizes[0], num_workers,
                                 pin_memory=max(self.pin_choices), prefetch_factor=2,
                                 persistent_workers=max(self.persistent_choices))


def search_space(batch_sizes: Sequence[int], cpus: int, device: str) -> SearchSpace:
    """What a tuning run may vary on this machine: workers up to MAX_WORKERS_PER_CPU per CPU, and
    pinning both ways on CUDA (it only matters there)."""
    return SearchSpace(batch_sizes=tuple(batch_sizes), max_workers=MAX_WORKERS_PER_CPU * cpus,
                       pin_choices=(True, False) if device.startswith("cuda") else (False,))


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
