"""A finalist's worker pool kept between the final's readings, in the trial process.

# NOTE [ A kept pool in the final ]
# The final reads the same few configs round after round. A fresh reading of a config with many
# workers pays their start and their first batches (made all at once: a whole worker cycle before
# the first arrives), the first clump skipped, and a teardown: on the GPU bench the cpus-1 rule's
# 15 workers on 192 MiB batches took 1-3 s to start and about 1 s to end around a window of 3-4.5 s
# (results/benchmarks/README.md). A config with kept workers (persistent_workers=True) keeps them
# from one epoch to the next in training, idle while the loop does something else (an evaluation,
# a checkpoint), and the final can keep them the same way: idle while the other finalists are
# read, resumed for its next reading. An idle pool has made prefetch_factor x num_workers batches
# ahead, which the loop then takes at its own pace, faster than busy workers make them; so a
# resumed reading skips that backlog and two batches more (``resumed``) where a fresh one skips
# the first clump (num_workers + 2), then reads the same window by the same stop rule. What it
# saves is every reading's start and teardown but the first's.
# A pool is kept only once it is idle (``settle``): when a reading's window ends its workers are
# still making the backlog, and the pin thread pinning it, for up to prefetch_factor worker cycles.
# Left to do that while the next config is read, they take its CPUs, its memory bandwidth and the
# CUDA driver's lock: on the GPU bench a kept rule's 15 workers on 192 MiB batches took the next
# reading of num_workers=0 from 1,643/s to 89/s and 161/s (results/benchmarks/run-20261205/
# quick2-h100), and the pick went to the rule. So the reading waits, after its window, until
# every batch its iterator asked for is made (and pinned): the data queue holds as many as are
# outstanding. That wait is charged to the reading's teardown; a pool that does not settle within
# SETTLE_CAP_S is ended as any other, and the next reading of its config starts afresh.
# The run keeps pools only in the final, and only where the memory forecasts of all the final's
# configs fit the ceiling and /dev/shm together (search/memory.py, ``MemoryLimits.fit_together``):
# a kept pool's workers, its backlog and its pinned batches stay in the trial's tree while the
# others are read. Any other reading (the search's, the profile) ends every kept pool first, so no
# reading that teaches the memory model holds one. The reap that ends each reading spares the
# kept workers (workers.reap_children); the driver's Stop, or a kill, ends them with the process.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..search.burst_rule import BurstSettings
from ..search.space import LoaderConfig
from .workers import shutdown_iterators


@dataclass
class Kept:
    """One kept pool: its loader, its live iterator (which holds the workers) and the collate
    that counts what each worker delivered, when the trial wraps one."""
    loader: Any
    iterator: Any
    counted: Any = None


# The longest a reading waits for its pool to go idle before the pool is ended instead: several
# worker cycles of the GPU bench's slowest rule (about 1 s each), a fraction of a fresh start's cost
# at worst.
SETTLE_CAP_S = 6.0
SETTLE_POLL_S = 0.02


def idle(iterator: Any) -> bool | None:
    """Whether a DataLoader iterator's workers have made (and its pin thread pinned) every batch
    it asked for: its data queue holds as many results as it has outstanding. None when the
    iterator does not show these (not a multi-process DataLoader iterator of the torch known)."""
    data_queue = getattr(iterator, "_data_queue", None)
    outstanding = getattr(iterator, "_tasks_outstanding", None)
    if data_queue is None or not isinstance(outstanding, int):
        return None
    try:
        return data_queue.qsize() >= outstanding
    except (NotImplementedError, OSError):   # multiprocessing's qsize where sem_getvalue is missing
        return None


def settle(iterator: Any, cap_s: float = SETTLE_CAP_S, beat: Callable[[], None] | None = None,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until ``iterator``'s pool is idle (``idle``), at most ``cap_s``; whether it is
    (NOTE [ A kept pool in the final ]). ``beat`` is called about once a second meanwhile."""
    start = last = clock()
    while True:
        state = idle(iterator)
        if state is None:
            return False
        if state:
            return True
        now = clock()
        if now - start >= cap_s:
            return False
        if beat is not None and now - last >= 1.0:
            last = now
            beat()
        sleep(SETTLE_POLL_S)


def keepable(config: LoaderConfig, keep: bool, graph: bool) -> bool:
    """Whether a reading asked to ``keep`` keeps its pool: a DataLoader's (not a torchdata.nodes
    graph's) with workers it keeps between epochs."""
    return keep and not graph and config.num_workers > 0 and bool(config.persistent_workers)


def resumed(settings: BurstSettings, config: LoaderConfig) -> BurstSettings:
    """``settings`` for a resumed pool: the burst skips num_workers + extra_skip batches after its
    first, and an idle pool has prefetch_factor x num_workers of them made, and two more."""
    backlog = (config.prefetch_factor or 2) * config.num_workers + settings.extra_skip
    return dataclasses.replace(settings, extra_skip=max(settings.extra_skip, backlog - config.num_workers))


class KeptPools:
    """The trial process's kept pools, by config."""

    def __init__(self) -> None:
        self._pools: dict[LoaderConfig, Kept] = {}

    def __bool__(self) -> bool:
        return bool(self._pools)

    def take(self, config: LoaderConfig) -> Kept | None:
        """The pool kept for ``config``, no longer kept (a reading that fails ends it)."""
        return self._pools.pop(config, None)

    def put(self, config: LoaderConfig, kept: Kept) -> None:
        self._pools[config] = kept

    def pids(self) -> frozenset:
        """The kept workers' pids: the reap at a reading's end spares them."""
        return frozenset(w.pid for kept in self._pools.values()
                         for w in getattr(kept.iterator, "_workers", ()) if w.pid is not None)

    def release(self) -> bool:
        """End every kept pool now (the trial then returns what their batches held to the
        caches); whether there was any."""
        if not self._pools:
            return False
        held = [kept.iterator for kept in self._pools.values()]
        self._pools.clear()
        shutdown_iterators([weakref.ref(it) for it in held])
        del held
        gc.collect()
        return True
