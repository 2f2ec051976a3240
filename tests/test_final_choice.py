"""Who wins the interleaved final: the tie rules, including NOTE [ Keeping up ] (a config the
consumer never waits on ties a best a few percent ahead), and the rule."""

from autoloader.search.choice import Finalist, choose
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig


def cfg(workers, pin=True, persistent=True, prefetch=2):
    return LoaderConfig(128, workers, pin, prefetch if workers else None, persistent if workers else False)


def trial(config, rate, wait):
    return TrialResult(config, OK, samples_per_s=rate, rel_interval=0.05, wait_fraction=wait)


# A GPU-bound step: every config with workers keeps the consumer fed (waits about 1%).
GPUBOUND = [trial(cfg(16), 2980.0, 0.009), trial(cfg(0), 1677.0, 0.534), trial(cfg(8), 2747.0, 0.009),
            trial(cfg(12), 2879.0, 0.014), trial(cfg(24), 2787.0, 0.013), trial(cfg(4), 2700.0, 0.008)]


def test_a_config_that_keeps_up_ties_a_best_within_the_keeps_up_tie():
    finals = [Finalist(cfg(16), (2745.0, 2903.0), (0.009, 0.01)),
              Finalist(cfg(24), (3067.0, 2962.0), (0.012, 0.013)),
              Finalist(cfg(4), (2950.0, 2900.0), (0.008, 0.009))]   # 3% behind the best
    assert choose(finals, GPUBOUND).config == cfg(4)


def test_a_best_that_waits_is_not_tied_by_a_config_that_keeps_up():
    # The best is loader-bound (it waits 30%), so a 3% gap to one that keeps up is no noise.
    finals = [Finalist(cfg(24), (3067.0, 2962.0), (0.3, 0.3)),
              Finalist(cfg(4), (2950.0, 2900.0), (0.008, 0.009))]
    assert choose(finals, GPUBOUND).config == cfg(24)


def test_a_config_that_waits_must_be_within_the_narrow_tie():
    finals = [Finalist(cfg(24), (3067.0, 2962.0), (0.012, 0.013)),
              Finalist(cfg(4), (2950.0, 2900.0), (0.10, 0.12))]     # the same rates, but it waits
    assert choose(finals, GPUBOUND).config == cfg(24)


def test_keeping_up_does_not_excuse_a_gap_past_the_keeps_up_tie():
    finals = [Finalist(cfg(24), (3067.0, 2962.0), (0.012, 0.013)),
              Finalist(cfg(4), (2800.0, 2820.0), (0.008, 0.009))]   # 6.8% behind
    assert choose(finals, GPUBOUND).config == cfg(24)


def test_keeping_up_ties_only_configs_that_share_pinning_and_persistence():
    # Pinning changes the step's copies and persistence the epoch restarts, which a steady
    # window's waits do not see: those still need the narrow tie.
    history = GPUBOUND + [trial(cfg(4, pin=False), 2700.0, 0.008), trial(cfg(4, persistent=False), 2700.0, 0.008)]
    for other in (cfg(4, pin=False), cfg(4, persistent=False)):
        finals = [Finalist(cfg(24), (3067.0, 2962.0), (0.012, 0.013)),
                  Finalist(other, (2950.0, 2900.0), (0.008, 0.009))]
        assert choose(finals, history).config == cfg(24)


def test_within_the_narrow_tie_the_cheaper_config_wins_whatever_it_waits():
    finals = [Finalist(cfg(24), (3000.0, 3010.0), (0.3, 0.3)),
              Finalist(cfg(16), (2960.0, 2980.0), (0.3, 0.3))]      # 1% behind
    assert choose(finals, GPUBOUND).config == cfg(16)


def test_the_rule_wins_when_the_candidates_are_not_clearly_better():
    # The cpus-1 rule (15 workers) against dearer candidates 1% and 1.5% ahead: a tie, and the
    # rule is the cheaper config.
    rule = Finalist(cfg(15), (3000.0, 3010.0, 2990.0), (0.3, 0.3, 0.3))
    finals = [Finalist(cfg(24), (3030.0, 3040.0, 3020.0), (0.3, 0.3, 0.3)),
              Finalist(cfg(16, prefetch=8), (3045.0, 3050.0, 3040.0), (0.3, 0.3, 0.3)), rule]
    assert choose(finals, GPUBOUND).config == cfg(15)


