"""Where users train (issue 51): a tune always answers, or says why not, and an unjudged pick is
never reused as if tuned.

The pure rules first (a provisional result's reason, the config it hands out, its stored field,
the budget a slow step needs), then the mechanisms: the profile beats the watchdog each step and
keeps to its share of the budget; nothing measured for the clock's or the machine's reason is
Inconclusive (exit 5) in tune and retune; and, end to end, a slow step and a result tuned beside
spinners. ``results/load/busy_tune.py`` is the bench of the busy machine's five tunes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from burner import Burner, background
from conftest import REPO_ROOT

from autoloader.errors import Inconclusive, NoFeasibleConfig
from autoloader.events import Profiled, ResultNotReused, ResultReused
from autoloader.events.lines import line
from autoloader.search.budget import JUDGED_TUNE_STEPS, budget_words, needed_budget, profile_limit
from autoloader.search.choice import Finalist, handed_out, provisional_reason
from autoloader.search.config import TunedConfig
from autoloader.search.results import BUDGET_ENDED, HANG, OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.store.result import TuneResult

WHERE = os.path.join(REPO_ROOT, "tests", "where_workloads.py")
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "results", "format2-since-os-error-20261202.json")

W0 = LoaderConfig.make(16, 0, False)
RULE = LoaderConfig.make(16, 1, False, prefetch_factor=2, persistent_workers=True)
W4 = LoaderConfig.make(16, 4, False, prefetch_factor=16, persistent_workers=True)


def burst(config, rate, rel=0.05):
    return TrialResult(config, OK, samples_per_s=rate, rel_interval=rel, batches=20, window_s=2.0, seconds=4.0)


# -- the pure rules --------------------------------------------------------------------------------

def test_a_pick_is_provisional_when_busy_or_never_in_a_final_and_says_why():
    final = (Finalist(W4, (100.0, 101.0, 99.0)), Finalist(RULE, (90.0, 91.0, 89.0)))
    assert provisional_reason(W4, final, busy=False, others_cpus=0.1, cpus=2) is None
    busy = provisional_reason(W4, final, busy=True, others_cpus=1.8, cpus=2)
    assert busy == "measured on a busy machine: other processes used 1.8 of 2 CPUs"
    alone = provisional_reason(W4, (), busy=False, others_cpus=None, cpus=2, hint="give --budget 250 or more")
    assert alone == "no final: its rate is one burst's; give --budget 250 or more"


def test_a_provisional_result_hands_out_the_rule_unless_the_pick_is_ahead_past_the_noise():
    wide = [burst(W4, 150.0, rel=0.54), burst(RULE, 110.0, rel=0.03)]
    assert handed_out(W4, RULE, (), wide) == RULE, "one wide burst ahead is not ahead past the noise"
    tight = [burst(W4, 150.0, rel=0.03), burst(RULE, 110.0, rel=0.03)]
    assert handed_out(W4, RULE, (), tight) == W4
    assert handed_out(W4, RULE, (), [burst(W4, 150.0)]) == W4, "a rule never measured: the pick"
    ahead = (Finalist(W4, (120.0, 121.0, 119.0)), Finalist(RULE, (100.0, 100.5, 99.5)))
    assert handed_out(W4, RULE, ahead, wide) == W4
    level = (Finalist(W4, (100.0, 111.0, 95.0)), Finalist(RULE, (101.0, 100.0, 100.0)))
    assert handed_out(W4, RULE, level, tight) == RULE, "the rounds judge it, not the bursts"
    assert handed_out(W0, RULE, (), [burst(W0, 90.0, rel=0.5), burst(RULE, 110.0)]) == W0, \
        "a pick cheaper than the rule is kept, as the tie rule keeps the cheaper"


def test_the_provisional_field_is_stored_read_back_and_kept_in_a_runs_mark():
    with open(FIXTURE) as fh:
        data = json.load(fh)
    old = TuneResult.from_dict(data)
    assert old.tuned.provisional is None, "a result of before the field reads as judged"
    data["provisional"] = "measured on a busy machine: other processes used 1.9 of 2 CPUs"
    again = TuneResult.from_dict(json.loads(json.dumps(TuneResult.from_dict(data).to_dict())))
    assert again.tuned.provisional == data["provisional"]
    assert "provisional" not in TuneResult.from_dict(json.loads(json.dumps(old.to_dict()))).to_dict(), \
        "a judged result is written as before"
    from autoloader import InvalidRecord

    with pytest.raises(InvalidRecord):
        TuneResult.from_dict({**data, "provisional": 3})


def test_the_lines_say_a_provisional_result_in_one_line():
    from autoloader.events import SettingsApplied

    tuned = TunedConfig(W0, 10.0, None, None, None, {}, "key", "cpu", provisional="no final: its rate is one burst's")
    reused = line(ResultReused("/r.json", tuned))
    said = [text for text in reused.splitlines() if "provisional" in text]
    assert len(said) == 1 and "no final: its rate is one burst's" in said[0] and "quieter machine" in said[0]
    assert "provisional" in line(SettingsApplied(tuned, reused=True, path="/r.json"))
    judged = TunedConfig(W0, 10.0, None, None, None, {}, "key", "cpu")
    assert "provisional" not in line(ResultReused("/r.json", judged))


def test_the_profile_has_a_third_of_the_budget_and_a_slow_step_sizes_the_budget():
    assert profile_limit(60, 55) == pytest.approx(20)
    assert profile_limit(60, 20) == pytest.approx(10), "half of what is left at most"
    assert needed_budget(9.0, 5.0) == 10 * -(-(5 + JUDGED_TUNE_STEPS * 9) // 10)
    assert needed_budget(9.0, 5.0) % 10 == 0 and needed_budget(9.0, 5.0) >= 200
    assert budget_words(9.0, 0.01, 5.0) == f"the step takes about 9 s a batch: give --budget {needed_budget(9.01, 5.0)} or more"
    assert budget_words(0.0, 3.0, 40.0).startswith("a batch takes about 3 s without workers")
    assert budget_words(0.2, 0.3, 5.0) is None


def test_inconclusive_is_a_no_feasible_config_that_exits_5():
    assert issubclass(Inconclusive, NoFeasibleConfig) and Inconclusive.exit_code == 5


# -- the mechanisms ----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_profile_beats_each_step_and_stops_at_its_share():
    from autoloader.probe.profiler import run_profile
    from autoloader.probe.workers import pss
    from where_workloads import Small

    beats = []
    t0 = time.perf_counter()
    profile = run_profile(Small(), {}, 8, lambda batch: time.sleep(0.6), "cpu", pss,
                          beat=lambda: beats.append(time.perf_counter()), limit_s=1.5, step_stall_s=60)
    took = time.perf_counter() - t0
    assert profile.cut_s == 1.5, profile.stage_s
    assert "cut at its share of the budget (2 s)" in line(Profiled(profile))
    assert profile.step_s == pytest.approx(0.6, rel=0.5)
    gaps = [b - a for a, b in zip([t0] + beats, beats)]
    assert max(gaps) < 1.0, f"a beat at least every half second or so, the step's calls included: gaps {gaps}"
    assert profile.main_default_s is None, "the thread pairs were skipped past the share"
    assert took < 1.5 + 0.6 + 3.0, took
    whole = run_profile(Small(), {}, 8, lambda batch: None, "cpu", pss, limit_s=60)
    assert whole.cut_s is None


@pytest.mark.slow
def test_a_step_slower_than_the_old_silence_is_profiled_not_killed(tmp_path):
    """A step of 1.5 s and a watchdog of 5 s: the profile's eight calls or more ran 12 s without a
    beat and were killed as a hang; each now beats, so the profile measures the step."""
    from autoloader import tune
    from where_workloads import STEP_ENV

    os.environ[STEP_ENV] = "1.5"
    try:
        events = []
        result = tune(f"{WHERE}:small", step=f"{WHERE}:sleeping_step", batch_size=8, budget=60, trial_timeout=5,
                      device="cpu", out=str(tmp_path), progress=events.append)
    finally:
        del os.environ[STEP_ENV]
    profiled = [e for e in events if isinstance(e, Profiled)]
    assert profiled and profiled[0].error is None, profiled[0].error
    assert profiled[0].profile.step_s == pytest.approx(1.5, rel=0.3)
    assert any(t.status == OK for t in result.trials)
    assert not any(t.status == HANG and t.cause != BUDGET_ENDED for t in result.trials), result.trials


def test_nothing_measured_because_the_budget_ended_is_inconclusive_with_the_load():
    from autoloader.tuning.run import Run

    run = Run.__new__(Run)
    run.measured_profile = None
    run._run_meter = None
    run.setup_s = 3.0
    run.load_cpus = 2.0

    class Clock:
        budget = 60.0

        def elapsed(self):
            return 66.0

        def bound_left(self):
            return -1.0

    class Thresholds:
        busy = 0.5

    class Options:
        thresholds = Thresholds()

    run.clock, run.options = Clock(), Options()
    cut = TrialResult(W0, HANG, cause=BUDGET_ENDED, error="still running", others_cpus=1.9)
    with pytest.raises(Inconclusive) as caught:
        run._nothing_measured([cut])
    text = str(caught.value)
    assert "the budget ended while bs16-w0-pin0 still ran" in text and "1.9 of 2 CPUs" in text, text
    with pytest.raises(Inconclusive, match="took the whole budget"):
        run._nothing_measured([])
    raised = TrialResult(W0, "failed", cause="dataset_error", error="boom", others_cpus=0.1)
    with pytest.raises(NoFeasibleConfig) as caught:
        run._nothing_measured([raised])
    assert not isinstance(caught.value, Inconclusive)


@pytest.mark.slow
def test_a_retune_that_measured_nothing_for_the_clock_is_inconclusive_not_failed(tmp_path, monkeypatch):
    from autoloader.fleet import registry as registry_mod
    from autoloader.fleet.retune import INCONCLUSIVE_EXIT, retune
    from autoloader.tuning import run as run_mod

    def cut_short(self):
        raise Inconclusive("nothing measured: the budget ended while bs8-w0-pin0 still ran; other processes "
                           "used up to 2.0 of 2 CPUs meanwhile (a busy machine)")

    monkeypatch.setattr(run_mod.Run, "run", cut_short)
    path = tmp_path / "fleet.toml"
    path.write_text(f'[defaults]\nbudget = 10\ndevice = "cpu"\n\n[[datasets]]\nname = "small"\n'
                    f'dataset = "{WHERE}:small"\nbatch_size = 8\n')
    report = retune(registry_mod.load(str(path)), out=str(tmp_path / "out"))
    assert report.exit_code == INCONCLUSIVE_EXIT, report.to_dict()
    assert report.outcomes[0].status == "inconclusive" and "2.0 of 2 CPUs" in report.outcomes[0].error


# -- end to end ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.heavy
def test_a_step_of_10_s_is_profiled_and_measured_at_budget_300(tmp_path):
    done = subprocess.run([AUTOLOADER, "tune", "--dataset", f"{WHERE}:small", "--step", f"{WHERE}:sleeping_step",
                           "--batch-size", "8", "--budget", "300", "--device", "cpu", "--out", str(tmp_path),
                           "--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=420)
    print(done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["profile"]["step_s"] == pytest.approx(10.0, rel=0.2), data["profile"]
    assert any(t["status"] == OK for t in data["trials"]), data["trials"]
    assert not any(t["status"] == HANG and t["cause"] == "hang" for t in data["trials"]), data["trials"]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_step_of_10_s_at_the_default_budget_is_told_the_budget_it_needs(tmp_path):
    done = subprocess.run([AUTOLOADER, "tune", "--dataset", f"{WHERE}:small", "--step", f"{WHERE}:sleeping_step",
                           "--batch-size", "8", "--device", "cpu", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=200)
    said = done.stdout + done.stderr
    print(said[-3000:])
    assert done.returncode in (0, 5), said[-3000:]
    assert "the step takes about 10 s a batch: give --budget " in said, said[-3000:]
    if done.returncode == 0:
        assert "provisional" in done.stdout


@pytest.mark.slow
@pytest.mark.heavy
def test_a_result_tuned_beside_spinners_is_reused_only_as_provisional_and_a_quiet_call_tunes_again(
        tmp_path, monkeypatch):
    """Beside spinners the tune's result is provisional; a second call beside them reuses it with
    its provisional line, handing out the better-measured of the pick and the rule; a call on a
    quiet machine tunes again. Where the machine is not quiet without the spinners (others share
    it), the load probe's reading is what decides, and the test says it stood in for it."""
    import autoloader.api as api
    from autoloader import best_loader

    monkeypatch.setenv("AUTOLOADER_BUSY_SHARE", "0.5")
    out = str(tmp_path / "out")
    with Burner(per_cpu=1):
        events = []
        try:
            first = best_loader(f"{WHERE}:small", batch_size=8, budget=60, device="cpu", out=out, tune="before",
                                progress=events.append)
        except Inconclusive as exc:
            pytest.skip(f"the busy machine measured nothing within the budget (exit 5): {exc}")
        events = []
        second = best_loader(f"{WHERE}:small", batch_size=8, budget=60, device="cpu", out=out, tune="before",
                             progress=events.append)
    reused = [e for e in events if isinstance(e, ResultReused)]
    assert reused and not any(isinstance(e, ResultNotReused) for e in events), events
    assert reused[0].tuned.provisional and "busy machine" in reused[0].tuned.provisional
    assert sum("provisional" in text for text in line(reused[0]).splitlines()) == 1
    stored = api._stored_result(api.built_problem(api._dataset_object(f"{WHERE}:small"), f"{WHERE}:small",
                                                  batch_size=8, device="cpu"), out)[0]
    handed = handed_out(stored.config, stored.rule, stored.finals, stored.trials)
    for loader in (first, second):
        assert (loader.num_workers, loader.batch_size) == (handed.num_workers, handed.batch_size)
    quiet = background()
    print(f"\nprovisional: {stored.tuned.provisional}; handed out {handed.key}; background without the "
          f"spinners: {quiet:.2f} CPUs busy")
    if quiet > 0.5 * 2 * 0.8:
        print("the machine is not quiet without the spinners: the load probe is read as quiet instead")
        monkeypatch.setattr(api, "_load_now", lambda: (0.0, False))
    events = []
    try:
        best_loader(f"{WHERE}:small", batch_size=8, budget=60, device="cpu", out=out, tune="before",
                    progress=events.append)
    except Inconclusive as exc:   # it tuned again, and the machine others load gave it nothing: said
        print(f"the tune again measured nothing: {exc}")
    again = [e for e in events if isinstance(e, ResultNotReused)]
    assert again and "provisional" in again[0].why, events
    assert not any(isinstance(e, ResultReused) for e in events)


def test_show_and_the_tunes_table_say_a_provisional_result_in_one_line():
    from autoloader.fleet.show import result_text
    from autoloader.tuning.progress import table

    with open(FIXTURE) as fh:
        data = json.load(fh)
    why = "measured on a busy machine: other processes used 1.9 of 2 CPUs"
    result = TuneResult.from_dict({**data, "provisional": why}, where=FIXTURE)
    for text in (result_text(result), table(result)):
        said = [row for row in text.splitlines() if "provisional" in row]
        assert len(said) == 1 and why in said[0], text
    judged = TuneResult.from_dict(data, where=FIXTURE)
    assert "provisional" not in result_text(judged) + table(judged)
