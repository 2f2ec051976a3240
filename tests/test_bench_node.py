"""``python -m scripts.bench node`` (issue 16): the node tune, the single-rank tune and the
interleaved measurement of the node pick, the single-rank pick and the cpus-1 rule on every rank,
run end to end with two CPU ranks (gloo); the summary's arithmetic on synthetic records."""

import json
import os
import subprocess
import sys

import pytest

from autoloader.search.results import FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig
from scripts.bench import node

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = [sys.executable, "-m", "scripts.bench", "node"]


def bench(*args, timeout=150):
    return subprocess.run(BENCH + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": REPO})


@pytest.mark.slow
@pytest.mark.heavy
def test_node_bench_measures_three_configs_on_two_cpu_ranks(tmp_path):
    out = tmp_path / "node"
    proc = bench("--nproc-per-node", 2, "--workloads", "hugefloat", "--device", "cpu", "--budget", 20,
                 "--rounds", 1, "--windows", "quick", "--scale", 0.02, "--out", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["state"] == "complete"
    meta = results["meta"]
    assert meta["nproc_per_node"] == 2 and meta["device"] == "cpu" and meta["gpu_count"] == 0
    assert meta["commit"] and meta["commit"] != "unknown" and meta["cpus"] >= 2 and meta["ram_gib"] > 0
    assert "scripts.bench node --nproc-per-node 2" in meta["command"]
    [s] = results["workloads"]
    assert s["workload"] == "hugefloat" and s["ranks"] == 2
    # The node tune ran on two ranks (its study's fingerprint says so), the single-rank tune on one.
    assert s["node_tune"]["pick"] and s["node_tune"]["fingerprint"].endswith("-2rank")
    assert "--nproc-per-node 2" in s["node_tune"]["command"]
    assert s["single_tune"]["pick"] and "--nproc-per-node" not in s["single_tune"]["command"]
    assert not s["single_tune"]["fingerprint"].endswith("rank")
    assert s["rule"]["num_workers"] == s["node_cpus"] - 1 and s["rule"]["persistent_workers"]
    # Three roles measured (a config two roles share is measured once), every rank's rate kept,
    # the node's rate 2 x the slowest rank's, the ratios of the medians.
    assert set(s["configs"]) == {"node_pick", "single_pick", "rule"}
    for role, c in s["configs"].items():
        [r] = c["rounds"]
        assert r["status"] == OK, (role, c)
        assert len(r["rank_samples_per_s"]) == 2
        assert abs(r["node_samples_per_s"] - 2 * min(r["rank_samples_per_s"])) < 1e-6
        assert c["node_samples_per_s"] == r["node_samples_per_s"]
    for key, other in (("node_vs_single", "single_pick"), ("node_vs_rule", "rule")):
        expected = s["configs"]["node_pick"]["node_samples_per_s"] / s["configs"][other]["node_samples_per_s"]
        assert abs(s[key]["ratio"] - expected) < 1e-9
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    phases = [r["phase"] for r in rows]
    assert phases[0] == "meta" and "node_tuner" in phases and "single_tuner" in phases and phases[-1] == "summary"
    finals = [r for r in rows if r["phase"] == "node_final"]
    assert {role for r in finals for role in r["roles"]} == {"node_pick", "single_pick", "rule"}
    assert all(len(r["result"]["rank_samples_per_s"]) == 2 for r in finals)
    text = (out / "summary.md").read_text()
    assert "# Node benchmark: 2 ranks (complete)" in text and "| hugefloat |" in text
    assert "cpus-1 rule" in text and "Not run: none." in text


@pytest.mark.slow
def test_node_bench_says_what_the_deadline_left_out(tmp_path):
    out = tmp_path / "node"
    proc = bench("--nproc-per-node", 2, "--workloads", "heavytail,small", "--device", "cpu", "--budget", 20,
                 "--deadline-seconds", 5, "--out", out, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["state"] == "partial" and results["workloads"] == []
    assert [n.split(" ")[0] for n in results["meta"]["not_run"]] == ["heavytail", "small"]
    assert "Not run: heavytail (not begun" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_node_bench_refuses_more_ranks_than_cpus(tmp_path):
    proc = bench("--nproc-per-node", 999, "--workloads", "heavytail", "--device", "cpu", "--out", tmp_path, timeout=60)
    assert proc.returncode == 2 and "--nproc-per-node" in proc.stderr


def _row(round_, config, roles, ranks_rates=None, failed=False):
    if failed:
        result = TrialResult(config, FAILED, cause="error", error="rank 1 of 2: boom")
    else:
        result = TrialResult(config, OK, samples_per_s=min(ranks_rates), batches=20, window_s=2.0, seconds=3.0,
                             rank_samples_per_s=tuple(ranks_rates))
    return {"workload": "w", "phase": "node_final", "round": round_, "config": config.loader_kwargs(),
            "key": config.key, "result": result.to_dict(), "roles": roles}


def test_summary_arithmetic_on_synthetic_records():
    pick = LoaderConfig.make(64, 3, True, 2, True)
    single = LoaderConfig.make(64, 15, True, 2, True)
    rule = LoaderConfig.make(64, 15, True, 2, True).replace(prefetch_factor=4)
    rows = []
    rates = {  # round -> (pick's ranks, single's ranks, rule's ranks or None for a failure)
        1: ((100, 110), (60, 80), (50, 55)),
        2: ((120, 90), (70, 75), None),
        3: ((105, 100), (65, 66), (40, 60)),
    }
    for round_, (a, b, c) in rates.items():
        rows.append(_row(round_, pick, ["node_pick"], a))
        rows.append(_row(round_, single, ["single_pick"], b))
        rows.append(_row(round_, rule, ["rule"], c, failed=c is None))
    m = node.summarise_measurement(rows, ranks=2)
    c = m["configs"]
    # Node rates are 2 x the slowest rank: pick 200, 180, 200 -> median 200; single 120, 140, 130 -> 130;
    # rule 100, (failed), 80 -> median 90 of the two rounds it ran.
    assert [r["node_samples_per_s"] for r in c["node_pick"]["rounds"]] == [200, 180, 200]
    assert c["node_pick"]["node_samples_per_s"] == 200
    assert c["single_pick"]["node_samples_per_s"] == 130
    assert c["rule"]["node_samples_per_s"] == 90
    assert c["node_pick"]["rank_median_samples_per_s"] == [105, 100]
    assert c["rule"]["failures"] == [{"round": 2, "status": FAILED, "cause": "error", "error": "rank 1 of 2: boom"}]
    assert abs(m["node_vs_single"]["ratio"] - 200 / 130) < 1e-12
    assert m["node_vs_single"]["by_round"] == [min(200 / 120, 180 / 140, 200 / 130), max(200 / 120, 180 / 140, 200 / 130)]
    assert abs(m["node_vs_rule"]["ratio"] - 200 / 90) < 1e-12
    assert m["node_vs_rule"]["by_round"] == [2.0, 2.5]   # round 2 has no rule rate: left out
    assert not m["node_vs_single"]["same_config"]
    # A config two roles share: measured once, ratio 1 and said so.
    shared = node.summarise_measurement([_row(1, pick, ["node_pick", "single_pick"], (10, 12)),
                                         _row(1, rule, ["rule"], (5, 5))], ranks=2)
    assert shared["node_vs_single"] == {"ratio": 1.0, "by_round": [1.0, 1.0], "same_config": True}
    assert shared["node_vs_rule"]["ratio"] == 2.0
    # The summary's text carries the figures and the failure.
    summary = node.workload_summary("w", 2, {}, rows, rule, 16, ["a note"], None, 1.0)
    meta = {"nproc_per_node": 2, "command": "python3 -m scripts.bench node ...", "date": "d", "commit": "c",
            "gpus": ["GPU A", "GPU A"], "cpus": 16, "cpu_model": "x", "ram_gib": 1.0, "device": "cuda",
            "python": "3", "torch": "t", "optuna": "o", "scale": "1.0", "windows": "full", "rounds": 3,
            "budget_text": "b", "not_run": ["gpubound (not begun: ...)"]}
    text = node.render([summary], meta, "partial")
    assert "| w | not run | 200 | 1.538 (1.29-1.67) | 2.222 (2.00-2.50) |" in text
    assert "rule round 2: failed (error): rank 1 of 2: boom" in text
    assert "2 GPU(s) GPU A, GPU A" in text and "Not run: gpubound (not begun: ...)." in text


FAILING = """
import sys
from scripts.bench.workloads import WORKLOADS, Workload
from scripts.bench.__main__ import main
WORKLOADS["breaks"] = Workload("breaks", "every sample past the probe's first raises on rank 1", 16,
                               "tests/workloads.py:breaks_on_rank_one", "tests/node_workloads.py:noop_step")
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.heavy
def test_a_config_failing_on_a_rank_is_its_result_not_the_end_of_the_bench(tmp_path):
    out = tmp_path / "node"
    proc = subprocess.run([sys.executable, "-c", FAILING, "node", "--nproc-per-node", "2", "--workloads", "breaks",
                           "--device", "cpu", "--budget", "20", "--rounds", "1", "--windows", "quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=150, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["state"] == "complete"
    [s] = results["workloads"]
    # The node tune fails (no config runs on rank 1); the single-rank tune, on one rank, picks.
    assert s["node_tune"]["pick"] is None and s["node_tune"]["error"]
    assert s["single_tune"]["pick"] is not None
    assert set(s["configs"]) == {"single_pick", "rule"} and s["error"] is None
    for c in s["configs"].values():
        [f] = c["failures"]
        assert "rank 1 of 2" in f["error"] and "unreadable on rank 1" in f["error"]
        assert c["node_samples_per_s"] is None
    assert s["node_vs_single"]["ratio"] is None and s["node_vs_rule"]["ratio"] is None
    text = (out / "summary.md").read_text()
    assert "| breaks | tune failed | n/a | n/a | n/a |" in text
    assert "cpus-1 rule round 1: failed" in text and "unreadable on rank 1" in text
