"""Iterable and streaming datasets (search/shards.py, probe/shards.py): the shards a stream says
it has and the cap they put on the workers, each worker's count and digests, idle workers and
duplicated samples as findings; the formats and the snippet valid for an iterable; and the
pinned batches in the memory forecast (NOTE [ Pinned batches ] in search/memory.py)."""

from __future__ import annotations

import dataclasses

import pytest
import stream_workloads
import torch

from autoloader.integrations.formats import FORMATS, lightning_source, render, tuned_iterable
from autoloader.probe.shards import Counted, digest, duplicate_share, shard_count, with_stream
from autoloader.search.config import TunedConfig, iterable_key
from autoloader.search.memory import MemoryLimits, forecast_peak, pinned_block, pinned_bytes
from autoloader.search.profile import Profile
from autoloader.search.results import OK, TrialResult
from autoloader.search.shards import stream_lines, stream_record, trial_note, worker_cap
from autoloader.search.space import LoaderConfig
from autoloader.store.snippet import snippet

MIB = 2**20


# --- shards -------------------------------------------------------------------------------------

class _Named:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class _Raises:
    @property
    def num_shards(self):
        raise RuntimeError("not known until opened")


class SimpleShardList:
    def __init__(self, urls):
        self.urls = urls


class ResampledShards(SimpleShardList):
    pass


def test_the_shards_a_stream_says_it_has():
    assert shard_count(_Named(num_shards=2)) == (2, "_Named.num_shards")
    assert shard_count(_Named(n_shards=3)) == (3, "_Named.n_shards")
    assert shard_count(_Named(pipeline=[SimpleShardList(["a.tar", "b.tar", "c.tar"]), print])) == (
        3, "_Named's SimpleShardList")
    # Resampled shards are drawn at random for ever: no cap; nor from what says nothing.
    for said_nothing in (_Named(pipeline=[ResampledShards(["a.tar"])]), _Named(num_shards=True),
                         _Named(num_shards=0), _Named(n_shards=lambda: 2), _Raises(), stream_workloads.Sharded()):
        assert shard_count(said_nothing) is None
    assert worker_cap(2, 8) == 2 and worker_cap(None, 8) == 8 and worker_cap(16, 8) == 8


def test_digests_tell_copies_from_shards():
    a = [digest((torch.full((4,), float(i)), i)) for i in range(32)]
    b = [digest((torch.full((4,), float(i)), i)) for i in range(32, 64)]
    assert digest({"x": torch.zeros(3), "y": b"ab"}) == digest({"y": b"ab", "x": torch.zeros(3)})
    assert digest(torch.zeros(3)) != digest(torch.zeros(4))
    assert duplicate_share([a, list(a)]) == 1.0
    assert duplicate_share([a, b]) == 0.0
    assert duplicate_share([a, b, []]) == 0.0   # an idle worker digests nothing
    assert duplicate_share([a]) is None
    constant = [digest(torch.zeros(4))] * 32
    assert duplicate_share([constant, list(constant)]) is None, "content that repeats cannot tell"


def _trial(workers: int, delivered=None, share=None) -> TrialResult:
    return TrialResult(LoaderConfig.make(32, workers, False), OK, samples_per_s=100.0,
                       worker_delivered=delivered, duplicate_share=share)


def _profile(**changes) -> Profile:
    return dataclasses.replace(Profile(batch_size=32, sample_s=(0.001,), collate_s=0.0, sample_bytes=256, recv_s=0.0,
                                       pin_s=None, h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.0, startup_s=0.1,
                                       worker_pss=None, cpus=2, epoch_batches=None), **changes)


