"""The trial process's own processes: its DataLoader workers and their end.

What the trial process (trial.py) does to the processes it starts: each worker dies with the
runner and names itself (``WorkerInit``), a trial's workers are stopped however the trial left
them (``shutdown_iterators``), reaped and counted when they outlive that (``reap_children``), and
their memory read (``pss``). The runner itself dies with the driver (``die_with_parent``). Why:
NOTE [ Trial processes ] in trial.py.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import time

from . import guard


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel SIGKILLs us when the driver dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def adopt_orphans() -> None:
    """PR_SET_CHILD_SUBREAPER: a process the dataset starts and leaves (detached with
    start_new_session=True, or double-forked) is re-parented to this trial process when its
    parent ends, not to init, so ``end_leftovers`` finds it."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(36, 1)  # 36 == PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def end_leftovers() -> list[str]:
    """The processes still under this trial process when it is told to stop (the dataset's own,
    started detached and left running): each SIGKILLed and reaped; what each was, to name it."""
    import psutil

    try:
        left = [p for p in psutil.Process().children(recursive=True) if not guard.gone(p)]
        named = []
        for proc in left:
            try:
                named.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:120] or proc.name()}")
            except psutil.Error:
                named.append(f"pid {proc.pid}")
        guard.kill_all(left, timeout=2.0)
    except (psutil.Error, OSError):
        return []
    mp.active_children()
    return named


def release_semaphores() -> None:
    """Unlink the named semaphores this process still holds (the queues and locks of loaders
    started with forkserver or spawn), as their finalizers would at a normal exit: the trial
    process ends with os._exit, which runs none, and the resource tracker would then warn of
    every one as leaked."""
    from multiprocessing import synchronize, util

    for finalizer in list(util._finalizer_registry.values()):
        if getattr(finalizer, "_callback", None) is synchronize.SemLock._cleanup:
            try:
                finalizer()
            except OSError:
                pass


def set_name(name: str) -> None:
    """PR_SET_NAME: what ps, top and psutil's name() show, so trial processes are easy to find."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 == PR_SET_NAME
    except (OSError, AttributeError):
        pass


RUNNER_NAME = "autoloader-run"
WORKER_NAME = "autoloader-wkr"


class WorkerInit:
    """The trial's ``worker_init_fn``: the worker dies with the runner, then the user's own runs.

    A DataLoader worker notices a dead parent only at its next queue poll, and one that hangs or
    spins never does; so each worker asks the kernel for SIGKILL when the runner dies, and exits
    at once if the runner died before it could ask.
    """

    def __init__(self, runner_pid: int | None, inner=None):
        self.runner_pid = runner_pid  # the worker's parent when forked; None for forkserver/spawn
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        die_with_parent()
        if self.runner_pid is not None and os.getppid() != self.runner_pid:
            os._exit(1)
        set_name(WORKER_NAME)
        if self.inner is not None:
            self.inner(worker_id)


def shut_down(obj, method: str) -> None:
    """Call ``obj``'s shutdown ``method`` where it has one, best effort: the reaper kills what
    it leaves."""
    shutdown = getattr(obj, method, None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - best effort; the reaper kills what is left
            pass


def shutdown_iterators(iterators: list) -> None:
    """Stop a trial's DataLoader workers now, whatever state the trial left them in.

    An iterator kept alive past the trial (a persistent-workers loader, a traceback) keeps its
    workers and its entry in DataLoader's SIGCHLD registry; a worker of it dying later would
    then raise "DataLoader worker ... is killed by signal" in the runner between trials, and
    the next config would be blamed. So each iterator is shut down explicitly (joins, then
    terminates, its workers) and its registry entry is dropped.
    """
    from torch.utils.data._utils import signal_handling

    for ref in iterators:
        it = ref()
        if it is None:
            continue
        shut_down(it, "_shutdown_workers")
        if getattr(it, "_worker_pids_set", False):
            try:
                signal_handling._remove_worker_pids(id(it))
            except (RuntimeError, AttributeError):
                pass
            it._worker_pids_set = False
        del it


def pss(pid: int) -> int | None:
    """One process's PSS (its private pages and its share of shared ones), None when gone."""
    import psutil

    try:
        info = psutil.Process(pid).memory_full_info()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return int(getattr(info, "pss", info.uss))


def reap_children(timeout: float = 5.0) -> int:
    """Wait for this trial's workers to exit, killing any still there after ``timeout``; reap
    them all. Returns how many are still alive after that."""
    import psutil

    def alive() -> list:
        return [child for child in psutil.Process().children(recursive=True) if not guard.gone(child)]

    deadline = time.monotonic() + timeout
    leftover = alive()
    while leftover and time.monotonic() < deadline:
        time.sleep(0.05)
        leftover = alive()
    still = guard.kill_all(leftover, timeout)
    mp.active_children()  # reaps the workers multiprocessing started (no zombies left)
    return len(still)
