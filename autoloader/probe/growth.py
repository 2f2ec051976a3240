"""Measuring copy on read in the trial process (NOTE [ Copy on read ] in search/growth.py): the
dataset's memory as built, two fresh workers' memory against the rows one of them read (the
profile's growth stage), and a burst's workers at its end; only anonymous pages count as copies
(NOTE [ Memory by kind ] in probe/pages.py). Before the stage, what the dataset's memory is
held in: large buffers, which forked workers read without copying, or objects, which they copy.
After it, where the start method's gate is open, each start method's start-up and memory.

# NOTE [ A heap of buffers copies nothing ]
# The growth stage runs two workers for seconds to see whether reading rows copies pages. Reading
# a row writes the reference count of each object it touches; a row of a numpy array, a tensor or
# one bytes buffer touches one header for the whole array, never the buffer's pages. So where the
# heap the dataset added (``dataset_bytes``) is, but for less than GROWTH_MIN_DATASET, in such
# buffers, the stage has nothing to find and is not run. ``held_in`` walks the objects reachable
# from the dataset, never into classes, modules or functions (they reach the whole interpreter),
# and counts each buffer once by its owner. It gives up (the stage then runs) past WALK_LIMIT
# objects, on a numpy array of objects, and on a mapped file (np.memmap, mmap: NOTE [ Memory by
# kind ] in pages.py).
"""

from __future__ import annotations

import dataclasses
import gc
import mmap
import random
import sys
import time
import types
from dataclasses import dataclass
from typing import Callable, Sequence

from ..search.growth import Growth, fit_growth
from ..search.methods import MethodCost
from ..search.policy import GROWTH_MIN_DATASET
from .pages import Pages, private_pages
from .workers import pss

# The stage's most seconds, both phases; the contiguous block's share of them.
GROWTH_SECONDS = 2.5
BLOCK_SHARE = 0.4
# Samples a batch of the stage's loader: small, so the USS readings lie close together, and
# small in bytes (the batch the worker is making is its own memory until the loop maps it).
STAGE_BATCH = 32
STAGE_BYTES = 2**20
# Batches a fresh worker makes before the block's first reading.
WARM_BATCHES = 4
# USS readings over the random phase (each reads the worker's smaps, tens of ms).
READINGS = 8
# Rows each phase may draw, at the most (a list of them is made up front).
MAX_ROWS = 2**18
# A dataset shorter than this many stage batches is read whole by any burst: no stage.
MIN_BATCHES = 32
# Workers of a burst whose USS is read at its end: a few stand for all (each read is tens of ms).
BURST_WORKERS = 4


