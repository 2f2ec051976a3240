"""Copy-on-read growth, the pure part: the fit of a worker's readings, the forecast over a run, the
limit that uses it, the finding and the words (NOTE [ Copy on read ] in search/growth.py). The
readings here are made up to a known curve; what real workers do is measured in
test_growth_e2e.py."""

from __future__ import annotations

import json
import math

import pytest

from autoloader.search.growth import CAUSE, FIX, Growth, fit_growth, growth_finding
from autoloader.search.memory import (
    EPOCH_END,
    KEPT_WORKERS,
    MEASURED_PEAK,
    MemoryForecast,
    MemoryLimits,
    forecast_peak,
)
from autoloader.search.policy import GROWTH_MIN_RISE
from autoloader.search.profile import Profile
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.store.result import InvalidRecord, trial_record
from autoloader.tuning.progress import memory_line

MIB = 2**20
LENGTH = 100_000
CEILING = 100 * MIB          # a full copy of what reads touch
G = 8 * CEILING / LENGTH     # at first, each random read copies 8 rows' worth (rows share pages)
FLAT = 12 * MIB
SAMPLE = 100                 # bytes a collated sample


def copied(n: float) -> float:
    return CEILING * (1.0 - math.exp(-G * n / CEILING))


def grown(samples=(0, 500, 1000, 2000, 3000, 4000, 5000), block=5000) -> Growth:
    """The profile's two workers as a dataset of Python-object rows makes them: the reader's gain
    over the control after a block of ``block`` rows in order (a row's own bytes each), then
    random reads along ``copied``; the control's USS stays at FLAT."""
    row = CEILING / LENGTH
    base = row * block
    fresh = 1.0 - block / LENGTH
    return fit_growth([(n, int(base + fresh * copied(n))) for n in samples], block, int(row * block), FLAT, LENGTH,
                      dataset_bytes=int(1.3 * CEILING))


def flat() -> Growth:
    """The same stage over rows held as arrays: the reader gains nothing on the control, within
    a few hundred KiB of noise either way."""
    return fit_growth([(n, (-1) ** i * 200_000) for i, n in enumerate((0, 500, 1000, 2000, 3000))], 5000, 30_000,
                      FLAT, LENGTH, dataset_bytes=int(1.3 * CEILING))


def test_the_fit_recovers_the_growth_per_sample_and_the_ceiling():
    g = grown()
    assert g.found
    assert g.ceiling_bytes == pytest.approx(CEILING, rel=0.01), "the block's bytes per row times the rows"
    assert g.per_sample_bytes == pytest.approx(G, rel=0.05)
    assert g.copied(LENGTH / 2) == pytest.approx(copied(LENGTH / 2), rel=0.02)
    assert g.copied(10 * LENGTH) <= CEILING, "never more than a full copy"


