"""What the profile measured about the input pipeline's parts: the record the model reads.

The trial process fills it (probe/profiler.py); the driver keeps it with the run. Every cost is
per batch of ``batch_size`` samples or per sample, in seconds, so the model can scale it to the
batch size of any config. Pure data: nothing here measures or imports torch.
"""

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
    # Without workers the loop collates with all of its intra-op threads, and pins a batch it
    # made itself (no shared-memory pages to fault in): each cheaper than a worker's.
    collate_main_s: float | None = None
    pin_local_s: float | None = None
    # Receiving a batch from a worker that is busy making the next one: NOTE [ A busy worker's
    # receive ] in model.py. None where it was not measured (the receive above stands in).
    recv_busy_s: float | None = None
    # One fresh worker's USS against the samples it read: NOTE [ Copy on read ] in growth.py. None
    # where it was not measured (an iterable dataset, one too small to copy much).
    growth: Growth | None = None
    # The step's own jitter: each call's time on the resident batch (NOTE [ Headroom ] in
    # model_first.py); empty where not measured (the step then counts as steady).
    step_samples: tuple[float, ...] = ()
    # The main process's torch intra-op threads, and its share of a batch (its own collate and the
    # step) timed with them and with one: NOTE [ The main process's threads ] in threads.py.
    main_threads: int | None = stored(None, least=1)
    main_default_s: float | None = None         # the median of the pairs, with the default threads
    main_one_thread_s: float | None = None      # and with one
    main_thread_ratios: tuple[float, ...] = stored((), positive=True)  # each pair's default over one-thread time
    # What the rest of the machine took during the profile: NOTE [ Others on the machine ] in load.py.
    others_cpus: float | None = None
    steal_cpus: float | None = None
    # An iterable dataset's stream read by two workers: the samples each made and the share of
    # those digested another made too (NOTE [ Counting what each worker delivered ] in
    # probe/shards.py); empty and None where not measured.
    stream_delivered: tuple[int, ...] = ()
    stream_duplicates: float | None = None
    # Each start method's start-up and worker memory, where the start method's gate was open
    # (NOTE [ What a start method costs ] in methods.py); empty where not measured.
    methods: tuple[MethodCost, ...] = stored((), sparse=True)
    # The share of the sample stage's wall time its thread waited for a CPU (others' load), taken
    # out of every cost above: NOTE [ A profile read under load ] in probe/profiler.py. None where
    # the waits could not be read (the costs then hold them).
    sample_delay_share: float | None = None
    # The part of ``recv_s`` that does not grow with the batch's bytes (NOTE [ The receive's two
    # parts ] in model.py); None where only one size was timed (the receive then scales whole).
    recv_fixed_s: float | None = None
    # The batch's float32 tensors as uint8, timed against them: NOTE [ A quarter of the bytes ] in
    # uint8.py. None where not timed (a small batch, none of float32, an older record).
    uint8: Uint8Cost | None = stored(None, sparse=True)
    # Each stage's wall seconds, in order (the module docstring of probe/profiler.py names them):
    # where the profile's time went. Empty in older records.
    stage_s: tuple[tuple[str, float], ...] = ()
    # False for the stand-in made from the set-up's one batch when the profile could not be
    # measured (tuning/measured.py's ``fallback_profile``): the model has no curve to draw from it,
    # so no figure is predicted and no knee found.
    measured: bool = stored(True, then=("sample_quantiles",))
    # The profile's share of the budget when it reached it, and so skipped what would pass it
    # (NOTE [ A profile within its share ] in probe/profiler.py); None when it ran whole.
    cut_s: float | None = stored(None, sparse=True)

    @property
    def batch_bytes(self) -> int:
        return self.sample_bytes * self.batch_size

    @property
    def sample_median_s(self) -> float:
        return statistics.median(self.sample_s) if self.sample_s else 0.0

    def sample_quantiles(self) -> dict[str, float]:
        """The per-sample cost's median, p90, p99 and max: the tail decides prefetch depth and the
        head-of-line blocking of in-order delivery."""
        return {"median": quantile(self.sample_s, 0.5), "p90": quantile(self.sample_s, 0.9),
                "p99": quantile(self.sample_s, 0.99), "max": max(self.sample_s, default=0.0)}

    def worker_batch_s(self, batch_size: int | None = None) -> float:
        """One worker's mean time to make a batch: its samples and its share of collate."""
        size = batch_size or self.batch_size
        mean = statistics.fmean(self.sample_s) if self.sample_s else 0.0
        return size * mean + self.collate_s * size / self.batch_size

