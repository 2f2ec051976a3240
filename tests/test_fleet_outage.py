"""A fleet's PostgreSQL storage stopped and started again under the commands that use it: the
dashboard (NOTE [ A storage that stops answering ] in autoloader/fleet/dashboard.py), and tunes
that write local first and push to it (NOTE [ Local first ] in autoloader/store/study.py). Each
test has a real server of its own (scripts/faults/pgserver.py), paused mid-way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pgserver
import pytest
from conftest import REPO_ROOT

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
pytestmark = pytest.mark.slow


@pytest.fixture
def server():
    started, why = pgserver.start()
    if started is None:
        pytest.skip(f"no PostgreSQL server could be started here: {why}")
    yield started
    started.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_dashboard_answers_a_stopped_storage_with_a_503_and_one_line_then_recovers(server):
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    import optuna

    from autoloader.store.storage import driver_url
    from autoloader.store.study import LOCAL_ATTR

    study = optuna.create_study(study_name="hw/key", storage=driver_url(server.url))
    study.add_trial(optuna.trial.create_trial(value=1.0))
    port = _free_port()
    dashboard = subprocess.Popen([AUTOLOADER, "dashboard", "--storage", server.url, "--port", str(port)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    api = f"http://127.0.0.1:{port}/api/studies"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = _get(api)
                break
            except OSError:
                assert time.monotonic() < deadline and dashboard.poll() is None, "the dashboard did not start"
                time.sleep(0.3)
        assert status == 200 and json.loads(body)["study_summaries"][0]["study_name"] == "hw/key"
        server.pause()
        answers = [_get(api) for _ in range(3)] + [_get(f"http://127.0.0.1:{port}/api/studies/0")]
        assert [code for code, _ in answers] == [503] * 4, answers
        assert all(text.count("\n") == 1 and "is not answering" in text for _, text in answers)
        server.resume()
        status, body = _get(api)
        assert status == 200 and "hw/key" in body
    finally:
        # Ctrl-C once the last answer is written: one that lands mid-write prints wsgiref's own
        # traceback (noted for the dashboard; this test is of the storage's outage).
        time.sleep(1.0)
        dashboard.send_signal(signal.SIGINT)
        try:
            _, stderr = dashboard.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            _, stderr = dashboard.communicate()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("stopped answering") == 1, stderr[-3000:]
    assert stderr.count("answers again") == 1, stderr[-3000:]


FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")


def _tune(out: str, storage: str, *extra: str) -> list[str]:
    return [AUTOLOADER, "tune", "--dataset", f"{FLEET}:paced", "--batch-size", "16", "--budget", "20",
            "--device", "cpu", "--out", out, "--storage", storage, *extra]


def _local(out: str) -> str:
    (db,) = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".db")]
    return db


def _finished(db: str) -> int:
    import sqlite3

    try:
        with sqlite3.connect(db, timeout=5) as connection:
            return connection.execute("SELECT COUNT(*) FROM trials WHERE state IN ('COMPLETE', 'FAIL')").fetchone()[0]
    except sqlite3.Error:
        return 0


def _fleet_trials(url: str) -> dict[str, list]:
    """The fleet's trials by run: their local numbers (NOTE [ Local first ])."""
    import optuna

    from autoloader.store import runs
    from autoloader.store.storage import driver_url
    from autoloader.store.study import LOCAL_ATTR

    by_run: dict[str, list] = {}
    for name in optuna.study.get_all_study_names(storage=driver_url(url)):
        for trial in optuna.load_study(study_name=name, storage=driver_url(url)).get_trials(deepcopy=False):
            by_run.setdefault(trial.user_attrs.get(runs.RUN_ATTR), []).append(trial.user_attrs.get(LOCAL_ATTR))
    return by_run


def test_a_storage_stopped_mid_run_loses_no_trial_and_the_next_run_pushes_them(server, tmp_path):
    """The run goes on locally and exits 4, its table saying what happened to each thing it stores;
    the server back, the next run pushes what was kept, then its own; nothing is pushed twice; and
    ``report --storage`` explains the result from the storage alone."""
    out = str(tmp_path / "out")
    driver = subprocess.Popen(_tune(out, server.url), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and driver.poll() is None:
            dbs = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".db")]
            if dbs and _finished(dbs[0]) >= 1:
                break
            time.sleep(0.2)
        assert driver.poll() is None, "the run ended before the outage"
        server.pause()
        at_pause = _finished(_local(out))
        stdout, stderr = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 4, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    (result_file,) = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".json")]
    with open(result_file) as fh:
        first = json.load(fh)
    lines = [line.strip() for line in stdout.splitlines()]
    assert f"saved {result_file}" in lines, "the result JSON was written, and the table says so"
    assert f"study {_local(out)}" in lines
    assert any(line.startswith("not pushed to postgresql://") for line in lines), stdout
    finished_first = _finished(_local(out))
    # The outage is said when it is met: by the next trial's push when the search measured one more
    # after the pause, else (a loaded machine, the budget spent) by the end-of-run push.
    if finished_first > at_pause:
        assert "the search goes on, recording its trials in" in stderr, "the outage is said as it happens"
    else:
        assert "could not push it" in stderr and "pushes them before it measures" in stderr, stderr[-3000:]
    assert finished_first >= len(first["trials"]), "every trial is in the local study"

    server.resume()
    assert len(_fleet_trials(server.url).get(first["run_id"], [])) < finished_first
    again = subprocess.run(_tune(out, server.url, "--json"), cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "trials that earlier runs kept in" in again.stderr
    second = json.loads(again.stdout)
    fleet = _fleet_trials(server.url)
    assert len(fleet[first["run_id"]]) == finished_first, "the kept trials are pushed"
    assert len(fleet[second["run_id"]]) == len(second["trials"])
    for numbers in fleet.values():
        assert len(numbers) == len(set(numbers)), "nothing is pushed twice"

    # The storage alone holds the run's whole result: a report of it from another --out.
    elsewhere = str(tmp_path / "elsewhere")
    report = subprocess.run([AUTOLOADER, "report", second["dataset_key"], "--out", elsewhere, "--storage", server.url],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert report.returncode == 0, report.stdout + report.stderr[-3000:]
    pages = [os.path.join(r, f) for r, _, fs in os.walk(elsewhere) for f in fs if f.endswith(".html")]
    assert len(pages) == 1 and pages[0] in report.stdout
