"""scripts/bench: a workload's figures and the summary's columns, from synthetic records: the
tuner's optional keys present and absent, the cheapest config within 2% of the best, the
geometric mean of tuned/heuristic, and the stability verdict."""

import json
import math

import pytest

from autoloader.search.model import Prediction
from autoloader.search.profile import Profile
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from scripts.bench import figures, parts, plan, report
from scripts.bench.common import geomean
from scripts.bench.workloads import WORKLOADS

CPUS = 4          # so the heuristic is 3 workers
GIB = 2**30


def config(workers, prefetch=2, persistent=True, pin=False):
    return LoaderConfig.make(64, workers, pin, prefetch, persistent)


def final_row(workload, round_, cfg, rate, peak_gib, roles, wait=0.3):
    result = TrialResult(cfg, OK, samples_per_s=rate, rel_interval=0.02, batches=50, window_s=2.0, seconds=3.0,
                         peak_host_bytes=int(peak_gib * GIB), wait_fraction=wait)
    return {"run_id": "r1", "workload": workload, "phase": "final", "round": round_, "config": cfg.loader_kwargs(),
            "result": result.to_dict(), "t_start": 100.0 + round_, "t_end": 101.0 + round_, "roles": roles}


def tuner_row(pick, estimate=1000.0, phase="tuner", index=1, **extra):
    trials = [TrialResult(pick, OK, samples_per_s=estimate).to_dict()] * 3
    data = {"config": pick.loader_kwargs(), "samples_per_s": estimate, "dataset_key": "small-n100-abc", "trials": trials,
            "tune_seconds": 55.0, **extra}
    return {"run_id": "r1", "workload": "small", "phase": phase, "index": index, "config": pick.loader_kwargs(),
            "t_start": 40.0, "t_end": 100.0, "wall_s": 60.0, "returncode": 0, "error": None, "tuner": data}


# The final of one workload, five rounds: the pick (8 workers) reads 1,000/s at 4 GiB; 4 workers
# read 990/s (within 2%) at 2 GiB; 3 workers (the heuristic) 800/s; none 200/s.
FINAL = [(config(8), 1000.0, 4.0, ["pick"]), (config(4), 990.0, 2.0, ["grid#1"]),
         (config(3), 800.0, 1.5, ["heuristic"]), (config(0), 200.0, 0.5, ["nw0"])]


def rows_for(tuner_extra=None, ceiling=None):
    rows = [tuner_row(config(8), **(tuner_extra or {}))]
    for round_ in range(1, 6):
        rows += [final_row("small", round_, c, rate, peak, roles) for c, rate, peak, roles in FINAL]
    if ceiling:
        rows.append({"run_id": "r1", "workload": "small", "phase": "ceiling", "ceiling": ceiling, "facts": None,
                     "error": None, "t_start": 200.0, "t_end": 201.0})
    return rows


def summarise(rows, **kwargs):
    summary = parts.workload_from_records(WORKLOADS["small"], rows, CPUS, "cpu", **kwargs).summary()
    return json.loads(json.dumps(summary, default=str))  # as results.json holds it


CEILING = {"ceiling_samples_per_s": 2500.0, "bound": "cores", "consumer_samples_per_s": 9000.0,
           "one_worker_samples_per_s": 625.0, "cores": 4, "cores_samples_per_s": 2500.0,
           "main_samples_per_s": 1250.0, "main_pin_s": 0.04, "main_copy_s": 0.02, "cap": "main"}


def test_the_new_columns_from_records_with_every_optional_key():
    p = Profile(batch_size=16, sample_s=(0.001,), collate_s=0.0, sample_bytes=64, recv_s=0.0, pin_s=None,
                h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.0, startup_s=0.1, worker_pss=None, cpus=CPUS,
                epoch_batches=100, seconds=11.0)
    predicted = Prediction(LoaderConfig.make(16, 8, False), 1100.0, 1100.0, 0.0, "workers", 0.0)
    s = summarise(rows_for({"profile": p.to_dict(), "predicted": predicted.to_dict()}, CEILING))
    assert s["tuned_over_oracle"] == 1.0 and s["vs_heuristic"] == pytest.approx(1.25)
    assert s["profile_seconds"] == 11.0 and s["profile_share"] == pytest.approx(0.2)   # of the 55 s inside
    assert s["predicted_over_measured"] == pytest.approx(1.1)
    assert s["burst_error"] == pytest.approx(0.0)
    assert s["pick_workers"] == 8 and s["peak_host_bytes"] == 4 * GIB
    assert s["cheapest_within_tie"]["short"] == "w4 pf2 pin0 pw1" and not s["cheapest_within_tie"]["is_pick"]
    assert s["cap"] == "main" and s["tuned_over_ceiling"] == pytest.approx(0.4)
    text = report.table([s])
    assert "| small | 1.000 | 1.00-1.00 | 1.010 | 1.25x | 5.00x | 2,500 | 0.40 | main process (1,250/s) | " in text
    assert "| small | 8, 4.00 | w4 pf2 pin0 pw1 (4, 2.00) | 60 | 11 (20%) | 1,100 (+10.0%) | +0.0% | - / 161 |" in text
    assert "tuned/heuristic over 1 complete workload(s): geometric mean 1.250" in text
    detail = report.details(s)
    assert "pinning a batch 40.0 ms, copying it pinned to the device 20.0 ms: at most 1,250/s" in detail


