"""The machine's load, the rule's line, the threads, and a nightly comparison that means something:
unit tests on synthetic records (NOTE [ Others on the machine ], NOTE [ Drift ])."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import re
import time

import pytest
from burner import Burner

from autoloader.errors import UsageError
from autoloader.fleet.registry import _thresholds
from autoloader.fleet.retune import INCONCLUSIVE_EXIT, Outcome, RetuneReport, markdown
from autoloader.search.choice import Finalist, choose
from autoloader.search.config import TunedConfig
from autoloader.search.results import CONSTRAINT, OK, MachineLoad, TrialResult, busy_spans, machine_load
from autoloader.search.paired import INSIDE, OUTSIDE, STRADDLES, against_band, paired_bounds, runs_ratio
from autoloader.search.policy import BUSY_SHARE, LOAD_TIE, Thresholds
from autoloader.search.profile import Profile, Threads
from autoloader.search.space import LoaderConfig
from autoloader.store.history import previous, record
from autoloader.store.records import StoredHardware
from autoloader.store.result import InvalidRecord, TuneResult, trial_record
from autoloader.tuning.compare import DRIFTED, INCONCLUSIVE, UNCHANGED, compare, memory_per_worker, separated
from autoloader.tuning.final import final_configs, trimmed
from autoloader.events import TrialDone
from autoloader.tuning.progress import ProgressPrinter, table

CPUS = 2
PICK = LoaderConfig.make(16, 3, False, 2, True)
RULE = LoaderConfig.make(16, 1, False, 2, True)
OLD = LoaderConfig.make(16, 2, False, 2, True)


def trial(config, rate=1000.0, others=0.1, **kw) -> TrialResult:
    return TrialResult(config, OK, samples_per_s=rate, rel_interval=0.03, seconds=3.0, window_s=2.0, batches=40,
                       others_cpus=others, steal_cpus=0.0, tree_cpus=1.0, **kw)


def tuned(config=PICK, rate=1000.0) -> TunedConfig:
    return TunedConfig(config, rate, 0.03, 400.0, None, {"fingerprint": "box", "cpus": CPUS}, "ds-key", "cpu")


def result(config=PICK, trials=(), finals=(), load=None, threads=None, rule=RULE) -> TuneResult:
    return TuneResult(tuned(config), tuple(trials), tuple(finals), "/r.json", "/r.py", "sqlite://", 12.0, 0, 0,
                      rule=rule, load=load, threads=threads)


# --- the load --------------------------------------------------------------------------------------

def test_busy_trials_are_grouped_in_runs_and_the_run_is_busy_past_the_share():
    trials = [trial(PICK, others=1.6), trial(RULE, others=1.5), trial(OLD, others=0.2), trial(PICK, others=1.8)]
    spans = busy_spans(trials, CPUS)
    assert [(s.first, s.last) for s in spans] == [(1, 2), (4, 4)] and spans[0].others_cpus == pytest.approx(1.55)
    load = machine_load(CPUS, None, trials, [trial(PICK, others=1.2)])
    assert load.busy and load.share == pytest.approx((1.6 + 1.5 + 0.2 + 1.8 + 1.2) / 5 / CPUS)
    assert load.widen == pytest.approx(LOAD_TIE * 1.2 / CPUS), "the final's own share widens its ties"
    assert MachineLoad.from_dict(json.loads(json.dumps(load.to_dict()))) == load
    quiet = machine_load(CPUS, None, [trial(PICK, others=0.3)])
    assert not quiet.busy and quiet.widen == 0 and quiet.busy_spans == ()
    assert machine_load(CPUS, None, [trial(PICK, others=1.2)], threshold=0.55).busy
    assert not machine_load(CPUS, None, [trial(PICK, others=1.2)], threshold=0.65).busy


def test_a_busy_final_widens_the_ties_it_decides_by():
    best = Finalist(OLD.replace(num_workers=4), (1000.0, 1000.0, 1000.0))
    cheaper = Finalist(OLD, (930.0, 1005.0, 935.0))   # 6.5% behind, ahead in one round
    assert choose([cheaper, best], []).config == best.config
    assert choose([cheaper, best], [], widen=LOAD_TIE * 0.9).config == OLD
    behind = Finalist(OLD, (950.0, 955.0, 945.0))      # 5% behind in every round: no noise, however busy
    assert choose([behind, best], [], widen=LOAD_TIE * 0.9).config == best.config
    # A cheaper config short of headroom ties only within the narrow tie (NOTE [ Headroom ]).
    level = Finalist(OLD, (975.0, 1010.0, 970.0), (0.0, 0.0, 0.0))
    roomy = Finalist(OLD.replace(num_workers=4), (1000.0, 1000.0, 1000.0), (0.0, 0.0, 0.0))
    assert choose([level, roomy], []).config == OLD
    assert choose([level, roomy], [], narrow=frozenset({OLD})).config == roomy.config


def test_a_trial_line_names_the_load_only_when_others_took_more_than_the_share(capsys):
    import io

    out = io.StringIO()
    printer = ProgressPrinter(out)
    for others in (1.6, 0.4):
        printer(TrialDone(1, 5, trial(PICK, others=others), None, 3.0, cpus=CPUS))
    busy, quiet = out.getvalue().splitlines()
    assert "other processes used 1.6 of 2 CPUs" in busy and "what the machine gives" in busy
    assert "other processes" not in quiet


@pytest.mark.slow
def test_the_meter_counts_a_spinning_neighbour_as_others_and_its_own_tree_as_its_own():
    from autoloader.probe.load import LoadMeter

    with Burner() as burner:
        meter = LoadMeter(None)
        time.sleep(1.5)
        span = meter.stop()
    assert span is not None and span.others_cpus > 0.5 * CPUS, span   # the burner is not this tree
    assert span.tree_cpus < 0.3, span
    import psutil

    with Burner(per_cpu=1) as burner:
        spinner = psutil.Process(burner.procs[0].pid)
        before = sum(spinner.cpu_times()[:2])
        meter = LoadMeter(spinner.pid)   # one spinner counted as this run's own
        time.sleep(1.5)
        span = meter.stop()
        got = (sum(spinner.cpu_times()[:2]) - before) / span.seconds
    assert got > 0.1 and span.tree_cpus == pytest.approx(got, abs=0.08), (span, got)
    assert trial_record({**trial(PICK).to_dict(), "others_cpus": span.others_cpus}).others_cpus == span.others_cpus


@pytest.mark.slow
def test_two_spinners_beside_a_tree_that_takes_both_cpus_read_as_a_busy_machine():
    """NOTE [ Runnable others count at what they want ]: the spinners get about half the CPUs
    beside the tree's two, and want all of them; the tree's own waiting is never the others'."""
    import subprocess

    from autoloader.probe.load import LoadMeter

    spin = "while :; do :; done"
    mine = subprocess.Popen(["bash", "-c", f"({spin}) & ({spin}) & {spin}"])   # 3 spinners in one tree
    try:
        time.sleep(0.5)
        with Burner():
            ours, anyones = LoadMeter(mine.pid), LoadMeter(None)
            time.sleep(2.0)
            span, all_others = ours.stop(), anyones.stop()
    finally:
        import psutil

        for proc in reversed(psutil.Process(mine.pid).children(recursive=True)):
            proc.kill()
        mine.kill()
        mine.wait()
    print(span, all_others)
    assert span.others_cpus > BUSY_SHARE * CPUS + 0.3, span
    assert span.waiting_cpus > 0.4, "the spinners waited for the CPUs the tree held"
    assert all_others.waiting_cpus - span.waiting_cpus > 0.4, "the tree's own waiting is counted as its own"


