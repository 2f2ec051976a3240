"""The Optuna study behind a problem, every trial of it, beside its result and snippet:
``<out>/<fingerprint>/<key>.json``, ``.py`` and ``.db`` (unless --storage names another storage),
the study named ``<fingerprint>/<key>`` in any storage (paths.py).

# NOTE [ Nothing lost ]
# Each trial is told to the study the moment it ends, with its whole TrialResult as a user
# attribute, so a driver killed at any moment (SIGKILL included) loses at most the trial in
# flight; SQLite commits are atomic, so there is no torn record to repair. A run killed before
# its result was written is resumed by the next run on its host (NOTE [ Runs in a study ] in
# runs.py): its trials left RUNNING are failed and measured again. Within a run a finished
# trial's config is never re-run (the strategy sees it in the history), but for the exceptions
# below. A record that fails validation is left out with a warning, a study that cannot be read
# is moved aside (NOTE [ Stored state a user can trust ] in durable.py).

A fleet's storage is written local first: every run records in its own SQLite study, then pushes.

# NOTE [ Local first ]
# With ``--storage URL`` (any storage other than the study beside the result) a run still records
# every trial in the local study (NOTE [ Nothing lost ]) and copies the finished ones
# to the fleet's study of the same name: each as the trial ended, and all of it again when the
# run completes, with the run's mark and its whole result (RESULT_PREFIX + run id, so that
# ``report --storage`` can explain it). A copy is tagged with its run's id and its number in the
# local study (LOCAL_ATTR); a trial whose tag the fleet's study holds is not copied again, so a
# push made twice adds nothing. The local study remembers which runs go to which storage
# (FLEET_PREFIX + run id), so a storage that stopped taking writes costs the fleet nothing: the
# run goes on recording locally (after a failed push it tries again only when it completes), ends
# as any run that could not store all of it does (NotSaved, exit 4), and the next run on this host
# with the same ``--storage`` pushes what was kept before it measures. Nothing RUNNING is ever in
# the fleet's study, so no process there fails another's live trial.

``save`` writes a run's result and snippet, and raises NotSaved saying what could not be stored.

Which stored verdicts still stand, and which configs are measured again: a finished trial is a
fact about its config and is not re-run (NOTE [ Nothing lost ]), with these exceptions, each
counted so the progress line can say why a config runs again:
- a limit's verdict (memory ceiling, watchdog) once that limit is raised
  (``stopped_by_a_raised_limit``);
- a failure of the user's code (USER_CODE_CAUSES) once that code changed: NOTE [ Failures keyed
  by code ] in inputs/code_digest.py;
- a failure of the environment, once, in a resumed run: NOTE [ Fixed outside the code ];
- a crash (FLAKY_CAUSES) seen once: NOTE [ A crash counts twice ];
- and, when the search knows its rule, a stored failure of the rule (``rule_again``).

# NOTE [ Fixed outside the code ]
# A failure can be fixed without touching the code (a file restored, a mount back, a permission
# or a variable set), and the code's digest does not change. So a trial that failed on an OSError
# (``TrialResult.os_error``: its exception, or the worker's) is measured again by the run that
# resumes its study (in the run that measured it, it stands: the environment is as it was), and
# so is a stored failure of the rule: the final must hold the pick against the rule.

# NOTE [ A crash counts twice ]
# A worker killed by a signal, a segfault or a trial process that died can be a one-off (the OOM
# killer's choice, a race in native code). So a config's crash stands only once it happened twice:
# the first is recorded in the study but kept out of the history the strategy sees, so the
# strategy proposes the same config again at once; a second crash counts. A run killed between
# the two leaves one crash stored, which the next run treats the same way.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..errors import NotSaved, StoredStateWarning
from ..inputs.options import Limits
from ..search.policy import RAISED
from ..search.results import BUDGET_ENDED, CONSTRAINT, FAILED, HANG, OK, TrialResult
from ..search.settings import SETTINGS, WORKERS
from ..search.space import TUNED_SETTINGS, LoaderConfig, SearchSpace
from . import durable, runs
from .result import FORMAT, InvalidRecord, TuneResult, trial_record
from .storage import masked, name_metric, open_storage, open_study
from .versions import now_iso
from ..events.lines import rate

RESULT_ATTR = "autoloader_result"
LIMITS_ATTR = "autoloader_limits"
CODE_ATTR = "autoloader_code"   # NOTE [ Failures keyed by code ] in inputs/code_digest.py
# Verdicts a limit gave, not the config: each is retried once that limit is raised by
# policy.RAISED or more.
_MEMORY_CAUSES = ("host_memory", "predicted_memory")
LOCAL_ATTR = "autoloader_local_trial"       # a pushed trial's number in the study it was measured in
FLEET_PREFIX = "autoloader_fleet:"          # local study attribute: where a run's trials go
RESULT_PREFIX = "autoloader_result:"        # study attribute: a complete run's whole result


def stopped_by_a_raised_limit(result: TrialResult, recorded: dict | None, now: Limits) -> bool:
    """Whether ``result`` is a limit's verdict (memory ceiling, watchdog) given under a limit that
    ``now`` raises by RAISED or more: it says nothing of the config under the new limit. A failure
    of the config itself (a crash, a raise, /dev/shm) stands whatever the limits."""
    if not recorded:
        return False    # stored before limits were recorded: kept, as it was
    if result.status == CONSTRAINT and result.cause in _MEMORY_CAUSES:
        return now.max_memory >= RAISED * recorded.get("max_memory", now.max_memory)
    if result.status == HANG and result.cause == BUDGET_ENDED:
        return True   # the budget's end, not the config's: measured again whatever the limits
    if result.status == HANG:
        return now.trial_timeout >= RAISED * recorded.get("trial_timeout", now.trial_timeout)
    return False


class StudyStore:
    """The Optuna study behind one tuning problem: the record of every trial. It records; it does
    not choose: each trial is opened with the strategy's config by this process's own sampler
    (``runs.make_fixed_sampler``), its parameters suggested with their full ranges and its figures
    as attributes, so Optuna's tools read the study as usual. Its history is its own run's (NOTE
    [ Runs in a study ] in runs.py)."""

    def __init__(self, url: str, study_name: str, space: SearchSpace, given: bool = True, fleet: str | None = None,
                 notice=None):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.space = space
        self.url = url
        self.sampler = runs.make_fixed_sampler()
        # NOTE [ Local first ]: ``url`` is the local study, ``fleet`` where it is pushed.
        if fleet is not None and durable.sqlite_file(fleet) is not None \
                and durable.sqlite_file(fleet) == durable.sqlite_file(url):
            fleet = None   # --storage names the local study itself: nothing to push to
        self.fleet = Fleet(fleet, study_name, self.sampler) if fleet is not None else None
        self.notice = notice or (lambda line: None)
        self.push_failed: str | None = None
        self.shown_url = masked(fleet or url)
        self.where = durable.sqlite_file(url) or f"{masked(url)} (study {study_name})"
        # Set once a write failed: the study then takes no more (NOTE [ Stored state a user can trust ]).
        self.write_failed: str | None = None
        self.write_error: BaseException | None = None
        self.kept = 0   # this run's trials the study took: none, and the same command cannot resume
        opened = durable.open_sound(url, study_name, self.sampler, given, runs.HEARTBEAT_S, runs.GRACE_S)
        self.storage, self.study, self.moved_aside = opened.storage, opened.study, opened.moved_aside
        if opened.write_error is not None:
            self._write_failed(opened.write_error)
        self._study_id = self.storage.get_study_id_from_name(study_name)
        self._beats: dict[int, runs.Heartbeat] = {}
        self._writing(name_metric, self.study)
        # NOTE [ Runs in a study ]: repair what dead runs left, then take this process's run.
        self.stale_repaired = self._writing(lambda: runs.fail_stale_trials(self.study, runs.runs_of(self.study))) or 0
        picked = self._writing(runs.pick_run, self.study)
        # A study that takes no writes still needs a run of its own to keep its trials apart.
        self.run, self.resumed_run = picked or (runs.new_run(), False)
        if self.fleet is not None:
            self._writing(bound, self.study, self.run.run_id, self.fleet.shown, False)
            self._push_kept()

    def _writing(self, write, *args):
        """``write(*args)``, unless a write already failed; a failure is remembered, not raised."""
        if self.write_failed is not None:
            return None
        try:
            return write(*args)
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if not isinstance(exc, durable.storage_errors()):
                raise
            self._write_failed(exc)
            return None

    def _write_failed(self, exc: BaseException) -> None:
        self.write_failed = durable.write_failure("the study", self.where, exc, self.url)
        self.write_error = exc

    def reread(self, limits: Limits, code: str | None = None) -> History:
        """This run's stored trials that stand (``standing``; ``code``: the digest now, None keeps the
        failures of the user's code). A record that fails validation is left out with a warning."""
        stored, invalid = [], 0
        for trial, data in self._finished():
            if trial.user_attrs.get(runs.RUN_ATTR) != self.run.run_id:
                continue
            try:
                result = trial_record(data)
            except InvalidRecord as exc:
                warnings.warn(f"ignored trial {trial.number} of the study {self.where}: {exc}; its config is "
                              "measured again if the search comes to it", StoredStateWarning, stacklevel=2)
                invalid += 1
                continue
            recorded = trial.user_attrs.get(LIMITS_ATTR)
            digest = trial.user_attrs.get(CODE_ATTR)
            stored.append(StoredTrial(result, recorded if _limits_record(recorded) else None,
                                      digest if isinstance(digest, str) else None))
        return standing(stored, lambda result, recorded: stopped_by_a_raised_limit(result, recorded, limits),
                        code, invalid)

    def _finished(self):
        for trial in self.study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RESULT_ATTR)
            if data is not None and trial.state != self.optuna.trial.TrialState.RUNNING:
                yield trial, data

    def begin(self, config: LoaderConfig, limits: Limits, code: str | None = None):
        """Open a trial for ``config`` under ``limits``, running the code of digest ``code`` (RUNNING
        until ``finish``, its driver beating meanwhile); None when the study takes no more writes."""
        return self._writing(self._begin, config, limits, code)

    def _begin(self, config: LoaderConfig, limits: Limits, code: str | None):
        self.sampler.values = {name: getattr(config, name) for name in TUNED_SETTINGS}
        with warnings.catch_warnings():
            # Optuna suggests its heartbeat for optimize(); ask/tell beats here (runs.Heartbeat).
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            trial = self.study.ask()
        # Claimed and beating first: a driver killed from here on leaves a trial that names its run.
        trial.set_user_attr(runs.RUN_ATTR, self.run.run_id)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self._study_id, trial.number)
        self._beats[trial.number] = runs.Heartbeat(self.storage, trial_id)
        # One parameter per knob that applies, over every value the space holds of it (its gate
        # aside: a study's distributions must not change between its runs).
        for knob in SETTINGS:
            if knob is WORKERS:
                trial.suggest_int(knob.name, 0, max(self.space.max_workers, config.num_workers))
            elif config.applies(knob):
                trial.suggest_categorical(knob.name, list(self.space.values(knob)))
        trial.set_user_attr("config_key", config.key)
        trial.set_user_attr(LIMITS_ATTR, limits.to_dict())
        if code is not None:
            trial.set_user_attr(CODE_ATTR, code)
        return trial

    def finish(self, trial, result: TrialResult) -> None:
        """Record ``result`` for a trial ``begin`` opened, and push it (NOTE [ Local first ])."""
        if trial is None:
            return
        beat = self._beats.pop(trial.number, None)
        if beat is not None:
            beat.stop()
        self._writing(self._finish, trial, result)
        self.kept += self.write_failed is None
        if self.fleet is not None and self.push_failed is None and self.write_failed is None:
            self._push_failed(self.fleet.push(self.study, [self.run.run_id], whole=False).failed)

    def _push_failed(self, failed: str | None) -> bool:
        """Whether a push failed; the first failure is said, and the run pushes no more until its end."""
        if failed is not None:
            self.push_failed = failed
            self.notice(f"{failed}; the search goes on, recording its trials in {self.where}, which the end of "
                        "this run, or the next run with this --storage, pushes")
        return failed is not None

    def _push_kept(self) -> None:
        """Push what earlier runs bound for this fleet kept locally (an outage), before measuring."""
        kept = [r for r in pending(self.study, self.fleet.shown) if r != self.run.run_id]
        if not kept and not self.resumed_run:
            return
        pushed = self.fleet.push(self.study, kept + [self.run.run_id], whole=True)
        if self._push_failed(pushed.failed):   # it opened a moment ago: gone since, as mid-run
            return
        for run_id in kept:
            self._writing(bound, self.study, run_id, self.fleet.shown, True)
        if pushed.trials:
            self.notice(f"pushed {pushed.trials} trials that earlier runs kept in {self.where} to {self.fleet.shown}")

    def _finish(self, trial, result: TrialResult) -> None:
        attrs = {RESULT_ATTR: _record(result), **measured_figures(result)}
        measured = result.status in (OK, CONSTRAINT)
        assert measured or result.status in (FAILED, HANG)
        # Past a limit: a completed trial with a violated constraint, so samplers avoid the region.
        violated, value = 0.0 if result.status == OK else 1.0, (result.samples_per_s or 0.0) if measured else None
        try:
            for name, v in attrs.items():
                trial.set_user_attr(name, v)
            if measured:
                trial.set_constraint("memory", violated)
            self.study.tell(trial, value, state=None if measured else self.optuna.trial.TrialState.FAIL)
        except self.optuna.exceptions.UpdateFinishedTrialError:
            # Another process failed it as stale (its beats were held up past the grace period):
            # the measurement is added as a finished trial of its own, so nothing measured is lost.
            state = self.optuna.trial.TrialState
            frozen = self.optuna.trial.create_trial(
                state=state.COMPLETE if measured else state.FAIL, value=value, params=trial.params,
                distributions=trial.distributions, user_attrs={**trial.user_attrs, **attrs})
            if measured:
                frozen.set_constraint("memory", violated)
            self.study.add_trial(frozen)

    def complete(self, result: TuneResult) -> None:
        """Mark this run complete, with its pick (NOTE [ Runs in a study ]); with a fleet, keep the
        whole result beside the mark and push all of the run (NotSaved when it could not be)."""
        summary = result if result.partial else result.summary()
        self._writing(runs.write_mark, self.study, dataclasses.replace(self.run, state=runs.COMPLETE,
                                                                      finished_at=now_iso(), summary=summary))
        if self.fleet is None or self.write_failed is not None:
            return
        if not result.partial:
            self._writing(self.study.set_user_attr, RESULT_PREFIX + self.run.run_id,
                          json.loads(json.dumps(result.to_dict(), default=str)))
        runs_bound = list(dict.fromkeys(pending(self.study, self.fleet.shown) + [self.run.run_id]))
        pushed = self.fleet.push(self.study, runs_bound, whole=True)
        if pushed.failed is None:
            for run_id in runs_bound:
                self._writing(bound, self.study, run_id, self.fleet.shown, True)
            return
        raise NotSaved(f"the run chose {result.config.key} ({rate(result.samples_per_s, ' samples/s')}) and saved it "
                       f"here, but could not push it: {pushed.failed}. Its trials and result are kept in the study "
                       f"{self.where}, and the next run with --storage {self.fleet.shown} pushes them before it "
                       "measures. Fix: check that the storage takes writes, and run the same command again",
                       result, stored_lines(result, True, True, self, pushed=False))

    def failed(self) -> None:
        """Mark this run failed (it ended in an error): it is not resumed."""
        self._writing(runs.write_mark, self.study, dataclasses.replace(self.run, state=runs.FAILED,
                                                                      finished_at=now_iso()))

    def close(self) -> None:
        """Stop the trials' beats and close the database connections."""
        for beat in self._beats.values():
            beat.stop()
        self._beats.clear()
        durable.dispose(self.storage)
        if self.fleet is not None:
            self.fleet.close()