def test_a_candidate_clearly_ahead_of_the_rule_wins():
    rule = Finalist(cfg(15), (3000.0, 3010.0, 2990.0), (0.3, 0.3, 0.3))
    ahead = Finalist(cfg(24, prefetch=8), (3200.0, 3190.0, 3210.0), (0.2, 0.2, 0.2))   # 6.6% ahead
    assert choose([ahead, rule], GPUBOUND).config == cfg(24, prefetch=8)


def test_a_cheaper_candidate_that_ties_the_rule_wins():
    rule = Finalist(cfg(15), (3000.0, 3010.0, 2990.0), (0.3, 0.3, 0.3))
    cheaper = Finalist(cfg(8), (2990.0, 2985.0, 2995.0), (0.3, 0.3, 0.3))   # 0.3% behind, 7 workers fewer
    assert choose([rule, cheaper], GPUBOUND).config == cfg(8)


def test_after_a_single_round_the_rule_stands_unless_clearly_beaten():
    # One round shows no spread: 4.5% ahead, and cheaper, is still within one burst's noise.
    rule = Finalist(cfg(15), (728.0,), (0.97,))
    cheaper = Finalist(cfg(0), (761.0,), (0.98,))
    assert choose([cheaper, rule], GPUBOUND, rule=cfg(15)).config == cfg(15)
    far_ahead = Finalist(cfg(0), (1200.0,), (0.98,))   # 65% ahead: no noise reaches that
    assert choose([far_ahead, rule], GPUBOUND, rule=cfg(15)).config == cfg(0)
    # With two rounds or more, the usual ties decide.
    two = [Finalist(cfg(0), (761.0, 770.0), (0.98, 0.98)), Finalist(cfg(15), (728.0, 730.0), (0.97, 0.97))]
    assert choose(two, GPUBOUND, rule=cfg(15)).config == cfg(0)


def test_without_time_for_a_final_the_bursts_count_as_one_round_against_the_rule():
    history = [trial(cfg(15), 3000.0, 0.3), trial(cfg(4), 3100.0, 0.3), trial(cfg(24), 3600.0, 0.3)]
    assert choose([], history[:2], rule=cfg(15)).config == cfg(15)    # 3% ahead: noise
    assert choose([], history, rule=cfg(15)).config == cfg(24)        # 20% ahead
    assert choose([], history[:2]).config == cfg(4)                       # no rule: the bursts


def test_a_cheaper_config_that_a_round_put_ahead_ties_a_best_within_the_disagree_tie():
    # NOTE [ Rounds that disagree ]: 64 workers lead 56 by 2.1% in median, but round 2 put 56
    # ahead, so the gap is the rounds' noise and the cheaper config wins.
    wide = [Finalist(cfg(64), (6286.0, 6521.0), (0.29, 0.30)), Finalist(cfg(56), (5980.0, 6560.0), (0.30, 0.31))]
    assert choose(wide, GPUBOUND).config == cfg(56)


def test_a_best_ahead_in_every_round_is_clearly_better():
    finals = [Finalist(cfg(48), (9351.0, 8854.0), (0.27, 0.29)), Finalist(cfg(15), (8460.0, 8527.0), (0.39, 0.38))]
    assert choose(finals, GPUBOUND).config == cfg(48)
    # Disagreement excuses no more than the disagree tie (7% behind in median).
    far = [Finalist(cfg(48), (9351.0, 9300.0, 9400.0), (0.27,) * 3),
           Finalist(cfg(15), (8300.0, 9400.0, 8700.0), (0.39,) * 3)]
    assert choose(far, GPUBOUND).config == cfg(48)
    # Nor does it tie configs of another kind (unpinned against pinned).
    other = [Finalist(cfg(64), (6286.0, 6521.0), (0.29, 0.30)),
             Finalist(cfg(56, pin=False), (5980.0, 6560.0), (0.30, 0.31))]
    assert choose(other, GPUBOUND + [trial(cfg(56, pin=False), 6000.0, 0.3)]).config == cfg(64)


