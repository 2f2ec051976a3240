"""The progress events: one frozen dataclass per thing a run, a lookup or a re-tune reports.

The records they hold (``TrialResult``, ``Profile``, ...) are named in the docstrings only: this
module imports none of them, so ``autoloader.events`` loads without torch and without the folders
that emit the events (which import it).
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
    """Base class of every progress event.

    Attributes:
        kind: the event's name ("start", "trial", ...), a class attribute: the name the old
            two-argument form received. Waits share one, "waiting".
    """

    kind: ClassVar[str] = "event"

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind

    @property
    def line(self) -> str | None:
        """The line the CLI prints for this event, or None for an event the CLI says nothing about."""
        from .lines import line

        return line(self)

    def legacy(self) -> tuple[str, dict]:
        """The ``(event, data)`` pair the deprecated two-argument callback receives.

        Returns:
            ``kind`` and a dict of the fields by name (the old data's keys).
        """
        return self.kind, {f.name: getattr(self, f.name) for f in fields(self)}


# --- a tuning run (tuning/run.py, tuning/final.py) ----------------------------------------------

@dataclass(frozen=True)
class TuneStarted(Event, kind="start"):
    """The run knows its problem and has opened its study.

    Attributes:
        key: the problem's key (the dataset's name, length, content, batch sizes, ...).
        info: the trial process's ``probe.protocol.DatasetInfo`` (length, a sample's seconds and bytes).
        resumed: stored trials of an interrupted run taken up.
        stale: interrupted trials marked failed.
        invalid: stored records that failed their checks, ignored.
        moved_aside: where a damaged study was moved, if one was.
        retried, code_changed, crashed_once, environment: stored trials measured again, by
            reason (a limit since raised, the code changed, a crash once, an OSError: store/study.py).
        storage, device, cpus, ranks, budget, max_memory: what the run runs on and under (the
            CPUs and the memory ceiling in bytes are one rank's share on a node).
        ceiling_by, cgroup_limit: what set the memory ceiling ("given" by --max-memory, "ram":
            the RAM available, "cgroup": the cgroup's room; None: not said), and the cgroup's
            memory limit in bytes where one binds.
        max_workers, uncapped: the most workers the search tries, and what it would try were a
            stream's shards not capping it (search/shards.py); 0 where not said.
    """
    key: str
    info: Any   # probe.protocol.DatasetInfo
    resumed: int = 0
    stale: int = 0
    invalid: int = 0
    moved_aside: str | None = None
    retried: int = 0
    code_changed: int = 0
    crashed_once: int = 0
    environment: int = 0
    storage: str | None = None
    device: str = "cpu"
    cpus: int = 1
    ranks: int = 1
    budget: float = 0.0
    max_memory: int | None = None
    ceiling_by: str | None = None
    cgroup_limit: int | None = None
    max_workers: int = 0
    uncapped: int = 0


@dataclass(frozen=True)
class TrialsUnstored(Event, kind="unstored"):
    """The study stopped taking writes; the search goes on without storing its trials.

    Attributes:
        message: what failed.
    """
    message: str


@dataclass(frozen=True)
class FleetPushed(Event, kind="fleet"):
    """What the push of this run's trials to the fleet storage did, or why it could not
    (NOTE [ Local first ] in store/study.py).

    Attributes:
        message: the line to say.
    """
    message: str


@dataclass(frozen=True)
class Profiled(Event, kind="profile"):
    """The pipeline's profile was measured.

    Attributes:
        profile: the ``search.profile.Profile``, or a rough one built from the set-up's batch
            when ``error`` says why none could be measured.
        error: why the profile was not measured, or None.
        cpus: the CPUs the machine's load is a share of.
        busy: the share of them other processes may use before a figure is called busy.
    """
    profile: Any
    error: str | None = None
    cpus: float | None = None
    busy: float = BUSY_SHARE


# The kind keeps the event's first name: a two-argument callback and a log filter match on it.
@dataclass(frozen=True)
class RuleRetried(Event, kind="control_again"):
    """The cpus-1 rule's config failed in the run resumed here and is measured again, since the
    pick is held against it.

    Attributes:
        result: its stored failure, a ``TrialResult``.
    """
    result: Any


ControlRetried = RuleRetried   # deprecated: the event's name before the rule's config was called the rule


@dataclass(frozen=True)
class TrialDone(Event, kind="trial"):
    """One search trial ended.

    Attributes:
        n: its number (a crash tried once more keeps its number).
        expected: about how many trials the search expects.
        result: its ``TrialResult`` (measured, stopped early, failed or not run).
        best: the best ``TrialResult`` so far, or None.
        elapsed: seconds since the run began.
        again: a crash, to be tried once more.
        cpus, busy: as in ``Profiled``.
    """
    n: int
    expected: int
    result: Any
    best: Any = None
    elapsed: float = 0.0
    again: bool = False
    cpus: float | None = None
    busy: float = BUSY_SHARE


@dataclass(frozen=True)
class FinalRound(Event, kind="final"):
    """A round of the interleaved final ended.

    Attributes:
        round: its number, from 1.
        rounds: how many the final runs at most (it stops sooner once its rounds settle the pick
            against the rule: NOTE [ Sure enough ] in search/paired.py).
        rates: ``(config key, rates so far)`` for each finalist, the rates in samples/s, one a
            round it ran in (``dict(event.rates)`` for a mapping).
    """
    round: int
    rounds: int
    rates: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def legacy(self) -> tuple[str, dict]:
        return self.kind, {"round": self.round, "rounds": self.rounds,
                           "rates": {key: list(rates) for key, rates in self.rates}}


@dataclass(frozen=True)
class BusyRecheck(Event, kind="recheck"):
    """A busy machine: the configs that decide the pick are measured again, interleaved.

    Attributes:
        configs: their keys.
        load: the run's ``search.load.MachineLoad``.
    """
    configs: tuple[str, ...]
    load: Any

    def legacy(self) -> tuple[str, dict]:
        return self.kind, {"configs": list(self.configs), "load": self.load}


@dataclass(frozen=True)
class TuneDone(Event, kind="done"):
    """The run ended and stored its result. The CLI prints the table instead of a line.

    Attributes:
        result: the ``TuneResult``, the one ``tune()`` returns.
    """
    result: Any


# --- a lookup (api.best_loader) -----------------------------------------------------------------

@dataclass(frozen=True)
class ResultReused(Event, kind="reused"):
    """``best_loader`` found a stored result and uses it.

    Attributes:
        path: the result file.
        tuned: its ``TunedConfig``.
    """
    path: str
    tuned: Any


@dataclass(frozen=True)
class SettingsApplied(Event, kind="applied"):
    """The closing line of ``tune()``, ``best_loader()`` and each framework helper: the settings,
    whether tuned now or a stored result reused, and where the result is.

    Attributes:
        tuned: the ``TunedConfig`` whose settings were picked or applied.
        reused: True when a stored result was used, False when this call tuned.
        path: the stored result, or None when it could not be stored.
        to: what they were applied to (the DataLoader returned, a Trainer's arguments, ...); None
            for ``tune()``, which returns them for the caller to apply.
    """
    tuned: Any
    reused: bool
    path: str | None
    to: str | None = None


@dataclass(frozen=True)
class ResultNotReused(Event, kind="not_reused"):
    """A stored result exists but is not used; ``best_loader`` tunes again.

    Attributes:
        why: its path and why (measured by an autoloader that measures differently).
    """
    why: str


# --- long waits (probe/driver.py's schedule) ---------------------------------------------------

@dataclass(frozen=True)
class Waiting(Event, kind="waiting"):
    """Base class of the long waits, each said while it lasts.

    Attributes:
        what: which wait ("lock", "trial_start", "rank"), a class attribute.
    """
    what: ClassVar[str] = "something"

    def legacy(self) -> tuple[str, dict]:
        kind, data = super().legacy()
        return kind, {"what": self.what, **data}


@dataclass(frozen=True)
class WaitingForLock(Waiting):
    """Another process is tuning the same problem; this one waits for it to finish.

    Attributes:
        holder: the other process's pid, when known.
        out: the results folder both write.
        then: what this one does after, in words.
    """

    what: ClassVar[str] = "lock"
    holder: int | None
    out: str
    then: str = "using its result"


@dataclass(frozen=True)
class WaitingForTrialStart(Waiting):
    """The trial process is still building the dataset and step.

    Attributes:
        waited_s: seconds waited so far.
        allowed_s: the most it may take.
        clipped: that limit was cut to the budget left.
    """

    what: ClassVar[str] = "trial_start"
    waited_s: float
    allowed_s: float
    clipped: bool = False


@dataclass(frozen=True)
class WaitingForRank(Waiting):
    """Rank 0 waits for another rank of a node's tune.

    Attributes:
        rank, world: the rank waited for, and the node's rank count.
        task: what it was asked to do ("start", "trial", "command", "reply", "next").
        waited_s: seconds waited so far.
        bound_s: when the wait is given up (the node is then lost).
        state: its process's state when notable ("stopped"), or None.
    """

    what: ClassVar[str] = "rank"
    rank: int
    world: int
    task: str
    waited_s: float
    bound_s: float
    state: str | None = None


# --- a re-tune of a registry (fleet/retune.py) --------------------------------------------------

@dataclass(frozen=True)
class RetuneStarted(Event, kind="retune"):
    """The re-tune of one of the registry's datasets begins.

    Attributes:
        n, of: its number, from 1, and the registry's dataset count.
        name: its name in the registry.
    """
    n: int
    of: int
    name: str


@dataclass(frozen=True)
class Retuned(Event, kind="retuned"):
    """One dataset's re-tune ended.

    Attributes:
        outcome: the ``fleet.retune.Outcome``: its status, drift, error.
    """
    outcome: Any


@dataclass(frozen=True)
class WarmStarted(Event, kind="warm"):
    """A registry's dataset is re-tuned from its warm start.

    Attributes:
        name: its name in the registry.
        key: its problem's key.
        warm: the ``fleet.retune.WarmPlan``: where the run starts from, or why from nothing.
    """
    name: str
    key: str
    warm: Any


# --- a tune in the run (inrun/: NOTE [ Tuning inside the run ]) --------------------------------
# The configs are ``search.space.LoaderConfig`` records; a line names each by its DataLoader
# arguments less the batch size (the run's own).

@dataclass(frozen=True)
class NotInRun(Event, kind="not_in_run"):
    """``best_loader(tune="run")`` tunes before the run instead, since its arguments do not allow
    the run's tune.

    Attributes:
        why: what keeps it from the run (an IterableDataset, a tuned knob fixed by the caller, ...).
    """
    why: str


@dataclass(frozen=True)
class InRunStarted(Event, kind="in_run_start"):
    """A loader that tunes itself in the training loop was made; the loop's first segment reads
    ``start``.

    Attributes:
        key: the problem's key, the one its result is stored under.
        start: the config the first segment reads.
        profile_seconds: the quick profile's seconds, or None where the start is the rule's (no profile).
    """
    key: str
    start: Any
    profile_seconds: float | None = None


@dataclass(frozen=True)
class SegmentRead(Event, kind="segment"):
    """A segment of the epoch was read under one config (said at DEBUG only: a tune reads dozens).

    Attributes:
        epoch: the epoch it was read in, from 0.
        config: the config it read.
        samples_per_s: the loop's rate over it, the step included.
        wait_share: the share of the loop's time spent waiting in ``next()``.
        round: the pair it belongs to (a config's reading and the best's before it), or None
            outside the pairs (a start, the rest of an epoch, the pick's own reading).
        best: the best config so far, after this reading.
        settled: the pick is settled (this reading is the pick's, or it settled the pick).
    """
    epoch: int
    config: Any
    samples_per_s: float
    wait_share: float
    round: int | None = None
    best: Any = None
    settled: bool = False


@dataclass(frozen=True)
class InRunExploring(Event, kind="exploring"):
    """An epoch ended with the tune still exploring (said once: the first such epoch); it goes on
    in the next.

    Attributes:
        epoch: the epoch that ended, from 0.
        rounds: the pairs read so far.
        configs: the configs read so far.
        best: the best so far.
    """
    epoch: int
    rounds: int
    configs: int
    best: Any


@dataclass(frozen=True)
class InRunSettled(Event, kind="settled"):
    """The pick is settled and stored (a loop that stops before its epoch ends keeps it); the
    rest of the epoch reads it. ``InRunDone`` follows at the epoch's end.

    Attributes:
        pick: the config picked.
        why: why exploring stopped.
        path: the stored result, or None where it could not be (or nothing is stored).
    """
    pick: Any
    why: str
    path: str | None = None


@dataclass(frozen=True)
class InRunDone(Event, kind="in_run_done"):
    """The tune in the run ended with the pick's epoch: what was tried, picked, and what it cost.

    Attributes:
        epochs: the epochs in which configs other than the pick's ran.
        tried: every config read, in the order first read.
        start, rule: the config the tune started from; the cpus-1 rule's.
        rounds: the pairs read; segment_s: a segment's least seconds.
        why: why exploring stopped.
        pick: the config picked.
        versus, versus_name: the pick's ``search.paired.Ratio`` over a config it was paired with
            (the rule, else the start, else the last read), and that config's name; None where none was.
        samples_per_s, wait_share: the pick's rate and wait share in the loop over the rest of its
            epoch (None before its own reading).
        epoch_s: the tuned epochs' wall time; tuning_cost_s: that time less what the pick's
            measured pace takes for the same batches and one start (an estimate; below zero where
            the configs read beside the pick were faster than it in those epochs).
        refused: configs not started, past the memory forecast.
        path: the stored result, or None.
    """
    epochs: int
    tried: tuple
    start: Any
    rule: Any
    rounds: int
    segment_s: float
    why: str
    pick: Any
    versus: Any = None
    versus_name: str | None = None
    samples_per_s: float | None = None
    wait_share: float | None = None
    epoch_s: float | None = None
    tuning_cost_s: float | None = None
    refused: tuple = ()
    path: str | None = None



@dataclass(frozen=True)
class InRunFollowing(Event, kind="in_run_following"):
    """Another process is tuning the same problem (a tune before its run, or in it); this run's
    loader trains with ``start`` without tuning, and takes that tune's pick at the first epoch
    after it is stored (``InRunAdopted``).

    Attributes:
        key: the problem's key.
        holder: the other process's pid, when known.
        out: the results folder its result goes to.
        start: the config this run trains with meanwhile.
    """
    key: str
    holder: int | None
    out: str
    start: Any


@dataclass(frozen=True)
class InRunAdopted(Event, kind="in_run_adopted"):
    """The other process's tune of this problem stored its pick; this run reads with it from
    ``epoch`` on.

    Attributes:
        epoch: the first epoch read with it, from 0.
        pick: the stored pick.
        path: the stored result.
    """
    epoch: int
    pick: Any
    path: str


@dataclass(frozen=True)
class InRunNotAdopted(Event, kind="in_run_not_adopted"):
    """The other process's tune stored its pick, but its memory forecast is past this run's limit:
    this run goes on with ``kept``, untuned, and the pick never starts here.

    Attributes:
        epoch: the epoch it was stored before, from 0.
        pick: the stored pick.
        path: the stored result.
        forecast: the bytes the pick is forecast to add to this run.
        limit: the bytes this run's configs may add (its ``max_memory``).
        kept: the config this run goes on with.
    """
    epoch: int
    pick: Any
    path: str
    forecast: int
    limit: int
    kept: Any


EVENTS: tuple[type[Event], ...] = (
    TuneStarted, TrialsUnstored, FleetPushed, Profiled, RuleRetried, TrialDone, FinalRound, BusyRecheck, TuneDone,
    ResultReused, ResultNotReused, SettingsApplied, WaitingForLock, WaitingForTrialStart, WaitingForRank,
    RetuneStarted, WarmStarted, Retuned, NotInRun, InRunStarted, SegmentRead, InRunExploring, InRunSettled, InRunDone,
    InRunFollowing, InRunAdopted, InRunNotAdopted)
