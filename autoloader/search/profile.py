"""What the profile (probe/profiler.py) measured of the pipeline's parts: the record the model
reads. Every cost is in seconds per batch of ``batch_size`` or per sample, so the model can scale
it to any config's batch size."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .codec import MAX_BATCH_SIZE, MAX_CPUS, Stored, stored
from .growth import Growth
from .methods import MethodCost
from .uint8 import Uint8Cost


def quantile(values, q: float) -> float:
    """The q-quantile of ``values`` by linear interpolation (0 for none)."""
    data = sorted(values)
    if not data:
        return 0.0
    pos = q * (len(data) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


@dataclass(frozen=True)
class Profile(Stored):
    """The pipeline's parts, each measured once with enough repeats to be stable."""

    batch_size: int = stored(least=1, most=MAX_BATCH_SIZE)   # the batch size the per-batch costs were measured at
    sample_s: tuple[float, ...]      # one worker's cost of each sample timed (__getitem__)
    collate_s: float                 # collating one batch, per batch
    sample_bytes: int                # bytes of one collated sample
    recv_s: float                    # the main process's cost of receiving one batch from a worker
    pin_s: float | None              # pinning one batch (None off CUDA)
    h2d_pinned_s: float | None       # host-to-device copy of a pinned batch (None off CUDA)
    h2d_pageable_s: float | None     # the same from pageable memory
    step_s: float                    # the consumer on a batch already where it runs (resident)
    startup_s: float                 # one worker's start: iter() to first batch, less that batch's work
    worker_pss: int | None           # one worker's memory (PSS) once it has made batches
    cpus: float = stored(positive=True, most=MAX_CPUS)   # CPUs this process may really use (affinity and cgroup quota)
    epoch_batches: int | None        # batches an epoch holds at ``batch_size`` (None: iterable)
    seconds: float = 0.0             # the profile's own wall time
    sample_cpu_share: float = 1.0    # the share of a sample's cost spent on a CPU (not waiting)
    # Without workers, the loop's collate (all its threads) and pin (no shared pages to fault in).
    collate_main_s: float | None = None
    pin_local_s: float | None = None
    recv_busy_s: float | None = None   # NOTE [ A busy worker's receive ] in model.py; None: not measured
    growth: Growth | None = None       # NOTE [ Copy on read ] in growth.py; None where not measured
    # Each step call's time (NOTE [ Headroom ] in model_first.py); empty where not measured.
    step_samples: tuple[float, ...] = ()
    # NOTE [ The main process's threads ] in threads.py.
    main_threads: int | None = stored(None, least=1)
    main_default_s: float | None = None         # the median of the pairs, with the default threads
    main_one_thread_s: float | None = None      # and with one
    main_thread_ratios: tuple[float, ...] = stored((), positive=True)  # each pair's default over one-thread time
    # What the rest of the machine took during the profile: NOTE [ Others on the machine ] in load.py.
    others_cpus: float | None = None
    steal_cpus: float | None = None
    # A stream read by two workers (NOTE [ Counting what each worker delivered ] in probe/shards.py).
    stream_delivered: tuple[int, ...] = ()
    stream_duplicates: float | None = None
    methods: tuple[MethodCost, ...] = stored((), sparse=True)   # NOTE [ What a start method costs ]
    # The sample stage's share waiting for a CPU, taken out of every cost above (NOTE [ A profile
    # read under load ] in probe/profiler.py); None where not read.
    sample_delay_share: float | None = None
    recv_fixed_s: float | None = None   # NOTE [ The receive's two parts ] in model.py; None: one size timed
    uint8: Uint8Cost | None = stored(None, sparse=True)   # NOTE [ A quarter of the bytes ]; None: not timed
    stage_s: tuple[tuple[str, float], ...] = ()   # each stage's wall seconds, in order (probe/profiler.py)
    # False for the stand-in when the profile could not be measured (``fallback_profile``): no
    # figure is predicted and no knee found.
    measured: bool = stored(True, then=("sample_quantiles",))
    cut_s: float | None = stored(None, sparse=True)   # NOTE [ A profile within its share ]; None: whole

    @property
    def batch_bytes(self) -> int:
        return self.sample_bytes * self.batch_size

    @property
    def sample_median_s(self) -> float:
        return statistics.median(self.sample_s) if self.sample_s else 0.0

    def sample_quantiles(self) -> dict[str, float]:
        """The per-sample cost's median, p90, p99 and max."""
        return {"median": quantile(self.sample_s, 0.5), "p90": quantile(self.sample_s, 0.9),
                "p99": quantile(self.sample_s, 0.99), "max": max(self.sample_s, default=0.0)}

    def worker_batch_s(self, batch_size: int | None = None) -> float:
        """One worker's mean time to make a batch: its samples and its share of collate."""
        size = batch_size or self.batch_size
        mean = statistics.fmean(self.sample_s) if self.sample_s else 0.0
        return size * mean + self.collate_s * size / self.batch_size