def test_a_stored_trial_and_a_registry_check_the_new_figures():
    with pytest.raises(InvalidRecord, match="others_cpus"):
        trial_record({**trial(PICK).to_dict(), "others_cpus": -1.0})
    assert _thresholds({"busy": 0.8}).busy == 0.8 and Thresholds().busy == BUSY_SHARE
    with pytest.raises(UsageError, match="busy"):
        _thresholds({"busy": 1.5})


def test_a_machine_others_always_share_may_raise_the_busy_share(monkeypatch):
    from autoloader.inputs.options import BUSY_ENV, default_thresholds

    monkeypatch.setenv(BUSY_ENV, "0.8")
    assert default_thresholds().busy == 0.8 and _thresholds({}).busy == 0.8 and _thresholds({"busy": 0.6}).busy == 0.6
    monkeypatch.delenv(BUSY_ENV)
    assert default_thresholds().busy == BUSY_SHARE
    monkeypatch.setenv(BUSY_ENV, "lots")
    with pytest.raises(UsageError, match=BUSY_ENV):
        default_thresholds()


# --- the table -------------------------------------------------------------------------------------

def rule_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith("cpus-1 rule"))


def test_the_rule_has_its_line_in_every_table():
    measured = result(trials=[trial(PICK), trial(RULE, rate=500.0)],
                      finals=[Finalist(PICK, (1000.0,) * 3), Finalist(RULE, (500.0,) * 3)])
    assert "2.0x as fast as the rule" in rule_line(table(measured)) and "interleaved final" in rule_line(table(measured))
    itself = result(config=RULE, trials=[trial(RULE)])
    assert "the pick is the rule's config" in rule_line(table(itself)) and "x" not in rule_line(table(itself)).split(
        "(")[0]
    pruned = result(trials=[trial(PICK), trial(RULE, rate=300.0, pruned=True)])
    assert "stopped early" in rule_line(table(pruned)) and "no round of it fit" in rule_line(table(pruned))
    failed = result(trials=[trial(PICK), TrialResult(RULE, CONSTRAINT, cause="host_memory", error="too big")])
    assert "could not run here" in rule_line(table(failed))
    never = result(trials=[trial(PICK)])
    assert "the budget ended before it" in rule_line(table(never))


