"""The CPU bench for in-run tuning (scripts/bench/inrun.py): the control each in-run epoch is
compared with, and the summary's ratio, on records written here."""

from __future__ import annotations

import math

from scripts.bench import inrun

W0 = {"batch_size": 64, "num_workers": 0, "pin_memory": False}
W2 = {"batch_size": 64, "num_workers": 2, "pin_memory": False, "prefetch_factor": 2}


def _run(index, in_run_s, after_s, before=None):
    run = {"run": index, "load_before": (1.0,), "load_after": (1.0,), "lines": [],
           "in_run": {"first_batch_s": 0.5, "epoch_s": in_run_s, "later_epochs_s": [], "pick": W0, "stored": None},
           "pick_from_start": {"epoch_s": after_s}, "cli": {"pick": W0}}
    if before is not None:
        run["pick_before"] = {"epoch_s": before[0], "config": before[1]}
    return run


def test_a_bracketed_in_run_epoch_is_compared_with_the_picks_epochs_before_and_after():
    assert inrun.control_s(_run(0, 66.0, 64.0)) == 64.0
    assert math.isclose(inrun.control_s(_run(0, 66.0, 64.0, before=(72.0, W0))), math.sqrt(72.0 * 64.0))
    # a control before with another config than the in-run pick is no control of it
    assert inrun.control_s(_run(0, 66.0, 64.0, before=(50.0, W2))) == 64.0


def test_the_summary_pairs_each_run_with_its_control():
    runs = [_run(0, 70.0, 64.0, before=(76.0, W0)), _run(1, 66.0, 60.0, before=(72.0, W0)),
            _run(2, 63.0, 61.0, before=(65.0, W0))]
    text = inrun.summary(runs, "cmd")
    assert "| 76.0 / 64.0 | 1.004 |" in text, text
    ratios = [70 / math.sqrt(76 * 64), 66 / math.sqrt(72 * 60), 63 / math.sqrt(65 * 61)]
    mean = math.exp(sum(math.log(r) for r in ratios) / 3)
    assert f"{mean:.3f}x the wall time (95% " in text, text
