"""The driver's side of a trial: ``TrialRunner`` starts the trial process (``trial.py``), waits for
its start-up (telling the user what for), sends it one config at a time, guards the tree's
memory, keeps the watchdog, and turns every way a trial can end into a TrialResult (NOTE [ Trial
protocol ] in protocol.py). A script's module-level ``tune()`` or ``best_loader()`` met again in
a process 'spawn' started is refused (``refuse_reimport``).

# NOTE [ A script re-imported by spawn ]
# 'spawn' (the trial process's start method, and the default on macOS and Windows) runs the
# caller's main script once more in the fresh interpreter, as ``__mp_main__``, so that what was
# pickled by reference can be found; whatever it does at module level runs again. A best_loader()
# outside ``if __name__ == "__main__":`` would then wait in the trial process on the key's lock its
# parent holds until the set-up's timeout blamed the dataset; a tune() would meet multiprocessing's
# refusal to start a process while bootstrapping. So both first ask whether this process still
# prepares its main module (multiprocessing marks it ``_inheriting`` until its target is about to
# run; a frame of spawn's main-module fix-up says the same) and raise a UsageError naming the
# script and the guard. The trial process dies of it before it has its pipe, so it also writes the
# message into a file the driver named in its environment (NOTE_VAR), read when it died starting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..events import Event, WaitingForTrialStart
from ..errors import clip, one_line, usage
from ..inputs.options import clipped_timeout
from ..search.policy import BurstSettings
from ..search.results import BUDGET_ENDED, CONSTRAINT, FAILED, HANG, TrialResult
from ..search.space import LoaderConfig
from . import guard, serve
from .failures import death_cause, death_text, exit_text
from .load import LoadMeter, Span
from .protocol import (Beat, Begin, DatasetInfo, Measure, Measured, Profiled, ProfileRequest, RunnerSetup, SetupError,
                       SetupFailed, Stop)

# What a user of TrialRunner needs, RunnerSetup and SetupError included, comes from here (and the
# schedule of a long wait's notices, node/wire.py's too, and the re-import guard, the API's too).
__all__ = ["SETUP_TIMEOUT_S", "DatasetInfo", "Notices", "RunnerSetup", "SetupError", "TrialRunner",
           "refuse_reimport"]

SETUP_TIMEOUT_S = 600.0
_KILL_S = 5.0   # how long a killed trial process is waited for
# Start-up clipped to the budget's end (NOTE [ The budget is a wall bound ] in search/budget.py)
# still gets this long, inside the time the run keeps back for closing: a restart late in a run
# is refused at once rather than waited for past the bound.
MIN_CLIPPED_SETUP_S = 1.0


# How a trial ended when it sent no result (NOTE [ Trial protocol ]); TrialRunner._wait returns one.

@dataclass(frozen=True)
class _Died:   # the pipe broke, or the process is gone and nothing is left to read
    exitcode: int | None
    begun: bool  # it had sent Begin: the death is this config's


@dataclass(frozen=True)
class _Breach:   # the tree's memory (PSS, summed) passed the ceiling
    sample: guard.MemorySample


@dataclass(frozen=True)
class _Hung:   # no progress for hang_timeout_s, or the trial ran past its cap
    quiet_s: float      # since the last progress (Begin or Beat; the Measure, before either)
    running_s: float    # since the Measure was sent
    cap_s: float
    timeout_s: float    # the watchdog's timeout for this trial (clipped to the budget, maybe)
    batches: int        # as of the last Beat
    processes: int      # in the tree when the watchdog fired, before the kill
    detected_at: float  # time.monotonic() then
    at_bound: bool = False  # the cap was the run's wall bound (NOTE [ The budget is a wall bound ])


class TrialRunner:
    """The driver's handle on the trial process: sends configs, guards memory, enforces the
    watchdog, and restarts the process after anything kills it.

    Every way a trial can end is a TrialResult about its config, never an exception: a result,
    an exception in the trial (FAILED, named by ``failures.classify_failure``), the tree's memory
    past the ceiling (CONSTRAINT host_memory, tree killed), the trial process dying (FAILED,
    cause from its signal: ``failures.death_cause``), or the watchdog: no progress for
    ``hang_timeout_s`` (HANG, tree killed; NOTE [ The watchdog times stalls ]). After each trial
    the tree's leftovers are counted: processes that outlived a kill (``orphans``) and /dev/shm
    segments its dead processes left (``shm_leaks``, unlinked)."""

    def __init__(self, setup: RunnerSetup, max_memory: int, hang_timeout_s: float = 60.0,
                 setup_timeout_s: float = SETUP_TIMEOUT_S, budget_left: Callable[[], float] | None = None,
                 notice: Callable[[Event], None] | None = None):
        self.setup = setup
        # Seconds any wait may still take before the run's wall bound (NOTE [ The budget is a wall
        # bound ] in search/budget.py): the start-up, the profile and each trial are cut there.
        self.budget_left = budget_left
        self.notice = notice             # told what a long start-up waits for (``Notices``)
        self.max_memory = max_memory
        self.hang_timeout_s = hang_timeout_s
        self.setup_timeout_s = setup_timeout_s
        self.info: DatasetInfo | None = None
        self.orphans = 0      # processes of a trial's tree still alive after it was killed
        self.shm_leaks = 0    # /dev/shm segments left by a trial's dead processes (unlinked)
        self._proc = None
        self._conn = None
        self._group: int | None = None  # the runner's process group, once it has made its own
        self._watch: guard.TreeWatch | None = None

    def setup_limit(self) -> float:
        """The seconds the trial process may take to start and build the dataset and step,
        clipped to what is left before the run's wall bound."""
        if self.budget_left is None:
            return self.setup_timeout_s
        return clipped_timeout(self.setup_timeout_s, self.budget_left(), MIN_CLIPPED_SETUP_S)

    def start(self) -> DatasetInfo:
        """Start the trial process and wait for its Ready, at most ``setup_limit()`` seconds,
        telling ``notice`` meanwhile what it waits for (``_ready``)."""
        refuse_reimport("a tune")   # NOTE [ A script re-imported by spawn ]
        limit = self.setup_limit()
        if self.budget_left is not None and self.budget_left() <= 0:
            raise SetupError("the run's budget had ended, so the trial process was not started (again). Fix: "
                             "raise --budget", usage=False, budget=True)
        context = mp.get_context("spawn")
        parent_conn, child_conn = context.Pipe()
        self._group = None
        self._proc = context.Process(target=serve.main, args=(child_conn, self.setup, time.monotonic()),
                                 name=TRIAL_PROCESS_NAME)
        note = StartNote()
        try:
            with note.passed():
                self._proc.start()
            child_conn.close()
            self._conn = parent_conn
            self._watch = guard.TreeWatch(self._proc.pid)
            message = _ready(self._proc, parent_conn, limit, self.setup_timeout_s, note, self.notice,
                                    self._kill)
        finally:
            note.close()
        if isinstance(message, SetupFailed):
            self._kill()
            raise SetupError(message.message, usage=message.usage)
        self._group = self._proc.pid  # setpgrp ran before Ready
        self.info = message.info
        return self.info

    def measure(self, config: LoaderConfig, settings: BurstSettings,
                hang_timeout_s: float | None = None) -> TrialResult:
        """One trial's result, whatever happens to the trial process. ``hang_timeout_s``: this
        trial's watchdog timeout when shorter than the runner's own (the run clips it to what is
        left of its budget). A trial process that dies before its Begin did not die of this
        config: it is restarted and the trial sent once more (NOTE [ Trial protocol ])."""
        timeout = self._timeout(hang_timeout_s)
        return self._attempt(config, settings, True, timeout) or self._attempt(config, settings, False, timeout)

    def profile(self, batch_size: int, hang_timeout_s: float | None = None, limit_s: float | None = None):
        """(Profile, None), or (None, why) when it could not be measured: a raise, the process's
        death, a breach or a hang (the tree is then killed). ``hang_timeout_s`` as for
        ``measure``; ``limit_s``: NOTE [ A profile within its share ] in profiler.py."""
        timeout = self._timeout(hang_timeout_s)
        if self._ensure_started(LoaderConfig.make(batch_size, 0, False)) is not None:
            return None, "the trial process could not be started"
        t0 = time.monotonic()
        shm_before = guard.shm_entries()
        watch = self._watch = guard.TreeWatch(self._proc.pid)
        budget = self.max_memory - (self.info.runner_pss if self.info else 0)
        meter = LoadMeter(self._proc.pid)
        # A call of the step is progress for the user's own timeout, however clipped this watchdog's is.
        if not self._send(ProfileRequest(batch_size, max(0, budget), limit_s, self.hang_timeout_s)):
            return None, "the trial process was gone"
        outcome = self._wait(watch, t0, self._bounded(self._profile_cap(timeout)), timeout)
        if isinstance(outcome, Profiled):
            self.orphans += outcome.leaked_workers
            self.shm_leaks += len(guard.clean_shm(shm_before))
            span = meter.stop()
            profile = outcome.profile
            if profile is not None and span is not None:
                profile = dataclasses.replace(profile, others_cpus=span.others_cpus, steal_cpus=span.steal_cpus)
            return profile, outcome.error
        self._kill()
        self.shm_leaks += len(guard.clean_shm(shm_before))
        return None, self._ended(LoaderConfig.make(batch_size, 0, False), outcome).error

    def longest_measure(self, settings: BurstSettings, hang_timeout_s: float | None = None) -> float:
        """The most seconds ``measure`` may take (a node's rank 0 waits this long for the others'):
        a start, a first attempt dead before its Begin, a restart and a whole second attempt."""
        timeout = self._timeout(hang_timeout_s)
        return 2 * self.setup_limit() + timeout + self._cap(settings, timeout) + 2 * _KILL_S

    def longest_profile(self, hang_timeout_s: float | None = None) -> float:
        """The most seconds ``profile`` may take: a start, its cap and a kill."""
        return self.setup_limit() + self._profile_cap(self._timeout(hang_timeout_s)) + _KILL_S

    def _timeout(self, hang_timeout_s: float | None) -> float:
        return self.hang_timeout_s if hang_timeout_s is None else min(hang_timeout_s, self.hang_timeout_s)

    @staticmethod
    def _profile_cap(timeout: float) -> float:   # once sent: its stages each report progress
        return 2 * timeout + 60.0

    def _ensure_started(self, config: LoaderConfig) -> TrialResult | None:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return None
        if self._proc is not None:
            self._kill()
        try:
            self.start()
        except SetupError as exc:
            return TrialResult(config, FAILED, cause="runner_killed",
                               error=f"the trial process could not be restarted: {clip(one_line(str(exc)), 400)}")
        return None

    def _attempt(self, config: LoaderConfig, settings: BurstSettings, retry_allowed: bool,
                 timeout: float) -> TrialResult | None:
        """One try; None when the trial process died before its Begin and one more is allowed."""
        failed = self._ensure_started(config)
        if failed is not None:
            return failed
        shm_before = guard.shm_entries()
        t0 = time.monotonic()
        watch = self._watch = guard.TreeWatch(self._proc.pid)
        meter = LoadMeter(self._proc.pid)
        if not self._send(Measure(config, settings)):
            if retry_allowed:
                return None
            return TrialResult(config, FAILED, cause="runner_killed", error="the trial process was gone")
        outcome = self._wait(watch, t0, self._bounded(self._cap(settings, timeout)), timeout)
        span = meter.stop()   # before a kill: the tree it counts is still there
        if isinstance(outcome, Measured):
            self.orphans += outcome.leaked_workers
            result = outcome.result
        else:
            self._kill()  # a breach, a death or a hang: nothing of the tree may stay
            if isinstance(outcome, _Died) and not outcome.begun and retry_allowed:
                return None  # it died of something that came before this trial
            result = self._ended(config, outcome)
        self.shm_leaks += len(guard.clean_shm(shm_before))
        return self._seen(result, watch, t0, span)

    def _send(self, message) -> bool:
        """False, its tree killed, when the trial process is gone."""
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            self._kill()
            return False
        return True

    # NOTE [ The watchdog times stalls ]: a hang is time without progress, not a long trial.
    # A healthy trial runs as long as its start-up and its windows need (up to three time caps
    # when batches are slow), so a timeout on the whole trial ended slow, healthy trials as
    # hangs whenever it was set below that. A trial that keeps delivering but never ends (a
    # livelock) still meets a generous cap on the whole.
    def _cap(self, settings: BurstSettings, timeout: float) -> float:   # however steadily it delivers
        return 2 * timeout + 3 * settings.max_window_s + 30.0

    def _bounded(self, cap: float) -> tuple[float, bool]:
        """(the cap, or what is left before the run's wall bound if sooner; whether it is that)."""
        left = self.budget_left() if self.budget_left is not None else cap
        return (cap, False) if cap <= left else (max(0.0, left), True)

    def _wait(self, watch: guard.TreeWatch, t0: float, bounded: tuple[float, bool],
              timeout: float) -> Measured | Profiled | _Died | _Breach | _Hung:
        """The trial's messages read while guarding its tree, until its result, the process's
        death, a memory breach, or the watchdog. Kills nothing."""
        begun, last_progress, batches = False, t0, 0
        cap, at_bound = bounded
        while True:
            if self._conn.poll(0.05):
                try:
                    message = self._conn.recv()
                except (EOFError, OSError):
                    return _Died(self._wait_exitcode(), begun)
                if isinstance(message, Begin):
                    begun, last_progress = True, time.monotonic()
                elif isinstance(message, Beat):
                    last_progress, batches = time.monotonic(), message.batches
                else:
                    return message  # Measured or Profiled: the only other messages of a trial
                continue
            sample = watch.poll()
            if sample is not None and sample.pss > self.max_memory:
                return _Breach(sample)
            if not self._proc.is_alive():
                code = self._wait_exitcode()
                if self._conn.poll(0):
                    continue  # its last words (its result, or Begin) are still in the pipe
                return _Died(code, begun)
            now = time.monotonic()
            quiet = now - last_progress
            if quiet > timeout or now - t0 > cap:
                return _Hung(quiet_s=quiet, running_s=now - t0, cap_s=cap, timeout_s=timeout, batches=batches,
                             processes=max(1, len(watch.procs)), detected_at=now,
                             at_bound=at_bound and quiet <= timeout)

    def _ended(self, config: LoaderConfig, outcome: _Died | _Breach | _Hung) -> TrialResult:
        if isinstance(outcome, _Died):
            return TrialResult(config, FAILED, cause=death_cause(outcome.exitcode), error=death_text(outcome.exitcode))
        if isinstance(outcome, _Breach):
            sample = outcome.sample
            return TrialResult(config, CONSTRAINT, cause="host_memory",
                               error=f"{sample.pss / 2**30:.2f} GiB across {sample.processes} processes passed the "
                                     f"{self.max_memory / 2**30:.2f} GiB ceiling; trial stopped")
        hang = outcome   # the watchdog's: called right after the kill, which it times
        killed_in = time.monotonic() - hang.detected_at
        progress = f"after {hang.batches} batches" if hang.batches else "and no batch at all"
        clipped = (f", clipped from {self.hang_timeout_s:g} s to what was left of the budget"
                   if hang.timeout_s < self.hang_timeout_s else "")
        why = (f"no progress for {hang.quiet_s:.1f} s (the watchdog's timeout is {hang.timeout_s:.3g} s{clipped})"
               if hang.quiet_s > hang.timeout_s else
               f"still running after {hang.running_s:.1f} s, when the run's budget ended (the command is bounded "
               "by its budget, a tenth or 5 s more at most); a larger --budget measures it"
               if hang.at_bound else
               f"still running after {hang.running_s:.0f} s, past the {hang.cap_s:.0f} s a trial may take "
               "(twice the watchdog's timeout, three window caps and 30 s)")
        return TrialResult(config, HANG, cause=BUDGET_ENDED if hang.at_bound else "hang", stalled_s=hang.quiet_s,
                           error=f"{why}, {progress}; the trial's process tree ({hang.processes} processes) "
                                 f"was killed in {killed_in:.2f} s")

    def _seen(self, result: TrialResult, watch: guard.TreeWatch, t0: float, span: Span | None) -> TrialResult:
        """With what the driver saw: memory, /dev/shm, wall time, the CPU others took meanwhile
        (NOTE [ Others on the machine ])."""
        config = result.config
        load = {} if span is None else {"others_cpus": span.others_cpus, "steal_cpus": span.steal_cpus,
                                        "tree_cpus": span.tree_cpus}
        return dataclasses.replace(result, peak_host_bytes=watch.peak.uss or None, peak_pss_bytes=watch.peak.pss or None,
                                   peak_shm_bytes=watch.peak_shm,
                                   batch_bytes=(self.info.sample_bytes * config.batch_size) if self.info else None,
                                   seconds=time.monotonic() - t0, **load)

    def _wait_exitcode(self) -> int | None:
        self._proc.join(timeout=2.0)
        return self._proc.exitcode

    def _kill(self) -> None:
        """The runner's whole tree: its group, its descendants, and every process the guard saw
        in it (a crashed runner's workers are no longer its children)."""
        if self._proc is None:
            return
        if self._proc.pid is not None:
            seen = self._watch.procs if self._watch is not None else ()
            self.orphans += len(guard.kill_tree(self._proc.pid, group=self._group, also=seen))
            self._proc.join(timeout=_KILL_S)
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        """Stop the runner politely, then make sure nothing of its tree is left."""
        if self._proc is None:
            return
        if self._proc.pid is not None and self._proc.is_alive() and self._conn is not None:
            try:
                self._conn.send(Stop())
                self._proc.join(timeout=5.0)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
        self._proc = None

    def __enter__(self) -> "TrialRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ready(proc, conn, limit: float, setup_timeout_s: float, note: StartNote,
          notice: Callable[[Event], None] | None, kill: Callable[[], None]):
    """Ready or SetupFailed (NOTE [ Trial protocol ], step 1), or SetupError when the trial process
    died first (with its own message if it left one: NOTE [ A script re-imported by spawn ]) or
    did not answer within ``limit`` seconds (``setup_timeout_s``, or less: the budget's)."""
    t0 = time.monotonic()
    # Said at once, then as the wait goes on: the command's first line, so a start-up of seconds
    # (a fresh interpreter importing torch and the dataset) is not a silent one.
    notices = Notices(next_s=0.0)
    while not conn.poll(0.2):
        waited = time.monotonic() - t0
        if not proc.is_alive():
            raise _died(proc, note, kill, "while building the dataset or step")
        if waited > limit:
            kill()
            raise SetupError(_too_slow(limit, setup_timeout_s), usage=False, budget=limit < setup_timeout_s)
        if notice is not None and notices.due(waited):
            notice(WaitingForTrialStart(waited, limit, clipped=limit < setup_timeout_s))
    try:
        return conn.recv()
    except (EOFError, OSError):
        raise _died(proc, note, kill, "while starting") from None


