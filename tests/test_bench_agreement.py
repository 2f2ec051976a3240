"""scripts/bench/agreement.py: how a bench run's phases agree, from records it is handed."""

import json

import pytest

from scripts.bench import agreement as agreement_module


@pytest.fixture(scope="module")
def agreement():
    return agreement_module


def kwargs(workers):
    if workers == 0:
        return {"batch_size": 32, "num_workers": 0, "pin_memory": True}
    return {"batch_size": 32, "num_workers": workers, "pin_memory": True, "prefetch_factor": 2,
            "persistent_workers": True}


def full(workers):
    k = kwargs(workers)
    return dict(k, prefetch_factor=k.get("prefetch_factor"), persistent_workers=k.get("persistent_workers", False))


def trial(workers, rate, pruned=False):
    return {"config": full(workers), "status": "ok", "samples_per_s": rate, "pruned": pruned}


def records():
    """One workload: the tuner picks 8 workers at an estimate of 1,100/s; the machine then drifts
    so that every config reads 10% lower in the final than in the tuner's search."""
    tuner = {"config": full(8), "samples_per_s": 1100.0, "dataset_key": "demo-n100-abc",
             "trials": [trial(4, 870.0), trial(4, 890.0), trial(0, 220.0), trial(0, 20.0, pruned=True),
                        trial(8, 1080.0)]}
    rows = [{"phase": "meta", "workload": None, "meta": {}},
            {"phase": "tuner", "workload": "demo", "config": full(8), "tuner": tuner},
            {"phase": "grid", "workload": "demo", "result": {"config": full(0), "status": "ok", "samples_per_s": 205.0}},
            {"phase": "grid", "workload": "demo", "result": {"config": full(4), "status": "ok", "samples_per_s": 800.0}},
            {"phase": "grid", "workload": "demo", "result": {"config": full(8), "status": "crashed", "samples_per_s": None}},
            {"phase": "skipped", "workload": "other", "reason": "no time"}]
    for rates in ((200.0, 810.0, 1000.0), (200.0, 800.0, 1000.0), (180.0, 790.0, 900.0)):
        for workers, rate in zip((0, 4, 8), rates):
            rows.append({"phase": "final", "workload": "demo",
                         "result": {"config": full(workers), "status": "ok", "samples_per_s": rate}})
    return rows


def test_drift_is_the_median_over_configs_other_than_the_pick_and_pruned_bursts_are_left_out(agreement):
    (found,) = agreement.agreements(records())
    assert found.workload == "demo" and found.pick == "w8 pf2 pin1 pw1"
    by_config = {r.config: r.ratio for r in found.tuner_over_final}
    # 0 workers: only the unpruned 220/s burst counts (the pruned 20/s would pull it to 120/s).
    assert by_config == pytest.approx({"w0 pin1": 1.1, "w4 pf2 pin1 pw1": 1.1})
    assert found.drift == pytest.approx(1.1)
    assert found.burst_error == pytest.approx(0.1)
    assert found.burst_error_net == pytest.approx(0.0)
    # The grid's crashed trial has no ratio; the others are over the final's medians.
    assert {r.config: r.ratio for r in found.grid_over_final} == pytest.approx({"w0 pin1": 1.025, "w4 pf2 pin1 pw1": 1.0})


def test_report_counts_agreement_within_the_target_width_and_leaves_out_workloads_not_run(agreement, tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in records()) + '{"torn": ')
    assert agreement.main([str(path)]) == 0
    text = capsys.readouterr().out
    assert "| demo |" in text and "other" not in text
    assert "| 1.100 | +10.0% | +0.0% |" in text
    assert "grid / final: 2 of 2 within ±5%" in text
    assert "tuner / final: 0 of 2 within ±5%" in text


def test_no_tuner_estimate_gives_no_burst_error(agreement):
    rows = [r for r in records() if r["phase"] != "tuner"]
    (found,) = agreement.agreements(rows)
    assert found.pick is None and found.burst_error is None and found.drift is None
    assert found.burst_error_net is None


def test_two_runs_of_one_workload_are_kept_apart(agreement):
    # run-20261129 measured gpubound in four runs: their finals must not pool into one median.
    first = [dict(r, run_id="A") for r in records()]
    second = [dict(r, run_id="B") for r in records()]
    for row in second:
        if row["phase"] == "final":
            row["result"] = dict(row["result"], samples_per_s=row["result"]["samples_per_s"] * 2)
    # A third run that only skipped the workload measured nothing: no label, no row.
    skipped = [{"phase": "skipped", "workload": "demo", "run_id": "C", "reason": "no time"}]
    found = agreement.agreements(first + second + skipped)
    assert [a.workload for a in found] == ["demo (A)", "demo (B)"]
    assert [a.workload for a in agreement.agreements(first + skipped)] == ["demo"]
    assert found[0].burst_error == pytest.approx(0.1)
    assert found[1].burst_error == pytest.approx(1100.0 / 2000.0 - 1)
