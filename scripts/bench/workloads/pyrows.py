"""pyrows: annotation rows kept as Python objects, which each forked worker copies as it reads
them, so its memory grows all epoch long (NOTE [ Copy on read ] in autoloader/search/growth.py).

Unlike pyobjects (every sample reads 64 records spread over the corpus, so a worker has copied
most of it within its first batches), a sample here reads its own row: a worker's copy grows
with the share of the dataset it has read, as a detection or captioning dataset's annotations
do. A burst of a few seconds sees the start of that growth; the end of an epoch sees it all.
"""

from __future__ import annotations

import gc

import numpy as np
import torch
from torch.utils.data import Dataset

from scripts.bench.workloads.common import burn_cpu, mlp_step, scaled

# The shape of the rows: {"id": int, "boxes": [BOXES floats], "tag": str}, a sample's CPU cost.
BOXES = 24
SAMPLE_CPU_S = 0.0001


class PyRowsDataset(Dataset):
    """``length`` rows of ``{"id", "boxes": [floats], "tag"}``, built in ``__init__`` as Python
    objects; a sample is its row's boxes as a tensor and its id, after ``cost_s`` of CPU work."""

    def __init__(self, length: int, boxes: int = BOXES, cost_s: float = SAMPLE_CPU_S, seed: int = 0):
        self.cost_s = cost_s
        # The collector is held off while the rows are made: it would walk the growing list again
        # and again. One full pass after, in this process, leaves the rows in the oldest
        # generation, so a worker's own collections do not walk them. The floats come from
        # numpy's tolist, row after row, as fast as C makes them.
        collecting = gc.isenabled()
        gc.disable()
        try:
            values = np.random.default_rng(seed).random((length, boxes)).tolist()
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
        burn_cpu(self.cost_s)
        return x, row["id"] % 10


def pyrows_dataset() -> Dataset:
    # 1.5 million rows at scale 1: about 1.7 GB of objects in the main process, and an epoch
    # long enough that one worker's share of it is far more than a burst reads.
    return PyRowsDataset(length=scaled(1_500_000, 4_096))


def pyrows_step():
    return mlp_step(BOXES, 64)
