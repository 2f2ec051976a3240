"""A disk that fills up under a running ``autoloader tune``, for tests/test_full_disk.py and the
fault suite.

Run inside a private mount namespace where ``OUT`` is a small tmpfs of its own, so no real disk
is ever filled (``in_private_tmpfs`` does this), from the repository's root::

    unshare -m --propagation private sh -c \\
        'mount -t tmpfs -o size=8m tmpfs OUT && exec python -m scripts.faults.full_disk OUT TRIALS -- COMMAND...'

It starts COMMAND (an ``autoloader tune ... --out OUT``), fills OUT to the last byte once the
study holds TRIALS finished trials (before starting it, for 0), waits for the command, and prints
one JSON object: its exit code, stdout and stderr, the study's trials when the disk was filled
and after the run, and the bytes free once filled. The tmpfs goes with the namespace, so
everything is read here, inside it.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import time

from scripts.faults import datasets as faulty


def fill(folder: str) -> int:
    """Write zeros into ``folder`` until its file system has no byte left; the bytes written."""
    written = 0
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as fh:
        for chunk in (2**20, 2**16, 2**12, 2**9, 1):
            block = bytes(chunk)
            while True:
                try:
                    fh.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                written += chunk
    return written


def _states(out: str) -> dict:
    db = faulty.find_study(out)
    if db is None:
        return {}
    try:
        return {str(k): list(v) for k, v in faulty.study_states(db).items()}
    except sqlite3.Error:  # the driver may be mid-write
        return {}


def run(out: str, trials: int, command: list[str], timeout_s: float = 240) -> dict:
    report = {"filled_at": None, "free_after_fill": None}
    if trials == 0:
        fill(out)
        report["filled_at"] = {}
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    while trials and report["filled_at"] is None and driver.poll() is None and time.monotonic() < deadline:
        states = _states(out)
        if sum(1 for state, _ in states.values() if state in ("COMPLETE", "FAIL")) >= trials:
            fill(out)
            report["filled_at"] = _states(out)
            break
        time.sleep(0.1)
    stat = os.statvfs(out)
    report["free_after_fill"] = stat.f_bavail * stat.f_frsize
    try:
        stdout, stderr = driver.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        driver.kill()
        stdout, stderr = driver.communicate()
    report.update(returncode=driver.returncode, stdout=stdout, stderr=stderr, after=_states(out),
                  files=sorted(os.path.relpath(os.path.join(r, f), out) for r, _, fs in os.walk(out) for f in fs))
    return report


def in_private_tmpfs(size: str, out: str, trials: int, command: list[str], cwd: str, timeout_s: float = 300) -> dict:
    """``run`` inside a private mount namespace with ``out`` a tmpfs of ``size``; ``cwd`` is the
    repository's root (this module is run by name from there)."""
    import shlex

    os.makedirs(out, exist_ok=True)
    inner = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "scripts.faults.full_disk", out, str(trials),
                                               "--", *command])
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(out)} && exec {inner}"],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout_s)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the fill run failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    args = sys.argv[1:]
    split = args.index("--")
    print(json.dumps(run(args[0], int(args[1]), args[split + 1:])))