def anonymous_bytes(pid: int | str = "self") -> int | None:
    """A process's anonymous memory (its heap: what a forked worker can come to copy); None where
    the kernel has no smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class _Phases:
    """The stage's sampler: even batches (the control worker's) read the ``control`` rows every
    time, odd ones (the reader's) the block's rows in order until ``switch``, then random rows
    (indices are drawn as a task is handed out: every task after a switch is random)."""

    def __init__(self, control: list[int], block: range, others: list[int], batch: int):
        self.control = control
        self.block = [block[i:i + batch] for i in range(0, len(block) - batch + 1, batch)]
        self.others = [others[i:i + batch] for i in range(0, len(others) - batch + 1, batch)]
        self.switch, self.block_batches = False, 0

    def __iter__(self):
        block, others = iter(self.block), iter(self.others)
        while True:
            yield from self.control
            chunk = None
            if not self.switch:
                chunk = next(block, None)
                self.block_batches += chunk is not None
            chunk = chunk if chunk is not None else next(others, None)
            if chunk is None:
                return
            yield from chunk


def _readings(workers) -> tuple[Pages, Pages] | None:
    control, reader = private_pages(workers[0].pid), private_pages(workers[1].pid)
    return None if control is None or reader is None else (control, reader)


def measure_growth(dataset, fixed_kwargs: dict, sample_s: float, dataset_bytes: int | None,
                   beat: Callable[[], None] = lambda: None, seconds: float = GROWTH_SECONDS,
                   seed: int = 0, sample_bytes: int = 0) -> Growth | None:
    """Two fresh workers: the control reads the same rows again and again, the reader a block for
    BLOCK_SHARE of ``seconds``, then rows at random; the reader's anonymous gain over the
    control's, against the rows it read, is what reading copied (fitted in search/growth.py; a
    mapped file's pages apart). None for an iterable, short or small dataset."""
    from torch.utils.data import DataLoader

    try:
        length = len(dataset)
    except TypeError:
        return None
    per = max(sample_s, 1e-6)
    # A dozen batches of the reader's at the least, each small beside the growth looked for.
    batch = max(1, min(STAGE_BATCH, int(seconds / (per * 24)), STAGE_BYTES // max(1, sample_bytes)))
    if length < MIN_BATCHES * batch or (dataset_bytes is not None and dataset_bytes < GROWTH_MIN_DATASET):
        return None
    t0 = time.perf_counter()
    phases = _phases_for(length, batch, seconds, per, seed)
    # One batch in flight a worker: once the loop has taken k batches, each worker has made its
    # share of them and is making one more, so the rows it read are known to within a batch.
    loader = DataLoader(dataset, batch_size=batch, sampler=phases, num_workers=2, prefetch_factor=1,
                        **{k: v for k, v in fixed_kwargs.items()
                           if k in ("collate_fn", "worker_init_fn", "multiprocessing_context")})
    it = iter(loader)
    try:
        # The first reading waits out the workers' first batches, which settle their allocators.
        for _ in range(2 * WARM_BATCHES):
            next(it)
        workers = list(it._workers)
        found = _block_phase(it, workers, phases, batch, seconds, beat)
        if found is None:
            return None
        block, last, taken = found
        block_batches = phases.block_batches
        points, final, read = _random_phase(it, workers, last, taken, block_batches, batch, seconds, beat)
    finally:
        it._shutdown_workers()
        del it, loader
    row_bytes = _slope(block)
    block_rows = block_batches * batch
    growth = fit_growth(points, block_rows, int(row_bytes * block_rows), final[0].uss, length, dataset_bytes,
                        seconds=time.perf_counter() - t0)
    # The mapped file's pages the reader gained over the control, by its last reading: said apart.
    return dataclasses.replace(growth, file_bytes=max(0, final[1].file - final[0].file),
                               file_samples=block_rows + read * batch)


def _phases_for(length: int, batch: int, seconds: float, per: float, seed: int) -> _Phases:
    """The control's rows, a block at random, and random rows outside it, more than the time can
    read (the clock ends each phase)."""
    rng = random.Random(seed)
    block_rows = min(length // 4, MAX_ROWS, max((WARM_BATCHES + 4) * batch, int(4 * seconds / per)))
    start = rng.randrange(0, length - block_rows + 1)
    count = min(length - block_rows, MAX_ROWS, max(8 * batch, int(8 * seconds / per)))
    others = [i if i < start else i + block_rows for i in rng.sample(range(length - block_rows), count)]
    return _Phases(others[:batch], range(start, start + block_rows), others[batch:], batch)


def _block_phase(it, workers, phases: _Phases, batch: int, seconds: float,
                 beat: Callable[[], None]) -> tuple[list, tuple[Pages, Pages], int] | None:
    """The block, for BLOCK_SHARE of ``seconds``: (each reading's rows and the reader's gain, the
    last reading, the batches taken); None where a worker is gone or too few readings."""
    taken, block = 2 * WARM_BATCHES, []
    block_end = time.perf_counter() + seconds * BLOCK_SHARE
    gap, next_reading = seconds * BLOCK_SHARE / READINGS, 0.0
    while True:
        if time.perf_counter() >= next_reading:
            reading = _readings(workers)
            if reading is None:
                return None
            block.append(((taken // 2 + 0.5) * batch, reading[1].anon - reading[0].anon))
            next_reading = time.perf_counter() + gap
            beat()
        if time.perf_counter() >= block_end or phases.block_batches >= len(phases.block):
            break
        next(it)
        taken += 1
    # The reader is making a block batch still: it has read no random row yet.
    phases.switch = True
    last = _readings(workers)
    if last is None or len(block) < 3:
        return None
    block.append(((taken // 2 + 0.5) * batch, last[1].anon - last[0].anon))
    return block, last, taken


def _random_phase(it, workers, last: tuple[Pages, Pages], taken: int, block_batches: int, batch: int,
                  seconds: float, beat: Callable[[], None]) -> tuple[list, tuple[Pages, Pages], int]:
    """The random rows for the rest of ``seconds``: (each reading's rows and the reader's gain, the
    last reading, the reader's random batches at it)."""
    points, end = [(0, last[1].anon - last[0].anon)], time.perf_counter() + seconds * (1 - BLOCK_SHARE)
    gap = (end - time.perf_counter()) / READINGS
    next_reading = time.perf_counter() + gap
    final, read = last, 0
    while time.perf_counter() < end:
        try:
            next(it)
        except StopIteration:
            break
        taken += 1
        done = taken // 2 - block_batches   # the reader's random batches made for certain
        if done >= 1 and time.perf_counter() >= next_reading:
            reading = _readings(workers)
            if reading is None:
                break
            final, read = reading, done
            points.append((int((done + 0.5) * batch), reading[1].anon - reading[0].anon))
            next_reading = time.perf_counter() + gap
            beat()
    return points, final, read


def _slope(block: list) -> float:
    """The block's bytes a row: the slope over every reading (the batch in the making averages out)."""
    mean_n = sum(n for n, _ in block) / len(block)
    mean_d = sum(d for _, d in block) / len(block)
    spread = sum((n - mean_n) ** 2 for n, _ in block)
    return max(0.0, sum((n - mean_n) * (d - mean_d) for n, d in block) / spread) if spread else 0.0


def with_growth(profile, dataset, fixed_kwargs: dict, dataset_bytes: int | None, beat: Callable[[], None]):
    """The profile with its growth stage, or as it was where that failed (the trials meet it) or has
    nothing to find (NOTE [ A heap of buffers copies nothing ])."""
    beat()
    try:
        if copies_nothing(dataset, dataset_bytes, GROWTH_MIN_DATASET):
            return profile
        growth = measure_growth(dataset, fixed_kwargs, profile.sample_median_s, dataset_bytes, beat=beat,
                                sample_bytes=profile.sample_bytes)
    except Exception:  # noqa: BLE001 - the profile stands without it
        return profile
    if growth is None:
        return profile
    return dataclasses.replace(profile, growth=growth, seconds=profile.seconds + growth.seconds)


class NewestIterator:
    """A burst's newest iterator (one made at an epoch boundary has fresh workers) and the batches
    taken from it: how far its workers read."""

    def __init__(self):
        self.it, self.batches = None, 0

    def made(self, it) -> None:
        self.it, self.batches = it, 0

    def clear(self) -> None:
        self.it = None

    def point(self, config) -> tuple[int, int, int] | None:
        """(samples each worker had read: the batches taken and half of those in flight, their mean
        USS, its mean mapped file's pages) at the burst's end; None without workers."""
        workers = list(getattr(self.it, "_workers", None) or ())[:BURST_WORKERS]
        if not workers or not config.num_workers:
            return None
        readings = [r for r in (private_pages(w.pid) for w in workers) if r is not None]
        if not readings:
            return None
        in_flight = config.num_workers * (config.prefetch_factor or 0) / 2
        samples = (self.batches + in_flight) * config.batch_size / config.num_workers
        return (int(samples), int(sum(r.uss for r in readings) / len(readings)),
                int(sum(r.file for r in readings) / len(readings)))


# Objects the walk visits before it gives up: a dataset of rows held as objects has more.
WALK_LIMIT = 100_000
# A bytes-like object this large is a buffer (its header is one page of many); smaller ones count
# as objects.
BUFFER_MIN = 64 * 1024

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, types.FrameType)


@dataclass(frozen=True)
class Held:   # bytes in large anonymous buffers reachable from the dataset, and the objects besides
    buffer_bytes: int
    objects: int


def held_in(root: object, limit: int = WALK_LIMIT) -> Held | None:
    """What ``root`` holds in large buffers (NOTE [ A heap of buffers copies nothing ]); None where
    the walk cannot tell: past ``limit`` objects, an array of objects, or a mapped file."""
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    owners: dict[int, int] = {}     # a buffer's owner -> its bytes
    seen: set[int] = set()
    stack = [root]
    objects = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        if isinstance(obj, mmap.mmap):
            return None
        if np is not None and isinstance(obj, np.ndarray):
            if obj.dtype.hasobject or isinstance(obj, np.memmap):
                return None
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if isinstance(base.base, mmap.mmap) or isinstance(base, np.memmap):
                return None
            if base.base is not None:   # a view of another object's buffer: that object is walked
                stack.append(base.base)
            else:
                owners[id(base)] = base.nbytes
            continue
        if torch is not None and isinstance(obj, torch.Tensor):
            if obj.device.type == "cpu" and not obj.is_sparse:
                storage = obj.untyped_storage()
                owners[storage.data_ptr()] = storage.nbytes()
            continue
        if isinstance(obj, (bytes, bytearray, memoryview, str)):
            size = obj.nbytes if isinstance(obj, memoryview) else len(obj)
            if size >= BUFFER_MIN:
                owners[id(obj)] = size
                continue
        objects += 1
        if objects > limit:
            return None
        stack.extend(gc.get_referents(obj))
    return Held(sum(owners.values()), objects)


def copies_nothing(dataset: object, dataset_bytes: int | None, floor: int) -> bool:
    """Whether the dataset's heap is, but for less than ``floor``, in large buffers: the growth
    stage has nothing to find (NOTE [ A heap of buffers copies nothing ])."""
    if dataset_bytes is None:
        return False
    held = held_in(dataset)
    return held is not None and dataset_bytes - held.buffer_bytes < floor


# --- The profile's last stage where the start method's gate is open: each worker start method's
# start-up and memory (NOTE [ What a start method costs ] in search/methods.py). The growth stage's
# batch (small: the first batch's own work is little beside a worker's start-up) and warm batches
# (the allocators settle) serve here too. Seconds of random reads between the two memory readings:
READ_SECONDS = 1.0
# The stage's loaders: two workers, one batch in flight each, so the second batch is the second
# worker's (in order): its arrival times the second worker's start.
METHOD_WORKERS = 2


def _mean(values: Sequence[int]) -> int:
    return int(sum(values) / len(values)) if values else 0


def measure_method(dataset, kwargs: dict, method: str, default: bool, sample_s: float,
                   beat: Callable[[], None] = lambda: None) -> MethodCost | None:
    """Two workers started with ``method``: iter() to their first batches (less a batch's work),
    their memory after WARM_BATCHES batches each and after READ_SECONDS of random reads. None
    when the loader ended before the readings."""
    from torch.utils.data import DataLoader

    t_begin = time.perf_counter()
    batch = STAGE_BATCH
    work = batch * max(0.0, sample_s)
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=METHOD_WORKERS, prefetch_factor=1,
                        multiprocessing_context=None if default else method, **kwargs)
    t0 = time.perf_counter()
    it = iter(loader)
    try:
        next(it)
        first = time.perf_counter() - t0
        next(it)
        second = time.perf_counter() - t0
        beat()
        for _ in range(METHOD_WORKERS * WARM_BATCHES):
            next(it)
        workers = list(getattr(it, "_workers", ()))
        start = [private_pages(w.pid) for w in workers]
        start_pss = [pss(w.pid) for w in workers]
        if any(p is None for p in start) or any(p is None for p in start_pss):
            return None
        taken, end_at = 0, time.perf_counter() + READ_SECONDS
        while time.perf_counter() < end_at:
            try:
                next(it)
            except StopIteration:
                break
            taken += 1
        beat()
        end = [private_pages(w.pid) for w in workers]
        if any(p is None for p in end):
            return None
    finally:
        it._shutdown_workers()
        del it, loader
    rise = _mean([e.anon for e in end]) - _mean([s.anon for s in start])
    return MethodCost(method, default, startup=((1, max(0.0, first - work)), (2, max(0.0, second - 2 * work))),
                      worker_uss_bytes=_mean([s.uss for s in start]), worker_pss_bytes=_mean(start_pss),
                      rise_bytes=max(0, rise), rise_samples=taken * batch // METHOD_WORKERS,
                      seconds=time.perf_counter() - t_begin)


def with_methods(profile, dataset, methods: Sequence[str], default: str, kwargs_of: Callable[[str], dict],
                 beat: Callable[[], None]):
    """The profile with each of ``methods`` measured (``default`` first); one that fails here (a
    dataset that does not pickle, for spawn) is met and reported by its trials."""
    try:
        length = len(dataset)
    except TypeError:
        return profile
    if length < 4 * METHOD_WORKERS * (WARM_BATCHES + 2) * STAGE_BATCH:
        return profile
    costs, seconds = [], 0.0
    for method in [default] + [m for m in methods if m != default]:
        beat()
        try:
            cost = measure_method(dataset, kwargs_of(method), method, method == default, profile.sample_median_s,
                                  beat)
        except Exception:  # noqa: BLE001 - the trials of this method meet and report it
            cost = None
        if cost is not None:
            costs.append(cost)
            seconds += cost.seconds
    if not costs:
        return profile
    return dataclasses.replace(profile, methods=tuple(costs), seconds=profile.seconds + seconds)
