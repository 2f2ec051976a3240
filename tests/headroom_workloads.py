"""A pipeline where the step sets the pace (NOTE [ Headroom ] in autoloader/search/model_first.py),
for the CPU: samples of about 1 ms, paced by sleeping so that the figures hold on a busy machine,
and a step that sleeps a jittery time (2-38 ms, 20 ms on the mean). One worker makes a batch of 16
in about 17 ms, just under the step's mean, so on the mean one worker keeps up; a run of quick
steps empties its short queue."""

from __future__ import annotations

import random
import time

import torch
from torch.utils.data import Dataset

STEP_RANGE_S = (0.002, 0.038)


class OneMs(Dataset):
    def __init__(self, length: int = 8_192, cost_s: float = 0.001):
        self.length, self.cost_s = length, cost_s

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        time.sleep(self.cost_s)
        return torch.full((4,), float(index))


def one_ms() -> OneMs:
    return OneMs()


def jittery_step():
    """A step that sleeps a time drawn from STEP_RANGE_S, seeded."""
    rng = random.Random(0)

    def step(batch):
        time.sleep(rng.uniform(*STEP_RANGE_S))
        return batch

    return step
