"""The trial process's own processes: its DataLoader workers and their end.

What the trial process (trial.py) does to the processes it starts: each worker dies with the
runner and names itself (``WorkerInit``), a trial's workers are stopped however the trial left
them (``shutdown_iterators``), reaped and counted when they outlive that (``reap_children``), and
their memory read (``pss``). The runner itself dies with the driver (``die_with_parent``). Why:
NOTE [ Trial processes ] in trial.py.
"""

from __future__ import annotations

import ctypes
import errno
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

from . import guard
from .failures import OUT_OF_DESCRIPTORS_EXIT
from .teardown import MAX_REPORTS


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
        end_when_out_of_descriptors()
        if self.inner is not None:
            self.inner(worker_id)


# NOTE [ A worker out of file descriptors ]
# A dataset that opens files in its workers and never closes them runs each worker out of file
# descriptors (EMFILE). Then the worker's own bookkeeping fails in places Python reports on stderr
# with a traceback, none of them the dataset's frames: the result queue's feeder thread (a batch's
# storage is shared by descriptor; the batch is dropped and the trial process waits for it), the
# resource sharer's thread (handing that descriptor over; the trial process reads an EOFError), and
# the removal of the worker's temporary folder at its exit. So each trial worker (``WorkerInit``,
# never the user's own process or loaders):
#   - holds DESCRIPTOR_RESERVE descriptors of its own from its start, released for its own
#     clean-up: at its exit before the temporary folder is removed, and on the first EMFILE;
#   - takes the first EMFILE any of those report (threading.excepthook, sys.excepthook, which the
#     resource sharer calls, sys.unraisablehook, and the queue feeder's error handler) as the end
#     of the worker: the reserve released, its temporary folder removed, it exits with code
#     OUT_OF_DESCRIPTORS_EXIT, printing nothing. Any other exception goes to the hook it replaced.
# The exit code is the note to the trial process, which needs no descriptor to send: the trial
# process charges the trial to the dataset's leak (failures.FD_EXHAUSTED_IN_WORKER) when a worker
# ended with it, whether DataLoader saw the worker end or the trial read the EOFError before it did
# (``ended_out_of_descriptors``).

DESCRIPTOR_RESERVE = 4


def _says_emfile(exc: BaseException | None) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def end_when_out_of_descriptors() -> None:
    """In a trial's DataLoader worker: NOTE [ A worker out of file descriptors ]."""
    from multiprocessing import queues, util

    reserve = []
    try:
        for _ in range(DESCRIPTOR_RESERVE):
            reserve.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        pass

    def release() -> None:
        while reserve:
            try:
                os.close(reserve.pop())
            except OSError:
                pass

    def end() -> None:
        release()
        for finalizer in list(util._finalizer_registry.values()):
            if getattr(finalizer, "_callback", None) is util._remove_temp_dir:
                try:
                    finalizer()
                except Exception:  # noqa: BLE001 - the folder is left; the worker ends all the same
                    pass
        os._exit(OUT_OF_DESCRIPTORS_EXIT)

    thread_hook, sys_hook, unraisable_hook = threading.excepthook, sys.excepthook, sys.unraisablehook
    feeder_error = queues.Queue._on_queue_feeder_error

    def on_thread(args) -> None:
        if _says_emfile(args.exc_value):
            end()
        thread_hook(args)

    def on_uncaught(kind, value, tb) -> None:
        if _says_emfile(value):
            end()
        sys_hook(kind, value, tb)

    def on_unraisable(unraisable) -> None:
        if _says_emfile(unraisable.exc_value):
            end()
        unraisable_hook(unraisable)

    def on_feeder_error(exc, obj) -> None:
        if _says_emfile(exc):
            end()
        feeder_error(exc, obj)

    threading.excepthook, sys.excepthook, sys.unraisablehook = on_thread, on_uncaught, on_unraisable
    queues.Queue._on_queue_feeder_error = staticmethod(on_feeder_error)
    util.Finalize(None, release, exitpriority=0)   # before the temporary folder's removal (-100)


def ended_out_of_descriptors(iterators: list, wait_s: float = 0.0) -> bool:
    """Whether a worker of these iterators (weak references) of a trial that failed exited with
    OUT_OF_DESCRIPTORS_EXIT, waiting up to ``wait_s`` for those still running to end: a worker
    whose leak broke a batch's hand-over ends just after the trial process read the EOFError it
    caused. The iterators' workers are dropped from the SIGCHLD registry first (the trial has
    failed: their end is read here), and a report that came before that is absorbed and read."""
    alive = [it for ref in iterators if (it := ref()) is not None]
    said = f"exit code {OUT_OF_DESCRIPTORS_EXIT}."
    found = False
    for _ in range(MAX_REPORTS):
        try:
            for it in alive:
                _unregister(it)
            workers = [w for it in alive for w in getattr(it, "_workers", ())]
            deadline = time.monotonic() + wait_s
            while True:
                codes = [w.exitcode for w in workers]
                if found or OUT_OF_DESCRIPTORS_EXIT in codes:
                    return True
                if None not in codes or time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
        except RuntimeError as report:   # NOTE [ An iterator that raised while starting ] in teardown.py
            if "DataLoader worker" not in str(report):
                raise
            found = found or said in str(report)
    return found


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
    for ref in iterators:
        it = ref()
        if it is None:
            continue
        shut_down(it, "_shutdown_workers")
        _unregister(it)
        del it


def _unregister(it) -> None:
    """Drop a DataLoader iterator's workers from its SIGCHLD handler's registry: their end is
    no longer reported by an exception wherever this process happens to be."""
    from torch.utils.data._utils import signal_handling

    if getattr(it, "_worker_pids_set", False):
        try:
            signal_handling._remove_worker_pids(id(it))
        except (RuntimeError, AttributeError):
            pass
        it._worker_pids_set = False


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
