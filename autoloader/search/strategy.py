"""Choosing the next config, kept apart from running it (the run measures what is chosen)."""

from __future__ import annotations

import abc
from typing import Sequence

from .results import TrialResult
from .space import LoaderConfig


class Strategy(abc.ABC):
    """Proposes the next config to measure from what was measured so far. A strategy holds no
    state between calls but its construction: a resumed run hands it the stored history and it
    picks up where the killed run was."""

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
