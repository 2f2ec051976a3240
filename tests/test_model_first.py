"""The model-first search on synthetic pipelines: what it measures, when it stops, who reaches the
final, and that out-of-order delivery is never implied."""

import random

import pytest

from autoloader.search.model import Model
from autoloader.search.model_first import (
    ModelFirst,
    candidates,
    heuristic_config,
    worker_ladder,
)
from autoloader.search.policy import HEADROOM_BUSY, MAX_SEARCH_TRIALS, PREDICTED_TIE
from autoloader.search.profile import Profile
from autoloader.search.results import FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig, search_space

CPUS = 8


def profile(sample_s=0.002, step_s=0.004, tail=None, cpus=CPUS):
    rng = random.Random(0)
    costs = [sample_s * rng.uniform(0.9, 1.1) for _ in range(128)]
    if tail:
        costs = [tail[1] if rng.random() < tail[0] else c for c in costs]
    return Profile(batch_size=32, sample_s=tuple(costs), collate_s=0.0005, sample_bytes=4096, recv_s=0.0002,
                   pin_s=0.0005, h2d_pinned_s=0.0003, h2d_pageable_s=0.002, step_s=step_s, startup_s=0.2,
                   worker_pss=50 << 20, cpus=cpus, epoch_batches=500)


def search(truth: Model, guess: Model, allow_reorder=False, fail=()):
    """Run the strategy against ``truth``'s rates (a stand-in for bursts) until it stops."""
    space = search_space((32,), CPUS, "cuda", unlocked=("allow_reorder",) if allow_reorder else ())
    strategy = ModelFirst(space, guess, CPUS)
    history = []
    while (config := strategy.propose(history)) is not None:
        assert config not in {t.config for t in history}
        if config in fail:
            history.append(TrialResult(config, FAILED, cause="dataset_error", error="boom"))
            continue
        p = truth.predict(config)
        history.append(TrialResult(config, OK, samples_per_s=p.samples_per_s,
                                   steady_samples_per_s=p.steady_samples_per_s, wait_fraction=p.wait_share))
    return strategy, history


@pytest.mark.slow
def test_it_measures_no_workers_then_the_rule_then_the_corrected_models_pick():
    model = Model(profile(), "cuda")
    strategy, history = search(model, model)
    configs = [t.config for t in history]
    assert configs[0].num_workers == 0
    assert configs[1] == heuristic_config(strategy.space, CPUS)
    assert configs[2] == strategy.pick(strategy.predictions(history[:2])).config


@pytest.mark.slow
def test_a_profile_pick_the_rules_burst_rules_out_is_never_measured():
    # The profile timed the pin thread 6x too cheap (a dozen busy workers slow it): its pick
    # wants many workers, but the rule's burst shows the pin thread caps them below no workers.
    def big(pin_s):
        p = profile(sample_s=0.002, step_s=0.0001)
        return Model(Profile(**{**p.__dict__, "sample_bytes": 3 << 20, "recv_s": 0.002, "pin_s": pin_s,
                                "pin_local_s": 0.005, "h2d_pinned_s": 0.004, "h2d_pageable_s": 0.04}), "cuda")
    truth, guess = big(0.06), big(0.01)
    profile_pick = ModelFirst(search_space((32,), CPUS, "cuda"), guess, CPUS)
    first = profile_pick.pick(profile_pick.predictions([])).config
    strategy, history = search(truth, guess)
    assert first.num_workers > 0 and first != strategy.rule
    assert first not in [t.config for t in history]
    best = max(history, key=lambda t: t.samples_per_s)
    truth_best = max(truth.predict(c).samples_per_s for c in strategy.configs)
    assert best.samples_per_s >= truth_best * 0.97


@pytest.mark.slow
def test_a_model_the_bursts_confirm_ends_the_search_early():
    model = Model(profile(), "cuda")
    _, history = search(model, model)
    assert len(history) <= 5 < MAX_SEARCH_TRIALS


@pytest.mark.slow
def test_a_model_that_is_off_is_corrected_and_its_new_pick_measured():
    # The profile read samples 2x too cheap (a worker is slower than the trial process was).
    truth, guess = Model(profile(sample_s=0.004, step_s=0.002), "cuda"), Model(profile(sample_s=0.002, step_s=0.002), "cuda")
    strategy, history = search(truth, guess)
    calib = strategy.calibration(history)
    assert 1.6 < calib.worker < 2.5
    truth_pick = min((truth.predict(c) for c in strategy.configs), key=lambda p: -p.samples_per_s)
    measured_best = max(t.samples_per_s for t in history)
    assert measured_best >= truth_pick.samples_per_s * 0.97


