"""The loop-cost bench (scripts/bench/loop_cost.py): its arguments, and a short run."""

from __future__ import annotations

import json

import pytest

from scripts.bench import loop_cost


@pytest.mark.parametrize("argv, said", [(["--rounds", "0"], "--rounds 0"), (["--seconds", "-1"], "--seconds -1.0"),
                                        (["--workers", "-2"], "--workers -2")])
def test_bad_arguments_say_the_rule_and_the_values(capsys, tmp_path, argv, said):
    with pytest.raises(SystemExit):
        loop_cost.main(["--out", str(tmp_path), *argv])
    assert said in capsys.readouterr().err


@pytest.mark.slow
def test_a_short_run_times_both_loaders_and_the_in_run_one_settles(tmp_path):
    assert loop_cost.main(["--out", str(tmp_path), "--rounds", "2", "--seconds", "2", "--workers", "0"]) == 0
    got = json.load(open(tmp_path / "loop_cost.json"))["configs"]["w0"]
    assert len(got["rounds"]) == 2 and all(len(r["plain_us"]) == len(r["in_run_us"]) == 2 for r in got["rounds"])
    assert all(v > 0 for r in got["rounds"] for v in r["plain_us"] + r["in_run_us"])
    # Each in-run epoch read its config alone, and its last reading (the settled one) is what is timed.
    assert all({w for w, _ in reading} == {0} and reading[-1][1] == settled
               for r in got["rounds"] for reading, settled in zip(r["readings"], r["settled_batches"]))
    assert got["ratio"]["rounds"] == 2 and got["ratio"]["interval"] is not None
    assert "| w0 |" in (tmp_path / "summary.md").read_text()
