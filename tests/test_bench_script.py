"""``python -m scripts.bench rebuild`` and ``run --deadline-seconds``: a bench run killed outright
keeps its records and the summary is rebuilt from them (the workload cut short marked partial,
left out of the mean); with a deadline, what cannot fit is not begun and the summary says so.
``merge``: one summary of runs made in parts."""

import json
import os
import subprocess
import sys

import pytest

from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from scripts.bench import harness, parts
from scripts.bench.records import Records
from scripts.bench.workloads import WORKLOADS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = [sys.executable, "-m", "scripts.bench"]

META = {"command": "python3 -m scripts.bench run --workloads small,startup", "date": "2026-11-29T13:46:35+00:00",
        "run_id": "r1", "gpu": None, "gpus": [], "cpus": 4, "cpu_model": "test", "ram_gib": 8.0, "device": "cpu",
        "python": "3.11", "torch": "x", "torchvision": "x", "optuna": "x", "scale": "1.0", "mode": "full",
        "workload_seconds": 240.0, "method": "test"}


def bench(*args, timeout=120):
    return subprocess.run(BENCH + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def trial_row(workload, phase, round_, workers, rate, t, **extra):
    config = LoaderConfig.make(64, workers, False, 2, True)
    result = TrialResult(config, OK, samples_per_s=rate, rel_interval=0.02, batches=50, window_s=3.0, seconds=4.0,
                         peak_host_bytes=2**30, wait_fraction=0.25)
    return {"run_id": "r1", "workload": workload, "phase": phase, "round": round_,
            "config": config.loader_kwargs(), "result": result.to_dict(), "t_start": t, "t_end": t + 4, **extra}


def write_records(folder, finished_summary):
    pick = LoaderConfig.make(64, 4, False, 2, True).loader_kwargs()
    rows = [{"run_id": "r1", "workload": None, "phase": "meta", "round": None, "meta": META},
            {"run_id": "r1", "workload": "small", "phase": "summary", "round": None, "summary": finished_summary},
            {"run_id": "r1", "workload": "startup", "phase": "tuner", "round": None, "config": pick,
             "t_start": 100.0, "t_end": 200.0, "wall_s": 100.0, "returncode": 0, "error": None,
             "tuner": {"config": pick, "samples_per_s": 1000.0, "dataset_key": "startup-n100-abc", "tune_seconds": 95.0,
                       "trials": [{"config": pick, "status": "ok", "samples_per_s": 1000.0}] * 2}}]
    t = 210.0
    for workers, rate in ((0, 200.0), (2, 600.0), (4, 1000.0)):
        rows.append(trial_row("startup", "grid", None, workers, rate, t, part="sweep"))
        t += 5
    # Final: round 1 whole, round 2 cut short after its first config (the kill).
    roles = {4: ["pick"], 2: ["grid#2"], 0: ["nw0"], 3: ["grid#1"]}  # grid#1: not the pick, to tell them apart
    for round_, workers, rate in ((1, 4, 990.0), (1, 2, 610.0), (1, 0, 190.0), (1, 3, 800.0), (2, 4, 1010.0)):
        rows.append(trial_row("startup", "final", round_, workers, rate, t, roles=roles[workers]))
        t += 5
    with open(os.path.join(folder, "records.jsonl"), "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.write('{"run_id": "r1", "workload": "startup", "phase": "fin')  # torn by the kill


@pytest.mark.slow
def test_rebuild_summarises_a_killed_run_from_its_records(tmp_path):
    source, out = tmp_path / "run", tmp_path / "rebuilt"
    source.mkdir()
    # A finished workload's summary record is taken as it is (one as the run writes it).
    rows = [trial_row("small", "final", 1, workers, rate, 10.0 * workers) for workers, rate in ((4, 990.0), (2, 700.0))]
    finished = json.loads(json.dumps(parts.workload_from_records(WORKLOADS["small"], rows, 4, "cpu").summary(),
                                     default=str))
    finished["tuned_over_oracle"] = 0.99  # marks it: the rebuild must not recompute it
    write_records(source, finished)
    proc = bench("rebuild", source, "--out", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "results.json").read_text())
    small, startup = data["workloads"]
    assert small == finished
    assert startup["interrupted"].startswith(
        "killed after its last record (final round 2); no ceiling; final round 2 has 1 of 4 configs")
    # Its figures come from the final it recorded: the pick (4 workers) read 990 and 1,010.
    assert startup["pick_short"] == "w4 pf2 pin0 pw1"
    assert startup["pick_rate"] == 1000.0 and startup["oracle_short"] == "w4 pf2 pin0 pw1"
    assert startup["burst_error"] == 0.0
    # The config the grid ranked first (3 workers here) scored on the final: 1,000 over 800.
    assert startup["tuned_over_grid_best"] == 1.25
    assert [g["samples_per_s"] for g in startup["grid"]] == [200.0, 600.0, 1000.0]
    summary = (out / "summary.md").read_text()
    assert "# autoloader benchmark (interrupted)" in summary
    assert "| startup (partial) |" in summary
    # The final's rows say how long the consumer waited for data (and n/a for an unmeasured GPU).
    assert "| w4 pf2 pin0 pw1 | pick | 1,000 | 2.0% | 990, 1,010 | 25% | n/a | 1.00 |" in summary
    assert "over 1 complete workload(s): mean 0.990, min 0.990 (1 partial, left out)" in summary


@pytest.mark.slow
def test_rebuild_refuses_a_folder_without_a_bench_run(tmp_path):
    (tmp_path / "records.jsonl").write_text('{"phase": "grid", "workload": "small"}\n')
    proc = bench("rebuild", tmp_path, "--out", tmp_path / "o")
    assert proc.returncode != 0
    assert "no meta record" in proc.stderr and "Fix:" in proc.stderr


@pytest.mark.slow
def test_a_workload_the_deadline_cannot_hold_is_not_begun(tmp_path):
    # --quick needs about 52 s a workload (its 20 s tuner budget and 30 s more); 5 s are left.
    proc = bench("run", "--quick", "--workloads", "small", "--deadline-seconds", "5", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "Not run: small (not begun:" in summary and "a workload needs about 52 s" in summary
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in records] == ["meta", "skipped"]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeRunner:
    """Every trial 'takes' 2 s of the fake clock and reads 1,000/s plus its worker count."""

    def __init__(self, clock):
        self.clock = clock

    def measure(self, config, settings):
        self.clock.now += 2.0
        return TrialResult(config, OK, samples_per_s=1000.0 + config.num_workers, batches=10, window_s=0.8,
                           seconds=2.0)


def test_the_deadline_skips_variants_and_cuts_final_rounds_that_cannot_fit(tmp_path, monkeypatch):
    from autoloader.search.policy import BurstSettings

    clock = FakeClock()
    monkeypatch.setattr(harness.time, "monotonic", clock)
    settings = BurstSettings(min_window_s=0.5, max_window_s=0.8)
    # The sweep (3 x 2 s) and one final round of 4 configs (8 s) and the ceiling (1 s) fit in 20 s;
    # a second round does not.
    mode = harness.Mode(sweep=(0, 1, 2), grid=settings, final=settings, rounds=3, ceiling={}, tuner_budget=None,
                        workload_seconds=1000.0, ceiling_estimate_s=1.0, deadline=clock.now + 20.0)
    work = harness.Workload(WORKLOADS["small"], mode, Records(str(tmp_path / "records.jsonl"), "r1"),
                            str(tmp_path), "cpu", 4)
    work.runner = FakeRunner(clock)
    work.run_grid()
    work.run_final()
    assert [t.config.num_workers for t in work.grid] == [0, 1, 2]
    assert work.skipped, "the variants did not fit and were skipped"
    assert all(len(results) == 1 for results in work.final.values())
    assert work.interrupted.startswith("final cut to 1 of 3 rounds: the next needed about 9 s, 6 s were left")
    summary = work.summary()
    assert summary["interrupted"] and summary["tuned_over_oracle"] is None  # no pick: no tuner ran


@pytest.mark.slow
def test_rebuild_lists_workloads_skipped_or_killed_before_any_record(tmp_path):
    meta = dict(META, workloads=["small", "startup", "jpeg"])
    rows = [{"run_id": "r1", "workload": None, "phase": "meta", "round": None, "meta": meta},
            {"run_id": "r1", "workload": "startup", "phase": "skipped", "round": None, "reason": "not begun: 9 s"}]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = bench("rebuild", tmp_path, "--out", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "o" / "summary.md").read_text()
    assert "# autoloader benchmark (interrupted)" in summary
    assert "Not run: startup (not begun: 9 s); small (no record: killed before its tuner ended, or never begun); " \
           "jpeg (no record" in summary


def test_merge_lists_only_workloads_no_part_ran(tmp_path):
    # run-1d66441: startup had no time left in part 2 and ran in part 3; small had none in
    # parts 1 and 4. The merged summary lists small once, and nothing was interrupted.
    def part(name, workload, budget, not_run):
        rows = [trial_row(workload, "final", 1, w, r, 10.0 * w) for w, r in ((4, 990.0), (2, 700.0))]
        summary = json.loads(json.dumps(parts.workload_from_records(WORKLOADS[workload], rows, 4, "cpu").summary(),
                                        default=str))
        meta = dict(META, workload_seconds=budget, not_run=not_run)
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({"meta": meta, "workloads": [summary]}))
        return str(tmp_path / name)

    folders = [part("p1", "jpeg", 220.0, ["small (not begun: 231 s)"]),
               part("p2", "large", 240.0, ["startup (not begun: 251 s)"]),
               part("p3", "startup", 230.0, []),
               part("p4", "gpubound", 230.0, ["small (not begun: 230 s)"])]
    parts.merge(folders, str(tmp_path / "merged"))
    summary = (tmp_path / "merged" / "summary.md").read_text()
    assert summary.startswith("# autoloader benchmark (incomplete)")
    assert "Not run: small (not begun: 231 s)." in summary
    assert "workload budget 220-240 s (by part)" in summary