def test_the_rule_itself_is_not_said_unbeaten_beside_a_faster_measurement():
    """"1.00x by identity, nothing measured beat it" only when nothing the table shows read higher:
    a num_workers=0 reading 0.95x of it (the row below) or another config's faster burst is named."""
    itself = result(config=RULE, trials=[trial(RULE)])
    assert "nothing measured beat it" in rule_line(table(itself))
    slower = dataclasses.replace(itself, tuned=dataclasses.replace(itself.tuned, baseline_samples_per_s=1000 / 0.95))
    text = table(slower)
    assert "num_workers=0        1,053/s" in text and "nothing measured beat it" not in text
    assert "num_workers=0 read 1.05x of its rate" in rule_line(text)
    burst = result(config=RULE, trials=[trial(RULE), trial(PICK, rate=1100.0), trial(OLD, rate=2000.0, pruned=True)])
    assert f"{PICK.key}'s burst read 1.10x of its rate" in rule_line(table(burst)), "a pruned burst is rough: not named"


def test_the_table_says_the_load_and_the_threads_and_what_to_set():
    trials = [trial(PICK, others=1.6), trial(RULE, others=1.7), trial(OLD, others=1.5)]
    load = machine_load(CPUS, None, trials)
    slow = Threads(2, 16, default_s=0.2136, one_thread_s=0.0176, ratios=(12.1, 11.0, 13.0))
    text = table(result(trials=trials, load=load, threads=slow))
    assert "other processes used 1.6 of 2 CPUs during trials 1-3: these figures are what the machine gives" in text
    assert "inconclusive" in text
    assert "2 torch intra-op threads" in text and "set torch.set_num_threads(1)" in text and "213.60 ms" in text
    fine = table(result(trials=[trial(PICK, others=0.2)], load=machine_load(CPUS, None, [trial(PICK, others=0.2)]),
                        threads=Threads(2, 16, 0.01, 0.0101, (0.99, 1.01))))
    assert "set torch.set_num_threads" not in fine and "during trial" not in fine and "0.2 of 2 CPUs" in fine


def test_thread_advice_needs_a_clear_gap_in_its_pairs_and_more_than_one_thread():
    clear = Threads(2, 16, 0.0134, 0.0011, (12.0, 11.5, 13.1, 12.4))
    assert clear.advise and clear.slower == pytest.approx(12.18, 0.01)
    assert not Threads(2, 16, 0.0110, 0.0100, (1.1, 1.05, 1.12)).advise, "inside the timer's noise"
    assert not Threads(2, 16, 0.0235, 0.0178, (2.5, 0.4, 1.6, 0.5)).advise, "a jittery step: the pairs disagree"
    assert not Threads(1, 16, 0.0134, 0.0011, (12.0, 12.0)).advise and not Threads(4, 16).advise


# --- the nightly comparison ------------------------------------------------------------------------

