"""The bench's floor command (scripts/bench/floor.py) on rows written here: the least a judged tune
can take, read off its own timeline, and the wall time past it."""

from __future__ import annotations

import pytest

from scripts.bench import floor

PICK = {"batch_size": 64, "num_workers": 0, "pin_memory": True}
RULE = {"batch_size": 64, "num_workers": 15, "pin_memory": True, "prefetch_factor": 2, "persistent_workers": True}
P, R = "bs64-w0-pin1", "bs64-w15-pin1-pf2-pw1"


def tuner(config=PICK, interval=(1.2, 1.8)):
    return {"tune_seconds": 40.0, "config": config, "control": RULE, "control_ratio_interval": list(interval or []),
            "inputs": {"timeline": [["set-up", 0.0, 5.0, None], ["profile", 5.2, 9.8, None],
                                    ["burst", 10.0, 13.0, P], ["burst", 13.5, 22.5, R],
                                    ["burst", 23.0, 27.0, "bs64-w3-pin0-pf2-pw1"],
                                    ["final", 27.2, 29.2, P], ["final", 29.2, 39.2, R]]}}


def test_the_floor_is_the_set_up_and_two_pairs_of_the_pick_and_the_rule():
    rows = [{"run_id": "r1", "workload": "hugefloat", "phase": "tuner", "tuner": tuner(), "wall_s": 41.0},
            {"run_id": "r1", "workload": "hugefloat", "phase": "tuner", "tuner": tuner(), "wall_s": 99.0}]
    (f,) = floor.floors(rows)   # a run's first tune of a workload only
    assert (f.before_s, f.outside_s, f.pick_s, f.rule_s) == pytest.approx((10.0, 1.0, 2.5, 9.5))
    gaps = sorted([0.5, 0.5, 0.2, 0.0])
    assert f.gap_s == pytest.approx((gaps[1] + gaps[2]) / 2)
    assert f.floor_s == pytest.approx(10.0 + 1.0 + 2 * (2.5 + 9.5) + 3 * f.gap_s)
    assert f.above_s == pytest.approx(41.0 - f.floor_s) and f.judged and f.pick == "w0 pin1"


def test_a_rule_pick_has_no_floor_and_an_unjudged_tune_is_marked():
    rows = [{"run_id": "r1", "workload": "large", "phase": "tuner", "tuner": tuner(config=RULE), "wall_s": 30.0},
            {"run_id": "r1", "workload": "heavytail", "phase": "tuner", "tuner": tuner(interval=None), "wall_s": 30.0},
            {"run_id": "r1", "workload": "broken", "phase": "tuner", "tuner": None, "wall_s": 3.0}]
    (f,) = floor.floors(rows)
    assert f.workload == "heavytail" and not f.judged and f.above_s < 0
    text = floor.report([f])
    assert "| r1 | heavytail | w0 pin1 | 30.0 | no |" in text
    assert "floor at or under 35 s in 0 of 1" in text
    assert "no tune" in floor.report([])


def test_the_runs_median_floor_against_the_target():
    rows = [{"run_id": "r1", "workload": w, "phase": "tuner", "tuner": tuner(), "wall_s": 41.0}
            for w in ("a", "b", "c")]
    found = floor.floors(rows)
    assert "at or under 35 s in 0 of 1 runs" in floor.report(found)
    assert "at or under 40 s in 1 of 1 runs" in floor.report(found, target_s=40.0)
