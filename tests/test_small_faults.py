"""Issue 50's smaller faults, each with its fix: a symlinked lock file, a step that raises
KeyboardInterrupt or SystemExit, a database server that refuses the connection, a zero-argument
factory of a torchdata.nodes graph, ``--format`` on a nodes result, the plots of a huge result."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

from autoloader.errors import InputError
from autoloader.store.paths import held

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")


def test_a_lock_file_that_is_a_symlink_is_refused_with_its_fix(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not autoloader's\n")
    lock = tmp_path / "box" / "key.lock"
    lock.parent.mkdir()
    lock.symlink_to(target)
    with pytest.raises(InputError, match=r"plain file autoloader makes.*symbolic link to .*elsewhere.*Fix: remove it"):
        with held(str(lock)):
            pass
    assert target.read_text() == "not autoloader's\n" and os.path.islink(lock), "nothing touched"


@pytest.mark.slow
def test_tune_refuses_a_symlinked_lock_without_a_traceback(tmp_path):
    from autoloader.api import built_problem
    from autoloader.inputs.source import Source
    from autoloader.store.paths import lock_path
    from scripts.faults.datasets import tiny

    spec = "scripts.faults.datasets:tiny"
    problem = built_problem(tiny(), Source.from_spec(spec), batch_size=16, device="cpu")
    out = tmp_path / "out"
    lock = lock_path(str(out), problem.hardware.fingerprint, problem.key)
    os.makedirs(os.path.dirname(lock))
    target = tmp_path / "target"
    target.write_text("x")
    os.symlink(target, lock)
    run = subprocess.run([AUTOLOADER, "tune", "--dataset", spec, "--batch-size", "16", "--budget", "60", "--device",
                          "cpu", "--out", str(out), "--quiet"], capture_output=True, text=True, cwd=REPO_ROOT,
                         timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr and "Usage:" not in run.stderr, run.stderr
    assert "symbolic link" in run.stderr and "Fix: remove it" in run.stderr, run.stderr
    assert target.read_text() == "x" and os.path.islink(lock)


@pytest.mark.slow
@pytest.mark.parametrize("fault, raised", [("interrupt", "KeyboardInterrupt()"), ("exit", "SystemExit(3)")])
def test_a_step_that_interrupts_or_exits_is_the_steps_failure(tmp_path, fault, raised):
    from autoloader import tune
    from scripts.faults import datasets as faulty

    result = tune(faulty.Tiny(), batch_sizes=[16, 64], step=faulty.StepFaults({64: fault}), budget=40,
                  device="cpu", out=str(tmp_path / "out"), progress=False)
    failed = [t for t in result.trials if t.status != "ok"]
    assert failed and {t.cause for t in failed} == {"step_error"}, [(t.cause, t.error) for t in failed]
    assert f"the step raised {raised}" in failed[0].error and "Fix:" in failed[0].error
    assert result.config.batch_size == 16


@pytest.mark.parametrize("said, cause, fix", [
    ('connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication '
     'failed for user "tuner"', "password rejected", "check the user name and password"),
    ('connection failed: connection to server at "127.0.0.1", port 9 failed: Connection refused\n\tIs the server '
     'running on that host and accepting TCP/IP connections?', "connection refused", "start the database server"),
])
def test_a_storage_that_refuses_the_connection_is_named_by_its_cause(said, cause, fix):
    from autoloader.store.durable import open_error

    url = "postgresql+psycopg://tuner:hunter2@127.0.0.1:5432/studies"
    error = open_error(url, True, RuntimeError(said))
    assert isinstance(error, InputError), "no usage header: the command was typed right"
    text = str(error)
    assert f"could not connect: {cause}" in text and f"Fix: {fix}" in text and "sqlite" not in text.lower()
    assert "hunter2" not in text and "tuner:***@" in text


@pytest.mark.slow
def test_show_storage_of_a_server_that_is_down_says_so_without_a_usage_header():
    pytest.importorskip("psycopg")
    run = subprocess.run([AUTOLOADER, "show", "--storage", "postgresql+psycopg://tuner:hunter2@127.0.0.1:9/studies"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert run.returncode == 2 and "Usage:" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert "could not connect: connection refused" in run.stderr and "start the database server" in run.stderr
    assert "hunter2" not in run.stderr


def _nodes_result(built: str):
    from types import SimpleNamespace

    from autoloader.search.settings import NODES
    from autoloader.search.nodes import NodesGraph
    from autoloader.search.space import LoaderConfig

    name = "nodes_workloads:make"
    graph = NodesGraph(num_workers=1, method="thread", in_order=True, max_concurrent=None, prefetch_factor=2,
                       pin_memory=False, batch_size=32, chain=("Loader", "Prefetcher", "Mapper", "Batcher",
                                                               "ParallelMapper"),
                       built=built, takes=("num_workers", "method", "in_order", "max_concurrent", "prefetch_factor",
                                           "pin_memory", "batch_size") if built == "factory" else (), name=name)
    config = LoaderConfig.make(16, 2, False, loader=NODES, prefetch_factor=4, method="process", in_order=False)
    return SimpleNamespace(config=config, nodes=graph)


def test_format_on_a_nodes_result_prints_what_runs():
    pytest.importorskip("torchdata.nodes")
    from autoloader.errors import UsageError
    from autoloader.integrations.formats import render
    from autoloader.search.nodes import FACTORY

    result = _nodes_result(FACTORY)
    code = render(result, "kwargs")
    assert "DataLoader(" not in code and "graph = make(" in code
    assert "num_workers=2" in code and "method='process'" in code and "in_order=False" in code
    scope: dict = {}
    exec(code, scope)   # it runs: the tuned graph, built by the factory
    batch = next(iter(scope["graph"]))
    assert tuple(batch.shape)[0] == 16
    method = render(result, "lightning")
    assert "DataLoader(" not in method and "return make(" in method and "num_workers=2" in method
    scope = {}
    exec(method, scope)
    assert next(iter(scope["train_dataloader"](None))).shape[0] == 16
    for form, rebuilt in (("hf", FACTORY), ("lightning", "rebuilt")):
        with pytest.raises(UsageError, match="torchdata.nodes"):
            render(_nodes_result(rebuilt), form)


@pytest.mark.slow
def test_a_zero_argument_factory_of_a_nodes_graph_is_tuned(tmp_path):
    pytest.importorskip("torchdata.nodes")
    import nodes_workloads

    from autoloader import tune
    from autoloader.search.settings import NODES

    result = tune(nodes_workloads.graph, batch_size=32, budget=40, device="cpu", out=str(tmp_path / "out"),
                  progress=False)
    assert result.nodes is not None and result.config.loader == NODES


def test_the_plots_of_a_huge_result_draw_a_sample_of_its_trials():
    from explain_cases import synthetic_result

    from autoloader.explain import explain
    from autoloader.explain.plots import PLOT_TRIALS, sampled
    from autoloader.store.result import TuneResult

    data = synthetic_result()
    few = TuneResult.from_dict(data, "/nowhere/box/k.json")
    assert sampled(explain(few)).evidence.trials == explain(few).evidence.trials, "a small result: every trial"
    trials = data["trials"]
    data["trials"] = [trials[i % len(trials)] for i in range(3_000)]
    ex = explain(TuneResult.from_dict(data, "/nowhere/box/k.json"))
    drawn = sampled(ex).evidence
    assert PLOT_TRIALS // 2 <= len(drawn.trials) <= PLOT_TRIALS + 1
    assert any(t.config == ex.evidence.pick for t in drawn.trials), "the pick's burst is drawn"
    assert len(ex.evidence.trials) == 3_000, "the record itself keeps every trial (the page's table lists them)"


@pytest.mark.slow
def test_a_dataset_that_leaks_file_descriptors_is_charged_with_the_fix(tmp_path):
    run = subprocess.run([AUTOLOADER, "tune", "--dataset", "scripts.faults.datasets:leak_fds", "--batch-size", "16",
                          "--budget", "40", "--device", "cpu", "--trial-timeout", "10", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert "Traceback" not in run.stderr and "Usage:" not in run.stderr, run.stderr[-3000:]
    assert "ran out of file descriptors" in run.stderr and "Fix: close each file it opens" in run.stderr, run.stderr
    assert "dataset's __getitem__ raised: the trial process ran out of file descriptors" in run.stderr


@pytest.mark.slow
def test_processes_a_dataset_starts_detached_do_not_outlive_the_tune(tmp_path):
    """The trial process adopts what the dataset orphans (a child subreaper): between trials its
    workers' reap ends them, and at its stop whatever is left is ended and named on stderr."""
    import psutil

    from autoloader import tune
    from scripts.faults import datasets as faulty

    marker = tmp_path / "pids"
    tune(faulty.Detached(str(marker)), batch_size=16, budget=30, device="cpu", out=str(tmp_path / "out"),
         progress=False)
    pids = [int(line) for line in marker.read_text().split()]
    assert pids, "the dataset started its helper"
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    for pid in alive:   # the test's own clean-up, before it fails
        psutil.Process(pid).kill()
    assert not alive, f"{len(alive)} of {len(pids)} outlived the tune"


