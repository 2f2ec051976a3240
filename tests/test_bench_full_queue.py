"""The full-queue bench (scripts/bench/full_queue.py): its arguments, and a short run's readings."""

from __future__ import annotations

import json

import pytest

from scripts.bench import full_queue


def test_bad_arguments_say_the_rule_and_the_values(capsys, tmp_path):
    with pytest.raises(SystemExit):
        full_queue.main(["--out", str(tmp_path), "--few", "8", "--many", "2"])
    assert "0 < --few < --many" in capsys.readouterr().err


@pytest.mark.slow
def test_a_short_run_rates_each_reading_both_ways(tmp_path):
    from autoloader.inrun import schedule

    before = schedule.Plan.__dict__["judge"], schedule.Plan.__dict__["ahead"], schedule.PAIRS_PER_STEP
    assert full_queue.main(["--out", str(tmp_path), "--seconds", "8"]) == 0
    # The bench puts back what it set.
    assert (schedule.Plan.__dict__["judge"], schedule.Plan.__dict__["ahead"], schedule.PAIRS_PER_STEP) == before
    rows = json.load(open(tmp_path / "readings.json"))["readings"]
    assert {r["workers"] for r in rows} == {2, 8}
    assert all(r["made_per_s"] > 0 and r["served_per_s"] > 0 for r in rows)
    assert (tmp_path / "summary.md").read_text().count("\n| ") >= len(rows)
