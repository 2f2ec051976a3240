"""Streams and real library datasets for the tests of iterable datasets (search/shards.py,
probe/shards.py): a stream every worker reads whole, one sharded by worker, and datasets of
Hugging Face ``datasets``, webdataset and torchvision built from local files made here (no
download). Module-level, so that a trial process re-imports or unpickles them by name."""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

SAMPLE = 64          # floats a sample
COST_S = 0.0002      # a sample's CPU


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _sample(index: int) -> tuple[torch.Tensor, int]:
    _burn(COST_S)
    return torch.from_numpy(np.random.default_rng(index).random(SAMPLE, dtype=np.float32)), index % 10


class Unsharded(IterableDataset):
    """A stream that ignores get_worker_info(): every worker yields all of it."""

    def __init__(self, length: int = 4000):
        self.length = length

    def __iter__(self):
        for index in range(self.length):
            yield _sample(index)


class Sharded(Unsharded):
    """The same stream, each worker reading every num_workers-th sample."""

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, self.length, step):
            yield _sample(index)


class Files(IterableDataset):
    """A stream of ``files`` files, each worker reading whole files of its own: past ``files``
    workers the rest have none. It says nothing of its shards."""

    def __init__(self, files: int = 2, per_file: int = 2000):
        self.files, self.per_file = files, per_file

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for f in range(start, self.files, step):
            for index in range(self.per_file):
                yield _sample(f * self.per_file + index)


# --- real library datasets, written to ``folder`` ------------------------------------------------

def parquet_files(folder: str, shards: int = 2, rows: int = 1500) -> list[str]:
    """``shards`` Parquet files of ``rows`` rows each: a float vector ``x`` and a label ``y``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = []
    for k in range(shards):
        path = os.path.join(folder, f"part-{k:03d}.parquet")
        x = np.random.default_rng(k).random((rows, SAMPLE), dtype=np.float32)
        pq.write_table(pa.table({"x": list(x), "y": np.arange(rows) + k * rows}), path)
        paths.append(path)
    return paths


def hf_dataset(folder: str, streaming: bool):
    """The Parquet files as a Hugging Face ``datasets.Dataset`` (Arrow, map-style) or, with
    ``streaming``, its ``IterableDataset`` of one shard a file; both in torch format."""
    import datasets

    files = parquet_files(folder)
    loaded = datasets.load_dataset("parquet", data_files=files, split="train", streaming=streaming,
                                   cache_dir=os.path.join(folder, "cache"))
    return loaded.with_format("torch")


def webdataset_shards(folder: str, shards: int = 2, per_shard: int = 1000):
    """A webdataset of ``shards`` local tar files of numpy samples and labels, decoded to tuples."""
    import webdataset as wds

    urls = []
    for k in range(shards):
        url = os.path.join(folder, f"shard-{k:03d}.tar")
        with wds.TarWriter(url) as sink:
            for i in range(per_shard):
                sink.write({"__key__": f"s{k:03d}-{i:05d}",
                            "npy": np.random.default_rng(k * per_shard + i).random(SAMPLE, dtype=np.float32),
                            "cls": i % 10})
        urls.append(url)
    return wds.WebDataset(urls, shardshuffle=False).decode().to_tuple("npy", "cls")


def image_folder(folder: str, classes: int = 2, per_class: int = 40, size: int = 48):
    """torchvision's ImageFolder over a few generated PNG images, as tensors."""
    from PIL import Image
    from torchvision import datasets, transforms

    rng = np.random.default_rng(0)
    for c in range(classes):
        os.makedirs(os.path.join(folder, f"class{c}"), exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, f"class{c}", f"{i:04d}.png"))
    return datasets.ImageFolder(folder, transform=transforms.ToTensor())
