"""Frozen records of what a trial measured, and how failures are named; and how busy the machine
was while a run measured (``MachineLoad``): a summary of what others took.

# NOTE [ Others on the machine ]
# A rate measured beside other processes is what the machine gives beside them, and moves with
# what they do. So the driver measures, over the profile and every trial, the CPU time the usable
# CPUs spent busy less this run's own processes' (probe/load.py): what the others took, in CPUs'
# worth, steal included. A measurement where they took more than BUSY_SHARE (Thresholds.busy) is
# busy, and a run is busy when its measurements on the whole were, or its final was. Then:
# the trial lines and the table say so; the final's ties widen (policy.load_widening); the
# configs that decide the pick get up to BUSY_ROUNDS more rounds (tuning/final.py); a nightly
# comparison is inconclusive, and the result never becomes a later run's baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .codec import Stored, stored
from .policy import BUSY_SHARE, FINAL_TIE, SINGLE_ROUND_MARGIN, busy_at, keeps_up_at, load_widening
from .profile import Profile
from .space import LoaderConfig

# Trial outcomes.
OK = "ok"                  # measured; a candidate
CONSTRAINT = "constraint"  # ran or was predicted to break a limit (memory, /dev/shm): completed, infeasible
FAILED = "failed"          # crashed or raised: a fact about this config, never retried
HANG = "hang"              # the watchdog ended it

# NOTE [ Keeping up ]
# When the consumer waits in next(it) for at most KEEPS_UP_WAIT of a window, every batch was
# ready before the step asked for it, so more loader capacity can speed the loop up by at most
# that share: such configs' rates differ by the consumer's noise, never in favour of more
# workers. So the final calls a keeping-up config a tie with a best that keeps up too and reads
# up to KEEPS_UP_TIE more, when the two are of one kind (policy.same_kind: batch size, pinning
# and persistence change costs a steady window's wait does not see).

# Failure causes, as reported to the user and stored with the trial.
CAUSES = {
    "worker_killed": "a DataLoader worker was killed (the kernel's OOM killer, or a signal)",
    "worker_segfault": "a DataLoader worker crashed with a segmentation fault",
    "runner_killed": "the trial process itself was killed or crashed",
    "shm_exhausted": "/dev/shm ran out (bus error or no space in shared memory)",
    "host_memory": "host memory of the loader's processes passed the --max-memory ceiling",
    "predicted_memory": "predicted host memory or /dev/shm use is past the ceiling; not run",
    "cuda_oom": "CUDA ran out of memory",
    "dataset_error": "the dataset's __getitem__ raised",
    "collate_error": "collating samples into a batch raised",
    "sampler_error": "drawing the next indices from the sampler raised",
    "step_error": "the step raised",
    "hang": "no progress before the watchdog's timeout",
    "budget_ended": "the run's budget ended while it ran, before the watchdog's own timeout could call it a hang",
    "error": "the trial raised",
    "loader_arguments": "DataLoader refused the fixed arguments for this config",
}
# Bad input, which ends the run as a usage error (NOTE [ Fixed DataLoader arguments ]).
LOADER_ARGUMENTS = "loader_arguments"
# Ended by the wall bound while it made progress: stored as HANG (a run with more budget
# measures it again), but named for what it was.
BUDGET_ENDED = "budget_ended"


@dataclass(frozen=True)
class TrialResult(Stored):
    """One trial of one config. Rates are samples per second of the whole loop."""

    config: LoaderConfig = stored(full=True)
    status: str = stored(choices=(OK, CONSTRAINT, FAILED, HANG))
    samples_per_s: float | None = None      # long-run estimate (epoch restarts included)
    steady_samples_per_s: float | None = None
    rel_interval: float | None = None       # 95% half-width of the rate, relative
    wait_fraction: float | None = None      # share of the window spent in next(it)
    consumer_fraction: float | None = None  # share the consumer was busy (CUDA events on CUDA)
    gpu_util: float | None = None           # NVML, averaged over the window; second opinion
    startup_s: float | None = None          # iter() to first batch
    lead_s: float | None = None             # the first batch to the window: the first clump skipped
    teardown_s: float | None = None         # the loader's end: its workers stopped, memory released
    epoch_restart_s: float | None = None    # cost of one epoch boundary, measured or modelled
    peak_host_bytes: int | None = None      # summed USS of the trial process and its workers
    peak_pss_bytes: int | None = None       # summed PSS of the same: what the memory guard compares
    peak_shm_bytes: int | None = None       # /dev/shm growth during the trial
    # At the burst's end, samples each worker had read and their mean USS (NOTE [ Copy on read ]).
    worker_samples: int | None = None
    worker_uss_bytes: int | None = None
    worker_file_bytes: int | None = None    # of that USS, a mapped file's pages (NOTE [ Memory by kind ])
    gpu_peak_bytes: int | None = None
    # A stream's samples each worker made, and the share another made too (NOTE [ Counting what
    # each worker delivered ] in probe/shards.py).
    worker_delivered: tuple[int, ...] | None = None
    duplicate_share: float | None = None
    pinned_bytes: int | None = None         # page-locked, at the peak (NOTE [ Pinned batches ] in memory.py)
    batch_bytes: int | None = None
    batches: int = 0
    window_s: float = 0.0
    epochs_crossed: int = 0
    seconds: float = 0.0                    # wall time of the whole trial
    pruned: bool = False                    # stopped early, clearly behind the best: rate is rough
    stalled_s: float | None = None          # HANG: seconds since the trial's last batch when it was ended
    cause: str | None = None
    error: str | None = None
    os_error: bool = False                  # FAILED by an OSError: a resumed run measures it again
    rank_samples_per_s: tuple[float, ...] | None = None   # a node's: each rank's, rank 0 first
    # CPUs' worth over the trial (NOTE [ Others on the machine ] in results.py):
    others_cpus: float | None = None        # other processes' share of the usable CPUs, steal included
    steal_cpus: float | None = None         # the hypervisor's steal (other guests), where the kernel says
    tree_cpus: float | None = None          # this run's own processes: the driver, the trial process, its workers

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def keeps_up(self) -> bool:
        """Measured in full, and NOTE [ Keeping up ]."""
        return self.status == OK and not self.pruned and keeps_up_at(self.wait_fraction)

    def _read_back(self) -> "TrialResult":
        if self.status == OK and not self.samples_per_s:
            raise ValueError(f"samples_per_s is {self.samples_per_s!r}, not a positive rate (the trial is {OK})")
        return self

    def describe_failure(self) -> str:
        text = CAUSES.get(self.cause or "error", self.cause or "")
        return f"{text}: {self.error}" if self.error else text


def best_burst(history: Sequence[TrialResult], config: LoaderConfig) -> float:
    """``config``'s best rate over its bursts measured in full; 0.0 if none."""
    return max((t.samples_per_s or 0.0 for t in history if t.config == config and t.status == OK and not t.pruned),
               default=0.0)


