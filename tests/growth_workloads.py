"""Datasets for the memory-growth tests (NOTE [ Copy on read ] in autoloader/search/growth.py):
rows kept as Python objects, which forked workers copy as they read them, and the same rows as
numpy arrays, which they do not. Module-level factories, so that a trial process started with
'spawn' re-imports them by name, and ``tests/growth_workloads.py:rows`` reaches them as a spec.
Nothing heavy is imported here: every trial process and every epoch's process imports it.

Sized on a 2-CPU machine: 100,000 rows of 128 floats (about 420 MB of objects, most of it in
pages a row has to itself) and 0.15 ms of CPU a sample make an epoch of about 10 s with two
workers, in which each worker copies several times what a burst's workers copy, by hundreds of
MiB in all: more than the machine's other processes move this tree's PSS by (the tests measure
both)."""

from __future__ import annotations

import gc
import time

import numpy as np
import torch
from torch.utils.data import Dataset

ROWS = 100_000
BOXES = 128
COST_S = 0.00015


def _burn(seconds: float) -> None:
    """Spin for ``seconds`` of this thread's CPU time: a sample's fixed cost, charged as real
    work is on a busy machine."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Rows(Dataset):
    """``{"id", "boxes": [floats], "tag"}`` rows built in ``__init__`` as Python objects (as
    scripts/bench/workloads/pyrows.py builds them); a sample is a row's boxes as a tensor."""

    def __init__(self, length: int = ROWS, boxes: int = BOXES, cost_s: float = COST_S):
        self.cost_s = cost_s
        collecting = gc.isenabled()
        gc.disable()   # the collector would walk the growing list again and again
        try:
            values = np.random.default_rng(0).random((length, boxes)).tolist()
            self.rows = [{"id": i, "boxes": row, "tag": f"img-{i:08d}.jpg"} for i, row in enumerate(values)]
            del values
        finally:
            if collecting:
                gc.enable()
        gc.collect()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        row = self.rows[index]
        x = torch.tensor(row["boxes"], dtype=torch.float32)
        _burn(self.cost_s)
        return x, row["id"] % 10


class ArrayRows(Dataset):
    """The same rows held as one numpy array: reading a row writes no reference count."""

    def __init__(self, length: int = ROWS, boxes: int = BOXES, cost_s: float = COST_S):
        self.boxes = np.random.default_rng(0).random((length, boxes), dtype=np.float32)
        self.cost_s = cost_s

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, index: int):
        x = torch.from_numpy(self.boxes[index])
        _burn(self.cost_s)
        return x, index % 10


def rows() -> Rows:
    return Rows()


def arrays() -> ArrayRows:
    return ArrayRows()


class Mapped(Dataset):
    """uint8 samples of ``sample_bytes`` each, served from an ``np.memmap`` of the file at ``path``
    (written on first use), and a table of float32 features a sample held as one numpy array
    (``table_bytes``: enough for the trial process to run the growth stage on it). Neither grows
    a worker by copies: the file's pages a worker reads are the page cache's (NOTE [ Memory by
    kind ] in autoloader/probe/pages.py). Pickled by its path: the mapping is made again where it
    is loaded, never copied into the pickle."""

    def __init__(self, path: str, length: int = 8192, sample_bytes: int = 16 * 2**10,
                 table_bytes: int = 24 * 2**20, cost_s: float = 0.0005):
        self.path, self.length, self.sample_bytes, self.cost_s = path, length, sample_bytes, cost_s
        self.table_bytes = table_bytes
        import os

        if not os.path.exists(path) or os.path.getsize(path) != length * sample_bytes:
            data = np.memmap(path, dtype=np.uint8, mode="w+", shape=(length, sample_bytes))
            for start in range(0, length, 256):
                data[start:start + 256] = np.random.default_rng(start).integers(
                    0, 255, (min(256, length - start), sample_bytes), dtype=np.uint8)
            data.flush()
            del data
        self._open()

    def _open(self) -> None:
        self.data = np.memmap(self.path, dtype=np.uint8, mode="r", shape=(self.length, self.sample_bytes))
        self.features = np.random.default_rng(1).random((self.length, self.table_bytes // (4 * self.length)),
                                                        dtype=np.float32)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("data", "features")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._open()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        x = torch.from_numpy(np.array(self.data[index]))
        _burn(self.cost_s)
        return x, torch.from_numpy(self.features[index])
def half_rows() -> Rows:
    """Half of ``rows``: enough Python objects that the rule's one worker is forecast to copy a
    few hundred MiB over its run, in tunes of seconds (the memory-ceiling test of the final)."""
    return Rows(length=ROWS // 2)
