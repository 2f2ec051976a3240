"""A shared machine: a CPU burner the test starts names itself in the trial lines and the JSON and
never makes a nightly alarm; on a machine without it, a dataset made 2x slower always does.

Each test prints what it saw (exit codes, the load the runs measured) for the record; the counts
are in results/load/README.md. The burner tests judge by the default busy share; the
quiet-machine tests' registry calls a night busy only past QUIET_BUSY of the CPUs (tests/burner.py
says why), and a night past that is run again, not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from burner import QUIET_BUSY, Burner, background, conclusive
from conftest import REPO_ROOT
from fleet_workloads import SLOWDOWN_ENV

from autoloader.inputs.options import BUSY_ENV
from autoloader.search.policy import BUSY_SHARE

FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
RUNS = 5


def registry(tmp_path, busy: float = BUSY_SHARE, budget: int = 20) -> str:
    """The registry of one paced dataset; ``busy``: its [thresholds] busy (the default, unless the
    test is about a quiet machine)."""
    path = tmp_path / "fleet.toml"
    path.write_text(f'[defaults]\nbudget = {budget}\ndevice = "cpu"\n\n[thresholds]\nbusy = {busy}\n\n'
                    f'[[datasets]]\nname = "paced"\ndataset = "{FLEET}:paced"\nbatch_size = 16\n')
    return str(path)


def retune(path: str, out: str, slowdown: float = 1.0) -> tuple[int, dict]:
    done = subprocess.run([AUTOLOADER, "retune", path, "--out", out, "--json", "--quiet"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, SLOWDOWN_ENV: repr(slowdown)})
    assert done.returncode in (0, 1, 3, 5), done.stderr[-3000:]
    assert done.returncode != 1, done.stdout[-3000:]
    return done.returncode, json.loads(done.stdout)["datasets"][0]


def seen(code: int, entry: dict) -> str:
    drift = entry.get("drift") or {}
    load = drift.get("load") or {}
    others = load.get("others_cpus")
    ratio = drift.get("rate_ratio")
    return (f"exit {code} {entry['status']}, others {others:.2f} CPUs" if others is not None else f"exit {code}") + (
        f", rate x{ratio:.2f}" if ratio is not None else "") + (f", {'; '.join(drift['reasons'])}" if drift.get(
            "reasons") else "")


@pytest.mark.slow
@pytest.mark.heavy
def test_with_a_burner_the_trial_lines_and_the_json_name_the_load(tmp_path):
    with Burner():
        done = subprocess.run([AUTOLOADER, "tune", "--dataset", f"{FLEET}:paced", "--batch-size", "16", "--budget",
                               "20", "--device", "cpu", "--out", str(tmp_path), "--json"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, BUSY_ENV: str(BUSY_SHARE)})
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    trial_lines = [line for line in done.stderr.splitlines() if line.strip().startswith("trial ")]
    print("\n".join(trial_lines))
    assert trial_lines and all("other processes used" in line and "of 2 CPUs" in line for line in trial_lines)
    assert data["load"]["busy"] is True and data["load"]["others_cpus"] > 0.5 * data["load"]["usable_cpus"]
    assert all(t["others_cpus"] is not None and t["others_cpus"] > 1.0 for t in data["trials"]), data["trials"]


@pytest.mark.slow
@pytest.mark.heavy
def test_five_retunes_with_a_burner_on_an_unchanged_registry_give_no_exit_3(tmp_path):
    path, out = registry(tmp_path), str(tmp_path / "out")
    print(f"background before: {background():.2f} CPUs busy")
    print("before the burner:", seen(*retune(path, out)))
    codes = []
    with Burner():
        for _ in range(RUNS):
            code, entry = retune(path, out)
            codes.append(code)
            print(seen(code, entry))
    assert 3 not in codes, codes


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dataset_made_2x_slower_between_runs_exits_3_five_times_of_five_on_a_quiet_machine(tmp_path):
    path, out = registry(tmp_path, busy=QUIET_BUSY), str(tmp_path / "out")
    print(f"background before: {background():.2f} CPUs busy")
    code, first, again = conclusive(lambda: retune(path, out))
    print("baseline:", seen(code, first), f"({again} run again on a busy machine)")
    if code == 5:
        pytest.skip("the machine stayed past the registry's busy share")
    detected, slowdown = [], 1.0
    for _ in range(RUNS):
        slowdown *= 2
        code, entry, again = conclusive(lambda s=slowdown: retune(path, out, s))
        print(f"{slowdown:g}x:", seen(code, entry), f"({again} run again on a busy machine)")
        if code == 5:
            pytest.skip("the machine stayed past the registry's busy share")
        detected.append(code == 3 and entry["drift"]["rate_ratio"] < 0.75)
    assert all(detected), detected


@pytest.mark.slow
@pytest.mark.heavy
def test_five_retunes_on_an_unchanged_registry_on_a_quiet_machine_give_no_exit_3(tmp_path):
    path, out = registry(tmp_path, busy=QUIET_BUSY), str(tmp_path / "out")
    print(f"background before: {background():.2f} CPUs busy")
    print("baseline:", seen(*retune(path, out)))
    codes = []
    for _ in range(RUNS):
        code, entry = retune(path, out)
        codes.append(code)
        print(seen(code, entry))
    assert 3 not in codes, codes