def _semaphores_then_exit(release: bool) -> None:
    import multiprocessing as mp

    from autoloader.probe.workers import release_semaphores

    queues = [mp.get_context("forkserver").Queue() for _ in range(3)]   # noqa: F841 - alive at the exit
    if release:
        release_semaphores()
    os._exit(0)


@pytest.mark.slow
@pytest.mark.parametrize("release", [False, True], ids=["as-before", "released"])
def test_a_trial_process_that_exits_leaves_no_semaphore_to_the_tracker(release):
    """The trial process ends with os._exit (serve.main on Stop): without release_semaphores the
    resource tracker warns of each queue's semaphores as leaked; with it, of none."""
    code = ("import sys, multiprocessing as mp; sys.path.insert(0, 'tests'); from test_small_faults import "
            "_semaphores_then_exit as f\nif __name__ == '__main__':\n    p = mp.get_context('spawn').Process("
            f"target=f, args=({release},)); p.start(); p.join()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert ("leaked semaphore" in run.stderr) is not release, run.stderr


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


class _LeakToTheLast:
    """A dataset whose every read opens /dev/null and keeps it, until ``spare`` descriptors are
    left under the limit it lowers on its first read in a process (to what is open then plus
    ``headroom``): the worker's own bookkeeping, not the dataset, is what meets EMFILE."""

    def __init__(self, spare: int = 1, headroom: int = 64, to_the_exit: bool = False):
        self.spare, self.headroom, self.kept, self.room, self.to_the_exit = spare, headroom, [], None, to_the_exit

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, index: int):
        import resource

        import torch

        if self.room is None:   # a limit that leaves exactly ``headroom`` descriptors free (numbers under it)
            open_now = [fd for fd in map(int, os.listdir("/proc/self/fd")) if _is_open(fd)]
            limit = self.headroom
            while limit - sum(fd < limit for fd in open_now) < self.headroom:
                limit += 1
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            self.room = self.headroom
            if self.to_the_exit:   # at the process's exit, before its temporary folder's removal: every one left
                from multiprocessing import util

                util.Finalize(None, self._take_the_rest, exitpriority=10)
        if len(self.kept) < self.room - self.spare:
            self.kept.append(open(os.devnull))
        return torch.full((64,), float(index))

    def _take_the_rest(self) -> None:
        try:
            while True:
                self.kept.append(open(os.devnull))
        except OSError:
            pass