def save(result, files: dict[str, str], store) -> None:
    """Write the run's files; raise NotSaved, carrying ``result``, when they or the study could not be."""
    problems = [store.write_failed] if store.write_failed else []
    errors = [store.write_error] if store.write_error else []
    where = os.path.dirname(next(iter(files), "")) or "."
    written = True
    try:
        durable.atomic_write_all(files)
    except OSError as exc:
        problems.append(durable.write_failure("the result and its snippet", where, exc))
        errors.append(exc)
        written = False
    if problems:
        study = durable.sqlite_file(store.url)
        folder = os.path.abspath(os.path.dirname(os.path.dirname(next(iter(files), "")) or "."))
        under_out = study is not None and os.path.commonpath([study, folder]) == folder
        raise NotSaved(f"the run chose {result.config.key} ({rate(result.samples_per_s, ' samples/s')}) but could not "
                       f"save all of it: {'; '.join(problems)}. Whatever was stored before is kept. Fix: "
                       + durable.write_fix(errors, store.url if store.write_error else None, under_out, where,
                                           kept=store.write_failed is None or store.kept > 0), result,
                       stored_lines(result, written, store.write_failed is None, store))


def stored_lines(result, files: bool, study: bool, store, pushed: bool | None = None) -> tuple[str, ...]:
    """What happened to each thing a run stores, a line each (``pushed``: None without a fleet)."""
    lines = [f"saved {result.path}" if files else f"not saved: {result.path}",
             f"snippet {result.snippet_path}" if files else f"snippet not saved: {result.snippet_path}",
             f"study {store.where}" if study else f"study not saved: {store.where}"]
    if pushed is not None:
        lines.append(f"pushed to {store.shown_url}" if pushed else
                     f"not pushed to {store.shown_url}: the study above keeps it, and the next run with this "
                     "--storage pushes it")
    return tuple(lines)


