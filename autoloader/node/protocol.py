"""What rank 0 and the other ranks of a node's tune say to each other: NOTE [ Tuning a node's
ranks ] in node/__init__.py. Rank 0 broadcasts a command; every rank gathers back a Reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..probe.driver import DatasetInfo, RunnerSetup
from ..search.burst_rule import BurstSettings
from ..search.results import TrialResult
from ..search.space import LoaderConfig


@dataclass(frozen=True)
class Start:   # this rank's TrialRunner for ``setup``, made this rank's: its shard and device
    setup: RunnerSetup
    max_memory: int       # the node's ceiling; a rank's guard gets its share
    hang_timeout_s: float
    budget_left_s: float | None = None   # of rank 0's run, as it sent this: bounds each rank's start-up


@dataclass(frozen=True)
class Measure:
    config: LoaderConfig
    settings: BurstSettings
    timeout: float | None


@dataclass(frozen=True)
class Stop:   # no more commands: ``serve`` returns
    pass


@dataclass(frozen=True)
class Reply:   # to Start or Measure, with the runner's leftover counts so far
    info: DatasetInfo | None = None
    result: TrialResult | None = None
    setup_error: tuple[str, bool] | None = None   # (message, usage)
    orphans: int = 0
    shm_leaks: int = 0


@dataclass(frozen=True)
class Outcome:   # what rank 0's run ended with, for every rank to return or raise
    result: Any = None
    error: BaseException | None = None


