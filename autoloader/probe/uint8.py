"""The profile's uint8 stage (probe/profiler.py): the batch's float32 tensors as uint8, timed
against them on the run's own samples: NOTE [ A quarter of the bytes ] in search/profile.py."""

from __future__ import annotations

import time
from typing import Any, Callable

from ..batches import bytes_in, map_tensors, tensors_in
from ..search.profile import Uint8Cost
from .timing import _unqueued, _warm_time

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
    # less its waits for a CPU (NOTE [ A profile read under load ] in probe/profiler.py).
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
