"""The trial process's own processes (NOTE [ Trial processes ] in trial.py): each worker dies with
the runner and names itself (``WorkerInit``), a trial's workers are stopped however the trial
left them (``shutdown_iterators``, ``half_built_iterator``) and reaped (``reap_children``); the
runner dies with the driver (``die_with_parent``).

# NOTE [ An iterator that raised while starting ]
# With workers, ``iter(loader)`` starts the workers, registers their pids with DataLoader's
# SIGCHLD handler, and only then asks the sampler for the first indices. When that raises (a
# sampler's __iter__, or shuffling a dataset too long to permute), the half-built iterator is
# never returned to be shut down, and once its workers are reaped the SIGCHLD handler raises
# "DataLoader worker ... is killed by signal" wherever the trial process is, killing it. So the
# half-built iterator is found in the exception's frames and shut down like any other
# (``half_built_iterator``), the cause is named from the frames ("sampler_error"), and a late
# SIGCHLD report while the trial's leftovers are reaped is absorbed (``reap_absorbing_reports``):
# that trial has its result, and the process lives on.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

from typing import Callable

from . import guard
from .failures import OUT_OF_DESCRIPTORS_EXIT, says_emfile


def _prctl(*args) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(*args)
    except (OSError, AttributeError):
        pass


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel SIGKILLs us when the driver dies, even by SIGKILL."""
    _prctl(1, signal.SIGKILL)


def adopt_orphans() -> None:
    """PR_SET_CHILD_SUBREAPER: a process the dataset starts and leaves (detached, or
    double-forked) is re-parented to this process, not to init, so ``end_leftovers`` finds it."""
    _prctl(36, 1)


def end_leftovers() -> list[str]:
    """The processes still under this one when it is told to stop (the dataset's, left running),
    SIGKILLed and reaped: what each was, to name it."""
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
    """Unlink the named semaphores still held (forkserver and spawn loaders' queues and locks) as
    their finalizers would: os._exit runs none, and the resource tracker would call them leaked."""
    from multiprocessing import synchronize, util

    for finalizer in list(util._finalizer_registry.values()):
        if getattr(finalizer, "_callback", None) is synchronize.SemLock._cleanup:
            try:
                finalizer()
            except OSError:
                pass


def set_name(name: str) -> None:
    """PR_SET_NAME: what ps, top and psutil's name() show, so trial processes are easy to find."""
    _prctl(15, name.encode()[:15], 0, 0, 0)


RUNNER_NAME = "autoloader-run"
WORKER_NAME = "autoloader-wkr"


class WorkerInit:
    """The trial's ``worker_init_fn``: the worker dies with the runner (a worker that hangs or spins
    never polls its queue to notice), at once if it already did; then the user's own runs."""

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
# descriptors (EMFILE). Then the worker's own bookkeeping fails where Python reports it on stderr,
# none of it the dataset's frames: the result queue's feeder thread (the batch is dropped and the
# trial process waits for it), the resource sharer's thread (the trial process reads an EOFError),
# the removal of its temporary folder at exit. So each trial worker (``WorkerInit``, never the
# user's own process or loaders):
#   - holds DESCRIPTOR_RESERVE descriptors from its start, released for its own clean-up: at its
#     exit before the temporary folder is removed, and on the first EMFILE;
#   - takes the first EMFILE any of those report (threading.excepthook, sys.excepthook, which the
#     resource sharer calls, sys.unraisablehook, the queue feeder's error handler) as its end: the
#     reserve released, its temporary folder removed, it exits with OUT_OF_DESCRIPTORS_EXIT,
#     printing nothing. Any other exception goes to the hook it replaced. The feeder's is known
#     by its message too: torch shares a batch's storage through a shared-memory file, and its
#     shm_open failing is a RuntimeError ("unable to open shared memory object ... Too many open
#     files (24)"), not an OSError; the feeder runs none of the dataset's code.
# The exit code is the note to the trial process (it needs no descriptor): the trial is charged to
# the dataset's leak (failures.FD_EXHAUSTED_IN_WORKER) when a worker ended with it, whether
# DataLoader saw the end or the trial read the EOFError first (``ended_out_of_descriptors``).

DESCRIPTOR_RESERVE = 4


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

    def hooked(replaced, exc_of, text=False):
        def hook(*args) -> None:
            if says_emfile(exc_of(*args), text=text):
                end()
            replaced(*args)
        return hook

    threading.excepthook = hooked(threading.excepthook, lambda args: args.exc_value)
    sys.excepthook = hooked(sys.excepthook, lambda kind, value, tb: value)
    sys.unraisablehook = hooked(sys.unraisablehook, lambda unraisable: unraisable.exc_value)
    queues.Queue._on_queue_feeder_error = staticmethod(hooked(queues.Queue._on_queue_feeder_error,
                                                              lambda exc, obj: exc, text=True))
    util.Finalize(None, release, exitpriority=0)   # before the temporary folder's removal (-100)


def ended_out_of_descriptors(iterators: list, wait_s: float = 0.0) -> bool:
    """Whether a worker of a failed trial's iterators (weak references) exited with
    OUT_OF_DESCRIPTORS_EXIT, waiting up to ``wait_s`` for those still running; a SIGCHLD report
    before they leave the registry is absorbed and read."""
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
        except RuntimeError as report:   # NOTE [ An iterator that raised while starting ]
            if "DataLoader worker" not in str(report):
                raise
            found = found or said in str(report)
    return found


def shut_down(obj, method: str) -> None:
    """``obj``'s shutdown ``method`` where it has one, best effort: the reaper kills what it leaves."""
    shutdown = getattr(obj, method, None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - best effort; the reaper kills what is left
            pass


def shutdown_iterators(iterators: list) -> None:
    """Stop a trial's DataLoader workers now, whatever state the trial left them in: an iterator
    kept alive (persistent workers, a traceback) keeps its SIGCHLD registry entry, and a worker
    dying later would raise in the runner between trials and blame the next config."""
    for ref in iterators:
        it = ref()
        if it is None:
            continue
        shut_down(it, "_shutdown_workers")
        _unregister(it)
        del it


def _unregister(it) -> None:
    """Its workers out of the SIGCHLD registry: their end no longer raises wherever we are."""
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
    """How many of this trial's workers are alive after ``timeout`` and a kill, all reaped."""
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


# How many late SIGCHLD reports one reap may absorb: one per worker of the largest trial is
# plenty; past it something keeps killing workers, and the trial process is let die.
MAX_REPORTS = 256


def half_built_iterator(exc: BaseException):
    """The DataLoader iterator whose construction raised ``exc`` (found as ``self`` in the
    frames of its ``__init__``), or None."""
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    tb = exc.__traceback__
    found = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, _BaseDataLoaderIter):
            found = candidate
        tb = tb.tb_next
    return found


def reap_absorbing_reports(reap: Callable[[], int]) -> int:
    """``reap()``, run again when DataLoader's SIGCHLD handler interrupts it with a report about
    a worker of the trial just ended (NOTE [ An iterator that raised while starting ])."""
    for _ in range(MAX_REPORTS):
        try:
            return reap()
        except RuntimeError as exc:
            if "DataLoader worker" not in str(exc):
                raise
    return reap()
