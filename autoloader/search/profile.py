"""What the profile (probe/profiler.py) measured of the pipeline's parts: the record the model
reads. Every cost is in seconds per batch of ``batch_size`` or per sample, so the model can scale
it to any config's batch size. And the main process's torch threads: what they cost its share of
the loop (``Threads``), and uint8 batches in place of float32 as the profile timed the change
(``Uint8Cost``).

# NOTE [ The main process's threads ]
# torch runs the main process's intra-op work (its collate without workers, a step on the CPU) on
# one thread per CPU by default; beside workers or other processes a pool whose threads are
# descheduled waits for the slowest, and the share can take several times longer than with one
# thread. The profile times that share both ways, in pairs with the order alternating (a step's
# jitter would otherwise read as a difference); when one thread reads more than THREADS_SLOWER
# faster in the pairs' median and in all pairs but one, the result says so, and what to set. The
# tuner's own figures are measured with the default count.

# NOTE [ A quarter of the bytes ]
# uint8 pixels hold a quarter of float32's bytes, but not every cost that moves bytes is its
# bytes: what a batch costs per sample and per call (the loop's threaded collate, a copy to the
# device) does not shrink, and the step gets new work: converting every element back to float32
# (``x.float().div_(255)``). So where a batch is large enough (BYTES_MATTER) and holds float32
# tensors, the profile times the change on the run's own samples (probe/profiler.py): each tensor
# seen as uint8 of the same shape (a view, no copy), collated with the loop's threads and with
# one (a worker's), pinned and copied pinned and pageable, each side warm beside the other in
# alternating pairs, and the conversion where the step runs. The what-if (explain/whatif.py)
# scales each cost by the ratio measured and adds the conversion to the step; unmeasured, the
# bytes' share stands in. A share is floored at the bytes' share: a cost cannot shrink faster
# than its bytes (a pair that reads so timed a warm cache). The samples' own work is kept.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .codec import MAX_BATCH_SIZE, MAX_CPUS, Stored, stored
from .growth import Growth
from .methods import MethodCost
from .policy import THREADS_SLOWER


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
    # NOTE [ The main process's threads ].
    main_threads: int | None = stored(None, least=1)
    main_default_s: float | None = None         # the median of the pairs, with the default threads
    main_one_thread_s: float | None = None      # and with one
    main_thread_ratios: tuple[float, ...] = stored((), positive=True)  # each pair's default over one-thread time
    # What the rest of the machine took during the profile: NOTE [ Others on the machine ] in results.py.
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


@dataclass(frozen=True)
class Threads(Stored):
    """The main process's intra-op threads and, where measured, its share of a batch both ways."""
    threads: int = stored(least=1, most=MAX_CPUS)
    batch_size: int
    default_s: float | None = None      # collate and step, seconds a batch, with ``threads`` (the pairs' median)
    one_thread_s: float | None = None   # the same with one thread
    # Each pair's default over one-thread time; stored with what they say (``advise``: its line).
    ratios: tuple[float, ...] = stored((), positive=True, then=(
        "slower", "advise", ("set", lambda t: "torch.set_num_threads(1)" if t.advise else None)))

    @property
    def slower(self) -> float | None:
        if self.default_s is None or not self.one_thread_s:
            return None
        return self.default_s / self.one_thread_s

    @property
    def advise(self) -> bool:
        ratios = self.ratios
        return (self.threads > 1 and len(ratios) >= 2 and statistics.median(ratios) > 1.0 + THREADS_SLOWER
                and sum(r > 1.0 for r in ratios) >= len(ratios) - 1)


def threads_of(profile: Profile | None, threads: int | None) -> Threads | None:
    """The trial process's count (``threads``, as DatasetInfo has it) with the profile's timings."""
    count = threads or (profile.main_threads if profile is not None else None)
    if not count:
        return None
    if profile is None:
        return Threads(count, 0)
    return Threads(count, profile.batch_size, profile.main_default_s, profile.main_one_thread_s,
                   profile.main_thread_ratios)


# Below this a batch's costs are fixed overheads (descriptors, Python) fewer bytes do not shrink:
# neither scaled by the bytes nor timed as uint8.
BYTES_MATTER = 4 * 2**20
# uint8's bytes over float32's, where the profile did not time the change.
UINT8_BYTES = 0.25


def share(pair: tuple[float, float] | None, fallback: float = UINT8_BYTES) -> float:
    """uint8's cost over float32's from a (float32, uint8) pair, within [``fallback``, 1] (NOTE
    [ A quarter of the bytes ]); ``fallback`` (the bytes' share) where unmeasured."""
    if pair is None or pair[0] <= 0:
        return fallback
    return min(1.0, max(fallback, pair[1] / pair[0]))


@dataclass(frozen=True)
class Uint8Cost(Stored):
    """The change to uint8 timed on the run's samples (NOTE [ A quarter of the bytes ]): each a
    (float32, uint8) pair of seconds per batch of the profile's batch size, None where not timed
    (off CUDA: no pin or copy)."""

    byte_share: float                                   # the uint8 batch's bytes over the float32 one's
    loop_collate_s: tuple[float, float]                 # collated with the loop's intra-op threads
    worker_collate_s: tuple[float, float] | None        # with one thread, as a worker collates
    pin_s: tuple[float, float] | None = None            # the collated batch pinned
    h2d_pinned_s: tuple[float, float] | None = None     # a pinned batch copied to the device
    h2d_pageable_s: tuple[float, float] | None = None   # a pageable one
    convert_s: float = 0.0                              # the uint8 batch to float32 / 255 where the step runs
    rounds: int = 0                                     # collate pairs timed
    seconds: float = 0.0                                # the stage's own wall time

    def shares(self) -> tuple[float, float, float, float, float]:
        """uint8's cost over float32's (``share``) for the loop's collate, a worker's, the pin, the
        pinned copy and the pageable one, in that order."""
        return tuple(share(pair, self.byte_share) for pair in (self.loop_collate_s, self.worker_collate_s,
                                                                self.pin_s, self.h2d_pinned_s, self.h2d_pageable_s))
