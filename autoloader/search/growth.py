"""Copy-on-read growth of a worker's memory: the fit, the forecast over an epoch, the finding.

# NOTE [ Copy on read ]
# A dataset that holds its rows as Python objects (lists of dicts, strings, floats) makes every
# forked worker copy the pages it reads: reading an object writes its reference count, and a
# write to a page the worker shares with the main process gives the worker a private copy of
# that page (copy on write; PyTorch issue 13246). So a worker's private memory (USS) grows with
# the share of the dataset it has read, all epoch long, up to a full copy of the pages its reads
# touch; a burst of a few seconds sees only the start of it. Arrays (numpy, torch, Arrow
# buffers, one bytes buffer with offsets) have one object header per array, not per row:
# reading rows from them writes nothing, and nothing grows.
#
# The profile measures it with two fresh workers made alike (probe/growth.py): the control reads
# the same few rows batch after batch, the reader a contiguous block of rows, then rows at
# random, and their USS is read side by side against the rows the reader fetched. A worker's
# own allocations also land on pages it shares with the main process (free memory left in the
# main process's heap), so its USS grows for a while whatever it reads; the control grows alike,
# and what the reader gains over it is what reading new rows copied.
# - Rows built in order lie side by side in memory, so the block copies each page it spans
#   once: its growth per row, times the rows, is the ceiling C (a full copy of what reads
#   touch), capped by the trial process's own memory for the dataset.
# - Rows read at random share pages with rows not read yet, so the first reads copy pages of
#   their own and later ones fewer: copied(n) = C (1 - exp(-g n / C)), g the growth per sample
#   read at the start. Rows that fill pages of their own grow by their own bytes, row_bytes n,
#   up to C; the forecast takes the larger of the two.
# The control's USS is the flat part, a worker's own whatever it reads. Growth is found when the
# reader gained GROWTH_MIN_RISE (policy.py) or more over the control.
# Only anonymous pages are copies (NOTE [ Memory by kind ] in probe/pages.py): the readings'
# gains are the reader's anonymous pages over the control's. A dataset read from a mapped file
# (np.memmap, Arrow) grows a reader's USS by the file's pages it read, which are the kernel's
# page cache, shared and reclaimable: that gain is kept apart (``file_bytes``), said, and never
# forecast as growth, and reading such rows writes nothing, so no fix is due.
#
# Over a run: a worker started afresh each epoch (persistent_workers=False) reads its share of
# one epoch, epoch_samples / num_workers, and is gone with what it copied; a kept worker reads
# another share each epoch (a shuffled order) and keeps what it copied, so over a long run it
# holds the ceiling. Read in order, a kept worker is handed the same batches every epoch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from .codec import Stored, stored
from .policy import GROWTH_MIN_RISE

# What the finding says (the explain report and the table name it).
CAUSE = ("the dataset's rows are Python objects: each worker copies the pages it reads, since "
         "reading an object writes its reference count")
FIX = "hold the rows as numpy arrays, Arrow, or a single bytes buffer with offsets, and the growth goes"
# Anonymous growth beside a mapped file's pages: the file is not what grows.
CAUSE_BESIDE_FILE = ("the workers' anonymous memory grows as they read, beside the mapped file's pages (which are "
                     "not copies): Python objects among the rows (reading one writes its reference count) or a "
                     "cache the dataset fills as it reads")
FIX_BESIDE_FILE = ("hold those objects as numpy arrays or Arrow, or bound the cache, and the growth goes; the mapped "
                   "file needs nothing")
# What a mapped file's pages are, where the readers' grew by them (NOTE [ Memory by kind ]).
MAPPED = ("pages of a memory-mapped file: the kernel's page cache, one copy shared by every process that maps "
          "it and reclaimed under pressure, not copies of the dataset; not forecast as growth, and nothing to change")


@dataclass(frozen=True)
class Growth(Stored):
    """What reading rows did to a worker's private memory (NOTE [ Copy on read ]), as the
    profile's two workers showed it: the reader's USS above the control's, against the rows the
    reader read; ``per_sample_bytes`` and ``ceiling_bytes`` fitted to it (``fitted``)."""

    flat_bytes: int             # the control's USS at the stage's end: a worker's own, reads aside
    # The reader's gain over the control after the block, where random reads start.
    base_bytes: int = stored(signed=True)
    row_bytes: float            # growth per row read in order: what one row's pages hold
    block_rows: int             # rows the block read, in order
    length: int                 # rows of the dataset
    dataset_bytes: int | None = None   # the trial process's memory for the dataset, as built
    # (samples read at random, the reader's gain) as measured, and (samples a burst's worker
    # read, its USS less batches held).
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
    # The reader's gain over the control in a mapped file's pages by its last reading, and the
    # rows it had read then: page cache, not copies (NOTE [ Memory by kind ] in probe/pages.py).
    file_bytes: int = 0
    file_samples: int = stored(0, then=("found", "rise_bytes", "samples", "maps_file"))

    def copies(self) -> list[tuple[int, float]]:
        """(samples read at random, bytes they copied), as measured: the reader's gain above
        where its random reads started (rows of the block were copied already, so only the rest
        of the dataset counts), then each burst's workers above the control. A burst's worker
        also holds what its own allocations copied since (the control saw the start of that), so
        its reading errs high: a forecast fitted to it errs on the side of more memory."""
        if not self.points:
            return []
        fresh = 1.0 - min(0.9, self.block_rows / max(1, self.length))
        n0 = self.points[0][0]
        stage = [(n - n0, (u - self.base_bytes) / fresh) for n, u in self.points]
        return stage + [(n, float(u - self.flat_bytes)) for n, u in self.bursts]

    @property
    def rise_bytes(self) -> int:
        """How far the random reads grew the reader past the control: the lower of its last two
        readings, so that one noisy reading does not decide whether growth was found."""
        stage = [c for _, c in self.copies()[:len(self.points)]]
        return int(max(0.0, min(stage[-2:]))) if len(stage) >= 3 else 0

    @property
    def samples(self) -> int:
        """The most samples a reading stands for."""
        return max((n for n, _ in self.copies()), default=0)

    @property
    def found(self) -> bool:
        return self.rise_bytes >= GROWTH_MIN_RISE and self.per_sample_bytes > 0

    @property
    def maps_file(self) -> bool:
        """The reader's USS grew by a mapped file's pages (said apart, never forecast)."""
        return self.file_bytes >= GROWTH_MIN_RISE

    def mapped_text(self) -> str | None:
        """What the mapped file's pages are, in words, where the reader's grew by them."""
        if not self.maps_file:
            return None
        per = self.file_bytes / max(1, self.file_samples)
        return (f"a worker's memory grew by {self.file_bytes / 2**20:,.0f} MiB as it read {self.file_samples:,} "
                f"samples ({per / 2**10:,.1f} KiB a sample): {MAPPED}")

    def fitted(self) -> "Growth":
        """This growth with ``per_sample_bytes``, ``ceiling_bytes`` and where its readings end
        fitted to them. The ceiling is the block's (its bytes a row, times the rows, within the
        dataset's own memory); readings that copied more raise it, never lower it: a burst's
        reading errs high (its worker's own allocations), so it may not bend the curve under
        what the block showed."""
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
        # NOTE [ The latest rate goes on ]: the growth past the readings goes on at the rate of
        # their later half (a straight line fitted over it), not the first reads' rate. A row's
        # objects lie in pages of several kinds: its small objects share pages with many other
        # rows (copied within the first reads, then no more), its large ones fill pages of their
        # own (copied row by row all epoch). The first reads' rate holds both kinds; the later
        # one fewer of the shared, as more of them are copied already. Past the readings the
        # shared part goes on falling at the pace it fell between the two, toward the rows' own
        # pages (Growth._beyond); held at the later half's rate, the line overstates an epoch.
        last = useful[-1][0]
        late = [(n, c) for n, c in useful if n >= last / 2] or useful[-2:]
        if len(late) < 2:
            late = useful[-2:]
        rate, at = _line(late, last)
        return dataclasses.replace(self, per_sample_bytes=g, ceiling_bytes=int(ceiling), last_samples=int(last),
                                   last_bytes=min(max(0.0, at), 0.99 * ceiling), last_rate=min(max(0.0, rate), g))

    def with_bursts(self, bursts) -> "Growth":
        """Refitted with the bursts' workers, ``bursts``: (samples each read, its USS less the
        batches it held)."""
        bursts = tuple(sorted((int(n), int(u)) for n, u in bursts if n > 0))
        return self if bursts == self.bursts or not self.found else _refit(self, bursts)

    def copied(self, samples: float, shuffled: bool = True) -> float:
        """Bytes a worker has copied once it read ``samples`` samples (0 when no growth was found):
        up to the last reading, the curve of the first reads' rate through it; past it, that reading's
        copies and its rate going on, slowing as the ceiling nears (NOTE [ The latest rate goes
        on ]); never less than its rows' own bytes. In order, only its rows' own bytes."""
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
        """Bytes copied by ``past`` samples read after the last reading (NOTE [ The latest rate
        goes on ]). The rate is a row's own pages (``row_bytes``, copied row by row all epoch)
        plus the shared pages' part, which fell from the first reads' rate to the later half's
        (taken at three quarters of the readings) and goes on falling at that pace; without a
        fall to go by, the latest rate slows only as the ceiling nears."""
        own = min(self.row_bytes, self.last_rate)
        early, late = self.per_sample_bytes - own, self.last_rate - own
        if late > 0 and early > late * 1.01:
            tau = 0.75 * self.last_samples / math.log(early / late)
            shared = late * math.exp(-0.25 * self.last_samples / tau)
            return own * past + shared * tau * (1.0 - math.exp(-past / tau))
        room = max(1.0, self.ceiling_bytes - self.last_bytes)
        return room * (1.0 - math.exp(-self.last_rate * past / room))

    def run_copied(self, epoch_samples: int, workers: int, persistent: bool, shuffled: bool = True) -> float:
        """Bytes each worker holds copied at its peak over a run: one epoch's share for workers
        started afresh each epoch, the ceiling for kept workers reading a shuffled order."""
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
    """The growth behind the profile's readings (NOTE [ Copy on read ]): ``points``, (samples the
    reader read at random, its USS less the control's), after a contiguous block of
    ``block_rows`` rows that grew that gap by ``block_rise``; ``flat_bytes`` the control's USS."""
    pts = tuple(sorted((int(n), int(u)) for n, u in points))
    row_bytes = max(0.0, block_rise / block_rows) if block_rows > 0 else 0.0
    base = pts[0][1] if pts else int(flat_bytes)
    return Growth(int(flat_bytes), base, row_bytes, int(block_rows), int(length), dataset_bytes, pts,
                  seconds=seconds).fitted()