def test_merge_keeps_a_repeated_workloads_last_measurement_and_lists_the_earlier(tmp_path):
    # run-20261129: gpubound ran at one commit, then again after a change to the choice; the
    # table holds the last, the earlier stays listed, and each command names its part's commit.
    def part(name, workload, fast_workers, commit=None, interrupted=None):
        rows = [trial_row(workload, "final", 1, w, r, 10.0 * w) for w, r in ((fast_workers, 990.0), (2, 700.0))]
        summary = json.loads(json.dumps(parts.workload_from_records(WORKLOADS[workload], rows, 4, "cpu").summary(),
                                        default=str))
        summary["interrupted"] = interrupted or summary["interrupted"]
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({"meta": dict(META, not_run=[]), "workloads": [summary]}))
        if commit:
            (tmp_path / name / "commit.txt").write_text(commit + "\n")
        return str(tmp_path / name)

    folders = [part("p1", "gpubound", 4), part("p2", "jpeg", 4), part("p3", "gpubound", 3, commit="e1fa24a")]
    parts.merge(folders, str(tmp_path / "merged"))
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert [s["workload"] for s in merged["workloads"]] == ["gpubound", "jpeg"]
    assert merged["workloads"][0]["oracle_short"].startswith("w3 ")
    assert [(r["workload"], r["part"]) for r in merged["meta"]["repeats"]] == [("gpubound", "p1")]
    summary = (tmp_path / "merged" / "summary.md").read_text()
    assert "Earlier measurements of the same workloads" in summary
    assert "| gpubound | p1 | " in summary
    assert "   # p3, at e1fa24a" in summary
    assert summary.count("\n| gpubound | ") == 4     # a row in each of the three tables, one among the repeats
    # A later part cut short does not displace a complete earlier one.
    folders.append(part("p4", "gpubound", 1, interrupted="killed at the deadline"))
    parts.merge(folders, str(tmp_path / "merged2"))
    merged = json.loads((tmp_path / "merged2" / "results.json").read_text())
    assert merged["workloads"][0]["oracle_short"].startswith("w3 ")
    assert [r["part"] for r in merged["meta"]["repeats"]] == ["p1", "p4"]


