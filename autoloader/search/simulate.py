"""The pipeline's steady state, simulated batch by batch: NOTE [ The pipeline model ] in model.py."""

from __future__ import annotations

import heapq

from .policy import BOUND_WAIT, CONSUMER_BOUND_SHARE, PIN_BOUND_SHARE

# Batches simulated past the pipeline's warm-up; enough that a 1-in-100 slow batch shows.
SIMULATED_BATCHES = 600


def _simulate(n: int, prefetch: int, in_order: bool, batch_times: list[float], pin_s: float,
              main_times: list[float]) -> tuple[float, float, float]:
    """(seconds per batch, the loop's wait share, the workers' busy share) in steady state;
    ``main_times``: the loop's seconds for each batch in turn (cycled: the step's jitter).

    The search asks this of hundreds of configs after each burst, so the loop is written for speed
    (locals, the dispatch inlined, ``a if a >= b else b`` for ``max(a, b)``: the same float), and
    gives exactly what the plain loop gave (tests/test_simulate.py).
    """
    outstanding = max(1, prefetch * n)
    warm = outstanding + 2 * n + 2
    total = warm + max(SIMULATED_BATCHES, 4 * outstanding)
    pool, mains = len(batch_times), len(main_times)
    worker_free = [0.0] * n
    finish: list[float] = []                # when batch k is made; batches are dispatched in order
    ready: list[tuple[float, int]] = []     # (finish time, batch) of batches made, not yet taken
    push, pop = heapq.heappush, heapq.heappop
    for k in range(outstanding):            # the first tasks, all handed out at time 0
        w = k % n
        start = worker_free[w] if worker_free[w] > 0.0 else 0.0
        worker_free[w] = done = start + batch_times[k % pool]
        finish.append(done)
        if not in_order:
            push(ready, (done, k))
    dispatched = outstanding
    pin_free = main_free = 0.0
    window_start = waited = busy = 0.0
    for taken in range(total):
        if in_order:
            k = taken
            made = finish[k]
        else:
            made, k = pop(ready)
        pinned = (made if made >= pin_free else pin_free) + pin_s
        pin_free = pinned
        start = pinned if pinned >= main_free else main_free
        if taken >= warm:
            if taken == warm:
                window_start, waited, busy = main_free, 0.0, 0.0
            gap = pinned - main_free
            waited += gap if gap > 0.0 else 0.0
            busy += batch_times[k % pool]
        main_free = start + main_times[taken % mains]
        # The loop hands the next task to its worker as it takes a batch (round robin).
        w = dispatched % n
        free = worker_free[w]
        worker_free[w] = done = (start if start >= free else free) + batch_times[dispatched % pool]
        finish.append(done)
        if not in_order:
            push(ready, (done, dispatched))
        dispatched += 1
    span = max(main_free - window_start, 1e-12)
    batches = total - warm
    return span / batches, min(1.0, waited / span), min(1.0, busy / (n * span))


def _bound(wait: float, pin_s: float, main_s: float, interval: float, step_s: float) -> str:
    """The stage that caps a simulated pipeline: the workers when the loop waits, else the
    slower of the pin thread and the loop (the consumer when the step is most of the loop)."""
    if wait > BOUND_WAIT:
        return "pin" if pin_s >= PIN_BOUND_SHARE * interval else "workers"
    if pin_s > main_s:
        return "pin"
    return "consumer" if step_s >= CONSUMER_BOUND_SHARE * main_s else "main"
