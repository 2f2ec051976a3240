"""The run's clock: how much of the budget is spent, and what the next steps will cost (from
the trials measured so far, so a slow workload keeps back more for the final).

# NOTE [ The budget is a wall bound ]
# A user who gives --budget 120 plans on the command ending about then. So:
#  * the clock counts from the command's start (the process's, for the `autoloader` command; the
#    call's, for tune() and best_loader()), set-up included;
#  * the search and the final plan to end by the budget (``left``), each burst's window clipped
#    to what is left (``window_for``), so the one trial a run must measure fits too;
#  * every wait (the trial process's start, the profile, a trial) is cut at the wall bound less
#    what closing the run takes (``bound_left``): the budget plus WALL_SLACK_SHARE of it, at
#    least WALL_SLACK_MIN_S, less CLOSING_S for stopping the trial process, writing and printing.
#    A trial cut there is ended as the watchdog ends a hang, but named a cut (results.BUDGET_ENDED),
#    never a hang: the watchdog's own timeout is not clipped to the budget. A run that measured
#    nothing by then is inconclusive (errors.Inconclusive, exit 5), saying the load and the budget
#    a slow pipeline needs.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Sequence

from .policy import (FINAL_RESERVE_SHARE, FINAL_ROUNDS, FINAL_SETTINGS, FIRST_TRIAL_S, BurstSettings,
                     expected_window_s)
from .results import OK, TrialResult
from .space import LoaderConfig

# The wall bound past the budget: a tenth of it, 5 s at least.
WALL_SLACK_SHARE = 0.10
WALL_SLACK_MIN_S = 5.0
# Kept back inside the wall bound for stopping the trial process, writing and printing.
CLOSING_S = 2.0
# A first burst's start-up and skipped batches, before any trial has measured them.
FIRST_OVERHEAD_S = 2.0
# The profile's share of the budget: NOTE [ A profile within its share ] in probe/profiler.py.
PROFILE_SHARE = 1 / 3
# A step slower than this a batch is named, with the budget it needs, when a run measures nothing.
SLOW_STEP_S = 1.0
# The calls of the step a judged tune makes at least: the profile's (8), the two bursts of the
# opening (6 to 8 each) and one final round of the two (10).
JUDGED_TUNE_STEPS = 32


def wall_bound(budget_s: float) -> float:
    """The most seconds a run of ``budget_s`` may take from the command's start to its exit."""
    return budget_s + max(WALL_SLACK_SHARE * budget_s, WALL_SLACK_MIN_S)


def profile_limit(budget_s: float, left_s: float) -> float:
    """The profile's share of the budget, half of what is left at most (the rest is the first burst's)."""
    return max(0.0, min(PROFILE_SHARE * budget_s, left_s / 2))


