"""Predicting a config's memory before it runs, and the predicate the search asks: does it fit?

Pure arithmetic over what the trial process reported (its own memory, a sample's bytes, how one
worker's memory grew as it read: NOTE [ Copy on read ] in growth.py) and the bursts measured so
far (their peaks). The run builds one ``MemoryLimits`` once the profile is in, with the ceiling
and the /dev/shm room it has, and hands ``fits`` to the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .codec import Stored, stored
from .growth import Growth
from .methods import MethodCost, method_cost
from .results import TrialResult
from .space import LoaderConfig

# What a forecast's host figure rests on.
MEASURED_PEAK = "measured_peak"   # no growth found: the bursts' peaks tell the run's
EPOCH_END = "epoch_end"           # workers grow as they read: each at the end of its one epoch
KEPT_WORKERS = "kept_workers"     # kept workers grow across epochs: each up to the ceiling
# A breach names the pinned batches when they are this share of the host figure or more.
PINNED_SAID = 0.25


def batch_samples(batch_size: int, length: int | None) -> int:
    """Samples in the largest batch: the batch size, or the whole dataset when shorter."""
    return batch_size if length is None else max(1, min(batch_size, length))


@dataclass(frozen=True)
class MemoryForecast(Stored):
    """A config's predicted memory over a run, in the guard's measure (PSS summed over the tree)."""

    config: LoaderConfig
    basis: str
    host_bytes: int = stored(then=("epoch_host_bytes",))
    shm_bytes: int = stored(then=("workers",))
    flat_bytes: int                  # a worker's, whatever it read (PSS)
    copied_bytes: int = 0            # a worker's copies by its peak over the run
    epoch_copied_bytes: int = 0      # by its first epoch's end
    samples_per_worker: int = 0
    worker_bytes: int | None = None  # a worker's USS at its first epoch's end (None: no growth stage)
    run_worker_bytes: int | None = None
    measured_peak_bytes: int | None = None   # the highest PSS this config's own bursts reached
    growth: Growth | None = stored(None, after="pinned_bytes")
    pinned_bytes: int = 0    # page-locked batches held at once (NOTE [ Pinned batches ]), in host_bytes

    @property
    def workers(self) -> int:
        return self.config.num_workers

    @property
    def epoch_host_bytes(self) -> int:
        """The host figure at the first epoch's end (kept workers go on copying after it)."""
        return self.host_bytes - self.workers * (self.copied_bytes - self.epoch_copied_bytes)


# NOTE [ Pinned batches ]
# With pin_memory=True the pin thread copies each batch into page-locked memory and queues it:
# up to prefetch_factor x num_workers batches in flight may sit pinned, and the loop holds two
# more. PyTorch's caching host allocator rounds each request up to a power of two and keeps freed
# blocks, so over a run it holds the most batches ever pinned at once, each at its rounded size,
# never swapped nor reclaimed (pytorch issue 97432). The forecast counts (prefetch_factor x
# num_workers + 2) batches, each the larger of the batch's bytes rounded up and what a burst at
# that batch size measured (a batch of many tensors rounds each), or the config's own burst's
# peak when that was more.
def pinned_batches(config: LoaderConfig) -> int:
    """Batches a config's loader may hold pinned at once (NOTE [ Pinned batches ])."""
    return config.num_workers * (config.prefetch_factor or 0) + 2 if config.pin_memory else 0


def pinned_block(nbytes: int) -> int:
    """The block the caching host allocator hands out for ``nbytes``: the next power of two."""
    return 1 << max(0, int(nbytes) - 1).bit_length() if nbytes > 0 else 0


def pinned_bytes(config: LoaderConfig, batch_bytes: int, history: Sequence[TrialResult] = ()) -> int:
    """Page-locked host bytes ``config`` is forecast to hold (NOTE [ Pinned batches ])."""
    batches = pinned_batches(config)
    if not batches:
        return 0
    measured = [t for t in history if t.pinned_bytes and t.config.pin_memory
                and t.config.batch_size == config.batch_size]
    per = max([pinned_block(batch_bytes)] + [t.pinned_bytes / pinned_batches(t.config) for t in measured])
    own = max((t.pinned_bytes for t in measured if t.config == config), default=0)
    return int(max(batches * per, own))