def burst_reach(history: Sequence[TrialResult], config: LoaderConfig) -> float:
    """The top of the 95% interval of ``config``'s bursts measured in full; 0.0 if none."""
    return max((t.samples_per_s * (1.0 + (t.rel_interval if t.rel_interval is not None
                                          and math.isfinite(t.rel_interval) else 0.0))
                for t in history if t.config == config and t.status == OK and not t.pruned and t.samples_per_s),
               default=0.0)


# NOTE [ Loose readings ]
# One burst's rate moves by more than the gaps the final must find, so a config joins the final
# against the one it challenges when its burst read past SINGLE_ROUND_MARGIN above it. But a
# burst whose interval is wide says less than its point: one that read level (within FINAL_TIE)
# or ahead, whose interval reaches past that margin, may be better by more than a burst moves,
# so it goes to the final too. A tight reading a few percent ahead stays out.
def challenges(history: Sequence[TrialResult], config: LoaderConfig, mine: float) -> bool:
    """Whether ``config``'s bursts challenge a config whose burst read ``mine`` (NOTE [ Loose readings ])."""
    theirs = best_burst(history, config)
    margin = mine * (1.0 + SINGLE_ROUND_MARGIN)
    return theirs > margin or (mine > 0 and theirs >= mine * (1.0 - FINAL_TIE)
                               and burst_reach(history, config) > margin)


