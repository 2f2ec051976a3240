"""The profile, measured in the trial process: each part of the pipeline on its own.

A few seconds, once per run, before any burst (NOTE [ The pipeline model ] in search/model.py says what
each figure feeds):

1. samples  ``dataset[i]`` for random indices (an IterableDataset's stream in its order, its
            first sample untimed: the opening), one at a time with one intra-op thread (as a
            DataLoader worker runs), until PROFILE_SAMPLES or SAMPLE_SECONDS: the per-sample
            cost as a distribution, since its tail decides prefetch depth and in-order blocking,
            and the share of it spent on a CPU (thread time over wall time, divided by the share
            of a CPU a spinning thread gets here, so a busy machine's descheduling does not read
            as waiting); then ``collate_fn`` over one batch of them, and the bytes of a sample;
2. transfer the main process's side of a worker's batch: batches made by replaying one collated
            batch through a few workers, taken once the queue is full so that only the receive
            is timed; then pinning each and copying it to the device, pinned and pageable;
3. consumer the step on a batch already on the device, repeated: the ceiling from above, and
            each call's time (the step's jitter); then, where torch runs several intra-op
            threads, the main process's share (its own collate and the step) with them and with
            one, in pairs;
4. start-up one fresh worker's iter() to first batch, less the batch's own work, and that
            worker's memory (PSS) once it has made a batch; then batches taken from a full
            queue while that worker is busy making the next (a busy worker's receive).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Callable

from ..inputs.hardware import usable_cpus
from ..search.profile import Profile
from .replay import Replay

PROFILE_SAMPLES = 256
SAMPLE_SECONDS = 1.5
MIN_SAMPLES = 16
STEP_SECONDS = 0.5
# The step timed call by call (its jitter on CUDA; with one thread): at most this many, this long.
JITTER_CALLS = 16
JITTER_SECONDS = 0.3
# The main process's share timed with its threads and with one: this many pairs, this long, at most.
THREAD_PAIRS = 6
THREAD_SECONDS = 0.6
# Timed calls of a pin after its untimed first (NOTE [ Warm pinning ]).
WARM_REPEATS = 2
# Batches taken from the replay loader's full queue; its workers and depth are kept small enough
# that the batches in flight fit comfortably in /dev/shm.
TRANSFER_BATCHES = 6
SHM_SHARE = 0.25
# The busy receive: at most this deep a queue, this many takes, this long in all; a cycle waits
# this many times the expected fill before it takes.
BUSY_DEPTH = 4
BUSY_TAKES = 6
BUSY_SECONDS = 1.0
BUSY_FILL_MARGIN = 1.5


def _map(obj: Any, fn: Callable) -> Any:
    if hasattr(obj, "pin_memory") and hasattr(obj, "to"):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_map(v, fn) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj


def _cpu_availability(spins: int = 3, spin_s: float = 0.02) -> float:
    """The share of wall time this thread gets on a CPU while it wants one: a busy machine
    deschedules it, and a sample's wait would then read as time spent off the CPU."""
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
    """The median seconds of ``fn()`` after one untimed call, each result released before the
    next call (NOTE [ Warm pinning ])."""
    out = fn()
    del out
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


