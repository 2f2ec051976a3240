"""The burst measurement, run inside the trial process. See ``../shared/BENCHMARK.md``.

# NOTE [ Honest burst ]
# 1. First-batch burst: every worker builds its first batch at once, so about num_workers batches
#    arrive together after start. We skip num_workers + 2 batches after the first and count a
#    window of at least 2 * num_workers batches.
# 2. The window is split in chunks of ~0.2 s, each ended by a device synchronise so queued GPU
#    work is paid inside its chunk. The rate is samples over window time; its interval comes
#    from the spread of chunk rates (batch means). We stop when the interval is narrow enough or
#    the time cap is hit.
# 3. Epoch boundaries: the time from StopIteration to the next epoch's first batch is cut out of
#    the steady window and kept as a measured restart cost. The long-run rate charges one restart
#    per epoch: measured when the window crossed one, else modelled from start-up (a new iterator
#    without persistent workers starts its workers anew, as the first one did).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

# Two-sided 95% Student t quantiles for small sample counts (df = chunks - 1).
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}


@dataclass(frozen=True)
class BurstSettings:
    """The stop rule of one burst."""

    min_window_s: float = 1.0
    max_window_s: float = 5.0
    target_rel_interval: float = 0.03
    min_chunks: int = 5
    chunk_s: float = 0.2
    extra_skip: int = 2
    # Stop early, once the rate is clearly below this (samples/s): the search only needs to know
    # a config loses, not by how much. None measures in full (finals, benchmarks).
    prune_below: float | None = None


@dataclass(frozen=True)
class BurstMeasurement:
    samples_per_s: float
    steady_samples_per_s: float
    rel_interval: float
    wait_fraction: float
    consumer_fraction: float
    startup_s: float
    epoch_restart_s: float
    batches: int
    window_s: float
    epochs_crossed: int
    window_start_wall: float
    window_end_wall: float
    pruned: bool = False


def t95(df: int) -> float:
    if df <= 0:
        return math.inf
    keys = sorted(_T95)
    for key in keys:
        if df <= key:
            return _T95[key]
    return 1.96


def batch_size_of(batch: Any) -> int:
    """Samples in a collated batch: the leading dimension of its first tensor."""
    if hasattr(batch, "shape") and len(getattr(batch, "shape", ())) > 0:
        return int(batch.shape[0])
    if isinstance(batch, dict) and batch:
        return batch_size_of(next(iter(batch.values())))
    if isinstance(batch, (list, tuple)) and batch:
        first = batch[0]
        if hasattr(first, "shape") or isinstance(first, (dict, list, tuple)):
            return batch_size_of(first)
        return len(batch)
    return 1


class Timer:
    """Times the consumer: CUDA events on CUDA (queued work counts), a host clock elsewhere."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")
        self._pairs: list = []
        self._host = 0.0
        if self.cuda:
            import torch

            self._torch = torch

    def start(self):
        if self.cuda:
            event = self._torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop(self, token) -> None:
        if self.cuda:
            end = self._torch.cuda.Event(enable_timing=True)
            end.record()
            self._pairs.append((token, end))
        else:
            self._host += time.perf_counter() - token

    def sync(self) -> None:
        if self.cuda:
            self._torch.cuda.synchronize()

    def busy_seconds(self) -> float:
        if self.cuda:
            self.sync()
            return sum(a.elapsed_time(b) for a, b in self._pairs) / 1000.0
        return self._host


