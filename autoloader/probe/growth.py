"""Measuring copy on read in the trial process: the dataset's memory as built, one fresh worker's
USS against the samples it read (the profile's growth stage), and a burst's workers at its end.

Why and what the figures mean: NOTE [ Copy on read ] in search/growth.py. Runs in the trial
process, which knows its workers' pids and counts the batches it took; nothing here runs in
the driver.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any, Callable

from ..search.growth import Growth, fit_growth
from ..search.policy import GROWTH_MIN_DATASET

# The stage's most seconds, both phases; the contiguous block's share of them.
GROWTH_SECONDS = 2.0
BLOCK_SHARE = 0.3
# Samples a batch of the stage's loader: small, so the USS readings lie close together.
STAGE_BATCH = 32
# Batches a fresh worker makes before the block's first reading.
WARM_BATCHES = 4
# USS readings over the random phase (each reads the worker's smaps, tens of ms).
READINGS = 16
# Rows each phase may draw, at the most (a list of them is made up front).
MAX_ROWS = 2**18
# A dataset shorter than this many stage batches is read whole by any burst: no stage.
MIN_BATCHES = 32
# Workers of a burst whose USS is read at its end: a few stand for all (each read is tens of ms).
BURST_WORKERS = 4


def anonymous_bytes(pid: int | str = "self") -> int | None:
    """A process's anonymous memory (its heap: what a forked worker can come to copy), from
    /proc/<pid>/smaps_rollup; None where the kernel has no such file."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def uss(pid: int) -> int | None:
    """One process's private memory (USS), None when it is gone."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_full_info().uss)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


class _Phases:
    """The stage's sampler: the block's rows in order until ``switch`` is set, then the random
    rows. The loop draws a batch's indices when it hands the worker a task, so a switch set
    between two batches taken makes every task handed over after it random."""

    def __init__(self, block: range, others: list[int]):
        self.block, self.others, self.switch = block, others, False

    def __iter__(self):
        for index in self.block:
            if self.switch:
                break
            yield index
        yield from self.others


def measure_growth(dataset, fixed_kwargs: dict, sample_s: float, dataset_bytes: int | None,
                   beat: Callable[[], None] = lambda: None, seconds: float = GROWTH_SECONDS,
                   seed: int = 0) -> Growth | None:
    """One fresh worker reads a contiguous block of rows for BLOCK_SHARE of ``seconds``, then rows
    at random for the rest, its USS read against the samples it fetched; the growth fitted to that
    (search/growth.py). None when there is nothing to measure: an iterable dataset, one too short,
    or one that added too little to the trial process's memory to be copied."""
    from torch.utils.data import DataLoader

    try:
        length = len(dataset)
    except TypeError:
        return None
    per = max(sample_s, 1e-6)
    batch = max(1, min(STAGE_BATCH, int(seconds / (per * 12))))   # a dozen batches at the least
    if length < MIN_BATCHES * batch or (dataset_bytes is not None and dataset_bytes < GROWTH_MIN_DATASET):
        return None
    t0 = time.perf_counter()
    # More rows than the time can read (the profile's sample cost leaves out the worker's
    # collate and hand-over): the clock ends each phase.
    block_rows = min(length // 4, MAX_ROWS, max((WARM_BATCHES + 3) * batch, int(4 * seconds / per)))
    rng = random.Random(seed)
    start = rng.randrange(0, length - block_rows + 1)
    count = min(length - block_rows, MAX_ROWS, max(8 * batch, int(8 * seconds / per)))
    others = [i if i < start else i + block_rows for i in rng.sample(range(length - block_rows), count)]
    phases = _Phases(range(start, start + block_rows), others)
    # One batch in flight: once the loop has taken k batches, the worker has made k and is
    # making the next, so the samples it read are known to within one batch.
    loader = DataLoader(dataset, batch_size=batch, sampler=phases, num_workers=1, prefetch_factor=1,
                        **{k: v for k, v in fixed_kwargs.items()
                           if k in ("collate_fn", "worker_init_fn", "multiprocessing_context")})
    it = iter(loader)
    try:
        # The block's first reading waits out a fresh worker's first batches, which settle its
        # allocator whatever the rows hold.
        for _ in range(WARM_BATCHES):
            next(it)
        pid = it._workers[0].pid
        first, taken = uss(pid), WARM_BATCHES
        block_end = time.perf_counter() + seconds * BLOCK_SHARE
        while time.perf_counter() < block_end and (taken + 2) * batch <= block_rows:
            next(it)
            taken += 1
        # The worker is making batch taken + 1, the block's last: it has read no random row yet.
        phases.switch = True
        last = uss(pid)
        beat()
        if first is None or last is None or taken < WARM_BATCHES + 1:
            return None
        block_read, block_batches = (taken - WARM_BATCHES) * batch, taken + 1
        points, end = [(0, last)], t0 + seconds
        gap = (end - time.perf_counter()) / READINGS
        next_reading = time.perf_counter() + gap
        while time.perf_counter() < end:
            try:
                next(it)
            except StopIteration:
                break
            taken += 1
            done = taken - block_batches   # random batches made for certain
            if done >= 1 and time.perf_counter() >= next_reading:
                reading = uss(pid)
                if reading is None:
                    break
                points.append((int((done + 0.5) * batch), reading))
                next_reading = time.perf_counter() + gap
                beat()
    finally:
        it._shutdown_workers()
        del it, loader
    rise = last - first
    flat = first - max(0.0, rise / block_read) * (WARM_BATCHES + 0.5) * batch   # rows read before the first reading
    return fit_growth(points, block_read, rise, int(max(0.0, flat)), length, dataset_bytes,
                      seconds=time.perf_counter() - t0)


def with_growth(profile, dataset, fixed_kwargs: dict, dataset_bytes: int | None, beat: Callable[[], None]):
    """The profile with its growth stage (``measure_growth``) added, or as it was when the stage
    could not be measured: the trials meet and report whatever stopped it."""
    beat()
    try:
        growth = measure_growth(dataset, fixed_kwargs, profile.sample_median_s, dataset_bytes, beat=beat)
    except Exception:  # noqa: BLE001 - the profile stands without it
        return profile
    if growth is None:
        return profile
    return dataclasses.replace(profile, growth=growth, seconds=profile.seconds + growth.seconds)


class NewestIterator:
    """A burst's newest iterator and the batches taken from it: how far its workers read (an
    iterator made at an epoch boundary brings fresh workers, which have read nothing)."""

    def __init__(self):
        self.it, self.batches = None, 0

    def made(self, it) -> None:
        self.it, self.batches = it, 0

    def clear(self) -> None:
        self.it = None

    def point(self, config) -> tuple[int, int] | None:
        """(samples each worker had read, their mean USS), at the burst's end: they had made the
        batches taken and, on average, half of those in flight. None without workers."""
        workers = list(getattr(self.it, "_workers", None) or ())[:BURST_WORKERS]
        if not workers or not config.num_workers:
            return None
        readings = [r for r in (uss(w.pid) for w in workers) if r is not None]
        if not readings:
            return None
        in_flight = config.num_workers * (config.prefetch_factor or 0) / 2
        samples = (self.batches + in_flight) * config.batch_size / config.num_workers
        return int(samples), int(sum(readings) / len(readings))