def burst_samples(trial: TrialResult) -> float:
    """Samples each worker of a burst had read by its end (an older trial: its window's, a lower bound)."""
    c = trial.config
    if not c.num_workers:
        return 0.0
    if trial.worker_samples is not None:
        return float(trial.worker_samples)
    return trial.batches * c.batch_size / c.num_workers


def burst_readings(history: Sequence[TrialResult], sample_bytes: int, length: int | None) -> list[tuple[int, int]]:
    """(samples each worker had read, its USS) at each burst's end, less the prefetched batches it
    may have held and a mapped file's pages (not copies: NOTE [ Memory by kind ])."""
    out = []
    for t in history:
        c = t.config
        if t.worker_samples is not None and t.worker_uss_bytes is not None and c.num_workers:
            held = (c.prefetch_factor or 0) * sample_bytes * batch_samples(c.batch_size, length)
            out.append((t.worker_samples, t.worker_uss_bytes - held - (t.worker_file_bytes or 0)))
    return out


def forecast_peak(config: LoaderConfig, runner_uss: int, runner_pss: int, sample_bytes: int,
                  history: Sequence[TrialResult], worker_prior: int = 0, length: int | None = None,
                  growth: Growth | None = None, epoch_samples: int | None = None,
                  shuffled: bool = True, methods: Sequence[MethodCost] = ()) -> MemoryForecast:
    """A config's predicted memory before it runs, in the guard's measure: PSS, the tree's
    private pages plus its share of shared ones (USS leaves out the pages the workers share with
    the runner, so a breach would be found only by running the trial).

    The runner, the batches in flight (each worker's ``prefetch_factor`` in /dev/shm, pinned ones
    on top: NOTE [ Pinned batches ]) and each worker's overhead: the median over bursts with
    workers of (peak - runner - batches) / workers less what each had copied by then (a burst
    stored before PSS counts by its USS against the runner's), ``worker_prior`` before any. With
    ``growth`` found, each worker adds what it copies over the run (NOTE [ Copy on read ]): one
    epoch's share of ``epoch_samples`` (``length`` when not given), or the ceiling for kept
    workers. Only bursts of the config's own start method count, and a method other than the
    default's, where the profile measured it (``methods``), takes its worker's memory and growth
    from those figures (NOTE [ What a start method costs ] in methods.py).
    """
    history = [t for t in history if t.config.multiprocessing_context == config.multiprocessing_context]
    own = method_cost(methods, config.multiprocessing_context) if config.multiprocessing_context else None
    if own is not None:
        growth = None
    elif growth is not None:
        growth = growth.with_bursts(burst_readings(history, sample_bytes, length))
    grows = growth is not None and growth.found

    def copied_at(samples: float) -> float:
        return own.copied(samples) if own is not None else growth.copied(samples, shuffled) if grows else 0.0

    def batches(c: LoaderConfig, count: int) -> int:
        return count * sample_bytes * batch_samples(c.batch_size, length)

    def in_flight(c: LoaderConfig) -> int:   # the batches in /dev/shm and in the loop's hands
        return batches(c, c.num_workers * (c.prefetch_factor or 0) + 2)

    def pinned(c: LoaderConfig, trial: TrialResult | None = None) -> int:   # NOTE [ Pinned batches ]
        if trial is not None and trial.pinned_bytes is not None:
            return trial.pinned_bytes
        return pinned_bytes(c, batches(c, 1), history)

    per_worker = []   # each burst's peak less the runner and its batches, a worker, less its copies
    for trial in history:
        c = trial.config
        peak, base = ((trial.peak_pss_bytes, runner_pss) if trial.peak_pss_bytes
                      else (trial.peak_host_bytes, runner_uss))
        if peak and c.num_workers > 0:
            over = max(0, peak - base - in_flight(c) - pinned(c, trial)) / c.num_workers
            per_worker.append(max(0.0, over - copied_at(burst_samples(trial))))
    overhead = sorted(per_worker)[len(per_worker) // 2] if per_worker else (
        own.worker_pss_bytes if own is not None else worker_prior)
    workers = config.num_workers
    basis, copied, epoch_copied, share = MEASURED_PEAK, 0.0, 0.0, 0
    if workers and (own is not None or grows):
        epoch = epoch_samples or length or 0
        share = epoch // workers
        epoch_copied = copied_at(epoch / workers)
        if own is not None:
            copied, basis = epoch_copied, EPOCH_END if epoch_copied > 0 else MEASURED_PEAK
        else:
            copied = growth.run_copied(epoch, workers, config.persistent_workers, shuffled)
            basis = KEPT_WORKERS if config.persistent_workers and shuffled else EPOCH_END
    pinned_now = pinned(config)
    host = runner_pss + workers * (overhead + copied) + in_flight(config) + pinned_now
    shm = batches(config, workers * (config.prefetch_factor or 0))
    peaks = [t.peak_pss_bytes for t in history if t.config == config and t.peak_pss_bytes]
    # A worker's own USS: the most any reading showed beside its copies.
    flat = own.worker_uss_bytes if own is not None else growth.flat_bytes if growth is not None else None
    staged = flat is not None and workers > 0
    if staged:
        flat = max([flat] + [u - copied_at(n) for n, u in burst_readings(history, sample_bytes, length)])
    return MemoryForecast(config, basis, int(host), int(shm), int(overhead), int(copied), int(epoch_copied), share,
                          worker_bytes=int(flat + epoch_copied) if staged else None,
                          run_worker_bytes=int(flat + copied) if staged else None,
                          measured_peak_bytes=max(peaks, default=None), growth=growth, pinned_bytes=pinned_now)


