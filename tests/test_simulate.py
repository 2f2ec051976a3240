"""The pipeline simulation (search/model.py's ``_simulate``) is written for speed; it must give
exactly what the plain loop of NOTE [ The pipeline model ] gives, float for float, or every
prediction, pick and replay of a recorded run would move with an edit that meant only to save time."""

from __future__ import annotations

import heapq
import random

from autoloader.search.model import SIMULATED_BATCHES, _simulate


def plain(n, prefetch, in_order, batch_times, pin_s, main_times):
    """The loop as first written (a nested dispatch, ``max`` everywhere): the reference."""
    outstanding = max(1, prefetch * n)
    warm = outstanding + 2 * n + 2
    total = warm + max(SIMULATED_BATCHES, 4 * outstanding)
    pool = len(batch_times)
    worker_free = [0.0] * n
    finish, ready, dispatched = {}, [], 0

    def dispatch(at):
        nonlocal dispatched
        k = dispatched
        w = k % n
        start = max(at, worker_free[w])
        worker_free[w] = done = start + batch_times[k % pool]
        finish[k] = done
        if not in_order:
            heapq.heappush(ready, (done, k))
        dispatched += 1

    for _ in range(outstanding):
        dispatch(0.0)
    pin_free = main_free = 0.0
    window_start = waited = busy = 0.0
    for taken in range(total):
        if in_order:
            k = taken
            made = finish.pop(k)
        else:
            made, k = heapq.heappop(ready)
            finish.pop(k)
        pinned = max(made, pin_free) + pin_s
        pin_free = pinned
        start = max(pinned, main_free)
        if taken == warm:
            window_start, waited, busy = main_free, 0.0, 0.0
        if taken >= warm:
            waited += max(0.0, pinned - main_free)
            busy += batch_times[k % pool]
        main_free = start + main_times[taken % len(main_times)]
        dispatch(start)
    span = max(main_free - window_start, 1e-12)
    batches = total - warm
    return span / batches, min(1.0, waited / span), min(1.0, busy / (n * span))


def cases(count: int, seed: int):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.choice([1, 2, 3, 4, 8, 15, 16, 24, 48])
        times = [rng.choice([0.0, rng.expovariate(1 / (rng.random() * 0.05 + 1e-4))])
                 for _ in range(rng.choice([1, 5, 512]))]
        mains = [rng.choice([0.0, rng.random() * 0.01]) for _ in range(rng.choice([1, 16, 512]))]
        yield n, rng.choice([1, 2, 4, 8]), rng.random() < 0.5, times, rng.choice([0.0, rng.random() * 0.01]), mains


def test_the_fast_loop_gives_what_the_plain_loop_gives_float_for_float():
    seen = 0
    for case in cases(120, seed=7):
        assert _simulate(*case) == plain(*case), case[:3]
        seen += 1
    assert seen == 120


def test_ties_and_idle_stages_give_the_same_floats():
    # Equal batch times make every max() a tie; zero pin and loop costs make every wait a zero.
    for in_order in (True, False):
        for n in (1, 3, 16):
            case = (n, 2, in_order, [0.01] * 4, 0.0, [0.0])
            assert _simulate(*case) == plain(*case)
            case = (n, 2, in_order, [0.0], 0.0, [0.002])
            assert _simulate(*case) == plain(*case)
