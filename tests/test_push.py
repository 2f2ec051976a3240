"""Local first (NOTE [ Local first ] in autoloader/store/study.py), on SQLite files for speed: the
local study records, the fleet's gets every finished trial tagged with its run, a push made twice
adds nothing, what a failed push kept is pushed by the next run, and nothing RUNNING is pushed.
tests/test_fleet_outage.py does it against a real PostgreSQL server stopped mid-run."""

from __future__ import annotations

import json

import optuna
import pytest

from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig, SearchSpace
from autoloader.store import runs
from autoloader.store.history import stored_picks
from autoloader.store.result import TuneResult
from autoloader.store.study import LOCAL_ATTR, RESULT_PREFIX, Fleet, Limits, StudyStore, bound, pending

SPACE = SearchSpace((16,), 8, pin_memory=(False,))
LIMITS = Limits(2**30, 60.0)
NAME = "cpu-0x-2cpu-16g-00000000/ds-n100-abc"


def _config(workers: int) -> LoaderConfig:
    return LoaderConfig.make(16, workers, False)


def _measure(store: StudyStore, workers: int) -> None:
    config = _config(workers)
    store.finish(store.begin(config, LIMITS), TrialResult(config, OK, samples_per_s=100.0 + workers))


def _result(store: StudyStore, workers: int = 1) -> TuneResult:
    return TuneResult.from_dict({"config": _config(workers).loader_kwargs(), "samples_per_s": 101.0,
                                 "dataset_key": "ds-n100-abc", "run_id": store.run.run_id,
                                 "hardware": {"fingerprint": NAME.split("/")[0], "cpus": 2}}, "/x.json")


def _fleet(url: str) -> optuna.Study:
    return optuna.load_study(study_name=NAME, storage=url)


def _tags(study: optuna.Study) -> list:
    return [(t.user_attrs[runs.RUN_ATTR], t.user_attrs[LOCAL_ATTR]) for t in study.get_trials(deepcopy=False)]


@pytest.fixture
def urls(tmp_path):
    return f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'fleet.db'}"


def test_every_finished_trial_is_pushed_tagged_once_and_nothing_running(urls):
    local, fleet = urls
    store = StudyStore(local, NAME, SPACE, fleet=fleet)
    _measure(store, 0)
    running = store.begin(_config(2), LIMITS)
    _measure(store, 1)
    assert sorted(_tags(_fleet(fleet))) == [(store.run.run_id, 0), (store.run.run_id, 2)], "as each trial ended"
    assert all(t.state != optuna.trial.TrialState.RUNNING for t in _fleet(fleet).get_trials(deepcopy=False))
    store.finish(running, TrialResult(_config(2), OK, samples_per_s=102.0))
    store.complete(_result(store))
    store.close()
    study = _fleet(fleet)
    assert sorted(n for _, n in _tags(study)) == [0, 1, 2]
    assert {t.user_attrs["samples_per_s"] for t in study.get_trials(deepcopy=False)} == {100.0, 101.0, 102.0}
    assert runs.runs_of(study)[store.run.run_id].state == runs.COMPLETE, "the mark is pushed"
    # Pushed again, from a fresh open: nothing added.
    again = Fleet(fleet, NAME, runs.make_fixed_sampler())
    assert again.push(store.study, [store.run.run_id], whole=True).trials == 0
    assert len(_fleet(fleet).get_trials(deepcopy=False)) == 3
    # The storage's pick is the run's whole result, as the door read it.
    (whole,) = stored_picks(fleet, whole=True)
    assert not whole.partial and whole.where.endswith(f"#{NAME}") and whole.run_id == store.run.run_id
    (pick,) = stored_picks(fleet)
    assert pick.partial


def test_what_a_failed_push_kept_is_pushed_by_the_next_run(urls, monkeypatch):
    local, fleet = urls
    store = StudyStore(local, NAME, SPACE, fleet=fleet, notice=(said := []).append)
    _measure(store, 0)
    # The storage stops taking writes mid-run: the next push fails, the search goes on locally.
    import sqlalchemy.exc

    def refused(*args, **kwargs):
        raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("connection refused"))

    monkeypatch.setattr(store.fleet.study, "add_trial", refused)
    _measure(store, 1)
    _measure(store, 2)
    assert store.push_failed and "could not write the trials" in store.push_failed and len(said) == 1
    assert len(store.study.get_trials(deepcopy=False)) == 3, "every trial is in the local study"
    from autoloader.errors import NotSaved

    with pytest.raises(NotSaved) as caught:
        store.complete(_result(store))
    assert "the next run with --storage" in str(caught.value)
    assert any(line.startswith("not pushed to") for line in caught.value.stored)
    assert any(line.startswith("study ") for line in caught.value.stored)
    store.close()
    first = store.run.run_id
    assert _tags(_fleet(fleet)) == [(first, 0)]
    monkeypatch.undo()
    # The next run on this host with the same storage pushes them before it measures.
    nxt = StudyStore(local, NAME, SPACE, fleet=fleet, notice=(told := []).append)
    assert sorted(_tags(_fleet(fleet))) == [(first, 0), (first, 1), (first, 2)]
    assert runs.runs_of(_fleet(fleet))[first].state == runs.COMPLETE
    assert told and "pushed 2 trials" in told[0]
    assert pending(nxt.study, nxt.fleet.shown) == [nxt.run.run_id], "the earlier run is all there now"
    nxt.close()


def test_a_run_bound_for_another_storage_is_not_pushed_here(urls, tmp_path):
    local, fleet = urls
    store = StudyStore(local, NAME, SPACE, fleet=fleet)
    store.close()
    # The local study names a run bound for another storage, never pushed: left alone.
    bound(store.study, "otherrun0000", "postgresql://elsewhere/db", False)
    other = StudyStore(local, NAME, SPACE, fleet=f"sqlite:///{tmp_path / 'second.db'}")
    assert pending(other.study, "postgresql://elsewhere/db") == ["otherrun0000"]
    other.close()


def test_storage_naming_the_local_study_pushes_nothing(urls):
    local, _ = urls
    store = StudyStore(local, NAME, SPACE, fleet=local)
    assert store.fleet is None
    _measure(store, 0)
    assert len(store.study.get_trials(deepcopy=False)) == 1
    store.close()


def test_the_result_kept_beside_the_mark_is_json(urls):
    local, fleet = urls
    store = StudyStore(local, NAME, SPACE, fleet=fleet)
    _measure(store, 1)
    result = _result(store)
    store.complete(result)
    kept = store.study.user_attrs[RESULT_PREFIX + store.run.run_id]
    assert json.loads(json.dumps(kept)) == json.loads(json.dumps(result.to_dict(), default=str))
    assert TuneResult.from_dict(kept).tuned.config == result.config
    store.close()
