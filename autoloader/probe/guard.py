"""Watching a trial's process tree from the driver (never competing with the measured loop for
its GIL, never stopped by a trial that blows up): memory, /dev/shm, killing, leaks."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Iterable

import psutil

from ..inputs import hardware


@dataclass(frozen=True)
class MemorySample:
    uss: int   # private bytes summed over the tree (what the report shows)
    pss: int   # proportional share summed over the tree: the tree's true footprint, guarded
    processes: int


def tree(pid: int | psutil.Process) -> list[psutil.Process]:
    """The process (by pid, or one seen before) and all its descendants that are still alive."""
    try:
        root = pid if isinstance(pid, psutil.Process) else psutil.Process(pid)
        return [root, *root.children(recursive=True)] if root.is_running() else []
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def sample_memory(pid: int) -> MemorySample:
    return _sample(tree(pid))


def _sample(procs: list[psutil.Process]) -> MemorySample:
    uss = pss = count = 0
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        uss += info.uss
        pss += getattr(info, "pss", info.uss)
        count += 1
    return MemorySample(uss, pss, count)


def gone(proc: psutil.Process) -> bool:
    """Dead for our purposes: exited, or a zombie waiting for its (new) parent to reap it."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return True


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True  # someone else's, and alive
    except (psutil.NoSuchProcess, ValueError):
        return False


def kill_tree(pid: int, timeout: float = 5.0, group: int | None = None,
              also: Iterable[psutil.Process] = ()) -> list[int]:
    """SIGKILL the process, its process group and every descendant, and ``also`` the processes
    seen in the tree earlier (a dead runner's workers are no longer its children); the pids
    still alive. The group is signalled only when ``pid`` leads one of its own that is not ours:
    a runner dead before its setpgrp sits in the caller's group, with the user's shell.
    Descendants are collected before any kill (a killed parent's children are re-parented);
    zombies count as dead."""
    procs = tree(pid)
    known = {p.pid for p in procs}
    for proc in also:  # psutil checks each is still the process it saw, so a reused pid is safe
        if proc.pid not in known:
            known.add(proc.pid)
            procs.extend(tree(proc))
    try:
        if group is None:
            group = os.getpgid(pid)
            group = group if group == pid else None
        if group is not None and group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    return [p.pid for p in kill_all(procs, timeout)]


def kill_all(procs: Iterable[psutil.Process], timeout: float = 5.0) -> list[psutil.Process]:
    """SIGKILL each process, then wait up to ``timeout`` for all to be gone; the rest."""
    alive = list(procs)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in alive if not gone(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def shm_entries() -> set[str]:
    """Names in /dev/shm; torch's own segments are unlinked at once, so new names are leaks."""
    try:
        return set(os.listdir(hardware.SHM_PATH))
    except OSError:
        return set()


_TORCH_SEGMENT = re.compile(r"^torch_(\d+)_")


def clean_shm(before: set[str]) -> list[str]:
    """The /dev/shm segments a finished trial's processes left behind, unlinked: torch names a
    segment ``torch_<creator pid>_...`` and unlinks it once the receiver has it, so a new name
    whose creator is dead was left by a process killed in between. A live creator's names are
    left alone (the runner's may be in use under the file-system sharing strategy)."""
    leaked = []
    for name in sorted(shm_entries() - before):
        match = _TORCH_SEGMENT.match(name)
        if not match:
            continue
        creator = int(match.group(1))
        if _pid_alive(creator):
            continue
        try:
            os.unlink(os.path.join(hardware.SHM_PATH, name))
            leaked.append(name)
        except OSError:
            pass
    return leaked


class TreeWatch:
    """Peak memory and /dev/shm growth of one trial, sampled by the driver while it waits; and
    every process seen in the tree, so a kill can reach workers whose runner already died."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid = pid
        self.interval = interval
        self.peak = MemorySample(0, 0, 0)
        self.shm_base = hardware.shm_used() or 0
        self.peak_shm = 0
        self.procs: list[psutil.Process] = []
        self.pids: set[int] = set()
        self._next = 0.0

    def poll(self) -> MemorySample | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.interval
        procs = tree(self.pid)
        for proc in procs:
            if proc.pid not in self.pids:
                self.pids.add(proc.pid)
                self.procs.append(proc)
        sample = _sample(procs)
        self.peak = MemorySample(max(self.peak.uss, sample.uss), max(self.peak.pss, sample.pss),
                                 max(self.peak.processes, sample.processes))
        used = hardware.shm_used()
        if used is not None:
            self.peak_shm = max(self.peak_shm, used - self.shm_base)
        return sample
