"""``retune`` reads each dataset's key in a process of its own, bounded by its budget (NOTE [ A
dataset's key is read in a process of its own ] in fleet/retune.py): a dataset that segfaults,
exits or hangs there is a failed entry naming its cause; the others are tuned, the report is
written, and the exit code says a dataset failed (1), never that one changed (3)."""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner
from burner import QUIET_BUSY
from conftest import REPO_ROOT

from autoloader.cli import main

FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
BAD_BUDGET = 20    # the hang is stopped at it (a spawned child's imports come first, slow on a loaded machine)
GOOD_BUDGET = 30


def registry(tmp_path, bad: str) -> str:
    path = tmp_path / "nightly.toml"
    path.write_text("\n".join([
        "[defaults]", 'device = "cpu"', "", "[thresholds]", f"busy = {QUIET_BUSY}", "",
        "[[datasets]]", 'name = "bad"', f'dataset = "{FLEET}:{bad}"', "batch_size = 16", f"budget = {BAD_BUDGET}", "",
        "[[datasets]]", 'name = "good"', f'dataset = "{FLEET}:small"', "batch_size = 16", f"budget = {GOOD_BUDGET}",
        ""]))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("bad, cause", [("segfault_in_key", "ended by SIGSEGV"),
                                        ("exit_in_key", "exited with code 3"),
                                        ("hang_in_key", f"did not end within its budget of {BAD_BUDGET} s")],
                         ids=["segfault", "exit-3", "hang"])
def test_a_dataset_that_fails_its_key_read_fails_alone(tmp_path, bad, cause):
    out, reports = str(tmp_path / "out"), str(tmp_path / "reports")
    started = time.monotonic()
    done = CliRunner().invoke(main, ["retune", registry(tmp_path, bad), "--out", out, "--reports", reports,
                                     "--json", "--quiet"])
    took = time.monotonic() - started
    assert done.exit_code == 1, (done.exit_code, done.output[-3000:], done.exception)
    assert "Traceback" not in done.output
    report = json.loads(done.stdout)
    first, second = report["datasets"]
    assert first["name"] == "bad" and first["status"] == "failed" and cause in first["error"], first
    assert "Fix:" in first["error"]
    assert second["name"] == "good" and second["status"] != "failed" and second["pick"], second
    assert os.path.isfile(report["report"]["json"]) and os.path.isfile(os.path.join(reports, "latest.md"))
    # The bad one within its budget (the hang stopped at it), the good one's key read and run within
    # theirs, and a margin for the report.
    assert took < BAD_BUDGET + 2 * GOOD_BUDGET + 20, took
