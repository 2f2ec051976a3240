"""Keys of tuning problems: the same problem gets the same key in every run, so a stored result
is found again."""

import dataclasses

import pytest

from autoloader.inputs.problem import Problem


def dataset_key(spec, length, batch_sizes, step, device, fixed_kwargs):
    return Problem.build(spec, step=step, batch_sizes=batch_sizes, device=device, fixed_kwargs=fixed_kwargs,
                         length=length, length_known=True).key


class Shown:
    """A collate_fn whose repr is the given text, as a function's default repr is in another process."""

    def __init__(self, text: str):
        self.text = text

    def __call__(self, samples):
        return samples

    def __repr__(self) -> str:
        return self.text


def test_an_object_address_does_not_change_the_key():
    # A default repr carries the address ("<function collate_as_list at 0x7f...>"), which differs
    # between processes; the key must not.
    other_address = {"collate_fn": Shown("<function collate_as_list at 0x7f00deadbeef>")}
    assert dataset_key("mod:ds", 10, (8,), None, "cpu", other_address) == \
        dataset_key("mod:ds", 10, (8,), None, "cpu", {"collate_fn": Shown("<function collate_as_list at 0x1234>")})


def test_different_arguments_give_different_keys():
    assert dataset_key("mod:ds", 10, (8,), None, "cpu", {"drop_last": True}) != \
        dataset_key("mod:ds", 10, (8,), None, "cpu", {"drop_last": False})


def test_a_result_file_gets_the_usual_permissions(tmp_path):
    import os
    import stat

    from autoloader.store.durable import atomic_write_all

    old = os.umask(0o022)
    try:
        atomic_write_all({str(tmp_path / "result.json"): "{}"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "result.json").st_mode) == 0o644
    assert os.listdir(tmp_path) == ["result.json"]  # no temporary file left behind


def test_a_limits_verdict_is_retried_only_once_that_limit_is_raised():
    from autoloader.search.results import CONSTRAINT, FAILED, HANG, TrialResult
    from autoloader.search.space import LoaderConfig
    from autoloader.store.study import Limits, stopped_by_a_raised_limit

    config = LoaderConfig.make(16, 4, False, 2, True)
    over = TrialResult(config, CONSTRAINT, cause="host_memory")
    predicted = TrialResult(config, CONSTRAINT, cause="predicted_memory")
    hang = TrialResult(config, HANG, cause="hang")
    crash = TrialResult(config, FAILED, cause="worker_segfault")
    shm = TrialResult(config, FAILED, cause="shm_exhausted")
    then = {"max_memory": 2**30, "trial_timeout": 8.0}
    raised = Limits(max_memory=2**31, trial_timeout=60.0)
    same = Limits(max_memory=2**30, trial_timeout=8.0)
    drifted = Limits(max_memory=int(1.1 * 2**30), trial_timeout=9.0)   # the default ceiling follows free RAM
    lower = Limits(max_memory=2**29, trial_timeout=4.0)
    for limit_verdict in (over, predicted, hang):
        assert stopped_by_a_raised_limit(limit_verdict, then, raised)
        assert not stopped_by_a_raised_limit(limit_verdict, then, same)
        assert not stopped_by_a_raised_limit(limit_verdict, then, drifted)
        assert not stopped_by_a_raised_limit(limit_verdict, then, lower)
        assert not stopped_by_a_raised_limit(limit_verdict, None, raised), "no record of the limits: kept"
    # Only the limit that gave the verdict counts.
    assert not stopped_by_a_raised_limit(over, then, Limits(max_memory=2**30, trial_timeout=60.0))
    assert not stopped_by_a_raised_limit(hang, then, Limits(max_memory=2**31, trial_timeout=8.0))
    # The config's own failures stand whatever the limits.
    assert not stopped_by_a_raised_limit(crash, then, raised)
    assert not stopped_by_a_raised_limit(shm, then, raised)


@pytest.mark.slow
def test_history_keeps_each_configs_newest_result_and_counts_a_retry_once(tmp_path):
    """A verdict re-measured under a raised limit is superseded by the new result, so the
    strategy never sees the config as both broken and measured, and later runs retry nothing."""
    from autoloader.search.results import CONSTRAINT, OK, TrialResult
    from autoloader.search.space import LoaderConfig, SearchSpace
    from autoloader.store import runs
    from autoloader.store.study import Limits, StudyStore

    def interrupted(store):
        """As if the store's process had been killed: its run's owner is gone."""
        gone = dataclasses.replace(store.run.owner, started=0.0)
        runs.write_mark(store.study, dataclasses.replace(store.run, owner=gone))

    url = f"sqlite:///{tmp_path / 'study.db'}"
    space = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
    two, four = LoaderConfig.make(16, 2, False), LoaderConfig.make(16, 4, False)
    tight, loose = Limits(2**30, 60.0), Limits(2**32, 60.0)
    store = StudyStore(url, "demo", space)
    for config, result in ((two, TrialResult(two, OK, samples_per_s=100.0)),
                           (four, TrialResult(four, CONSTRAINT, cause="host_memory", error="past the ceiling"))):
        store.finish(store.begin(config, tight), result)
    interrupted(store)

    store = StudyStore(url, "demo", space)
    loaded = store.reread(loose)
    history, retried = list(loaded.trials), loaded.limit_raised
    assert store.resumed_run and [r.config for r in history] == [two] and retried == 1

    store.finish(store.begin(four, loose), TrialResult(four, OK, samples_per_s=150.0))
    interrupted(store)
    store = StudyStore(url, "demo", space)
    loaded = store.reread(loose)
    history, retried = list(loaded.trials), loaded.limit_raised
    assert [(r.config, r.status) for r in history] == [(two, OK), (four, OK)] and retried == 0
    # Back to the tight ceiling: the newest result stands; the old verdict does not come back.
    interrupted(store)
    loaded = StudyStore(url, "demo", space).reread(tight)
    history, retried = list(loaded.trials), loaded.limit_raised
    assert [(r.config, r.status) for r in history] == [(two, OK), (four, OK)] and retried == 0