def test_duplicates_idle_workers_and_the_cap_are_findings_with_their_fix():
    record = stream_record(None, None, 8, [_trial(0), _trial(2, (640, 640), 1.0)],
                           _profile(stream_delivered=(192, 192), stream_duplicates=1.0))
    assert [f.kind for f in record.findings] == ["duplicates"]
    assert record.duplicated == ("the profile's 2 workers", "bs32-w2-pin0-pf2-pw1")
    (line,) = stream_lines(record)
    assert "every worker reads the whole stream" in line and "get_worker_info()" in line
    assert "split_dataset_by_node" not in line   # a stream of no known library: the generic fix alone
    assert "not sharded by worker" in trial_note(_trial(2, (640, 640), 1.0))

    record = stream_record(None, None, 8, [_trial(4, (320, 320, 0, 0), 0.0)])
    assert [f.kind for f in record.findings] == ["idle"]
    assert "2 delivered nothing" in stream_lines(record)[0] and "reshard it to K files" in stream_lines(record)[0]
    assert "2 of its 4 workers delivered nothing" in trial_note(_trial(4, (320, 320, 0, 0), 0.0))

    record = stream_record(2, "IterableDataset.num_shards", 8, [_trial(2, (320, 320), 0.0)])
    assert record.max_workers == 2 and record.shards == 2
    assert [f.kind for f in record.findings] == ["shards"]
    assert "flat past 2 workers" in stream_lines(record)[0] and "stopped at 2 (of the 8" in stream_lines(record)[0]

    # Nothing to say: a stream sharded by worker, of no shard count.
    assert stream_record(None, None, 8, [_trial(2, (320, 320), 0.0)], _profile()) is None
    assert trial_note(_trial(2, (320, 320), 0.0)) is None
    assert Profile.from_dict(_profile(stream_delivered=(1, 2), stream_duplicates=0.5).to_dict()).stream_delivered == (1, 2)


# --- formats and the snippet for an iterable -------------------------------------------------------

def _tuned(key: str) -> TunedConfig:
    return TunedConfig(LoaderConfig.make(32, 2, False), 1000.0, 0.02, 500.0, None, {}, key, "cpu")


def test_every_format_and_the_snippet_are_valid_for_an_iterable():
    stream, rows = _tuned("Stream-niter-0123456789"), _tuned("My-niter-rows-n100-0123456789")
    assert iterable_key(stream.dataset_key) and not iterable_key(rows.dataset_key)
    for form in FORMATS:
        text = render(stream.to_dict(), form)
        assert "shuffle" not in text, (form, text)
        assert "shuffle" not in render(stream, form)
    assert "shuffle=True" in lightning_source(rows.to_dict())
    assert "shuffle=True" not in lightning_source(rows, iterable=True)
    loader = torch.utils.data.DataLoader(stream_workloads.Sharded(8), batch_size=4)
    assert tuned_iterable(loader) and not tuned_iterable(LoaderConfig.make(32, 2, False))
    namespace: dict = {}
    exec(compile(snippet(stream), "snippet.py", "exec"), namespace)
    assert "does not\n    shuffle" in namespace["make_loader"].__doc__
    built = namespace["make_loader"](stream_workloads.Sharded(64))
    assert sum(len(y) for _, y in built) == 64
    exec(compile(snippet(rows), "snippet.py", "exec"), namespace)
    assert "It shuffles" in namespace["make_loader"].__doc__


# --- pinned batches ----------------------------------------------------------------------------------

