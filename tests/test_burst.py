"""The burst on a synthetic loader whose batches arrive in clumps of num_workers, one clump per
worker cycle (what workers that start together do): the rate is right whatever the window's
phase, and a slow config's window is not ended by the time cap before it holds enough cycles."""

import time

import pytest
import torch

from autoloader.probe.burst import run_burst
from autoloader.search.policy import BurstSettings, expected_window_s

SAMPLES = 8


def clumped(num_workers: int, cycle_s: float):
    """An iterator factory: num_workers batches of SAMPLES samples at the end of every cycle."""

    def make():
        def batches():
            start = time.perf_counter()
            index = 0
            while True:
                delay = start + (index // num_workers + 1) * cycle_s - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                yield torch.zeros(SAMPLES, 1)
                index += 1

        return batches()

    return make


def measure(num_workers: int, cycle_s: float, settings: BurstSettings):
    return run_burst(clumped(num_workers, cycle_s), lambda batch: None, num_workers,
                     fresh_workers_each_epoch=False, epoch_batches=None, device="cpu", settings=settings)


@pytest.mark.parametrize("num_workers, cycle_s", [(4, 0.1), (6, 0.15)])
def test_clumped_arrivals_read_at_their_true_rate(num_workers, cycle_s):
    true_rate = SAMPLES * num_workers / cycle_s
    m = measure(num_workers, cycle_s, BurstSettings(min_window_s=0.5, max_window_s=1.0))
    assert m.samples_per_s == pytest.approx(true_rate, rel=0.08)
    assert m.batches >= 3 * num_workers


@pytest.mark.parametrize("min_cycles", [2.0, 4.0])
@pytest.mark.slow
def test_the_time_cap_waits_for_min_cycles_of_a_slow_config(min_cycles):
    # 0.25 s cycles against a 0.5 s cap: the cap alone would end the window after about two
    # cycles; 4 cycles take about 1 s, well inside the hard cap of 1.5 s.
    num_workers, cycle_s = 4, 0.25
    settings = BurstSettings(min_window_s=0.1, max_window_s=0.5, min_cycles=min_cycles,
                             target_rel_interval=0.0)  # never narrow enough: only the caps end it
    m = measure(num_workers, cycle_s, settings)
    assert m.batches >= min_cycles * num_workers
    # ... and it stops there (within a clump), not at the hard cap.
    assert m.batches <= (min_cycles + 1) * num_workers
    assert m.window_s < 3 * settings.max_window_s


@pytest.mark.slow
def test_the_hard_cap_ends_a_window_that_cannot_reach_its_cycles():
    settings = BurstSettings(min_window_s=0.1, max_window_s=0.2, min_cycles=8.0, target_rel_interval=0.0)
    m = measure(4, 0.25, settings)  # 8 cycles would take 2 s; the hard cap is 0.6 s
    assert m.window_s < 1.0


def test_expected_window_covers_the_cycles_of_a_slow_config_within_the_hard_cap():
    settings = BurstSettings(max_window_s=3.0, min_cycles=4.0)
    assert expected_window_s(settings, 16, 0.01) == 3.0            # fast: the time cap
    assert expected_window_s(settings, 24, 0.07) == pytest.approx(6.72)  # slow: 4 cycles of 24
    assert expected_window_s(settings, 24, 1.0) == 9.0             # very slow: the hard cap
