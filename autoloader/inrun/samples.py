"""Seeding per sample: a sample's random transforms drawn from (base seed, epoch, index) alone.

# NOTE [ Seeding per sample ]
# A DataLoader seeds each worker once (NOTE [ Worker seeds ] in seeding.py), so the random
# transforms a sample gets depend on which worker made it and what that worker made before: change
# the worker count or the prefetch and the same epoch's batches differ. In-run tuning changes them
# mid-epoch, so with ``SeededSamples`` every sample is made under its own seed instead: before
# ``dataset[index]`` the process's ``random``, numpy and torch streams are seeded from
# (seed, epoch, index), and its batches are bit for bit those of any config, a fixed one included.
# The epoch travels with the index (the in-run loader's batch sampler yields ``(epoch, index)``),
# so workers started in one epoch and kept into the next still seed by the right epoch; a plain
# DataLoader over ``SeededSamples`` passes bare indices and the epoch set by ``set_epoch``.
# Made in the loop's own process (no workers), the sample's seeding must not change the loop's
# streams (dropout, the user's shuffles): their states are saved and put back around it.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np


def sample_seed(seed: int, epoch: int, index: int) -> np.random.SeedSequence:
    """The SeedSequence of one sample: entropy the base seed, keyed by epoch and index."""
    return np.random.SeedSequence(entropy=int(seed) & ((1 << 64) - 1), spawn_key=(int(epoch), int(index)))


def seed_everything(sequence: np.random.SeedSequence) -> None:
    """Seed ``random``, numpy's global stream and torch's CPU generator from ``sequence``."""
    import torch

    words = sequence.generate_state(4, dtype=np.uint32)
    random.seed(int(words[0]) << 32 | int(words[1]))
    np.random.seed(words[2:4])
    torch.manual_seed(int(words[2]) << 32 | int(words[3]))


class SeededSamples:
    """``dataset`` with each sample made under its own seed: NOTE [ Seeding per sample ].

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``).
        seed: the base seed; with the same seed, epoch and index a sample is made alike in any
            worker of any config.

    Use ``set_epoch(epoch)`` each epoch when it is given to a plain DataLoader (the in-run
    loader passes the epoch itself).
    """

    def __init__(self, dataset: Any, seed: int):
        self.dataset = dataset
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        import torch

        if torch.utils.data.get_worker_info() is not None:
            seed_everything(sample_seed(self.seed, epoch, index))
            return self.dataset[index]
        saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
        try:
            seed_everything(sample_seed(self.seed, epoch, index))
            return self.dataset[index]
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.set_rng_state(saved[2])
