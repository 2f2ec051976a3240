"""Where results live: the Optuna study (every trial, resumable) and the tuned-config JSON.

Layout under the results directory (``--out``, default the results home: NOTE [ Results home ]
in paths.py)::

    <hardware-fingerprint>/<dataset-key>.json   the tuned config and its figures
    <hardware-fingerprint>/<dataset-key>.py     the self-contained DataLoader snippet
    <hardware-fingerprint>/<dataset-key>.db     the study (SQLite), unless --storage names another

The study is named ``<hardware-fingerprint>/<dataset-key>`` (``paths.study_name``) in any storage.

# NOTE [ Nothing lost ]
# Each trial is told to the study the moment it ends, with its whole TrialResult as a user
# attribute, so a driver killed at any moment (SIGKILL included) loses at most the trial in
# flight. SQLite commits are atomic, so there is no torn record to repair. A run killed before
# its result was written is resumed by the next run on its host (NOTE [ Runs in a study ] in
# runs.py): its trials left RUNNING are marked FAIL, and their configs are measured again
# (nothing finished was lost). Within a run a finished trial's config is never re-run: the
# strategy sees it in the history. The one exception is a limit's verdict (memory ceiling,
# watchdog) once that limit is raised: the trial records its limits, and history() leaves it out.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass

from . import runs
from .errors import UsageError, usage
from .policy import RAISED
from .results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from .space import TUNED_SETTINGS, LoaderConfig, SearchSpace
from .storage import masked, open_storage, open_study
from .versions import now_iso

RESULT_ATTR = "autoloader_result"
LIMITS_ATTR = "autoloader_limits"
# Verdicts a limit gave, not the config: each is retried once that limit is raised by
# policy.RAISED or more.
_MEMORY_CAUSES = ("host_memory", "predicted_memory")


@dataclass(frozen=True)
class Limits:
    """The limits a trial ran under: the host-memory ceiling (bytes) and the watchdog's timeout (s)."""
    max_memory: int
    trial_timeout: float

    def to_dict(self) -> dict:
        return {"max_memory": self.max_memory, "trial_timeout": self.trial_timeout}


def stopped_by_a_raised_limit(result: TrialResult, recorded: dict | None, now: Limits) -> bool:
    """Whether ``result`` is a limit's verdict (memory ceiling, watchdog) given under a limit that
    ``now`` raises by RAISED or more. Such a verdict says nothing about the config under the new
    limit, so it is measured again: without this, raising --max-memory as the error advises reran
    nothing. A failure of the config itself (a crash, a raise, /dev/shm) stands whatever the limits."""
    if not recorded:
        return False    # stored before limits were recorded: kept, as it was
    if result.status == CONSTRAINT and result.cause in _MEMORY_CAUSES:
        return now.max_memory >= RAISED * recorded.get("max_memory", now.max_memory)
    if result.status == HANG:
        return now.trial_timeout >= RAISED * recorded.get("trial_timeout", now.trial_timeout)
    return False


