"""scripts/bench/ab_tunes.py: the arms alternate, the base arm imports the base copy, and the
summary pairs each workload's tunes."""

import os

import pytest

from scripts.bench import ab_tunes


def test_arms_alternate_pair_by_pair():
    assert [ab_tunes.order(i) for i in range(3)] == [("new", "base"), ("base", "new"), ("new", "base")]


def test_base_env_puts_the_copy_first_and_drops_the_repository(monkeypatch, tmp_path):
    repo = str(tmp_path / "repo")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/tmp/site", repo]))
    env = ab_tunes.base_env("/tmp/base", repo)
    assert env["PYTHONPATH"].split(os.pathsep) == ["/tmp/base", "/tmp/site"]


def test_summary_pairs_the_walls_and_says_a_failed_tune():
    rows = [{"arm": "new", "workload": "w", "pair": 0, "wall_s": 30.0, "phases": {}},
            {"arm": "base", "workload": "w", "pair": 0, "wall_s": 40.0, "phases": {}},
            {"arm": "base", "workload": "v", "pair": 0, "wall_s": None, "error": "rc=1: boom", "phases": {}}]
    text = ab_tunes.summary(rows)
    assert "median -10.0 s over 1 pairs" in text
    assert "| v | 0 | base | failed |" in text and "rc=1: boom" in text


def test_a_base_that_is_no_copy_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--base must be a copy of the repository"):
        ab_tunes.main(["--base", str(tmp_path), "--out", str(tmp_path / "out")])
