"""Bad inputs for the stored-state checks (``state.py``) and their tests: user code that raises
and is then fixed, a sampler that raises, a dataset too long to shuffle.

Module level, as the fault datasets are (``datasets.py``): what ``tune()`` is handed is pickled by
reference and re-imported in the trial process. The user modules that are "fixed" between two
runs are written as files (``write_module``), since the fix must change a file the tuner reads.
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import Dataset, Sampler

BROKEN_STEP = 'def step(batch):\n    raise RuntimeError("step boom")\n'
FIXED_STEP = 'def step(batch):\n    return None  # fixed\n'

RAGGED = '''import torch
from torch.utils.data import Dataset


class Ragged(Dataset):
    """The first 8 samples (what the set-up probe loads) agree in size; the rest vary."""

    def __len__(self):
        return 256

    def __getitem__(self, index):
        return torch.zeros(4 + (index % 3 if index >= 8 and VARY else 0))


VARY = {vary}


def make():
    return Ragged()
'''


def write_module(path: str, text: str) -> None:
    """Write a user module as an editor would. Its mtime is moved ahead: the import system trusts
    a cached .pyc whose recorded mtime and size match, and a rewrite of the same size within the
    same second would be read stale."""
    with open(path, "w") as fh:
        fh.write(text)
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))


class Small(Dataset):
    def __init__(self, length: int = 256):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.full((4,), float(index))


class RaisingSampler(Sampler):
    """A sampler whose ``__iter__`` raises (a bug in a user's sampler); it appends the pid of the
    process that asked it to ``marker``, so a check can tell whether that process was restarted."""

    def __init__(self, marker: str, length: int = 256):
        self.marker = marker
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        with open(self.marker, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        raise ValueError("sampler boom: no indices today")


class HugeLength(Small):
    """Says it holds 10**12 samples: shuffling it needs a permutation of 10**12 indices."""

    def __len__(self) -> int:
        return 10**12
