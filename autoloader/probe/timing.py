"""Timing one call of the profile's: less the waits for a CPU, pinned memory warm, and the share
of a CPU a spinning thread gets (probe/profiler.py uses them all)."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Iterator

# Timed calls of a pin after its untimed first (NOTE [ Warm pinning ]).
WARM_REPEATS = 2


def timed_batches(iterator: Any) -> Iterator[tuple[Any, float, float]]:
    """``iterator``'s batches, each with the moments its ``next`` was called and returned."""
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        yield batch, t0, time.perf_counter()


class _RunQueue:
    """Seconds the calling thread has waited for a CPU so far (Linux's schedstat: time runnable
    but not running), or 0 where it cannot be read (NOTE [ A profile read under load ])."""

    def __init__(self):
        try:
            self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            self.available = len(os.pread(self._fd, 64, 0).split()) >= 2
        except OSError:
            self._fd, self.available = None, False

    def __call__(self) -> float:
        if not self.available:
            return 0.0
        try:
            return int(os.pread(self._fd, 64, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self.available = None, False


def _cpu_availability(spins: int = 3, spin_s: float = 0.02) -> float:
    """The share of wall time this thread gets on a CPU while it wants one (a busy machine
    deschedules it)."""
    shares = []
    for _ in range(spins):
        t0, c0 = time.perf_counter(), time.thread_time()
        while time.perf_counter() - t0 < spin_s:
            pass
        shares.append((time.thread_time() - c0) / max(time.perf_counter() - t0, 1e-9))
    return max(0.05, min(1.0, statistics.median(shares)))


def _timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


# NOTE [ Warm pinning ]
# The first pin of a batch's tensors asks CUDA for new page-locked memory (cudaHostAlloc maps and
# locks every page), which costs several times the copy into it. A running loader pays that once:
# PyTorch's caching host allocator keeps the blocks of pinned batches that were freed and hands
# them to the next pin. So a pin is timed as the pin thread and the loop see it: after one untimed
# pin of the same sizes, and with each pinned batch released before the next pin, so that its
# block is back in the cache.
def _warm_time(fn: Callable[[], Any], repeats: int = WARM_REPEATS) -> float:
    out = fn()
    del out
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


def _unqueued(fn: Callable[[], Any], queue: Callable[[], float]) -> tuple[float, Any]:
    """(seconds of ``fn()`` less the time its thread waited for a CPU meanwhile, its result)."""
    q0, t0 = queue(), time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    return max(0.0, wall - min(wall, max(0.0, queue() - q0))), out
