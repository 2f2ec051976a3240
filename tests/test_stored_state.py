"""Stored state a user can trust: a failure does not outlive the code that caused it, a crash
counts twice, a stored record that is damaged, edited or from a newer version is ignored with a
warning that names it, a study that cannot be read is moved aside, and a password never shows."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import WORKLOADS

from autoloader import best_loader, stored_result, tune
from autoloader.cli import main
from autoloader.events import TrialDone
from autoloader.search.results import FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig, SearchSpace
from autoloader.store import runs
from autoloader.store.study import RESULT_ATTR, Limits, StudyStore
from scripts.faults import datasets as faulty
from scripts.faults.checks import orphan_last_run
from scripts.faults.inputs import BROKEN_STEP, FIXED_STEP, RAGGED, write_module

LIMITS = Limits(2**33, 60.0)
# autoloader's warnings (validate.StoredStateWarning, durable.StudyMovedAside) are UserWarnings.


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def tune_args(out_dir: str, dataset: str, *more: str) -> list[str]:
    return ["tune", "--dataset", dataset, "--batch-size", "16", "--budget", "30", "--device", "cpu",
            "--out", out_dir, *more]


# --- a failure of the user's code does not outlive the code (item 1) ---------------------------

@pytest.mark.slow
@pytest.mark.heavy
def test_a_fixed_step_is_measured_again(out_dir, tmp_path):
    step = tmp_path / "mystep.py"
    write_module(str(step), BROKEN_STEP)
    args = tune_args(out_dir, f"{WORKLOADS}:tiny", "--step", f"{step}:step")
    first = invoke(*args)
    assert first.exit_code == 1 and "step boom" in first.stderr, (first.output, first.exception)

    write_module(str(step), FIXED_STEP)
    fixed = invoke(*args, "--json")
    assert fixed.exit_code == 0, (fixed.output, fixed.exception)
    assert "resuming" not in fixed.stderr, "no finished trial of the old code stands"
    assert all(t["status"] == OK for t in json.loads(fixed.stdout)["trials"])


def _interrupted(store: StudyStore) -> None:
    """As if the store's process had been killed: its run's owner is gone, so the next store on
    the study resumes the run (NOTE [ Runs in a study ])."""
    runs.write_mark(store.study, dataclasses.replace(store.run, owner=dataclasses.replace(store.run.owner, started=0.0)))
    store.close()


@pytest.mark.slow
@pytest.mark.heavy
def test_a_killed_runs_failures_stand_while_the_code_does_and_go_when_it_changes(out_dir, tmp_path):
    """NOTE [ Failures keyed by code ]: a run killed after its step raised is resumed with that
    failure; the failure stands while the step's file is unchanged; once the step changed it is another
    problem, which measures afresh."""
    step = tmp_path / "mystep.py"
    write_module(str(step), BROKEN_STEP)
    args = tune_args(out_dir, f"{WORKLOADS}:tiny", "--step", f"{step}:step")
    first = invoke(*args)
    assert first.exit_code == 1 and "step boom" in first.stderr, (first.output, first.exception)
    db = faulty.find_study(out_dir)

    orphan_last_run(db)
    unchanged = invoke(*args)
    assert unchanged.exit_code == 1, (unchanged.output, unchanged.exception)
    assert re.search(r"resuming \d+ finished trials", unchanged.stderr) and "since changed" not in unchanged.stderr

    orphan_last_run(db)
    write_module(str(step), FIXED_STEP)
    fixed = invoke(*args, "--json")
    assert fixed.exit_code == 0, (fixed.output, fixed.exception)
    # A changed step is another problem (NOTE [ A step keyed by what it is ] in inputs/code_digest.py):
    # the fixed step's run resumes nothing of the broken one's, so none of its failures stand.
    assert "resuming" not in fixed.stderr and "since changed" not in fixed.stderr, fixed.stderr
    assert all(t["status"] == OK for t in json.loads(fixed.stdout)["trials"])


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dataset_whose_samples_stopped_varying_is_measured_again(out_dir, tmp_path):
    module = tmp_path / "ragged.py"
    write_module(str(module), RAGGED.format(vary=True))
    args = tune_args(out_dir, f"{module}:make")
    first = invoke(*args)
    assert first.exit_code == 1, (first.output, first.exception)
    assert "collating samples into a batch raised" in first.stderr

    write_module(str(module), RAGGED.format(vary=False))
    fixed = invoke(*args, "--json")
    assert fixed.exit_code == 0, (fixed.output, fixed.exception)
    assert all(t["status"] == OK for t in json.loads(fixed.stdout)["trials"])


@pytest.mark.slow
@pytest.mark.heavy
def test_a_crash_is_tried_once_more_before_it_counts(out_dir, tmp_path):
    """A worker that segfaults once: the config is tried again at once and measured; the study
    keeps the crash, the history the strategy sees does not."""
    events = []
    dataset = faulty.CrashOnce(str(tmp_path / "crashed"))
    result = tune(dataset, batch_size=16, budget=30, device="cpu", out=out_dir, trial_timeout=20,
                  progress=events.append)
    trials = [e for e in events if isinstance(e, TrialDone)]
    crashed = [i for i, e in enumerate(trials) if e.again]
    assert len(crashed) == 1, [(e.result.config.key, e.result.cause, e.again) for e in trials]
    first, retry = trials[crashed[0]], trials[crashed[0] + 1]
    assert first.result.cause == "worker_segfault" and first.result.config.num_workers > 0
    assert retry.result.config == first.result.config and retry.result.status == OK
    assert not retry.again and retry.n == first.n, "the retry is the same trial of the search"
    assert all(t.status == OK for t in result.trials), "the one-off crash is not in the history"
    states = faulty.study_states(faulty.find_study(out_dir))
    assert sorted(state for state, _ in states.values()).count("FAIL") == 1, "the crash is stored all the same"


@pytest.mark.slow
def test_stored_verdicts_rules(tmp_path):
    """The study's side: a crash stored once is tried again, twice stands; a failure of the user's
    code stands while its code does; one stored without a digest (format 1) is tried again."""
    space = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
    url = f"sqlite:///{tmp_path / 'study.db'}"
    one, two, three, four = (LoaderConfig.make(16, w, False) for w in (1, 2, 3, 4))
    store = StudyStore(url, "s", space)
    crash = lambda c: TrialResult(c, FAILED, cause="worker_killed", error="killed")  # noqa: E731
    store.finish(store.begin(one, LIMITS, "code-a"), crash(one))
    store.finish(store.begin(two, LIMITS, "code-a"), crash(two))
    store.finish(store.begin(two, LIMITS, "code-a"), crash(two))
    store.finish(store.begin(three, LIMITS, "code-a"), TrialResult(three, FAILED, cause="dataset_error", error="x"))
    store.finish(store.begin(four, LIMITS), TrialResult(four, FAILED, cause="step_error", error="y"))
    _interrupted(store)

    store = StudyStore(url, "s", space)
    same = store.reread(LIMITS, "code-a")
    assert store.resumed_run and [t.config for t in same.trials] == [two, three]
    assert same.crashed_once == (one,) and same.code_changed == 1   # four: no digest recorded
    _interrupted(store)
    changed = StudyStore(url, "s", space).reread(LIMITS, "code-b")
    assert [t.config for t in changed.trials] == [two] and changed.code_changed == 2


# --- damaged, edited or newer stored records (item 4) ------------------------------------------

def _filled_study(tmp_path) -> tuple[str, SearchSpace]:
    space = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
    path = str(tmp_path / "study.db")
    store = StudyStore(f"sqlite:///{path}", "s", space)
    for workers in (0, 1, 2, 3):
        config = LoaderConfig.make(16, workers, False)
        store.finish(store.begin(config, LIMITS, "c"), TrialResult(config, OK, samples_per_s=100.0 + workers))
    _interrupted(store)  # closed as well: the damage below is to a file no one holds open
    return path, space


def _flip_records(path: str) -> None:
    """Overwrite bytes inside the stored result records, as a bad sector or a bit flip would."""
    data = bytearray(open(path, "rb").read())
    at = data.find(b'"samples_per_s"')
    assert at > 0
    data[at:at + 12] = b"\x00\xff{[\x01\x02garbag"
    open(path, "wb").write(bytes(data))


def _flip_run_mark(path: str) -> None:
    """The same in the study's own attributes: its runs' marks (NOTE [ Runs in a study ])."""
    data = bytearray(open(path, "rb").read())
    at = data.find(b'"owner"')
    assert at > 0
    data[at:at + 7] = b"\x00\xff{[\x01\x02g"
    open(path, "wb").write(bytes(data))


def _zero_page(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    page = int.from_bytes(data[16:18], "big") or 65536
    data[2 * page:3 * page] = bytes(page)   # the third page: a b-tree page of the schema's tables
    open(path, "wb").write(bytes(data))


def _garbage(path: str) -> None:
    size = os.path.getsize(path)
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))


@pytest.mark.parametrize("damage", [
    _garbage,
    lambda p: os.truncate(p, os.path.getsize(p) // 2),
    _flip_records,
    _flip_run_mark,
    _zero_page,
], ids=["garbage", "half-truncated", "flipped-record-bytes", "flipped-run-mark", "zeroed-page"])
@pytest.mark.slow
def test_a_study_that_cannot_be_read_is_moved_aside(tmp_path, damage):
    path, space = _filled_study(tmp_path)
    damage(path)
    damaged = open(path, "rb").read()
    with pytest.warns(Warning, match="moved aside to") as caught:
        store = StudyStore(f"sqlite:///{path}", "s", space)
    aside = store.moved_aside
    assert aside and aside.startswith(path + ".corrupt-") and aside in str(caught[0].message)
    told = str(caught[0].message)
    assert told.isprintable(), f"the warning is one line of text: {told!r}"
    assert open(aside, "rb").read() == damaged, "kept as it was"
    assert store.reread(LIMITS, "c").trials == (), "a fresh study"
    config = LoaderConfig.make(16, 0, False)
    store.finish(store.begin(config, LIMITS, "c"), TrialResult(config, OK, samples_per_s=5.0))
    _interrupted(store)
    assert [t.config for t in StudyStore(f"sqlite:///{path}", "s", space).reread(LIMITS, "c").trials] == [config]


def _killed_mid_write(path: str) -> None:
    """A writer SIGKILLed inside a transaction that had spilled pages into the file: it leaves a
    hot journal, as a driver killed with kill -9 while writing a trial does."""
    import signal

    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child dies by its own signal
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA cache_size=10")   # spill to the file before the commit
        connection.execute("BEGIN")
        connection.execute("CREATE TABLE scratch(x BLOB)")
        for _ in range(2000):
            connection.execute("INSERT INTO scratch VALUES (zeroblob(1000))")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.slow
def test_a_study_left_mid_write_by_a_killed_writer_is_rolled_back_not_moved_aside(tmp_path, recwarn):
    path, space = _filled_study(tmp_path)
    _killed_mid_write(path)
    assert os.path.getsize(path + "-journal") > 0, "the test left no hot journal"
    store = StudyStore(f"sqlite:///{path}", "s", space)
    assert store.moved_aside is None and not [w for w in recwarn if "moved aside" in str(w.message)]
    assert [t.config.num_workers for t in store.reread(LIMITS, "c").trials] == [0, 1, 2, 3]
    assert not os.path.exists(path + "-journal"), "rolled back"


@pytest.mark.slow
@pytest.mark.heavy
def test_a_garbage_study_through_the_cli_is_moved_aside_and_the_tune_starts_fresh(out_dir):
    args = tune_args(out_dir, f"{WORKLOADS}:tiny", "--budget", "20", "--json")
    first = invoke(*args)
    assert first.exit_code == 0, (first.output, first.exception)
    db = first_db = json.loads(first.stdout)["path"][:-len(".json")] + ".db"
    with open(db, "wb") as fh:
        fh.write(b"this is not a database" * 1000)
    second = invoke(*args)
    assert second.exit_code == 0, (second.output, second.exception)
    assert "Warning: the study" in second.stderr and "moved aside to " + first_db + ".corrupt-" in second.stderr
    assert "leave --storage out" not in second.stderr
    assert "resuming" not in second.stderr
    third = invoke(*args)
    assert third.exit_code == 0 and "Warning" not in third.stderr, third.stderr
    # The fresh study is read back: it holds the second run's trials and now the third's, each run
    # marked complete (a study that could not be read would have been moved aside again).
    import optuna

    from autoloader.store import runs

    study = optuna.load_study(study_name=json.loads(third.stdout)["study"], storage=f"sqlite:///{db}")
    marks = runs.runs_of(study)
    assert len(marks) == 2 and all(m.state == runs.COMPLETE for m in marks.values())
    assert {t.user_attrs.get(runs.RUN_ATTR) for t in study.get_trials()} == set(marks)


@pytest.mark.parametrize("edit", [
    lambda r: r["config"].update(batch_size="16"),
    lambda r: r.update(samples_per_s="fast"),
    lambda r: r.update(status=None),
    lambda r: r.update(format=99),
    lambda r: r.pop("config"),
], ids=["string-batch-size", "string-rate", "no-status", "newer-format", "no-config"])
@pytest.mark.slow
def test_one_malformed_stored_trial_is_ignored_with_a_warning(tmp_path, edit):
    path, space = _filled_study(tmp_path)
    connection = sqlite3.connect(path)
    (attr_id, value), *_ = connection.execute(
        "SELECT trial_user_attribute_id, value_json FROM trial_user_attributes WHERE key = ? ORDER BY trial_id",
        (RESULT_ATTR,)).fetchall()
    record = json.loads(value)
    edit(record)
    connection.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_user_attribute_id = ?",
                       (json.dumps(record), attr_id))
    connection.commit()
    connection.close()
    with pytest.warns(UserWarning, match=r"ignored trial 0 of the study .*study\.db"):
        loaded = StudyStore(f"sqlite:///{path}", "s", space).reread(LIMITS, "c")
    assert [t.config.num_workers for t in loaded.trials] == [1, 2, 3] and loaded.invalid == 1


@pytest.fixture(scope="module")
def tiny_tuned(tmp_path_factory):
    """One tune of faulty.Tiny(length=128) for the module: each test damages a copy of its folder."""
    out = str(tmp_path_factory.mktemp("tiny-tuned"))
    result = tune(faulty.Tiny(length=128), batch_size=16, budget=20, device="cpu", out=out)
    return out, os.path.relpath(result.path, out)


def _stored_result_file(out_dir: str, tiny_tuned) -> str:
    """The module's tuned folder copied into ``out_dir``: the path of its result file there."""
    source, relative = tiny_tuned
    shutil.copytree(source, out_dir, dirs_exist_ok=True)
    return os.path.join(out_dir, relative)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["config"].update(num_workers=400), "num_workers is 400"),
    (lambda d: d["config"].update(batch_size="16"), "batch_size is '16'"),
    (lambda d: d.update(samples_per_s="fast"), "samples_per_s is 'fast'"),
    (lambda d: d.update(format=7), "newer autoloader"),
    (lambda d: d.update(knee={"curve": "up"}), "stops_paying"),
], ids=["400-workers", "string-batch-size", "string-rate", "newer-format", "bad-knee"])
@pytest.mark.slow
def test_a_bad_result_file_is_ignored_with_a_warning_that_names_it(out_dir, tiny_tuned, edit, says):
    dataset = faulty.Tiny(length=128)
    path = _stored_result_file(out_dir, tiny_tuned)
    data = json.load(open(path))
    assert data["format"] == 2
    edit(data)
    json.dump(data, open(path, "w"))
    with pytest.warns(UserWarning, match="ignored the stored result " + path) as caught:
        assert stored_result(dataset, batch_size=16, device="cpu", out=out_dir) is None, "never applied"
    assert says in str(caught[0].message)


