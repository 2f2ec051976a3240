"""The default strategy on synthetic throughput curves: it must find the knee in few trials,
stay below a worker count that broke, and never propose a config twice."""

import pytest

from autoloader.knee import find_knee
from autoloader.knee_first import KneeFirst
from autoloader.results import FAILED, OK, TrialResult
from autoloader.space import SearchSpace


def drive(cpus, rate_of, pins=(True, False), limit=60, rel_of=lambda config: None, wait_of=lambda config: None):
    """Run the strategy to the end against ``rate_of(config)`` (None = the trial broke), each
    burst with the relative 95% half-width ``rel_of(config)`` and the consumer's wait fraction
    ``wait_of(config)``."""
    strategy = KneeFirst(SearchSpace((128,), 4 * cpus, pins), cpus)
    history = []
    while len(history) < limit:
        config = strategy.propose(history)
        if config is None:
            break
        assert config not in {t.config for t in history}, "a config was proposed twice"
        rate = rate_of(config)
        history.append(TrialResult(config, OK if rate else FAILED, samples_per_s=rate,
                                   rel_interval=rel_of(config), wait_fraction=wait_of(config),
                                   cause=None if rate else "worker_killed"))
    assert len(history) < limit, "the strategy did not stop"
    return strategy, history


def saturating(knee_workers, per_worker=300.0):
    return lambda c: per_worker * min(c.num_workers, knee_workers) + per_worker


@pytest.mark.parametrize("cpus, knee_workers", [(16, 6), (16, 11), (16, 16), (8, 3), (2, 1)])
def test_finds_the_knee_of_a_saturating_curve_within_the_resolution(cpus, knee_workers):
    strategy, history = drive(cpus, saturating(knee_workers))
    found = find_knee(strategy.curve(history)).stops_paying
    assert abs(found - knee_workers) <= strategy.resolution
    # Far fewer trials than a sweep of every worker count and every other setting.
    assert len(history) <= 16


def test_a_flat_curve_ends_quickly_at_no_workers():
    strategy, history = drive(16, lambda c: 3000.0)
    assert find_knee(strategy.curve(history)).stops_paying == 0
    assert len(history) <= 5


def test_a_peak_between_none_and_all_cpus_is_found():
    # 0 and 16 workers tie; the middle is faster (a curve that rises, then falls).
    strategy, history = drive(16, lambda c: 3600.0 if 4 <= c.num_workers <= 12 else 3000.0)
    assert 4 <= find_knee(strategy.curve(history)).stops_paying <= 12


def test_stays_below_a_worker_count_that_broke():
    strategy, history = drive(16, lambda c: None if c.num_workers >= 12 else 300.0 * c.num_workers + 300)
    broken = [t.config.num_workers for t in history if t.status != OK]
    assert broken and min(broken) >= 12
    # It looked just below the breaking point, where the best surviving config is.
    assert max(t.config.num_workers for t in history if t.status == OK) >= 12 - strategy.resolution


def test_keeps_adding_workers_past_the_cpus_while_the_rate_rises():
    strategy, history = drive(8, saturating(20))
    assert max(t.config.num_workers for t in history) > 8


def test_a_curve_climbing_into_the_cpu_count_gets_one_look_past_it():
    # jpeg on the H200: decode-bound up to the cores, then a gain past them too small for one
    # burst to call a climb. 24 workers must be measured (so they reach the final), and no more.
    strategy, history = drive(16, lambda c: 300.0 * min(c.num_workers, 16) + 300 + (100 if c.num_workers > 16 else 0))
    past = sorted({t.config.num_workers for t in history if t.config.num_workers > 16})
    assert past == [24]


def test_a_best_rate_at_the_cpu_count_gets_one_look_past_it_even_within_noise():
    # large on the H200 (run-2363961): 12 -> 16 workers read +2.7%, under the 3% noise floor,
    # and 24 workers were faster still. NOTE [ One look past the CPUs ].
    measured = {0: 512.0, 8: 717.0, 12: 736.0, 16: 756.0, 24: 770.0}
    strategy, history = drive(16, lambda c: measured.get(c.num_workers, 700.0))
    past = sorted({t.config.num_workers for t in history if t.config.num_workers > 16})
    assert past == [24]


