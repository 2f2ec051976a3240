"""The profile, measured in the trial process: each part of the pipeline on its own, a few
seconds once per run, before any burst (NOTE [ The pipeline model ] in search/model.py says what
each figure feeds). Its named stages:

1. samples  ``dataset[i]`` at random indices (a stream in its order, its first sample untimed),
            one intra-op thread as in a worker, until PROFILE_SAMPLES or SAMPLE_SECONDS: the
            per-sample cost as a distribution (its tail decides prefetch depth and in-order
            blocking) and its share on a CPU; then ``collate_fn`` over a batch, a sample's bytes;
2. transfer one collated batch replayed through a few workers, only the receive timed, at two
            sizes (a fixed cost and one per byte); then pin and copy, pinned and pageable; and
            where the batch is large (BYTES_MATTER) and float32, the same as uint8 (NOTE [ A
            quarter of the bytes ] in search/profile.py);
3. consumer the step on a resident batch, repeated: the ceiling from above and each call's time
            (its jitter); where torch runs several intra-op threads, the main process's share
            with them and with one, in pairs;
4. start-up one fresh worker's iter() to first batch, less the batch's work, and its PSS; then
            batches taken from a full queue while it makes the next (a busy worker's receive).

# NOTE [ A profile read under load ]
# Where other processes want the CPUs, the profile's thread waits in the run queue now and then,
# a few milliseconds at a time, at moments no one chooses: whether a wait lands in a stage of short
# samples is luck, and one can double its mean. So each timed sample, collate and receive is read
# less the time its thread waited for a CPU (Linux's per-thread schedstat, ``_RunQueue``): what the
# call costs when it runs. (The step is timed whole: the model does not share its CPUs.) The
# others' load is not lost: the driver measures what they took (``Profile.others_cpus``), and the
# model shares the CPUs with them (NOTE [ Others' demand ] in search/model.py). The stage's share
# spent waiting is kept (``sample_delay_share``). The stage runs for MIN_SAMPLE_SECONDS at least,
# so its tail spans more than a scheduler's slice. Where schedstat is not readable the wall time
# stands, with the share of a CPU a spinning thread gets standing in for the waits.

# NOTE [ A profile within its share ]
# The profile may take at most its share of the run's budget (``limit_s``: the run's
# PROFILE_SHARE); the rest is the bursts' and the final's. What grows with the workload is the step,
# called several times, and on a loaded machine every stage. So a call of the step is progress for
# as long as the user's own trial timeout (a thread beats the watchdog while it runs, and each call
# beats after it); a slow sample is progress, and so is the start of the replay's workers within
# the share (autoloader's own replay; a worker of the user's dataset that never delivers stays the
# watchdog's stall). A call or a stage that would take the profile past its share is not begun: the
# first call stands for the step when a second would not fit, and the receive's replay, the uint8
# stage, the worker's start-up, the thread pairs and the growth stage are skipped (the bursts
# measure what they would have); the profile says it was cut (``Profile.cut_s``). The step is always
# called once, so its figure sizes the budget a judged tune needs (search/budget.py). A call that
# does not return within the user's timeout is a stall the watchdog judges.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..batches import bytes_in, map_tensors, tensors_in
from ..inputs.hardware import usable_cpus
from ..search.profile import BYTES_MATTER, Profile, Uint8Cost
from .timing import _cpu_availability, _RunQueue, _timed, _unqueued, _warm_time

PROFILE_SAMPLES = 256
SAMPLE_SECONDS = 1.5
MIN_SAMPLES = 16
# Samples are drawn for at least this long (up to MAX_PROFILE_SAMPLES): NOTE [ A profile read under load ].
MIN_SAMPLE_SECONDS = 0.4
MAX_PROFILE_SAMPLES = 1024
# The receive's second size: this share of the batch's samples (NOTE [ The receive's two parts ]
# in search/model.py).
SMALL_BATCH_SHARE = 0.25
STEP_SECONDS = 0.5
# The step timed call by call (its jitter on CUDA; with one thread): at most this many, this long.
JITTER_CALLS = 16
JITTER_SECONDS = 0.3
# A stage is not begun with less than this left of the profile's share (NOTE [ A profile within its share ]).
STAGE_ROOM_S = 3.0
# The samples stage beats the watchdog at least this often while slow samples are drawn.
BEAT_EVERY_S = 0.5
# The main process's share timed with its threads and with one: this many pairs, this long, at most.
THREAD_PAIRS = 6
THREAD_SECONDS = 0.6


class _Run:
    """One profile's inputs and clocks, read by every stage; ``limit_s`` and ``step_stall_s``:
    NOTE [ A profile within its share ]."""

    def __init__(self, dataset, fixed_kwargs: dict, batch_size: int, device: str, memory_budget: int | None,
                 beat: Callable[[], None], limit_s: float | None, step_stall_s: float | None):
        import torch
        from torch.utils.data._utils.collate import default_collate

        self.t_begin, self.stages, self.cut = time.perf_counter(), [], False
        self.dataset, self.fixed_kwargs, self.batch_size, self.device = dataset, fixed_kwargs, batch_size, device
        self.memory_budget, self.beat, self.limit_s, self.step_stall_s = memory_budget, beat, limit_s, step_stall_s
        self.torch, self.threads, self.cuda = torch, torch.get_num_threads(), device.startswith("cuda")
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.collate = fixed_kwargs.get("collate_fn") or default_collate
        self.queue = _RunQueue()   # NOTE [ A profile read under load ]

    def within(self) -> float | None:
        """How long a wait is progress: what is left of the share, the user's timeout at most."""
        if self.limit_s is None or self.step_stall_s is None:
            return self.step_stall_s
        return max(0.0, min(self.step_stall_s, self.t_begin + self.limit_s - time.perf_counter()))

    def past(self, more_s: float) -> bool:
        """Whether ``more_s`` more seconds would take the profile past ``limit_s``; remembered."""
        if self.limit_s is not None and time.perf_counter() - self.t_begin + more_s > self.limit_s:
            self.cut = True
            return True
        return False

    def staged(self, name: str) -> None:
        """The stage ``name`` ended: the seconds since the last one did."""
        self.stages.append((name, time.perf_counter() - self.t_begin - sum(s for _, s in self.stages)))

    def cycled(self, samples: list) -> list:
        return [samples[i % len(samples)] for i in range(self.batch_size)]