@pytest.mark.slow
def test_the_rule_is_always_a_finalist():
    model = Model(profile(step_s=0.05), "cuda")   # the step caps everything: the rule ties
    strategy, history = search(model, model)
    finalists = strategy.finalists(history)
    assert strategy.rule in finalists and 2 <= len(finalists) <= 4


@pytest.mark.slow
def test_the_pick_is_the_fewest_workers_with_headroom_predicted_within_the_tie_of_the_best():
    model = Model(profile(step_s=0.02), "cuda")   # 2 ms x 32 = 64 ms a batch: 4 workers keep up
    strategy = ModelFirst(search_space((32,), CPUS, "cuda"), model, CPUS)
    predictions = strategy.predictions([])
    top = max(p.samples_per_s for p in predictions)
    within = [p for p in predictions if p.samples_per_s >= top * (1 - PREDICTED_TIE)]
    fewest = min(within, key=lambda p: p.config.cost())
    assert 3 <= fewest.config.num_workers <= 5 and fewest.bound == "consumer"
    # The step sets the pace: the pick's workers could make twice what it takes (NOTE [ Headroom ]).
    pick = strategy.pick(predictions)
    assert pick.workers_busy <= HEADROOM_BUSY < fewest.workers_busy
    assert pick == min((p for p in within if p.workers_busy <= HEADROOM_BUSY), key=lambda p: p.config.cost())
    assert pick.config.persistent_workers and pick.config.in_order


@pytest.mark.slow
def test_out_of_order_delivery_is_never_implied():
    assert all(c.in_order for c in candidates(search_space((32,), CPUS, "cuda"), CPUS))
    assert any(not c.in_order for c in candidates(search_space((32,), CPUS, "cuda", ("allow_reorder",)), CPUS))
    heavy = Model(profile(sample_s=0.0005, step_s=0.0005, tail=(0.03, 0.04)), "cuda")
    _, history = search(heavy, heavy)
    assert all(t.config.in_order for t in history)


@pytest.mark.slow
def test_a_config_that_failed_is_not_proposed_again_and_the_search_goes_on():
    model = Model(profile(), "cuda")
    rule = heuristic_config(search_space((32,), CPUS, "cuda"), CPUS)
    _, history = search(model, model, fail=(rule,))
    assert sum(t.config == rule for t in history) == 1
    assert any(t.status == OK for t in history)


def test_the_worker_ladder_covers_each_count_to_the_cpus_then_steps():
    assert worker_ladder(8, 32) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 28, 32]
    assert worker_ladder(2, 8) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert LoaderConfig.make(32, 7, True, 2, True) == heuristic_config(search_space((32,), 8, "cuda"), 8)


def test_the_pick_counts_as_unmeasured_until_its_burst_and_only_when_it_would_beat_what_was_measured():
    model = Model(profile(), "cuda")
    strategy = ModelFirst(search_space((32,), CPUS, "cuda"), model, CPUS)
    baseline = strategy.propose([])
    p = model.predict(baseline)
    history = [TrialResult(baseline, OK, samples_per_s=p.samples_per_s, steady_samples_per_s=p.steady_samples_per_s,
                           wait_fraction=p.wait_share)]
    pick = strategy.pick(strategy.predictions(history, strategy.calibration(history)))
    assert pick.config != baseline and strategy.pick_unmeasured(history), "a pick predicted faster, not yet measured"
    measured = history + [TrialResult(pick.config, OK, samples_per_s=pick.samples_per_s,
                                      steady_samples_per_s=pick.steady_samples_per_s, wait_fraction=pick.wait_share)]
    assert not strategy.pick_unmeasured(measured)


def test_the_settings_what_if_is_measured_once_the_pick_is():
    # NOTE [ Model first ], 6: pinning off needs no code, so a burst of it sets a measured gain
    # beside the report's predicted one; one a run, and only after the pick's own burst.
    space = search_space((32,), CPUS, "cuda")
    search = ModelFirst(space, Model(profile(), "cuda"), CPUS)
    pick = search.pick(search.predictions([])).config
    assert search.settings_probe([], search.predictions([])) is None          # the pick not measured yet
    rate = search.model.predict(pick).samples_per_s   # as predicted: the calibration stays put
    measured = [TrialResult(pick, OK, samples_per_s=rate, steady_samples_per_s=rate)]
    probe = search.settings_probe(measured, search.predictions(measured))
    assert probe == pick.replace(pin_memory=False) and space.contains(probe)
    both = measured + [TrialResult(probe, OK, samples_per_s=0.9 * rate)]
    assert search.settings_probe(both, search.predictions(both)) is None
    assert probe.in_order   # out of order is not in a space the user did not open to it


