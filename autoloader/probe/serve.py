"""The trial process's entry point: its set-up, then the message loop serving the driver's
requests (NOTE [ Trial protocol ] in protocol.py) with ``trial._Runner``; NOTE [ Trial
processes ] in trial.py says why trials run in a process of their own."""

from __future__ import annotations

import dataclasses
import errno
import multiprocessing as mp
import os
import sys
import traceback
import warnings

from ..search.results import FAILED, OK, TrialResult
from .failures import FD_EXHAUSTED, FD_EXHAUSTED_IN_WORKER, worker_out_of_descriptors
from .protocol import Beat, Begin, Measured, Profiled, ProfileRequest, Ready, RunnerSetup, SetupError, SetupFailed, Stop
from .trial import _Runner, uncompiled
from .workers import (RUNNER_NAME, adopt_orphans, die_with_parent, end_leftovers, reap_absorbing_reports, reap_children,
                      release_semaphores, set_name)


def _uncompiled(setup: RunnerSetup) -> tuple[str, ...]:
    """``uncompiled`` of the usual packages and the dataset's and step's top-level packages, where
    a spec names them; a failure of its own is nothing found, never the user's."""
    names = []
    for source in (setup.dataset, setup.step):
        spec = getattr(source, "spec", None)
        module = spec.rpartition(":")[0] if isinstance(spec, str) else ""
        if module and not module.endswith(".py") and os.sep not in module:
            names.append(module.split(".")[0])
    try:
        return uncompiled(tuple(names))
    except Exception:  # noqa: BLE001 - a look at the import caches, not the user's code
        return ()


def _reaped() -> int | None:
    """How many of the trial's workers were left alive once reaped; None when this process has no
    file descriptor left to look for them (EMFILE: FD_EXHAUSTED), which ends it."""
    try:
        return reap_absorbing_reports(reap_children)
    except OSError as exc:
        if exc.errno != errno.EMFILE:
            raise
        return None


def main(conn, setup: RunnerSetup, began: float | None = None) -> None:
    """Set up, answer Ready, then serve until Stop or a broken pipe (NOTE [ Trial protocol ] in
    protocol.py). ``began``: when the driver started this process (``time.monotonic()``, one
    clock for every process of the host), where the set-up's first part is timed from."""
    os.setpgrp()
    die_with_parent()
    adopt_orphans()
    set_name(RUNNER_NAME)
    if setup.shard is not None:
        # seed_worker (seeding.py) keys each worker's stream by RANK: this process's workers are
        # that rank's, whatever the environment it was started from said.
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(setup.shard[0]), str(setup.shard[1])
    mp.set_start_method(setup.worker_start_method, force=True)
    # Trying more workers than CPUs is the point of some trials; DataLoader's warning about it
    # would only clutter the user's terminal.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    from ..errors import UsageError

    try:
        runner = _Runner(setup, began=began)
        info = runner.inspect()
        if runner.cuda:
            runner.warm_up()
        info = dataclasses.replace(info, setup_parts=tuple(runner.parts.marks), uncompiled=_uncompiled(setup))
    except (UsageError, SetupError) as exc:
        conn.send(SetupFailed(str(exc), True))
        return
    except Exception as exc:  # noqa: BLE001 - the user's code raised: bad input, with its traceback
        what = "the dataset and step" if setup.step is not None else "the dataset"
        conn.send(SetupFailed(
            f"building {what} and loading one batch (in a fresh process, as every trial does) must "
            f"work, and it raised {type(exc).__name__}: {exc}. Fix: make {what} run on its own in a "
            f"fresh Python process and tune again; "
            f"the traceback says where it raised:\n{traceback.format_exc(limit=8)}", True))
        return
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which decides
        conn.send(SetupFailed(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}", False))
        return
    conn.send(Ready(info))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        except RuntimeError:
            # DataLoader's SIGCHLD handler reporting a worker of a finished trial: that trial
            # has its result already, so this is not about the next one.
            continue
        if isinstance(message, Stop):
            left = end_leftovers()
            if left:   # the dataset's processes, started detached and left running: ended, and named
                print(f"autoloader: ended {len(left)} process{'es' if len(left) > 1 else ''} the dataset (or step) "
                      f"started and left running ({'; '.join(left)}): a tune ends what its trials started. Fix: "
                      "stop them in the dataset when it is done, or start them outside it", file=sys.stderr)
            # Every trial's loaders and workers are gone by now; what is left is the interpreter's
            # teardown of torch, seconds on a loaded machine that the driver would wait for past
            # the run's result (NOTE [ The budget is a wall bound ] in search/budget.py).
            release_semaphores()   # os._exit runs no finalizer: the resource tracker would call them leaked
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        conn.send(Begin(os.getpid()))
        beat = lambda batches: conn.send(Beat(batches))  # noqa: E731
        if isinstance(message, ProfileRequest):
            profile, error = runner.profile(message.batch_size, beat, message.memory_budget, message.limit_s,
                                           message.step_stall_s)
            leaked = _reaped()
            answer = Profiled(profile, error, leaked) if leaked is not None else \
                Profiled(None, error or FD_EXHAUSTED, 0)
        else:
            try:
                result = runner.measure(message.config, message.settings, beat=beat)
            except RuntimeError as exc:   # a worker's end reported before the trial could read it
                if not worker_out_of_descriptors(exc):
                    raise
                result = TrialResult(message.config, FAILED, cause="dataset_error", error=FD_EXHAUSTED_IN_WORKER)
            leaked = _reaped()
            said = result.error and (FD_EXHAUSTED in result.error or FD_EXHAUSTED_IN_WORKER in result.error)
            if leaked is None and (result.status == OK or not said):
                result = TrialResult(result.config, FAILED, cause="dataset_error", error=FD_EXHAUSTED)
            answer = Measured(result, leaked or 0)
        conn.send(answer)
        if leaked is None:
            return   # the descriptors the dataset leaked go with this process; the next gets a fresh one
        if runner.cuda_broken:
            return  # NOTE [ Pinned memory outlives its trial ] in trial.py: the next trial gets a fresh process