def record_of(config, rate, finals=(), trials=None, load=None, fingerprint="box") -> dict:
    trials = trials if trials is not None else [trial(config, rate).to_dict()]
    data = {"config": config.loader_kwargs(), "samples_per_s": rate, "dataset_key": "ds-key", "knee": None,
            "hardware": {"fingerprint": fingerprint, "cpus": CPUS}, "trials": trials, "measurement_format": 1,
            "finals": [{"config": c.loader_kwargs(), "rates": list(r), "rounds": list(range(len(r)))}
                       for c, r in finals], "finished_at": "2026-12-01T00:00:00+0000"}
    if load is not None:
        data["load"] = load
    return data


def stored(data: dict, where: str = "p") -> TuneResult:
    return TuneResult.from_dict(data, where)


def _separated(ratios) -> bool:
    if not ratios:
        return separated(None)
    _, lo, hi = paired_bounds(ratios, (1.0,) * len(ratios))
    return separated((lo, hi) if hi < float("inf") else None)


def test_paired_rounds_decide_whether_a_pick_changed():
    assert _separated((1.10, 1.12, 1.09))
    assert not _separated((1.10, 0.99, 1.12)), "behind in one round: a tie"
    assert not _separated((1.03, 1.04, 1.03)), "inside the tie"
    assert not _separated((1.30, 1.02, 1.06)), "inside the ratios' own spread"
    assert not _separated(()) and not _separated((1.08,)) and not _separated((1.2,)), "one round bounds nothing"
    before = stored(record_of(OLD, 1000.0))
    tie = compare(before, stored(record_of(PICK, 1010.0, finals=[(PICK, (1010, 990, 1020)), (OLD, (1000, 1000, 995))])))
    assert tie.status == UNCHANGED and tie.settings_tie and not tie.changed
    real = compare(before, stored(record_of(PICK, 1300.0, finals=[(PICK, (1300, 1290, 1310)), (OLD, (1000, 1005, 995))])))
    assert real.changed and real.reasons[0].startswith("pick changed")


def test_a_rate_change_must_clear_the_threshold_by_its_interval():
    before = stored(record_of(PICK, 1000.0, finals=[(PICK, (1000, 1000, 1000))]))
    steady = compare(before, stored(record_of(PICK, 700.0, finals=[(PICK, (700, 705, 695))])))
    assert steady.changed and "rate -30%" in steady.reasons[0]
    noisy = compare(before, stored(record_of(PICK, 700.0, finals=[(PICK, (700, 450, 1050))])))
    assert noisy.rate_noise > 0.3 and not noisy.changed and noisy.status == INCONCLUSIVE
    assert "across the threshold band 0.75-1.25" in noisy.undecided


def test_the_intervals_are_students_on_the_logs_of_the_rates():
    ratio, lo, hi = paired_bounds((110.0, 120.0, 100.0), (100.0, 100.0, 100.0))
    logs = [math.log(1.1), math.log(1.2), 0.0]
    half = 4.303 * statistics.stdev(logs) / math.sqrt(3)
    assert ratio == pytest.approx(math.exp(statistics.fmean(logs)))
    assert (lo, hi) == pytest.approx((ratio * math.exp(-half), ratio * math.exp(half)))
    assert paired_bounds((2.0,), (1.0,)) == (2.0, 0.0, math.inf), "one round bounds nothing"
    ratio, lo, hi = runs_ratio((50.0, 50.0), (100.0,))
    assert ratio == pytest.approx(0.5) and lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
    assert runs_ratio((50.0,), (100.0,))[1:] == (0.0, math.inf)
    assert [against_band(*pair, 0.25) for pair in ((0.4, 0.7), (0.8, 1.2), (0.6, 0.9), (1.3, 2.0))] == \
        [OUTSIDE, INSIDE, STRADDLES, OUTSIDE]
    with pytest.raises(ValueError):
        paired_bounds((1.0,), ())