def _line(points, at: float) -> tuple[float, float]:
    """The least-squares line through ``points``: its slope, and its value at ``at``."""
    mean_n = sum(n for n, _ in points) / len(points)
    mean_c = sum(c for _, c in points) / len(points)
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    slope = sum((n - mean_n) * (c - mean_c) for n, c in points) / spread if spread else 0.0
    return slope, mean_c + slope * (at - mean_n)


def _fit_rate(copies, ceiling: float, slope: float) -> tuple[float, float]:
    """The g of copied(n) = ceiling (1 - exp(-g n / ceiling)) that fits ``copies`` best (least
    squares), and its squared error: a coarse search over g around the straight line's slope,
    then a golden section in the best bracket."""
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
    """Growth found, for a config: the cause, the fix and what the fix is predicted to save
    (the copies its workers make over the run: arrays are not copied by reading them)."""

    workers: int
    per_worker_bytes: int       # what each worker copies over the run
    saved_bytes: int            # workers x that
    per_sample_bytes: float
    ceiling_bytes: int
    cause: str = CAUSE
    fix: str = FIX


def growth_finding(data) -> GrowthFinding | None:
    """The growth finding of a tuned result (its pick's forecast, ``memory``) or of a
    MemoryForecast; None when no growth was found. Pure: what the explain report names."""
    forecast = data.memory if hasattr(data, "memory") else data
    if forecast is None or forecast.growth is None or not forecast.growth.found or not forecast.copied_bytes:
        return None
    return GrowthFinding(forecast.workers, forecast.copied_bytes, forecast.workers * forecast.copied_bytes,
                         forecast.growth.per_sample_bytes, forecast.growth.ceiling_bytes,
                         *_advice(forecast.growth.maps_file))


def _advice(maps_file: bool) -> tuple[str, str]:
    """The finding's cause and fix, by the kind of pages the readers gained (NOTE [ Memory by kind ])."""
    return (CAUSE_BESIDE_FILE, FIX_BESIDE_FILE) if maps_file else (CAUSE, FIX)
