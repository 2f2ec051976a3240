"""scripts/bench.py --rebuild and --deadline-seconds: a bench run killed outright keeps its records
and the summary is rebuilt from them (the workload cut short marked partial, left out of the
mean); with a deadline, what cannot fit is not begun and the summary says so."""

import importlib.util
import json
import os
import subprocess
import sys

from autoloader.results import OK, TrialResult
from autoloader.space import LoaderConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "scripts", "bench.py")

META = {"command": "python3 scripts/bench.py --workloads small,startup", "date": "2026-11-29T13:46:35+00:00",
        "run_id": "r1", "gpu": None, "gpus": [], "cpus": 4, "cpu_model": "test", "ram_gib": 8.0, "device": "cpu",
        "python": "3.11", "torch": "x", "torchvision": "x", "optuna": "x", "scale": "1.0", "mode": "full",
        "workload_seconds": 240.0, "method": "test"}


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def trial_row(workload, phase, round_, workers, rate, t, **extra):
    config = LoaderConfig.make(64, workers, False, 2, True)
    result = TrialResult(config, OK, samples_per_s=rate, rel_interval=0.02, batches=50, window_s=3.0, seconds=4.0,
                         peak_host_bytes=2**30)
    return {"run_id": "r1", "workload": workload, "phase": phase, "round": round_,
            "config": config.loader_kwargs(), "result": result.to_dict(), "t_start": t, "t_end": t + 4, **extra}


def write_records(folder, finished_summary):
    pick = LoaderConfig.make(64, 4, False, 2, True).loader_kwargs()
    rows = [{"run_id": "r1", "workload": None, "phase": "meta", "round": None, "meta": META},
            {"run_id": "r1", "workload": "small", "phase": "summary", "round": None, "summary": finished_summary},
            {"run_id": "r1", "workload": "startup", "phase": "tuner", "round": None, "config": pick,
             "t_start": 100.0, "t_end": 200.0, "wall_s": 100.0, "returncode": 0, "error": None,
             "tuner": {"config": pick, "samples_per_s": 1000.0, "trials": [{}, {}], "tune_seconds": 95.0}}]
    t = 210.0
    for workers, rate in ((0, 200.0), (2, 600.0), (4, 1000.0)):
        rows.append(trial_row("startup", "grid", None, workers, rate, t, part="sweep"))
        t += 5
    # Final: round 1 whole, round 2 cut short after its first config (the kill).
    for round_, workers, rate in ((1, 4, 990.0), (1, 2, 610.0), (1, 0, 190.0), (1, 3, 800.0), (2, 4, 1010.0)):
        rows.append(trial_row("startup", "final", round_, workers, rate, t, roles=["grid#1"]))
        t += 5
    with open(os.path.join(folder, "records.jsonl"), "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.write('{"run_id": "r1", "workload": "startup", "phase": "fin')  # torn by the kill


def test_rebuild_summarises_a_killed_run_from_its_records(tmp_path):
    source, out = tmp_path / "run", tmp_path / "rebuilt"
    source.mkdir()
    # A finished workload's summary record is taken as it is (one as bench.py writes it).
    bench = load_bench()
    from bench_workloads import WORKLOADS

    rows = [trial_row("small", "final", 1, workers, rate, 10.0 * workers) for workers, rate in ((4, 990.0), (2, 700.0))]
    finished = json.loads(json.dumps(bench._workload_from_records(WORKLOADS["small"], rows, 4, "cpu").summary(),
                                     default=str))
    finished["tuned_over_oracle"] = 0.99  # marks it: the rebuild must not recompute it
    write_records(source, finished)
    proc = subprocess.run([sys.executable, BENCH, "--rebuild", str(source), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "results.json").read_text())
    small, startup = data["workloads"]
    assert small == finished
    assert startup["interrupted"].startswith("killed during its final phase; no ceiling; final round 2 has 1 of 4")
    # Its figures come from the final it recorded: the pick (4 workers) read 990 and 1,010.
    assert startup["pick_short"] == "w4 pf2 pin0 pw1"
    assert startup["pick_rate"] == 1000.0 and startup["oracle_short"] == "w4 pf2 pin0 pw1"
    assert startup["burst_error"] == 0.0
    assert [g["samples_per_s"] for g in startup["grid"]] == [200.0, 600.0, 1000.0]
    summary = (out / "summary.md").read_text()
    assert "# autoloader benchmark (interrupted)" in summary
    assert "| startup (partial) |" in summary
    assert "over 1 complete workload(s): mean 0.990, min 0.990 (1 partial, left out)" in summary


def test_rebuild_refuses_a_folder_without_a_bench_run(tmp_path):
    (tmp_path / "records.jsonl").write_text('{"phase": "grid", "workload": "small"}\n')
    proc = subprocess.run([sys.executable, BENCH, "--rebuild", str(tmp_path), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no meta record" in proc.stderr and "Fix:" in proc.stderr


def test_a_workload_the_deadline_cannot_hold_is_not_begun(tmp_path):
    # --quick needs about 52 s a workload (its 20 s tuner budget and 30 s more); 5 s are left.
    proc = subprocess.run([sys.executable, BENCH, "--quick", "--workloads", "small", "--deadline-seconds", "5",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "Not run: small (not begun:" in summary and "a workload needs about 52 s" in summary
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in records] == ["meta", "skipped"]
