"""Hangs through the real tuner: each check is a command that once waited far past its budget,
run with a bound of its own. A check hangs when the command is still running at that bound
(killed then); it survives when it ends in time, with the exit code and the words the README
promises, and no traceback.

- a script that calls best_loader() (or tune()) at module level, without the ``__main__``
  guard, started twice at once: each must fail at once, naming the script and the guard;
- a dataset factory that never returns in the trial process, under ``--budget 10``: the run
  must end with the budget's start-up bound, saying meanwhile what it waits for;
- a node tune (``--nproc-per-node 2``) with rank 1 stopped by SIGSTOP mid-trial: it must end
  naming rank 1, in seconds, not after 30 minutes;
- Ctrl-C on a node tune: every rank exits 130, no traceback.

``hangs_in_trial_process`` is the factory of the second check (``--dataset
scripts.faults.hangs:hangs_in_trial_process``, imported by name in the trial process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable

from scripts.faults import datasets as faulty
from scripts.faults.checks import AUTOLOADER, REPO_ROOT, WAITING, Check, line

GROUP = "hangs"


def hangs_in_trial_process():
    """Never returns in autoloader's trial process (a mount that hangs there, a lock its parent
    holds); a healthy dataset anywhere else."""
    import multiprocessing as mp

    if mp.current_process().name == "autoloader-runner":
        while True:
            time.sleep(3600)
    return faulty.Tiny()


SCRIPT = """import sys
sys.path.insert(0, {root!r})
from scripts.faults.datasets import Tiny
from autoloader import {entry}
result = {entry}(Tiny(), batch_size=16, budget=10, device="cpu", out={out!r}{more})
print("DONE")
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])}


def _ended(procs: list[subprocess.Popen], bound_s: float, check: Check) -> list[tuple[str, str]] | None:
    """Each process's (stdout, stderr), or None when one was still running at ``bound_s`` (a
    hang: every one is killed, and the check says so)."""
    t0 = time.monotonic()
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=max(1.0, bound_s - (time.monotonic() - t0))))
        except subprocess.TimeoutExpired:
            for other in procs:
                if other.poll() is None:
                    _kill(other)
            check.note = f"hung: still waiting after {bound_s:.0f} s"
            return None
    check.seconds = time.monotonic() - t0
    return outputs


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


def _module_level(root: str, entry: str):
    def body(check: Check) -> None:
        work = os.path.join(root, f"module-level-{entry}")
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "train.py")
        with open(path, "w") as fh:
            # best_loader tunes before the run here: its trial process is what re-imports the script
            more = ', tune="before"' if entry == "best_loader" else ""
            fh.write(SCRIPT.format(root=REPO_ROOT, entry=entry, out=os.path.join(work, "out"), more=more))
        procs = [subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=_env(), cwd=work, start_new_session=True) for _ in range(2)]
        outputs = _ended(procs, 180.0, check)
        if outputs is None:
            return
        lasts = [(err.strip().splitlines() or [""])[-1] for _, err in outputs]
        check.survived = all(p.returncode == 1 and "DONE" not in out and last.startswith("autoloader.errors.InputError")
                             and f"{entry}() at module level of {path}" in last and "__name__ ==" in last
                             and err.count("Traceback") == 1 for p, (out, err), last in zip(procs, outputs, lasts))
        check.told = lasts[0].replace("autoloader.errors.InputError: ", "")
        if not check.survived:
            check.note = f"exits {[p.returncode for p in procs]}"
    return body


