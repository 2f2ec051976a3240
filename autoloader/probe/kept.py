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
# saves is every reading's start, first worker cycle and teardown but the first's.
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
import weakref
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
