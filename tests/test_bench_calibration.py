"""scripts/bench/calibration.py: every recorded pick and what-if, predicted against measured."""

import pytest

from scripts.bench import calibration
from tests.test_bench_replay import config, profile, result


def tuner(rate=1000.0, predicted=1050.0, rel=0.05):
    return {"profile": profile().to_dict(), "hardware": {"cpus": 8}, "device": "cuda", "dataset_key": "demo-n100-abc",
            "config": config(4).loader_kwargs(), "samples_per_s": rate, "rel_interval": rel,
            "predicted_samples_per_s": predicted, "trials": [result(4, rate, wait_fraction=0.5)]}


def rows(final_rates, ratios):
    out = [{"phase": "tuner", "workload": "demo", "run_id": "r1", "tuner": tuner()}]
    out += [{"phase": "final", "workload": "demo", "run_id": "r1", "result": result(4, r)} for r in final_rates]
    out += [{"phase": "final", "workload": "demo", "run_id": "r1", "result": result(2, 10.0)}]   # not the pick
    out.append({"phase": "whatif_summary", "workload": "demo", "run_id": "r1", "whatif": "uint8",
                "predicted_gain": 0.5, "measured_gain": 0.45, "ratios": ratios})
    return out


def test_the_interval_is_over_the_logs_of_the_rounds():
    low, high = calibration.interval([100.0, 100.0, 100.0])
    assert low == pytest.approx(100.0) and high == pytest.approx(100.0)
    low, high = calibration.interval([90.0, 100.0, 110.0])
    assert low < 90.0 < 110.0 < high or low < 100.0 < high
    assert calibration.interval([100.0]) is None


def test_a_pick_is_set_against_the_bench_s_rounds_of_that_config_alone():
    picks, changes = calibration.calibration(rows([1000.0, 1040.0, 1080.0], [1.44, 1.45, 1.46]), now=False)
    (p,) = picks
    assert p.measured == pytest.approx(1040.0) and p.rounds == 3 and p.source == "final"
    assert p.inside(p.predicted) is True                  # 1,050 inside the rounds' interval
    assert p.stated_held is True                          # 1,040 within 1,000 ± 5%
    (w,) = changes
    assert w.rounds == 3 and w.inside(0.5) is False and w.inside(0.45) is True
    text = calibration.report((picks, changes))
    assert "1 picks, 1 re-measured" in text and "held the bench's median 1 of 1" in text
    assert "the prediction inside the measured interval 0 of 1 (then)" in text


def test_a_pick_the_bench_measured_far_off_does_not_hold():
    picks, _ = calibration.calibration(rows([700.0, 720.0, 710.0], [1.4, 1.5]), now=False)
    assert picks[0].inside(picks[0].predicted) is False and picks[0].stated_held is False
