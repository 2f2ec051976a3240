"""Copy-on-read growth end to end (NOTE [ Copy on read ] in autoloader/search/growth.py): real
tunes of a dataset of Python-object rows, then a real epoch of the pick in a fresh process
(scripts/memory_growth.py), and the forecast against what that epoch measured; rows held as
numpy arrays beside them. Every figure compared is measured here, in the test.
"""

from __future__ import annotations

import os

import growth_workloads
import pytest
from conftest import TESTS_DIR

from autoloader import tune
from autoloader.probe.growth import anonymous_bytes, measure_growth
from autoloader.search.growth import growth_finding
from autoloader.search.memory import EPOCH_END, KEPT_WORKERS, MEASURED_PEAK
from autoloader.tuning.progress import table
from scripts.memory_growth import epoch_forecasts, epoch_memory

pytestmark = pytest.mark.slow

ROWS = os.path.join(TESTS_DIR, "growth_workloads.py") + ":rows"
BUDGET = 30.0
BATCH = 64


def with_workers(result):
    """The pick and its forecast when it has workers, else the rule's (the cpus-1 rule's config): the
    one config of the tune whose workers' growth an epoch can show."""
    if result.config.num_workers:
        return result.config, result.memory
    return result.rule, result.rule_memory


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One tune of the rows, and one real epoch of its config with workers."""
    out = str(tmp_path_factory.mktemp("growth"))
    result = tune(growth_workloads.rows, batch_size=BATCH, budget=BUDGET, out=out)
    config, forecast = with_workers(result)
    return result, config, forecast, epoch_memory(ROWS, config.loader_kwargs())


def test_the_stage_tells_rows_of_objects_from_arrays():
    """The profile's growth stage alone, in this process: two workers, the reader's gain over the
    control against the rows it read."""
    # Arrays first: the rows' memory, once freed, would hold them (the heap keeps freed pages).
    for make, grows in ((growth_workloads.arrays, False), (growth_workloads.rows, True)):
        before = anonymous_bytes()
        dataset = make()
        held = anonymous_bytes() - before
        growth = measure_growth(dataset, {}, growth_workloads.COST_S, held, sample_bytes=4 * growth_workloads.BOXES)
        assert growth is not None and growth.found == grows, (make.__name__, growth)
        if grows:
            # A full copy of what reads touch is within what the rows hold, and not far below it.
            assert 0.3 * held <= growth.ceiling_bytes <= held
        del dataset


@pytest.mark.heavy
def test_the_forecast_at_the_end_of_tuning_is_the_epochs_memory_per_worker(tuned):
    result, config, forecast, epoch = tuned
    assert forecast.growth is not None and forecast.growth.found, forecast.growth
    assert forecast.basis == (KEPT_WORKERS if config.persistent_workers else EPOCH_END)
    measured = epoch["epochs"][0]["worker_uss_mean"]
    predicted = epoch_forecasts(forecast, 1)[0]
    seen = [t.worker_uss_bytes for t in result.trials if t.config.num_workers and t.worker_uss_bytes]
    print(f"\n{config.key}: a worker's USS at the end of its epoch {measured / 2**20:.1f} MiB measured, "
          f"{predicted / 2**20:.1f} MiB forecast ({predicted / measured:.3f}); the bursts' workers at most "
          f"{max(seen, default=0) / 2**20:.1f} MiB; epoch {epoch['epochs'][0]['seconds']:.1f} s; "
          f"growth {forecast.growth.per_sample_bytes:.0f} B a sample, ceiling {forecast.growth.ceiling_bytes / 2**20:.1f} MiB")
    assert 0.75 * measured <= predicted <= 1.25 * measured, (
        f"{config.key}: forecast {predicted / 2**20:.1f} MiB a worker at the epoch's end, measured "
        f"{measured / 2**20:.1f} MiB")
    # What the tune's own bursts saw of it: less than the epoch (the blind spot forecast over).
    if seen:
        assert max(seen) < measured
    finding = growth_finding(result if result.config.num_workers else forecast)
    assert finding is not None and finding.saved_bytes == config.num_workers * forecast.copied_bytes
    assert "Python objects" in table(result), "the table says the cause and the fix"


@pytest.mark.heavy
def test_a_limit_between_the_bursts_peak_and_the_epochs_keeps_the_pick_under_it(tuned, tmp_path):
    result, config, forecast, epoch = tuned
    measured = [t for t in result.trials if t.ok and t.config.num_workers and t.peak_pss_bytes]
    if not any(t.config == config for t in measured):
        # The config whose burst and epoch the limit is set between: one the tune measured.
        if not measured:
            pytest.skip("inconclusive: the tune measured no config with workers (a busy machine left no time)")
        config = max(measured, key=lambda t: t.config.num_workers).config
        epoch = epoch_memory(ROWS, config.loader_kwargs())
    burst, peak = max(t.peak_pss_bytes for t in measured if t.config == config), epoch["peak_pss"]
    assert peak > 1.1 * burst, f"the epoch's peak {peak / 2**20:.0f} MiB is past its bursts' {burst / 2**20:.0f} MiB"
    limit = (burst + peak) // 2
    print(f"\n{config.key}: tree PSS peak {burst / 2**20:.0f} MiB in its bursts, {peak / 2**20:.0f} MiB in its epoch; "
          f"limit {limit / 2**20:.0f} MiB")
    limited = tune(growth_workloads.rows, batch_size=BATCH, budget=BUDGET, out=str(tmp_path), max_memory=limit)
    pick = limited.config
    assert pick != config, f"{config.key}, whose epoch passes the limit, is handed back"
    assert limited.memory.host_bytes <= limit
    measured = epoch_memory(ROWS, pick.loader_kwargs())
    print(f"under the limit: {pick.key}, forecast {limited.memory.host_bytes / 2**20:.0f} MiB "
          f"({limited.memory.basis}), its epoch's peak {measured['peak_pss'] / 2**20:.0f} MiB")
    assert measured["peak_pss"] < limit, (
        f"{pick.key} peaked at {measured['peak_pss'] / 2**20:.0f} MiB in its epoch, past the {limit / 2**20:.0f} MiB "
        f"limit (its forecast {limited.memory.host_bytes / 2**20:.0f} MiB)")


def test_rows_held_as_arrays_are_forecast_flat(tmp_path):
    """Their heap is one array: the stage has nothing to find and is not run (NOTE [ A heap of
    buffers copies nothing ] in autoloader/probe/growth.py; the stage itself tells them apart:
    test_the_stage_tells_rows_of_objects_from_arrays)."""
    result = tune(growth_workloads.arrays, batch_size=BATCH, budget=10.0, out=str(tmp_path))
    assert result.profile.growth is None
    assert "growth" not in dict(result.profile.stage_s)
    config, forecast = with_workers(result)
    assert forecast.basis == MEASURED_PEAK and forecast.copied_bytes == 0
    assert growth_finding(result) is None and growth_finding(forecast) is None
    assert "Python objects" not in table(result)