def fake_tuner(clock, picks, seconds=60.0):
    """Stands in for `autoloader tune`: each call takes ``seconds`` of the fake clock and picks the
    next of ``picks`` (worker counts)."""
    from scripts.bench.tuner_run import TunerOutcome

    calls = iter(picks)

    def run(dataset_spec, step_spec, batch_size, budget, budget_in_effect, label):
        clock.now += seconds
        pick = LoaderConfig.make(batch_size, next(calls), False, 2, True).loader_kwargs()
        data = {"config": pick, "samples_per_s": 1000.0, "dataset_key": "small-n100-abc", "trials": [],
                "tune_seconds": seconds - 2}
        return TunerOutcome(["python", "-m", "autoloader.cli", "tune"], data, seconds, 0, None, "", 0.0, seconds)

    return run


def test_the_deadline_holds_back_stability_tunes_that_cannot_fit(tmp_path, monkeypatch):
    from autoloader.search.policy import BurstSettings

    clock = FakeClock()
    monkeypatch.setattr(harness.time, "monotonic", clock)
    settings = BurstSettings(min_window_s=0.5, max_window_s=0.8)
    # A 60 s budget: after the first tune (60 s) 200 s are left, enough for one more tune and the
    # floor (1.1 x 60 + 90 = 156 s), not for a third after it.
    mode = harness.Mode(sweep=(0, 1), grid=settings, final=settings, rounds=2, ceiling={}, tuner_budget=None,
                        workload_seconds=1000.0, ceiling_estimate_s=1.0, deadline=clock.now + 260.0,
                        budget_s=60.0, floor_extra_s=90.0)
    work = harness.Workload(WORKLOADS["small"], mode, Records(str(tmp_path / "records.jsonl"), "r1"),
                            str(tmp_path), "cpu", 4, tunes=3)
    monkeypatch.setattr(work._tuner, "run", fake_tuner(clock, [2, 1, 3]))
    work.run_tuners()
    assert [r["index"] for r in work.stability_runs] == [1, 2]
    assert work.stability_note.startswith("tunes 3-3 not begun: 140 s were left of --deadline-seconds")
    work.runner = FakeRunner(clock)
    work.run_grid()
    work.run_final()
    # The second pick (1 worker) joins the final beside the first (2 workers), in every round.
    assert work.final_roles[LoaderConfig.make(64, 2, False, 2, True)] == ["pick"]
    assert "pick#2" in work.final_roles[LoaderConfig.make(64, 1, False, 2, True)]
    assert all(len(results) == 2 for results in work.final.values())
    st = work.summary()["stability"]
    assert st["within_tie"] is None and "2 of 3 tunes gave a pick" in st["note"]
    assert "tunes 3-3 not begun" in st["note"]
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in records[:2]] == ["tuner", "stability_tuner"]