def _died(proc, note: StartNote, kill: Callable[[], None], when: str) -> SetupError:
    proc.join(timeout=2.0)
    code = proc.exitcode
    kill()
    own = note.read()
    if own is not None:
        return SetupError(own, usage=True)
    return SetupError(f"the trial process died {when} ({exit_text(code)})" + (_main_script_hint() if code == 1 else ""),
                      usage=False)


def _too_slow(limit: float, setup_timeout_s: float) -> str:
    lazily = ("do the slow part lazily (open or decode files in __getitem__, not in __init__), or build the "
              "dataset once, save it, and have --dataset load the saved copy")
    if limit < setup_timeout_s:
        return (f"starting the trial process and building the dataset and step must end within the budget "
                f"(they had {limit:.0f} s left of it, a fresh interpreter importing torch and your modules "
                "included), and they had not finished; the trial process was stopped. "
                "Fix: raise --budget (a loaded machine starts processes several times slower), or " + lazily)
    return (f"starting the trial process and building the dataset and step must take under "
            f"{setup_timeout_s:.0f} s, and they had not finished; the trial process was stopped. Fix: " + lazily)


def _main_script_hint() -> str:
    """A likely cause when the trial process dies while starting and left no message of its own:
    'spawn' re-runs the caller's script in the new process (NOTE [ A script re-imported by
    spawn ] in driver.py), and something at its module level failed there."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.endswith("__main__")):
        return ""
    return (f". If {os.path.basename(path)} calls tune() at module level, put the call under "
            "`if __name__ == \"__main__\":` (the trial process re-imports that script); the "
            "trial process's own error is on stderr above")


# A long wait says what it waits for: the trial process's start-up and a node's ranks (node/wire.py)
# report it through their ``notice`` callback once it passes FIRST_S, then every EVERY_S, as an
# event (autoloader/events); the words are events/lines.py's.
FIRST_S = 5.0    # a healthy start-up or rank is usually done by then: past it, the user is told
EVERY_S = 15.0   # and told again this often while the wait goes on


@dataclass
class Notices:
    """Whether a wait of ``waited`` seconds is due its next notice (one per call that says so)."""

    next_s: float = FIRST_S

    def due(self, waited: float) -> bool:
        if waited < self.next_s:
            return False
        # A notice said at once (next_s=0: the trial process's start) is followed by the usual
        # one at FIRST_S, then one every EVERY_S.
        self.next_s = FIRST_S if waited < FIRST_S else waited + EVERY_S
        return True


NOTE_VAR = "AUTOLOADER_START_NOTE"
TRIAL_PROCESS_NAME = "autoloader-runner"   # the trial process's multiprocessing name, set before its main runs
# spawn.py's functions that run the main module in a new process (forkserver's preload uses the last).
_FIXUPS = frozenset({"_fixup_main_from_path", "_fixup_main_from_name", "import_main_path"})
_environ_lock = threading.Lock()


def _preparing() -> bool:
    if getattr(mp.current_process(), "_inheriting", False):
        return True
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _FIXUPS and os.path.basename(os.path.dirname(code.co_filename)) == "multiprocessing":
            return True
        frame = frame.f_back
    return False


def _script() -> str:
    main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path:
        return path
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) or "the main script"


def refuse_reimport(entry: str) -> None:
    """Raise a UsageError when ``entry`` (``"tune()"``, ``"best_loader()"``) is called while this
    process re-runs its parent's main script (NOTE [ A script re-imported by spawn ])."""
    if not _preparing():
        return
    script = _script()
    name = os.path.basename(script)
    error = usage(f"{entry} must not run when a new process re-imports the main script: multiprocessing's "
                  f"'spawn' runs {name}'s module-level code again in every process it starts, autoloader's "
                  f"trial process among them, where {entry} would start another tune",
                  f"{entry} at module level of {script}",
                  f"put the call, and the code that uses its result, under `if __name__ == \"__main__\":` in "
                  f"{name} (or in a function called from there)")
    if _leave_note(str(error)):
        # autoloader's own trial process: the driver raises the error in the user's process, so
        # this one ends quietly (SystemExit passes a script's ``except Exception`` too).
        raise SystemExit(1)
    raise error


def _leave_note(message: str) -> bool:
    path = os.environ.get(NOTE_VAR)
    if not path or mp.current_process().name != TRIAL_PROCESS_NAME:
        return False
    try:
        with open(path, "w") as fh:
            fh.write(message)
    except OSError:
        return False   # the driver then reports the death with its generic hint
    return True


class StartNote:
    """The driver's side: a file named in the trial process's environment while it starts, read
    back when it died while starting."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="autoloader-start-", suffix=".txt")
        os.close(fd)

    @contextlib.contextmanager
    def passed(self):
        """NOTE_VAR names the file to a process started in the block ('spawn' copies the environment)."""
        with _environ_lock:
            before = os.environ.get(NOTE_VAR)
            os.environ[NOTE_VAR] = self.path
            try:
                yield
            finally:
                if before is None:
                    os.environ.pop(NOTE_VAR, None)
                else:
                    os.environ[NOTE_VAR] = before

    def read(self) -> str | None:
        try:
            with open(self.path) as fh:
                return fh.read().strip() or None
        except OSError:
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)
