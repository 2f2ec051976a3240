"""The explanation on synthetic pipelines: each bottleneck class, each what-if's gain against the
model asked directly, the ceiling's terms (the pure modules' imports: tests/test_units.py)."""

import dataclasses
import math

import pytest

from autoloader.errors import UsageError
from autoloader.explain import KINDS, benchmark_row, explain, headline
from autoloader.explain.verdict import bound
from autoloader.explain.whatif import ceiling
from autoloader.explain.evidence import Evidence
from autoloader.explain.page import render_markdown
from autoloader.explain.thresholds import HIGHLY_INPUT_BOUND, MODERATELY_INPUT_BOUND, WORTH_CHANGING
from autoloader.explain.verdict import level_of, verdict
from autoloader.explain.whatif import whatifs
from autoloader.search.choice import Finalist
from autoloader.search.model import Calibration, Model
from autoloader.search.model_first import worker_ladder
from autoloader.search.policy import PREDICTED_TIE
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.store.result import TuneResult
from autoloader.tuning.progress import table

from explain_cases import case, evidence, profile, synthetic_result


@pytest.mark.parametrize("kind", KINDS)
def test_each_bottleneck_class_is_named(kind):
    v = verdict(case(kind))
    assert v.kind == kind, v.paragraph
    assert v.headline and v.headline in v.paragraph
    limiting = [f for f in v.findings if f.limits]
    topic = {"input": "part", "memory": "memory"}.get(kind.split("/")[0])
    if topic:
        assert any(f.topic == topic for f in limiting), [f.title for f in limiting]
    if kind == "compute":
        assert v.level == "not input-bound" and v.wait_share < MODERATELY_INPUT_BOUND
    if kind == "balanced":   # balanced waits (moderately), or the loop is fed and the step holds it
        assert v.level == "moderately input-bound" and v.wait_source == "measured"


@pytest.mark.parametrize("kind", (*KINDS, "fed"))
def test_the_verdict_and_the_ceiling_name_one_bound(kind):
    """The verdict's class and the ceiling's sentence read one decision (verdict.bound): the report
    cannot say the step holds the run beside a verdict that says anything else."""
    ev = case(kind)
    v, c = verdict(ev), ceiling(ev)
    said = {"step": "The step holds the run", "loader": "The loader holds the run",
            "both": "The step and the loader hold it together"}
    assert c.holds == bound(ev).holds and said[c.holds] in c.sentence()
    assert [h for h in said.values() if h in c.sentence()] == [said[c.holds]]
    expected = {"compute": "step", "balanced": "both"}.get(v.kind, "loader")
    if not v.kind.startswith("memory/"):   # a memory limit names what kept a faster config out instead
        assert c.holds == expected, (v.kind, c.sentence())


def test_a_fed_loop_with_a_slow_step_is_compute_bound():
    """The issue's case: a 1.9 s step on 2 CPUs, its loader predicted at about the step's rate,
    the loop measured waiting 2%: compute-bound, not balanced, and every rate has its decimals."""
    ev = case("fed")
    b = bound(ev)
    assert abs(b.supply_rate / b.step_rate - 1) < 0.2   # close enough to have read "balanced" before
    v = verdict(ev)
    assert v.kind == "compute" and v.headline.startswith("Compute-bound: the step (1.90 s a batch)"), v.headline
    assert "Balanced" not in v.paragraph and "neither alone limits" not in v.paragraph
    assert "8.42/s at most" in v.paragraph   # 16 / 1.9 s, three significant figures
    assert "The tuned 7.1/s" in ceiling(ev).sentence() and "The step holds the run" in ceiling(ev).sentence()


def test_a_compute_bound_verdict_names_the_threads_when_one_was_clearly_faster():
    """A CPU step whose intra-op threads wait for each other (one thread timed 79x faster in the
    profile's pairs): the verdict says so and what to set; with pairs that read alike it does not."""
    ev = case("compute")
    slow = dataclasses.replace(ev, profile=dataclasses.replace(
        ev.profile, main_threads=2, main_default_s=0.228, main_one_thread_s=0.0029, main_thread_ratios=(24.2, 93.2, 74.5)))
    v = verdict(slow)
    assert v.kind == "compute"
    assert "2 intra-op threads waiting for each other" in v.paragraph and "set torch.set_num_threads(1)" in v.paragraph
    assert "228.0 ms with them against 2.9 ms with one (78.6x)" in v.paragraph, v.paragraph
    alike = dataclasses.replace(ev, profile=dataclasses.replace(
        ev.profile, main_threads=2, main_default_s=0.010, main_one_thread_s=0.0098, main_thread_ratios=(1.02, 0.99, 1.03)))
    assert "set_num_threads" not in verdict(alike).paragraph