@pytest.mark.slow
@pytest.mark.heavy
def test_quick_smoke_run_of_the_whole_harness(tmp_path):
    """`run --quick` on the CPU at a tiny scale: the real tuner (10 s budget), the grid, a final of
    two rounds and the ceiling, on pyobjects; records as measured, the summary with its plan."""
    proc = bench("run", "--quick", "--workloads", "pyobjects", "--scale", "0.01", "--tuner-budget", "10",
                 "--sweep", "0,2", "--rounds", "2", "--workload-seconds", "30", "--out", tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    phases = [json.loads(line)["phase"] for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert phases[:2] == ["meta", "tuner"] and phases[-2:] == ["ceiling", "summary"]
    assert "grid" in phases and phases.count("final") >= 2 * 3      # pick, heuristic, nw0 (at least), 2 rounds
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# autoloader benchmark\n")           # done
    assert "- plan: a workload about " in summary
    assert "| pyobjects | " in summary and "tuned/heuristic over 1 complete workload(s): geometric mean" in summary
    data = json.loads((tmp_path / "results.json").read_text())
    (s,) = data["workloads"]
    assert s["pick"] and s["tuned_over_oracle"] is not None and s["estimate_s"] > 0
    assert s["profile_seconds"] is None or s["profile_seconds"] >= 0   # the tuner may not write it yet
    assert s["ceiling_detail"]["cap"] in ("consumer", "cores")          # no main-process figure on the CPU
