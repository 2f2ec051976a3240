"""The profile's receive: batches made by workers, taken by the main process (probe/profiler.py,
stages 2 and 4): from idle workers at two sizes (NOTE [ The receive's two parts ] in
search/model.py), and from a worker busy making the next (NOTE [ A busy worker's receive ])."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from ..batches import bytes_in, map_tensors
from .timing import _timed, _unqueued

# Batches taken from the replay loader's full queue; its workers and depth are kept small enough
# that the batches in flight fit comfortably in /dev/shm.
TRANSFER_BATCHES = 6
# Takes of the smaller batch after them (NOTE [ The receive's two parts ] in search/model.py).
SMALL_TAKES = 3
SHM_SHARE = 0.25
# The busy receive: at most this deep a queue, this many takes, this long in all; a cycle waits
# this many times the expected fill before it takes.
BUSY_DEPTH = 4
BUSY_TAKES = 6
BUSY_SECONDS = 1.0
BUSY_FILL_MARGIN = 1.5


class Replay:
    """A dataset whose every item is a fresh copy of one collated batch (``batch_size=None``), so
    that the workers only copy and send and the main process's receive is what is timed; from
    item ``other_from`` on, copies of ``other`` (a smaller batch: the receive's second size)."""

    def __init__(self, batch: Any, length: int, other: Any = None, other_from: int | None = None):
        self.batch, self.length, self.other, self.other_from = batch, length, other, other_from

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        if self.other is not None and self.other_from is not None and index >= self.other_from:
            return map_tensors(self.other, lambda t: t.clone())
        return map_tensors(self.batch, lambda t: t.clone())


def _room(batch_bytes: int, memory_budget: int | None) -> int:
    """Batches the profile's loaders may hold in flight: SHM_SHARE of the free /dev/shm or of
    ``memory_budget``, each held twice (the worker's copy and the one it sends)."""
    from ..inputs.hardware import shm_free

    return int(min(shm_free() or 2**31, memory_budget or 2**62) * SHM_SHARE) // max(1, 2 * batch_bytes)


def _busy_depth(batch_bytes: int, batch_work: float, memory_budget: int | None) -> int:
    """The busy receive's prefetch depth (0: not measured, when it would not fit or a cycle would
    take too long)."""
    depth = min(BUSY_DEPTH, _room(batch_bytes, memory_budget) - 1)
    if depth < 2 or depth * batch_work * BUSY_FILL_MARGIN > BUSY_SECONDS:
        return 0
    return depth


def _busy_receive(it, depth: int, batch_work: float, beat: Callable[[], None],
                  queue: Callable[[], float] = lambda: 0.0) -> float | None:
    """The median take of a batch that waited while the one worker made the next: each cycle lets
    it fill the queue (``depth`` batches), then takes them; every take after the first meets it busy."""
    takes: list[float] = []
    deadline = time.perf_counter() + BUSY_SECONDS
    # A pause before each take lets the worker wake to its new index and get going (on a busy
    # machine that takes a moment); the pauses together stay well inside one batch's work.
    gap = min(batch_work / (2 * depth), 0.005)
    fill = depth * batch_work * BUSY_FILL_MARGIN + 0.005
    # A cycle after the first only where it ends inside BUSY_SECONDS: one begun just before the
    # deadline would run the stage to nearly twice it.
    while len(takes) < BUSY_TAKES and (not takes or time.perf_counter() + fill + depth * gap <= deadline):
        time.sleep(fill)
        try:
            next(it)
            for _ in range(depth - 1):
                time.sleep(gap)
                takes.append(_unqueued(lambda: next(it), queue)[0])
        except StopIteration:
            break
        beat()
    return statistics.median(takes) if takes else None


def _transfer(batch: Any, batch_bytes: int, fixed_kwargs: dict, device: str, sync,
              memory_budget: int | None, queue: Callable[[], float] = lambda: 0.0, small: Any = None,
              beat: Callable[[], None] = lambda: None,
              waiting: Callable[[Callable[[], Any]], Any] = lambda call: call()) -> tuple | None:
    """(receive, pin, pinned copy, pageable copy, the receive's fixed part) seconds per batch: the
    pin and copies None off CUDA, the fixed part None without a smaller ``small``; None when one
    worker's batches in flight would not fit (``_room``). The receive is timed on batches of
    ``batch``, then SMALL_TAKES of ``small``: NOTE [ The receive's two parts ] in search/model.py."""
    import torch
    from torch.utils.data import DataLoader

    cuda = device.startswith("cuda")
    room = _room(batch_bytes, memory_budget)
    if room < 2:
        return None
    workers = 2 if room >= 4 else 1
    depth = max(1, min(4, room // workers - 1))
    count = TRANSFER_BATCHES if cuda else TRANSFER_BATCHES // 2
    small_bytes = bytes_in(small) if small is not None else 0
    takes_small = SMALL_TAKES if 0 < small_bytes < batch_bytes else 0
    loader = DataLoader(Replay(batch, 4 * count + workers * depth + takes_small, small if takes_small else None,
                               count + 1), batch_size=None, num_workers=workers, prefetch_factor=depth,
                        **{k: v for k, v in fixed_kwargs.items() if k in ("multiprocessing_context", "worker_init_fn")})
    it = iter(loader)
    try:
        first = waiting(lambda: next(it))   # the workers' start: progress while it lasts (``waiting``)
        if cuda:   # one untimed pin of these sizes, its block back in the cache (NOTE [ Warm pinning ])
            warm = map_tensors(first, lambda t: t.pin_memory())
            del warm
        del first
        recv, recv_small, pins, pinned_copies, pageable_copies = [], [], [], [], []
        for i in range(count + takes_small):
            beat()
            # Let the workers fill the queue, then time only the take.
            time.sleep(min(0.5, 0.02 + 2e-10 * batch_bytes))
            elapsed, received = _unqueued(lambda: next(it), queue)
            (recv if i < count else recv_small).append(elapsed)
            if not cuda or i >= count:
                continue
            if i % 2 == 0:
                elapsed, pinned = _timed(lambda: map_tensors(received, lambda t: t.pin_memory()), lambda: None)
                pins.append(elapsed)
                elapsed, _ = _timed(lambda: map_tensors(pinned, lambda t: t.to(device, non_blocking=True)), sync)
                pinned_copies.append(elapsed)
                del pinned   # its block back in the cache before the next pin
            else:
                elapsed, _ = _timed(lambda: map_tensors(received, lambda t: t.to(device)), sync)
                pageable_copies.append(elapsed)
    finally:
        it._shutdown_workers()
        del it, loader
    if cuda:
        torch.cuda.empty_cache()
    median = statistics.median
    full = median(recv)
    fixed = receive_fixed(full, batch_bytes, median(recv_small), small_bytes) if recv_small else None
    return (full, median(pins) if pins else None, median(pinned_copies) if pinned_copies else None,
            median(pageable_copies) if pageable_copies else None, fixed)


def receive_fixed(full_s: float, full_bytes: int, small_s: float, small_bytes: int) -> float:
    """The line through the two sizes' takes, at no bytes; within [0, full_s]."""
    if full_bytes <= small_bytes:
        return full_s
    per_byte = max(0.0, (full_s - small_s) / (full_bytes - small_bytes))
    return min(full_s, max(0.0, full_s - per_byte * full_bytes))