def test_a_balanced_pipeline_is_no_single_stage():
    v = verdict(case("balanced"))
    assert "neither alone limits" in v.headline
    # The slowest supply stage and the step within BALANCED_WITHIN: speeding either alone gains little.
    gains = {w.name: w.gain for w in whatifs(case("balanced"))}
    assert gains["faster_step"] < 0.2 and gains["more_cpus"] < 0.2


def test_memory_names_the_config_it_kept_out_and_what_it_costs():
    ev = case("memory/host")
    v = verdict(ev)
    kept = ev.trials[0]
    predicted = ev.model.predict(kept.config).samples_per_s / ev.model.predict(ev.pick).samples_per_s - 1.0
    assert v.lost_to_memory == pytest.approx(predicted)
    assert kept.config.key in v.paragraph and "--max-memory" in v.paragraph


def test_the_measured_wait_stands_over_the_models():
    ev = case("compute")
    assert verdict(ev).wait_source == "predicted"
    final = Finalist(ev.pick, (600.0, 610.0, 605.0), (0.45, 0.5, 0.55))
    measured = dataclasses.replace(ev, finals=(final,))
    v = verdict(measured)
    assert v.wait_source == "measured" and v.wait_share == pytest.approx(0.5)
    assert v.level == "highly input-bound" and v.kind.startswith("input/")
    assert "measured" in v.headline


def test_input_bound_levels_follow_tensorflows_convention():
    assert level_of(HIGHLY_INPUT_BOUND) == "highly input-bound"
    assert level_of(HIGHLY_INPUT_BOUND - 0.001) == "moderately input-bound"
    assert level_of(MODERATELY_INPUT_BOUND) == "moderately input-bound"
    assert level_of(MODERATELY_INPUT_BOUND - 0.001) == "not input-bound"


def test_without_a_step_the_figure_is_the_loaders_alone():
    ev = dataclasses.replace(case("input/cores"), step_given=False)
    v = verdict(ev)
    assert "no --step" in v.headline
    assert "the loader alone" in v.paragraph
    assert "says nothing about your training's compute" in v.findings[-1].text
    assert not any(w.name == "faster_step" for w in whatifs(ev))
    unknown = verdict(dataclasses.replace(ev, step_given=None))
    assert "does not record whether a --step was given" in unknown.paragraph


# --- what-ifs: each gain against the model, asked directly -------------------------------------


def ladder_configs(pick, cpus, max_workers, batch_size=None):
    bs = batch_size or pick.batch_size
    return [LoaderConfig.make(bs, n, pick.pin_memory, pick.prefetch_factor or 2,
                              pick.persistent_workers if pick.num_workers else True, pick.in_order if n else True)
            for n in worker_ladder(cpus, max_workers)]


def searched(model, configs):
    """The search's rule (ModelFirst.pick): the cheapest within PREDICTED_TIE of the best rate."""
    rated = {c: model.predict(c).samples_per_s for c in configs}
    top = max(rated.values())
    chosen = min((c for c, r in rated.items() if r >= top * (1 - PREDICTED_TIE)), key=lambda c: c.cost())
    return chosen, rated[chosen]


def one(ev, name):
    found = [w for w in whatifs(ev) if w.name == name]
    assert len(found) == 1, [w.name for w in whatifs(ev)]
    return found[0]


def ladder_base(ev):
    model = Model(ev.profile, ev.device)
    return max(model.predict(ev.pick).samples_per_s,
               searched(model, ladder_configs(ev.pick, ev.search_cpus, 4 * ev.search_cpus))[1])


def test_uint8_is_the_model_on_a_quarter_of_the_bytes():
    ev = case("input/main")
    p = ev.profile
    quarter = dataclasses.replace(p, sample_bytes=p.sample_bytes // 4, recv_s=p.recv_s / 4, pin_s=p.pin_s / 4,
                                  h2d_pinned_s=p.h2d_pinned_s / 4, h2d_pageable_s=p.h2d_pageable_s / 4,
                                  collate_s=p.collate_s / 4)
    model = Model(quarter, "cuda")
    config, rate = searched(model, ladder_configs(ev.pick, 16, 64))
    w = one(ev, "uint8")
    assert w.config == config and w.rate == pytest.approx(rate)
    assert w.gain == pytest.approx(rate / ladder_base(ev) - 1.0)
    assert w.gain > 0.5 and w.helps and w.source == "predicted" and w.needs_code
    assert "uint8" in w.change and ".float().div_(255)" in w.change