def test_rounds_are_paired_by_their_index_when_a_burst_failed():
    # 56 workers lost its first round, so its readings are rounds 1 and 2.
    best = Finalist(cfg(64), (6286.0, 6521.0, 6400.0), (0.3,) * 3, rounds=(0, 1, 2))
    cheaper = Finalist(cfg(56), (6100.0, 6200.0), (0.3,) * 2, rounds=(1, 2))
    assert choose([best, cheaper], GPUBOUND).config == cfg(64)       # behind in rounds 1 and 2
    cheaper = Finalist(cfg(56), (6530.0, 5900.0), (0.3,) * 2, rounds=(1, 2))
    assert choose([best, cheaper], GPUBOUND).config == cfg(56)       # ahead in round 1
    shifted = Finalist(cfg(56), (6290.0, 6100.0), (0.3,) * 2, rounds=(1, 2))
    # Paired by position (rounds 0 and 1) it would lead 6,286; by round it trails in both.
    assert choose([best, shifted], GPUBOUND).config == cfg(64)


# --- the memory ceiling in the final (issue 31) --------------------------------------------------

def test_no_config_forecast_past_the_ceiling_is_in_the_final_the_rule_and_the_previous_pick_included():
    """A config the final measures can win: one whose forecast is past the ceiling (the bursts
    since its own taught the growth) stays out, whoever put it there."""
    from autoloader.tuning.final import final_configs

    pick, other, rule, previous = cfg(2), cfg(3), cfg(7), cfg(5)
    history = [trial(c, 1000.0 + c.num_workers, 0.1) for c in (pick, other, rule)]
    past = {rule, previous}
    chosen = final_configs([pick, other, rule], rule, previous, history, lambda c: c not in past)
    assert chosen == [pick, other]
    assert final_configs([pick, other, rule], rule, previous, history) == [pick, other, previous, rule]


def test_the_table_says_the_rule_was_kept_out_of_the_final_by_its_forecast(tmp_path):
    import json

    from explain_cases import synthetic_result

    from autoloader.store.result import TuneResult
    from autoloader.tuning.progress import rule_line, table

    data = synthetic_result(str(tmp_path / "r.json"))
    rule = data["rule"]
    data["finals"] = [f for f in data["finals"] if f["config"] != rule]
    data["rule_samples_per_s"] = None
    ceiling = int(1.2 * 2**30)
    data["inputs"] = {**data["inputs"], "max_memory": ceiling}
    from autoloader.search.memory import MEASURED_PEAK, MemoryForecast
    from autoloader.search.space import LoaderConfig

    def forecast(config: dict, host: float) -> dict:
        return MemoryForecast(LoaderConfig.from_dict(config), MEASURED_PEAK, int(host * 2**30), 0,
                              int(host * 2**30)).to_dict()

    data["memory"] = {"pick": forecast(data["config"], 1.0), "rule": forecast(rule, 1.5), "finding": None}
    result = TuneResult.from_dict(json.loads(json.dumps(data)))
    line = rule_line(result)
    assert line.startswith("the rule's forecast 1.50 GiB is past the 1.20 GiB ceiling: not measured in the final")
    assert line in table(result)


def test_the_choice_ranks_over_every_paired_round_the_openings_too():
    # The GPU bench's hugefloat (run-20261204b, call 7): the pick without workers read 1,354/s in
    # the opening round, then 367/s (one disturbed reading) and 1,307/s; the rule 768, 986 and
    # 775/s. The final's two rounds alone have medians 837 and 880/s, which handed back the rule;
    # over the three rounds the pick leads, 1,307 against 775/s.
    pick, rule = cfg(0, pin=True), cfg(15, pin=True)
    finals = [Finalist(pick, (367.0, 1307.0), (0.99, 0.97), opening=1354.0),
              Finalist(rule, (986.0, 775.0), (0.9, 0.9), opening=768.0)]
    history = [trial(pick, 1354.0, 0.98), trial(rule, 768.0, 0.9)]
    assert choose(finals, history, rule=rule).config == pick
    # The report's median stays that of the final's own rounds (the model is checked against it).
    assert finals[0].median == (367.0 + 1307.0) / 2 and finals[0].round_median == 1307.0
    # Without the opening the final's two rounds are all there is, and they decide as before.
    bare = [Finalist(f.config, f.rates, f.waits) for f in finals]
    assert choose(bare, history, rule=rule).config == rule


