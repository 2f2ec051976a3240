"""Shared test setup.

The tuner starts its trial process with 'spawn', so test datasets live in ``tests/workloads.py``
and are re-imported there by module name: the tests directory must be on ``sys.path`` of this
process (spawned children inherit it). The repository's tools are the package ``scripts``
(``scripts.bench``, ``scripts.faults``), imported from the root: run ``python -m pytest tests``
from there.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)
WORKLOADS = os.path.join(TESTS_DIR, "workloads.py")

if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)


def pytest_configure(config):
    # More workers than cores is what some tests build on purpose; torch warns each time.
    config.addinivalue_line("filterwarnings", "ignore:This DataLoader will create:UserWarning")
    # Snippets tuned for CUDA pin memory; on this CPU-only machine torch says it cannot.
    config.addinivalue_line("filterwarnings", "ignore:'pin_memory' argument is set as true:UserWarning")


@pytest.fixture(autouse=True)
def results_home(tmp_path_factory, monkeypatch):
    """Every test's results home (NOTE [ Results home ]) is a fresh folder of its own, never the
    user's cache; tests that leave ``out`` out write here."""
    path = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("AUTOLOADER_HOME", str(path))
    return str(path)


@pytest.fixture(autouse=True)
def _shared_machine(monkeypatch):
    """Tests that are not about a busy machine must not turn inconclusive because something else
    shares the test machine's two CPUs (other test processes, other jobs on a CI host): runs are
    judged busy only past burner.QUIET_BUSY of them (NOTE [ Others on the machine ]); the busy
    tests set the default back where they test it."""
    from burner import QUIET_BUSY

    monkeypatch.setenv("AUTOLOADER_BUSY_SHARE", str(QUIET_BUSY))


@pytest.fixture(autouse=True)
def _sys_path_restored():
    """A test that loads a user module by path puts its folder on sys.path (as the tuner must, for
    spawned workers); later tests' trial processes inherit sys.path, where a folder holding a
    ``random.py`` shadows the standard library's. So each test's additions go with it."""
    saved = list(sys.path)
    yield
    sys.path[:] = saved


@pytest.fixture
def out_dir(tmp_path):
    """A fresh results directory (the tuner writes <fingerprint>/<key>.{json,py,db} under it)."""
    path = tmp_path / "results"
    path.mkdir()
    return str(path)


@pytest.fixture
def repo_cwd(monkeypatch):
    """Run from the repository root, so relative specs like tests/workloads.py:tiny resolve."""
    monkeypatch.chdir(REPO_ROOT)
    return REPO_ROOT


def _spin(seconds: float, conn) -> None:
    start = time.perf_counter()
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    conn.send(time.perf_counter() - start)
    conn.close()


def parallel_capacity(seconds: float = 0.4) -> float:
    """How many cores two CPU-bound processes get right now: about 2.0 on an idle 2-core
    machine, about 1.0 when something else keeps a core busy."""
    context = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for _ in range(2):
        parent, child = context.Pipe(duplex=False)
        proc = context.Process(target=_spin, args=(seconds, child))
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    walls = [pipe.recv() for pipe in pipes]
    for proc in procs:
        proc.join()
    return 2 * seconds / max(walls)