def atomic_write(path: str, text: str) -> None:
    """Write a file so a reader never sees half of it, even if we are killed mid-write."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
    try:
        # mkstemp makes the file 0600; a result file is as readable as any other the user writes.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class StudyStore:
    """The Optuna study behind one tuning problem: the record of every trial.

    The study records; it does not choose. The search's strategy picks each config and the trial
    is opened with exactly those parameters by this process's own sampler (``runs.make_fixed_sampler``;
    the study's enqueue queue is shared by every process on the storage). The parameters are
    still suggested with their full ranges, and each trial's measured figures are attributes, so
    optuna-dashboard and other Optuna tools read the study as usual. Many runs may write one
    study; this store's history is its own run's (NOTE [ Runs in a study ] in runs.py)."""

    def __init__(self, url: str, study_name: str, space: SearchSpace):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.space = space
        self.sampler = runs.make_fixed_sampler()
        try:
            if url.startswith("sqlite:///"):
                os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///"):])) or ".", exist_ok=True)
            self.storage = open_storage(url, runs.HEARTBEAT_S, runs.GRACE_S)
            self.study = open_study(self.storage, study_name, self.sampler)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy/Optuna raise many kinds
            raise usage("the study's storage must be a database URL Optuna can open (--storage, or the "
                        "default SQLite file under --out)", masked(url),
                        "use e.g. sqlite:///results/study.db (the directory must be writable), or leave "
                        f"--storage out for the default ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200]})") from None
        self._study_id = self.storage.get_study_id_from_name(study_name)
        self._beats: dict[int, runs.Heartbeat] = {}
        # NOTE [ Runs in a study ]: repair what dead runs left, then take this process's run.
        self.stale_repaired = runs.fail_stale_trials(self.study, runs.runs_of(self.study))
        self.run, self.resumed_run = runs.pick_run(self.study)

    def history(self, limits: Limits) -> tuple[list[TrialResult], int]:
        """This run's newest finished result of each config (NOTE [ Runs in a study ]), in order,
        and how many configs were left out because a limit that stopped them has since been
        raised (``stopped_by_a_raised_limit``): those are measured again. A config has more than
        one result only when it was."""
        finished = [(TrialResult.from_dict(data), trial.user_attrs.get(LIMITS_ATTR))
                    for trial, data in self._finished() if trial.user_attrs.get(runs.RUN_ATTR) == self.run.run_id]
        newest = {result.config: i for i, (result, _) in enumerate(finished)}
        out, retried = [], 0
        for i, (result, recorded) in enumerate(finished):
            if newest[result.config] != i:
                continue    # superseded: measured again since
            if stopped_by_a_raised_limit(result, recorded, limits):
                retried += 1
            else:
                out.append(result)
        return out, retried

    def priors(self) -> list[TrialResult]:
        """Each config's newest finished result from the study's complete runs (and from trials
        no run claims): what a new run may measure first, never what it decides on."""
        complete = {run_id for run_id, mark in runs.runs_of(self.study).items() if mark.state == runs.COMPLETE}
        newest: dict[LoaderConfig, TrialResult] = {}
        for trial, data in self._finished():
            run_id = trial.user_attrs.get(runs.RUN_ATTR)
            if run_id is None or run_id in complete:
                result = TrialResult.from_dict(data)
                newest[result.config] = result
        return list(newest.values())

    def _finished(self):
        for trial in self.study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RESULT_ATTR)
            if data is not None and trial.state != self.optuna.trial.TrialState.RUNNING:
                yield trial, data

    def begin(self, config: LoaderConfig, limits: Limits):
        """Open a trial for ``config`` under ``limits`` (RUNNING until ``finish``, its driver
        beating meanwhile): a crash mid-trial leaves a stale record that the next open fails."""
        self.sampler.values = {name: getattr(config, name) for name in TUNED_SETTINGS}
        with warnings.catch_warnings():
            # Optuna suggests its heartbeat for optimize(); ask/tell beats here (runs.Heartbeat).
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            trial = self.study.ask()
        # Claimed and beating first: a driver killed from here on leaves a trial that names its run.
        trial.set_user_attr(runs.RUN_ATTR, self.run.run_id)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self._study_id, trial.number)
        self._beats[trial.number] = runs.Heartbeat(self.storage, trial_id)
        trial.suggest_categorical("batch_size", list(self.space.batch_sizes))
        trial.suggest_int("num_workers", 0, max(self.space.max_workers, config.num_workers))
        trial.suggest_categorical("pin_memory", list(self.space.pin_choices))
        if config.num_workers:
            trial.suggest_categorical("prefetch_factor", list(self.space.prefetch_choices))
            trial.suggest_categorical("persistent_workers", list(self.space.persistent_choices))
            trial.suggest_categorical("in_order", [True, False])
        trial.set_user_attr("config_key", config.key)
        trial.set_user_attr(LIMITS_ATTR, limits.to_dict())
        return trial

    def finish(self, trial, result: TrialResult) -> None:
        beat = self._beats.pop(trial.number, None)
        if beat is not None:
            beat.stop()
        try:
            self._tell(trial, result)
        except self.optuna.exceptions.UpdateFinishedTrialError:
            # Another process failed it as stale (its beats were held up past the grace period):
            # the measurement is added as a finished trial of its own, so nothing measured is lost.
            attrs = {**trial.user_attrs, RESULT_ATTR: result.to_dict(), **measured_figures(result)}
            state = self.optuna.trial.TrialState
            measured = result.status in (OK, CONSTRAINT)
            frozen = self.optuna.trial.create_trial(
                state=state.COMPLETE if measured else state.FAIL,
                value=(result.samples_per_s or 0.0) if measured else None,
                params=trial.params, distributions=trial.distributions, user_attrs=attrs)
            if measured:
                frozen.set_constraint("memory", 0.0 if result.status == OK else 1.0)
            self.study.add_trial(frozen)

    def _tell(self, trial, result: TrialResult) -> None:
        trial.set_user_attr(RESULT_ATTR, result.to_dict())
        for name, value in measured_figures(result).items():
            trial.set_user_attr(name, value)
        state = self.optuna.trial.TrialState
        if result.status == OK:
            trial.set_constraint("memory", 0.0)
            self.study.tell(trial, result.samples_per_s)
        elif result.status == CONSTRAINT:
            # A completed trial with a violated constraint, so samplers learn to avoid the region.
            trial.set_constraint("memory", 1.0)
            self.study.tell(trial, result.samples_per_s or 0.0)
        else:
            assert result.status in (FAILED, HANG)
            self.study.tell(trial, state=state.FAIL)

    def complete(self, summary: dict) -> None:
        """Mark this run complete, with its pick: from now on its trials are priors for the next
        run, never its history (NOTE [ Runs in a study ])."""
        runs.write_mark(self.study, dataclasses.replace(self.run, state=runs.COMPLETE, finished_at=now_iso(),
                                                        summary=summary))

    def failed(self) -> None:
        """Mark this run failed (it ended in an error): it is not resumed, its trials are no priors."""
        runs.write_mark(self.study, dataclasses.replace(self.run, state=runs.FAILED, finished_at=now_iso()))

    def close(self) -> None:
        for beat in self._beats.values():
            beat.stop()
        self._beats.clear()


def measured_figures(result: TrialResult) -> dict:
    """A trial's measured figures as flat attributes, for optuna-dashboard's table (the whole
    record is under RESULT_ATTR)."""
    figures = {"status": result.status, "cause": result.cause, "samples_per_s": result.samples_per_s,
               "rel_interval": result.rel_interval, "wait_fraction": result.wait_fraction,
               "gpu_util": result.gpu_util, "seconds": result.seconds,
               "peak_pss_mib": result.peak_pss_bytes / 2**20 if result.peak_pss_bytes else None,
               "peak_shm_mib": result.peak_shm_bytes / 2**20 if result.peak_shm_bytes else None}
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()
            if v is not None and not (isinstance(v, float) and not math.isfinite(v))}
