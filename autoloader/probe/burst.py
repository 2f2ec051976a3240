"""One config's rate from a short window of its steady state, in the trial process.

# NOTE [ Honest burst ]
# 1. First-batch burst: every worker builds its first batch at once, so about num_workers batches
#    arrive together after start. We skip num_workers + 2 batches after the first and count a
#    window of at least 2 * num_workers batches.
# 2. Clumped arrivals: workers that started together finish together, so batches arrive in clumps
#    of about num_workers, one per worker cycle, and a window not a whole number of cycles over- or
#    under-counts by up to a clump. So the per-batch interval comes from differences taken
#    L = num_workers batches apart, t[j + L] - t[j] (each spans one cycle of the same worker,
#    whatever the phase), its interval from block means of them. Every ~0.2 s the device is
#    synchronised so queued GPU work is paid in the window. We stop when the interval is narrow
#    enough or at the time cap, but not before the window holds ``min_cycles`` worker cycles
#    (2 by default), up to a hard cap of 3x the time cap: c cycles yield (c - 1) x num_workers
#    differences, and a cycle or two of slow batches at many workers cannot average out one late
#    clump.
# 3. Epoch boundaries: the time from StopIteration to the next epoch's first batch is cut out of
#    the steady window and kept as a measured restart cost. The long-run rate charges one restart
#    per epoch: measured when the window crossed one, else modelled from start-up (a new iterator
#    without persistent workers starts its workers anew, as the first one did).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..batches import samples_in
from ..search.policy import BurstSettings
from ..search.paired import t95   # Student's t, one table for the house (df = blocks - 1)


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
    lead_s: float = 0.0     # the first batch's end to the window's start: the first clump skipped


class Timer:
    """Times the consumer: CUDA events on CUDA (queued work counts), a host clock elsewhere."""

    def __init__(self, device: str):
        self.cuda, self._pairs, self._host = device.startswith("cuda"), [], 0.0
        if self.cuda:
            import torch

            self._torch = torch

    def start(self):
        return self._event() if self.cuda else time.perf_counter()

    def stop(self, token) -> None:
        if self.cuda:
            self._pairs.append((token, self._event()))
        else:
            self._host += time.perf_counter() - token

    def _event(self):
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def sync(self) -> None:
        if self.cuda:
            self._torch.cuda.synchronize()

    def busy_seconds(self) -> float:
        if self.cuda:
            self.sync()
            return sum(a.elapsed_time(b) for a, b in self._pairs) / 1000.0
        return self._host


class _Epochs:
    """The loader's batches across its epochs, each boundary timed."""

    def __init__(self, make_iterator: Callable[[], Any]):
        self.make_iterator = make_iterator
        self.iterator = make_iterator()
        self.crossed = 0
        self.in_epoch = 0   # batches taken from the current epoch

    def fetch(self) -> tuple[Any, float]:
        """The next batch, and the seconds an epoch's boundary took before it (0.0 within one)."""
        try:
            item = next(self.iterator)
            self.in_epoch += 1
            return item, 0.0
        except StopIteration:
            t0 = time.perf_counter()
            self.iterator = self.make_iterator()
            item = next(self.iterator)
            self.crossed += 1
            self.in_epoch = 1
            return item, time.perf_counter() - t0


@dataclass
class _Window:
    start: float
    start_wall: float
    timer: Timer
    samples: int = 0
    batches: int = 0
    boundary_s: float = 0.0
    wait_s: float = 0.0
    arrivals: list = field(default_factory=list)   # steady time (boundaries cut out) of each batch consumed
    restarts: list = field(default_factory=list)
    pruned: bool = False


def run_burst(make_iterator: Callable[[], Any], consume: Callable[[Any], None], num_workers: int,
              fresh_workers_each_epoch: bool, epoch_batches: int | None, device: str,
              settings: BurstSettings, batch_samples: Callable[[Any, int], int] | None = None) -> BurstMeasurement:
    """One config measured (NOTE [ Honest burst ]). ``make_iterator``: a fresh iterator over the
    loader (again at each epoch end); ``consume``: the step; ``epoch_batches``: None for unknown
    length; ``batch_samples(batch, index_in_epoch)`` counts a batch's samples (default: its
    leading dimension)."""
    count = batch_samples or (lambda batch, index: samples_in(batch))
    timer = Timer(device)
    t_begin = time.perf_counter()
    epochs = _Epochs(make_iterator)
    first = next(epochs.iterator)   # a loader without a batch ends the burst here
    epochs.in_epoch = 1
    consume(first)
    timer.sync()
    startup_s = time.perf_counter() - t_begin
    # The first clump skipped: the batches every worker made at once, and a few more.
    for _ in range(num_workers + settings.extra_skip):
        consume(epochs.fetch()[0])
    timer.sync()
    window = _measure_window(epochs, consume, count, num_workers, epoch_batches, device, settings)
    return _measurement(window, epochs, num_workers, fresh_workers_each_epoch, epoch_batches, startup_s,
                        window.start - t_begin - startup_s)


