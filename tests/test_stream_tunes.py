"""Streams and real library datasets tuned end to end on the CPU, from local files made here (no
download): a stream every worker reads whole, Hugging Face ``datasets`` (an Arrow Dataset and
its stream from 2 Parquet shards), a webdataset of 2 local tar shards, torchvision's
ImageFolder of a few generated images. Short budgets, small data."""

from __future__ import annotations

import pytest
import stream_workloads

from autoloader import tune
from autoloader.integrations.formats import FORMATS, render
from autoloader.search.results import OK
from autoloader.tuning.progress import table

pytestmark = pytest.mark.slow
BUDGET = 20.0


def _tune(dataset, tmp_path, **kwargs):
    lines: list[str] = []

    def progress(event):
        if event.line:
            lines.append(event.line)

    result = tune(dataset, batch_size=32, budget=BUDGET, device="cpu", out=str(tmp_path / "out"), progress=progress,
                  **kwargs)
    assert any(t.status == OK for t in result.trials) and result.samples_per_s > 0
    assert not result.faults(), result.faults()
    return result, "\n".join(lines)


def test_an_unsharded_stream_is_reported_as_duplicating_samples(tmp_path):
    result, lines = _tune(stream_workloads.Unsharded(), tmp_path)
    kinds = [f.kind for f in result.stream.findings]
    assert "duplicates" in kinds, result.stream
    assert "not sharded by worker" in lines   # the profile's line says it as it happens
    text = table(result)
    assert "every worker reads the whole stream" in text and "get_worker_info()" in text
    assert result.to_dict()["stream"] == result.stream.to_dict()


@pytest.mark.heavy
def test_a_sharded_stream_is_not(tmp_path):
    result, _ = _tune(stream_workloads.Sharded(), tmp_path)
    assert result.stream is None, result.stream
    assert result.profile.stream_duplicates == 0.0


def test_a_hugging_face_stream_of_2_shards_is_tuned_to_at_most_2_workers(tmp_path):
    dataset = stream_workloads.hf_dataset(str(tmp_path), streaming=True)
    assert dataset.num_shards == 2
    result, lines = _tune(dataset, tmp_path)
    assert result.config.num_workers <= 2
    assert all(t.config.num_workers <= 2 for t in result.trials) and max(w for w, _ in result.curve) <= 2
    assert result.stream.shards == 2 and result.stream.max_workers == 2
    assert "of 2 shards (datasets.IterableDataset.num_shards; workers searched up to 2)" in lines
    assert "the stream has 2 shards" in table(result) and "flat past 2 workers" in table(result)
    assert result.profile is not None and result.profile.epoch_batches is None
    for form in FORMATS:
        assert "shuffle" not in render(result.to_dict(), form)


@pytest.mark.heavy
def test_a_hugging_face_arrow_dataset_is_tuned(tmp_path):
    dataset = stream_workloads.hf_dataset(str(tmp_path), streaming=False)
    assert len(dataset) == 3000
    result, _ = _tune(dataset, tmp_path)
    assert result.stream is None and result.profile.epoch_batches == 3000 // 32 + 1
    assert "shuffle=True" in render(result, "lightning")


@pytest.mark.heavy
def test_a_webdataset_of_local_tar_shards_is_tuned(tmp_path):
    result, _ = _tune(stream_workloads.webdataset_shards(str(tmp_path)), tmp_path)
    assert result.stream.shards == 2 and all(t.config.num_workers <= 2 for t in result.trials)
    assert result.stream.shards_from.startswith("webdataset.")   # its advice names webdataset's own fix


@pytest.mark.heavy
def test_a_torchvision_image_folder_is_tuned(tmp_path):
    dataset = stream_workloads.image_folder(str(tmp_path / "images"))
    assert len(dataset) == 80
    result, _ = _tune(dataset, tmp_path)
    assert result.stream is None and result.config.batch_size == 32
