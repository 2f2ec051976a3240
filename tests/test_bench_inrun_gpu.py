"""The GPU bench for in-run tuning (scripts/bench/inrun_gpu.py): its grid, its paired figures and
its summary on records written here; its tiny mode end to end on the CPU (heavy)."""

from __future__ import annotations

import json

import pytest

from scripts.bench import inrun_gpu


def test_the_grid_holds_the_rule_first_and_leaves_out_what_memory_cannot_hold():
    configs, left_out = inrun_gpu.grid(16, 64, "cuda")
    names = [inrun_gpu.short(c) for c in configs]
    assert names[0] == "w15 pf2 pin1 pw1" and "w0 pin1" in names and "w4 pf2 pin1 pw1" in names
    assert "w24 pf8 pin1 pw1" in names and "w48 pf2 pin1 pw1" in names and not left_out
    batch = 192 << 20
    configs, left_out = inrun_gpu.grid(16, 64, "cuda", batch_bytes=batch, room=8 << 30)
    assert [inrun_gpu.short(c) for c in left_out] == ["w24 pf8 pin1 pw1", "w48 pf2 pin1 pw1"]
    assert configs[0].num_workers == 15   # the rule stays, whatever it holds
    assert all(c.num_workers == 15 or inrun_gpu.in_flight(c, batch) <= 8 << 30 for c in configs)
    assert len(inrun_gpu.grid(2, 32, "cpu", size=3)[0]) == 3


def test_lengthened_reads_the_dataset_modulo_its_length():
    ds = inrun_gpu.Lengthened(list(range(5)), 12)
    assert len(ds) == 12 and [ds[i] for i in (0, 4, 5, 11)] == [0, 4, 0, 1]


ROUNDS = [{"round": 0, "rates": {"rule": 100.0, "w0": 150.0}},
          {"round": 1, "rates": {"rule": 110.0, "w0": 160.0, "pick": 158.0}},
          {"round": 2, "rates": {"rule": 105.0, "w0": 150.0, "pick": 152.0}},
          {"round": 3, "rates": {"rule": 0.0, "w0": 155.0, "pick": 150.0}}]


def test_the_pick_is_paired_with_each_config_on_the_rounds_both_read():
    v = inrun_gpu.versus(ROUNDS, "pick", ["rule", "w0", "pick"])
    assert v["best"] == "w0"   # the highest median (155 against 152)
    over = v["pick_over_best"]
    assert over["rounds"] == 3 and over["interval"][0] < over["ratio"] < over["interval"][1]
    assert over["ratio"] == pytest.approx((158 / 160 * 152 / 150 * 150 / 155) ** (1 / 3))
    assert v["over"]["rule"]["rounds"] == 2   # round 3's rule read nothing: not a pair
    assert inrun_gpu.versus(ROUNDS, None, ["rule"]) == {}
    alone = inrun_gpu.versus(ROUNDS, "w0", ["rule", "w0"])
    assert alone["pick_over_best"]["note"] == "the pick is the best median"


