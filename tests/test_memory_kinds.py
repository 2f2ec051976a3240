"""A worker's memory by kind (NOTE [ Memory by kind ] in autoloader/probe/pages.py): anonymous
pages are copies and forecast as copy-on-read growth; a mapped file's pages are the page cache,
said apart and never forecast. The stage and a tune on an np.memmap dataset of uint8 samples,
beside rows of Python objects, which still grow."""

from __future__ import annotations

import dataclasses
import json

import growth_workloads
import pytest

from autoloader.probe.pages import Pages, parse_smaps
from autoloader.search.growth import CAUSE, CAUSE_BESIDE_FILE, Growth, fit_growth, growth_finding
from autoloader.search.memory import MEASURED_PEAK, MemoryForecast, burst_readings, forecast_peak
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.tuning.progress import memory_line

MIB = 2**20


def _vma(head: str, private_clean: int = 0, private_dirty: int = 0, anonymous: int = 0) -> str:
    return (f"{head}\nRss:  {private_clean + private_dirty} kB\nPss:  1 kB\nShared_Clean:  8 kB\n"
            f"Private_Clean:  {private_clean} kB\nPrivate_Dirty:  {private_dirty} kB\n"
            f"Anonymous:  {anonymous} kB\nAnonHugePages:  0 kB\nProtectionKey:  0\nVmFlags: rd mr\n")


def test_smaps_is_split_by_kind():
    text = "".join((
        _vma("55d0c0000000-55d0c8000000 rw-p 00000000 00:00 0                          [heap]", 0, 4096, 4096),
        _vma("7f0000000000-7f0001000000 rw-p 00000000 00:00 0 ", 4, 1020, 1024),
        # A file written a moment ago: its page cache is dirty, mapped read-only all the same.
        _vma("7f1000000000-7f1010000000 r--s 00000000 fd:00 1234   /data/samples.bin", 100, 2000, 0),
        # A private file mapping written to: its anonymous pages are copies.
        _vma("7f2000000000-7f2000100000 rw-p 00001000 fd:00 99     /usr/lib/libx.so", 8, 16, 12),
        _vma("7f3000000000-7f3000800000 rw-s 00000000 00:1a 77     /dev/shm/torch_123_456_0 (deleted)", 0, 512, 0),
        _vma("7f4000000000-7f4000100000 rw-s 00000000 00:01 78     /memfd:batch (deleted)", 0, 64, 0),
    ))
    pages = parse_smaps(text)
    kib = 1024
    assert pages == Pages(anon=(4096 + 1024 + 12) * kib, file=(2100 + 12) * kib, shmem=576 * kib)
    assert pages.uss == (4096 + 1024 + 2100 + 24 + 576) * kib


def _growth(**changes) -> Growth:
    # Readings of a reader that gained 30 MiB over its control in anonymous pages, block and random.
    points = [(0, 2 * MIB), (2000, 12 * MIB), (4000, 20 * MIB), (6000, 26 * MIB)]
    growth = fit_growth(points, 1000, 2 * MIB, 200 * MIB, 100_000, 400 * MIB)
    return dataclasses.replace(growth, **changes)


def test_a_mapped_file_is_said_apart_and_not_forecast():
    flat = fit_growth([(0, 0), (500, 10_000), (1000, 20_000), (1500, 8_000)], 400, 0, 150 * MIB, 2048, 24 * MIB)
    mapped = dataclasses.replace(flat, file_bytes=100 * MIB, file_samples=1600)
    assert not mapped.found and mapped.maps_file
    assert "page cache" in mapped.mapped_text() and "1,600 samples" in mapped.mapped_text()
    config = LoaderConfig.make(64, 2, False)
    forecast = forecast_peak(config, 300 * MIB, 250 * MIB, 64 * 2**10, [], worker_prior=80 * MIB, length=2048,
                             growth=mapped, epoch_samples=2048)
    assert forecast.basis == MEASURED_PEAK and forecast.copied_bytes == 0
    assert growth_finding(forecast) is None
    line = memory_line(forecast)
    assert line.startswith("no copy-on-read growth") and "page cache" in line and "numpy" not in line
    assert Growth.from_dict(mapped.to_dict()) == mapped