def _measure_window(epochs: _Epochs, consume: Callable[[Any], None], count: Callable[[Any, int], int],
                    num_workers: int, epoch_batches: int | None, device: str, settings: BurstSettings) -> _Window:
    """Batches consumed until the rate's interval is tight, the time cap, or the prune line."""
    lag = max(1, num_workers)
    floor_batches = math.ceil(settings.min_cycles * num_workers - 1e-9)  # 2.2 x 5 is 11, not 12
    min_batches = max(3 * num_workers, 8, floor_batches)  # at least two cycles of differences
    timer = Timer(device)  # consumer time inside the window only
    w = _Window(start_wall=time.time(), start=time.perf_counter(), timer=timer)
    chunk_start = w.start
    while True:
        t0 = time.perf_counter()
        item, boundary = epochs.fetch()
        t1 = time.perf_counter()
        w.wait_s += (t1 - t0) - boundary
        if boundary:
            w.restarts.append(boundary)
            w.boundary_s += boundary
        token = w.timer.start()
        consume(item)
        w.timer.stop(token)
        w.samples += count(item, epochs.in_epoch)
        w.batches += 1
        now = time.perf_counter()
        chunk_done = now - chunk_start >= settings.chunk_s
        if chunk_done:
            w.timer.sync()
            now = chunk_start = time.perf_counter()
        w.arrivals.append(now - w.start - w.boundary_s)
        if not chunk_done:
            continue
        elapsed = now - w.start
        rate, rel = _lagged_rate(w.arrivals, lag, w.samples / w.batches)
        # A boundary due before the time cap is waited for: short epochs are then measured,
        # not modelled.
        to_epoch_end = ((epoch_batches - epochs.in_epoch) * elapsed / w.batches if epoch_batches else math.inf)
        boundary_due = not w.restarts and elapsed + to_epoch_end < settings.max_window_s
        enough = elapsed >= settings.min_window_s and w.batches >= min_batches and not boundary_due
        if settings.prune_below and w.batches >= min_batches and rate < settings.prune_below:
            w.pruned = True  # clearly behind the best so far: the search needs no more of it
        # The time cap yields to the floor of min_cycles x num_workers batches (slow batches at
        # many workers need it), up to a hard cap of three times the time cap.
        capped = (elapsed >= settings.max_window_s and w.batches >= floor_batches) \
            or elapsed >= 3 * settings.max_window_s
        if (enough and rel <= settings.target_rel_interval) or capped or w.pruned:
            return w


def _measurement(w: _Window, epochs: _Epochs, num_workers: int, fresh_workers_each_epoch: bool,
                 epoch_batches: int | None, startup_s: float, lead_s: float) -> BurstMeasurement:
    """The window's rates: its steady rate, and the long-run rate with an epoch's restart."""
    w.timer.sync()
    window_s = time.perf_counter() - w.start
    steady_time = max(window_s - w.boundary_s, 1e-9)
    steady_rate, rel_interval = _lagged_rate(w.arrivals, max(1, num_workers), w.samples / max(w.batches, 1))
    if not math.isfinite(steady_rate):
        steady_rate = w.samples / steady_time
    batch_interval = w.samples / max(w.batches, 1) / steady_rate
    if w.restarts:
        restart_s = max(0.0, statistics.median(w.restarts) - batch_interval)
    else:
        # A new iterator without persistent workers pays the start-up the first one paid; kept
        # workers (or none) only refill the pipeline, which the steady rate already covers.
        restart_s = max(0.0, startup_s - batch_interval) if fresh_workers_each_epoch else 0.0
    long_rate = steady_rate
    if epoch_batches:
        epoch_samples = epoch_batches * (w.samples / max(w.batches, 1))
        long_rate = epoch_samples / (epoch_samples / steady_rate + restart_s)
    return BurstMeasurement(
        samples_per_s=long_rate, steady_samples_per_s=steady_rate,
        rel_interval=rel_interval, wait_fraction=min(1.0, w.wait_s / steady_time),
        consumer_fraction=min(1.0, w.timer.busy_seconds() / window_s), startup_s=startup_s,
        epoch_restart_s=restart_s, batches=w.batches, window_s=window_s, epochs_crossed=epochs.crossed,
        window_start_wall=w.start_wall, window_end_wall=time.time(), pruned=w.pruned, lead_s=lead_s)


def _lagged_rate(arrivals: list[float], lag: int, samples_per_batch: float) -> tuple[float, float]:
    """(samples/s, relative 95% half-width) from the spread of block means of differences ``lag``
    batches apart (NOTE [ Honest burst ]); the window's start is the first point."""
    times = [0.0, *arrivals]
    diffs = [(times[j + lag] - times[j]) / lag for j in range(len(times) - lag)]
    if len(diffs) < 2:
        return math.inf if not diffs else samples_per_batch / max(diffs[0], 1e-9), math.inf
    interval = sum(diffs) / len(diffs)
    rate = samples_per_batch / max(interval, 1e-12)
    blocks = min(10, len(diffs) // max(1, lag // 2 or 1))
    if blocks < 3:
        return rate, math.inf
    size = len(diffs) // blocks
    means = [sum(diffs[b * size:(b + 1) * size]) / size for b in range(blocks)]
    mean = sum(means) / blocks
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (blocks - 1))
    # Neighbouring blocks share batches (each difference spans ``lag`` of them), so the blocks
    # are not independent; the interval is widened by that overlap rather than trusted as is.
    overlap = math.sqrt(1.0 + lag / max(size, 1))
    return rate, t95(blocks - 1) * sd * overlap / math.sqrt(blocks) / mean
