"""Choosing the next config, kept apart from running it (the run measures what is chosen)."""

from __future__ import annotations

import abc
from typing import Sequence

from .model import Calibration
from .results import TrialResult
from .space import LoaderConfig


class Strategy(abc.ABC):
    """Answers everything the run asks of the search. It holds no state between calls but its
    construction: a resumed run hands it the stored history and it picks up where it was."""

    rule: LoaderConfig | None = None   # the config the tuner replaces, measured beside the pick
    stopped_early: bool = False        # what it measured settled the answer before its plan ended
    cpus: int | None = None            # NOTE [ Past the cores ] in choice.py; None: not held

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
        """Whether its pick has no burst yet and is expected to beat every measured one (the search
        may then spend the final's reserve down to one round: budget.rounds_kept)."""
        return False

    def model_pick(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """Its own pick from ``history`` before the final (None when it does not say)."""
        return None

    def short_of_headroom(self, configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> frozenset:
        """Of ``configs``, those the final ties only narrowly (NOTE [ Headroom ] in model_first.py)."""
        return frozenset()
