"""Datasets for the memory-growth tests (NOTE [ Copy on read ] in autoloader/search/growth.py):
rows kept as Python objects, which forked workers copy as they read them, and the same rows as
numpy arrays, which they do not. Module-level factories, so that a trial process started with
'spawn' re-imports them by name, and ``tests/growth_workloads.py:rows`` reaches them as a spec.

Sized on a 2-CPU machine: 40,000 rows of 128 floats (about 180 MB of objects) and half a
millisecond of CPU a sample make an epoch of about 10 s with two workers, in which each worker
copies several times what a burst's workers copy (the tests measure both)."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from scripts.bench.workloads.common import burn_cpu
from scripts.bench.workloads.pyrows import PyRowsDataset

ROWS = 40_000
BOXES = 128
COST_S = 0.0005


class ArrayRows(Dataset):
    """PyRowsDataset's rows held as one numpy array: reading a row writes no reference count."""

    def __init__(self, length: int = ROWS, boxes: int = BOXES, cost_s: float = COST_S):
        self.boxes = np.random.default_rng(0).random((length, boxes), dtype=np.float32)
        self.cost_s = cost_s

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, index: int):
        x = torch.from_numpy(self.boxes[index])
        burn_cpu(self.cost_s)
        return x, index % 10


def rows() -> PyRowsDataset:
    return PyRowsDataset(ROWS, boxes=BOXES, cost_s=COST_S)


def arrays() -> ArrayRows:
    return ArrayRows()