def _leak_in_workers(hooks: bool, spare: int = 1, to_the_exit: bool = False) -> None:
    """A trial's loader in miniature (this process stands for the trial process): one worker
    whose dataset leaks a descriptor a sample, started with the trial's WorkerInit or none; the
    failure as the trial reads it, printed as JSON."""
    import json
    import weakref

    from torch.utils.data import DataLoader

    from autoloader.probe.failures import describe_failure, handover_lost
    from autoloader.probe.workers import WorkerInit, ended_out_of_descriptors

    from torch.utils.data import _utils

    _utils.MP_STATUS_CHECK_INTERVAL = 60.0   # the shut-down waits for the worker's exit, however loaded the machine
    loader = DataLoader(_LeakToTheLast(spare, to_the_exit=to_the_exit), batch_size=16, num_workers=1, prefetch_factor=1, timeout=10,
                        worker_init_fn=WorkerInit(os.getpid()) if hooks else None)
    it = iter(loader)
    refs = [weakref.ref(it)]
    try:
        for _ in range(50):   # 800 samples: far past the headroom
            next(it)
        said = {"failed": False}
    except Exception as exc:  # noqa: BLE001 - the failure is what is looked at
        ran_out = ended_out_of_descriptors(refs, 5.0 if handover_lost(exc) else 0.0)
        said = {"failed": True, "ran_out": ran_out, "message": describe_failure(exc)[0]}
    it._shutdown_workers()
    print(json.dumps(said))
    sys.stdout.flush()


