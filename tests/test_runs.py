"""Runs in a study (NOTE [ Runs in a study ]): whose trials a run decides on, and who may fail a
RUNNING trial. Stores opened side by side in one process stand for tuners in many."""

from __future__ import annotations

import dataclasses

import optuna
import pytest

from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig, SearchSpace
from autoloader.store import runs
from autoloader.store.study import Limits, StudyStore
from autoloader.store.result import TuneResult

SPACE = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
LIMITS = Limits(2**30, 60.0)
TWO, FOUR = LoaderConfig.make(16, 2, False), LoaderConfig.make(16, 4, False)


def measured(config, rate=100.0):
    return TrialResult(config, OK, samples_per_s=rate)


def interrupted(store):
    """As if the store's process had been killed: its run's owner is gone."""
    runs.write_mark(store.study, dataclasses.replace(store.run, owner=dataclasses.replace(store.run.owner,
                                                                                         started=0.0)))


@pytest.mark.slow
def test_opening_a_study_never_fails_another_tuners_live_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    first = StudyStore(url, "hw/key", SPACE)
    trial = first.begin(TWO, LIMITS)
    second = StudyStore(url, "hw/key", SPACE)       # the other tuner opens while TWO is in flight
    assert second.stale_repaired == 0 and not second.resumed_run
    other = second.begin(FOUR, LIMITS)
    first.finish(trial, measured(TWO))                # no UpdateFinishedTrialError
    second.finish(other, measured(FOUR))
    assert [r.config for r in first.reread(LIMITS).trials] == [TWO], "each takes its own trial only"
    assert [r.config for r in second.reread(LIMITS).trials] == [FOUR]
    states = [t.state for t in first.study.get_trials(deepcopy=False)]
    assert states == [optuna.trial.TrialState.COMPLETE] * 2


@pytest.mark.slow
def test_a_new_run_after_a_complete_one_starts_empty_and_keeps_its_trials(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(url, "hw/key", SPACE)
    store.finish(store.begin(TWO, LIMITS), measured(TWO))
    store.complete(TuneResult.from_dict({"config": TWO.loader_kwargs(), "samples_per_s": 500.0,
                                         "dataset_key": "key"}, partial=True))
    again = StudyStore(url, "hw/key", SPACE)
    assert not again.resumed_run and not again.reread(LIMITS).trials and not again.reread(LIMITS).limit_raised
    assert len(again.study.get_trials(deepcopy=False)) == 1, "the complete run's trial stays in the study"
    # A run that ended in an error is not resumed either.
    again.finish(again.begin(FOUR, LIMITS), measured(FOUR))
    again.failed()
    third = StudyStore(url, "hw/key", SPACE)
    assert not third.resumed_run and not third.reread(LIMITS).trials and not third.reread(LIMITS).limit_raised
    assert len(third.study.get_trials(deepcopy=False)) == 2


@pytest.mark.slow
def test_an_interrupted_run_is_resumed_and_its_running_trial_failed_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(url, "hw/key", SPACE)
    store.finish(store.begin(TWO, LIMITS), measured(TWO))
    store.begin(FOUR, LIMITS)                        # killed while FOUR runs
    store.close()
    interrupted(store)
    again = StudyStore(url, "hw/key", SPACE)
    assert again.resumed_run and again.run.run_id == store.run.run_id and again.stale_repaired == 1
    assert [r.config for r in again.reread(LIMITS).trials] == [TWO], "its finished trial is kept"
    assert again.run.owner == runs.this_owner()


def test_who_is_known_dead():
    me = runs.this_owner()
    assert not me.gone()
    assert dataclasses.replace(me, started=0.0).gone(), "another process with this pid"
    assert dataclasses.replace(me, boot="an-earlier-boot").gone() == bool(runs._boot())
    assert not dataclasses.replace(me, host="another-machine", started=0.0).gone(), "only heartbeats tell"


@pytest.mark.slow
def test_a_measurement_told_after_a_stale_repair_is_kept(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(url, "hw/key", SPACE)
    trial = store.begin(TWO, LIMITS)
    store.study.tell(trial.number, state=optuna.trial.TrialState.FAIL)   # another process's repair
    store.finish(trial, measured(TWO, 123.0))
    assert [(r.config, r.samples_per_s) for r in store.reread(LIMITS).trials] == [(TWO, 123.0)]


@pytest.mark.slow
def test_a_shared_storage_lists_and_offers_each_machines_last_pick(tmp_path):
    """What a machine new to a fleet starts from, and what `autoloader show --storage` lists: the
    complete runs' picks recorded in the storage's studies, nearest hardware first."""
    from autoloader.fleet import show
    from autoloader.fleet.retune import warm_plan
    from autoloader.inputs.hardware import Hardware
    from autoloader.inputs.problem import Problem
    from autoloader.store.history import nearest, other_hardware

    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    picks = {"big-0x-16cpu": (16, LoaderConfig.make(16, 12, False)),
             "mid-0x-4cpu": (4, LoaderConfig.make(16, 3, False))}
    for fingerprint, (cpus, config) in picks.items():
        store = StudyStore(url, f"{fingerprint}/ds-n100-abc", SPACE)
        store.finish(store.begin(config, LIMITS), measured(config, 500.0))
        store.complete(TuneResult.from_dict(
            {"config": config.loader_kwargs(), "samples_per_s": 500.0, "dataset_key": "ds-n100-abc",
             "hardware": {"fingerprint": fingerprint, "cpus": cpus, "cpu_model": "x", "memory_gib": 16, "gpus": []},
             "measurement_format": 1, "finished_at": "2026-12-01T00:00:00+00:00"}, partial=True))
    rows = show.listing(str(tmp_path / "empty"), url)
    assert [(r.hardware, r.key, r.config["num_workers"]) for r in rows] == [("big-0x-16cpu", "ds-n100-abc", 12),
                                                                          ("mid-0x-4cpu", "ds-n100-abc", 3)]
    here = Hardware(cpus=2, cpu_model="x", memory_gib=16, gpus=())
    found = other_hardware(str(tmp_path / "empty"), here.fingerprint, "ds-n100-abc", url)
    base = nearest(here, found)
    assert base.hardware.fingerprint == "mid-0x-4cpu" and base.where.endswith("#mid-0x-4cpu/ds-n100-abc")
    problem = Problem.build("mod:ds", batch_size=16, device="cpu", hw=here, length=100, length_known=True)
    warm = warm_plan(base, problem)
    assert warm.start.pick.num_workers == 2, "3 workers on 4 CPUs: 2 on this machine's 2"
    assert not warm.start.may_stop and "nearest other hardware" in warm.describe()


@pytest.mark.slow
def test_a_trial_that_never_named_its_run_is_failed_once_it_is_old(tmp_path, monkeypatch):
    """A driver killed between creating a trial and its next write leaves a RUNNING trial with no
    run and no beats: no one will finish it, and after the grace period it is failed."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(url, "hw/key", SPACE)
    orphan = store.study.ask()                          # as if killed right after this
    assert StudyStore(url, "hw/key", SPACE).stale_repaired == 0, "not yet: a live driver names it in ms"
    monkeypatch.setattr(runs, "UNCLAIMED_S", -1)
    assert StudyStore(url, "hw/key", SPACE).stale_repaired == 1
    assert store.study.trials[orphan.number].state == optuna.trial.TrialState.FAIL