# --- past the cores (NOTE [ Past the cores ] in choice.py) -----------------------------------------

def test_a_pick_past_the_cores_stands_only_beaten_past_the_noise():
    """On 2 CPUs, 8 workers read a little ahead of 2 in rounds that disagree: a tie, and the cores
    win it. Read clearly ahead in every round, the 8 workers stand."""
    two, eight, one = cfg(2), cfg(8), cfg(1)
    close = [Finalist(eight, (330.0, 316.0, 335.0)), Finalist(two, (320.0, 325.0, 318.0)),
             Finalist(one, (250.0, 255.0, 252.0))]
    assert choose(close, [], rule=one, cpus=2).config == two
    clear = [Finalist(eight, (400.0, 410.0, 405.0)), Finalist(two, (320.0, 325.0, 318.0)),
             Finalist(one, (250.0, 255.0, 252.0))]
    assert choose(clear, [], rule=one, cpus=2).config == eight


def test_a_pick_past_the_cores_without_num_workers_cpus_measured_is_not_handed_back():
    """The issue's nightly run: w0, w1 and w8 measured on 2 CPUs, w2 never; w8 read best. The
    pick is one of those within the cores that ran, never w8 beside an unmeasured w2."""
    zero, one, eight = cfg(0), cfg(1), cfg(8)
    finals = [Finalist(eight, (330.0, 335.0, 332.0)), Finalist(one, (300.0, 303.0, 301.0))]
    history = [trial(zero, 200.0, 0.5), trial(one, 300.0, 0.1), trial(eight, 330.0, 0.1)]
    assert choose(finals, history, rule=one).config == eight
    assert choose(finals, history, rule=one, cpus=2).config == one


def test_without_a_final_a_burst_past_the_cores_needs_the_margin_over_num_workers_cpus():
    zero, two, eight = cfg(0), cfg(2), cfg(8)
    history = [trial(zero, 200.0, 0.5), trial(two, 320.0, 0.1), trial(eight, 330.0, 0.1)]
    assert choose([], history, cpus=2).config == two
    far = [trial(zero, 200.0, 0.5), trial(two, 320.0, 0.1), trial(eight, 400.0, 0.1)]
    assert choose([], far, cpus=2).config == eight


def test_a_pick_past_the_cores_not_beaten_past_the_noise_gives_way_to_num_workers_cpus():
    """w2 ran only in the search (a burst), the final held w8 and the rule: w8 was never held
    against w2, so w2 is the pick, not the rule within the cores."""
    zero, one, two, eight = cfg(0), cfg(1), cfg(2), cfg(8)
    finals = [Finalist(eight, (330.0, 335.0, 332.0)), Finalist(one, (300.0, 303.0, 301.0))]
    history = [trial(zero, 200.0, 0.5), trial(one, 300.0, 0.1), trial(two, 325.0, 0.1), trial(eight, 330.0, 0.1)]
    assert choose(finals, history, rule=one, cpus=2).config == two


def test_a_pick_past_the_cores_beyond_what_num_workers_cpus_could_read_stands():
    """A dataset whose workers wait (I/O), a short budget: w0 and w1 ran, w8 read 6x w1, w2 never
    ran. w2 could read at most twice w1's rate, which w8 is far past: w8 stands. Within that bound
    the choice stays within the cores."""
    zero, one, eight = cfg(0), cfg(1), cfg(8)
    history = [trial(zero, 844.0, 1.0), trial(one, 816.0, 1.0), trial(eight, 5097.0, 1.0)]
    assert choose([], history, rule=one, cpus=2).config == eight, "no final: the bursts alone"
    finals = [Finalist(eight, (5000.0, 5100.0)), Finalist(one, (809.0, 820.0))]
    assert choose(finals, history, rule=one, cpus=2).config == eight
    near = [trial(zero, 844.0, 1.0), trial(one, 816.0, 1.0), trial(eight, 1700.0, 1.0)]
    assert choose([], near, rule=one, cpus=2).config.num_workers <= 2
    assert choose([Finalist(eight, (1700.0, 1710.0)), Finalist(one, (809.0, 820.0))], near, rule=one,
                  cpus=2).config.num_workers <= 2