class Scripted(ModelFirst):
    """The strategy over a scripted curve: each config's predicted rate from ``rate(workers)``."""

    def __init__(self, rate, fits):
        super().__init__(search_space((32,), CPUS, "cuda"), Model(profile(), "cuda"), CPUS, fits=fits)
        self.rate = rate

    def predictions(self, history, calib=None, feasible=True):
        from autoloader.search.model import Prediction

        return [Prediction(c, self.rate(c), self.rate(c), 0.0, "workers", 0.0) for c in self.configs
                if self._usable(c, history) and (not feasible or self.fits(c, history))]


def test_the_best_config_whatever_its_memory_comes_first_only_when_it_does_not_fit():
    # A slowly rising curve: the cheapest within the tie of the top (8 workers, which do not fit)
    # is 6 workers, which fit; the pick of those that fit is 5. Nothing is recorded unrun then:
    # the baseline comes first, as in any run.
    curve = {0: 0.5, 1: 0.6, 2: 0.8, 3: 0.9, 4: 0.97, 5: 0.985, 6: 0.992, 7: 1.0, 8: 1.01}
    rate = lambda c: 1000.0 * curve[min(c.num_workers, 8)] * (0.999 if c.pin_memory else 1.0)  # noqa: E731
    six = Scripted(rate, fits=lambda c, h: c.num_workers <= 6)
    assert six.pick(six.predictions([], feasible=False)).config.num_workers == 6
    assert six.pick(six.predictions([])).config.num_workers == 5
    assert six.propose([]).num_workers == 0
    # Where that config does not fit, it comes first, to be recorded as predicted past the limit.
    five = Scripted(rate, fits=lambda c, h: c.num_workers <= 5)
    first = five.propose([])
    assert first.num_workers == 6 and not five.fits(first, [])


def test_a_prediction_in_doubt_is_burst_at_its_cheapest():
    # A curve that rises a hair past 2 workers, every count within the tie, and every prediction
    # could clear the pick over the uncorrected terms: the doubt's burst is the fewest workers
    # of them, not the most (each rests on the same terms; a burst of more workers costs more).
    rate = lambda c: 500.0 if c.num_workers < 2 else 1000.0 + 0.1 * c.num_workers  # noqa: E731
    strategy = Scripted(rate, fits=lambda c, h: True)
    strategy.model.rate_range = lambda config, calib: (0.8 * rate(config), 1.5 * rate(config))
    pick = strategy.pick(strategy.predictions([])).config
    assert pick.num_workers == 2
    measured = [TrialResult(c, OK, samples_per_s=rate(c), steady_samples_per_s=rate(c))
                for c in (strategy.space.default_config(0), strategy.rule, pick)]
    doubt = strategy.propose(measured)
    near = [p.config for p in strategy.predictions(measured) if p.config not in {t.config for t in measured}
            and p.samples_per_s >= 0.95 * max(rate(c) for c in strategy.configs)]
    assert doubt == min(near, key=lambda c: c.cost())
    assert doubt.num_workers == 2 and doubt != pick
    # And one doubt a run: a second rests on the same unknown.
    assert strategy.propose(measured + [TrialResult(doubt, OK, samples_per_s=rate(doubt))]) is None


def test_another_config_challenges_the_pick_in_the_final_only_from_past_a_rounds_margin():
    # Every count from 2 workers up predicted within the tie: the pick is 2. A burst of 4 that
    # read 5% above the pick's is within what one burst's rate moves, and a third finalist costs
    # every round: the final holds the pick and the rule. One that read 15% above challenges it.
    from autoloader.search.model import Prediction
    from autoloader.search.policy import SINGLE_ROUND_MARGIN

    rate = lambda c: 500.0 if c.num_workers < 2 else 1000.0 + 0.1 * c.num_workers  # noqa: E731
    strategy = Scripted(rate, fits=lambda c, h: True)
    strategy.calibration = lambda history: None
    strategy.model.predict = lambda c, calib=None: Prediction(c, rate(c), rate(c), 0.0, "workers", 0.0)
    pick = strategy.pick(strategy.predictions([])).config
    four = pick.replace(num_workers=4)
    assert pick.num_workers == 2 and four != strategy.rule

    def finalists(four_reads):
        bursts = {strategy.space.default_config(0): 500.0, strategy.rule: 1000.0, pick: 1000.0,
                  four: 1000.0 * four_reads}
        return strategy.finalists([TrialResult(c, OK, samples_per_s=r, steady_samples_per_s=r)
                                   for c, r in bursts.items()])

    assert 1.05 < 1.0 + SINGLE_ROUND_MARGIN < 1.15
    assert finalists(1.05) == [pick, strategy.rule]
    assert finalists(1.15) == [pick, four, strategy.rule]


