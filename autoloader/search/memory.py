"""Predicting a config's memory before it runs, and the predicate the search asks: does it fit?

Pure arithmetic over what the trial process reported (its own memory, a sample's bytes) and the
bursts measured so far (their peaks). The run builds one ``MemoryLimits`` once the profile is in,
with the ceiling and the /dev/shm room it has, and hands ``fits`` to the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .results import TrialResult
from .space import LoaderConfig


def batch_samples(batch_size: int, length: int | None) -> int:
    """Samples in the largest batch a loader makes: the batch size, or the whole dataset when
    it is shorter (the only batch is then partial)."""
    return batch_size if length is None else max(1, min(batch_size, length))


def predict_peak(config, runner_uss: int, runner_pss: int, sample_bytes: int, history,
                 worker_prior: int = 0, length: int | None = None) -> tuple[int, int]:
    """Predicted (host bytes, /dev/shm bytes) of a config before running it, in the guard's
    measure: PSS, the tree's private pages plus its share of shared ones (USS left out the
    pages the workers share with the runner, so predictions ran low and a breach was found
    only by running the trial).

    Batches in flight: each worker holds up to ``prefetch_factor`` finished batches in /dev/shm,
    and pinning copies each into page-locked memory on top. Per-worker overhead (the interpreter,
    the dataset's copy-on-read pages) is learnt from measured trials: the median, over trials
    with workers, of (peak - runner - batches in flight) / workers; a trial stored before PSS was
    recorded counts by its USS against the runner's USS. Before any trial with workers,
    ``worker_prior`` (one worker's PSS as the profile saw it) stands in. A dataset of ``length``
    shorter than the batch size makes batches of ``length`` samples.
    """
    def samples(c) -> int:
        return batch_samples(c.batch_size, length)

    batch = sample_bytes * samples(config)

    def in_flight(c) -> int:
        return (c.num_workers * (c.prefetch_factor or 0) + 2) * sample_bytes * samples(c) * (2 if c.pin_memory else 1)
    per_worker = []
    for trial in history:
        c = trial.config
        peak, base = ((trial.peak_pss_bytes, runner_pss) if trial.peak_pss_bytes
                      else (trial.peak_host_bytes, runner_uss))
        if peak and c.num_workers > 0:
            per_worker.append(max(0, peak - base - in_flight(c)) / c.num_workers)
    overhead = sorted(per_worker)[len(per_worker) // 2] if per_worker else worker_prior
    host = runner_pss + config.num_workers * overhead + in_flight(config)
    shm = config.num_workers * (config.prefetch_factor or 0) * batch
    return int(host), int(shm)


@dataclass(frozen=True)
class MemoryLimits:
    """The limits a config's predicted memory must meet, fixed for the run: one rank's host
    ceiling (PSS) and the free /dev/shm (read when the run started), which ``ranks`` ranks' workers
    fill together; and what the predictions start from (``predict_peak``)."""

    ceiling: int
    shm_free: int | None
    runner_uss: int
    runner_pss: int
    sample_bytes: int
    length: int | None = None
    worker_prior: int = 0
    ranks: int = 1

    def breach(self, config: LoaderConfig, history: Sequence[TrialResult]) -> str | None:
        """Why ``config`` is predicted past a limit, or None when it fits."""
        host, shm = predict_peak(config, self.runner_uss, self.runner_pss, self.sample_bytes, history,
                                 worker_prior=self.worker_prior, length=self.length)
        if host > self.ceiling:
            per = f" (one rank's share of {self.ranks})" if self.ranks > 1 else ""
            return f"predicted {host / 2**30:.2f} GiB host memory > {self.ceiling / 2**30:.2f} GiB ceiling{per}"
        shm *= self.ranks   # every rank's workers fill the one /dev/shm
        if self.shm_free is not None and config.num_workers and shm > self.shm_free:
            return f"predicted {shm / 2**30:.2f} GiB in /dev/shm > {self.shm_free / 2**30:.2f} GiB free"
        return None

    def fits(self, config: LoaderConfig, history: Sequence[TrialResult]) -> bool:
        return self.breach(config, history) is None
