"""``autoloader retune``: the registry, the warm start, drift and its exit codes, the history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT
from burner import QUIET_BUSY, conclusive
from fleet_workloads import SLOWDOWN_ENV

from autoloader.cli import main
from autoloader.fleet import registry
from autoloader.search.model import Calibration
from autoloader.search.policy import Thresholds
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig, SearchSpace
from autoloader.search.model_first import Strategy, WarmStart, Warmed
from autoloader.store.result import TuneResult
from autoloader.tuning.compare import (
    BASELINE,
    DRIFTED,
    NEW_HARDWARE,
    UNCHANGED,
    Change,
    compare,
)

FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")

REGISTRY = f"""
[defaults]
budget = 10
device = "cpu"

[thresholds]
rate = 0.5      # the injected regression is -75%; a shared machine's noise stays well inside
pick = false    # two tied configs may trade places between runs on a shared machine
busy = {QUIET_BUSY}     # other users of the development machine take most of its CPUs at all hours

[[datasets]]
name = "paced"
dataset = "{FLEET}:paced"
batch_size = 16
"""


# --- the registry ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [
    ("[[datasets]]\nname = 'x'\n", "dataset = \"MODULE:ATTR\""),
    ("[defaults]\nbudgte = 10\n[[datasets]]\ndataset = 'a:b'\n", "budgte"),
    ("[thresholds]\nrate = -1\n[[datasets]]\ndataset = 'a:b'\n", "positive fraction"),
    ("[[datasets]]\ndataset = 'nocolon'\n", "MODULE:ATTR"),
    ("[[datasets]]\ndataset = 'a:b'\n[[datasets]]\ndataset = 'a:b'\n", "name of its own"),
    ("not toml = = 1", "readable TOML"),
    ("", "at least one dataset"),
], ids=["no-dataset", "unknown-key", "bad-threshold", "bad-spec", "repeated", "not-toml", "empty"])
def test_a_bad_registry_exits_2_before_anything_runs(tmp_path, text, needle):
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["retune", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, (result.output, result.exception)
    assert needle in result.stderr and "Fix:" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_registrys_relative_paths_are_its_folders(tmp_path):
    (tmp_path / "data.py").write_text("x = 1\n")
    path = tmp_path / "fleet.toml"
    path.write_text('[fleet]\nout = "cache"\n[[datasets]]\ndataset = "data.py:x"\nbatch_sizes = [32, 16]\n'
                    'options = { drop_last = true }\n[thresholds]\nknee = 3\n')
    loaded = registry.load(str(path))
    (entry,) = loaded.entries
    assert entry.dataset.name == "data.py:x" and entry.dataset.spec == f"{tmp_path}/data.py:x"
    assert entry.batch_sizes == (16, 32) and entry.options == {"drop_last": True}
    assert loaded.fleet["out"] == str(tmp_path / "cache") and loaded.thresholds.knee == 3


# --- the warm start --------------------------------------------------------------------------------

class Rest(Strategy):
    """The search after the warm start: proposes one fixed config, then nothing."""

    def __init__(self, config):
        self.config = config

    def propose(self, history):
        return None if any(t.config == self.config for t in history) else self.config

    def expected_trials(self):
        return 5

    def curve(self, history):
        return []

    def finalists(self, history):
        return []

    def calibration(self, history):
        return Calibration()


def test_a_warm_start_measures_the_stored_pick_first_and_ends_early_when_it_holds():
    space = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
    pick = LoaderConfig.make(16, 4, False, 2, True)
    other = LoaderConfig.make(16, 0, False)
    warm = WarmStart(pick, rate=1000.0, rel_interval=0.02, may_stop=True)

    strategy, history = Warmed(Rest(other), warm, space), []
    assert strategy.propose(history) == pick, "the stored pick first"
    history.append(TrialResult(pick, OK, samples_per_s=1010.0, rel_interval=0.02))
    seen = []
    while (config := strategy.propose(history)) is not None:
        seen.append(config)
        history.append(TrialResult(config, OK, samples_per_s=900.0, rel_interval=0.02))
    assert seen and all(c.num_workers == 4 and c != pick for c in seen), "then its neighbours only"
    assert other not in seen and strategy.stopped_early

    # The pick now reads half its stored rate: after it, the search takes over at once.
    strategy = Warmed(Rest(other), warm, space)
    slower = [TrialResult(pick, OK, samples_per_s=500.0, rel_interval=0.02)]
    assert strategy.propose(slower) == other and not strategy.stopped_early

    # A neighbour clearly ahead: the pick does not hold either.
    strategy = Warmed(Rest(other), warm, space)
    ahead = [TrialResult(pick, OK, samples_per_s=1000.0, rel_interval=0.02),
             TrialResult(pick.replace(prefetch_factor=4), OK, samples_per_s=1500.0, rel_interval=0.02)]
    assert strategy.propose(ahead) == other

    # From other hardware's result: no neighbours, no early stop.
    strategy = Warmed(Rest(other), WarmStart(pick, 1000.0, may_stop=False, neighbours=False), space)
    assert strategy.propose([]) == pick
    assert strategy.propose([TrialResult(pick, OK, samples_per_s=1000.0)]) == other


# --- drift -----------------------------------------------------------------------------------------

def result(workers: int, rate: float, fingerprint: str = "box", knee: int = 2, peaks=None, cpus: int = 2) -> dict:
    config = LoaderConfig.make(16, workers, False).loader_kwargs()
    trials = [{"config": LoaderConfig.make(16, w, False).loader_kwargs(), "status": "ok", "samples_per_s": rate,
               "peak_pss_bytes": peak} for w, peak in (peaks or {}).items()]
    return {"config": config, "samples_per_s": rate, "dataset_key": "ds-n100-abc",
            "knee": {"stops_paying": knee, "peak": knee, "starts_hurting": None, "tolerance": 0.03,
                     "curve": [[knee, rate]]},
            "hardware": {"fingerprint": fingerprint, "cpus": cpus, "cpu_model": "x", "memory_gib": 16, "gpus": []},
            "trials": trials, "finals": [{"config": config, "rates": [rate * 0.99, rate, rate * 1.01]}],
            "measurement_format": 1}


def judge(previous: dict | None, current: dict, thresholds: Thresholds):
    return compare(TuneResult.from_dict(previous, "p") if previous is not None else None,
                   TuneResult.from_dict(current), thresholds)


def test_drift_is_judged_against_the_thresholds():
    t = Thresholds(rate=0.25, knee=2, memory_per_worker=0.5)
    assert judge(None, result(2, 100.0), t).status == BASELINE
    assert judge(result(2, 100.0), result(2, 110.0), t).status == UNCHANGED
    slower = judge(result(2, 100.0), result(2, 60.0), t)
    assert slower.status == DRIFTED and slower.rate_ratio == 0.6 and "rate -40%" in slower.reasons[0]
    moved = judge(result(2, 100.0, knee=2), result(2, 100.0, knee=5), t)
    assert moved.status == DRIFTED and "knee 2 -> 5" in moved.reasons[0]
    assert judge(result(2, 100.0, knee=2), result(2, 100.0, knee=5), Thresholds()).status == UNCHANGED, \
        "the knee is judged only when the registry sets a threshold"
    mib = 2**20
    heavier = judge(result(2, 100.0, peaks={0: 500 * mib, 2: 700 * mib}),
                    result(2, 100.0, peaks={0: 500 * mib, 2: 1100 * mib}), t)
    assert heavier.status == DRIFTED and heavier.memory_per_worker_after == 300 * mib
    tied = judge(result(2, 100.0), result(4, 100.0), t)
    assert tied.status == UNCHANGED and tied.settings_tie, "a pick change no paired round separates is a tie"
    ahead = result(4, 130.0)
    ahead["finals"] = [{"config": ahead["config"], "rates": [130.0, 128.0, 131.0]},
                       {"config": result(2, 100.0)["config"], "rates": [100.0, 99.0, 101.0]}]
    picked = judge(result(2, 100.0), ahead, t)
    assert picked.status == DRIFTED and picked.changes[0] == Change("num_workers", 2, 4)
    elsewhere = judge(result(2, 100.0, fingerprint="old", cpus=8), result(4, 50.0), t)
    assert elsewhere.status == NEW_HARDWARE and ("cpus", 8, 2) in elsewhere.hardware_changes
    assert elsewhere.changed, "from other hardware the reasons are reported (--fail-if-changed exits on them)"
    older = dict(result(2, 100.0), measurement_format=0)
    assert judge(older, result(2, 100.0), t).status == DRIFTED



def test_the_report_counts_the_machines_cpus_in_words():
    """One CPU is "1 CPU", not "1 CPUs"; a hardware record without a count says it is unknown."""
    from autoloader.fleet.retune import markdown
    from autoloader.fleet.retune import RetuneReport

    def said(hardware: dict) -> str:
        report = RetuneReport("fleet.toml", "t0", "t1", {"fingerprint": "box", **hardware}, Thresholds(), (), "/o")
        return next(line for line in markdown(report).splitlines() if line.startswith("- hardware:"))

    assert "(1 CPU, " in said({"cpus": 1}) and "(2 CPUs, " in said({"cpus": 2})
    assert "(1.5 CPUs, " in said({"cpus": 1.5}) and "(? CPUs, " in said({})

# --- a real retune ---------------------------------------------------------------------------------

def retune_once(path, out, slowdown: str = "1") -> tuple[int, dict]:
    done = subprocess.run([AUTOLOADER, "retune", str(path), "--out", out, "--json", "--quiet"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, SLOWDOWN_ENV: slowdown})
    assert done.returncode in (0, 1, 3, 5), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def retune(path, out, slowdown: str = "1") -> tuple[int, dict]:
    """A retune, run again while the machine was too busy to judge it (exit 5)."""
    code, report, _ = conclusive(lambda: retune_once(path, out, slowdown))
    if code == 5:
        pytest.skip("the machine stayed busy (other processes past the registry's busy share) for three runs")
    return code, report


@pytest.mark.slow
@pytest.mark.heavy
def test_retune_flags_a_regression_and_keeps_the_last_good_result_when_killed(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(REGISTRY)
    out = str(tmp_path / "out")

    code, first = retune(path, out)
    (entry,) = first["datasets"]
    assert code == 0 and entry["status"] == BASELINE and entry["warm_start"].startswith("none")
    stored = entry["result_path"]
    pick = json.load(open(stored))["config"]

    code, again = retune(path, out)
    (entry,) = again["datasets"]
    assert code == 0 and entry["status"] == UNCHANGED, entry
    measured = json.load(open(stored))
    assert LoaderConfig.from_dict(measured["trials"][0]["config"]) == LoaderConfig.from_dict(pick), \
        "the stored pick is measured first"
    assert entry["drift"]["old_pick_now"] is not None

    code, slower = retune(path, out, slowdown="4")
    (entry,) = slower["datasets"]
    assert code == 3 and entry["status"] == DRIFTED and entry["drift"]["rate_ratio"] < 0.5, entry
    assert slower["report"]["markdown"].endswith(".md") and os.path.isfile(slower["report"]["latest_markdown"])
    good = open(stored).read()
    history = sorted(os.listdir(os.path.dirname(entry["history_path"])))
    assert len(history) >= 3   # one per run, those run again on a busy machine included

    # Killed mid-run: the last good result and the history stay as they were.
    killed = subprocess.Popen([AUTOLOADER, "retune", str(path), "--out", out, "--quiet"], cwd=REPO_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        db = stored[:-len(".json")] + ".db"
        import sqlite3

        while time.monotonic() < deadline and killed.poll() is None:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
                if conn.execute("SELECT count(*) FROM trials WHERE state = 'RUNNING'").fetchone()[0]:
                    break
            time.sleep(0.2)
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(10)
    finally:
        if killed.poll() is None:
            killed.kill()
    assert open(stored).read() == good
    assert sorted(os.listdir(os.path.dirname(entry["history_path"]))) == history

    shown = CliRunner().invoke(main, ["show", "--out", out])
    assert shown.exit_code == 0 and entry["key"] in shown.stdout and "samples/s" in shown.stdout
    one = CliRunner().invoke(main, ["show", entry["key"], "--out", out, "--json"])
    assert one.exit_code == 0 and json.loads(one.stdout)["dataset_key"] == entry["key"]


def test_bad_run_settings_are_a_bad_registry(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text("[defaults]\nbudget = 1\n[[datasets]]\ndataset = 'a:b'\n")
    result = CliRunner().invoke(main, ["retune", str(path)])
    assert result.exit_code == 2 and "budget" in result.stderr


def test_a_warm_start_measures_the_strategys_rule_second():
    space = SearchSpace(batch_sizes=(16,), max_workers=8, pin_memory=(False,))
    pick, rule = LoaderConfig.make(16, 4, False, 2, True), LoaderConfig.make(16, 1, False, 2, True)
    inner = Rest(LoaderConfig.make(16, 0, False))
    inner.rule = rule
    strategy = Warmed(inner, WarmStart(pick, rate=1000.0, may_stop=True), space)
    history = [TrialResult(pick, OK, samples_per_s=1000.0, rel_interval=0.02)]
    assert strategy.propose(history) == rule
    assert strategy.rule == rule, "the rest of the strategy is the inner one's"