def test_uint8_is_not_offered_for_small_batches():
    assert not any(w.name == "uint8" for w in whatifs(case("input/cores")))   # a 128 KiB batch


def test_a_smaller_batch_is_the_model_at_that_batch_size():
    ev = case("input/main")
    model = Model(ev.profile, "cuda")
    best = max((searched(model, ladder_configs(ev.pick, 16, 64, size)) for size in (16, 8)), key=lambda cr: cr[1])
    w = one(ev, "smaller_batch")
    assert w.config == best[0] and w.gain == pytest.approx(best[1] / ladder_base(ev) - 1.0)
    assert "learning rate" in w.change


def test_out_of_order_is_predicted_unless_the_run_measured_it():
    p = profile(sample_s=0.001, tail=(0.02, 0.05), cpus=4, step_s=0.001)
    pick = LoaderConfig.make(32, 4, True, 2)
    ev = evidence(p, "cuda", pick)
    model = Model(p, "cuda")
    expected = model.predict(pick.replace(in_order=False)).samples_per_s / model.predict(pick).samples_per_s - 1
    w = one(ev, "in_order")
    assert w.gain == pytest.approx(expected) and w.gain > WORTH_CHANGING
    assert w.source == "predicted" and "--allow-reorder" in w.change
    # The model sees a slow batch no longer holding up the rest, not what reordering costs: its
    # figure is no claim, and the what-if says to measure it.
    assert not w.predicted and not w.helps and w.best_gain == 0.0
    assert w.gain_text() == "not predicted: measure it with --allow-reorder"
    bursts = (TrialResult(pick, OK, samples_per_s=1000.0), TrialResult(pick.replace(in_order=False), OK,
                                                                       samples_per_s=1100.0))
    # Measured only where reordering was allowed, so the run measured the config itself.
    assert one(dataclasses.replace(ev, trials=bursts, allow_reorder=False), "in_order").source == "predicted"
    measured = one(dataclasses.replace(ev, trials=bursts, allow_reorder=True), "in_order")
    assert measured.source == "measured" and measured.measured_gain == pytest.approx(0.1)
    assert measured.gain == pytest.approx(expected)   # the model's figure stays beside the measurement
    assert measured.helps and measured.gain_text() == "not predicted: measure it with --allow-reorder (measured +10%)"


def test_uint8_shrinks_only_the_part_of_the_receive_that_grows_with_the_bytes():
    # NOTE [ The receive's two parts ]: 4 ms a batch, 3 ms of it fixed: uint8 leaves 3.25 ms.
    from autoloader.explain.whatif import uint8_profile

    p = dataclasses.replace(profile(recv_s=0.004), recv_fixed_s=0.003, recv_busy_s=0.005)
    q = uint8_profile(p)
    assert q.recv_s == pytest.approx(0.003 + 0.001 / 4) and q.recv_fixed_s == p.recv_fixed_s
    assert q.recv_busy_s == pytest.approx(q.recv_s + 0.001)
    # Unmeasured, the whole receive is taken to scale, as before.
    assert uint8_profile(profile(recv_s=0.004)).recv_s == pytest.approx(0.001)


def test_more_cpus_is_the_model_with_twice_the_cpus():
    ev = case("input/cores")
    model = Model(dataclasses.replace(ev.profile, cpus=8), "cpu")
    config, rate = searched(model, ladder_configs(ev.pick, 8, 32))
    w = one(ev, "more_cpus")
    assert w.config == config and w.gain == pytest.approx(rate / ladder_base(ev) - 1.0)
    assert w.gain > 0.5 and not w.needs_code


def test_a_faster_step_is_the_model_with_half_the_step():
    ev = case("compute")
    model = Model(dataclasses.replace(ev.profile, step_s=ev.profile.step_s / 2), "cuda")
    config, rate = searched(model, ladder_configs(ev.pick, 8, 32))
    w = one(ev, "faster_step")
    assert w.config == config and w.gain == pytest.approx(rate / ladder_base(ev) - 1.0)
    assert 0.8 < w.gain < 1.05 and w.needs_code