def test_the_advice_follows_the_kind():
    config = LoaderConfig.make(64, 4, False)
    for growth, cause in ((_growth(), CAUSE), (_growth(file_bytes=50 * MIB, file_samples=6000), CAUSE_BESIDE_FILE)):
        assert growth.found
        forecast = forecast_peak(config, 300 * MIB, 250 * MIB, 4096, [], worker_prior=80 * MIB, length=100_000,
                                 growth=growth, epoch_samples=100_000)
        finding = growth_finding(forecast)
        assert finding is not None and finding.cause == cause
        assert growth_finding(MemoryForecast.from_dict(json.loads(json.dumps(forecast.to_dict())))).cause == cause
        line = memory_line(forecast)
        assert ("numpy arrays, Arrow or one bytes buffer" in line) == (cause == CAUSE)
        assert ("mapped file needs nothing" in line) == (cause == CAUSE_BESIDE_FILE)


def test_a_bursts_mapped_pages_are_not_its_copies():
    config = LoaderConfig.make(64, 2, False)
    trial = TrialResult(config, OK, samples_per_s=1.0, worker_samples=3000, worker_uss_bytes=300 * MIB,
                        worker_file_bytes=120 * MIB)
    held = 2 * 64 * 1024
    assert burst_readings([trial], 1024, 10_000) == [(3000, 180 * MIB - held)]


@pytest.mark.slow
def test_the_stage_tells_a_mapped_file_from_copies(tmp_path):
    """The profile's growth stage on an np.memmap of uint8 samples (with a table the stage runs
    for): the reader's USS grows by the file's pages it read, its anonymous pages do not; rows of
    Python objects still grow."""
    from autoloader.probe.growth import anonymous_bytes, measure_growth

    before = anonymous_bytes()
    dataset = growth_workloads.Mapped(str(tmp_path / "samples.bin"))
    held = anonymous_bytes() - before
    growth = measure_growth(dataset, {}, dataset.cost_s, max(held, dataset.length * dataset.sample_bytes),
                            sample_bytes=dataset.sample_bytes)
    print(f"\nmapped: rise {growth.rise_bytes / MIB:.1f} MiB, file {growth.file_bytes / MIB:.1f} MiB "
          f"over {growth.file_samples} samples")
    assert growth is not None and not growth.found, growth
    # Most of what the reader read is in its file pages: a 16 KiB sample is 4 pages of its own.
    assert growth.maps_file and growth.file_bytes >= 0.5 * growth.file_samples * dataset.sample_bytes
    del dataset
    before = anonymous_bytes()
    rows = growth_workloads.rows()
    held = anonymous_bytes() - before
    growth = measure_growth(rows, {}, growth_workloads.COST_S, held, sample_bytes=4 * growth_workloads.BOXES)
    print(f"rows: rise {growth.rise_bytes / MIB:.1f} MiB over {growth.samples}")
    assert growth is not None and growth.found and not growth.maps_file, growth


@pytest.mark.slow
def test_a_memory_mapped_dataset_is_tuned_without_copy_on_read_growth(tmp_path):
    from autoloader import tune
    from autoloader.tuning.progress import table

    dataset = growth_workloads.Mapped(str(tmp_path / "samples.bin"))
    result = tune(dataset, batch_size=32, budget=30.0, out=str(tmp_path / "out"), progress=False)   # a third for the profile: room for the growth stage
    growth = result.profile.growth
    assert growth is not None, "the stage ran (the dataset's table is past its floor)"
    assert not growth.found and growth.maps_file, growth
    for forecast in (result.memory, result.rule_memory):
        if forecast is not None and forecast.workers:
            assert forecast.basis == MEASURED_PEAK and forecast.copied_bytes == 0
    assert growth_finding(result) is None
    text = table(result)
    assert "Python objects" not in text and "numpy arrays" not in text
    assert result.to_dict()["memory"]["finding"] is None
