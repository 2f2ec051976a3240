"""Choosing the next config, kept apart from running it (the tuner runs what is chosen)."""

from __future__ import annotations

import abc
from typing import Sequence

from .results import TrialResult
from .space import LoaderConfig


class Strategy(abc.ABC):
    """Proposes the next config to measure from what was measured so far."""

    @abc.abstractmethod
    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The next config to try, or None when the strategy has nothing more worth measuring.
        Must never return a config already in ``history``."""
