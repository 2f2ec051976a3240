"""Datasets for tests/test_hangs.py. Module level, as tests/workloads.py's: the trial process is
started with 'spawn' and imports them by name (tests/ is on sys.path there too)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import torch
from torch.utils.data import Dataset, get_worker_info


class Small(Dataset):
    def __init__(self, length: int = 256):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        time.sleep(0.001)   # workers pay a little, so the search measures several configs
        return torch.full((4,), float(index))


def hangs_in_trial_process() -> Small:
    """A factory that never returns in autoloader's trial process (a mount that hangs there, a
    lock held by the parent), and returns at once anywhere else."""
    if mp.current_process().name == "autoloader-runner":
        while True:
            time.sleep(3600)
    return Small()


class FailsUntilRestored(Small):
    """A dataset whose DataLoader workers read ``path`` for every sample: while it is missing,
    they fail, with the OSError that open() raises (``kind="oserror"``: the environment's) or with
    a ValueError (``kind="value"``: as the code's own failure reads). num_workers=0 never reads
    it, so every run has a config that runs."""

    def __init__(self, path: str, kind: str = "oserror", length: int = 256):
        super().__init__(length)
        self.path, self.kind = path, kind

    def __getitem__(self, index: int):
        if get_worker_info() is not None:
            if self.kind == "oserror":
                with open(self.path):
                    pass
            elif not os.path.exists(self.path):
                raise ValueError(f"sample {index}: its shard {self.path} is not there")
        return super().__getitem__(index)
