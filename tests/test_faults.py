"""Reliability: every way a trial can fail is survived, named and recorded, and leaves nothing.

Each fault is injected for real through the public API (``autoloader.tune``) or the CLI, on
tiny datasets from ``scripts/faults/datasets.py``: a worker killed by SIGSEGV, SIGKILL (the OOM killer) or
SIGBUS; a real full /dev/shm (in a private mount namespace with a small /dev/shm of its own);
a worker whose memory grows past ``max_memory``; CUDA out of memory for a batch size; a
raising ``__getitem__``, ``collate_fn`` or step; a hung worker; and the driver itself killed
with SIGKILL mid-study, then resumed. For each the tuner must complete, name the cause, pick a
config from the healthy trials, not retry the failed config, and leave no process (found by an
environment tag every descendant inherits, wherever it was re-parented) and no /dev/shm entry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from click.testing import CliRunner

from autoloader import UsageError, tune
from autoloader.cli import main
from autoloader.events import Event, TrialDone, TuneStarted
from autoloader.probe import guard
from autoloader.probe.failures import classify_failure, describe_failure
from autoloader.search.results import CAUSES, CONSTRAINT, FAILED, HANG, OK
from scripts.faults import datasets as faulty

FAULTY = "scripts.faults.datasets"  # the CLI's --dataset module, imported from the repository's root
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
# Enough budget that the faulty configs and the healthy ones all run; a study ends sooner once
# the strategy has nothing left to try.
BUDGET = 60
TRIAL_TIMEOUT = 8


# --- leftovers: processes and /dev/shm ---------------------------------------------------------

@pytest.fixture(autouse=True)
def no_leftovers(monkeypatch):
    """Tag this test's processes; afterwards none may be alive and /dev/shm must be as it was."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(faulty.TAG_VAR, tag)
    shm_before = faulty.shm_names()
    yield tag
    left = faulty.leftover_processes(tag)
    assert not left, f"processes left behind: {left}"
    leaked = faulty.new_shm_entries(shm_before, tag)
    assert not leaked, f"/dev/shm entries left behind: {leaked}"


# --- running the tuner ------------------------------------------------------------------------

class Recorder:
    """The ``progress`` callback: keeps every event with its wall time."""

    def __init__(self):
        self.events: list[tuple[float, Event]] = []

    def __call__(self, event: Event) -> None:
        self.events.append((time.time(), event))

    def trial_ends(self):
        return [(t, e.result) for t, e in self.events if isinstance(e, TrialDone)]


def run_tune(dataset, out_dir, **kwargs):
    recorder = Recorder()
    kwargs.setdefault("batch_size", 16)
    kwargs.setdefault("budget", BUDGET)
    kwargs.setdefault("trial_timeout", TRIAL_TIMEOUT)
    result = tune(dataset, device="cpu", out=out_dir, progress=recorder, **kwargs)
    return result, recorder


def assert_survived(result, cause: str, status: str = FAILED) -> list:
    """The tuner completed, named ``cause`` for the faulty trials, picked a healthy config and
    retried no failed config."""
    faulty_trials = [t for t in result.trials if t.cause == cause]
    assert faulty_trials, f"no trial with cause {cause!r}: {[(t.config.key, t.status, t.cause, t.error) for t in result.trials]}"
    for trial in faulty_trials:
        assert trial.status == status, (trial.status, trial.error)
        assert trial.error, "the user is told what happened"
        assert trial.describe_failure().startswith(CAUSES[cause])
    healthy = {t.config for t in result.trials if t.status == OK}
    assert result.config in healthy, "the pick is a config that ran"
    assert result.config not in {t.config for t in faulty_trials}
    counts = Counter(t.config for t in result.trials)
    retried = [c.key for c in {t.config for t in result.trials if t.status != OK} if counts[c] > 1]
    assert not retried, f"failed configs tried again: {retried}"
    # The rule enters the final as its control whether or not a trial read it (tuning/final.py's
    # final_configs); what must never reach it is a config that failed or was kept from running.
    failed = {t.config for t in result.trials if t.status != OK}
    assert not [f.config.key for f in result.finals if f.config in failed], "no failed config reaches the final"
    assert result.faults().get(cause, 0) == len(faulty_trials)
    assert result.orphans == 0
    # What was saved says the same.
    saved = json.load(open(result.path))
    assert saved["faults"].get(cause) == len(faulty_trials)
    return faulty_trials


