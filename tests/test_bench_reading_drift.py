"""The drift bench (scripts/bench/reading_drift.py): which readings it pairs, and its errors."""

from __future__ import annotations

import json
import math

import pytest

from scripts.bench import reading_drift


def _segment(workers, rate, round_):
    return {"config": {"num_workers": workers}, "samples_per_s": rate, "round": round_, "served_per_s": rate}


def test_a_reading_is_paired_with_its_configs_next_reading_in_a_later_round(tmp_path, capsys):
    segments = [_segment(16, 100.0, 0), _segment(64, 200.0, 0), _segment(64, 220.0, 1), _segment(16, 90.0, 1),
                _segment(64, 180.0, None), _segment(64, 150.0, 2)]
    assert reading_drift.moves(segments) == pytest.approx([math.log(0.9), math.log(1.1), math.log(150 / 220)])
    results = tmp_path / "run-a" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps({"workloads": {"heavytail": {"epochs": {"in_run": {"segments": segments}}}}}))
    assert reading_drift.main([str(results), "--out", str(tmp_path / "out")]) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| run-a heavytail (made) | 3 | +0.095 | -0.383 |" in summary and "largest 0.383" in summary


def test_an_unreadable_file_says_what_to_pass(tmp_path, capsys):
    with pytest.raises(SystemExit):
        reading_drift.main([str(tmp_path / "none.json")])
    assert "cannot read" in capsys.readouterr().err