def needed_budget(step_s: float, before_s: float) -> int:
    """The --budget a judged tune needs: ``before_s`` then JUDGED_TUNE_STEPS steps, to 10 s up."""
    need = before_s + JUDGED_TUNE_STEPS * step_s
    return int(-(-need // 10) * 10)


def budget_words(step_s: float, samples_s: float, before_s: float) -> str | None:
    """What a budget too short for a slow pipeline needs, in words; None when a batch takes
    under SLOW_STEP_S."""
    batch_s = step_s + samples_s
    if batch_s < SLOW_STEP_S:
        return None
    what = (f"the step takes about {step_s:.0f} s a batch" if step_s >= samples_s else
            f"a batch takes about {batch_s:.0f} s without workers (its samples, collate and the step)")
    return f"{what}: give --budget {needed_budget(batch_s, before_s)} or more"


class Clock:
    """The budget of one tuning run, counted from ``started`` (``time.monotonic()``; default now)."""

    def __init__(self, budget_s: float, started: float | None = None, kept_s: float = 0.0):
        self.budget = float(budget_s)
        self.t0 = time.monotonic() if started is None else started
        self.kept = kept_s   # kept back for what the command does after the run (its report page)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.budget - self.kept - self.elapsed()

    def over(self) -> bool:
        return self.left() < 0

    @property
    def bound(self) -> float:
        return wall_bound(self.budget)

    def bound_left(self) -> float:
        """Seconds any wait may still take: to the wall bound, less what closing the run takes."""
        return self.bound - self.kept - CLOSING_S - self.elapsed()

    def window_for(self, settings: BurstSettings, overhead_s: float) -> BurstSettings:
        """``settings`` with the time cap clipped so that a burst of ``overhead_s`` beyond its
        window ends by the budget (down to its minimum window); clipped, it skips no batch beyond
        its workers' first (two batches can be seconds each)."""
        cap = max(settings.min_window_s, min(settings.max_window_s, self.left() - overhead_s))
        return settings if cap >= settings.max_window_s else dataclasses.replace(settings, max_window_s=cap,
                                                                                  extra_skip=0)

    def search_left(self, history: Sequence[TrialResult], finalists: Sequence[LoaderConfig],
                    rounds: int = FINAL_ROUNDS) -> float:
        """What is left less the reserve for ``finalists``' final of ``rounds`` rounds."""
        return self.left() - self.finals_reserve(history, finalists, rounds)

    def finals_reserve(self, history: Sequence[TrialResult], finalists: Sequence[LoaderConfig],
                       rounds: int = FINAL_ROUNDS) -> float:
        """Time kept back for ``rounds`` final rounds, at most FINAL_RESERVE_SHARE of the budget."""
        if len(finalists) < 2:
            return 0.0
        return min(rounds * round_seconds(finalists, history), FINAL_RESERVE_SHARE * self.budget)


def rounds_kept(history: Sequence[TrialResult], rule: LoaderConfig | None, pick_unmeasured: bool) -> int:
    """The final rounds the search keeps time for: one while the strategy's pick is unmeasured (a
    final without it re-measures what loses); one fewer while the rule has no burst, since its
    burst opens the final (NOTE [ The opening round ] in choice.py)."""
    if pick_unmeasured:
        return 1
    if rule is not None and not any(t.config == rule for t in history):
        return FINAL_ROUNDS - 1
    return FINAL_ROUNDS


def overhead_seconds(history: Sequence[TrialResult]) -> float:
    """A burst's typical time beyond its window so far (start-up, skipped batches)."""
    spent = [t.seconds - t.window_s for t in history if t.status == OK and t.seconds and t.window_s]
    return max(0.3, statistics.median(spent)) if spent else FIRST_OVERHEAD_S


def trial_seconds(history: Sequence[TrialResult]) -> float:
    """The typical trial's wall time so far."""
    spent = [t.seconds for t in history if t.seconds]
    return statistics.median(spent) if spent else FIRST_TRIAL_S


def burst_seconds(config: LoaderConfig, history: Sequence[TrialResult], settings: BurstSettings) -> float:
    """One search burst of ``config`` (NOTE [ The next burst's cost ])."""
    typical = trial_seconds(history)
    measured = [(i, t) for i, t in enumerate(history) if t.status == OK and t.seconds and t.window_s]
    if not measured:
        return typical
    workers = config.num_workers
    _, near = min(measured, key=lambda it: (abs(it[1].config.num_workers - workers), -it[0]))
    fewer = max(1, workers) / near.config.num_workers if workers < near.config.num_workers else 1.0
    return min(typical, measure_seconds(near, settings, workers, fewer))


# NOTE [ The next burst's cost ]
# The search goes on while what is left, less the final's reserve, holds the next burst; the
# typical burst so far overstates a burst of fewer workers (theirs start one after another). So a
# burst's time beyond its window is the measured burst's nearest in workers, scaled down by the
# worker counts when the next has fewer, and its window from that burst's batch rate
# (``expected_window_s``). The typical burst so far stays the ceiling.


def final_measure_seconds(config: LoaderConfig, history: Sequence[TrialResult]) -> float:
    """One final measurement of ``config``, from its search trial (``measure_seconds``)."""
    trial = next((t for t in history if t.config == config and t.status == OK and t.seconds), None)
    if trial is None:
        return max(1.5, min(trial_seconds(history), FINAL_SETTINGS.max_window_s + 2.0))
    return measure_seconds(trial, FINAL_SETTINGS, config.num_workers)


def measure_seconds(trial: TrialResult, settings: BurstSettings, workers: int, scale: float = 1.0) -> float:
    """One measurement at ``workers`` under ``settings``, from a measured ``trial``: its time
    beyond its window (times ``scale``), and the window at its batch rate."""
    overhead = max(0.3, max(0.3, trial.seconds - trial.window_s) * scale)
    per_batch = trial.window_s / trial.batches if trial.batches else 0.0
    return overhead + expected_window_s(settings, workers, per_batch)


def round_seconds(configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> float:
    """One interleaved round over ``configs``."""
    return sum(final_measure_seconds(c, history) for c in configs)
