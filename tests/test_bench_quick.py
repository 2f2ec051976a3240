"""The bench's quick command (scripts/bench/quick.py), on rows written here: the tune's phases
read off its timeline, the paired rounds planned inside the deadline, and the summary's table.
Its real run is the CPU smoke in its docstring (minutes: not in the suite)."""

from __future__ import annotations

from scripts.bench import quick

TUNER = {"tune_seconds": 40.0, "config": {"batch_size": 64, "num_workers": 0, "pin_memory": True},
         "control": {"batch_size": 64, "num_workers": 15, "pin_memory": True, "prefetch_factor": 2,
                     "persistent_workers": True},
         "verdict": "faster than the rule by 20-80%",
         "inputs": {"timeline": [["set-up", 0.0, 12.0, None], ["profile", 12.5, 18.5, None],
                                 ["burst", 19.0, 24.0, "a"], ["burst", 24.5, 29.5, "b"],
                                 ["final", 30.0, 34.0, "a"], ["final", 34.0, 39.5, "b"]]}}


def test_the_phases_are_read_off_the_tunes_own_timeline():
    p = quick.phases(TUNER)
    assert (p["set-up"], p["to profile"], p["profile"], p["search"], p["final"]) == (12.0, 0.5, 6.0, 10.0, 9.5)
    assert p["other"] == 40.0 - 12.0 - 0.5 - 6.0 - 10.0 - 9.5 and p["bursts"] == 2 and p["final measurements"] == 2
    assert quick.phases(None) == {}


def test_the_rounds_fit_the_deadline_the_cheapest_workload_first():
    costs = {"dear": 12.0, "cheap": 6.0}
    assert quick.plan_rounds(costs, 1000.0, 5, 3) == {"cheap": 5, "dear": 5}
    fewer = 2 * quick.START_S + 4 * 18.0
    assert quick.plan_rounds(costs, fewer, 5, 3) == {"cheap": 4, "dear": 4}
    only = quick.START_S + 3 * 6.0 + 1.0
    assert quick.plan_rounds(costs, only, 5, 3) == {"cheap": 3, "dear": 0}
    assert quick.plan_rounds(costs, 5.0, 5, 3) == {"cheap": 0, "dear": 0}


def test_the_summary_has_each_tune_its_pair_and_the_median():
    rows = [{"phase": "meta", "meta": {"argv": ["quick", "--out", "x"], "device": "cuda", "scale": "1.0",
                                       "hardware": {"cpus": 16, "gpus": ["NVIDIA H200"]}}},
            {"phase": "anatomy", "anatomy": {"import torch": 2.5, "CUDA start": 1.2}},
            {"workload": "hugefloat", "phase": "tuner", "tuner": TUNER, "wall_s": 41.0},
            {"workload": "hugefloat", "phase": "pair_summary", "ratio": 1.5, "interval": [1.2, 1.8], "rounds": 5,
             "note": None},
            {"workload": "large", "phase": "tuner", "tuner": {**TUNER, "config": TUNER["control"]}, "wall_s": 45.0},
            {"workload": "large", "phase": "pair_summary", "ratio": 1.0, "interval": None, "rounds": 0,
             "note": "the pick is the rule's config"},
            {"workload": "heavytail", "phase": "tuner", "tuner": None, "error": "rc=1: boom", "wall_s": 3.0}]
    before = [{"workload": "hugefloat", "phase": "tuner", "wall_s": 59.5}]
    text = quick.render(rows, before, 120.0)
    row = "| hugefloat | 41.0 | 59.5 | 12.0 / 0.5 / 6.0 / 10.0 / 9.5 / 2.0 | 2, 2 | w0 pin1 | w15 pf2 pin1 pw1 |"
    assert row in text
    assert "| 1.50x (1.20-1.80), 5 rounds |" in text and "1.00 (the pick is the rule's config)" in text
    assert "| heavytail | failed |" in text and "rc=1: boom" in text
    assert "median 43.0 s (min 41.0, max 45.0); before: median 59.5 s over 1" in text
    assert "import torch 2.50 s; CUDA start 1.20 s" in text


def test_the_summary_is_written_once_the_tunes_end_and_says_what_was_still_running(tmp_path):
    rows = [{"phase": "meta", "meta": {"argv": ["quick"], "device": "cuda", "hardware": {"cpus": 16}}},
            {"workload": "hugefloat", "phase": "tuner", "tuner": TUNER, "wall_s": 41.0}]
    text = quick.summarise(rows, [], str(tmp_path), 60.0, note="the paired rounds were still running")
    written = (tmp_path / "summary.md").read_text()
    assert written == text and "| hugefloat | 41.0 |" in written
    assert written.endswith("(written before the run ended: the paired rounds were still running)\n")
    # The end of the run writes it again, without the note.
    assert "written before" not in quick.summarise(rows, [], str(tmp_path), 90.0)
    assert "written before" not in (tmp_path / "summary.md").read_text()
