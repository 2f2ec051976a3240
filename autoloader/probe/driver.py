"""The driver's side of a trial: ``TrialRunner`` starts the trial process (``trial.py``), sends
it one config at a time, guards the tree's memory, keeps the watchdog, and turns every way a
trial can end into a TrialResult. The messages are NOTE [ Trial protocol ] in protocol.py.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

from ..results import CONSTRAINT, FAILED, HANG, TrialResult
from ..space import LoaderConfig
from . import guard, trial
from .burst import BurstSettings
from .failures import death_cause, death_text, exit_text
from .protocol import Beat, Begin, DatasetInfo, Measure, RunnerSetup, SetupError, SetupFailed, Stop

# What a user of TrialRunner needs, RunnerSetup and SetupError included, comes from here.
__all__ = ["SETUP_TIMEOUT_S", "DatasetInfo", "RunnerSetup", "SetupError", "TrialRunner"]

SETUP_TIMEOUT_S = 600.0


def _main_script_hint() -> str:
    """A likely cause when the trial process dies while starting: 'spawn' re-runs the caller's
    script in the new process, so a script that calls tune() outside ``if __name__ ==
    "__main__":`` makes the trial process start another one, which multiprocessing refuses."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.endswith("__main__")):
        return ""
    return (f". If {os.path.basename(path)} calls tune() at module level, put the call under "
            "`if __name__ == \"__main__\":` (the trial process re-imports that script); the "
            "trial process's own error is on stderr above")


