"""The progress events: one frozen dataclass per thing a run, a lookup or a re-tune reports.

Each carries what its progress line says, typed; ``kind`` names it (the name the old
``progress(event, data)`` form received) and ``line`` is the CLI's words for it (events/lines.py).
The records they hold (``TrialResult``, ``Profile``, ``TuneResult``, ...) are named in the
docstrings only: this module imports none of them, so ``autoloader.events`` loads without torch
and without the folders that emit the events (which import it). Every event pickles (NOTE [ Events are plain
records ]).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..search.policy import BUSY_SHARE

# NOTE [ Events are plain records ]
# An event holds values and records, never a callable, a lock or a process handle: it may be
# raised in one process and handed to a subscriber in another (a node's rank, the trial process),
# so every event pickles with its records, and a subscriber may keep it (a list of the events of
# a run) without holding the run alive. Fields are the old ``data`` dict's keys, so ``legacy()``
# gives a callback of the old two-argument form exactly what it was given before.


@dataclass(frozen=True)
class Event:
    """Base class of every progress event. ``kind``: the event's name ("trial", "start", ...);
    ``line``: the line the CLI prints for it, or None for an event the CLI says nothing about."""

    kind: ClassVar[str] = "event"

    @property
    def line(self) -> str | None:
        from .lines import line

        return line(self)

    def legacy(self) -> tuple[str, dict]:
        """The ``(event, data)`` pair the deprecated two-argument callback receives."""
        return self.kind, {f.name: getattr(self, f.name) for f in fields(self)}


# --- a tuning run (tuning/run.py, tuning/final.py) ----------------------------------------------

@dataclass(frozen=True)
class TuneStarted(Event):
    """The run knows its problem and has opened its study. ``key``: the problem's key; ``info``:
    the trial process's ``DatasetInfo`` (length, a sample's seconds and bytes); ``resumed``:
    stored trials of an interrupted run taken up; ``retried``, ``code_changed``, ``crashed_once``,
    ``environment``: stored trials measured again, by reason (store/retry.py); ``invalid``: stored
    records ignored; ``stale``: interrupted trials marked failed; ``moved_aside``: where a damaged
    study was moved, if one was; ``cpus``, ``ranks``, ``budget``, ``max_memory`` (bytes),
    ``device``, ``storage``: what the run runs on and under."""

    kind: ClassVar[str] = "start"
    key: str
    info: Any   # probe.protocol.DatasetInfo
    resumed: int = 0
    retried: int = 0
    code_changed: int = 0
    crashed_once: int = 0
    invalid: int = 0
    environment: int = 0
    moved_aside: str | None = None
    stale: int = 0
    device: str = "cpu"
    cpus: int = 1
    ranks: int = 1
    budget: float = 0.0
    max_memory: int | None = None
    storage: str | None = None


@dataclass(frozen=True)
class TrialsUnstored(Event):
    """The study stopped taking writes; the search goes on without storing its trials.
    ``message``: what failed."""

    kind: ClassVar[str] = "unstored"
    message: str


@dataclass(frozen=True)
class Profiled(Event):
    """The pipeline's profile (a ``search.profile.Profile``), or a rough one built from the set-up's
    batch when ``error`` says why it could not be measured. ``cpus``: the CPUs the machine's load
    is a share of; ``busy``: the share of them others may use before a figure is called busy."""

    kind: ClassVar[str] = "profile"
    profile: Any
    error: str | None = None
    cpus: float | None = None
    busy: float = BUSY_SHARE


@dataclass(frozen=True)
class ControlRetried(Event):
    """The cpus-1 rule's config failed in the run resumed here (``result``, a ``TrialResult``) and
    is measured again, since the pick is held against it."""

    kind: ClassVar[str] = "control_again"
    result: Any


@dataclass(frozen=True)
class TrialDone(Event):
    """One search trial ended. ``n`` of about ``expected``; ``result``: its ``TrialResult``
    (measured, stopped early, failed or not run); ``best``: the best so far, or None;
    ``elapsed``: seconds since the run began; ``again``: a crash to be tried once more; ``cpus``
    and ``busy`` as in ``Profiled``."""

    kind: ClassVar[str] = "trial"
    n: int
    expected: int
    result: Any
    best: Any = None
    elapsed: float = 0.0
    again: bool = False
    cpus: float | None = None
    busy: float = BUSY_SHARE


@dataclass(frozen=True)
class FinalRound(Event):
    """A round of the interleaved final ended: ``round`` of ``rounds``; ``rates``: each
    finalist's key with its rates so far (samples/s, one a round it ran in)."""

    kind: ClassVar[str] = "final"
    round: int
    rounds: int
    rates: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def legacy(self) -> tuple[str, dict]:
        return self.kind, {"round": self.round, "rounds": self.rounds,
                           "rates": {key: list(rates) for key, rates in self.rates}}


