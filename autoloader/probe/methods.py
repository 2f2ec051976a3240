"""The profile's last stage where the start method's gate is open, in the trial process: each
worker start method's start-up and memory (NOTE [ What a start method costs ] in search/methods.py).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

from ..search.methods import MethodCost
from .growth import STAGE_BATCH, WARM_BATCHES
from .pages import private_pages
from .workers import pss

# The growth stage's batch (small: the first batch's own work is little beside a worker's
# start-up) and warm batches (the allocators settle) serve here too. Seconds of random reads
# between the two memory readings:
READ_SECONDS = 1.0
# The stage's loaders: two workers, one batch in flight each, so the second batch is the second
# worker's (in order): its arrival times the second worker's start.
WORKERS = 2


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
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=WORKERS, prefetch_factor=1,
                        multiprocessing_context=None if default else method, **kwargs)
    t0 = time.perf_counter()
    it = iter(loader)
    try:
        next(it)
        first = time.perf_counter() - t0
        next(it)
        second = time.perf_counter() - t0
        beat()
        for _ in range(WORKERS * WARM_BATCHES):
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
                      rise_bytes=max(0, rise), rise_samples=taken * batch // WORKERS,
                      seconds=time.perf_counter() - t_begin)


def with_methods(profile, dataset, methods: Sequence[str], default: str, kwargs_of: Callable[[str], dict],
                 beat: Callable[[], None]):
    """The profile with each of ``methods`` measured (``default`` first); one that fails here (a
    dataset that does not pickle, for spawn) is met and reported by its trials."""
    try:
        length = len(dataset)
    except TypeError:
        return profile
    if length < 4 * WORKERS * (WARM_BATCHES + 2) * STAGE_BATCH:
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