def test_the_summary_says_each_phase_and_what_was_cut():
    data = {"meta": {"gpu": "NVIDIA H100 80GB HBM3", "cpus": 16, "torch": "2.x", "commit": "abc1234",
                     "command": "python3 -m scripts.bench.inrun_gpu --out x", "deadline_s": 480, "elapsed_s": 300},
            "workloads": {"hugefloat": {
                "batch_size": 64, "rule": "w15 pf2 pin1 pw1", "phases_done": ["first_batch"], "grid": ["rule", "w0"],
                "left_out": ["w48 pf2 pin1 pw1"], "room_bytes": 8 << 30, "batch_bytes": 192 << 20,
                "first_batch": [{"in_run": {"first_batch_s": 1.5, "built_s": 1.0},
                                 "plain": {"first_batch_s": 0.5, "built_s": 0.0}}],
                "epochs_sized": {"asked_s": 60.0, "target_s": 40.0, "best_rate": 1000.0, "length": 40000,
                                 "cut": True},
                "epochs": {"in_run": {"built_s": 1.0, "epoch_s": 41.0, "first_batch_s": 0.2, "batches": 625,
                                      "later": [], "start": "w0 pin1", "pick": "w0 pin1", "pick_from": "settled",
                                      "finalists": ["w0 pin1", "w15 pf2 pin1 pw1"], "why": "settled",
                                      "segments": [{"batches": 100, "wall_s": 6.0, "drained": 0, "drain_s": 0.0},
                                                   {"batches": 200, "wall_s": 12.5, "drained": 30, "drain_s": 2.25,
                                                    "end_s": 0.25, "begin_s": 0.5},
                                                   {"batches": 280, "wall_s": 18.0, "drained": 15, "drain_s": 1.0}]},
                           "pick_from_start": {"config": "w0 pin1", "epoch_s": 40.0, "first_batch_s": 0.1,
                                               "batches": 625},
                           "rule": {"skipped": "20 s left of the deadline"}},
                "rounds": ROUNDS, "pick_in_grid": False,
                "versus": inrun_gpu.versus(ROUNDS, "pick", ["rule", "w0", "pick"]),
                "error": "RuntimeError: cut", "lines": ["autoloader: tuned in the run"]}}}
    text = inrun_gpu.summary(data)
    assert "NVIDIA H100 80GB HBM3" in text and "abc1234" in text and "--out x" in text
    assert "median +1.00 s (done-when: at most +2 s)" in text
    assert "(asked 60 s: cut to fit the deadline)" in text and "w48 pf2 pin1 pw1" in text
    assert "1.025x the wall time (1.050x with the build)" in text
    assert "Switches in the tuned epoch(s): 2;" in text and "45 batches in 3.2 s (ending workers 0.2 s, beginning the next config's 0.5 s); in the " \
        "readings 580 batches in 36.5 s" in text
    assert "skipped: 20 s left of the deadline" in text and "**Failed**: `RuntimeError: cut`" in text
    assert "The pick over the best (w0, highest median)" in text and "95%" in text


def test_bad_arguments_say_the_rule_and_the_value(capsys):
    with pytest.raises(SystemExit):
        inrun_gpu.parse(["--out", "x", "--workloads", "nosuch", "--device", "cpu"])
    assert "'nosuch'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        inrun_gpu.parse(["--out", "x", "--epoch-s", "0", "--device", "cpu"])
    assert "--epoch-s must be > 0, got 0.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        inrun_gpu.parse(["--out", "x", "--far-ahead", "0.9", "--device", "cpu"])
    err = capsys.readouterr().err
    assert "--far-ahead is a ratio past 1" in err and "got 0.9" in err and "--far-ahead 1.25" in err


def test_the_summary_pairs_the_epochs_in_the_run_with_the_picks():
    pairs = [{"order": ["in_run", "pick_from_start"], "in_run": 62.0, "pick_from_start": 60.0, "pick": "w64"},
             {"order": ["pick_from_start", "in_run"], "in_run": 63.0, "pick_from_start": 61.0, "pick": "w64"}]
    ratio = inrun_gpu.paired_ratio([(p["in_run"], p["pick_from_start"]) for p in pairs])
    epochs = {"in_run": {"start": "w16", "pick": "w64", "epoch_s": 62.0, "first_batch_s": 0.4, "batches": 10,
                         "built_s": 0.2, "pick_from": "settled", "finalists": ["w16", "w64"]},
              "pick_from_start": {"config": "w64", "epoch_s": 60.0, "first_batch_s": 1.0, "batches": 10},
              "pairs": pairs, "pairs_ratio": ratio.to_dict()}
    text = inrun_gpu.summary({"meta": {}, "workloads": {"heavytail": {"batch_size": 32, "rule": "w15",
                                                                      "epochs": epochs}}})
    assert "Epoch 1 in-run over the pick from the start, 2 pairs" in text
    assert "62.0/60.0 s, 63.0/61.0 s" in text
    assert f"paired {ratio.ratio:.3f}x (95% {ratio.interval[0]:.3f}-{ratio.interval[1]:.3f})" in text