def _record(result: TrialResult) -> dict:
    return {**result.to_dict(), "format": FORMAT}


def _limits_record(recorded: object) -> bool:
    return isinstance(recorded, dict) and all(
        isinstance(recorded.get(k), (int, float)) and not isinstance(recorded.get(k), bool)
        for k in ("max_memory", "trial_timeout") if k in recorded)


def measured_figures(result: TrialResult) -> dict:
    """A trial's measured figures as flat attributes, for optuna-dashboard's table."""
    figures = {"status": result.status, "cause": result.cause, "samples_per_s": result.samples_per_s,
               "rel_interval": result.rel_interval, "wait_fraction": result.wait_fraction,
               "gpu_util": result.gpu_util, "seconds": result.seconds,
               "peak_pss_mib": result.peak_pss_bytes / 2**20 if result.peak_pss_bytes else None,
               "peak_shm_mib": result.peak_shm_bytes / 2**20 if result.peak_shm_bytes else None}
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()
            if v is not None and not (isinstance(v, float) and not math.isfinite(v))}


@dataclass(frozen=True)
class Pushed:
    """Trials copied, and the failure (None when everything asked for is there)."""
    trials: int = 0
    failed: str | None = None


class Fleet:
    """The fleet's study ``name`` in ``url``, and what of the local study it already holds."""

    def __init__(self, url: str, name: str, sampler):
        import optuna

        self.url, self.name, self.shown = url, name, masked(url)
        self.optuna = optuna
        storage = None
        try:
            storage = open_storage(url, heartbeat_s=None, grace_s=None)
            self.study = open_study(storage, name, sampler)
            self.held = {_tag(t) for t in self.study.get_trials(deepcopy=False)} - {None}
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy/Optuna raise many kinds
            durable.dispose(storage)
            raise durable.open_error(url, True, exc) from None
        self.storage = storage
        name_metric(self.study)

    def push(self, local, run_ids: list[str], whole: bool) -> Pushed:
        """Copy the finished trials of ``run_ids`` the fleet's study does not hold; ``whole``: their
        marks and results too. Never raises for the storage."""
        state = self.optuna.trial.TrialState
        copied = 0
        try:
            for trial in local.get_trials(deepcopy=False):
                run_id = trial.user_attrs.get(runs.RUN_ATTR)
                tag = (run_id, trial.number)
                if run_id not in run_ids or trial.state == state.RUNNING or tag in self.held:
                    continue
                self.study.add_trial(self._copy(trial))
                self.held.add(tag)
                copied += 1
            if whole:
                attrs = local.user_attrs
                for run_id in run_ids:
                    for key in (runs.RUN_PREFIX + run_id, RESULT_PREFIX + run_id):
                        if key in attrs and self.study.user_attrs.get(key) != attrs[key]:
                            self.study.set_user_attr(key, attrs[key])
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if not isinstance(exc, durable.storage_errors()):
                raise
            return Pushed(copied, durable.write_failure("the trials", f"{self.shown} (study {self.name})", exc,
                                                        self.url))
        return Pushed(copied)

    def _copy(self, trial):
        return self.optuna.trial.FrozenTrial(
            number=0, state=trial.state, value=None, values=trial.values, datetime_start=trial.datetime_start,
            datetime_complete=trial.datetime_complete, params=trial.params, distributions=trial.distributions,
            user_attrs={**trial.user_attrs, LOCAL_ATTR: trial.number}, system_attrs=trial.system_attrs,
            intermediate_values=trial.intermediate_values, trial_id=0)

    def close(self) -> None:
        durable.dispose(self.storage)


