"""Who reaches the final and who wins it: the tie rules of the interleaved final, including
NOTE [ Keeping up ] (a config the consumer never waits on ties a best a few percent ahead)."""

from autoloader.results import OK, TrialResult
from autoloader.space import LoaderConfig
from autoloader.choice import Finalist, choose, finalists


def cfg(workers, pin=True, persistent=True, prefetch=2):
    return LoaderConfig(128, workers, pin, prefetch if workers else None, persistent if workers else False)


def trial(config, rate, wait):
    return TrialResult(config, OK, samples_per_s=rate, rel_interval=0.05, wait_fraction=wait)


# gpubound's tuner on the H200 (run-20261129, part5), with 4 workers as the look down would add.
GPUBOUND = [trial(cfg(16), 2980.0, 0.009), trial(cfg(0), 1677.0, 0.534), trial(cfg(8), 2747.0, 0.009),
            trial(cfg(12), 2879.0, 0.014), trial(cfg(24), 2787.0, 0.013), trial(cfg(4), 2700.0, 0.008)]


def test_the_cheapest_config_that_keeps_up_reaches_the_final_though_behind_by_burst():
    chosen = finalists(GPUBOUND)
    assert cfg(4) in chosen
    assert chosen[:2] == [cfg(16), cfg(12)]


def test_both_tie_candidates_reach_the_final_before_the_third_by_burst():
    # Three distinct top configs, a keeping-up one and an unpinned one within 5% (the cheapest):
    # the two tie candidates take the places after the top two.
    history = [trial(cfg(16), 3000.0, 0.3), trial(cfg(12), 2990.0, 0.3), trial(cfg(24), 2980.0, 0.3),
               trial(cfg(8, pin=False), 2900.0, 0.3), trial(cfg(4), 2750.0, 0.01)]
    assert finalists(history) == [cfg(16), cfg(12), cfg(4), cfg(8, pin=False)]


def test_a_keeping_up_config_far_behind_or_pruned_is_no_finalist():
    far = GPUBOUND[:5] + [trial(cfg(4), 1500.0, 0.008)]     # half the best: not noise
    pruned = GPUBOUND[:5] + [TrialResult(cfg(4), OK, samples_per_s=2700.0, wait_fraction=0.008, pruned=True)]
    assert cfg(4) not in finalists(far)
    assert cfg(4) not in finalists(pruned)


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