@dataclass(frozen=True)
class BurstError(Stored):
    """The model's rate for one burst's config against the burst's own (``Model.model_error`` in model.py)."""
    config: str          # the config's key
    predicted: float
    measured: float = stored(positive=True, then=("error",))

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


@dataclass(frozen=True)
class BusySpan(Stored):
    """Consecutive search trials (numbered from 1) during which others took more than BUSY_SHARE."""
    first: int
    last: int
    others_cpus: float   # their mean


@dataclass(frozen=True)
class MachineLoad(Stored):
    """What others took of the usable CPUs while the run measured (NOTE [ Others on the machine ])."""
    usable_cpus: float = stored(positive=True)
    others_cpus: float | None = stored(then=("share",))   # the mean over every measurement, by its wall time
    peak_others_cpus: float | None      # the most during any one measurement
    steal_cpus: float | None
    profile_others_cpus: float | None = None
    final_others_cpus: float | None = stored(None, then=("busy",))
    busy_spans: tuple[BusySpan, ...] = stored((), key="busy_trials")
    measured_s: float = 0.0
    threshold: float = stored(BUSY_SHARE, positive=True)   # past it a measurement is busy (Thresholds.busy)

    @property
    def share(self) -> float | None:
        return None if self.others_cpus is None else self.others_cpus / self.usable_cpus

    @property
    def final_share(self) -> float | None:
        return None if self.final_others_cpus is None else self.final_others_cpus / self.usable_cpus

    @property
    def busy(self) -> bool:
        """The run on the whole, or its final, was busy."""
        return busy_at(self.share, self.threshold) or busy_at(self.final_share, self.threshold)

    @property
    def widen(self) -> float:
        """How much the final's ties widen (policy.load_widening), at the final's share (else the run's)."""
        share = self.final_share if self.final_share is not None else self.share
        return load_widening(share, self.threshold) if self.busy else 0.0


def busy_trial(trial: TrialResult, usable_cpus: float, threshold: float = BUSY_SHARE) -> bool:
    """Whether others took more than ``threshold`` of the usable CPUs during ``trial``."""
    return trial.others_cpus is not None and busy_at(trial.others_cpus / usable_cpus, threshold)


def busy_spans(trials: Sequence[TrialResult], usable_cpus: float,
               threshold: float = BUSY_SHARE) -> tuple[BusySpan, ...]:
    """The runs of consecutive busy trials, numbered from 1 as the trial lines number them."""
    spans, run = [], []
    for number, trial in enumerate(list(trials) + [None], start=1):
        if trial is not None and busy_trial(trial, usable_cpus, threshold):
            run.append((number, trial.others_cpus))
            continue
        if run:
            spans.append(BusySpan(run[0][0], run[-1][0], sum(o for _, o in run) / len(run)))
            run = []
    return tuple(spans)


def _mean(spans: Sequence[tuple[float, float]]) -> float | None:
    seconds = sum(s for _, s in spans)
    return sum(v * s for v, s in spans) / seconds if seconds > 0 else None


def machine_load(usable_cpus: float, profile: Profile | None, trials: Sequence[TrialResult],
                 final: Sequence[TrialResult] = (), threshold: float = BUSY_SHARE) -> MachineLoad:
    """The summary over the profile, the search's ``trials`` and the ``final``'s measurements."""
    usable = max(1.0, float(usable_cpus))

    def spans(records: Sequence[TrialResult], field: str) -> list[tuple[float, float]]:
        return [(getattr(t, field), t.seconds or 1.0) for t in records if getattr(t, field) is not None]

    others = spans(trials, "others_cpus") + spans(final, "others_cpus")
    steal = spans(trials, "steal_cpus") + spans(final, "steal_cpus")
    if profile is not None and profile.others_cpus is not None:
        others.append((profile.others_cpus, profile.seconds or 1.0))
        if profile.steal_cpus is not None:
            steal.append((profile.steal_cpus, profile.seconds or 1.0))
    final_others = spans(final, "others_cpus")
    return MachineLoad(usable, _mean(others), max((o for o, _ in others), default=None), _mean(steal),
                       profile.others_cpus if profile is not None else None, _mean(final_others),
                       busy_spans(trials, usable, threshold), sum(s for _, s in others), threshold)
