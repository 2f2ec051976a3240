"""The worker start methods as the profile measured them, and what the report says about them.

# NOTE [ What a start method costs ]
# A fork worker is a copy of the loop's process: it starts in tens of milliseconds and shares
# every page until one is written, so it grows as it reads Python-object rows (NOTE [ Copy on
# read ] in growth.py). A spawn worker is a fresh interpreter that unpickles its own copy of the
# dataset (seconds), holds it from its start and copies nothing more; forkserver's workers fork
# from a server started once, so they start sooner than spawn's and hold their own dataset too.
# So the profile (the gate open: NOTE [ The start method as a knob ] in settings.py) starts, per
# method, a loader of one worker and one of two, timed from iter() to the first batch, and reads
# the workers' memory after their first batches and again after random reads (``MethodCost``).
# The default method's copy on read is the growth stage's; another method's rise counts only past
# GROWTH_MIN_RISE (less is the allocator settling). The model adds each method's start-up over
# the default's to a config's epoch restarts, and the memory forecast takes a worker's memory
# from these figures (memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .codec import Stored, stored
from .policy import GROWTH_MIN_RISE

__all__ = ["MethodCost", "MethodRow", "StartChoice", "method_cost"]


@dataclass(frozen=True)
class MethodCost(Stored):
    """One start method's figures, measured with fresh workers (NOTE [ What a start method costs ])."""

    method: str
    default: bool                         # the loop's own (a config's None)
    startup: tuple[tuple[int, float], ...]  # (workers, iter() to the first batch less its work, s)
    worker_uss_bytes: int                 # one worker's USS once it made its first batches
    worker_pss_bytes: int                 # the same in PSS (the guard's measure)
    rise_bytes: int = 0                   # its anonymous memory's rise over the random reads
    rise_samples: int = 0                 # the samples a worker read over them
    seconds: float = 0.0

    def startup_s(self, workers: int) -> float:
        """Fresh workers' start-up at ``workers``: the line through the loaders measured."""
        if workers <= 0 or not self.startup:
            return 0.0
        points = sorted(self.startup)
        if len(points) == 1 or points[-1][0] == points[0][0]:
            return max(0.0, points[0][1])
        (n0, s0), (n1, s1) = points[0], points[-1]
        per = max(0.0, (s1 - s0) / (n1 - n0))
        return max(0.0, s0 + per * (workers - n0))

    @property
    def per_sample_bytes(self) -> float:
        """Growth per sample read, where the readings rose past GROWTH_MIN_RISE."""
        if self.rise_bytes < GROWTH_MIN_RISE or self.rise_samples <= 0:
            return 0.0
        return self.rise_bytes / self.rise_samples

    def copied(self, samples: float) -> float:
        return self.per_sample_bytes * max(0.0, samples)


def method_cost(costs: Sequence[MethodCost], value: str | None) -> MethodCost | None:
    """The figures of a config's ``multiprocessing_context`` value (None: the default's)."""
    for c in costs:
        if (c.default if value is None else c.method == value):
            return c
    return None


@dataclass(frozen=True)
class MethodRow(Stored):
    """The pick's config under one start method: a worker's USS at an epoch's end (None: not
    forecast), the tree's forecast, the workers' start-up, and whether it fits."""

    method: str
    worker_bytes: int | None
    host_bytes: int
    startup_s: float
    fits: bool
    copied_bytes: int = 0     # of worker_bytes: what it copied of the dataset by the epoch's end


@dataclass(frozen=True)
class StartChoice(Stored):
    """Which start method the pick uses and why: the rows per method, or the user's own (``given``)."""

    chosen: str
    default: str
    given: bool
    workers: int
    persistent: bool
    rows: tuple[MethodRow, ...] = stored((), after="at")
    python_rows: bool = False     # the growth finding's: the rows are Python objects
    at: str = ""                  # whose workers the rows are for, when not the pick's (the cpus-1 rule)

    def row(self, method: str) -> MethodRow | None:
        return next((r for r in self.rows if r.method == method), None)

    def lines(self) -> list[str]:
        """The report's words: each method's worker, the others' start-up, the one the data needs."""
        if self.given:
            return [f"{self.chosen}, as the loader's multiprocessing_context sets it (honoured, not searched)"]
        if not self.rows:
            return []
        gib = lambda n: f"{n / 2**30:.1f} GiB" if n >= 2**30 / 10 else f"{n / 2**20:.0f} MiB"  # noqa: E731
        memory = [f"{r.method}: {gib(r.worker_bytes)}" for r in self.rows if r.worker_bytes is not None]
        whose = f" ({self.at}'s {self.workers} worker{'s' if self.workers != 1 else ''})" if self.at else ""
        first = (f"{', '.join(memory)} a worker at the epoch's end{whose}" if memory else "")
        quickest = min(self.rows, key=lambda r: r.startup_s)
        when = "a run with persistent workers" if self.persistent else "every epoch (workers not kept)"
        costs = [f"{r.method} costs {r.startup_s - quickest.startup_s:.1f} s of start-up {when}"
                 for r in self.rows if r.method != quickest.method and r.startup_s - quickest.startup_s >= 0.05]
        lines = ["; ".join(p for p in (first, ", ".join(costs)) if p)] if (first or costs) else []
        chosen, default = self.row(self.chosen), self.row(self.default)
        if chosen is not None and default is not None and chosen.method != default.method:
            why = (f"{default.method} does not fit the memory limit ({gib(default.host_bytes)} forecast)"
                   if not default.fits else f"{chosen.method} was measured faster at {self.workers} workers")
            lines.append(f"the data needs {chosen.method}: {why}")
        elif chosen is not None:
            lighter = [r for r in self.rows if r.method != chosen.method and r.worker_bytes is not None
                       and chosen.worker_bytes is not None and r.worker_bytes < chosen.worker_bytes]
            if lighter and self.python_rows:
                lines.append(f"{chosen.method} it is: it fits, and starts quicker; "
                             f"{', '.join(r.method for r in lighter)} would hold less a worker, "
                             "for a machine with less memory")
            else:
                lines.append(f"{chosen.method} it is: it fits" +
                             (" and starts quickest" if chosen.method == quickest.method else ""))
        shared = self.shared_buffer()
        if shared:
            lines.append(shared)
        return lines

    def shared_buffer(self) -> str | None:
        """The what-if of a shared buffer where the rows are Python objects (NOTE [ Copy on read ])."""
        default = self.row(self.default)
        if not self.python_rows or default is None or default.worker_bytes is None or default.copied_bytes <= 0:
            return None
        flat = default.worker_bytes - default.copied_bytes
        mib = lambda n: f"{n / 2**20:,.0f} MiB"  # noqa: E731
        return (f"what if the rows were a shared buffer (numpy arrays or Arrow, not Python objects): "
                f"{default.method}'s workers would copy none of them, {mib(flat)} a worker at the epoch's end instead of "
                f"{mib(default.worker_bytes)} ({mib(self.workers * default.copied_bytes)} less over "
                f"{self.workers} worker{'s' if self.workers != 1 else ''}), with {default.method}'s start-up")