def test_a_loose_burst_level_with_the_pick_goes_to_the_final():
    """The issue's held-out run: the pick's burst read 318/s ±2% and another's 326/s ±26%, within
    SINGLE_ROUND_MARGIN, yet its interval reaches far past it: it joins the final, where the cheaper
    would otherwise have won it as a tie without reading it again (NOTE [ Loose readings ]). The
    same point read tightly stays out, and so does a loose one well behind the pick."""
    from autoloader.search.model import Prediction

    rate = lambda c: 500.0 if c.num_workers < 2 else 1000.0 + 0.1 * c.num_workers  # noqa: E731
    strategy = Scripted(rate, fits=lambda c, h: True)
    strategy.calibration = lambda history: None
    strategy.model.predict = lambda c, calib=None: Prediction(c, rate(c), rate(c), 0.0, "workers", 0.0)
    pick = strategy.pick(strategy.predictions([])).config
    four = pick.replace(num_workers=4)

    def finalists(four_reads, four_interval):
        history = [TrialResult(strategy.space.default_config(0), OK, samples_per_s=150.0, rel_interval=0.02),
                   TrialResult(strategy.rule, OK, samples_per_s=300.0, rel_interval=0.02),
                   TrialResult(pick, OK, samples_per_s=318.0, rel_interval=0.02),
                   TrialResult(four, OK, samples_per_s=four_reads, rel_interval=four_interval)]
        return strategy.finalists(history)

    assert finalists(326.0, 0.26) == [pick, four, strategy.rule]
    assert finalists(326.0, 0.03) == [pick, strategy.rule]
    assert finalists(300.0, 0.26) == [pick, strategy.rule]   # 6% behind: no tie to call


def test_a_loose_burst_challenges_a_pick_that_is_the_rule():
    from autoloader.search.space import LoaderConfig
    from autoloader.tuning.final import final_configs

    rule, two = LoaderConfig(32, 1, False, 2, True), LoaderConfig(32, 2, False, 2, True)
    history = [TrialResult(rule, OK, samples_per_s=318.0, rel_interval=0.02),
               TrialResult(two, OK, samples_per_s=326.0, rel_interval=0.26)]
    assert final_configs([two, rule], rule, None, history, pick=rule) == [two, rule]
    tight = [history[0], TrialResult(two, OK, samples_per_s=326.0, rel_interval=0.03)]
    assert final_configs([two, rule], rule, None, tight, pick=rule) == []


def past_the_cores(workers):
    """A curve that still rises past the 8 CPUs: 12 workers read 10% above 8."""
    return 1000.0 * min(workers, 8) / 8 + (100.0 if workers >= 12 else 0.0)


def scripted_past_the_cores():
    from autoloader.search.model import Prediction

    strategy = Scripted(lambda c: past_the_cores(c.num_workers), fits=lambda c, h: True)
    strategy.calibration = lambda history: None
    strategy.model.predict = lambda c, calib=None: Prediction(  # noqa: E731
        c, past_the_cores(c.num_workers), past_the_cores(c.num_workers), 0.0, "workers", 0.0)
    strategy.model.rate_range = lambda c, calib: (past_the_cores(c.num_workers),) * 2  # noqa: E731
    return strategy


def test_a_pick_past_the_cores_has_num_workers_cpus_measured_and_in_the_final():
    strategy = scripted_past_the_cores()
    pick = strategy.pick(strategy.predictions([])).config
    assert pick.num_workers == 12
    cores = pick.replace(num_workers=CPUS)
    history = []
    while (config := strategy.propose(history)) is not None and len(history) < 6:
        history.append(TrialResult(config, OK, samples_per_s=past_the_cores(config.num_workers), rel_interval=0.02))
    measured = [t.config for t in history]
    assert cores in measured and measured.index(cores) == measured.index(pick) + 1
    assert strategy.finalists(history)[:2] == [pick, cores]
    assert strategy.at_cores(cores) is None and strategy.cpus == CPUS


def test_a_warm_pick_past_the_cores_measures_num_workers_cpus_before_it_stops():
    from autoloader.search.model_first import Warmed, WarmStart

    strategy = scripted_past_the_cores()
    pick = strategy.space.default_config(12)
    warmed = Warmed(strategy, WarmStart(pick, 1100.0, 0.02, may_stop=True), strategy.space)
    history = []
    while (config := warmed.propose(history)) is not None and len(history) < 8:
        history.append(TrialResult(config, OK, samples_per_s=past_the_cores(config.num_workers), rel_interval=0.02))
    assert pick.replace(num_workers=CPUS) in [t.config for t in history]
    assert warmed.cpus == CPUS
