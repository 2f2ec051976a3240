"""Datasets the tests tune and load.

They live at module level in a file of their own because the tuner's trial process is started
with 'spawn': a dataset object handed to ``tune()`` is pickled and re-imported there by its
module name, and a ``"tests/workloads.py:factory"`` spec is imported there by path.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np
import torch
from torch.utils.data import Dataset

from autoloader import worker_generator


class Tiny(Dataset):
    """Small, cheap samples: for runs that only need to succeed quickly."""

    def __init__(self, length: int = 256):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.full((4,), float(index))


class BusyWork(Dataset):
    """Each sample costs ``cost_s`` of pure-Python CPU work that holds the GIL (it spins on
    ``time.process_time``), so only worker processes can run samples in parallel."""

    def __init__(self, length: int = 100_000, cost_s: float = 0.003):
        self.length = length
        self.cost_s = cost_s

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        end = time.process_time() + self.cost_s
        spins = 0
        while time.process_time() < end:
            spins += 1
        return torch.tensor([float(index), float(spins)])


class FreeLarge(Dataset):
    """1 MiB samples that cost nothing to make (views of one preallocated tensor): workers can
    only add copies through shared memory, never save work."""

    def __init__(self, length: int = 4_096, pool: int = 8):
        self.length = length
        self.pool = torch.rand((pool, 256, 1024))  # float32: 256 * 1024 * 4 bytes = 1 MiB a sample

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return self.pool[index % len(self.pool)]


class RandomDraws(Dataset):
    """Each sample is one draw from every random source a transform might use. Needs
    ``worker_init_fn=seed_worker`` (``worker_generator()`` raises otherwise)."""

    def __init__(self, length: int = 16):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return (np.random.rand(), random.random(), torch.rand(1).item(), worker_generator().random())


class GlobalDraws(Dataset):
    """One draw from each global random source (numpy, ``random``, torch); works with any
    ``worker_init_fn``, the snippet's copy of ``seed_worker`` included."""

    def __init__(self, length: int = 16):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return (np.random.rand(), random.random(), torch.rand(1).item())


class Empty(Dataset):
    def __len__(self) -> int:
        return 0

    def __getitem__(self, index: int):
        raise IndexError(index)


class Uncollatable(Dataset):
    """Samples default_collate cannot turn into a batch."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        return object()


class BreaksPastProbe(Dataset):
    """Loads the first few samples (what the tuner's set-up probe reads), then raises: every
    trial fails, so no config is feasible."""

    def __len__(self) -> int:
        return 4_096

    def __getitem__(self, index: int):
        if index >= 8:
            raise RuntimeError(f"sample {index} is corrupt")
        return torch.zeros(4)


not_a_dataset = 42


def tiny() -> Tiny:
    return Tiny()


def busy() -> BusyWork:
    return BusyWork()


def free_large() -> FreeLarge:
    return FreeLarge()


def empty() -> Empty:
    return Empty()


def uncollatable() -> Uncollatable:
    return Uncollatable()


def breaks_past_probe() -> BreaksPastProbe:
    return BreaksPastProbe()


def raises_when_built() -> Tiny:
    """A factory whose data is missing, as a mistyped path would leave it."""
    raise FileNotFoundError("data path /no/such/data does not exist")


BUILDS: list[int] = []  # one entry per counted_tiny() call in this process


def counted_tiny() -> Tiny:
    """A factory that counts its calls: building a dataset can be the slow part."""
    BUILDS.append(os.getpid())
    return Tiny(256)


class BreaksOnRankOne(Dataset):
    """Loads on every rank but rank 1 (RANK, which a node's trial process sets to its own), where
    every sample past the set-up probe's first few raises: rank 1 alone fails every trial."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, index: int):
        if os.environ.get("RANK") == "1" and index >= 8:
            raise RuntimeError(f"sample {index} is unreadable on rank 1")
        return torch.zeros(4)


def breaks_on_rank_one() -> BreaksOnRankOne:
    return BreaksOnRankOne()


class SlowSamples(Dataset):
    """A slow read and a little decode a sample: 20 ms asleep (a disk or a network), then 5 ms of
    CPU; with ``slow_step``, a workload whose every burst and final round takes long."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int):
        time.sleep(0.02)
        end = time.process_time() + 0.005
        while time.process_time() < end:
            pass
        return torch.full((64,), float(index)), index % 10


def slow_samples() -> SlowSamples:
    return SlowSamples()


def slow_step():
    """A step factory: 250 ms a batch, as a large model's forward and backward on a small device."""
    def step(batch):
        time.sleep(0.25)
    return step


class HeavyWorkers(Dataset):
    """Each worker process holds ``worker_mib`` of its own (allocated and touched on its first
    sample, as a per-worker cache or a decoder's state would), and each sample sleeps 5 ms (a
    read), so more workers read faster while each costs memory: past a few, a tight memory limit
    is passed."""

    def __init__(self, worker_mib: int = 300, length: int = 4096):
        self.worker_mib = worker_mib
        self.length = length
        self._held = None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if self._held is None and torch.utils.data.get_worker_info() is not None:
            self._held = np.ones(self.worker_mib * 2**20, dtype=np.uint8)
        time.sleep(0.005)
        return torch.full((16,), float(index))


def heavy_workers() -> HeavyWorkers:
    return HeavyWorkers()
