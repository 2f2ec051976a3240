"""A study's runs: which tuning run measured each trial, which runs are complete, who is alive.

# NOTE [ Runs in a study ]
# One study (one hardware fingerprint x one problem) is written by many runs (re-tunes, a re-run
# after a kill, a torchrun job's ranks, a fleet's machines of one kind). What each may take from
# the others:
#  * every trial carries the id of the run that measured it (trial attribute RUN_ATTR), and every
#    run has a mark (study attribute RUN_PREFIX + id): who owns it (host, pid, process start),
#    and, once its result is written, that it is complete and what it picked;
#  * a run's history, the measurements it decides on, is its own trials only. A new run starts
#    empty, unless it resumes an interrupted run of its own: one on this host whose owner process
#    is gone and that neither completed nor failed (``pick_run``). Then that run's finished
#    trials are kept, and its trials left RUNNING are failed at once (no one is left to finish them);
#  * complete runs' trials stay in the study, the record of what was measured, but never stand in
#    for a measurement of a later run, so a re-tune measures the data as it is now (it starts from
#    the previous pick instead: NOTE [ Warm start ] in search/model_first.py);
#  * a trial is opened with values only this process knows (``FixedSampler``), never through
#    the study's shared queue of enqueued trials, so a process can only take its own trial;
#  * a live trial's driver beats (``Heartbeat``, Optuna's heartbeat table); a RUNNING trial of
#    another host is failed only once its beats stopped for GRACE_S (Optuna's own
#    ``fail_stale_trials``), so no process fails a trial another is still measuring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import threading
import uuid
import warnings
from dataclasses import dataclass

import psutil

from ..errors import StoredStateWarning
from ..search.codec import InvalidRecord, Stored, read, stored
from .result import TuneResult
from .versions import now_iso

RUN_ATTR = "autoloader_run"
RUN_PREFIX = "autoloader_run:"
HEARTBEAT_S = 5
GRACE_S = 30
UNCLAIMED_S = GRACE_S   # a trial that never named its run is no one's after this long
RUNNING, COMPLETE, FAILED = "running", "complete", "failed"


@dataclass(frozen=True)
class Owner(Stored):
    """The process that owns a run: its host, pid, start time and boot."""
    host: str
    pid: int
    started: float
    boot: str = ""

    def gone(self) -> bool:
        """Known dead: on this host, and from an earlier boot or no process with its pid and start
        time is left (another host's: never; its heartbeats tell)."""
        if self.host != _host():
            return False
        if self.boot and _boot() and self.boot != _boot():
            return True
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) > 1.0
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return True
        except psutil.Error:
            return False


def this_owner() -> Owner:
    return Owner(_host(), os.getpid(), psutil.Process().create_time(), _boot())


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _host() -> str:
    """This machine: its name, and its machine id where there is one (two machines may share a name)."""
    machine = _read("/etc/machine-id")
    return f"{socket.gethostname()}/{machine[:12]}" if machine else socket.gethostname()