_FEEDER_ERROR = """
import sys
from multiprocessing import queues
from autoloader.probe.workers import end_when_out_of_descriptors
end_when_out_of_descriptors()
try:   # as in the feeder: its handler is called inside the except clause
    raise RuntimeError(sys.argv[1])
except RuntimeError as exc:
    queues.Queue._on_queue_feeder_error(exc, None)
print("carried on")
"""


@pytest.mark.parametrize("message, ends", [
    ("unable to open shared memory object </torch_1_2_3> in read-write mode: Too many open files (24)", True),
    ("unable to open shared memory object </torch_1_2_3> in read-write mode: No space left on device (28)", False),
])
def test_the_feeders_shared_memory_error_out_of_descriptors_ends_the_worker_in_silence(message, ends):
    """NOTE [ A worker out of file descriptors ]: torch's shm_open failing in the feeder thread is a
    RuntimeError, known by its message; any other goes on to the feeder's own handler (a traceback)."""
    from autoloader.probe.failures import OUT_OF_DESCRIPTORS_EXIT

    run = subprocess.run([sys.executable, "-c", _FEEDER_ERROR, message], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=60)
    if ends:
        assert run.returncode == OUT_OF_DESCRIPTORS_EXIT and not run.stderr and not run.stdout, run
    else:
        assert run.returncode == 0 and "carried on" in run.stdout and "No space left" in run.stderr, run


@pytest.mark.slow
@pytest.mark.parametrize("spare", [3, 16], ids=["at-the-hand-over", "at-the-exit"])
@pytest.mark.parametrize("hooks", [False, True], ids=["as-before", "trial-worker"])
def test_a_worker_out_of_descriptors_says_so_without_a_traceback(tmp_path, hooks, spare):
    """NOTE [ A worker out of file descriptors ], with one worker handing over one batch at a
    time (so where the descriptors run out is fixed: the dataset leaves ``spare`` free for the
    batch's storage and its hand-over). 3: the feeder thread cannot share the batch; a plain
    worker prints the feeder's traceback and drops the batch (the loader waits to its timeout); a
    trial's worker ends with its exit code, and the trial reads the dataset's leak with the fix,
    at once. 16: every batch is handed over, and the dataset takes the rest at the worker's exit;
    a plain worker cannot remove its temporary folder at its exit (a traceback, the folder left
    in TMPDIR, the test's own); a trial's worker can (its reserve). Neither shows a traceback."""
    import json

    from autoloader.probe.failures import FD_EXHAUSTED_IN_WORKER

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = ("import sys; sys.path.insert(0, 'tests'); from test_small_faults import _leak_in_workers as f; "
            f"f({hooks}, {spare}, to_the_exit={spare == 16})")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                         env={**os.environ, "TMPDIR": str(tmp)})
    said = json.loads(run.stdout.strip().splitlines()[-1])
    left = list(tmp.glob("pymp-*"))
    if not hooks:   # the control: what a worker without the trial's hooks shows
        assert "Traceback" in run.stderr and "Too many open files" in run.stderr, run.stderr[-3000:]
        assert "timed out" in said["message"] and not said["ran_out"] if spare == 3 else left, (said, left)
        return
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-3000:]
    assert not left, left
    if spare == 3:
        assert said["failed"] and "timed out" not in said["message"], said
        assert said["ran_out"] or said["message"].startswith(FD_EXHAUSTED_IN_WORKER), said
        assert "Fix: close each file it opens" in FD_EXHAUSTED_IN_WORKER and "ulimit -n" in FD_EXHAUSTED_IN_WORKER
    else:
        assert not said["failed"], said


@pytest.mark.slow
def test_a_dataset_that_leaks_file_descriptors_in_its_workers_is_charged_with_the_fix(tmp_path):
    """The fault suite's case: the dataset leaks in the trial process and in its workers; every
    trial with workers is the dataset's leak, none a crash or a hang, and no traceback is shown."""
    run = subprocess.run([AUTOLOADER, "tune", "--dataset", "scripts.faults.datasets:leak_fds_in_workers",
                          "--batch-size", "16", "--budget", "40", "--device", "cpu", "--trial-timeout", "10",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-3000:]
    assert "a DataLoader worker of the trial ran out of file descriptors" in run.stderr, run.stderr[-3000:]
    trials = [line for line in run.stderr.splitlines() if line.strip().startswith("trial ") and "-w0-" not in line]
    assert trials and all("ran out of file descriptors" in line or "/s" in line for line in trials), trials
    assert not any("HANG" in line or "trial process died" in line for line in trials), trials