def run_burst(make_iterator: Callable[[], Any], consume: Callable[[Any], None], num_workers: int,
              fresh_workers_each_epoch: bool, epoch_batches: int | None, device: str,
              settings: BurstSettings, should_stop: Callable[[], bool] = lambda: False) -> BurstMeasurement:
    """Measure one config. ``make_iterator`` returns a fresh iterator over the loader (called
    again at each epoch end); ``consume`` is the step; ``epoch_batches`` is None for a dataset of
    unknown length. See NOTE [ Honest burst ]."""
    timer = Timer(device)
    t_begin = time.perf_counter()
    iterator = make_iterator()
    batch = next(iterator)
    consume(batch)
    timer.sync()
    startup_s = time.perf_counter() - t_begin
    restarts: list[float] = []
    epochs_crossed = 0
    in_epoch = 1  # batches taken from the current epoch

    def fetch():
        """Next batch; at an epoch's end start the next epoch and time the boundary."""
        nonlocal iterator, epochs_crossed, in_epoch
        try:
            item = next(iterator)
            in_epoch += 1
            return item, 0.0
        except StopIteration:
            t0 = time.perf_counter()
            iterator = make_iterator()
            item = next(iterator)
            epochs_crossed += 1
            in_epoch = 1
            return item, time.perf_counter() - t0

    pruned = False
    seen = 0
    t_first = time.perf_counter()  # start-up is not held against a config here
    for index in range(num_workers + settings.extra_skip):
        item, _ = fetch()
        consume(item)
        seen += batch_size_of(item)
        if settings.prune_below and index >= 1:
            # Even with the first-batch burst helping it, this config is far behind: stop.
            timer.sync()
            if seen / (time.perf_counter() - t_first) < 0.5 * settings.prune_below:
                pruned = True
                break
    timer.sync()

    min_batches = max(2 * num_workers, 8)
    chunk_rates: list[float] = []
    samples = 0
    boundary_s = 0.0
    wait_s = 0.0
    batches = 0
    chunk_samples = 0
    chunk_boundary = 0.0
    timer = Timer(device)  # consumer time inside the window only
    if pruned:
        # Stopped in the skip: too few batches for a window, so the rate is the whole run's.
        rate = seen / (time.perf_counter() - t_first)
        now_wall = time.time()
        return BurstMeasurement(rate, rate, math.inf, 1.0, 0.0, startup_s, 0.0, 0, 0.0, 0, now_wall,
                                now_wall, pruned=True)
    window_start_wall = time.time()
    window_start = chunk_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        item, boundary = fetch()
        t1 = time.perf_counter()
        wait_s += (t1 - t0) - boundary
        if boundary:
            restarts.append(boundary)
            boundary_s += boundary
            chunk_boundary += boundary
        token = timer.start()
        consume(item)
        timer.stop(token)
        n = batch_size_of(item)
        samples += n
        chunk_samples += n
        batches += 1
        now = time.perf_counter()
        if now - chunk_start >= settings.chunk_s:
            timer.sync()
            now = time.perf_counter()
            chunk_time = now - chunk_start - chunk_boundary
            if chunk_time > 0:
                chunk_rates.append(chunk_samples / chunk_time)
            chunk_start, chunk_samples, chunk_boundary = now, 0, 0.0
            elapsed = now - window_start
            rel = _relative_interval(chunk_rates)
            # A boundary due before the time cap is waited for: short epochs are then measured,
            # not modelled.
            to_epoch_end = ((epoch_batches - in_epoch) * (now - window_start) / batches
                            if epoch_batches else math.inf)
            boundary_due = not restarts and elapsed + to_epoch_end < settings.max_window_s
            enough = (elapsed >= settings.min_window_s and batches >= min_batches
                      and len(chunk_rates) >= settings.min_chunks and not boundary_due)
            so_far = samples / max(elapsed - boundary_s, 1e-9)
            if settings.prune_below and len(chunk_rates) >= 3 and so_far < 0.8 * settings.prune_below:
                pruned = True
            if (enough and rel <= settings.target_rel_interval) or elapsed >= settings.max_window_s \
                    or should_stop() or pruned:
                break
    timer.sync()
    window_s = time.perf_counter() - window_start
    steady_time = max(window_s - boundary_s, 1e-9)
    steady_rate = samples / steady_time
    batch_interval = steady_time / max(batches, 1)
    if restarts:
        restart_s = max(0.0, _median(restarts) - batch_interval)
    else:
        # A new iterator without persistent workers pays the start-up the first one paid; kept
        # workers (or none) only refill the pipeline, which the steady rate already covers.
        restart_s = max(0.0, startup_s - batch_interval) if fresh_workers_each_epoch else 0.0
    long_rate = steady_rate
    if epoch_batches:
        epoch_samples = epoch_batches * (samples / max(batches, 1))
        long_rate = epoch_samples / (epoch_samples / steady_rate + restart_s)
    return BurstMeasurement(
        samples_per_s=long_rate, steady_samples_per_s=steady_rate,
        rel_interval=_relative_interval(chunk_rates), wait_fraction=min(1.0, wait_s / steady_time),
        consumer_fraction=min(1.0, timer.busy_seconds() / window_s), startup_s=startup_s,
        epoch_restart_s=restart_s, batches=batches, window_s=window_s, epochs_crossed=epochs_crossed,
        window_start_wall=window_start_wall, window_end_wall=time.time(), pruned=pruned)


def _relative_interval(rates: list[float]) -> float:
    n = len(rates)
    if n < 2:
        return math.inf
    mean = sum(rates) / n
    var = sum((r - mean) ** 2 for r in rates) / (n - 1)
    return t95(n - 1) * math.sqrt(var / n) / mean if mean > 0 else math.inf


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
