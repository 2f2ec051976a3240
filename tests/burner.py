"""A CPU burner for the busy-machine tests, and the background load the tests see.

``Burner`` starts one process per usable CPU, each spinning, for the test's duration: a neighbour
that takes every CPU it can get, as a second job or a data sync would. It is always stopped (use
it as a context manager). ``background()`` measures what other processes take with nothing of the
test's running, in CPUs' worth, so a test can say what "quiet" was where it ran: on a machine that
other users share, the background is theirs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import psutil

_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")


def _spin() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


def cpus() -> int:
    return len(os.sched_getaffinity(0))


class Burner:
    """``per_cpu`` spinning processes on each usable CPU while the ``with`` block runs."""

    def __init__(self, per_cpu: int = 1):
        self.count = per_cpu * cpus()
        self.procs: list[mp.Process] = []

    def __enter__(self) -> Burner:
        context = mp.get_context("fork")
        try:
            for _ in range(self.count):
                proc = context.Process(target=_spin, daemon=True, name="test-burner")
                proc.start()
                self.procs.append(proc)
        except BaseException:
            self.stop()
            raise
        time.sleep(0.5)   # let them reach the CPUs
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(timeout=5)
        self.procs = []

    def __exit__(self, *exc) -> None:
        self.stop()


def background(seconds: float = 2.0) -> float:
    """CPUs' worth the machine spent busy over ``seconds`` while this process slept: others' load."""
    a = psutil.cpu_times()
    time.sleep(seconds)
    b = psutil.cpu_times()
    return sum(getattr(b, f) - getattr(a, f) for f in _BUSY) / seconds


# The share of the CPUs past which the quiet-machine tests' registry calls a night busy: a test
# machine of two CPUs is often shared (other test processes, other jobs; while these tests were
# written, other work took 1.2-1.9 of its 2 CPUs for hours, by the tuner's own meter, NOTE [
# Others on the machine ]), so "quiet" there can mean that load, not an idle machine; a night
# past this is still inconclusive and run again.
QUIET_BUSY = 0.95
INCONCLUSIVE = 5


def conclusive(run, tries: int = 3, pause_s: float = 5.0):
    """``run()`` -> (exit code, report); run again, after a pause, while it comes back inconclusive
    (exit 5: the machine was busy). Returns the last (code, report) and how many runs were
    inconclusive. A busy result is never the baseline, so a run again compares with the same one."""
    inconclusive = 0
    for attempt in range(tries):
        code, report = run()
        if code != INCONCLUSIVE:
            return code, report, inconclusive
        inconclusive += 1
        time.sleep(pause_s)
    return code, report, inconclusive
