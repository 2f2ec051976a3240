"""Issue 52: one run, one story. Each figure is computed once, and every surface (the table, the
verdict, the report page, the JSON) renders that one value; the page carries the table's caveats;
advice fits its object; the install check names the one fix.

The results here are built from synthetic records (tests/explain_cases.py), no trial runs.
"""

from __future__ import annotations

from autoloader.events.lines import cpus, others_text


def test_plurals_of_cpus():
    assert cpus(1) == "1 CPU" and cpus(2) == "2 CPUs" and cpus(1.5) == "1.5 CPUs"
    assert others_text(0.5, 1) == "other processes used 0.5 of 1 CPU"


# -- the install path: a torch and a torchvision built for different devices or releases --------

from autoloader import demo  # noqa: E402

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def test_a_cpu_torch_beside_a_cuda_torchvision_gets_the_cpu_index_line():
    # The machine: the README's CPU index unreachable, a +cpu torch 2.13 stayed beside
    # PyPI's CUDA-built torchvision 0.28 (the right release): the fix is the device, not the release.
    error = "OSError: libc10_cuda.so: cannot open shared object file: No such file or directory"
    fix = demo.pair_fix("2.13.0+cpu", "0.28.0", error)
    assert fix.endswith(f"pip install --force-reinstall --no-deps 'torchvision==0.28.*' {CPU_INDEX}"), fix
    assert "CPU build" in fix
    # A tagged CUDA torchvision says so by its version alone.
    assert CPU_INDEX in demo.pair_fix("2.13.0+cpu", "0.28.0+cu128", "undefined symbol: x")
    # And a CUDA torch beside a CPU torchvision: its own index.
    assert demo.pair_fix("2.13.0+cu128", "0.28.0+cpu").endswith("--index-url https://download.pytorch.org/whl/cu128")


def test_another_release_gets_the_paired_release():
    fix = demo.pair_fix("2.13.0+cpu", "0.26.0+cpu", "operator torchvision::nms does not exist")
    assert "'torchvision==0.28.*'" in fix and CPU_INDEX in fix and "0.26" not in fix
    # Never the version already there as the whole fix: same release, same build, the pair again.
    same = demo.pair_fix("2.13.0", "0.28.0", "operator torchvision::nms does not exist")
    assert "'torch==2.13.0' 'torchvision==0.28.*'" in same


def test_the_demo_error_names_the_device_fix(monkeypatch):
    import sys
    import types

    import pytest

    from autoloader.errors import UsageError

    demo._torchvision_io.cache_clear()

    def operator(*args, **kwargs):
        raise OSError("libc10_cuda.so: cannot open shared object file: No such file or directory")

    io = types.SimpleNamespace(encode_jpeg=operator, decode_jpeg=operator)
    monkeypatch.setitem(sys.modules, "torchvision", types.SimpleNamespace(io=io, __path__=[]))
    monkeypatch.setitem(sys.modules, "torchvision.io", io)
    monkeypatch.setattr(demo.torch, "__version__", "2.13.0+cpu")
    monkeypatch.setattr(demo, "_installed", lambda name: "0.28.0")
    try:
        with pytest.raises(UsageError) as caught:
            demo.JpegImages(length=8)
    finally:
        demo._torchvision_io.cache_clear()
    text = str(caught.value)
    assert "torch 2.13.0+cpu, torchvision 0.28.0" in text and "libc10_cuda.so" in text
    assert f"'torchvision==0.28.*' {CPU_INDEX}" in text


# -- advice fitted to its object: the stream's library, the usable CPUs --------------------------

from autoloader.search.results import OK, TrialResult  # noqa: E402
from autoloader.search.shards import library, stream_lines, stream_record  # noqa: E402
from autoloader.search.space import LoaderConfig  # noqa: E402


def _stream_trial(workers: int, delivered: tuple[int, ...], duplicates: float | None) -> TrialResult:
    return TrialResult(LoaderConfig.make(32, workers, False), OK, samples_per_s=100.0, worker_delivered=delivered,
                       duplicate_share=duplicates)


def test_the_shard_advice_names_the_library_of_the_stream():
    wds = "webdataset.WebDataset's SimpleShardList"
    hf = "datasets.IterableDataset.n_shards"
    assert library(wds) == "webdataset" and library(hf) == "Hugging Face" and library("Files.num_shards") is None
    # Two shards, a search that would try 8 workers, on a machine of 4 usable CPUs.
    (web,) = stream_lines(stream_record(2, wds, 8, [_stream_trial(2, (320, 320), 0.0)], cpus=4))
    assert "webdataset" in web and ".tar" in web and "Hugging Face" not in web and "to_iterable_dataset" not in web
    assert "up to the 4 usable CPUs" in web
    (hug,) = stream_lines(stream_record(2, hf, 8, [_stream_trial(2, (320, 320), 0.0)], cpus=4))
    assert "Hugging Face: to_iterable_dataset(num_shards=K)" in hug and "webdataset" not in hug
    # Duplicates: each library's own way to shard by worker, and no other's.
    dup = stream_lines(stream_record(None, wds, 8, [_stream_trial(2, (640, 640), 1.0)]))[0]
    assert "split_by_worker" in dup and "split_dataset_by_node" not in dup
    dup = stream_lines(stream_record(None, hf, 8, [_stream_trial(2, (640, 640), 1.0)]))[0]
    assert "split_dataset_by_node" in dup and "split_by_worker" not in dup


def test_no_fix_for_more_workers_than_the_usable_cpus():
    # The webdataset: 2 shards on a machine of 2 usable CPUs. The search stopped at 2 of
    # the 8 it would try; a fix for more workers than 2 CPUs can run is no fix.
    record = stream_record(2, "webdataset.WebDataset's SimpleShardList", 8, [_stream_trial(2, (320, 320), 0.0)],
                           cpus=2)
    (line,) = stream_lines(record)
    assert "Fix:" not in line and "reshard" not in line and "no more are needed" in line
    assert record.findings[0].fix == ""
    from autoloader.store import parts

    assert parts.stream(record.to_dict()) == record


def test_the_shards_say_their_library():
    from autoloader.probe.shards import shard_count

    class Stream:
        num_shards = 4

    Stream.__module__ = "datasets.iterable_dataset"
    assert shard_count(Stream()) == (4, "datasets.Stream.num_shards")
    Stream.__module__ = "my_streams"
    assert shard_count(Stream()) == (4, "Stream.num_shards")