def _startup(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "startup-hangs")
        proc = subprocess.Popen([AUTOLOADER, "tune", "--dataset", "scripts.faults.hangs:hangs_in_trial_process",
                                 "--budget", "10", "--batch-size", "16", "--device", "cpu", "--out", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                                start_new_session=True)
        outputs = _ended([proc], 120.0, check)
        if outputs is None:
            return
        stderr = outputs[0][1]
        waiting = line(stderr, "waiting for the trial process")
        # Clipped to the budget, nothing measured is inconclusive (exit 5, the README's table); past
        # the start-up's own bound, a failure (exit 1).
        check.survived = (bool(waiting) and ((proc.returncode == 5 and "must end within the budget" in stderr)
                                             or (proc.returncode == 1 and "must take under" in stderr))
                          and "Fix: " in stderr
                          and "Traceback" not in stderr)
        check.told = f"{waiting} ... {line(stderr, 'Error:')[:300]}"
        if not check.survived:
            check.note = f"exit {proc.returncode}"
    return body


def _node(root: str, name: str, act: Callable[[subprocess.Popen], None], ok: Callable[[int, str], bool],
          needle: str):
    def body(check: Check) -> None:
        if len(os.sched_getaffinity(0)) < 2:
            check.note = "not run: two ranks need two CPUs"
            return
        out = os.path.join(root, name)
        proc = subprocess.Popen([AUTOLOADER, "tune", "--dataset", WAITING, "--nproc-per-node", "2", "--device", "cpu",
                                 "--budget", "30", "--batch-size", "16", "--out", out], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, start_new_session=True,
                                preexec_fn=faulty.sigint_as_from_a_terminal)
        if not faulty.wait_for_running_trial(out, proc, 150):
            _kill(proc)
            check.note = "no trial ever ran"
            return
        act(proc)
        outputs = _ended([proc], 120.0, check)
        if outputs is None:
            return
        stderr = outputs[0][1]
        check.survived = ok(proc.returncode, stderr) and "Traceback" not in stderr
        check.told = f"exit {proc.returncode}: {line(stderr, needle)[:400]}"
        if not check.survived:
            check.note = f"exit {proc.returncode}"
    return body


def _stop_rank_one(proc: subprocess.Popen) -> None:
    import psutil

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ranks = [c for c in psutil.Process(proc.pid).children() if "autoloader.node" in " ".join(c.cmdline())]
        if ranks:
            os.kill(ranks[0].pid, signal.SIGSTOP)
            return
        time.sleep(0.2)


def _ctrl_c(proc: subprocess.Popen) -> None:
    time.sleep(0.3)   # into the trial
    os.killpg(proc.pid, signal.SIGINT)   # a terminal's Ctrl-C: the whole foreground group


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    """Every hang check (``add(check, body)`` runs one)."""
    for entry in ("best_loader", "tune"):
        add(Check(GROUP, f"module-level {entry}()",
                  f"a script calls {entry}() without the __main__ guard, started twice at once", "python script.py"),
            _module_level(root, entry))
    add(Check(GROUP, "start-up that never ends", "the dataset factory blocks in the trial process; --budget 10",
              "CLI"), _startup(root))
    add(Check(GROUP, "a node rank stopped", "kill -STOP on rank 1 mid-trial, --nproc-per-node 2, --budget 30", "CLI"),
        _node(root, "rank-stopped", _stop_rank_one, lambda code, err: code == 1 and "lost touch with rank 1" in err,
              "Error:"))
    add(Check(GROUP, "Ctrl-C on a node tune", "SIGINT to the ranks' group mid-trial, --nproc-per-node 2", "CLI"),
        _node(root, "rank-interrupted", _ctrl_c,
              lambda code, err: code == 130 and "rank 1 of 2 interrupted" in err and "interrupted;" in err,
              "autoloader: rank 1"))


def totals(checks: list[Check]) -> list[str]:
    """The report's totals rows for the hangs."""
    tried = [c for c in checks if c.group == GROUP and not c.note.startswith("not run")]
    hung = sum(1 for c in tried if c.note.startswith("hung"))
    return [f"| hangs (a command still waiting at its check's bound) | {hung} of {len(tried)} tried | 0 |",
            (f"| hang checks survived (ended in time, as the README says) | {sum(c.survived for c in tried)} of "
             f"{len(tried)} | all |")]


def main() -> int:
    """``python -m scripts.faults.hangs``: these checks alone, printed as the suite renders them
    (no report is written; ``python -m scripts.faults`` runs them with the rest)."""
    import shutil
    import tempfile
    import uuid

    from scripts.faults import state
    from scripts.faults.checks import run_check

    tag = uuid.uuid4().hex
    os.environ[faulty.TAG_VAR] = tag
    root = tempfile.mkdtemp(prefix="autoloader-hangs-")
    checks: list[Check] = []
    try:
        run(root, lambda check, body: checks.append(run_check(check, body)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for check in checks:
        check.told = check.told.replace(root, "$TMP")
    leftover = faulty.leftover_processes(tag)
    print("\n".join([*state.render(checks), *totals(checks), f"| processes left behind | {len(leftover)} | 0 |"]))
    return 0 if state.all_survived(checks) and not leftover else 1


if __name__ == "__main__":
    sys.exit(main())