@pytest.mark.slow
def test_best_loader_with_a_bad_result_file_tunes_again(out_dir, tiny_tuned):
    dataset = faulty.Tiny(length=128)
    path = _stored_result_file(out_dir, tiny_tuned)
    data = json.load(open(path))
    data["config"].update(num_workers=400, prefetch_factor=2, persistent_workers=False)
    json.dump(data, open(path, "w"))
    with pytest.warns(UserWarning, match=path):
        loader = best_loader(dataset, batch_size=16, budget=20, device="cpu", out=out_dir, tune="before")
    assert loader.num_workers != 400
    assert json.load(open(path))["config"]["num_workers"] == loader.num_workers, "replaced by the new tune"


@pytest.mark.slow
@pytest.mark.heavy
def test_the_cli_shows_a_bad_previous_result(out_dir):
    args = tune_args(out_dir, f"{WORKLOADS}:tiny", "--budget", "20", "--json", "--quiet")
    first = invoke(*args)
    path = json.loads(first.stdout)["path"]
    data = json.load(open(path))
    data["samples_per_s"] = "fast"
    json.dump(data, open(path, "w"))
    second = invoke(*args)
    assert second.exit_code == 0, (second.output, second.exception)
    assert f"Warning: ignored the stored result {path}: samples_per_s is 'fast'" in second.stderr
    assert json.loads(second.stdout)["since"] is None, "nothing valid to compare with"


