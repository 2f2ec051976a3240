"""The run's clock: how much of the budget is spent, and what the next steps will cost.

The search stops when what is left, less the time kept back for the final, cannot hold another
trial; the final runs as many rounds as what is left holds. Estimates come from the trials
measured so far (their start-up, their windows), so a slow workload keeps back more.
"""

from __future__ import annotations

import statistics
import time
from typing import Sequence

from .burst_rule import BurstSettings, expected_window_s
from .policy import FINAL_RESERVE_SHARE, FINAL_ROUNDS, FINAL_SETTINGS, FIRST_TRIAL_S
from .results import OK, TrialResult
from .space import LoaderConfig


class Clock:
    """The budget of one tuning run, counted from ``started`` (``time.monotonic()``; default now).
    Whoever asks what the search may still spend names who the final will measure."""

    def __init__(self, budget_s: float, started: float | None = None):
        self.budget = float(budget_s)
        self.t0 = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.budget - self.elapsed()

    def over(self) -> bool:
        return self.elapsed() > self.budget

    def search_left(self, history: Sequence[TrialResult], finalists: Sequence[LoaderConfig],
                    rounds: int = FINAL_ROUNDS) -> float:
        """Time the search may still spend: what is left less the reserve for ``finalists``' final
        of ``rounds`` rounds (one while the strategy's pick is unmeasured: Strategy.pick_unmeasured)."""
        return self.left() - self.finals_reserve(history, finalists, rounds)

    def finals_reserve(self, history: Sequence[TrialResult], finalists: Sequence[LoaderConfig],
                       rounds: int = FINAL_ROUNDS) -> float:
        """Time kept back for ``rounds`` final rounds, at most FINAL_RESERVE_SHARE of the budget."""
        if len(finalists) < 2:
            return 0.0
        return min(rounds * round_seconds(finalists, history), FINAL_RESERVE_SHARE * self.budget)


def trial_seconds(history: Sequence[TrialResult]) -> float:
    """The typical trial's wall time so far (the median), FIRST_TRIAL_S before any."""
    spent = [t.seconds for t in history if t.seconds]
    return statistics.median(spent) if spent else FIRST_TRIAL_S


def final_measure_seconds(config: LoaderConfig, history: Sequence[TrialResult]) -> float:
    """One final measurement of ``config``, from its search trial: the same start-up and skip, and
    a window of FINAL_SETTINGS' cap or, when batches are slow, the min_cycles x num_workers
    batches the burst waits for (at most its hard cap of 3x). See NOTE [ Honest burst ]."""
    trial = next((t for t in history if t.config == config and t.status == OK and t.seconds), None)
    if trial is None:
        return max(1.5, min(trial_seconds(history), FINAL_SETTINGS.max_window_s + 2.0))
    return measure_seconds(trial, FINAL_SETTINGS, config.num_workers)


def measure_seconds(trial: TrialResult, settings: BurstSettings, workers: int) -> float:
    """One measurement at ``workers`` under ``settings``, from a measured ``trial``: its start-up
    and skip (what it took beyond its window), and the window ``settings`` give at its batch rate."""
    overhead = max(0.3, trial.seconds - trial.window_s)
    per_batch = trial.window_s / trial.batches if trial.batches else 0.0
    return overhead + expected_window_s(settings, workers, per_batch)


def round_seconds(configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> float:
    """One interleaved round over ``configs``."""
    return sum(final_measure_seconds(c, history) for c in configs)