def test_a_noisy_two_round_final_of_a_2x_slower_dataset_is_never_called_unchanged():
    """The issue's case: 694/s -> 264/s read unchanged because two rounds' spread (66%) was past
    the drop. By interval it is a change, or, too noisy to bound, inconclusive: never unchanged."""
    before = stored(record_of(PICK, 694.0, finals=[(PICK, (560.0, 860.0))]))
    noisy = compare(before, stored(record_of(PICK, 264.0, finals=[(PICK, (180.0, 330.0))])))
    assert noisy.status in (INCONCLUSIVE, DRIFTED) and noisy.status != UNCHANGED, noisy
    more = compare(before, stored(record_of(PICK, 264.0, finals=[(PICK, (180.0, 330.0, 250.0, 270.0, 300.0))])))
    assert more.status == DRIFTED and more.rate_interval[1] < 0.75, more
    steady = stored(record_of(PICK, 694.0, finals=[(PICK, (690.0, 694.0, 700.0))]))
    same = compare(steady, stored(record_of(PICK, 700.0, finals=[(PICK, (690.0, 710.0, 700.0, 705.0))])))
    assert same.status == UNCHANGED, same
    assert compare(before, stored(record_of(PICK, 700.0, finals=[(PICK, (690.0, 710.0, 700.0))]))
                   ).status == INCONCLUSIVE, "a baseline this noisy bounds nothing: not unchanged either"


def test_the_final_adds_paired_rounds_while_the_comparison_is_undecided_and_the_budget_holds():
    from autoloader.search.budget import Clock
    from autoloader.tuning.final import Final

    measured = []

    def measure(config):
        measured.append(config)
        return trial(config, 1100.0 if config == PICK else 1000.0)

    history = [trial(PICK), trial(OLD), trial(RULE)]
    final = Final(Clock(600.0), measure, lambda event: None)
    finals = final.run([PICK, OLD, RULE], history, RULE, OLD)
    assert len(measured) == 9
    answers = iter([False, False, True])
    finals = final.settle(finals, history, OLD, lambda now: next(answers))
    assert measured[9:] == [OLD, PICK, OLD, PICK], "two paired rounds of the old pick and the best other"
    assert [len(f.rates) for f in finals if f.config == OLD] == [5]
    alone = Final(Clock(600.0), lambda config: measured.append(config) or trial(config, 1000.0), lambda event: None)
    del measured[:]
    level = alone.run([PICK, OLD], history, RULE, OLD)
    steps = iter([False, True])
    alone.settle(level, history, OLD, lambda now: next(steps))
    assert measured[6:] == [OLD], "none reads ahead of the old pick: its rate is the only question"
    short = Final(Clock(0.5), measure, lambda event: None)
    short.rates, short.taken = dict(final.rates), dict(final.taken)
    assert short.settle(finals, history, OLD, lambda now: False) == finals, "no round past the budget"


def test_a_busy_run_is_inconclusive_whatever_it_found_and_never_the_baseline(tmp_path):
    busy = machine_load(CPUS, None, [trial(PICK, others=1.7)]).to_dict()
    before = stored(record_of(PICK, 1000.0, finals=[(PICK, (1000, 1000, 1000))]))
    slow = compare(before, stored(record_of(PICK, 400.0, finals=[(PICK, (400, 400, 400))], load=busy)))
    assert slow.status == INCONCLUSIVE and not slow.changed and "rate -60%" in slow.set_aside[0]
    assert compare(None, stored(record_of(PICK, 400.0, load=busy))).status == INCONCLUSIVE
    # The current file is the busy run's: the last good one comes from the dated history.
    out, key = str(tmp_path), "ds-key"
    quiet = record_of(PICK, 1000.0)
    record(out, "box", key, stored(quiet))
    path = os.path.join(out, "box", f"{key}.json")
    with open(path, "w") as fh:
        json.dump({**record_of(PICK, 400.0, load=busy), "finished_at": "2026-12-02T00:00:00+0000"}, fh)
    found = previous(out, StoredHardware("box", CPUS), key)
    assert found is not None and found.tuned.samples_per_s == 1000.0 and found.where != path