def run_profile(dataset, fixed_kwargs: dict, batch_size: int, consume: Callable[[Any], Any], device: str,
                tensor_bytes: Callable[[Any], int], memory_of: Callable[[int], int | None],
                beat: Callable[[], None] = lambda: None, memory_budget: int | None = None) -> Profile:
    """Measure the profile of ``dataset`` at ``batch_size`` (see the module docstring).
    ``consume`` is the trial's consumer (the step, or the move to the device);
    ``memory_of(pid)`` a process's PSS; ``beat()`` tells the driver's watchdog it moves;
    ``memory_budget`` the bytes the profile's own loaders may hold (the guard's ceiling still
    watches)."""
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data._utils.collate import default_collate

    t_begin = time.perf_counter()
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    collate = fixed_kwargs.get("collate_fn") or default_collate
    # An IterableDataset has no length and no indices: its samples are timed as its stream yields them.
    length = None if isinstance(dataset, torch.utils.data.IterableDataset) else len(dataset)
    rng = random.Random(0)

    # 1. samples, as a worker makes them: one intra-op thread.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    samples, costs, cpu_s = [], [], 0.0
    availability = [_cpu_availability()]
    draw, opened = _drawer(dataset, length, rng)
    if opened is not None:   # a stream's first sample: its opening, a start-up cost, not a sample's
        samples.append(opened)
    try:
        deadline = time.perf_counter() + SAMPLE_SECONDS
        while len(costs) < PROFILE_SAMPLES and (time.perf_counter() < deadline or len(costs) < MIN_SAMPLES):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                sample = draw()
            except StopIteration:   # a stream shorter than the stage
                break
            costs.append(time.perf_counter() - t0)
            cpu_s += time.thread_time() - c0
            if len(samples) < batch_size:
                samples.append(sample)
        del draw
        if not costs:   # a stream of one sample: the attempt at a second stands for a sample's cost
            costs.append(time.perf_counter() - t0)
        availability.append(_cpu_availability())
        group = samples[:batch_size]
        t0 = time.perf_counter()
        batch = collate(group)
        collate_s = (time.perf_counter() - t0) * batch_size / len(group)
    finally:
        torch.set_num_threads(threads)
    sample_bytes = max(1, tensor_bytes(batch) // len(group))
    if len(group) < batch_size:
        batch = collate([samples[i % len(samples)] for i in range(batch_size)])
    # The loop's own collate (no workers): its intra-op threads, and the batch pinned in place.
    t0 = time.perf_counter()
    batch = collate([samples[i % len(samples)] for i in range(batch_size)])
    collate_main_s = time.perf_counter() - t0
    pin_local_s = None
    if cuda:
        pin_local_s = _warm_time(lambda: _map(batch, lambda t: t.pin_memory()))

    beat()
    # 2. transfer: the main process's receive, pin and copy of whole batches made by workers.
    transfer = _transfer(batch, batch_size * sample_bytes, fixed_kwargs, device, sync, memory_budget)
    if transfer is None:   # too big to replay here: the loop's own pin and copies stand in
        pinned = _map(batch, lambda t: t.pin_memory()) if cuda else None
        transfer = (0.0, _warm_time(lambda: _map(batch, lambda t: t.pin_memory())) if cuda else None,
                    _timed(lambda: _map(pinned, lambda t: t.to(device, non_blocking=True)), sync)[0] if cuda else None,
                    _timed(lambda: _map(batch, lambda t: t.to(device)), sync)[0] if cuda else None)
        del pinned
    recv_s, pin_s, h2d_pinned_s, h2d_pageable_s = transfer

    beat()
    # 3. the consumer on a resident batch.
    resident = _map(batch, lambda t: t.to(device)) if cuda else batch
    consume(resident)
    sync()
    steps, t0, calls = 0, time.perf_counter(), []
    while steps < 3 or (time.perf_counter() - t0 < STEP_SECONDS and steps < 200):
        c0 = time.perf_counter()
        consume(resident)
        calls.append(time.perf_counter() - c0)
        steps += 1
    sync()
    step_s = (time.perf_counter() - t0) / steps
    # The step's jitter: on the CPU each call above is the step; on CUDA a call only launches
    # until the queue fills, so each is timed to its end (the shape is kept, the mean is step_s's).
    step_samples = tuple(calls) if not cuda else _step_calls(lambda: consume(resident), sync, JITTER_CALLS)
    # The main process's share of a batch (its collate and the step) with the default threads and
    # with one, in pairs (NOTE [ The main process's threads ] in search/threads.py).
    pairs: list[tuple[float, float]] = []
    if threads > 1:
        group = [samples[i % len(samples)] for i in range(batch_size)]
        pairs = _thread_pairs(lambda: (collate(group), consume(resident)), sync, threads,
                              lambda n: torch.set_num_threads(n))
    resident = None   # its device memory free before the next stage (the closures above are done with it)

    beat()
    # 4. one fresh worker's start-up, and its memory once it made a batch; then batches taken
    # while that worker is busy making the next (NOTE [ A busy worker's receive ] in search/model.py).
    batch_work = statistics.fmean(costs) * batch_size + collate_s
    depth = _busy_depth(batch_size * sample_bytes, batch_work, memory_budget)
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=1, prefetch_factor=max(1, depth),
                        **{k: v for k, v in fixed_kwargs.items() if k in ("collate_fn", "worker_init_fn",
                                                                          "multiprocessing_context")})
    t0 = time.perf_counter()
    it = iter(loader)
    recv_busy_s = None
    try:
        next(it)
        first = time.perf_counter() - t0
        worker_pss = next((memory_of(w.pid) for w in getattr(it, "_workers", ())), None)
        if depth >= 2:
            recv_busy_s = _busy_receive(it, depth, batch_work, beat)
    finally:
        it._shutdown_workers()
        del it, loader
    epoch_batches = None if length is None else (
        -(-length // batch_size) if not fixed_kwargs.get("drop_last") else length // batch_size)
    return Profile(batch_size=batch_size, sample_s=tuple(costs), collate_s=collate_s, sample_bytes=sample_bytes,
                   recv_s=recv_s, pin_s=pin_s, h2d_pinned_s=h2d_pinned_s, h2d_pageable_s=h2d_pageable_s,
                   step_s=step_s, startup_s=max(0.0, first - batch_work), worker_pss=worker_pss,
                   cpus=usable_cpus(), epoch_batches=epoch_batches, seconds=time.perf_counter() - t_begin,
                   sample_cpu_share=(min(1.0, cpu_s / sum(costs) / statistics.fmean(availability))
                                     if sum(costs) > 0 else 1.0),
                   collate_main_s=collate_main_s, pin_local_s=pin_local_s, recv_busy_s=recv_busy_s,
                   step_samples=step_samples, main_threads=threads,
                   main_default_s=statistics.median(d for d, _ in pairs) if pairs else None,
                   main_one_thread_s=statistics.median(o for _, o in pairs) if pairs else None,
                   main_thread_ratios=tuple(d / o for d, o in pairs if o > 0))


def _drawer(dataset, length: int | None, rng: random.Random) -> tuple[Callable[[], Any], Any]:
    """(a call that returns the next sample to time, and a stream's first sample or None): a
    map-style dataset's samples at random indices, an iterable one's in the order its stream
    yields them (opened here, its first sample taken untimed; StopIteration when it ends)."""
    if length is not None:
        return (lambda: dataset[rng.randrange(length)]), None
    stream = iter(dataset)
    return stream.__next__, next(stream)


def _thread_pairs(share: Callable[[], Any], sync: Callable[[], None], threads: int,
                  set_threads: Callable[[int], None]) -> list[tuple[float, float]]:
    """(seconds with ``threads``, seconds with one) of the main process's ``share``, in up to
    THREAD_PAIRS pairs within THREAD_SECONDS (two at least), the order alternating so that drift
    falls on both alike."""
    def timed(n: int) -> float:
        set_threads(n)
        t0 = time.perf_counter()
        share()
        sync()
        return time.perf_counter() - t0

    pairs: list[tuple[float, float]] = []
    t_end = time.perf_counter() + THREAD_SECONDS
    try:
        while len(pairs) < 2 or (len(pairs) < THREAD_PAIRS and time.perf_counter() < t_end):
            if len(pairs) % 2:
                one = timed(1)
                pairs.append((timed(threads), one))
            else:
                pairs.append((timed(threads), timed(1)))
    finally:
        set_threads(threads)
    return pairs


def _step_calls(call: Callable[[], Any], sync: Callable[[], None], most: int) -> tuple[float, ...]:
    """Up to ``most`` calls of the step, each timed to its end, within JITTER_SECONDS (two at least)."""
    times: list[float] = []
    t_end = time.perf_counter() + JITTER_SECONDS
    while len(times) < 2 or (len(times) < most and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
    return tuple(times)


def _room(batch_bytes: int, memory_budget: int | None) -> int:
    """How many batches the profile's loaders may hold in flight: SHM_SHARE of the free /dev/shm
    or of ``memory_budget``, each batch held twice (the worker's copy and the one it sends)."""
    from ..inputs.hardware import shm_free

    return int(min(shm_free() or 2**31, memory_budget or 2**62) * SHM_SHARE) // max(1, 2 * batch_bytes)


def _busy_depth(batch_bytes: int, batch_work: float, memory_budget: int | None) -> int:
    """The start-up loader's prefetch depth for the busy receive: batches a cycle fills and then
    takes, so each take after the first meets the worker busy; 0 (not measured) when the batches
    in flight would not fit comfortably or one cycle would take too long."""
    depth = min(BUSY_DEPTH, _room(batch_bytes, memory_budget) - 1)
    if depth < 2 or depth * batch_work * BUSY_FILL_MARGIN > BUSY_SECONDS:
        return 0
    return depth


def _busy_receive(it, depth: int, batch_work: float, beat: Callable[[], None]) -> float | None:
    """The median take of a batch that waited in the queue while the one worker made the next.
    Each cycle lets the worker fill the queue (``depth`` batches), then takes them one after
    another: the first take finds the worker idle and hands it a new index, so every later take
    meets it busy."""
    takes: list[float] = []
    deadline = time.perf_counter() + BUSY_SECONDS
    # A pause before each take lets the worker wake to its new index and get going (on a busy
    # machine that takes a moment); the pauses together stay well inside one batch's work.
    gap = min(batch_work / (2 * depth), 0.005)
    while len(takes) < BUSY_TAKES and (not takes or time.perf_counter() < deadline):
        time.sleep(depth * batch_work * BUSY_FILL_MARGIN + 0.005)
        try:
            next(it)
            for _ in range(depth - 1):
                time.sleep(gap)
                t0 = time.perf_counter()
                next(it)
                takes.append(time.perf_counter() - t0)
        except StopIteration:
            break
        beat()
    return statistics.median(takes) if takes else None


def _transfer(batch: Any, batch_bytes: int, fixed_kwargs: dict, device: str, sync,
              memory_budget: int | None) -> tuple | None:
    """(receive, pin, pinned copy, pageable copy) seconds per batch, the last three None off
    CUDA; None when even one worker's batch in flight would not fit ``memory_budget`` or
    /dev/shm (each batch in flight is held twice: the worker's copy and the one it sends)."""
    import torch
    from torch.utils.data import DataLoader

    cuda = device.startswith("cuda")
    room = _room(batch_bytes, memory_budget)
    if room < 2:
        return None
    workers = 2 if room >= 4 else 1
    depth = max(1, min(4, room // workers - 1))
    count = TRANSFER_BATCHES if cuda else TRANSFER_BATCHES // 2
    loader = DataLoader(Replay(batch, 4 * count + workers * depth), batch_size=None, num_workers=workers,
                        prefetch_factor=depth,
                        **{k: v for k, v in fixed_kwargs.items() if k in ("multiprocessing_context", "worker_init_fn")})
    it = iter(loader)
    try:
        first = next(it)
        if cuda:   # one untimed pin of these sizes, its block back in the cache (NOTE [ Warm pinning ])
            warm = _map(first, lambda t: t.pin_memory())
            del warm
        del first
        recv, pins, pinned_copies, pageable_copies = [], [], [], []
        for i in range(count):
            # Let the workers fill the queue, then time only the take.
            time.sleep(min(0.5, 0.02 + 2e-10 * batch_bytes))
            t0 = time.perf_counter()
            received = next(it)
            recv.append(time.perf_counter() - t0)
            if not cuda:
                continue
            if i % 2 == 0:
                elapsed, pinned = _timed(lambda: _map(received, lambda t: t.pin_memory()), lambda: None)
                pins.append(elapsed)
                elapsed, _ = _timed(lambda: _map(pinned, lambda t: t.to(device, non_blocking=True)), sync)
                pinned_copies.append(elapsed)
                del pinned   # its block back in the cache before the next pin
            else:
                elapsed, _ = _timed(lambda: _map(received, lambda t: t.to(device)), sync)
                pageable_copies.append(elapsed)
    finally:
        it._shutdown_workers()
        del it, loader
    if cuda:
        torch.cuda.empty_cache()
    median = statistics.median
    return (median(recv), median(pins) if pins else None, median(pinned_copies) if pinned_copies else None,
            median(pageable_copies) if pageable_copies else None)