def test_a_cpu_count_within_its_bursts_noise_of_the_best_gets_one_look_past_it():
    # large on the H200 (run-1d66441): 12 workers read 816/s +-29%, 16 read 763/s +-47%; the
    # oracle was 24 workers. The best was at 12 only by noise. NOTE [ One look past the CPUs ].
    measured = {16: (763.0, 0.467), 0: (641.0, 0.081), 8: (728.0, 0.092), 12: (816.0, 0.289),
                24: (781.0, 0.2)}
    strategy, history = drive(16, lambda c: measured.get(c.num_workers, (700.0,))[0],
                              rel_of=lambda c: measured.get(c.num_workers, (700.0, 0.1))[1])
    past = sorted({t.config.num_workers for t in history if t.config.num_workers > 16})
    assert past == [24]


def test_a_cpu_count_clearly_below_the_best_gets_no_look_past_it():
    # gpubound on the H200 (run-1d66441): 4 workers 3,243/s +-4.2%, 16 workers 3,049/s +-3.3%;
    # the shortfall is outside both bursts' noise, so the curve falls there.
    measured = {16: (3049.0, 0.033), 0: (2352.0, 0.083), 8: (3139.0, 0.029), 4: (3243.0, 0.042)}
    strategy, history = drive(16, lambda c: measured.get(c.num_workers, (3100.0,))[0],
                              rel_of=lambda c: measured.get(c.num_workers, (3100.0, 0.05))[1])
    assert max(t.config.num_workers for t in history) == 16


@pytest.mark.parametrize("knee_workers", [4, 6, 11])
def test_does_not_go_past_the_cpus_when_the_knee_is_well_below_them(knee_workers):
    strategy, history = drive(16, saturating(knee_workers))
    assert max(t.config.num_workers for t in history) == 16


def test_a_cuda_oom_batch_size_is_not_proposed_again():
    space = SearchSpace((64, 256), 32, (True,))
    strategy = KneeFirst(space, 8)
    history = []
    for _ in range(40):
        config = strategy.propose(history)
        if config is None:
            break
        if config.batch_size >= 256:
            history.append(TrialResult(config, FAILED, cause="cuda_oom"))
        else:
            history.append(TrialResult(config, OK, samples_per_s=1000.0 + config.num_workers))
    assert sum(1 for t in history if t.config.batch_size == 256) == 1


# gpubound on the H200 (results/benchmarks/run-20261129, part5): the consumer waited about 1% at
# 8 workers and up, and the rates there moved in no order; 4 workers were not measured there and
# read as 4,146/s (part3) to 3,380/s (part6's grid) elsewhere, so here no faster than the rest.
# NOTE [ Keeping up ].
GPUBOUND = {16: (2980.0, 0.009), 0: (1677.0, 0.534), 8: (2747.0, 0.009), 12: (2879.0, 0.014),
            24: (2787.0, 0.013), 4: (2700.0, 0.008)}


def gpubound(waits):
    return drive(16, lambda c: GPUBOUND.get(c.num_workers, (2700.0,))[0], rel_of=lambda c: 0.06,
                 wait_of=lambda c: waits(GPUBOUND.get(c.num_workers, (0, 0.01))[1]))


def test_looks_down_for_the_fewest_workers_that_keep_up_and_not_past_the_cpus():
    strategy, history = gpubound(lambda wait: wait)
    counts = {t.config.num_workers for t in history}
    assert 4 in counts
    assert max(counts) == 16


def test_without_waits_the_same_curve_is_searched_by_rate_alone():
    # The same rates with the consumer waiting 30% everywhere: nothing keeps up, so the look
    # past the CPUs (the best read at 16, within its noise of any other) still comes.
    strategy, history = gpubound(lambda wait: 0.3)
    assert max(t.config.num_workers for t in history) == 24