@dataclass(frozen=True)
class MemoryLimits:
    """The limits a config's predicted memory must meet, fixed for the run: one rank's host
    ceiling (PSS) and the free /dev/shm, which ``ranks`` ranks' workers fill together; and what
    ``forecast_peak`` starts from."""

    ceiling: int
    shm_free: int | None
    runner_uss: int
    runner_pss: int
    sample_bytes: int
    length: int | None = None
    worker_prior: int = 0
    ranks: int = 1
    growth: Growth | None = None
    epoch_samples: int | None = None
    shuffled: bool = True
    methods: tuple[MethodCost, ...] = ()   # the profile's start methods, where measured

    def forecast(self, config: LoaderConfig, history: Sequence[TrialResult]) -> MemoryForecast:
        return forecast_peak(config, self.runner_uss, self.runner_pss, self.sample_bytes, history,
                             worker_prior=self.worker_prior, length=self.length, growth=self.growth,
                             epoch_samples=self.epoch_samples, shuffled=self.shuffled, methods=self.methods)

    def breach(self, config: LoaderConfig, history: Sequence[TrialResult]) -> str | None:
        """Why ``config`` is predicted past a limit, or None when it fits."""
        f = self.forecast(config, history)
        if f.host_bytes > self.ceiling:
            per = f" (one rank's share of {self.ranks})" if self.ranks > 1 else ""
            when = ""
            if f.basis != MEASURED_PEAK:
                over = ("over the run (kept workers keep what they copy, up to a full copy each)"
                        if f.basis == KEPT_WORKERS else "at the end of an epoch")
                who = f"each of the {f.workers} workers copies" if f.workers > 1 else "its one worker copies"
                what = ("anonymous memory (copies; the mapped file's pages are not counted)"
                        if f.growth is not None and f.growth.maps_file else "the dataset's Python objects")
                when = f" {over}: {who} {f.copied_bytes / 2**20:.0f} MiB of {what} as it reads them"
            if f.pinned_bytes >= PINNED_SAID * f.host_bytes:
                c = f.config
                when += (f" ({f.pinned_bytes / 2**30:.2f} GiB of it pinned: prefetch_factor {c.prefetch_factor or 0} x "
                         f"{c.num_workers} workers + 2 batches, page-locked)")
            return (f"predicted {f.host_bytes / 2**30:.2f} GiB host memory{when} > {self.ceiling / 2**30:.2f} GiB "
                    f"ceiling{per}")
        shm = f.shm_bytes * self.ranks   # every rank's workers fill the one /dev/shm
        if self.shm_free is not None and config.num_workers and shm > self.shm_free:
            return f"predicted {shm / 2**30:.2f} GiB in /dev/shm > {self.shm_free / 2**30:.2f} GiB free"
        return None

    def fits(self, config: LoaderConfig, history: Sequence[TrialResult]) -> bool:
        return self.breach(config, history) is None