def test_pinned_batches_are_prefetch_times_workers_in_power_of_two_blocks():
    assert [pinned_block(n) for n in (0, 1, 1000, 1024, 1025)] == [0, 1, 1024, 1024, 2048]
    deep = LoaderConfig.make(64, 8, True, prefetch_factor=16)
    batch = 64 * 100_000   # 6.1 MiB: blocks of 8 MiB
    assert pinned_bytes(deep, batch) == (8 * 16 + 2) * 8 * MIB
    assert pinned_bytes(deep.replace(pin_memory=False), batch) == 0
    assert pinned_bytes(LoaderConfig.make(64, 0, True), batch) == 2 * 8 * MIB
    # A burst's allocator peak of more than the blocks (a batch of many tensors) raises the block.
    burst = TrialResult(LoaderConfig.make(64, 2, True, prefetch_factor=2), OK, samples_per_s=1.0,
                        pinned_bytes=6 * 12 * MIB)
    assert pinned_bytes(deep, batch, [burst]) == (8 * 16 + 2) * 12 * MIB
    assert pinned_bytes(deep.replace(batch_size=32), batch // 2, [burst]) == (8 * 16 + 2) * 4 * MIB


def test_pinned_batches_are_kept_under_the_limit():
    sample = 100_000
    kwargs = dict(ceiling=3 * 2**30, shm_free=None, runner_uss=500 * MIB, runner_pss=500 * MIB, sample_bytes=sample,
                  length=100_000, worker_prior=100 * MIB)
    limits = MemoryLimits(**kwargs)
    deep, shallow = (LoaderConfig.make(64, 8, True, prefetch_factor=p) for p in (16, 2))
    f = limits.forecast(deep, [])
    assert f.pinned_bytes == (8 * 16 + 2) * 8 * MIB and f.host_bytes >= f.pinned_bytes
    assert f.to_dict()["pinned_bytes"] == f.pinned_bytes
    breach = limits.breach(deep, [])
    assert breach is not None and "pinned: prefetch_factor 16 x 8 workers + 2 batches" in breach
    assert limits.fits(shallow, []) and limits.fits(deep.replace(pin_memory=False), [])
    unpinned = forecast_peak(deep.replace(pin_memory=False), 500 * MIB, 500 * MIB, sample, [], 100 * MIB, 100_000)
    assert unpinned.pinned_bytes == 0 and f.host_bytes - unpinned.host_bytes == f.pinned_bytes


# --- in processes ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", pytest.param("spawn", marks=pytest.mark.heavy)])
def test_each_worker_is_counted_without_changing_the_batches(method):
    for dataset, delivered, share in ((stream_workloads.Sharded(300), (150, 150), 0.0),
                                      (stream_workloads.Unsharded(300), (300, 300), 1.0),
                                      (stream_workloads.Files(1, 300), (300, 0), None)):
        counted = Counted(None, 2)
        plain = list(torch.utils.data.DataLoader(dataset, batch_size=25, num_workers=2, multiprocessing_context=method))
        batches = list(torch.utils.data.DataLoader(dataset, batch_size=25, num_workers=2, collate_fn=counted,
                                                   multiprocessing_context=method))
        assert len(batches) == len(plain) and all(torch.equal(a[0], b[0]) for a, b in zip(batches, plain))
        assert counted.read() == {"worker_delivered": delivered, "duplicate_share": share}, type(dataset).__name__


@pytest.mark.slow
def test_an_iterable_without_len_is_profiled():
    from autoloader.probe.profiler import run_profile
    from autoloader.probe.workers import pss

    dataset = stream_workloads.Unsharded(2000)
    with pytest.raises(TypeError):
        len(dataset)
    profile = run_profile(dataset, {}, 32, lambda batch: None, "cpu", pss)
    assert profile.epoch_batches is None and len(profile.sample_s) >= 16
    assert profile.sample_bytes == 4 * stream_workloads.SAMPLE + 8 and profile.worker_pss
    staged = with_stream(profile, dataset, {}, 32, lambda: None)
    assert staged.stream_delivered and staged.stream_duplicates == 1.0
    sharded = with_stream(profile, stream_workloads.Sharded(2000), {}, 32, lambda: None)
    assert sharded.stream_duplicates == 0.0 and all(sharded.stream_delivered)
    one_file = with_stream(profile, stream_workloads.Files(1, 2000), {}, 32, lambda: None)
    assert one_file.stream_delivered[1] == 0


def test_a_stored_stream_reads_back_and_a_bad_one_names_its_field():
    from autoloader.search.codec import InvalidRecord
    from autoloader.search.shards import Stream

    record = stream_record(2, "IterableDataset.num_shards", 8, [_trial(2, (320, 320), 1.0)])
    assert Stream.from_dict(record.to_dict()) == record
    bad = {**record.to_dict(), "findings": [{"kind": "shards", "text": 5, "fix": "x"}]}
    with pytest.raises(InvalidRecord, match=r"stream\.findings\[0\]\.text"):
        Stream.from_dict(bad, "stream")
    with pytest.raises(InvalidRecord, match=r"stream\.max_workers"):
        Stream.from_dict({**record.to_dict(), "max_workers": -1}, "stream")
