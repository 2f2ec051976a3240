"""How busy the machine was while a run measured: a summary of what others took.

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

from collections.abc import Sequence
from dataclasses import dataclass

from .codec import Stored, stored
from .policy import BUSY_SHARE, busy_at, load_widening
from .profile import Profile
from .results import TrialResult


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
