"""Where results live: the Optuna study (every trial, resumable) and the tuned-config JSON.

Layout under the results directory (``--out``, default ``results/``)::

    <hardware-fingerprint>/<dataset-key>.json   the tuned config and its figures
    <hardware-fingerprint>/<dataset-key>.py     the self-contained DataLoader snippet
    <hardware-fingerprint>/<dataset-key>.db     the study (SQLite), unless --storage names another

# NOTE [ Nothing lost ]
# Each trial is told to the study the moment it ends, with its whole TrialResult as a user
# attribute, so a driver killed at any moment (SIGKILL included) loses at most the trial in
# flight. SQLite commits are atomic, so there is no torn record to repair. On reopening, trials
# still marked RUNNING belonged to the dead driver: they are marked FAIL, and their configs are
# measured again (nothing finished was lost). A finished trial's config is never re-run: the
# strategy sees it in the history. The one exception is a limit's verdict (memory ceiling,
# watchdog) once that limit is raised: the trial records its limits, and history() leaves it out.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

from .errors import usage
from .policy import RAISED
from .results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from .space import LoaderConfig, SearchSpace

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
    is enqueued with exactly those parameters, so Optuna's sampler never supplies a value (a
    seeded RandomSampler stands in, the cheapest to build). The parameters are still suggested
    with their full ranges, so optuna-dashboard and other Optuna tools read the study as usual."""

    def __init__(self, url: str, study_name: str, space: SearchSpace):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.space = space
        try:
            if url.startswith("sqlite:///"):
                os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///"):])) or ".", exist_ok=True)
            storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}}
                                                 if url.startswith("sqlite") else None)
            self.study = optuna.create_study(study_name=study_name, storage=storage, direction="maximize",
                                             load_if_exists=True, sampler=optuna.samplers.RandomSampler(seed=0))
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy/Optuna raise many kinds
            raise usage("the study's storage must be a database URL Optuna can open (--storage, or the "
                        "default SQLite file under --out)", url,
                        "use e.g. sqlite:///results/study.db (the directory must be writable), or leave "
                        f"--storage out for the default ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
        self.stale_repaired = self._fail_stale_trials()

    def _fail_stale_trials(self) -> int:
        running = self.study.get_trials(deepcopy=False, states=(self.optuna.trial.TrialState.RUNNING,))
        for trial in running:
            self.study._storage.set_trial_state_values(trial._trial_id, self.optuna.trial.TrialState.FAIL)
        return len(running)

    def history(self, limits: Limits) -> tuple[list[TrialResult], int]:
        """Each config's newest finished result, in order, and how many configs were left out
        because a limit that stopped them has since been raised (``stopped_by_a_raised_limit``):
        those are measured again. A config has more than one result only when it was."""
        finished = []
        for trial in self.study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RESULT_ATTR)
            if data is not None and trial.state != self.optuna.trial.TrialState.RUNNING:
                finished.append((TrialResult.from_dict(data), trial.user_attrs.get(LIMITS_ATTR)))
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

    def begin(self, config: LoaderConfig, limits: Limits):
        """Open a trial for ``config`` under ``limits`` (RUNNING until ``finish``): a crash
        mid-trial leaves a stale record that the next open marks failed."""
        self.study.enqueue_trial(config.loader_kwargs())
        trial = self.study.ask()
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
        trial.set_user_attr(RESULT_ATTR, result.to_dict())
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