def test_the_first_pair_is_judged_on_its_own_as_the_climb_judges_one_pair():
    import math

    from autoloader.inrun.schedule import Reading, compare

    def reading(workers, rate, swing):
        # Blocks that alternate around ``rate``: a spread the reading states as its own error.
        calls, t = [], 0.0
        for i in range(400):
            calls.append(t)
            t += (1.0 + (swing if (i // 50) % 2 else -swing)) / rate
        config = inrun_gpu.LoaderConfig.make(batch_size=1, num_workers=workers, pin_memory=True,
                                             prefetch_factor=2, persistent_workers=True)
        return Reading(config, None, [1] * 400, calls, [c + 0.1 / rate for c in calls], t, steady_end=400)

    best, candidate = reading(16, 3000.0, 0.2), reading(64, 5000.0, 0.1)
    best.round = candidate.round = 0
    segments = [best.to_dict(), candidate.to_dict(), {**candidate.to_dict(), "round": None}]
    line = inrun_gpu.first_pair_line(segments, {"z": 2.0, "far_ahead": 1.5})
    d, se = compare([(best, candidate)])
    assert f"w64 pf2 pin1 pw1 over w16 pf2 pin1 pw1 {math.exp(d):.3f}x" in line
    assert f"{math.exp(d - 2.0 * se):.3f}x at 2 errors down" in line and "wins on one pair past 1.5x" in line
    # Readings stored before their errors were: nothing to judge.
    assert inrun_gpu.first_pair_line([{**s, "rate_log_se": None} for s in segments], {}) is None


@pytest.mark.slow
@pytest.mark.heavy
def test_the_tiny_mode_runs_every_phase_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOLOADER_BENCH_DIR", str(tmp_path / "data"))
    assert inrun_gpu.main(["--tiny", "--device", "cpu", "--workloads", "hugefloat", "--deadline-seconds", "60",
                           "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    w = data["workloads"]["hugefloat"]
    assert "error" not in w, w.get("traceback")
    assert w["phases_done"][:3] == ["first_batch", "round0", "epoch_in_run"]
    assert w["epochs"]["in_run"]["batches"] == w["epochs"]["pick_from_start"]["batches"] > 0
    assert "## hugefloat" in (tmp_path / "out" / "summary.md").read_text()
    # A short call: no rule epoch, the two others sized to fit.
    assert inrun_gpu.main(["--tiny", "--device", "cpu", "--workloads", "hugefloat", "--deadline-seconds", "60",
                           "--no-rule-epoch", "--epoch-pairs", "2", "--out", str(tmp_path / "short")]) == 0
    w = json.loads((tmp_path / "short" / "results.json").read_text())["workloads"]["hugefloat"]
    assert w["epochs"]["rule"] == {"skipped": "--no-rule-epoch"} and w["epochs"]["pick_from_start"]["batches"] > 0
    # A second pair, the pick's epoch first, and the two paired with an interval (or said cut).
    pairs = w["epochs"]["pairs"]
    assert pairs[0]["order"] == ["in_run", "pick_from_start"]
    assert (len(pairs) == 2 and pairs[1]["order"] == ["pick_from_start", "in_run"]
            and w["epochs"]["pairs_ratio"]["interval"]) or "pairs_cut" in w["epochs"], w["epochs"]


def test_the_meta_names_the_source_it_ran_whatever_git_says(tmp_path, monkeypatch):
    from scripts.bench.common import source_digest

    package = tmp_path / "autoloader"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    before = source_digest(str(tmp_path))
    assert before == source_digest(str(tmp_path)) and len(before) == 12
    (package / "a.py").write_text("x = 2\n")
    assert source_digest(str(tmp_path)) != before
    monkeypatch.setenv("AUTOLOADER_BENCH_COMMIT", "abc1234")
    m = inrun_gpu.meta(inrun_gpu.parse(["--out", str(tmp_path), "--device", "cpu"]), ["--out", "x"])
    assert m["commit"] == "abc1234" and m["source"] == source_digest()
    assert f"(autoloader/ source digest {m['source']})" in inrun_gpu.summary({"meta": m, "workloads": {}})