# --- faults, one class each ---------------------------------------------------------------------

@pytest.mark.parametrize("signum, cause", [
    (signal.SIGSEGV, "worker_segfault"),   # native code crashing in __getitem__
    (signal.SIGKILL, "worker_killed"),     # the kernel's OOM killer
    (signal.SIGBUS, "shm_exhausted"),      # what a full /dev/shm does to a worker writing a batch
], ids=["segfault", "oom-killer", "bus-error"])
@pytest.mark.slow
def test_worker_killed_by_signal(out_dir, signum, cause):
    result, _ = run_tune(faulty.SignalInWorker(signum), out_dir)
    failed = assert_survived(result, cause)
    assert all(t.config.num_workers >= 1 for t in failed)
    assert result.config.num_workers == 0
    if cause == "worker_segfault":
        assert "Segmentation fault" in failed[0].error


@pytest.mark.slow
def test_getitem_raises(out_dir):
    result, _ = run_tune(faulty.RaiseInWorker(), out_dir)
    failed = assert_survived(result, "dataset_error")
    assert "corrupt sample" in failed[0].error, "the worker's own message, not just 'Caught ValueError'"


@pytest.mark.slow
def test_collate_fn_raises(out_dir):
    result, _ = run_tune(faulty.Tiny(), out_dir, collate_fn=faulty.collate_breaks_in_workers)
    failed = assert_survived(result, "collate_error")
    assert "cannot stack" in failed[0].error


@pytest.mark.slow
@pytest.mark.heavy
def test_step_faults_by_batch_size(out_dir):
    """One study, three step faults by batch size: the step raising from 64, the trial process
    itself killed (the OOM killer's pick) from 128, CUDA out of memory from 256. Each is named;
    the trial process is restarted after the kill and the search goes on. CUDA running out of
    memory is about the batch, so no larger batch is tried after it (512 never runs)."""
    result, _ = run_tune(faulty.Tiny(), out_dir, batch_size=None, batch_sizes=[16, 64, 128, 256, 512],
                         step=faulty.StepFaults({64: "raise", 128: "kill", 256: "cuda_oom"}))
    raised = assert_survived(result, "step_error")
    killed = assert_survived(result, "runner_killed")
    oom = assert_survived(result, "cuda_oom")
    assert {t.config.batch_size for t in raised} == {64}
    assert "shapes cannot be multiplied" in raised[0].error
    assert {t.config.batch_size for t in killed} == {128}
    assert "SIGKILL" in killed[0].error
    assert {t.config.batch_size for t in oom} == {256}
    assert "CUDA out of memory" in oom[0].error
    assert all(t.config.batch_size < 512 for t in result.trials)
    assert result.config.batch_size == 16


@pytest.mark.slow
@pytest.mark.heavy
def test_host_memory_past_the_ceiling(out_dir):
    """Workers that keep 200 MB more per batch (copy-on-read growth, an unbounded cache): the
    guard kills the tree at the ceiling and records a CONSTRAINT."""
    result, _ = run_tune(faulty.HoardInWorker(min_workers=1), out_dir, max_memory="1.5G")
    over = assert_survived(result, "host_memory", status=CONSTRAINT)
    assert all(t.config.num_workers >= 1 for t in over)
    for trial in over:
        assert "ceiling" in trial.error
        # Stopped near the ceiling, not after eating the machine (one sample interval late at most).
        assert trial.peak_host_bytes is not None and trial.peak_host_bytes < 4 * 2**30
    assert result.config.num_workers == 0


