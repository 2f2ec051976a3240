"""What the rest of the machine takes while a trial runs, measured from the driver (NOTE [ Others
on the machine ] in search/results.py says what the figures mean). Over a ``LoadMeter``'s span, the
usable CPUs' busy time less this run's own processes' (the driver, the trial process and all
below it; a reaped child is charged to its parent) is what the others took. The kernel's steal
time (the hypervisor's other guests) is busy time too, and kept apart as well.

# NOTE [ Runnable others count at what they want ]
# CPU time taken under-reads a neighbour that wants more than it gets (two spinners beside a
# trial keeping 3 processes busy on 2 CPUs get 0.8 CPUs, while the trial got 3/5 of what it would
# alone). So what the others waited on a run queue counts too: each thread's wait is in
# /proc/PID/task/TID/schedstat (its second field, in ns), read for every thread at the start and
# the end; what threads outside this run's tree (at either end) waited meanwhile is added to what
# they took, capped at the usable CPUs. A thread of this run that lived within the span is in
# neither reading, so the run's own oversubscription is never charged to others (another's thread
# that ended within it is lost). Without such files (not Linux), only the CPU taken counts.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass

import psutil

from ..inputs import hardware
from .guard import tree

# /proc/stat's fields that are time a CPU was busy (idle and iowait are not); guest time is
# already inside user time there.
_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
# Spans shorter than this say nothing: the counters tick in hundredths of a second.
MIN_SPAN_S = 0.2


@dataclass(frozen=True)
class Span:
    """The machine over one span of wall time, in CPUs' worth (CPU seconds over wall seconds)."""
    others_cpus: float     # taken or waited for by other processes, steal included, up to the usable CPUs
    steal_cpus: float
    tree_cpus: float       # this run's own processes
    seconds: float
    waiting_cpus: float = 0.0   # of that, others' time waiting to run (NOTE [ Runnable others count at what they want ])


def _waits() -> dict[tuple[int, int], int]:
    """Every thread's run-queue wait so far, in ns, by (pid, tid); empty where the kernel says none."""
    found = {}
    for path in glob.glob("/proc/[0-9]*/task/[0-9]*/schedstat"):
        parts = path.split("/")
        try:
            with open(path) as fh:
                found[(int(parts[2]), int(parts[4]))] = int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue   # ended between the listing and the read
    return found


def _mine(pid: int | None) -> set[int]:
    return {os.getpid(), *(p.pid for p in tree(pid))} if pid is not None else {os.getpid()}


def affinity() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:   # no affinity call: every CPU
        return list(range(os.cpu_count() or 1))


def _system(cpus: list[int]) -> tuple[float, float]:
    """(busy, steal) CPU seconds so far over ``cpus`` (all, when the per-CPU list does not line up)."""
    per = psutil.cpu_times(percpu=True)
    rows = [per[i] for i in cpus] if len(per) == (os.cpu_count() or len(per)) and max(cpus) < len(per) \
        else [psutil.cpu_times()]
    busy = sum(getattr(row, f, 0.0) for row in rows for f in _BUSY)
    return busy, sum(getattr(row, "steal", 0.0) for row in rows)


def _cpu(proc: psutil.Process, reaped: bool = True) -> float:
    """``proc``'s CPU seconds so far, with its reaped children's where ``reaped``."""
    try:
        t = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0.0
    return t.user + t.system + (t.children_user + t.children_system if reaped else 0.0)


def tree_cpu(pid: int | None) -> float:
    """CPU seconds so far of the driver and the tree under ``pid``, each with the children it reaped."""
    total = _cpu(psutil.Process())
    if pid is not None:
        total += sum(_cpu(p) for p in tree(pid))
    return total


def cpu_mark() -> tuple[float, float, float] | None:
    """(now, the CPU seconds so far the CPUs this process may run on were busy, the CPU seconds so
    far of this process and every process below it that is alive, without what they reaped), for
    ``cpus_since``; None where the counters cannot be read."""
    try:
        busy, _ = _system(affinity())
        return time.monotonic(), busy, sum(_cpu(p, reaped=False) for p in tree(os.getpid()))
    except (OSError, psutil.Error):
        return None


def cpus_since(mark: tuple[float, float, float] | None) -> tuple[float | None, float | None]:
    """(the CPUs' worth busy, by anyone; this process tree's CPUs' worth) since ``mark``
    (``cpu_mark()``), or (None, None) over a span too short to say. A process that ended within
    the span takes its CPU time with it: the tree's figure is a floor."""
    now = cpu_mark()
    if mark is None or now is None or now[0] - mark[0] < MIN_SPAN_S:
        return None, None
    seconds = now[0] - mark[0]
    return max(0.0, (now[1] - mark[1]) / seconds), max(0.0, (now[2] - mark[2]) / seconds)


class LoadMeter:
    """Started when a span begins (``pid``: the trial process), read once it ends (``stop()``).
    ``usable``: the CPUs this run may use; below the CPUs it may run on (a cgroup quota), the
    others take from it only what they use past the spare ones."""

    def __init__(self, pid: int | None, usable: float | None = None):
        self.pid = pid
        self.cpus = affinity()
        self.usable = float(usable or hardware.usable_cpus())
        self.t0 = time.monotonic()
        self.busy0, self.steal0 = _system(self.cpus)
        self.tree0 = tree_cpu(pid)
        self.mine0 = _mine(pid)
        self.waits0 = _waits()

    def stop(self) -> Span | None:
        """None when too short to say anything."""
        seconds = time.monotonic() - self.t0
        if seconds < MIN_SPAN_S:
            return None
        busy, steal = _system(self.cpus)
        mine = max(0.0, tree_cpu(self.pid) - self.tree0) / seconds
        ours = self.mine0 | _mine(self.pid)
        waited = sum(max(0, ns - self.waits0.get(task, 0)) for task, ns in _waits().items()
                     if task[0] not in ours) / 1e9 / seconds
        others = max(0.0, (busy - self.busy0) / seconds - mine) + waited
        spare = max(0.0, len(self.cpus) - self.usable)
        return Span(others_cpus=min(self.usable, max(0.0, others - spare)),
                    steal_cpus=max(0.0, steal - self.steal0) / seconds, tree_cpus=mine, seconds=seconds,
                    waiting_cpus=waited)
