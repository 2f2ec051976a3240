"""Many tuners, one study: concurrent processes into one SQLite file and into a real PostgreSQL
server, a driver killed mid-trial, the ranks of a torchrun-style job, and the dashboard."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import optuna
import pgserver
import pytest
from conftest import REPO_ROOT

from autoloader.errors import UsageError
from autoloader.store import runs
from autoloader.store import study as study_attr
from autoloader.store.result import TuneResult
from autoloader.store.storage import driver_url

FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")


@pytest.fixture(scope="module")
def postgres():
    server, why = pgserver.start()
    if server is None:
        pytest.skip(f"no PostgreSQL server could be started here: {why}")
    yield server.url
    server.stop()


def tune_command(out: str, *extra: str, dataset: str = "paced") -> list[str]:
    return [AUTOLOADER, "tune", "--dataset", f"{FLEET}:{dataset}", "--batch-size", "16", "--budget", "12",
            "--device", "cpu", "--out", out, "--json", "--quiet", *extra]


def open_study(storage: str) -> optuna.Study:
    """The one tuning study in ``storage`` (named <fingerprint>/<key>: two parts, a dash in the first)."""
    (name,) = [n for n in optuna.study.get_all_study_names(storage=driver_url(storage)) if not n.startswith("hw/")]
    return optuna.load_study(study_name=name, storage=driver_url(storage))


def sqlite_of(out: str) -> str:
    (db,) = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".db")]
    return f"sqlite:///{db}"


def wait_for_a_running_trial(storage_of, deadline_s: float = 90.0) -> None:
    """Until a trial is RUNNING and names its run (a trial killed in the milliseconds before it
    is named is failed only after the heartbeat's grace: another case, tested in test_runs)."""
    from autoloader.store.runs import RUN_ATTR

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            study = open_study(storage_of())
            if any(RUN_ATTR in t.user_attrs
                   for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))):
                return
        except Exception:  # noqa: BLE001 - not created yet, or mid-write
            pass
        time.sleep(0.2)
    raise AssertionError("no trial started in time")