@pytest.mark.slow
@pytest.mark.heavy
def test_a_config_predicted_past_the_ceiling_is_not_run(out_dir):
    """Batches of 16 samples of 16 MiB (256 MiB) that mostly wait (I/O-like), so many workers
    would pay: the model's pick (many workers) and the cpus-1 rule are predicted to hold 4 or
    more batches and a worker on top of the runner; no workers need about 3.5 (measured). A
    ceiling of the runner's own footprint plus 5 batches lets the latter run and stops the
    former unrun. The footprint is measured first: it differs
    between installs and runs (0.42-0.60 GB seen), and a batch this large keeps that difference
    well inside the margins either side."""
    from autoloader.inputs.source import Source
    from autoloader.probe.driver import TrialRunner
    from autoloader.probe.protocol import RunnerSetup

    dataset = faulty.BigSamples(width=4 * 2**20, length=64, sleep_s=0.01)
    probe = TrialRunner(RunnerSetup(Source.from_object(dataset, "dataset"), None, "cpu", {}, 16),
                        max_memory=8 * 2**30, hang_timeout_s=30)
    try:
        info = probe.start()
    finally:
        probe.close()
    ceiling = info.runner_pss + 5 * 16 * info.sample_bytes
    result, _ = run_tune(dataset, out_dir, max_memory=ceiling, budget=20)
    skipped = assert_survived(result, "predicted_memory", status=CONSTRAINT)
    for trial in skipped:
        assert trial.error.startswith("predicted") and "ceiling" in trial.error
        assert trial.peak_host_bytes is None and not trial.batches, "it was never run"
    assert all(t.config.num_workers >= 1 for t in skipped) and any(t.config.num_workers >= 2 for t in skipped)
    assert result.config.num_workers < 2

    # The error's advice, taken: with the ceiling raised, the next run measures what the old
    # ceiling ruled out (a new run measures everything it decides on; the old trials stay stored).
    again, recorder = run_tune(dataset, out_dir, max_memory=8 * 2**30, budget=45)
    start = next(e for _, e in recorder.events if isinstance(e, TuneStarted))
    assert start.resumed == 0
    # What it measures stands on the new ceiling, not on the old one's verdicts, whatever the
    # model picks this time.
    new = list(again.trials)
    assert new and not [t for t in new if t.cause == "predicted_memory" and "> 8.00 GiB" not in t.error], new
    assert all(t.status == OK or "> 8.00 GiB ceiling" in t.error or "/dev/shm" in t.error for t in new), new


@pytest.mark.slow
@pytest.mark.heavy
def test_hang_is_ended_by_the_watchdog(out_dir, tmp_path):
    marker = str(tmp_path / "hang-started")
    result, recorder = run_tune(faulty.HangInWorker(marker, min_workers=1), out_dir,
                                trial_timeout=TRIAL_TIMEOUT)
    hung = assert_survived(result, "hang", status=HANG)
    assert all(t.config.num_workers >= 1 for t in hung)
    starts = sorted(float(line.split()[0]) for line in open(marker))
    for ended, trial in recorder.trial_ends():
        if trial.status != HANG:
            continue
        began = [s for s in starts if s <= ended]
        assert began, "a hang trial whose workers never started hanging"
        detect = ended - max(began)  # from the first worker's hang to the trial's end
        # Ended within the timeout (+ slack for a loaded machine), and the tuner says how long
        # there was no progress.
        assert detect <= TRIAL_TIMEOUT + 3, detect
        assert trial.stalled_s is not None and trial.stalled_s >= detect - 3
        assert trial.seconds >= TRIAL_TIMEOUT
        assert "killed" in trial.error


@pytest.mark.slow
def test_a_slow_trial_that_keeps_delivering_is_not_a_hang():
    # NOTE [ The watchdog times stalls ]: a window of 3 s or more with a 2.5 s timeout. Batches arrive
    # every ~30 ms, so progress never stops for long; a timeout on the whole trial ended it as a hang.
    from autoloader.inputs.source import Source
    from autoloader.probe.driver import RunnerSetup, TrialRunner
    from autoloader.search.policy import BurstSettings
    from autoloader.search.space import LoaderConfig

    setup = RunnerSetup(Source.from_object(faulty.Tiny(length=4096, sleep_s=0.002), "dataset"), None, "cpu", {}, 16)
    runner = TrialRunner(setup, max_memory=8 * 2**30, hang_timeout_s=2.5)
    try:
        runner.start()
        settings = BurstSettings(min_window_s=3.0, max_window_s=4.0)
        result = runner.measure(LoaderConfig.make(16, 1, False, 2, True), settings)
    finally:
        runner.close()
    assert result.status == OK, (result.status, result.error)
    assert result.seconds > 3.0 and result.window_s >= 3.0