@dataclass
class _Samples:
    """Stage 1's readings: the samples kept (a batch's worth), each drawn sample's cost less its
    waits for a CPU, and the thread's CPU, waited and wall seconds over them all."""
    samples: list
    costs: list
    cpu_s: float
    waited_s: float
    wall_s: float
    availability: list
    collate_s: float
    sample_bytes: int
    batch: Any        # a whole batch of them, collated


def run_profile(dataset, fixed_kwargs: dict, batch_size: int, consume: Callable[[Any], Any], device: str,
                memory_of: Callable[[int], int | None],
                beat: Callable[[], None] = lambda: None, memory_budget: int | None = None,
                limit_s: float | None = None, step_stall_s: float | None = None) -> Profile:
    """The profile of ``dataset`` at ``batch_size``, stage by stage (the module docstring).
    ``consume``: the trial's consumer; ``memory_of(pid)``: a process's PSS; ``beat()``: tells the
    watchdog it moves; ``memory_budget``: the bytes its own loaders may hold; ``limit_s`` and
    ``step_stall_s``: NOTE [ A profile within its share ] (None: no limit; beats only on return)."""
    run = _Run(dataset, fixed_kwargs, batch_size, device, memory_budget, beat, limit_s, step_stall_s)
    # An IterableDataset has no length and no indices: its samples are timed as its stream yields them.
    length = None if isinstance(dataset, run.torch.utils.data.IterableDataset) else len(dataset)
    got = _sample_stage(run, length)
    # The loop's own collate (no workers): its intra-op threads, and the batch pinned in place.
    collate_main_s, batch = _unqueued(lambda: run.collate(run.cycled(got.samples)), run.queue)
    pin_local_s = _warm_time(lambda: map_tensors(batch, lambda t: t.pin_memory())) if run.cuda else None
    run.staged("samples")
    beat()
    moved = _transfer_stage(run, got, batch)
    run.staged("transfer")
    uint8 = None   # the batch's float32 tensors as uint8, timed against them: what the uint8 what-if asks
    if batch_size * got.sample_bytes >= BYTES_MATTER and not run.past(STAGE_ROOM_S):
        beat()
        uint8 = uint8_cost(got.samples, batch, batch_size, run.collate, device, run.sync, run.queue, pin_local_s,
                           moved["h2d_pinned_s"], moved["h2d_pageable_s"])
        run.staged("uint8")
    beat()
    consumer = _consumer_stage(run, consume, batch, got.samples, collate_main_s)
    run.staged("consumer")
    beat()
    startup = _startup_stage(run, got, memory_of)
    run.staged("start-up")
    unqueued = run.queue.available
    run.queue.close()
    epoch_batches = None if length is None else (
        -(-length // batch_size) if not fixed_kwargs.get("drop_last") else length // batch_size)
    return Profile(batch_size=batch_size, sample_s=tuple(got.costs), collate_s=got.collate_s,
                   sample_bytes=got.sample_bytes, cpus=usable_cpus(), epoch_batches=epoch_batches,
                   seconds=time.perf_counter() - run.t_begin,
                   sample_cpu_share=_cpu_share(got.cpu_s, sum(got.costs), got.availability, unqueued),
                   sample_delay_share=got.waited_s / got.wall_s if unqueued and got.wall_s > 0 else None,
                   uint8=uint8, collate_main_s=collate_main_s, pin_local_s=pin_local_s, main_threads=run.threads,
                   stage_s=tuple(run.stages), cut_s=limit_s if run.cut else None, **moved, **consumer, **startup)


def _sample_stage(run: _Run, length: int | None) -> _Samples:
    """1. samples, as a worker makes them (one intra-op thread), then a batch of them collated."""
    torch, batch_size = run.torch, run.batch_size
    torch.set_num_threads(1)
    samples, costs, cpu_s, waited_s, wall_s = [], [], 0.0, 0.0, 0.0
    availability = [_cpu_availability()]
    draw, opened = _drawer(run.dataset, length, random.Random(0))
    if opened is not None:   # a stream's first sample: its opening, a start-up cost, not a sample's
        samples.append(opened)
    try:
        started = time.perf_counter()
        deadline = started + SAMPLE_SECONDS
        beaten = [started]

        def more() -> bool:
            if time.perf_counter() - beaten[0] >= BEAT_EVERY_S:   # a slow sample is progress too
                beaten[0] = time.perf_counter()
                run.beat()
            if len(costs) >= 2 and run.past(0.0):   # the share is spent: the samples drawn stand
                return False
            short = time.perf_counter() - started < MIN_SAMPLE_SECONDS and len(costs) < MAX_PROFILE_SAMPLES
            return (len(costs) < PROFILE_SAMPLES or short) and (time.perf_counter() < deadline
                                                                 or len(costs) < MIN_SAMPLES)

        while more():
            q0 = run.queue()
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                sample = draw()
            except StopIteration:   # a stream shorter than the stage
                break
            wall = time.perf_counter() - t0
            cpu_s += time.thread_time() - c0
            waited = min(wall, max(0.0, run.queue() - q0))
            costs.append(wall - waited)
            waited_s += waited
            wall_s += wall
            if len(samples) < batch_size:
                samples.append(sample)
        del draw
        if not costs:   # a stream of one sample: the attempt at a second stands for a sample's cost
            costs.append(time.perf_counter() - t0)
        availability.append(_cpu_availability())
        group = samples[:batch_size]
        elapsed, batch = _unqueued(lambda: run.collate(group), run.queue)
        collate_s = elapsed * batch_size / len(group)
    finally:
        torch.set_num_threads(run.threads)
    sample_bytes = max(1, bytes_in(batch) // len(group))
    if len(group) < batch_size:
        batch = run.collate(run.cycled(samples))
    return _Samples(samples, costs, cpu_s, waited_s, wall_s, availability, collate_s, sample_bytes, batch)


def _transfer_stage(run: _Run, got: _Samples, batch) -> dict:
    """2. transfer: the main process's receive, pin and copy of whole batches made by workers."""
    samples, group = got.samples, got.samples[:run.batch_size]
    try:   # the receive's second size (a collate_fn may insist on whole batches: then one size)
        small = run.collate(samples[:max(1, round(len(group) * SMALL_BATCH_SHARE))])
    except Exception:  # noqa: BLE001
        small = None
    # Past the share, or too big to replay here: the loop's own pin and copies stand in.
    moved = None if run.past(STAGE_ROOM_S) else _transfer(
        batch, run.batch_size * got.sample_bytes, run.fixed_kwargs, run.device, run.sync, run.memory_budget,
        run.queue, small, run.beat, lambda call: _beating(call, run.beat, run.within()))
    if moved is None:
        cuda, device = run.cuda, run.device
        pinned = map_tensors(batch, lambda t: t.pin_memory()) if cuda else None
        moved = (0.0, _warm_time(lambda: map_tensors(batch, lambda t: t.pin_memory())) if cuda else None,
                 _timed(lambda: map_tensors(pinned, lambda t: t.to(device, non_blocking=True)), run.sync)[0]
                 if cuda else None,
                 _timed(lambda: map_tensors(batch, lambda t: t.to(device)), run.sync)[0] if cuda else None, None)
    return dict(zip(("recv_s", "pin_s", "h2d_pinned_s", "h2d_pageable_s", "recv_fixed_s"), moved))


def _consumer_stage(run: _Run, consume: Callable[[Any], Any], batch, samples: list, collate_main_s: float) -> dict:
    """3. the consumer on a resident batch: the step's seconds, each call's, and the main
    process's share of a batch with its threads and with one, in pairs."""
    beat, sync, stall_s = run.beat, run.sync, run.step_stall_s
    resident = map_tensors(batch, lambda t: t.to(run.device)) if run.cuda else batch
    # A call of the step is progress up to the user's own timeout (NOTE [ A profile within its share ]).
    w0 = time.perf_counter()
    _beating(lambda: (consume(resident), sync()), beat, stall_s)
    first_s = time.perf_counter() - w0
    beat()   # a step of seconds beats each call: NOTE [ A profile within its share ]
    steps, t0, calls = 0, time.perf_counter(), []
    if run.past(first_s):   # one more call would pass the share: the first call stands for the step
        calls, step_s = [first_s], first_s
    else:
        while steps < 3 or (time.perf_counter() - t0 < STEP_SECONDS and steps < 200):
            if steps and run.past(statistics.fmean(calls)):
                break
            c0 = time.perf_counter()
            _beating(lambda: consume(resident), beat, stall_s)
            calls.append(time.perf_counter() - c0)
            steps += 1
            beat()
        sync()
        # Timed whole, waits for a CPU included: the model does not share the step's CPUs with the
        # others' (NOTE [ Others' demand ] in search/model.py), so the step keeps the load it saw.
        step_s = (time.perf_counter() - t0) / steps
    # The step's jitter: on the CPU each call above is the step; on CUDA a call only launches
    # until the queue fills, so each is timed to its end (the shape is kept, the mean is step_s's).
    step_samples = tuple(calls) if not run.cuda or run.past(2 * step_s) else _step_calls(
        lambda: consume(resident), sync, JITTER_CALLS)
    # The main process's share of a batch (its collate and the step) with the default threads and
    # with one, in pairs (NOTE [ The main process's threads ] in search/profile.py).
    pairs: list[tuple[float, float]] = []
    if run.threads > 1 and not run.past(4 * (step_s + collate_main_s)):
        group = run.cycled(samples)
        pairs = _thread_pairs(lambda: (run.collate(group), consume(resident)), sync, run.threads,
                              run.torch.set_num_threads, beat)
    return {"step_s": step_s, "step_samples": step_samples,   # the resident batch's memory freed on return
            "main_default_s": statistics.median(d for d, _ in pairs) if pairs else None,
            "main_one_thread_s": statistics.median(o for _, o in pairs) if pairs else None,
            "main_thread_ratios": tuple(d / o for d, o in pairs if o > 0)}


def _startup_stage(run: _Run, got: _Samples, memory_of: Callable[[int], int | None]) -> dict:
    """4. one fresh worker's start-up, and its memory once it made a batch; then batches taken
    while that worker is busy making the next (NOTE [ A busy worker's receive ] in search/model.py).
    Past the share, skipped: the bursts measure the start-up instead."""
    from torch.utils.data import DataLoader

    batch_work = statistics.fmean(got.costs) * run.batch_size + got.collate_s
    if run.past(batch_work + STAGE_ROOM_S):
        return {"startup_s": 0.0, "worker_pss": None, "recv_busy_s": None}
    depth = _busy_depth(run.batch_size * got.sample_bytes, batch_work, run.memory_budget)
    loader = DataLoader(run.dataset, batch_size=run.batch_size, num_workers=1, prefetch_factor=max(1, depth),
                        **{k: v for k, v in run.fixed_kwargs.items() if k in ("collate_fn", "worker_init_fn",
                                                                              "multiprocessing_context")})
    t0 = time.perf_counter()
    it = iter(loader)
    recv_busy_s = None
    try:
        next(it)   # the user's dataset in a worker: a first batch that never comes is the watchdog's stall
        first = time.perf_counter() - t0
        worker_pss = next((memory_of(w.pid) for w in getattr(it, "_workers", ())), None)
        if depth >= 2:
            recv_busy_s = _busy_receive(it, depth, batch_work, run.beat, run.queue)
    finally:
        it._shutdown_workers()
        del it, loader
    return {"startup_s": max(0.0, first - batch_work), "worker_pss": worker_pss, "recv_busy_s": recv_busy_s}


def _beating(call: Callable[[], Any], beat: Callable[[], None], stall_s: float | None) -> Any:
    """``call()``, with ``beat()`` every BEAT_EVERY_S from a thread while it runs, for
    ``stall_s`` at most (None: no beats). Past it, a call that does not return is the watchdog's
    to judge: a hang is a call without progress for the user's own timeout."""
    if stall_s is None:
        return call()
    until = time.perf_counter() + stall_s
    stop = threading.Event()

    def beating() -> None:
        while not stop.wait(BEAT_EVERY_S) and time.perf_counter() < until:
            beat()

    thread = threading.Thread(target=beating, name="autoloader-profile-beat", daemon=True)
    thread.start()
    try:
        return call()
    finally:
        stop.set()
        thread.join()


def _cpu_share(cpu_s: float, cost_s: float, availability: list[float], unqueued: bool) -> float:
    """A sample's share of its cost on a CPU: thread time over cost; where the cost holds the run
    queue's waits, over the share a spinning thread got (NOTE [ A profile read under load ])."""
    if cost_s <= 0:
        return 1.0
    return min(1.0, cpu_s / cost_s / (1.0 if unqueued else statistics.fmean(availability)))


def _drawer(dataset, length: int | None, rng: random.Random) -> tuple[Callable[[], Any], Any]:
    """(the next sample to time, a stream's first sample or None): a map-style dataset at random
    indices, an iterable one in its stream's order (its first sample taken untimed)."""
    if length is not None:
        return (lambda: dataset[rng.randrange(length)]), None
    stream = iter(dataset)
    return stream.__next__, next(stream)


def _thread_pairs(share: Callable[[], Any], sync: Callable[[], None], threads: int,
                  set_threads: Callable[[int], None], beat: Callable[[], None]) -> list[tuple[float, float]]:
    """(seconds with ``threads``, with one) of ``share``, up to THREAD_PAIRS pairs within
    THREAD_SECONDS (two at least), the order alternating so that drift falls on both alike."""
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
            beat()
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


# --- The uint8 stage: the batch's float32 tensors as uint8, timed against them on the run's own
# samples (NOTE [ A quarter of the bytes ] in search/profile.py).
# The collate pairs: MIN_ROUNDS, then more while they end within UINT8_SECONDS of the stage's
# start, MAX_ROUNDS at most; each side's least time stands (a wait only adds). Their shrink is
# the what-if's gain, which fewer rounds leave unsteady.
UINT8_SECONDS = 0.4
MIN_ROUNDS = 4
MAX_ROUNDS = 8
# A worker's one-thread collate costs per sample, so its pairs collate this share of the batch's
# samples (two at least) and are scaled to the batch.
WORKER_SHARE = 1 / 16
# Off CUDA the conversion runs on the loop's CPUs: timed on this share of each tensor's rows and
# scaled (an elementwise pass costs per element; on a device the whole batch is cheap).
CPU_CONVERT_SHARE = 1 / 8


def as_uint8(obj: Any) -> tuple[Any, int]:
    """(``obj`` with each contiguous float32 tensor seen as uint8 of its shape, how many): a view
    of its first quarter of bytes, no copy (no copy or collate looks at the values)."""
    import torch

    seen = 0

    def view(t):
        nonlocal seen
        if t.dtype is not torch.float32 or not t.is_contiguous() or t.dim() == 0 or t.numel() == 0:
            return t
        seen += 1
        return t.view(torch.uint8).reshape(-1)[: t.numel()].view(t.shape)

    return map_tensors(obj, view), seen


def uint8_cost(samples: list, batch: Any, batch_size: int, collate: Callable[[list], Any], device: str,
               sync: Callable[[], None],
               queue: Callable[[], float] = lambda: 0.0, pin_local_s: float | None = None,
               h2d_pinned_s: float | None = None, h2d_pageable_s: float | None = None) -> Uint8Cost | None:
    """The change to uint8 timed (NOTE [ A quarter of the bytes ]) on ``samples`` cycled to
    ``batch_size`` against ``batch``, their float32 batch, whose warm pin and copies the profile
    gives; None where no contiguous float32 tensor is held or ``collate`` refuses uint8 ones."""
    import torch

    t_begin = time.perf_counter()
    group = [samples[i % len(samples)] for i in range(batch_size)]
    viewed = [as_uint8(s) for s in group]
    if not any(n for _, n in viewed):
        return None
    eights = [s for s, _ in viewed]
    try:   # untimed: a collate_fn that insists on float32 says so here, and the first one warms up
        batch8 = collate(eights)
    except Exception:  # noqa: BLE001
        return None
    float_bytes, eight_bytes = bytes_in(batch), bytes_in(batch8)
    converted = [e for f, e in zip(tensors_in(batch), tensors_in(batch8))
                 if f.dtype is torch.float32 and e.dtype is torch.uint8]
    if float_bytes <= 0 or not converted:
        return None

    # Alternating pairs (the order swapped each round, so drift falls on both alike), each side
    # less its waits for a CPU (NOTE [ A profile read under load ]).
    k = max(2, min(batch_size, round(batch_size * WORKER_SHARE)))
    loop: dict[bool, list[float]] = {False: [], True: []}
    one: dict[bool, list[float]] = {False: [], True: []}
    threads = torch.get_num_threads()
    rounds, round_s = 0, 0.0
    while rounds < MIN_ROUNDS or (rounds < MAX_ROUNDS and time.perf_counter() - t_begin + round_s <= UINT8_SECONDS):
        r0 = time.perf_counter()
        for eight in ((False, True) if rounds % 2 == 0 else (True, False)):
            items = eights if eight else group
            loop[eight].append(_unqueued(lambda: collate(items), queue)[0])
            torch.set_num_threads(1)
            try:
                part = items[:k]
                one[eight].append(_unqueued(lambda: collate(part), queue)[0] * batch_size / k)
            finally:
                torch.set_num_threads(threads)
        rounds += 1
        round_s = time.perf_counter() - r0
    loop_pair = (min(loop[False]), min(loop[True]))
    one_pair = (min(one[False]), min(one[True]))

    cuda = device.startswith("cuda")
    pin_pair = pinned_pair = pageable_pair = None
    if cuda:
        pin8 = _warm_time(lambda: map_tensors(batch8, lambda t: t.pin_memory()))
        pinned = map_tensors(batch8, lambda t: t.pin_memory())
        copy8 = _warm_time(lambda: (map_tensors(pinned, lambda t: t.to(device, non_blocking=True)), sync()))
        del pinned
        pageable8 = _warm_time(lambda: (map_tensors(batch8, lambda t: t.to(device)), sync()), repeats=1)
        pin_pair = (pin_local_s, pin8) if pin_local_s else None
        pinned_pair = (h2d_pinned_s, copy8) if h2d_pinned_s else None
        pageable_pair = (h2d_pageable_s, pageable8) if h2d_pageable_s else None
        resident = [t.to(device) for t in converted]
        convert_s = _warm_time(lambda: ([t.float().div_(255.0) for t in resident], sync()))
        del resident
        torch.cuda.empty_cache()
    else:
        rows = [t[: max(1, int(t.shape[0] * CPU_CONVERT_SHARE))] for t in converted]
        share = sum(r.numel() for r in rows) / max(1, sum(t.numel() for t in converted))
        convert_s = _warm_time(lambda: [r.float().div_(255.0) for r in rows]) / share
    return Uint8Cost(byte_share=eight_bytes / float_bytes, loop_collate_s=loop_pair, worker_collate_s=one_pair,
                     pin_s=pin_pair, h2d_pinned_s=pinned_pair, h2d_pageable_s=pageable_pair, convert_s=convert_s,
                     rounds=rounds, seconds=time.perf_counter() - t_begin)


# --- The receive: batches made by workers, taken by the main process (stages 2 and 4): from idle
# workers at two sizes (NOTE [ The receive's two parts ] in search/model.py), and from a worker busy
# making the next (NOTE [ A busy worker's receive ]).
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
