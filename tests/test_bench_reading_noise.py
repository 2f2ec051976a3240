"""The reading-noise bench (scripts/bench/reading_noise.py): its cuts and its null pairs, on timings
made here."""

from __future__ import annotations

import random

import pytest

from autoloader.inrun import schedule
from autoloader.search.space import LoaderConfig
from scripts.bench import reading_noise


def _timings(batches: int, cycle: float, jitter: float, seed: int = 0):
    rng = random.Random(seed)
    calls, t = [], 0.0
    for _ in range(batches):
        calls.append(t)
        t += cycle * (1 + jitter * (2 * rng.random() - 1))
    return calls, [c + cycle / 10 for c in calls], t


def test_readings_are_cut_as_the_tune_cuts_a_config_that_reads_on():
    config = LoaderConfig.make(batch_size=32, num_workers=8, pin_memory=False, prefetch_factor=4,
                               persistent_workers=False)
    calls, got, _ = _timings(4000, 0.005, 0.2)
    rs = reading_noise.readings(config, calls, got, skip=64)
    need = max(schedule.MIN_STEADY_BATCHES, schedule.READ_CYCLES * 8, schedule.queue_depth(config))
    assert len(rs) > 10 and all(r.batches >= need and r.steady_s >= schedule.SEGMENT_S * 0.99 for r in rs)
    assert sum(r.batches for r in rs) <= 4000 - 64


def test_null_pairs_of_independent_batches_are_judged_near_their_stated_noise():
    config = LoaderConfig.make(batch_size=32, num_workers=4, pin_memory=False, prefetch_factor=4,
                               persistent_workers=False)
    calls, got, _ = _timings(40000, 0.002, 0.9, seed=3)
    out = reading_noise.judged(reading_noise.readings(config, calls, got, skip=0))
    assert out["pairs"] >= 20
    # Independent batch times: the blocks neither overstate nor understate by much.
    assert 0.5 < out["stated_sd"] / out["measured_sd"] < 2.0, out
    assert out["past_z"] <= 0.2


def test_bad_arguments_say_the_rule_and_the_value(capsys, tmp_path):
    with pytest.raises(SystemExit):
        reading_noise.main(["--out", str(tmp_path), "--seconds", "0"])
    assert "got 0.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reading_noise.main(["--out", str(tmp_path), "--workers", "four"])
    assert "'four'" in capsys.readouterr().err


def test_with_the_times_made_each_reading_rates_what_was_made_in_it():
    config = LoaderConfig.make(batch_size=32, num_workers=4, pin_memory=False, prefetch_factor=4,
                               persistent_workers=False)
    calls, got, _ = _timings(4000, 0.005, 0.0)            # served at 200 batches a second
    made = [0.0] + [0.001 + i * 0.00625 for i in range(3999)]   # made at 160 (the first never)
    served = reading_noise.readings(config, calls, got, skip=64)
    rated = reading_noise.readings(config, calls, got, skip=64, made=made)
    assert [r.batches for r in served] == [r.batches for r in rated]
    assert all(r.rate == pytest.approx(6400, rel=0.01) for r in served)
    assert all(r.rate == pytest.approx(5120, rel=0.03) for r in rated), [r.rate for r in rated]