def test_absent_optional_keys_print_a_dash_and_an_old_summary_still_renders():
    # A tuner of today writes neither profile_seconds nor predicted_samples_per_s; an old ceiling
    # record has no main-process figures (its cap is its bound).
    old_ceiling = {k: v for k, v in CEILING.items() if not k.startswith("main") and k != "cap"}
    s = summarise(rows_for(ceiling=old_ceiling))
    assert s["profile_seconds"] is None and s["profile_share"] is None and s["predicted_rate"] is None
    assert s["cap"] == "cores"
    text = report.table([s])
    assert "| small | 8, 4.00 | w4 pf2 pin0 pw1 (4, 2.00) | 60 | - | - | +0.0% | - / 161 |" in text
    assert "| 0.40 | cores | w8 pf2 pin0 pw1 |" in text
    # A summary from before these columns (run-20261129's results.json) lacks their keys entirely.
    for key in ("profile_seconds", "profile_share", "predicted_rate", "predicted_over_measured", "cap",
                "pick_workers", "cheapest_within_tie", "stability", "estimate_s", "estimate_after_grid_s",
                "stability_only"):
        s.pop(key)
    text = report.table([s])
    assert "| small | 8, 4.00 | n/a | 60 | - | - | +0.0% | - / 161 |" in text
    assert report.one_line(s).startswith("RESULT small: tuned/best 1.000")
    assert report.details(s).startswith("### small")


def test_cheapest_within_two_percent_takes_fewest_workers_then_kept_workers_then_memory():
    medians = {config(8): 1000.0, config(4): 981.0, config(4, persistent=False): 990.0, config(2): 979.0,
               config(4, prefetch=8): 985.0}
    peaks = {config(8): 4 * GIB, config(4): 3 * GIB, config(4, persistent=False): 1 * GIB, config(2): GIB,
             config(4, prefetch=8): 2 * GIB}
    # 2 workers read 2.1% behind: out. Of the 4-worker configs, kept workers come first, then the
    # least memory: prefetch 8 at 2 GiB over prefetch 2 at 3 GiB.
    assert figures.cheapest_within(medians, peaks) == config(4, prefetch=8)
    # Exactly 2% behind is within.
    medians[config(2)] = 980.0
    assert figures.cheapest_within(medians, peaks) == config(2)
    # Without peaks the fewest workers still decide; none measured, no answer.
    assert figures.cheapest_within({config(8): 10.0, config(16): 10.1}, {}) == config(8)
    assert figures.cheapest_within({}, {}) is None


def test_geometric_mean_treats_a_gain_and_the_same_loss_alike():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([1.1, 1.21, None]) == pytest.approx(math.sqrt(1.1 * 1.21))
    assert geomean([]) is None and geomean([None]) is None
    small, other = summarise(rows_for()), summarise(rows_for())
    other["workload"], other["vs_heuristic"] = "other", 0.8
    partial = dict(other, workload="cut", vs_heuristic=10.0, interrupted="killed")
    text = report.table([small, other, partial])
    # Partial workloads are left out, as from the tuned/best mean.
    assert f"tuned/heuristic over 2 complete workload(s): geometric mean {math.sqrt(1.25 * 0.8):.3f}, " \
           "min 0.800, max 1.250" in text


def test_stability_verdict():
    a, b, c = config(8), config(4), config(16)
    within = figures.stability_verdict([a, b, c], {a: 1000.0, b: 985.0, c: 980.0})
    assert within["within_tie"] is True and within["spread"] == pytest.approx(0.02) and not within["same_config"]
    apart = figures.stability_verdict([a, b, c], {a: 1000.0, b: 985.0, c: 979.0})
    assert apart["within_tie"] is False
    same = figures.stability_verdict([a, a, a], {a: 1000.0})
    assert same["within_tie"] is True and same["same_config"] and same["spread"] == 0.0
    failed = figures.stability_verdict([a, None, c], {a: 1000.0, c: 1000.0})
    assert failed["within_tie"] is None and failed["note"] == "2 of 3 tunes gave a pick"
    cut = figures.stability_verdict([a, b], {a: 1000.0, b: 1000.0})
    assert cut["within_tie"] is None and cut["note"] == "2 of 3 tunes gave a pick"
    unmeasured = figures.stability_verdict([a, b, c], {a: 1000.0, b: 1000.0})
    assert unmeasured["within_tie"] is None and unmeasured["note"] == "a pick has no median in the round"
    assert report.stability_text(apart).startswith("NOT within 2% of each other (spread 2.1%")
    assert report.stability_text(failed) == "no verdict (2 of 3 tunes gave a pick)"