# --- a storage password never shows (item 6) ---------------------------------------------------

PASSWORD = "hunter2-s3cret"


@pytest.mark.slow
def test_a_storage_password_is_not_echoed_in_errors(out_dir):
    url = f"postgresql+psycopg://autoloader:{PASSWORD}@127.0.0.1:9/studies"
    result = invoke(*tune_args(out_dir, f"{WORKLOADS}:tiny", "--storage", url, "--quiet"))
    assert result.exit_code == 2, (result.output, result.exception)
    assert PASSWORD not in result.output
    assert "postgresql+psycopg://autoloader:***@127.0.0.1:9/studies" in result.stderr


@pytest.mark.slow
def test_a_storage_password_is_stored_masked(out_dir, tmp_path, monkeypatch):
    """The URL reaches the result file and the TuneResult masked. A PostgreSQL URL stands in
    for any database with a password; its study is kept in SQLite for the test."""
    import optuna

    real = optuna.storages.RDBStorage
    sqlite_url = f"sqlite:///{tmp_path / 'pg-standin.db'}"

    class StandIn(real):
        def __init__(self, url, **kwargs):
            super().__init__(sqlite_url)

    monkeypatch.setattr(optuna.storages, "RDBStorage", StandIn)
    url = f"postgresql://autoloader:{PASSWORD}@db.example:5432/studies"
    result = tune(faulty.Tiny(length=128), batch_size=16, budget=20, device="cpu", out=out_dir, storage=url)
    assert result.storage == "postgresql://autoloader:***@db.example:5432/studies"
    for path in (result.path, result.snippet_path):
        assert PASSWORD not in open(path).read()
    assert json.load(open(result.path))["storage"] == result.storage


@pytest.mark.slow
def test_a_bad_result_file_is_no_warm_start(out_dir, tiny_tuned):
    """retune starts from the last result on this hardware (history.last_good): a file that fails
    the checks is warned about and not started from."""
    from autoloader.store.history import last_good

    path = _stored_result_file(out_dir, tiny_tuned)
    fingerprint, key = os.path.basename(os.path.dirname(path)), os.path.basename(path)[:-len(".json")]
    data = json.load(open(path))
    data.pop("load", None)   # a run on a shared machine may be marked busy (never started from); here the checks are tested
    json.dump(data, open(path, "w"))
    assert last_good(out_dir, fingerprint, key) is not None
    data["config"].update(num_workers=400)
    json.dump(data, open(path, "w"))
    with pytest.warns(UserWarning, match="ignored the stored result " + path):
        assert last_good(out_dir, fingerprint, key) is None