def test_memory_per_worker_that_falls_is_unmeasured_and_the_report_has_no_negative_figure():
    mib = 2**20
    falling = [trial(LoaderConfig.make(16, w, False, 2, True) if w else LoaderConfig.make(16, 0, False),
                     peak_pss_bytes=p).to_dict() for w, p in ((0, 400 * mib), (1, 380 * mib), (2, 340 * mib))]
    assert memory_per_worker(stored(record_of(PICK, 1000.0, trials=falling))) is None
    rising = [dict(t, peak_pss_bytes=(400 + 36 * i) * mib) for i, t in enumerate(falling)]
    assert memory_per_worker(stored(record_of(PICK, 1000.0, trials=rising))) == pytest.approx(36 * mib)
    before = stored(record_of(PICK, 1000.0, trials=rising))
    drift = compare(before, stored(record_of(PICK, 990.0, trials=falling, finals=[(PICK, (990, 985, 995))])))
    busy = compare(before, stored(record_of(PICK, 500.0, trials=falling,
                                     load=machine_load(CPUS, None, [trial(PICK, others=1.8)]).to_dict())))
    outcomes = (Outcome("quiet", drift.status, key="ds-key", drift=drift, pick=PICK.loader_kwargs(),
                        samples_per_s=990.0), Outcome("busy", busy.status, key="ds-key", drift=busy))
    report = RetuneReport("fleet.toml", "t0", "t1", {"fingerprint": "box", "cpus": CPUS}, Thresholds(), outcomes, "/out")
    text = markdown(report)
    assert "36 MiB -> unmeasured" in text and not re.search(r"-\d[\d,.]* ?(MiB|/s)", text), text
    assert report.exit_code == INCONCLUSIVE_EXIT and "other processes used 1.8 of 2 CPUs" in text


def test_the_final_holds_the_previous_pick_and_the_rule_even_when_short_of_time():
    history = [trial(PICK), trial(RULE, pruned=True)]
    chosen = final_configs([PICK, LoaderConfig.make(16, 4, False, 2, True), RULE], RULE, OLD, history)
    assert chosen == [PICK, LoaderConfig.make(16, 4, False, 2, True), OLD, RULE]
    assert trimmed(chosen, RULE, OLD) == [PICK, OLD, RULE]
    failed = history + [TrialResult(OLD, CONSTRAINT, cause="host_memory")]
    assert final_configs([PICK, RULE], RULE, OLD, failed) == [PICK, RULE]


def test_the_rule_is_a_finalist_even_when_its_burst_was_stopped_early():
    from autoloader.search.model import Model
    from autoloader.search.model_first import ModelFirst
    from autoloader.search.space import search_space

    profile = Profile(batch_size=16, sample_s=(0.001,) * 64, collate_s=0.0005, sample_bytes=64, recv_s=0.0002,
                      pin_s=None, h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.001, startup_s=0.1,
                      worker_pss=None, cpus=CPUS, epoch_batches=200)
    strategy = ModelFirst(search_space((16,), CPUS, "cpu"), Model(profile, "cpu"), CPUS)
    history = [trial(LoaderConfig.make(16, 0, False), 300.0), trial(PICK, 1000.0),
               trial(strategy.rule, 200.0, pruned=True)]
    assert strategy.finalists(history)[-1] == strategy.rule
    failed = history[:2] + [TrialResult(strategy.rule, CONSTRAINT, cause="host_memory")]
    assert strategy.rule not in strategy.finalists(failed)


def test_a_busy_recheck_measures_num_workers_cpus_that_only_its_burst_had():
    """The busy recheck's deciders come from the choice, which may hand back num_workers = CPUs
    from its search burst alone where the final's pick is past the cores (NOTE [ Past the cores ]):
    the recheck measures it paired and it joins the finalists, never a KeyError."""
    from autoloader.search.budget import Clock
    from autoloader.tuning.final import Final

    past = LoaderConfig.make(16, 4, False, 2, True)
    cores = LoaderConfig.make(16, CPUS, False, 2, True)
    measured = []

    def measure(config):
        measured.append(config)
        return trial(config, {past: 1000.0, cores: 990.0}.get(config, 600.0), others=1.9)

    history = [trial(past, 1000.0, others=1.9), trial(RULE, 600.0, others=1.9), trial(cores, 990.0, others=1.9)]
    final = Final(Clock(600.0), measure, lambda event: None)
    finals = final.run([past, RULE], history, RULE, None)
    assert cores not in {f.config for f in finals}
    busy = machine_load(CPUS, None, history + final.results)
    assert busy.busy
    rechecked = final.recheck(finals, history, busy, RULE, frozenset(), CPUS)
    assert cores in measured and {cores, past} <= {f.config for f in rechecked}, measured
