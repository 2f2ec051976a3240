"""The nightly entries in scripts/nightly/: every scheduler calls the one wrapper, and the wrapper
runs the installed ``autoloader retune`` and passes its exit code through."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

NIGHTLY = os.path.join(REPO_ROOT, "scripts", "nightly")
WRAPPER = os.path.join(NIGHTLY, "autoloader-retune.sh")
VENV = os.path.dirname(os.path.dirname(sys.executable))


def test_every_scheduler_entry_calls_the_wrapper():
    for name in ("crontab.txt", "scrontab.txt", "autoloader-retune.service", "cronjob.yaml"):
        with open(os.path.join(NIGHTLY, name)) as fh:
            assert "scripts/nightly/autoloader-retune.sh" in fh.read(), name
    with open(os.path.join(NIGHTLY, "cronjob.yaml")) as fh:
        assert "concurrencyPolicy: Forbid" in fh.read()
    with open(os.path.join(NIGHTLY, "autoloader-retune.timer")) as fh:
        assert "OnCalendar=" in fh.read()
    assert os.access(WRAPPER, os.X_OK)
    assert subprocess.run(["bash", "-n", WRAPPER]).returncode == 0


@pytest.mark.slow
def test_the_wrapper_passes_retunes_exit_code_through(tmp_path):
    env = {**os.environ, "AUTOLOADER_VENV": VENV, "AUTOLOADER_REGISTRY": str(tmp_path / "missing.toml"),
           "AUTOLOADER_LOCK": str(tmp_path / "lock")}
    done = subprocess.run([WRAPPER, "--quiet"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "registry" in done.stderr, done.stderr
    env["AUTOLOADER_VENV"] = str(tmp_path / "no-venv")
    done = subprocess.run([WRAPPER], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "AUTOLOADER_VENV" in done.stderr
