"""A fleet's PostgreSQL storage stopped and started again under the commands that use it: the
dashboard (NOTE [ A storage that stops answering ] in autoloader/fleet/dashboard.py), and tunes
that write local first and push to it (NOTE [ Local first ] in autoloader/store/push.py). Each
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
        dashboard.send_signal(signal.SIGINT)
        try:
            _, stderr = dashboard.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            _, stderr = dashboard.communicate()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("stopped answering") == 1, stderr[-3000:]
    assert stderr.count("answers again") == 1, stderr[-3000:]
