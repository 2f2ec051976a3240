"""The nightly decides on its interval (NOTE [ Drift ] in tuning/compare.py), in real retunes on
this machine: a dataset made 2x slower per sample is caught 5 times of 5 (drifted, for the rate
or, where a noisy step dominates and the rate's interval straddles the band's edge, for the
pick the slower samples need), one whose noisy step sets the rounds' noise included; an unchanged one never alarms in 5, nor in 5 beside two
spinning processes (NOTE [ Runnable others count at what they want ] in probe/load.py), and a
busy run never becomes the baseline.

Each dataset's baseline is tuned once and copied for every run that compares with it, so the
runs are independent and cost one tune each. The quiet tests call a run busy past QUIET_BUSY of
the CPUs (tests/burner.py says why); a run the machine made busy is run again (at most twice),
never counted, and the test is skipped if the machine stays busy: what is judged is the
interval, which is never run again. Each test prints what it saw.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from burner import QUIET_BUSY, Burner, background
from conftest import REPO_ROOT
from fleet_workloads import SLOWDOWN_ENV

from autoloader.search.policy import BUSY_SHARE, RATE_SHIFT

FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
RUNS = 5
BUDGET = 30
STEPPED_BUDGET = 75
DRIFTED, INCONCLUSIVE = 3, 5


def registry(folder, name: str, step: bool = False, busy: float = QUIET_BUSY, file: str | None = None) -> str:
    path = os.path.join(folder, f"{file or name}.toml")
    with open(path, "w") as fh:
        # The noisy step's rounds need more of them to bound its ratio: a longer budget holds them.
        fh.write(f'[defaults]\nbudget = {STEPPED_BUDGET if step else BUDGET}\ndevice = "cpu"\n\n[thresholds]\nbusy = {busy}\n\n'
                 f'[[datasets]]\nname = "{name}"\ndataset = "{FLEET}:spun"\nbatch_size = 16\n'
                 + (f'step = "{FLEET}:noisy_step"\n' if step else ""))
    return path


def retune(path: str, out: str, slowdown: float = 1.0) -> tuple[int, dict]:
    done = subprocess.run([AUTOLOADER, "retune", path, "--out", out, "--json", "--quiet"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, SLOWDOWN_ENV: repr(slowdown)})
    assert done.returncode in (0, 1, DRIFTED, INCONCLUSIVE), (done.returncode, done.stderr[-2000:])
    return done.returncode, json.loads(done.stdout)["datasets"][0]


def busy(entry: dict) -> bool:
    load = (entry.get("drift") or {}).get("load") or {}
    return bool(load.get("busy"))


def quiet(run, tries: int = 3) -> tuple[int, dict]:
    """``run()`` again while the machine made it busy, or so slow that no config ran within the
    budget (exit 1: its start-up took it); skipped when it stays so."""
    for _ in range(tries):
        code, entry = run()
        if code != 1 and not busy(entry):
            return code, entry
        print("  busy, run again:", seen(code, entry))
        time.sleep(3)
    pytest.skip(f"the machine stayed past {QUIET_BUSY:.0%} of its CPUs taken by others for {tries} runs")


def seen(code: int, entry: dict) -> str:
    if code == 1:
        return f"exit 1: {entry['error'][:160]}"
    d = entry.get("drift") or {}
    load = d.get("load") or {}
    interval = d.get("rate_interval")
    return (f"exit {code} {entry['status']}, rate x{d.get('rate_ratio') or 0:.2f}"
            + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else " [no interval]")
            + f" from {d.get('rounds')} readings, others {load.get('others_cpus') or 0:.2f} CPUs"
            + (f"; {d['undecided']}" if d.get("undecided") else ""))


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """A conclusive baseline of each dataset (plain, and with the noisy step), in its own folder."""
    root = str(tmp_path_factory.mktemp("nightly"))
    print(f"\nbackground before: {background():.2f} CPUs busy")
    made = {}
    for name, step in (("spun", False), ("stepped", True)):
        path, out = registry(root, name, step), os.path.join(root, f"{name}-baseline")
        code, entry = quiet(lambda: retune(path, out))
        print(f"baseline {name}:", seen(code, entry), entry["pick"])
        assert entry["status"] == "baseline", entry
        made[name] = (path, out)
    return root, made


def copy(baseline: str, root: str, label: str) -> str:
    out = os.path.join(root, label)
    shutil.copytree(baseline, out)
    return out


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dataset_made_2x_slower_is_caught_five_times_of_five(baselines):
    root, made = baselines
    caught = []
    for i, name in enumerate(("spun", "stepped", "spun", "stepped", "spun")):
        path, baseline = made[name]
        code, entry = quiet(lambda: retune(path, copy(baseline, root, f"slower-{i}-{time.monotonic_ns()}"), 2.0))
        print(f"2x slower {name}:", seen(code, entry), entry["drift"]["reasons"])
        drift = entry["drift"]
        interval = drift["rate_interval"]
        # Caught: drifted for a reason it names, the rate below the band where its interval lies
        # wholly there. Where the step dominates, the rate falls by less (x0.6-0.7 against the
        # band's 0.75) and its interval may straddle the edge: the pick the slower samples need
        # (more workers) is then the reason, and the rate is never called unchanged.
        rate_low = interval is not None and interval[1] < 1 - RATE_SHIFT
        other = [r for r in drift["reasons"] if not r.startswith("rate ")]
        inside = interval is not None and interval[0] >= 1 - RATE_SHIFT
        caught.append(code == DRIFTED and (rate_low or (bool(other) and not inside)))
    assert all(caught), caught


@pytest.mark.slow
@pytest.mark.heavy
def test_an_unchanged_dataset_never_alarms_in_five(baselines):
    root, made = baselines
    path, baseline = made["spun"]
    codes = []
    for i in range(RUNS):
        code, entry = quiet(lambda: retune(path, copy(baseline, root, f"same-{i}-{time.monotonic_ns()}")))
        print("unchanged:", seen(code, entry))
        codes.append(code)
    assert DRIFTED not in codes, codes


@pytest.mark.slow
@pytest.mark.heavy
def test_an_unchanged_dataset_beside_two_spinners_never_alarms_and_is_never_the_baseline(baselines):
    root, made = baselines
    _, baseline = made["spun"]
    # The default busy share: the spinners are a neighbour this test means to see.
    path = registry(root, "spun", busy=BUSY_SHARE, file="spun-default-share")
    out = copy(baseline, root, "spinners")
    first = None
    codes = []
    with Burner():   # one spinning process per CPU: two on this machine
        for _ in range(RUNS):
            code, entry = retune(path, out)
            print("beside two spinners:", seen(code, entry))
            if code == 1:
                continue   # the spinners left no config time to run: no alarm, no baseline
            codes.append(code)
            assert busy(entry), f"two spinners on {os.cpu_count()} CPUs are a busy machine: {seen(code, entry)}"
            compared = entry["drift"]["previous_finished_at"]
            first = first or compared
            assert compared == first, "a busy run became the baseline the next one compared with"
    assert DRIFTED not in codes, codes