def _tag(trial) -> tuple[str, int] | None:
    run_id, number = trial.user_attrs.get(runs.RUN_ATTR), trial.user_attrs.get(LOCAL_ATTR)
    return (run_id, number) if isinstance(run_id, str) and isinstance(number, int) else None


def pending(local, shown: str) -> list[str]:
    """The runs of the ``local`` study bound for the storage ``shown`` that are not all there yet."""
    return [name[len(FLEET_PREFIX):] for name, value in local.user_attrs.items()
            if name.startswith(FLEET_PREFIX) and isinstance(value, dict) and value.get("to") == shown
            and not value.get("done")]


def bound(local, run_id: str, shown: str, done: bool) -> None:
    """Record in the ``local`` study that ``run_id`` goes to ``shown`` (``done``: all of it is there)."""
    local.set_user_attr(FLEET_PREFIX + run_id, {"to": shown, "done": done})


# Failures the user's code caused: they stand only while that code is unchanged.
USER_CODE_CAUSES = frozenset({"dataset_error", "collate_error", "sampler_error", "step_error", "error"})
# Crashes that can be one-offs: they stand once seen twice for a config.
FLAKY_CAUSES = frozenset({"worker_killed", "worker_segfault", "runner_killed"})


@dataclass(frozen=True)
class StoredTrial:
    """One finished trial as the study holds it: its result, the limits and the code it ran under."""
    result: TrialResult
    limits: dict | None = None
    code: str | None = None