def _boot() -> str:
    return _read("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class RunMark(Stored):
    """One run's mark in its study. ``summary``: a complete run's pick (TuneResult.summary)."""
    run_id: str = stored(write=False)   # the mark's name in the study holds it
    owner: Owner
    state: str
    started_at: str
    finished_at: str | None = None
    summary: TuneResult | None = stored(None, read=False)   # read whole by TuneResult.from_dict

    @classmethod
    def from_dict(cls, run_id: str, data: dict, where: str = "") -> "RunMark | None":
        """The mark stored as ``data``; None for one this version did not write. A pick that fails
        its checks is a warning naming the study (``where``) and the field, the mark kept without it."""
        try:
            mark = read(cls, {**data, "run_id": run_id})
        except InvalidRecord:
            return None     # not a mark this version wrote: ignored
        # The mark's envelope holds the pick whole: handed as it is to TuneResult.from_dict, which checks it.
        if data.get("summary") is None:
            return mark
        try:
            return dataclasses.replace(mark, summary=TuneResult.from_dict(data["summary"], where, partial=True))
        except InvalidRecord as exc:
            warnings.warn(f"ignored the pick of run {run_id} in {where or 'its study'}: {exc}. The run's pick is not "
                          "used from there (its result file, where there is one, still is)", StoredStateWarning,
                          stacklevel=3)
            return mark


def runs_of(study, where: str | None = None) -> dict[str, RunMark]:
    """Every run's mark in ``study``, by run id; ``where`` names the study in a warning."""
    marks = {}
    for name, value in study.user_attrs.items():
        if name.startswith(RUN_PREFIX) and isinstance(value, dict):
            mark = RunMark.from_dict(name[len(RUN_PREFIX):], value, where or study.study_name)
            if mark is not None:
                marks[mark.run_id] = mark
    return marks


def write_mark(study, mark: RunMark) -> None:
    study.set_user_attr(RUN_PREFIX + mark.run_id, mark.to_dict())


def pick_run(study) -> tuple[RunMark, bool]:
    """This process's run (NOTE [ Runs in a study ]): the newest interrupted run of this host whose
    owner is gone, taken over, else a new one; its mark, and whether it was resumed."""
    orphaned = [m for m in runs_of(study).values() if m.state == RUNNING and m.owner.gone()]
    mark = dataclasses.replace(max(orphaned, key=lambda m: m.started_at), owner=this_owner()) if orphaned else new_run()
    write_mark(study, mark)
    return mark, bool(orphaned)


def new_run() -> RunMark:
    return RunMark(uuid.uuid4().hex[:12], this_owner(), RUNNING, now_iso())


def fail_stale_trials(study, runs: dict[str, RunMark]) -> int:
    """Fail the RUNNING trials no live process will finish; how many. Those of runs whose owner is
    known dead go at once; the rest once their driver stopped beating for GRACE_S (Optuna's
    ``fail_stale_trials``), or, never claimed by a run, once they are UNCLAIMED_S old."""
    import optuna

    state = optuna.trial.TrialState
    running = study.get_trials(deepcopy=False, states=(state.RUNNING,))
    ours = set()
    now = datetime.datetime.now()
    for trial in running:
        mark = runs.get(trial.user_attrs.get(RUN_ATTR))
        # A trial that never got to name its run (its driver died between creating it and the
        # next write) has no beats either: once UNCLAIMED_S old it is no one's.
        unclaimed = (RUN_ATTR not in trial.user_attrs and trial.datetime_start is not None
                     and (now - trial.datetime_start).total_seconds() > UNCLAIMED_S)
        if (mark is not None and mark.owner.gone()) or unclaimed:
            study.tell(trial.number, state=state.FAIL, skip_if_finished=True)
            ours.add(trial.number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    others = {t.number for t in running} - ours
    failed_now = {t.number for t in study.get_trials(deepcopy=False, states=(state.FAIL,))}
    return len(ours) + len(others & failed_now)


def make_fixed_sampler():
    """A sampler that hands back the config set on it (the study's queue is every process's)."""
    import optuna

    class FixedSampler(optuna.samplers.BaseSampler):
        def __init__(self):
            self.values: dict = {}

        def infer_relative_search_space(self, study, trial):
            return {}

        def sample_relative(self, study, trial, search_space):
            return {}

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self.values[param_name]

    return FixedSampler()


class Heartbeat:
    """Beats for one RUNNING trial from a thread of the driver until ``stop``."""

    def __init__(self, storage, trial_id: int, interval_s: float = HEARTBEAT_S):
        self.storage, self.trial_id, self.interval_s = storage, trial_id, interval_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="autoloader-heartbeat", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        while True:
            with contextlib.suppress(Exception):   # a missed beat is retried; a dead storage fails the tell
                self.storage.record_heartbeat(self.trial_id)
            if self.stopped.wait(self.interval_s):
                return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)