@pytest.mark.slow
def test_a_dataset_slow_to_build_is_stopped_with_a_fix():
    from autoloader.inputs.source import Source
    from autoloader.probe.driver import RunnerSetup, SetupError, TrialRunner

    setup = RunnerSetup(Source.from_object(faulty.slow_to_build, "dataset"), None, "cpu", {}, 16)
    runner = TrialRunner(setup, max_memory=8 * 2**30, hang_timeout_s=2.5, setup_timeout_s=2.0)
    t0 = time.monotonic()
    with pytest.raises(SetupError) as err:
        runner.start()
    runner.close()
    assert time.monotonic() - t0 < 2.0 + 10  # stopped at the limit, not after the 120 s build
    message = str(err.value)
    assert "must take under 2 s" in message and "Fix:" in message and "__getitem__" in message


@pytest.mark.slow
@pytest.mark.heavy
def test_iterable_dataset_is_tuned(out_dir):
    result, _ = run_tune(faulty.TinyStream(), out_dir)
    assert result.trials and any(t.status == OK for t in result.trials)
    assert not result.faults(), result.faults()
    assert "-niter-" in result.tuned.dataset_key
    assert result.samples_per_s > 0


# --- a real full /dev/shm, in a private mount namespace ----------------------------------------

def _cli_in_private_shm(size: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``autoloader`` with a /dev/shm of ``size`` of its own; the machine's is untouched."""
    command = " ".join([AUTOLOADER, *args])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {command}"],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


needs_private_shm = pytest.mark.skipif(not faulty.private_shm_available(),
                                       reason="needs root and unshare to mount a private small /dev/shm")


@needs_private_shm
@pytest.mark.slow
@pytest.mark.heavy
def test_dev_shm_really_full(out_dir):
    """A worker takes all of a 32 MiB /dev/shm; batches cannot be handed over. The trial is
    recorded as shm_exhausted and the tuner picks a config that needs no /dev/shm."""
    run = _cli_in_private_shm("32m", "tune", "--dataset", f"{FAULTY}:fill_shm", "--batch-size", "16",
                              "--budget", str(BUDGET), "--trial-timeout", "20", "--device", "cpu",
                              "--out", out_dir, "--json", "--quiet")
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(run.stdout)
    causes = Counter(t["cause"] for t in data["trials"] if t["status"] != OK)
    assert causes.get("shm_exhausted", 0) >= 1, data["trials"]
    assert data["config"]["num_workers"] == 0
    assert data["faults"]["shm_exhausted"] == causes["shm_exhausted"]


@needs_private_shm
@pytest.mark.slow
def test_dev_shm_smaller_than_a_batch_is_bad_input(out_dir):
    """A /dev/shm of 512 KiB cannot hold one batch of 16 x 64 KiB: exit 2, rule, value, fix."""
    run = _cli_in_private_shm("512k", "tune", "--dataset", f"{FAULTY}:big_samples", "--batch-size", "16",
                              "--budget", "20", "--device", "cpu", "--out", out_dir, timeout=120)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "/dev/shm must hold at least one batch" in run.stderr
    assert "MiB free, one batch is" in run.stderr and "Fix:" in run.stderr and "--shm-size" in run.stderr


@pytest.mark.slow
def test_dev_shm_check_through_the_api(out_dir, monkeypatch):
    """The same rule through tune(), whatever this machine's /dev/shm: the driver is told a
    /dev/shm of 100 KiB (the check runs in the driver, before any trial)."""
    from autoloader.inputs import hardware

    monkeypatch.setattr(hardware, "shm_free", lambda: 100 * 2**10)
    with pytest.raises(UsageError) as info:
        tune(faulty.BigSamples(), batch_size=16, budget=20, device="cpu", out=out_dir)
    assert info.value.exit_code == 2
    assert "/dev/shm must hold at least one batch" in str(info.value) and "Fix:" in str(info.value)


# --- bad input that cannot reach a trial process ------------------------------------------------

def test_unpicklable_dataset_is_bad_input(out_dir):
    with pytest.raises(UsageError) as info:
        tune(faulty.WithLambda(), batch_size=16, budget=20, device="cpu", out=out_dir)
    message = str(info.value)
    assert info.value.exit_code == 2
    assert "must be picklable" in message and "WithLambda" in message and "Fix:" in message
    assert "MODULE:ATTR" in message, "the fix names the way that works: a spec, re-imported"


def test_unpicklable_step_is_bad_input(out_dir):
    with pytest.raises(UsageError) as info:
        tune(faulty.Tiny(), step=lambda batch: None, batch_size=16, budget=20, device="cpu", out=out_dir)
    assert "step must be picklable" in str(info.value) and "Fix:" in str(info.value)


@pytest.mark.slow
def test_unpicklable_dataset_through_the_cli_is_re_imported(out_dir):
    """Where pickling is impossible the CLI's spec works: the dataset is re-imported."""
    result = CliRunner().invoke(main, ["tune", "--dataset", f"{FAULTY}:with_lambda", "--batch-size", "16",
                                       "--budget", "12", "--device", "cpu", "--out", out_dir, "--json",
                                       "--quiet"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.stdout)["samples_per_s"] > 0


# --- the driver killed mid-study, then resumed --------------------------------------------------

@pytest.mark.slow
@pytest.mark.heavy
def test_driver_killed_mid_study_resumes(out_dir, no_leftovers):
    tag = no_leftovers
    # Workers pay on this dataset, so the study has more than two trials to kill it among.
    command = [AUTOLOADER, "tune", "--dataset", f"{FAULTY}:waiting", "--batch-size", "16", "--budget", "60",
               "--device", "cpu", "--out", out_dir, "--trial-timeout", "20"]
    before_kill, tree = faulty.kill_mid_study(command, out_dir, REPO_ROOT, timeout_s=120)
    assert before_kill is not None, "the study never had 2 finished trials and one running"
    assert tree, "the driver had a trial process to orphan"
    # PR_SET_PDEATHSIG: the trial process and its workers die with the driver.
    assert not faulty.leftover_processes(tag), "trial processes outlived the killed driver"

    finished_before = {tid: attr for tid, (state, attr) in before_kill.items() if state in ("COMPLETE", "FAIL")}
    stale = [tid for tid, (state, _) in before_kill.items() if state == "RUNNING"]
    rerun = subprocess.run(command + ["--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    # A string, not a list: pytest prints a message string whole, and a list's repr cut short.
    assert f"resuming {len(finished_before)} finished trials" in rerun.stderr, "\n".join(
        [line for line in rerun.stderr.splitlines() if "Warning" in line or "resuming" in line][:5])
    assert f"({len(stale)} interrupted trials marked failed)" in rerun.stderr
    after = faulty.study_states(faulty.find_study(out_dir))
    lost = [tid for tid, attr in finished_before.items()
            if tid not in after or after[tid][1] != attr or after[tid][0] != before_kill[tid][0]]
    assert not lost, f"finished trials lost or changed by the kill and resume: {lost}"
    assert all(after[tid][0] == "FAIL" for tid in stale), "stale RUNNING trials are marked FAIL"
    assert not [t for t, (s, _) in after.items() if s == "RUNNING"]
    data = json.loads(rerun.stdout)
    assert data["config"] and data["samples_per_s"] > 0
    assert os.path.exists(data["path"]) and os.path.exists(data["snippet_path"])


# --- the pieces, directly -----------------------------------------------------------------------

@pytest.mark.parametrize("text, where, cause", [
    ("RuntimeError: DataLoader worker (pid 12) is killed by signal: Segmentation fault.", "next", "worker_segfault"),
    ("RuntimeError: DataLoader worker (pid 12) is killed by signal: Killed.", "next", "worker_killed"),
    ("RuntimeError: DataLoader worker (pid(s) 12) exited unexpectedly", "next", "worker_killed"),
    ("RuntimeError: DataLoader worker (pid 12) is killed by signal: Bus error. It is possible that "
     "dataloader's workers are out of shared memory.", "next", "shm_exhausted"),
    ("RuntimeError: unable to write to file </torch_1_2_3>: No space left on device (28)", "next", "shm_exhausted"),
    ("RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2>: No space left on device (28)",
     "next", "shm_exhausted"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "step", "cuda_oom"),
    ("ValueError: bad sample", "step", "step_error"),
    ('ValueError: Caught ValueError in DataLoader worker process 0.\nOriginal Traceback:\n  File "fetch.py", '
     'line 57, in fetch\n    return self.collate_fn(data)\nValueError: ragged', "next", "collate_error"),
    ("KeyError: 'label'", "next", "dataset_error"),
    ("OSError: [Errno 28] No space left on device: '/data/cache/x.npy'", "next", "dataset_error"),
])
def test_classify_failure(text, where, cause):
    assert classify_failure(text, where) == cause
    assert cause in CAUSES


def test_describe_failure_prefers_the_specific_message():
    try:
        try:
            raise RuntimeError("DataLoader worker (pid 7) is killed by signal: Segmentation fault.")
        except RuntimeError as inner:
            raise RuntimeError("DataLoader worker (pid(s) 7) exited unexpectedly") from inner
    except RuntimeError as exc:
        message, detail = describe_failure(exc)
    assert "Segmentation fault" in message
    assert classify_failure(detail, "next") == "worker_segfault"


WORKER_TEXT = ("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
               '  File "/torch/utils/data/_utils/worker.py", line 349, in _worker_loop\n'
               "    data = fetcher.fetch(index)\n"
               "           ^^^^^^^^^^^^^^^^^^^^\n"
               '  File "/data/ds.py", line 12, in __getitem__\n'
               "    raise ValueError(name)\n"
               "ValueError: no label_of_a_sample_whose_name_is_long\n")


def test_a_workers_failure_is_its_causes_line_whole_with_no_traceback():
    """Issue 31: a trial's or a profile's failure line is the worker's own exception line, whole,
    and where it came from; none of "Original Traceback", nothing cut mid-word."""
    from autoloader.errors import clip
    from autoloader.probe.failures import failure_line

    exc = ValueError(WORKER_TEXT)   # DataLoader re-raises it as the worker's type, the traceback in its text
    line = failure_line(exc)
    assert line == "ValueError: no label_of_a_sample_whose_name_is_long (ValueError in DataLoader worker process 0)"
    assert describe_failure(exc)[0] == line
    assert "Traceback" not in line and "\n" not in line
    # A runaway message is cut at a word, and says so; a short one is whole.
    long = "word " * 400
    assert clip(long, 100).endswith("word ...") and len(clip(long, 100)) <= 104
    assert clip("short message", 100) == "short message"


class _MultiLineRaise:
    def __len__(self):
        return 4

    def __getitem__(self, index):
        raise ValueError(f"corrupt sample {index}: cannot decode\nthe header reads 0x00")


@pytest.mark.slow
def test_a_real_workers_failure_line(tmp_path):
    """The same from a real DataLoader worker, its message of two lines: the exception's own line."""
    import torch.utils.data as tud

    from autoloader.probe.failures import failure_line

    batches = iter(tud.DataLoader(_MultiLineRaise(), num_workers=1))
    try:
        next(batches)
    except Exception as exc:  # noqa: BLE001 - the worker's re-raised exception is what is tested
        line = failure_line(exc)
    finally:
        batches._shutdown_workers()
    assert line == "ValueError: corrupt sample 0: cannot decode (ValueError in DataLoader worker process 0)", line


def test_kill_tree_never_signals_our_own_group():
    """A trial process that died before it made its own process group is still in ours; killing
    "its" group would kill the test runner (or the user's shell). Only the tree is killed."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert os.getpgid(child.pid) == os.getpgrp()
        left = guard.kill_tree(child.pid, timeout=5)
        child.wait(5)
        assert left == []
        assert child.returncode == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_clean_shm_unlinks_only_what_dead_trial_processes_left():
    """A segment named after a dead creator (a worker killed between creating and unlinking it)
    is removed; one of a live process outside the trial is not ours and stays."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    before = guard.shm_entries()
    leaked = f"torch_{dead.pid}_4242_0"
    foreign = f"torch_{os.getppid()}_4242_0"
    for name in (leaked, foreign):
        open(os.path.join("/dev/shm", name), "wb").close()
    try:
        removed = guard.clean_shm(before)
        assert removed == [leaked]
        assert not os.path.exists(os.path.join("/dev/shm", leaked))
        assert os.path.exists(os.path.join("/dev/shm", foreign))
    finally:
        for name in (leaked, foreign):
            if os.path.exists(os.path.join("/dev/shm", name)):
                os.unlink(os.path.join("/dev/shm", name))