def test_workers_past_the_cores_where_samples_wait():
    p = profile(sample_s=0.004, cpus=4, cpu_share=0.1, step_s=0.0001, device="cpu")
    pick = LoaderConfig.make(32, 4, False)
    ev = evidence(p, "cpu", pick)
    model = Model(p, "cpu")
    config, rate = searched(model, [c for c in ladder_configs(pick, 4, 16) if c.num_workers > 4])
    w = one(ev, "workers_past_cores")
    assert w.config == config and config.num_workers > 4
    assert w.gain == pytest.approx(rate / model.predict(pick).samples_per_s - 1.0) and w.gain > 0.5
    # Samples all on a CPU: no such what-if.
    assert not any(x.name == "workers_past_cores" for x in whatifs(case("input/cores")))


def test_pin_memory_off_is_the_model_without_pinning():
    ev = case("input/main")
    assert ev.pick.pin_memory
    model = Model(ev.profile, "cuda")
    expected = (model.predict(ev.pick.replace(pin_memory=False)).samples_per_s / model.predict(ev.pick).samples_per_s
                - 1.0)
    assert one(ev, "pin_off").gain == pytest.approx(expected)


@pytest.mark.slow   # the what-ifs of four runs' evidence
def test_the_models_best_worker_count_when_the_pick_is_another():
    ev = evidence(profile(sample_s=0.002, cpus=8, step_s=0.0001), "cuda", LoaderConfig.make(32, 2, True))
    model = Model(ev.profile, "cuda")
    config, rate = searched(model, ladder_configs(ev.pick, 8, 32))
    w = one(ev, "workers")
    assert w.config == config and w.gain == pytest.approx(rate / model.predict(ev.pick).samples_per_s - 1.0)
    # Measured when the final had both: then the measured gain decides whether it helps.
    finals = (Finalist(ev.pick, (1000.0, 1000.0)), Finalist(config, (990.0, 995.0)))
    measured = one(dataclasses.replace(ev, finals=finals), "workers")
    assert measured.source == "measured" and measured.measured_gain == pytest.approx(-0.0075)
    assert not measured.helps and measured.measured_config is None
    # Measured at another count on the same side of the pick: that measurement stands for it, named.
    other = config.replace(num_workers=config.num_workers - 1)
    nearby = one(dataclasses.replace(ev, finals=(finals[0], Finalist(other, (1010.0, 1012.0)))), "workers")
    assert nearby.measured_config == other and nearby.measured_gain == pytest.approx(0.011)
    assert f"measured at num_workers={other.num_workers}" in nearby.change
    # Fewer workers than the pick say nothing about more.
    fewer = Finalist(LoaderConfig.make(32, 1, True), (500.0, 500.0))
    assert one(dataclasses.replace(ev, finals=(finals[0], fewer)), "workers").source == "predicted"


# --- the ceiling ---------------------------------------------------------------------------------


def test_the_ceiling_is_the_lower_of_the_step_and_the_cores():
    ev = case("input/cores")
    c = ceiling(ev)
    p = ev.profile
    one_worker = p.batch_size / (sum(p.sample_s) / len(p.sample_s) * p.batch_size + p.collate_s)
    assert c.one_worker_rate == pytest.approx(one_worker)
    assert c.step_rate == pytest.approx(32 / 0.0001)
    assert c.value == pytest.approx(4 * one_worker) and c.binding == "cores"
    assert c.gap == pytest.approx(ev.samples_per_s / (4 * one_worker))
    slow = ceiling(case("compute"))
    assert slow.binding == "step" and slow.value == pytest.approx(32 / 0.05)
    free = ceiling(dataclasses.replace(ev, profile=dataclasses.replace(p, step_s=0.0)))
    assert math.isinf(free.step_rate) and free.value == pytest.approx(4 * one_worker)


# --- whole results -------------------------------------------------------------------------------


@pytest.mark.slow   # about a second: a 16-CPU ladder under every what-if, twice
def test_a_stored_result_explains_and_tabulates():
    data = synthetic_result()
    explained = explain(TuneResult.from_dict(data))
    assert explained.verdict.kind == "input/main" and explained.verdict.wait_source == "measured"
    row = benchmark_row(TuneResult.from_dict(data))
    assert row["kind"] == explained.verdict.kind and row["kind"] in KINDS
    best = max((w for w in explained.whatifs if w.helps), key=lambda w: w.best_gain)
    assert (row["top_whatif"], row["top_gain"]) == (best.name, pytest.approx(best.gain))
    assert row["gap"] == pytest.approx(explained.ceiling.gap)
    assert headline(TuneResult.from_dict(data)) == explained.verdict.headline