def run_two(commands: list[list[str]], storage_of) -> list[dict]:
    """Start the first, then the second once the first has a trial RUNNING; both must succeed.
    The dataset's workers take 12 s to start (``SlowStart``), so the second mostly opens the study
    while a trial of the first is in flight (the store-level tests make that race certain)."""
    first = subprocess.Popen(commands[0], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_a_running_trial(storage_of)
        second = subprocess.Popen(commands[1], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        outputs = [proc.communicate(timeout=240) for proc in (first, second)]
    finally:
        for proc in (first, locals().get("second")):
            if proc is not None and proc.poll() is None:
                proc.kill()
    for proc, (stdout, stderr) in zip((first, second), outputs):
        assert proc.returncode == 0, stderr[-3000:]
    return [json.loads(stdout) for stdout, _ in outputs]


def assert_every_trial_landed(study: optuna.Study, results: list[dict]) -> None:
    by_run: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        assert trial.state != optuna.trial.TrialState.RUNNING, "a trial was left RUNNING"
        by_run[trial.user_attrs.get(runs.RUN_ATTR)] = by_run.get(trial.user_attrs.get(runs.RUN_ATTR), 0) + 1
    for result in results:
        assert by_run.get(result["run_id"]) == len(result["trials"]), (by_run, result["run_id"], len(result["trials"]))
        measured = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(runs.RUN_ATTR) == result["run_id"]]
        # A trial whose own result says it failed (a timeout, a hang, cut by the budget's end on a
        # loaded machine) is FAIL by its measurement; one failed as stale carries no result.
        stale = [t.number for t in measured
                 if t.state == optuna.trial.TrialState.FAIL and study_attr.RESULT_ATTR not in t.user_attrs]
        assert not stale, f"live trials failed as stale: {stale}"
    marks = runs.runs_of(study)
    assert {r["run_id"] for r in results} <= {m.run_id for m in marks.values() if m.state == runs.COMPLETE}


@pytest.mark.slow
@pytest.mark.heavy
def test_two_tuners_on_one_sqlite_study_both_land_every_trial(out_dir):
    command = tune_command(out_dir, dataset="slow_start")
    results = run_two([command, command], lambda: sqlite_of(out_dir))
    assert results[0]["study"] == results[1]["study"] and results[0]["run_id"] != results[1]["run_id"]
    assert_every_trial_landed(open_study(sqlite_of(out_dir)), results)


@pytest.mark.slow
def test_opening_a_postgresql_study_never_fails_another_tuners_live_trial(postgres):
    """The store-level race, deterministic: a second tuner opens the study while the first's trial
    is in flight (on main before store/runs.py, the open failed it and the first died at its tell)."""
    from autoloader.search.results import OK, TrialResult
    from autoloader.search.space import LoaderConfig, SearchSpace
    from autoloader.store.study import Limits, StudyStore

    space, limits = SearchSpace((16,), 8, pin_memory=(False,)), Limits(2**30, 60.0)
    two, four = LoaderConfig.make(16, 2, False), LoaderConfig.make(16, 4, False)
    first = StudyStore(postgres, "hw/store-level", space)
    trial = first.begin(two, limits)
    second = StudyStore(postgres, "hw/store-level", space)
    assert second.stale_repaired == 0
    other = second.begin(four, limits)
    first.finish(trial, TrialResult(two, OK, samples_per_s=100.0))
    second.finish(other, TrialResult(four, OK, samples_per_s=200.0))
    assert [r.config for r in first.reread(limits).trials] == [two]
    assert [r.config for r in second.reread(limits).trials] == [four]
    for store in (first, second):
        store.close()


@pytest.mark.slow
@pytest.mark.heavy
def test_two_processes_into_one_postgresql_study_land_every_trial(postgres, tmp_path):
    """Two machines of one kind (here: two processes, two --out folders) share one study."""
    outs = [str(tmp_path / "a"), str(tmp_path / "b")]
    # Each records in its local study first and pushes (NOTE [ Local first ]): the first's is watched.
    results = run_two([tune_command(out, "--storage", postgres, dataset="slow_start") for out in outs],
                      lambda: sqlite_of(outs[0]))
    assert results[0]["study"] == results[1]["study"] == f"{results[0]['hardware']['fingerprint']}/" \
                                                         f"{results[0]['dataset_key']}"
    assert_every_trial_landed(open_study(postgres), results)


@pytest.mark.slow
def test_readers_leave_a_postgresql_database_without_a_study_as_it_is(postgres, tmp_path):
    """NOTE [ A reader opens a study read-only ]: show and the dashboard pointed at an
    application's database refuse it, and the fleet's picks find none; no table is made."""
    import sqlalchemy

    from autoloader.fleet.dashboard import storage_to_serve
    from autoloader.store.history import stored_picks

    storage = postgres.rsplit("/", 1)[0] + "/shop"
    admin = sqlalchemy.create_engine(driver_url(postgres), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text("CREATE DATABASE shop"))
    admin.dispose()
    shop = sqlalchemy.create_engine(driver_url(storage), isolation_level="AUTOCOMMIT")
    with shop.connect() as conn:
        conn.execute(sqlalchemy.text("CREATE TABLE orders (id integer)"))
    try:
        done = subprocess.run([AUTOLOADER, "show", "--out", str(tmp_path / "out"), "--storage", storage],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
        assert "not a study" in done.stderr and "it holds orders" in done.stderr and "left as it is" in done.stderr
        with pytest.raises(UsageError, match="not a study"):
            storage_to_serve(str(tmp_path / "out"), storage)
        assert stored_picks(storage) == []
        assert sqlalchemy.inspect(shop).get_table_names() == ["orders"], "a reader made tables"
    finally:
        shop.dispose()


@pytest.mark.slow
@pytest.mark.heavy
def test_a_driver_killed_mid_trial_leaves_nothing_that_blocks_the_next(postgres, tmp_path):
    """Its trial left RUNNING is in its local study only (nothing RUNNING is pushed: NOTE [ Local
    first ]); the next run on the host repairs it there, resumes, and pushes the run whole."""
    out = str(tmp_path / "out")
    storage = postgres.rsplit("/", 1)[0] + "/killed"
    import sqlalchemy

    engine = sqlalchemy.create_engine(driver_url(postgres), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("CREATE DATABASE killed"))
    engine.dispose()
    driver = subprocess.Popen(tune_command(out, "--storage", storage, "--budget", "60"), cwd=REPO_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_a_running_trial(lambda: sqlite_of(out))
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
    finally:
        if driver.poll() is None:
            driver.kill()
    local = open_study(sqlite_of(out))
    running = [t.number for t in local.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))]
    assert running, "the kill left its trial RUNNING"
    assert not open_study(storage).get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    again = subprocess.run(tune_command(out, "--storage", storage), cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    states = {t.number: t.state for t in open_study(sqlite_of(out)).get_trials(deepcopy=False)}
    assert all(states[n] == optuna.trial.TrialState.FAIL for n in running), "the killed run's trial is failed"
    assert optuna.trial.TrialState.RUNNING not in states.values()
    result = json.loads(again.stdout)
    assert result["samples_per_s"] > 0
    fleet = open_study(storage)
    assert optuna.trial.TrialState.RUNNING not in {t.state for t in fleet.get_trials(deepcopy=False)}
    from autoloader.store.study import LOCAL_ATTR

    def of_the_run(study):
        return sorted((t.user_attrs.get(LOCAL_ATTR, t.number), t.state) for t in study.get_trials(deepcopy=False)
                      if t.user_attrs.get(runs.RUN_ATTR) == result["run_id"])

    assert of_the_run(fleet) == of_the_run(open_study(sqlite_of(out))), "the run is pushed whole, the repaired trial too"
    assert runs.runs_of(fleet)[result["run_id"]].state == runs.COMPLETE


RANK_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from autoloader import best_loader
from fleet_workloads import Paced
events = []
loader = best_loader(Paced(cost_s=0.002), batch_size=16, budget=10, device="cpu", out={out!r}, tune="before",
                     progress=lambda event: events.append(event.kind))
print(json.dumps({{"tuned": "start" in events, "workers": loader.num_workers}}))
"""


@pytest.mark.slow
@pytest.mark.heavy
def test_best_loader_on_every_rank_tunes_once(out_dir):
    """torchrun starts one process per rank, each calling best_loader: one tunes, the rest wait
    for it and load its result."""
    script = RANK_SCRIPT.format(tests=os.path.join(REPO_ROOT, "tests"), out=out_dir)
    ranks = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "RANK": str(rank)})
             for rank in range(2)]
    outputs = [rank.communicate(timeout=240) for rank in ranks]
    for rank, (_, stderr) in zip(ranks, outputs):
        assert rank.returncode == 0, stderr[-3000:]
    answers = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    assert sorted(a["tuned"] for a in answers) == [False, True], answers
    assert answers[0]["workers"] == answers[1]["workers"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_the_dashboard_serves_the_study_with_its_figures(tmp_path):
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    from autoloader.search.results import OK, TrialResult
    from autoloader.search.space import LoaderConfig, SearchSpace
    from autoloader.store.study import Limits, StudyStore

    url = f"sqlite:///{tmp_path / 'study.db'}"
    config = LoaderConfig.make(16, 2, False)
    store = StudyStore(url, "cpu-0x-2cpu-16g-00000000/ds-n100-abc", SearchSpace((16,), 8, pin_memory=(False,)))
    store.finish(store.begin(config, Limits(2**30, 60.0)),
                 TrialResult(config, OK, samples_per_s=1234.5, rel_interval=0.02, wait_fraction=0.4))
    port = _free_port()
    server = subprocess.Popen([AUTOLOADER, "dashboard", "--storage", url, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        page = studies = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard", timeout=5) as response:
                    page = response.read().decode()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as response:
                    studies = json.loads(response.read())
                break
            except OSError:
                time.sleep(0.3)
        assert page is not None, server.stderr.read() if server.poll() is not None else "no answer in 60 s"
        assert "<html" in page.lower()
        (study,) = studies["study_summaries"]
        assert study["study_name"] == "cpu-0x-2cpu-16g-00000000/ds-n100-abc"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{study['study_id']}", timeout=5) as response:
            detail = json.loads(response.read())
        (trial,) = detail["trials"]
        attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
        assert attrs["samples_per_s"] == "1234.5" and attrs["wait_fraction"] == "0.4"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_dashboards_snapshot_names_the_objective_and_marks_each_runs_pick(tmp_path):
    """NOTE [ What the dashboard shows ]: samples/s, the runs told apart, the stored pick's burst
    marked, and the page says it is a snapshot whose edits are not saved."""
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    import optuna
    from optuna_dashboard import get_note

    from autoloader.fleet import dashboard
    from autoloader.search.results import OK, TrialResult
    from autoloader.search.space import LoaderConfig, SearchSpace
    from autoloader.store.study import Limits, StudyStore

    folder = tmp_path / "out" / "cpu-0x-2cpu-16g-00000000"
    folder.mkdir(parents=True)
    url = f"sqlite:///{folder / 'ds-n100-abc.db'}"
    pick, other = LoaderConfig.make(16, 2, False), LoaderConfig.make(16, 0, False)
    store = StudyStore(url, "cpu-0x-2cpu-16g-00000000/ds-n100-abc", SearchSpace((16,), 8, pin_memory=(False,)))
    for config, rate in ((other, 900.0), (pick, 1234.5)):
        store.finish(store.begin(config, Limits(2**30, 60.0)), TrialResult(config, OK, samples_per_s=rate))
    store.complete(TuneResult.from_dict({"config": pick.loader_kwargs(), "samples_per_s": 1200.0,
                                         "dataset_key": "ds-n100-abc"}, partial=True))
    run_id = store.run.run_id
    store.close()
    served = dashboard.storage_to_serve(str(tmp_path / "out"), None)
    assert "snapshot of the 1 study" in served.description and "not saved" in served.description
    study = optuna.load_study(study_name="cpu-0x-2cpu-16g-00000000/ds-n100-abc", storage=served.storage)
    assert study.metric_names == ["samples/s"]
    note = get_note(study)
    assert "edits here" in note and "not saved" in note and f"`{run_id}`" in note and "1,200 samples/s" in note
    assert "| #1 |" in note, "the pick's burst is the run's trial 1"
    assert "stored pick" in get_note(optuna.Trial(study, study.trials[1]._trial_id))
    assert not get_note(optuna.Trial(study, study.trials[0]._trial_id))


def test_the_dashboard_without_its_extra_names_it(monkeypatch):
    from click.testing import CliRunner

    from autoloader.cli import main

    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)
    result = CliRunner().invoke(main, ["dashboard", "--storage", "sqlite:///x.db"])
    assert result.exit_code == 1 and "pip install 'torch-autoloader[dashboard]'" in result.stderr
