"""A full disk under --out: the run goes on, prints its pick, exits 4 with what could not be
written, where and how much was free, and loses nothing it had stored. ``--out`` is a small
tmpfs in a private mount namespace (scripts/faults/full_disk.py), filled while the run goes."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import REPO_ROOT

from scripts.faults import datasets as faulty
from scripts.faults import full_disk

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")

needs_private_mount = pytest.mark.skipif(not faulty.private_shm_available(),
                                         reason="needs root and unshare for a private tmpfs")


def _tune(out: str, *more: str) -> list[str]:
    return [AUTOLOADER, "tune", "--dataset", "scripts.faults.datasets:waiting",
            "--batch-size", "16", "--budget", "30", "--device", "cpu", "--out", out, "--trial-timeout", "20", *more]


@needs_private_mount
@pytest.mark.slow
@pytest.mark.heavy
def test_the_disk_fills_mid_search(tmp_path):
    out = str(tmp_path / "out")
    run = full_disk.in_private_tmpfs("8m", out, 1, _tune(out), cwd=REPO_ROOT)   # filled after the first trial
    assert run["free_after_fill"] == 0
    stderr = run["stderr"]
    assert run["returncode"] == 4, stderr[-3000:]
    assert "Traceback" not in stderr
    # Mid-search: said once, when it happens, and the search goes on.
    assert stderr.count("could not write the study to " + out) >= 1
    assert "the search goes on without storing its trials" in stderr
    # At the end: what, where, how much was free, the fix.
    assert "could not save all of it" in stderr and "could not write the result and its snippet to " + out in stderr
    assert "No space left on device" in stderr and "database or disk is full" in stderr
    assert "0 B free there" in stderr
    assert "Fix: free space there, and run the same command again (it resumes" in stderr
    # The pick is printed all the same, and says it was not saved.
    assert "num_workers" in run["stdout"] and "samples/s" in run["stdout"]
    assert "not saved" in run["stdout"] and "  saved " not in run["stdout"]
    # Nothing stored before the disk filled is lost.
    before = {tid: v for tid, v in run["filled_at"].items() if v[0] in ("COMPLETE", "FAIL")}
    assert len(before) >= 1
    assert all(run["after"].get(tid) == v for tid, v in before.items()), (before, run["after"])
    assert not [f for f in run["files"] if f.endswith(".json") or ".tmp-" in f], run["files"]


@needs_private_mount
@pytest.mark.slow
@pytest.mark.heavy
def test_the_disk_is_full_from_the_start(tmp_path):
    """No study can even be created: the search runs in memory and the pick is printed (as JSON
    here, with ``"saved": false``)."""
    out = str(tmp_path / "out")
    run = full_disk.in_private_tmpfs("1m", out, 0, _tune(out, "--json", "--budget", "15"), cwd=REPO_ROOT)
    assert run["returncode"] == 4, run["stderr"][-3000:]
    assert "Traceback" not in run["stderr"]
    assert "could not write the study to " + out in run["stderr"] and "free there" in run["stderr"]
    data = json.loads(run["stdout"])
    assert data["saved"] is False and data["config"]["batch_size"] == 16 and data["samples_per_s"] > 0
