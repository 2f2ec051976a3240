"""Workloads of where users train (issue 51): samples of 4 MiB, read from memory as an image
decoder's output would be, and a step that sleeps for seconds a batch, as a model's forward and
backward on the CPU of a loaded machine does.

``AUTOLOADER_TEST_STEP_S`` sets the sleeping step's seconds a batch (default 10), read when the
step is built, so in the trial process.
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import Dataset

STEP_ENV = "AUTOLOADER_TEST_STEP_S"
SAMPLE_FLOATS = 2**20   # 4 MiB of float32


class Big(Dataset):
    """Samples of 4 MiB: each a copy of one of a few stored tensors, scaled (a decode's copy)."""

    def __init__(self, length: int = 512):
        self.length = length
        self.stored = [torch.rand(SAMPLE_FLOATS) for _ in range(4)]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return self.stored[index % len(self.stored)] * 0.5, index % 10


class Small(Dataset):
    """Small samples that cost nothing: the step is all there is."""

    def __init__(self, length: int = 256):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.full((8,), float(index))


def big() -> Big:
    return Big()


def small() -> Small:
    return Small()


def sleeping_step():
    """A step of $AUTOLOADER_TEST_STEP_S seconds a batch (10 by default), sleeping."""
    seconds = float(os.environ.get(STEP_ENV, "10"))

    def step(batch):
        time.sleep(seconds)

    return step