def test_a_stability_check_from_records_reports_its_three_picks():
    # small is measured in full and checked: its second and third tunes picked 4 and 8 workers,
    # whose rounds join the final (roles pick#2, pick#3).
    rows = rows_for()
    rows.insert(1, tuner_row(config(4), phase="stability_tuner", index=2))
    rows.insert(2, tuner_row(config(8), phase="stability_tuner", index=3))
    for row in rows:
        if row["phase"] == "final" and row["config"]["num_workers"] == 4:
            row["roles"] = ["grid#1", "pick#2"]
        elif row["phase"] == "final" and row["config"]["num_workers"] == 8:
            row["roles"] = ["pick", "pick#3"]
    s = summarise(rows, tunes=3)
    st = s["stability"]
    assert st["picks"] == ["w8 pf2 pin0 pw1", "w4 pf2 pin0 pw1", "w8 pf2 pin0 pw1"]
    assert st["pick_rates"] == [1000.0, 990.0, 1000.0] and st["within_tie"] is True
    assert st["tune_seconds"] == [60.0, 60.0, 60.0]
    section = report.stability_table([s])
    assert "| small | w8 pf2 pin0 pw1; w4 pf2 pin0 pw1; w8 pf2 pin0 pw1 | 60, 60, 60 | 1,000, 990, 1,000 | " \
           "within 2% of each other (spread 1.0%) |" in section
    # Checked alone (not in --workloads): no grid, heuristic or ceiling; only in the stability table.
    alone = summarise([r for r in rows if "pick" in str(r.get("roles")) or r["phase"] != "final"],
                      tunes=3, grid=False)
    assert alone["stability_only"] and alone["stability"]["within_tie"] is True
    assert "| small |" not in report.table([alone]) and "| small |" in report.stability_table([alone])


def test_the_lean_grid_and_the_plan():
    assert plan.lean_sweep(16) == (0, 4, 8, 15, 16, 24)
    assert plan.lean_sweep(2) == (0, 1, 2, 3)
    from scripts.bench.harness import Mode

    grid, final = plan.SETTINGS["lean"]
    mode = Mode(plan.lean_sweep(16), grid, final, 5, plan.CEILING["lean"], None, 300.0, 8.0, name="lean",
                variants="lean", top_from_grid=2, budget_s=60.0, floor_extra_s=90.0)
    one, checked = plan.estimate(mode, 16), plan.estimate(mode, 16, tunes=3)
    assert one.tuner == pytest.approx(68.0) and checked.tuner == pytest.approx(3 * 68.0)
    assert checked.final > one.final              # two more picks in the round
    assert 150 < one.total < 300
    assert plan.estimate(mode, 16, tunes=3, grid=False).grid == 0.0
    assert mode.floor_s(3) == pytest.approx(3 * 66.0 + 90.0)


def test_the_ceiling_childs_main_process_timing_and_cap(monkeypatch):
    """The main process's pin and copy (CUDA only in a run) timed here on CPU tensors, with
    pinning stood in for (a CPU-only torch cannot pin): two timings, the slower sets the rate,
    and the cap names the lowest bound. A failure there leaves the ceiling whole."""
    import torch

    from scripts.bench import ceiling

    child = ceiling._Ceiling.__new__(ceiling._Ceiling)
    child.torch, child.cuda, child.device = torch, True, torch.device("cpu")
    child.host_batches = [(torch.zeros(8, 3, 4, 4), torch.zeros(8))] * 2
    from autoloader.batches import samples_in

    child.batch_size_of = samples_in
    child._sync = lambda: None                     # no device to synchronise
    monkeypatch.setattr(ceiling, "_pinned", lambda obj, torch: ceiling._map_tensors(obj, lambda t: t.clone(), torch))
    main = child._main_copy(0.05)
    assert main["main_pin_s"] > 0 and main["main_copy_s"] > 0
    assert main["main_samples_per_s"] == pytest.approx(8 / max(main["main_pin_s"], main["main_copy_s"]))

    def broken(obj, torch):
        raise RuntimeError("no pinned memory")

    monkeypatch.setattr(ceiling, "_pinned", broken)
    failed = child._main_copy(0.05)
    assert failed["main_samples_per_s"] is None and failed["main_error"].startswith("RuntimeError: no pinned")
    child.cuda = False
    assert child._main_copy(0.05)["main_samples_per_s"] is None