def test_the_ceiling_is_capped_by_the_datasets_own_memory():
    row = CEILING / LENGTH
    g = fit_growth([(n, int(row * 5000 + copied(n) / 2)) for n in (0, 1000, 2000, 3000)], 5000,
                   int(row * 5000), FLAT, LENGTH, dataset_bytes=CEILING // 2)
    assert g.ceiling_bytes == CEILING // 2


def test_a_flat_worker_is_no_growth_and_copies_nothing():
    g = flat()
    assert g.rise_bytes < GROWTH_MIN_RISE and not g.found
    assert g.copied(LENGTH) == 0.0 and g.run_copied(LENGTH, 4, persistent=True) == 0.0


def test_workers_read_their_share_of_an_epoch_and_kept_ones_reach_the_ceiling():
    g = grown()
    assert g.run_copied(LENGTH, 4, persistent=False) == pytest.approx(g.copied(LENGTH / 4))
    assert g.run_copied(LENGTH, 4, persistent=True) == g.ceiling_bytes
    # Read in order, each worker is handed whole batches of neighbouring rows: its own rows' bytes.
    row = g.row_bytes
    assert g.run_copied(LENGTH, 4, persistent=True, shuffled=False) == pytest.approx(row * LENGTH / 4)
    assert g.copied(1000, shuffled=False) < g.copied(1000)


def test_too_few_readings_find_nothing():
    little = fit_growth([(0, 0), (50, 100_000), (100, 200_000)], 5000, int(CEILING / LENGTH * 5000), FLAT, LENGTH)
    assert not little.found and little.copied(LENGTH) == 0.0
    assert not fit_growth([], 0, 0, FLAT, LENGTH).found


def trial(config: LoaderConfig, peak: int, samples: int | None = None, uss: int | None = None) -> TrialResult:
    return TrialResult(config, OK, samples_per_s=1.0, peak_pss_bytes=peak, batches=40,
                       worker_samples=samples, worker_uss_bytes=uss)


def in_flight(c: LoaderConfig) -> int:
    return (c.num_workers * c.prefetch_factor + 2) * SAMPLE * c.batch_size


def test_the_forecast_is_each_worker_at_the_end_of_its_epoch_and_the_bursts_copies_are_taken_off():
    runner = 500 * MIB
    g = grown()
    two = LoaderConfig.make(64, 2, False, 2, False)
    # A burst of two workers that had read 3,000 samples each: its peak holds their copies so far.
    burst = trial(two, runner + 2 * (20 * MIB + int(copied(3000))) + in_flight(two), samples=3000)
    four = LoaderConfig.make(64, 4, False, 2, False)
    f = forecast_peak(four, runner, runner, SAMPLE, [burst], length=LENGTH, growth=g)
    assert f.basis == EPOCH_END and f.samples_per_worker == LENGTH // 4
    assert f.flat_bytes == pytest.approx(20 * MIB, rel=0.01), "the burst's copies are not counted as flat"
    # Within 5%: past the readings the forecast's rate falls toward a row's own bytes (NOTE [ The
    # latest rate goes on ]), a floor this single curve does not have.
    assert f.copied_bytes == pytest.approx(copied(LENGTH / 4), rel=0.05)
    assert f.host_bytes == pytest.approx(runner + 4 * (20 * MIB + copied(LENGTH / 4)) + in_flight(four), rel=0.05)
    assert f.worker_bytes == pytest.approx(FLAT + copied(LENGTH / 4), rel=0.05), "USS per worker, as measured"
    # Bursts' workers that read along the profile's curve leave the forecast as it was; ones that
    # held more raise it (a worker's own allocations grow it too), never lower it.
    along = [trial(two, burst.peak_pss_bytes, samples=n, uss=int(FLAT + copied(n))) for n in (3000, 20_000)]
    f_along = forecast_peak(four, runner, runner, SAMPLE, along, length=LENGTH, growth=g)
    assert f_along.worker_bytes == pytest.approx(f.worker_bytes, rel=0.03)
    more = [trial(two, burst.peak_pss_bytes, samples=n, uss=int(FLAT + 10 * MIB + copied(n))) for n in (3000, 20_000)]
    f_more = forecast_peak(four, runner, runner, SAMPLE, more, length=LENGTH, growth=g)
    assert f_more.worker_bytes > f.worker_bytes + 5 * MIB and f_more.host_bytes > f.host_bytes
    kept = forecast_peak(four.replace(persistent_workers=True), runner, runner, SAMPLE, [burst], length=LENGTH, growth=g)
    assert kept.basis == KEPT_WORKERS and kept.copied_bytes == g.ceiling_bytes
    assert kept.epoch_host_bytes == pytest.approx(f.host_bytes, rel=0.01), "the first epoch is the same"
    none = forecast_peak(LoaderConfig.make(64, 0, False), runner, runner, SAMPLE, [burst], length=LENGTH, growth=g)
    assert none.basis == MEASURED_PEAK and none.copied_bytes == 0, "the main process copies nothing"


def test_without_growth_the_forecast_is_the_measured_peaks_as_before():
    runner = 500 * MIB
    two = LoaderConfig.make(64, 2, False, 2, False)
    eight = LoaderConfig.make(64, 8, False, 2, False)
    burst = trial(two, runner + 2 * 30 * MIB + in_flight(two), samples=3000)
    for growth in (None, flat()):
        f = forecast_peak(eight, runner, runner, SAMPLE, [burst], length=LENGTH, growth=growth)
        assert f.basis == MEASURED_PEAK and f.copied_bytes == 0
        assert f.host_bytes == runner + 8 * 30 * MIB + in_flight(eight)


def test_the_limit_refuses_a_config_whose_epoch_would_pass_it_and_says_why():
    runner = 500 * MIB
    g = grown()
    two = LoaderConfig.make(64, 2, False, 2, False)
    burst = trial(two, runner + 2 * (20 * MIB + int(copied(3000))) + in_flight(two), samples=3000)
    epoch_peak = forecast_peak(two, runner, runner, SAMPLE, [burst], length=LENGTH, growth=g).host_bytes
    between = (burst.peak_pss_bytes + epoch_peak) // 2
    limits = MemoryLimits(between, None, runner, runner, SAMPLE, length=LENGTH, growth=g)
    why = limits.breach(two, [burst])
    assert why is not None and "at the end of an epoch" in why and "2 workers copies" in why
    assert MemoryLimits(between, None, runner, runner, SAMPLE, length=LENGTH).fits(two, [burst]), \
        "the burst's peak alone fits: that was the blind spot"
    assert limits.fits(LoaderConfig.make(64, 0, False), [burst])


def test_the_finding_names_the_cause_the_fix_and_the_saving():
    runner = 500 * MIB
    four = LoaderConfig.make(64, 4, False, 2, False)
    f = forecast_peak(four, runner, runner, SAMPLE, [], length=LENGTH, growth=grown(), worker_prior=20 * MIB)
    finding = growth_finding(f)
    assert finding.saved_bytes == 4 * f.copied_bytes and finding.cause == CAUSE and finding.fix == FIX
    assert "numpy arrays, Arrow, or a single bytes buffer with offsets" in finding.fix
    assert growth_finding(MemoryForecast.from_dict(json.loads(json.dumps(f.to_dict())))) == finding, \
        "the stored forecast gives the same finding"
    assert growth_finding(forecast_peak(four, runner, runner, SAMPLE, [], length=LENGTH, growth=flat())) is None
    line = memory_line(f)
    assert "at the end of an epoch" in line and "Python objects" in line and "save ~" in line
    assert memory_line(forecast_peak(four, runner, runner, SAMPLE, [], length=LENGTH, growth=flat())) is None


def test_the_growth_crosses_in_the_profile_and_the_trial_record():
    g = grown()
    profile = Profile(batch_size=64, sample_s=(0.001,), collate_s=0.0, sample_bytes=SAMPLE, recv_s=0.0, pin_s=None,
                      h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.0, startup_s=0.1, worker_pss=None, cpus=2,
                      epoch_batches=LENGTH // 64, growth=g)
    back = Profile.from_dict(profile.to_dict())
    assert back.growth == g
    t = trial(LoaderConfig.make(64, 2, False, 2, False), 600 * MIB, samples=3000, uss=40 * MIB)
    assert trial_record(t.to_dict()) == t
    with pytest.raises(InvalidRecord, match="worker_samples"):
        trial_record({**t.to_dict(), "worker_samples": -1})


def test_rows_of_two_kinds_of_pages_go_on_at_the_later_rate():
    """A row's small objects share pages with many rows (copied within the first reads), its
    large ones fill their own (copied row by row): the first reads' rate would run far ahead of
    the epoch; the later rate, once the bursts read more, holds it (NOTE [ The latest rate goes on ])."""
    shared, own = 0.2 * CEILING, 0.8 * CEILING

    def truth(n: float) -> float:
        return shared * (1 - math.exp(-30 * n / LENGTH)) + own * (1 - math.exp(-n / LENGTH))

    row = CEILING / LENGTH
    stage = fit_growth([(n, int(row * 2000 + truth(n))) for n in (0, 600, 1200, 1800, 2400, 3000)], 2000,
                       int(row * 2000), FLAT, LENGTH)
    epoch = LENGTH / 2
    assert stage.copied(epoch) >= truth(epoch), "the stage alone errs high, not low"
    single = CEILING * (1 - math.exp(-stage.per_sample_bytes * epoch / CEILING))
    refit = stage.with_bursts([(n, int(FLAT + truth(n))) for n in (10_000, 20_000)])
    assert refit.copied(epoch) == pytest.approx(truth(epoch), rel=0.1)
    assert single > 1.2 * truth(epoch), "the first reads' rate alone would forecast far too much"
    readings = [refit.copied(n) for n in range(0, LENGTH, 500)]
    assert readings == sorted(readings), "more reads never copy less"
