"""``autoloader tune`` as a user runs it: a subprocess with ``--json --quiet`` and a fresh
``--out`` of its own (so nothing is resumed from an earlier study), timed from outside."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from autoloader.store.result import TuneResult
from scripts.bench.common import REPO, config_from_kwargs


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG for the tuner: it runs in a session of its own (so it can be killed as a
    group), and must not outlive the bench if the bench is killed outright."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


@dataclasses.dataclass
class TunerOutcome:
    command: list[str]
    data: dict | None           # the tuner's JSON, None when it failed
    wall_s: float
    returncode: int | None
    error: str | None
    stderr: str
    t_start: float              # wall clock
    t_end: float

    def keep_stderr(self, out_dir: str, label: str) -> None:
        """The tuner's stderr beside the records, as ``tuner-LABEL.stderr.txt``, when it said anything."""
        if self.stderr.strip():
            with open(os.path.join(out_dir, f"tuner-{label}.stderr.txt"), "w") as fh:
                fh.write(self.stderr)

    @property
    def result(self) -> TuneResult | None:
        """The tuner's result as its record (``TuneResult.from_dict``: every field checked), None
        when it failed."""
        return TuneResult.from_dict(self.data) if self.data else None

    @property
    def pick(self):
        """The config the tuner chose, as the bench keys configs (``config_from_kwargs``), None
        when it failed."""
        return config_from_kwargs(self.data["config"]) if self.data else None


class Tuner:
    """Runs one ``autoloader tune`` at a time; ``kill()`` ends the one running (from a signal
    handler's clean-up), with its trial process."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def run(self, dataset_spec: str, step_spec: str, batch_size: int, budget: float | None,
            budget_in_effect: float, label: str, extra: tuple[str, ...] = (), cwd: str | None = None,
            env: dict | None = None) -> TunerOutcome:
        """``budget``: passed as --budget when not None (else the tuner's own default applies);
        ``budget_in_effect``: the budget that will apply, for the time-out (twice it plus 120 s);
        ``extra``: more options for ``autoloader tune`` (the node bench's --nproc-per-node, --device);
        ``cwd`` and ``env``: another checkout's, to run its tuner (ab_tunes.py; the repository's by default)."""
        tmp = tempfile.mkdtemp(prefix=f"autoloader-bench-{label}-")
        cmd = [sys.executable, "-m", "autoloader.cli", "tune", "--dataset", dataset_spec, "--step", step_spec,
               "--batch-size", str(batch_size), "--out", tmp, *extra, "--json", "--quiet"]
        if budget is not None:
            cmd[-2:-2] = ["--budget", f"{budget:g}"]
        timeout = 2 * budget_in_effect + 120
        t_start = time.time()
        t = time.monotonic()
        try:
            self.proc = subprocess.Popen(cmd, cwd=cwd or REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, start_new_session=True, preexec_fn=die_with_parent)
            try:
                stdout, stderr = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                stdout, stderr = self.proc.communicate()
                stderr += f"\n[bench] tuner killed after {timeout:.0f} s"
            rc = self.proc.returncode
            self.proc = None
        finally:
            wall = time.monotonic() - t
            shutil.rmtree(tmp, ignore_errors=True)
        data = None
        if rc == 0:
            for line in reversed(stdout.strip().splitlines()):
                if line.startswith("{"):
                    try:
                        data = json.loads(line)
                    except json.JSONDecodeError:
                        pass
                    break
        error = None
        if data is None:
            tail = (stderr.strip().splitlines() or ["(no stderr)"])[-3:]
            error = f"rc={rc}: " + " | ".join(tail)
        return TunerOutcome(cmd, data, wall, rc, error, stderr, t_start, time.time())

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session; its trial process dies with it
            except (ProcessLookupError, PermissionError):
                pass


def shown(cmd: list[str]) -> str:
    """The command as a user would type it (without the interpreter's path)."""
    return " ".join(shlex.quote(c) for c in cmd[1:])