class TrialRunner:
    """The driver's handle on the trial process: sends configs, guards memory, enforces the
    watchdog, and restarts the process after anything kills it.

    Every way a trial can end is a TrialResult about its config, never an exception: a result,
    an exception in the trial (FAILED, classified by ``classify_failure``), the tree's memory
    past the ceiling (CONSTRAINT host_memory, tree killed), the trial process dying (FAILED,
    cause from its signal), or the watchdog: no progress for ``hang_timeout_s`` (HANG, tree
    killed; NOTE [ The watchdog times stalls ]). After each trial the tree's
    leftovers are counted: processes that outlived a kill (``orphans``) and /dev/shm segments
    its dead processes left (``shm_leaks``, unlinked)."""

    def __init__(self, setup: RunnerSetup, max_memory: int, hang_timeout_s: float = 60.0,
                 setup_timeout_s: float = SETUP_TIMEOUT_S):
        self.setup = setup
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

    def start(self) -> DatasetInfo:
        context = mp.get_context("spawn")
        parent_conn, child_conn = context.Pipe()
        self._group = None
        self._proc = context.Process(target=trial.main, args=(child_conn, self.setup), name="autoloader-runner")
        self._proc.start()
        child_conn.close()
        self._conn = parent_conn
        self._watch = guard.TreeWatch(self._proc.pid)
        deadline = time.monotonic() + self.setup_timeout_s
        while not parent_conn.poll(0.2):
            if not self._proc.is_alive():
                code = self._wait_exitcode()
                self._kill()
                raise SetupError(f"the trial process died while building the dataset or step "
                                 f"({exit_text(code)})" + (_main_script_hint() if code == 1 else ""),
                                 usage=False)
            if time.monotonic() > deadline:
                self._kill()
                raise SetupError(f"starting the trial process and building the dataset and step must take under "
                                 f"{self.setup_timeout_s:.0f} s, and they had not finished; the trial process "
                                 "was stopped. Fix: do the slow "
                                 "part lazily (open or decode files in __getitem__, not in __init__), or "
                                 "build the dataset once, save it, and have --dataset load the saved copy",
                                 usage=False)
        try:
            message = parent_conn.recv()
        except (EOFError, OSError):
            code = self._wait_exitcode()
            self._kill()
            raise SetupError(f"the trial process died while starting ({exit_text(code)})"
                             + (_main_script_hint() if code == 1 else ""), usage=False) from None
        if isinstance(message, SetupFailed):
            self._kill()
            raise SetupError(message.message, usage=message.usage)
        self._group = self._proc.pid  # setpgrp ran before Ready
        self.info = message.info
        return self.info

    def measure(self, config: LoaderConfig, settings: BurstSettings) -> TrialResult:
        """Run one trial and return its result, whatever happens to the trial process.

        A runner that dies before it has acknowledged the trial died of something earlier (a
        late signal from the last trial's workers, say), not of this config: it is restarted
        and the trial sent once more.
        """
        for attempt in (1, 2):
            result = self._attempt(config, settings, retry_allowed=attempt == 1)
            if result is not None:
                return result
        raise AssertionError("unreachable: the second attempt always returns")

    def _ensure_started(self, config: LoaderConfig) -> TrialResult | None:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return None
        if self._proc is not None:
            self._kill()
        try:
            self.start()
        except SetupError as exc:
            return TrialResult(config, FAILED, cause="runner_killed",
                               error=f"the trial process could not be restarted: {str(exc)[:400]}")
        return None

    def _attempt(self, config: LoaderConfig, settings: BurstSettings, retry_allowed: bool) -> TrialResult | None:
        failed = self._ensure_started(config)
        if failed is not None:
            return failed
        shm_before = guard.shm_entries()
        t0 = time.monotonic()
        watch = self._watch = guard.TreeWatch(self._proc.pid)
        try:
            self._conn.send(Measure(config, settings))
        except (BrokenPipeError, OSError):
            self._kill()
            if retry_allowed:
                return None
            return TrialResult(config, FAILED, cause="runner_killed", error="the trial process was gone")
        status = cause = error = None
        stalled = None
        begun = False
        fields: dict = {}
        last_progress, batches = t0, 0
        # NOTE [ The watchdog times stalls ]: a hang is time without progress, not a long trial.
        # A healthy trial runs as long as its start-up and its windows need (up to three time caps
        # when batches are slow), so a timeout on the whole trial ended slow, healthy trials as
        # hangs whenever it was set below that. A trial that keeps delivering but never ends (a
        # livelock) still meets a generous cap on the whole.
        cap = 2 * self.hang_timeout_s + 3 * settings.max_window_s + 30.0
        while True:
            if self._conn.poll(0.05):
                try:
                    message = self._conn.recv()
                except (EOFError, OSError):
                    code = self._wait_exitcode()
                    self._kill()
                    if not begun and retry_allowed:
                        return None
                    status, cause, error = FAILED, death_cause(code), death_text(code)
                    break
                if isinstance(message, Begin):
                    begun, last_progress = True, time.monotonic()
                    continue
                if isinstance(message, Beat):
                    last_progress, batches = time.monotonic(), message.batches
                    continue
                fields = dict(message.fields)  # a Result: the only other message of a trial
                self.orphans += message.leaked_workers
                break
            sample = watch.poll()
            if sample is not None and sample.pss > self.max_memory:
                self._kill()
                status, cause = CONSTRAINT, "host_memory"
                error = (f"{sample.pss / 2**30:.2f} GiB across {sample.processes} processes passed the "
                         f"{self.max_memory / 2**30:.2f} GiB ceiling; trial stopped")
                break
            if not self._proc.is_alive():
                code = self._wait_exitcode()
                if self._conn.poll(0):
                    continue  # its last words (a result, or "begin") are still in the pipe
                self._kill()
                if not begun and retry_allowed:
                    return None
                status, cause, error = FAILED, death_cause(code), death_text(code)
                break
            now = time.monotonic()
            quiet = now - last_progress
            if quiet > self.hang_timeout_s or now - t0 > cap:
                processes = max(1, len(watch.procs))
                self._kill()
                killed_in = time.monotonic() - now
                status, cause, stalled = HANG, "hang", quiet
                progress = f"after {batches} batches" if batches else "and no batch at all"
                why = (f"no progress for {quiet:.1f} s (the watchdog's timeout is {self.hang_timeout_s:g} s)"
                       if quiet > self.hang_timeout_s else
                       f"still running after {now - t0:.0f} s, past the {cap:.0f} s a trial may take (twice the "
                       "watchdog's timeout, three window caps and 30 s)")
                error = (f"{why}, {progress}; the trial's process tree ({processes} processes) was killed in "
                         f"{killed_in:.2f} s")
                break
        if status is not None:
            fields = {"status": status, "cause": cause, "error": error, "stalled_s": stalled}
        self.shm_leaks += len(guard.clean_shm(shm_before, watch.pids))
        return TrialResult(config=config, peak_host_bytes=watch.peak.uss or None,
                           peak_pss_bytes=watch.peak.pss or None,
                           peak_shm_bytes=watch.peak_shm,
                           batch_bytes=(self.info.sample_bytes * config.batch_size) if self.info else None,
                           seconds=time.monotonic() - t0, **fields)

    def _wait_exitcode(self) -> int | None:
        self._proc.join(timeout=2.0)
        return self._proc.exitcode

    def _kill(self) -> None:
        """Kill the runner's whole tree: its group, its descendants, and every process the
        guard saw in it (a crashed runner's workers are no longer its children)."""
        if self._proc is None:
            return
        if self._proc.pid is not None:
            seen = self._watch.procs if self._watch is not None else ()
            self.orphans += len(guard.kill_tree(self._proc.pid, group=self._group, also=seen))
            self._proc.join(timeout=5.0)
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