@dataclass(frozen=True)
class History:
    """The stored trials that stand, in order, and how many were left out and why."""
    trials: tuple[TrialResult, ...] = ()
    limit_raised: int = 0       # a limit's verdict under a limit since raised
    code_changed: int = 0       # a failure of the user's code, which has changed since
    crashed_once: tuple[LoaderConfig, ...] = ()   # configs with one crash: tried once more
    invalid: int = 0            # records that failed validation (warned about, ignored)
    environment: int = 0        # a failure of the environment (an OSError): NOTE [ Fixed outside the code ]


def code_changed(result: TrialResult, recorded: str | None, now: str | None) -> bool:
    """Whether ``result`` is a failure of the user's code that ran other code than ``now`` (one
    without a digest counts as changed: measuring once more costs one trial)."""
    if now is None or result.status != FAILED or result.cause not in USER_CODE_CAUSES:
        return False
    return recorded != now


def standing(stored: Sequence[StoredTrial], limit_raised: Callable[[TrialResult, dict | None], bool],
             code: str | None, invalid: int = 0) -> History:
    """Each config's newest result, unless one of the module's exceptions puts it aside.
    ``limit_raised(result, recorded_limits)`` is the limits' rule (``stopped_by_a_raised_limit``)."""
    newest = {s.result.config: i for i, s in enumerate(stored)}
    crashes = Counter(s.result.config for s in stored if _is_crash(s.result))
    trials, raised, changed, once, environment = [], 0, 0, [], 0
    for i, s in enumerate(stored):
        if newest[s.result.config] != i:
            continue    # superseded: measured again since
        if limit_raised(s.result, s.limits):
            raised += 1
        elif code_changed(s.result, s.code, code):
            changed += 1
        elif _is_crash(s.result) and crashes[s.result.config] < 2:
            once.append(s.result.config)
        elif environment_failed(s.result):
            environment += 1
        else:
            trials.append(s.result)
    return History(tuple(trials), raised, changed, tuple(once), invalid, environment)


def environment_failed(result: TrialResult) -> bool:
    """A failure on an OSError, not a crash: NOTE [ Fixed outside the code ]."""
    return result.status == FAILED and result.os_error and result.cause not in FLAKY_CAUSES


def rule_again(trials: Sequence[TrialResult], rule: LoaderConfig | None) -> tuple[list[TrialResult],
                                                                                        TrialResult | None]:
    """A resumed run's stored trials less a failure (or hang) of the rule, which is measured
    again, and that failure (NOTE [ Fixed outside the code ])."""
    failed = next((t for t in trials if t.config == rule and t.status in (FAILED, HANG)), None)
    return [t for t in trials if t is not failed], failed


def _is_crash(result: TrialResult) -> bool:
    return result.status == FAILED and result.cause in FLAKY_CAUSES


@dataclass
class OnceMore:
    """Whether a finished trial enters the history now (NOTE [ A crash counts twice ])."""
    crashed: set = field(default_factory=set)

    def stands(self, result: TrialResult) -> bool:
        """False for a config's first crash (it is tried once more); True otherwise."""
        if not _is_crash(result) or result.config in self.crashed:
            return True
        self.crashed.add(result.config)
        return False
