"""Watching a trial's process tree from the driver: memory, /dev/shm, killing, leaks.

Runs in the driver, not the trial process, so sampling never competes with the measured loop
for the trial's GIL, and a trial that blows up cannot stop its own guard.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import psutil

from .. import hardware


@dataclass(frozen=True)
class MemorySample:
    uss: int   # private bytes summed over the tree (what the report shows, per BENCHMARK.md)
    pss: int   # proportional share summed over the tree: the tree's true footprint, guarded
    processes: int


def tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are still alive."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def sample_memory(pid: int) -> MemorySample:
    uss = pss = count = 0
    for proc in tree(pid):
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        uss += info.uss
        pss += getattr(info, "pss", info.uss)
        count += 1
    return MemorySample(uss, pss, count)


def kill_tree(pid: int, timeout: float = 5.0) -> list[int]:
    """SIGKILL the process, its process group and every descendant; return pids still alive."""
    procs = tree(pid)
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p.pid for p in alive]


def shm_entries() -> set[str]:
    """Names in /dev/shm; torch's own segments are unlinked at once, so new names are leaks."""
    try:
        return set(os.listdir(hardware.SHM_PATH))
    except OSError:
        return set()


class TreeWatch:
    """Peak memory and /dev/shm growth of one trial, sampled by the driver while it waits."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid = pid
        self.interval = interval
        self.peak = MemorySample(0, 0, 0)
        self.shm_base = hardware.shm_used() or 0
        self.peak_shm = 0
        self._next = 0.0

    def poll(self) -> MemorySample | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.interval
        sample = sample_memory(self.pid)
        self.peak = MemorySample(max(self.peak.uss, sample.uss), max(self.peak.pss, sample.pss),
                                 max(self.peak.processes, sample.processes))
        used = hardware.shm_used()
        if used is not None:
            self.peak_shm = max(self.peak_shm, used - self.shm_base)
        return sample


def predict_peak(config, runner_uss: int, sample_bytes: int, history) -> tuple[int, int]:
    """Predicted (host bytes, /dev/shm bytes) of a config before running it.

    Batches in flight: each worker holds up to ``prefetch_factor`` finished batches in /dev/shm,
    and pinning copies each into page-locked memory on top. Per-worker overhead (the interpreter,
    the dataset's copy-on-read pages) is learnt from measured trials: the median, over trials
    with workers, of (peak - runner - batches in flight) / workers.
    """
    batch = sample_bytes * config.batch_size
    def in_flight(c) -> int:
        return (c.num_workers * (c.prefetch_factor or 0) + 2) * sample_bytes * c.batch_size * (2 if c.pin_memory else 1)
    per_worker = []
    for trial in history:
        c = trial.config
        if trial.peak_host_bytes and c.num_workers > 0:
            per_worker.append(max(0, trial.peak_host_bytes - runner_uss - in_flight(c)) / c.num_workers)
    overhead = sorted(per_worker)[len(per_worker) // 2] if per_worker else 0
    host = runner_uss + config.num_workers * overhead + in_flight(config)
    shm = config.num_workers * (config.prefetch_factor or 0) * batch
    return int(host), int(shm)
