"""Datasets for the fleet tests (retune, warm start, shared studies): tiny, and paced by sleeping,
so their rates hold on a busy machine and a test can make one slower between two runs.

``AUTOLOADER_TEST_SLOWDOWN`` (read in every ``__getitem__``, so in trial processes and workers
alike) multiplies the sleep: an injected regression that leaves the data, and so the key, alone.
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import Dataset

SLOWDOWN_ENV = "AUTOLOADER_TEST_SLOWDOWN"


class Paced(Dataset):
    """Each sample sleeps ``cost_s`` (times $AUTOLOADER_TEST_SLOWDOWN)."""

    def __init__(self, length: int = 4_096, cost_s: float = 0.0005):
        self.length = length
        self.cost_s = cost_s

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        time.sleep(self.cost_s * float(os.environ.get(SLOWDOWN_ENV, "1")))
        return torch.full((4,), float(index))


class SlowStart(Paced):
    """Paced, and each DataLoader worker's first sample takes ``start_s`` (a slow open, say): a
    trial with workers stays RUNNING that long, so a second tuner surely opens the study while
    the first has a trial in flight. The trial process's own reads (num_workers=0) are not slowed."""

    def __init__(self, length: int = 4_096, cost_s: float = 0.0005, start_s: float = 12.0):
        super().__init__(length, cost_s)
        self.start_s = start_s
        self.started = False

    def __getitem__(self, index: int):
        if not self.started and torch.utils.data.get_worker_info() is not None:
            self.started = True
            time.sleep(self.start_s)
        return super().__getitem__(index)


class Scaled(Dataset):
    """Tiny samples ``index * scale + offset``: another scale is another transform, another offset
    another split of the same size."""

    def __init__(self, length: int = 256, scale: float = 1.0, offset: int = 0):
        self.length, self.scale, self.offset = length, scale, offset

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.full((4,), float(index + self.offset) * self.scale)


def paced() -> Paced:
    return Paced()


def scaled() -> Scaled:
    return Scaled()


def slow_start() -> SlowStart:
    return SlowStart()


class Spun(Dataset):
    """Each sample spins ``cost_s`` of its process's CPU time (times $AUTOLOADER_TEST_SLOWDOWN): a
    per-sample cost a neighbour on the CPUs takes from, as a decode or an augmentation is."""

    def __init__(self, length: int = 4_096, cost_s: float = 0.0004):
        self.length = length
        self.cost_s = cost_s

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        end = time.process_time() + self.cost_s * float(os.environ.get(SLOWDOWN_ENV, "1"))
        while time.process_time() < end:
            pass
        return torch.full((4,), float(index))


def spun() -> Spun:
    return Spun()


# A phase of the noisy step lasts this long; in a STALL_SHARE of them the step stalls each batch
# for STALL_S (a shared accelerator, a logging hook), otherwise it takes QUICK_S.
PHASE_S = 0.4
STALL_SHARE = 0.3
STALL_S, QUICK_S = 0.005, 0.0005


def noisy_step():
    """A step whose time a batch jumps between phases: in some the step stalls for longer than a
    batch of ``spun`` takes the loader on 2 CPUs, so from one window to the next the step or the
    loader sets the pace and the rounds' noise is the step's; made 2x slower, ``spun``'s batch
    takes longer than a stall, and the loader sets the pace throughout."""
    import random

    rng, phase = random.Random(), {"until": 0.0, "sleep": 0.0}

    def step(batch):
        now = time.monotonic()
        if now >= phase["until"]:
            phase["until"] = now + PHASE_S
            phase["sleep"] = STALL_S if rng.random() < STALL_SHARE else QUICK_S
        time.sleep(phase["sleep"])
        return batch

    return step


class KeyReadFault(Dataset):
    """Its key read (its last sample, which a tune's trial process reads too) crashes the process
    (``segfault``), ends it (``exit``: ``os._exit(3)``) or hangs (``hang``): a registry's dataset
    that retune must isolate (NOTE [ A dataset's key is read in a process of its own ])."""

    def __init__(self, fault: str, length: int = 64):
        self.fault, self.length = fault, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if index == self.length - 1:
            if self.fault == "segfault":
                import ctypes
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core file for the test's crash
                ctypes.string_at(0)
            elif self.fault == "exit":
                os._exit(3)
            elif self.fault == "hang":
                time.sleep(3600)
        return torch.full((4,), float(index))


def segfault_in_key() -> KeyReadFault:
    return KeyReadFault("segfault")


def exit_in_key() -> KeyReadFault:
    return KeyReadFault("exit")


def hang_in_key() -> KeyReadFault:
    return KeyReadFault("hang")


def small() -> Paced:
    return Paced(length=512, cost_s=0.0002)
