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

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Iterable

from .errors import usage
from .results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from .space import LoaderConfig, SearchSpace

RESULT_ATTR = "autoloader_result"
LIMITS_ATTR = "autoloader_limits"
# Verdicts a limit gave, not the config: each is retried once that limit is raised by RAISED or
# more. A smaller rise is drift, not a decision: the default ceiling follows the RAM free at the
# moment, and re-running every config it stopped whenever a little more was free would flap.
_MEMORY_CAUSES = ("host_memory", "predicted_memory")
RAISED = 1.25


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


def dataset_key(name: str, length: int | None, batch_sizes: Iterable[int], step_name: str | None,
                device: str, fixed_kwargs: dict) -> str:
    """Name a tuning problem: what is loaded, how it is consumed, which batch sizes, which device.
    Readable prefix, hashed rest, so two problems never share a file."""
    readable = re.sub(r"[^A-Za-z0-9]+", "-", name.rsplit("/", 1)[-1]).strip("-")[:40] or "dataset"
    # A default repr carries a memory address (a collate_fn is "<function f at 0x7f...>"), which
    # would give every run a new key and never find a stored result again.
    identity = repr((name, length, tuple(batch_sizes), step_name, device,
                     sorted((k, re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))) for k, v in fixed_kwargs.items())))
    return f"{readable}-n{length if length is not None else 'iter'}-{hashlib.sha1(identity.encode()).hexdigest()[:10]}"


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
    """The Optuna study behind one tuning problem."""

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
                                             load_if_exists=True, sampler=optuna.samplers.TPESampler(seed=0))
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
        params = {"batch_size": config.batch_size, "num_workers": config.num_workers,
                  "pin_memory": config.pin_memory}
        if config.num_workers:
            params["prefetch_factor"] = config.prefetch_factor
            params["persistent_workers"] = config.persistent_workers
        self.study.enqueue_trial(params)
        trial = self.study.ask()
        trial.suggest_categorical("batch_size", list(self.space.batch_sizes))
        trial.suggest_int("num_workers", 0, max(self.space.max_workers, config.num_workers))
        trial.suggest_categorical("pin_memory", list(self.space.pin_choices))
        if config.num_workers:
            trial.suggest_categorical("prefetch_factor", list(self.space.prefetch_choices))
            trial.suggest_categorical("persistent_workers", list(self.space.persistent_choices))
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

