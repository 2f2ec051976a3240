"""The first-pair bench (scripts/bench/first_pair.py): its arguments, and a short run of both arms."""

from __future__ import annotations

import json
import math

import pytest

from scripts.bench import first_pair


def test_bad_arguments_say_the_rule_and_the_values(capsys, tmp_path):
    with pytest.raises(SystemExit):
        first_pair.main(["--out", str(tmp_path), "--runs", "0"])
    assert "--runs 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_short_run_reads_both_arms_and_puts_far_ahead_back(tmp_path):
    from autoloader.inrun import schedule
    from autoloader.inrun.quick import Proposer

    before = schedule.FAR_AHEAD, Proposer.start
    assert first_pair.main(["--out", str(tmp_path), "--runs", "1", "--length", "480", "--epochs", "1",
                            "--start", "1"]) == 0
    assert (schedule.FAR_AHEAD, Proposer.start) == before and math.isfinite(before[0])
    run = json.load(open(tmp_path / "first_pair.json"))["runs"][0]
    assert all(run[a]["start"] == "w1" for a in run["order"])
    assert set(run["order"]) == {"one-pair", "two-pairs"}
    assert all(run[a]["epoch_s"] > 0 and run[a]["pick_epoch_s"] > 0 for a in run["order"])
    assert "one-pair's epoch 1 over two-pairs'" in (tmp_path / "summary.md").read_text()
