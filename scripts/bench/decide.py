"""The one adapter between the bench and the tuner's internals.

``replay`` decides a recorded tuner run again with the search strategy and the final's choice of
the code checked out here. Those live inside the tuner (private names, module layout), which
changes; every name the replay needs from the tuner is taken here and nowhere else (and the
tuner's default budget, which the run's time plan needs), so a change of the tuner's insides is
mended in this file alone. What each function decides is the tuner's own rule, unchanged: this
file only forwards. (The harness measures with autoloader's probe, ``autoloader.probe``, on
purpose: the same trial process the tuner uses. That is not the tuner's decision logic.)
"""

from __future__ import annotations

from typing import Sequence

from autoloader.knee_first import KneeFirst
from autoloader.results import TrialResult
from autoloader.space import LoaderConfig
from autoloader.tuner import DEFAULT_BUDGET_S, FinalRound, _choose, _finalists, search_space

__all__ = ["FinalRound", "TrialResult", "choose", "default_budget_s", "final_round", "finalists", "keeps_up",
           "strategy", "trial_from_dict"]


def default_budget_s() -> float:
    """The budget ``autoloader tune`` uses when no --budget is given."""
    return float(DEFAULT_BUDGET_S)


def trial_from_dict(data: dict) -> TrialResult:
    """A recorded trial (TrialResult.to_dict(), as the tuner's JSON holds it)."""
    return TrialResult.from_dict(data)


def strategy(batch_size: int, cpus: int, device: str = "cuda") -> KneeFirst:
    """The search a tuning run with ``--batch-size batch_size`` on ``device`` makes: its
    ``propose(history)`` gives the next config, or None when it is done."""
    return KneeFirst(search_space((batch_size,), cpus, device), cpus)


def final_round(config: LoaderConfig, rates: Sequence[float], waits: Sequence[float]) -> FinalRound:
    """One finalist's rounds as the tuner's final records them."""
    return FinalRound(config, tuple(rates), tuple(waits))


def finalists(trials: Sequence[TrialResult]) -> list[LoaderConfig]:
    """The configs the tuner's final would hold after ``trials``, in order."""
    return _finalists(trials)


def choose(finals: Sequence[FinalRound], trials: Sequence[TrialResult]) -> LoaderConfig:
    """The config the tuner picks from its final rounds."""
    return _choose(finals, trials).config


def keeps_up(trial: TrialResult) -> bool:
    """Whether the trial kept the consumer fed (NOTE [ Keeping up ] in autoloader/results.py)."""
    return trial.keeps_up
