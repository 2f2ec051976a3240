"""Copy-on-read growth of a worker's memory: the fit, the forecast over an epoch, the finding.

# NOTE [ Copy on read ]
# Rows held as Python objects make every forked worker copy the pages it reads: reading an object
# writes its reference count, and a write to a page shared with the main process gives the worker
# a private copy (PyTorch issue 13246). So a worker's USS grows with the share of the dataset it
# has read, all epoch long, up to a copy of the pages its reads touch. Arrays (numpy, torch, Arrow,
# one bytes buffer with offsets) have one object header per array: reading rows writes nothing.
#
# The profile measures it with two fresh workers made alike (probe/growth.py): the control reads
# the same few rows over and over, the reader a contiguous block of rows, then rows at random;
# what the reader gains over the control (whose own allocations grow alike) is what reading new
# rows copied.
# - The block copies each page it spans once: its growth per row, times the rows, is the ceiling
#   C, capped by the trial process's own memory for the dataset.
# - Rows read at random share pages with rows not read yet: copied(n) = C (1 - exp(-g n / C)), g
#   the growth per sample at the start; rows that fill pages of their own grow by row_bytes n, up
#   to C; the forecast takes the larger.
# Growth is found when the reader gained GROWTH_MIN_RISE or more over the control. Only anonymous
# pages are copies (NOTE [ Memory by kind ] in probe/pages.py): a mapped file's pages the reader
# gained are page cache, kept apart (``file_bytes``), said, and never forecast as growth.
#
# Over a run: a worker started afresh each epoch reads epoch_samples / num_workers and is gone
# with its copies; a kept worker reading a shuffled order reads another share each epoch and keeps
# what it copied, up to the ceiling. Read in order, it is handed the same batches every epoch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from .codec import Stored, stored
from .policy import GROWTH_MIN_RISE

CAUSE = ("the dataset's rows are Python objects: each worker copies the pages it reads, since "
         "reading an object writes its reference count")
FIX = "hold the rows as numpy arrays, Arrow, or a single bytes buffer with offsets, and the growth goes"
CAUSE_BESIDE_FILE = ("the workers' anonymous memory grows as they read, beside the mapped file's pages (which are "
                     "not copies): Python objects among the rows (reading one writes its reference count) or a "
                     "cache the dataset fills as it reads")
FIX_BESIDE_FILE = ("hold those objects as numpy arrays or Arrow, or bound the cache, and the growth goes; the mapped "
                   "file needs nothing")
MAPPED = ("pages of a memory-mapped file: the kernel's page cache, one copy shared by every process that maps "
          "it and reclaimed under pressure, not copies of the dataset; not forecast as growth, and nothing to change")


@dataclass(frozen=True)
class Growth(Stored):
    """What reading rows did to a worker's USS (NOTE [ Copy on read ]), and the curve ``fitted``
    to it."""

    flat_bytes: int             # the control's USS at the stage's end: a worker's own, reads aside
    base_bytes: int = stored(signed=True)   # the reader's gain after the block, where random reads start
    row_bytes: float            # growth per row read in order: what one row's pages hold
    block_rows: int             # rows the block read, in order
    length: int                 # rows of the dataset
    dataset_bytes: int | None = None   # the trial process's memory for the dataset, as built
    # (samples read at random, the reader's gain), and (samples a burst's worker read, its USS).
    points: tuple[tuple[int, int], ...] = stored((), signed=True)
    bursts: tuple[tuple[int, int], ...] = stored((), signed=True)
    per_sample_bytes: float = 0.0   # g: growth per sample read at random, at the start
    ceiling_bytes: int = 0          # C: a full copy of the pages reads touch
    # Where the readings end: the most samples read, what they had copied, and the growth per
    # sample read there (NOTE [ The latest rate goes on ]).
    last_samples: int = 0
    last_bytes: float = stored(0.0, signed=True)
    last_rate: float = stored(0.0, signed=True)
    seconds: float = 0.0            # the stage's wall time
    # The reader's gain in a mapped file's pages by its last reading, and the rows read then.
    file_bytes: int = 0
    file_samples: int = stored(0, then=("found", "rise_bytes", "samples", "maps_file"))

    def copies(self) -> list[tuple[int, float]]:
        """(samples read at random, bytes they copied): the reader's gain past the block (only
        the rest of the dataset counts), then each burst's workers over the control (erring high:
        their own allocations since)."""
        if not self.points:
            return []
        fresh = 1.0 - min(0.9, self.block_rows / max(1, self.length))
        n0 = self.points[0][0]
        stage = [(n - n0, (u - self.base_bytes) / fresh) for n, u in self.points]
        return stage + [(n, float(u - self.flat_bytes)) for n, u in self.bursts]

    @property
    def rise_bytes(self) -> int:
        """The random reads' growth: the lower of the last two readings (one noisy reading does
        not decide)."""
        stage = [c for _, c in self.copies()[:len(self.points)]]
        return int(max(0.0, min(stage[-2:]))) if len(stage) >= 3 else 0

    @property
    def samples(self) -> int:
        return max((n for n, _ in self.copies()), default=0)

    @property
    def found(self) -> bool:
        return self.rise_bytes >= GROWTH_MIN_RISE and self.per_sample_bytes > 0

    @property
    def maps_file(self) -> bool:
        return self.file_bytes >= GROWTH_MIN_RISE

    def mapped_text(self) -> str | None:
        if not self.maps_file:
            return None
        per = self.file_bytes / max(1, self.file_samples)
        return (f"a worker's memory grew by {self.file_bytes / 2**20:,.0f} MiB as it read {self.file_samples:,} "
                f"samples ({per / 2**10:,.1f} KiB a sample): {MAPPED}")

    def fitted(self) -> "Growth":
        """Fitted to its readings: the ceiling is the block's (within the dataset's memory), raised
        never lowered by readings that copied more."""
        copies = self.copies()
        seen = max((c for _, c in copies), default=0.0)
        block = self.row_bytes * self.length
        if self.dataset_bytes and self.dataset_bytes >= 1.02 * seen:
            block = min(block, self.dataset_bytes)
        ceiling = max(block, 1.02 * seen, 1.0)
        useful = sorted((n, c) for n, c in copies if n > 0)
        if not useful or seen <= 0:
            return dataclasses.replace(self, per_sample_bytes=0.0, ceiling_bytes=int(ceiling))
        slope = max(1e-9, sum(n * c for n, c in useful) / sum(n * n for n, _ in useful))
        g = _fit_rate(useful, ceiling, slope)[0]
        # NOTE [ The latest rate goes on ]: past the readings growth goes on at the rate of their
        # later half (a line fitted over it), not the first reads'. A row's small objects share
        # pages with other rows (copied early, then no more), its large ones fill their own
        # (copied row by row all epoch); so the shared part goes on falling at the pace it fell
        # between the two, toward the rows' own pages (Growth._beyond).
        last = useful[-1][0]
        late = [(n, c) for n, c in useful if n >= last / 2]
        rate, at = _line(late if len(late) >= 2 else useful[-2:], last)
        return dataclasses.replace(self, per_sample_bytes=g, ceiling_bytes=int(ceiling), last_samples=int(last),
                                   last_bytes=min(max(0.0, at), 0.99 * ceiling), last_rate=min(max(0.0, rate), g))

    def with_bursts(self, bursts) -> "Growth":
        """Refitted with ``bursts``: (samples a burst's worker read, its USS less batches held)."""
        bursts = tuple(sorted((int(n), int(u)) for n, u in bursts if n > 0))
        return self if bursts == self.bursts or not self.found else _refit(self, bursts)

    def copied(self, samples: float, shuffled: bool = True) -> float:
        """Bytes a worker copied once it read ``samples`` (NOTE [ The latest rate goes on ]): never
        less than its rows' own bytes, which alone count read in order."""
        if not self.found or samples <= 0:
            return 0.0
        ceiling = float(self.ceiling_bytes)
        linear = min(ceiling, self.row_bytes * samples)
        if not shuffled:
            return linear
        def first(n: float) -> float:
            return ceiling * (1.0 - math.exp(-self.per_sample_bytes * n / ceiling))

        if self.last_samples <= 0:
            curve = first(samples)
        elif samples <= self.last_samples:   # the first reads' curve, through the last reading
            curve = first(samples) * self.last_bytes / max(1.0, first(self.last_samples))
        else:
            curve = self.last_bytes + self._beyond(samples - self.last_samples)
        return max(linear, min(ceiling, curve))

    def _beyond(self, past: float) -> float:
        """Bytes copied by ``past`` samples after the last reading: the rows' own pages plus the
        shared part falling on from the first reads' rate to the later half's (taken at three
        quarters of the readings); with no fall, slowing only as the ceiling nears."""
        own = min(self.row_bytes, self.last_rate)
        early, late = self.per_sample_bytes - own, self.last_rate - own
        if late > 0 and early > late * 1.01:
            tau = 0.75 * self.last_samples / math.log(early / late)
            shared = late * math.exp(-0.25 * self.last_samples / tau)
            return own * past + shared * tau * (1.0 - math.exp(-past / tau))
        room = max(1.0, self.ceiling_bytes - self.last_bytes)
        return room * (1.0 - math.exp(-self.last_rate * past / room))

    def run_copied(self, epoch_samples: int, workers: int, persistent: bool, shuffled: bool = True) -> float:
        """Bytes each worker holds copied at its peak over a run (NOTE [ Copy on read ])."""
        if not workers or not self.found:
            return 0.0
        if persistent and shuffled:
            return float(self.ceiling_bytes)
        return self.copied(epoch_samples / workers, shuffled)


@functools.lru_cache(maxsize=64)
def _refit(growth: Growth, bursts: tuple[tuple[int, int], ...]) -> Growth:
    return dataclasses.replace(growth, bursts=bursts).fitted()


def fit_growth(points, block_rows: int, block_rise: int, flat_bytes: int, length: int,
               dataset_bytes: int | None = None, seconds: float = 0.0) -> Growth:
    """The growth behind the profile's ``points`` (samples read at random, the reader's USS less
    the control's) after a block of ``block_rows`` rows that grew it by ``block_rise``."""
    pts = tuple(sorted((int(n), int(u)) for n, u in points))
    row_bytes = max(0.0, block_rise / block_rows) if block_rows > 0 else 0.0
    base = pts[0][1] if pts else int(flat_bytes)
    return Growth(int(flat_bytes), base, row_bytes, int(block_rows), int(length), dataset_bytes, pts,
                  seconds=seconds).fitted()


def _line(points, at: float) -> tuple[float, float]:
    mean_n = sum(n for n, _ in points) / len(points)
    mean_c = sum(c for _, c in points) / len(points)
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    slope = sum((n - mean_n) * (c - mean_c) for n, c in points) / spread if spread else 0.0
    return slope, mean_c + slope * (at - mean_n)


def _fit_rate(copies, ceiling: float, slope: float) -> tuple[float, float]:
    """The least-squares g of copied(n) = ceiling (1 - exp(-g n / ceiling)), and its error: a
    coarse search around the line's slope, then a golden section."""
    def sse(g: float) -> float:
        return sum((c - ceiling * (1.0 - math.exp(-g * n / ceiling))) ** 2 for n, c in copies)

    grid = [slope * 10 ** (-1.0 + 3.0 * i / 60) for i in range(61)]
    errors = [sse(g) for g in grid]
    best = min(range(len(grid)), key=errors.__getitem__)
    lo, hi = math.log(grid[max(0, best - 1)]), math.log(grid[min(len(grid) - 1, best + 1)])
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if sse(math.exp(a)) < sse(math.exp(b)):
            hi = b
        else:
            lo = a
    g = math.exp((lo + hi) / 2.0)
    return g, sse(g)


@dataclass(frozen=True)
class GrowthFinding(Stored):
    """Growth found, for a config: the cause, the fix and what the fix would save."""

    workers: int
    per_worker_bytes: int       # what each worker copies over the run
    saved_bytes: int            # workers x that
    per_sample_bytes: float
    ceiling_bytes: int
    cause: str = CAUSE
    fix: str = FIX


def growth_finding(data) -> GrowthFinding | None:
    """The growth finding of a tuned result (its ``memory``) or a MemoryForecast, or None."""
    forecast = data.memory if hasattr(data, "memory") else data
    if forecast is None or forecast.growth is None or not forecast.growth.found or not forecast.copied_bytes:
        return None
    return GrowthFinding(forecast.workers, forecast.copied_bytes, forecast.workers * forecast.copied_bytes,
                         forecast.growth.per_sample_bytes, forecast.growth.ceiling_bytes,
                         *((CAUSE_BESIDE_FILE, FIX_BESIDE_FILE) if forecast.growth.maps_file else (CAUSE, FIX)))