def test_an_older_result_without_inputs_still_explains():
    data = synthetic_result()
    del data["inputs"]
    ev = Evidence.from_result(TuneResult.from_dict(data))
    assert ev.step_given is None and ev.timeline == ()
    assert ev.allow_reorder is False          # the run named in_order=False's gain: it was not allowed
    assert ev.max_memory == 8 * 2**30         # quoted by the trial the ceiling kept out
    assert verdict(ev).kind == "input/main"


def test_a_result_without_a_profile_is_refused_with_the_fix():
    data = synthetic_result()
    del data["profile"]
    with pytest.raises(UsageError, match="tune again"):
        explain(TuneResult.from_dict(data))
    assert headline(TuneResult.from_dict(data)) is None


def test_a_profile_that_timed_nothing_still_explains():
    """The run's fallback profile (tuning.run.fallback_profile: the profile could not be measured) has
    zero costs: no division by them."""
    from autoloader.search.profile import Profile

    zeros = Profile(batch_size=32, sample_s=(0.0,), collate_s=0.0, sample_bytes=1000, recv_s=0.0, pin_s=0.0,
                    h2d_pinned_s=0.0, h2d_pageable_s=0.0, step_s=0.0, startup_s=0.0, worker_pss=None, cpus=2,
                    epoch_batches=10)
    for workers in (0, 2):
        explained = explain(Evidence(zeros, Calibration(), "cuda", LoaderConfig.make(32, workers, True), 100.0, cpus=2))
        assert explained.verdict.kind in KINDS and explained.ceiling.gap is None


def test_a_main_process_level_with_full_cores_is_the_cores():
    """Where the workers fill the cores and the main process reads level with them (slowed by the
    same sharing), the cores are named: more CPUs lift both, no loader setting lifts either."""
    import dataclasses

    from autoloader.explain.verdict import supply_part
    from autoloader.explain.evidence import Stages

    level = Stages(batch_size=256, batch_bytes=75 * 2**20, workers=15, worker_s=0.9, receive_s=0.05,
                   receive_idle_s=0.05, pin_s=0.01, copy_s=0.005, step_s=0.01, pin_thread=True, cpus=9.0,
                   cpu_demand=14.5, share=1.7, supply_rate=4206.0, main_rate=4186.0, copy_rate=50000.0,
                   step_rate=20000.0, loop_rate=20000.0)
    assert supply_part(level) == "cores"
    apart = dataclasses.replace(level, main_rate=3000.0)
    assert supply_part(apart) == "main", "a main process clearly slower is still the main process"
    idle = dataclasses.replace(level, cpu_demand=4.0)
    assert supply_part(idle) == "main", "with cores to spare the main process is its own limit"


def test_the_pages_how_sure_cell_says_predicted_once_and_the_knee_counts_its_workers():
    record = TuneResult.from_dict(synthetic_result())
    page = render_markdown(record, explain(record), {})
    assert "| predicted, not measured (" in page and "predicted: predicted" not in page
    for workers, said in ((1, "stops paying at 1 worker, peak"), (2, "stops paying at 2 workers, peak")):
        tuned = dataclasses.replace(record.tuned, knee=dataclasses.replace(record.knee, stops_paying=workers))
        assert said in table(dataclasses.replace(record, tuned=tuned), saved=False)


def test_the_pages_final_shows_the_opening_round_and_both_medians():
    # The choice ranks over every paired round, the opening's too; the page shows that median
    # beside the final's own, and the opening reading first among the rates.
    record = TuneResult.from_dict(synthetic_result())
    pick, rule = record.finals
    opened = (dataclasses.replace(pick, rates=(367.0, 1307.0), opening=1354.0),
              dataclasses.replace(rule, rates=(986.0, 775.0), opening=768.0))
    record = dataclasses.replace(record, finals=opened)
    page = render_markdown(record, explain(record), {})
    final = page.split("### The interleaved final", 1)[1]
    assert "| rates per round | median | median over every round |" in final
    assert "1,354/s (opening), 367/s, 1,307/s" in final.replace(" samples", "")
    assert "which is what the choice ranks by" in final
