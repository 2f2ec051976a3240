"""Choosing the next config, kept apart from running it (the run measures what is chosen).

A strategy answers everything the run asks of the search: what to measure next, who the final
re-measures, the rule it holds the pick against, the efficiency terms the bursts fitted, the
worker curve for the knee, and whether it stopped before its plan did.
"""

from __future__ import annotations

import abc
from typing import Sequence

from .model import Calibration
from .results import TrialResult
from .space import LoaderConfig


class Strategy(abc.ABC):
    """Proposes the next config to measure from what was measured so far. A strategy holds no
    state between calls but its construction: a resumed run hands it the stored history and it
    picks up where the killed run was."""

    # The rule the tuner replaces, which the final measures beside the pick (None: no rule).
    rule: LoaderConfig | None = None
    # Set when the search ended before its plan did, because what it measured settled the answer.
    stopped_early: bool = False
    # The usable CPUs a pick past which must beat num_workers = CPUs (NOTE [ Past the cores ] in
    # choice.py); None: not held.
    cpus: int | None = None

    @abc.abstractmethod
    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The next config to try, or None when the strategy has nothing more worth measuring.
        Must never return a config already in ``history``."""

    @abc.abstractmethod
    def expected_trials(self) -> int:
        """About how many trials a run takes, for progress lines."""

    @abc.abstractmethod
    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, rate) points of the worker curve in ``history``, for the knee."""

    @abc.abstractmethod
    def finalists(self, history: Sequence[TrialResult]) -> list[LoaderConfig]:
        """Who the interleaved final re-measures, the rule last when it is among them."""

    @abc.abstractmethod
    def calibration(self, history: Sequence[TrialResult]) -> Calibration:
        """The model's efficiency terms as the bursts in ``history`` fitted them."""

    def pick_unmeasured(self, history: Sequence[TrialResult]) -> bool:
        """Whether the config the strategy would pick now has no burst yet and is expected to beat
        every measured one: the search may then spend the final's reserve down to one round to
        measure it (search/budget.py), since a final without it only re-measures what loses."""
        return False

    def model_pick(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The config the strategy itself would pick from ``history``, before the final (None
        when it does not say): a pick that is the rule needs no final against it."""
        return None

    def short_of_headroom(self, configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> frozenset:
        """Of ``configs``, those the final ties only narrowly: bound by the step and short of
        headroom (NOTE [ Headroom ] in model_first.py). None, unless the strategy models it."""
        return frozenset()
