"""A fleet's storage written local first: every run records in its own SQLite study, then pushes.

# NOTE [ Local first ]
# With ``--storage URL`` (any storage other than the study beside the result) a run still records
# every trial in the local study (NOTE [ Nothing lost ] in study.py) and copies the finished ones
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
"""

from __future__ import annotations

from dataclasses import dataclass

from . import durable, runs
from .storage import masked, name_metric, open_storage, open_study

LOCAL_ATTR = "autoloader_local_trial"       # a pushed trial's number in the study it was measured in
FLEET_PREFIX = "autoloader_fleet:"          # local study attribute: where a run's trials go
RESULT_PREFIX = "autoloader_result:"        # study attribute: a complete run's whole result


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