@dataclass(frozen=True)
class BusyRecheck(Event):
    """A busy machine: the configs that decide the pick (``configs``, their keys) are measured
    again, interleaved; ``load``: the run's ``search.load.MachineLoad``."""

    kind: ClassVar[str] = "recheck"
    configs: tuple[str, ...]
    load: Any

    def legacy(self) -> tuple[str, dict]:
        return self.kind, {"configs": list(self.configs), "load": self.load}


@dataclass(frozen=True)
class TuneDone(Event):
    """The run ended and stored ``result`` (its ``TuneResult``). The CLI prints the table instead
    of a line."""

    kind: ClassVar[str] = "done"
    result: Any


# --- a lookup (api.best_loader) -----------------------------------------------------------------

@dataclass(frozen=True)
class ResultReused(Event):
    """``best_loader`` found a stored result at ``path`` and uses its ``tuned`` (a ``TunedConfig``)."""

    kind: ClassVar[str] = "reused"
    path: str
    tuned: Any


@dataclass(frozen=True)
class ResultNotReused(Event):
    """A stored result exists but is not used (``why``: measured by an autoloader that measures
    differently); ``best_loader`` tunes again."""

    kind: ClassVar[str] = "not_reused"
    why: str


# --- long waits (probe/waiting.py's schedule) ---------------------------------------------------

@dataclass(frozen=True)
class Waiting(Event):
    """Base class of the long waits, each said while it lasts. ``what`` names which."""

    kind: ClassVar[str] = "waiting"
    what: ClassVar[str] = "something"

    def legacy(self) -> tuple[str, dict]:
        kind, data = super().legacy()
        return kind, {"what": self.what, **data}


@dataclass(frozen=True)
class WaitingForLock(Waiting):
    """Another process (pid ``holder``, when known) is tuning the same problem into ``out``; this
    one waits for it to finish, then does ``then``."""

    what: ClassVar[str] = "lock"
    holder: int | None
    out: str
    then: str = "using its result"


@dataclass(frozen=True)
class WaitingForTrialStart(Waiting):
    """The trial process is still building the dataset and step: ``waited_s`` of at most
    ``allowed_s`` (``clipped``: that limit was cut to the budget)."""

    what: ClassVar[str] = "trial_start"
    waited_s: float
    allowed_s: float
    clipped: bool = False


@dataclass(frozen=True)
class WaitingForRank(Waiting):
    """Rank 0 waits for ``rank`` of ``world`` to do ``task`` ("start", "trial", "command", "reply",
    "next"): ``waited_s`` so far, given up after ``bound_s``; ``state``: its process's state when
    notable ("stopped")."""

    what: ClassVar[str] = "rank"
    rank: int
    world: int
    task: str
    waited_s: float
    bound_s: float
    state: str | None = None


# --- a re-tune of a registry (fleet/retune.py) --------------------------------------------------

@dataclass(frozen=True)
class RetuneStarted(Event):
    """The re-tune of the registry's dataset ``name`` begins: number ``n`` of ``of``."""

    kind: ClassVar[str] = "retune"
    n: int
    of: int
    name: str


@dataclass(frozen=True)
class WarmStarted(Event):
    """Dataset ``name`` (problem ``key``) is re-tuned from ``warm`` (a ``fleet.warm.WarmPlan``)."""

    kind: ClassVar[str] = "warm"
    name: str
    key: str
    warm: Any


@dataclass(frozen=True)
class Retuned(Event):
    """One dataset's re-tune ended: ``outcome`` (a ``fleet.retune.Outcome``: its status, drift,
    error)."""

    kind: ClassVar[str] = "retuned"
    outcome: Any


EVENTS: tuple[type[Event], ...] = (
    TuneStarted, TrialsUnstored, Profiled, ControlRetried, TrialDone, FinalRound, BusyRecheck, TuneDone,
    ResultReused, ResultNotReused, WaitingForLock, WaitingForTrialStart, WaitingForRank, RetuneStarted,
    WarmStarted, Retuned)
