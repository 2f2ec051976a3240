"""Fault-injecting datasets, collate functions and steps for the reliability tests and the fault
suite (``python -m scripts.faults``); the tests take it as ``from scripts.faults import datasets
as faulty``.

Everything here is module level: trial processes are started with 'spawn', so what ``tune()``
is handed is pickled by reference and re-imported there, and a CLI ``--dataset
scripts.faults.datasets:NAME`` spec (from the repository's root) is re-imported by name. Faults fire only inside a DataLoader
worker (``get_worker_info() is not None``) and only when the loader has at least
``min_workers`` workers, so every study also holds healthy configs (at least ``num_workers=0``).

Nothing here really exhausts this machine: signals stand in for the kernel (OOM killer,
segfault, bus error), the shared-memory filler only runs inside a private mount namespace with
a small /dev/shm of its own (see test_faults.py), and memory hoarding is bounded by the guard
(and by ``MAX_HOARD_BYTES`` as a last resort).
"""

from __future__ import annotations

import os
import resource
import signal
import time

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

SAMPLE_SHAPE = (64,)
MAX_HOARD_BYTES = 6 * 2**30      # a hoarding worker never holds more than this, guard or not
HOARD_STEP_BYTES = 200 * 2**20   # what a hoarding worker adds per batch


def _in_worker(min_workers: int) -> bool:
    info = get_worker_info()
    return info is not None and info.num_workers >= min_workers


def _no_core_dump() -> None:
    """A test's deliberate crash must not write a core file."""
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass


class Tiny(Dataset):
    """A healthy tiny dataset: small float vectors with a little CPU work each."""

    def __init__(self, length: int = 512, work: int = 2, sleep_s: float = 0.0):
        self.length = length
        self.work = work
        self.sleep_s = sleep_s  # waiting (I/O-like) per sample: then workers pay

    def __len__(self) -> int:
        return self.length

    def sample(self, index: int) -> torch.Tensor:
        x = torch.full(SAMPLE_SHAPE, float(index % 97))
        for _ in range(self.work):
            x = torch.tanh(x * 1.0001)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return x

    def __getitem__(self, index: int):
        return self.sample(index), index % 10


class SignalInWorker(Tiny):
    """A worker that receives ``signum`` while loading: SIGSEGV stands for a crash in native
    decoding code, SIGKILL for the kernel's OOM killer, SIGBUS for a full /dev/shm."""

    def __init__(self, signum: int, min_workers: int = 1, length: int = 512):
        super().__init__(length)
        self.signum = int(signum)
        self.min_workers = min_workers

    def __getitem__(self, index: int):
        if _in_worker(self.min_workers):
            _no_core_dump()
            os.kill(os.getpid(), self.signum)
            time.sleep(5)  # a signal is delivered at once; never reached
        return super().__getitem__(index)


class RaiseInWorker(Tiny):
    """``__getitem__`` raises inside workers (a corrupt file only some code path reads)."""

    def __init__(self, min_workers: int = 1, length: int = 512):
        super().__init__(length)
        self.min_workers = min_workers

    def __getitem__(self, index: int):
        if _in_worker(self.min_workers):
            raise ValueError(f"corrupt sample {index}: cannot decode (injected fault)")
        return super().__getitem__(index)


class CrashOnce(Tiny):
    """One worker segfaults, once (``marker`` records that it did): a one-off crash, as a race in
    native code or the OOM killer's one choice would be. The first ``spare`` worker processes to
    load a sample are spared (the pipeline's profile starts one before any trial), so the crash
    meets a trial."""

    def __init__(self, marker: str, spare: int = 1, length: int = 512):
        super().__init__(length)
        self.marker = marker
        self.spare = spare

    def __getitem__(self, index: int):
        if _in_worker(1) and not os.path.exists(self.marker) and self._started_after_spared():
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return super().__getitem__(index)  # another worker crashes this time
            _no_core_dump()
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().__getitem__(index)

    def _started_after_spared(self) -> bool:
        """Whether this worker came after the spared ones (each worker signs ``marker.workers``)."""
        with open(self.marker + ".workers", "a+") as fh:
            fh.seek(0)
            pids = fh.read().split()
            if str(os.getpid()) not in pids:
                fh.write(f"{os.getpid()}\n")
                pids.append(str(os.getpid()))
        return pids.index(str(os.getpid())) >= self.spare


class HangInWorker(Tiny):
    """A worker that blocks forever (a dead NFS mount, a deadlocked lock) once the loader has
    ``min_workers`` workers. Each hanging worker appends the wall time it started hanging to
    ``marker`` so the tests can time the watchdog from hang start to trial end."""

    def __init__(self, marker: str, min_workers: int = 2, length: int = 512):
        super().__init__(length)
        self.marker = marker
        self.min_workers = min_workers

    def __getitem__(self, index: int):
        if _in_worker(self.min_workers):
            with open(self.marker, "a") as fh:
                fh.write(f"{time.time():.6f} {os.getpid()}\n")
            while True:
                time.sleep(3600)
        return super().__getitem__(index)


_hoard: list = []


class HoardInWorker(Tiny):
    """A worker whose memory grows by ``step_bytes`` per batch and is never given back (a cache
    without a bound, or copy-on-read pages of a big Python structure), once the loader has
    ``min_workers`` workers. ``__getitems__`` is called once per batch."""

    def __init__(self, min_workers: int = 2, step_bytes: int = HOARD_STEP_BYTES, length: int = 512):
        super().__init__(length)
        self.min_workers = min_workers
        self.step_bytes = step_bytes

    def __getitems__(self, indices):
        if _in_worker(self.min_workers) and len(_hoard) * self.step_bytes < MAX_HOARD_BYTES:
            block = torch.empty(self.step_bytes, dtype=torch.uint8)
            block.fill_(1)  # touched, so it is resident, not just reserved
            _hoard.append(block)
        return [self[i] for i in indices]


class FillShmInWorker(Tiny):
    """Worker 0 takes all of /dev/shm but less than ``chunk`` bytes (an unlinked file it keeps
    open, so the space comes back when the worker dies) before loading; batches, which travel
    through /dev/shm, then find no room. Only for a private, small /dev/shm: refuses to run
    when /dev/shm is larger than ``max_shm``."""

    def __init__(self, min_workers: int = 1, chunk: int = 256 * 2**10, max_shm: int = 256 * 2**20,
                 length: int = 512, width: int = 16 * 1024):
        super().__init__(length)
        self.min_workers = min_workers
        self.chunk = chunk
        self.max_shm = max_shm
        self.width = width

    _held = None

    def __getitem__(self, index: int):
        if _in_worker(self.min_workers) and get_worker_info().id == 0 and FillShmInWorker._held is None:
            stat = os.statvfs("/dev/shm")
            if stat.f_blocks * stat.f_frsize > self.max_shm:
                raise RuntimeError(f"refusing to fill a /dev/shm of {stat.f_blocks * stat.f_frsize} bytes; "
                                   "this fault is for a private small /dev/shm only")
            path = f"/dev/shm/autoloader-test-fill-{os.getpid()}"
            fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
            os.unlink(path)
            offset = 0
            while True:  # chunk by chunk: a failed fallocate gives back only its own chunk
                try:
                    os.posix_fallocate(fd, offset, self.chunk)
                except OSError:
                    break
                offset += self.chunk
            FillShmInWorker._held = fd
        return torch.full((self.width,), float(index % 97)), index % 10


class BigSamples(Tiny):
    """Samples of ``width`` float32s: a batch of them may not fit a small /dev/shm."""

    def __init__(self, width: int = 16 * 1024, length: int = 256, sleep_s: float = 0.0):
        super().__init__(length, sleep_s=sleep_s)
        self.width = width

    def __getitem__(self, index: int):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.full((self.width,), float(index % 97)), index % 10


class TinyStream(IterableDataset):
    """An IterableDataset: each worker streams its own shard of ``length`` samples."""

    def __init__(self, length: int = 512):
        self.length = length

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, self.length, step):
            x = torch.full(SAMPLE_SHAPE, float(index % 97))
            yield torch.tanh(x), index % 10


class WithLambda(Tiny):
    """Holds a lambda, so it cannot be pickled (the CLI re-imports it, which works)."""

    def __init__(self, length: int = 512):
        super().__init__(length)
        self.transform = lambda x: x * 2

    def __getitem__(self, index: int):
        x, y = super().__getitem__(index)
        return self.transform(x), y


def collate_breaks_in_workers(samples):
    """A collate_fn that raises inside workers (a ragged batch it cannot stack)."""
    if _in_worker(1):
        raise ValueError("cannot stack samples of shapes [64] and [63] (injected fault)")
    return torch.utils.data.default_collate(samples)


def _batch_len(batch) -> int:
    first = batch[0] if isinstance(batch, (list, tuple)) else batch
    return int(first.shape[0])


class StepFaults:
    """A step that fails by batch size, as a model on a GPU does: ``faults`` maps a batch size
    to what happens from that size up (the largest listed size not above the batch's wins):

    * ``"cuda_oom"``: raises what torch raises, ``torch.OutOfMemoryError("CUDA out of memory...")``
      (on a CPU-only machine too);
    * ``"raise"``: a shape bug, ``RuntimeError("mat1 and mat2 shapes cannot be multiplied")``;
    * ``"kill"``: the trial process itself is SIGKILLed (the OOM killer picks the biggest
      process, which is the one holding the model, not a worker);
    * ``"interrupt"``, ``"exit"``: the step raises KeyboardInterrupt, or SystemExit(3).
    """

    def __init__(self, faults: dict[int, str]):
        self.faults = dict(faults)

    def __call__(self, batch) -> None:
        n = _batch_len(batch)
        sizes = [size for size in self.faults if size <= n]
        if not sizes:
            return
        fault = self.faults[max(sizes)]
        if fault == "cuda_oom":
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {n * 0.25:.2f} GiB. GPU 0 has a total capacity of "
                "79.19 GiB of which 1.06 GiB is free. (injected fault)")
        if fault == "raise":
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({n}x64 and 32x10) (injected fault)")
        if fault == "kill":
            _no_core_dump()
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "interrupt":
            raise KeyboardInterrupt
        if fault == "exit":
            raise SystemExit(3)
        raise ValueError(f"unknown fault {fault!r}")


# --- zero-argument factories for the CLI (``--dataset scripts.faults.datasets:NAME``) ---------

def tiny() -> Tiny:
    return Tiny()


def slow_to_build() -> Tiny:
    """A dataset whose construction outlasts any set-up limit a test sets."""
    time.sleep(120)
    return Tiny()


def waiting() -> Tiny:
    """Healthy, and workers pay (each sample waits 1 ms), so a study has several trials."""
    return Tiny(sleep_s=0.001)


def segfault() -> SignalInWorker:
    return SignalInWorker(signal.SIGSEGV)


def oom_killed() -> SignalInWorker:
    return SignalInWorker(signal.SIGKILL)


def bus_error() -> SignalInWorker:
    return SignalInWorker(signal.SIGBUS)


def fill_shm() -> FillShmInWorker:
    return FillShmInWorker()


def big_samples() -> BigSamples:
    return BigSamples()


def with_lambda() -> WithLambda:
    return WithLambda()


def cuda_oom_step() -> StepFaults:
    return StepFaults({64: "cuda_oom"})


# --- what a fault run must not leave behind (shared by test_faults.py and scripts/faults/suite.py)

TAG_VAR = "AUTOLOADER_FAULT_TAG"


def tagged_processes(tag: str) -> list:
    """Live processes that inherited ``TAG_VAR=tag`` from us: every trial process and worker a
    run started, wherever it sits in the tree now (a killed parent's children are re-parented,
    so walking our own children would miss exactly the orphans)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get(TAG_VAR) == tag:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def _cmdline(proc) -> str:
    import psutil

    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def leftover_processes(tag: str, timeout: float = 10.0) -> list[str]:
    """Processes of ours still alive after ``timeout`` (a killed tree takes a moment to go):
    tagged ones, our own live children, and anything named or started as autoloader's trial
    process (``autoloader-run``/``autoloader-wkr``, or ``autoloader-runner`` in its command
    line) that carries the tag or whose parent is gone. multiprocessing's resource tracker,
    our child for as long as we live, is not a leftover."""
    import psutil

    me = os.getpid()
    deadline = time.monotonic() + timeout
    while True:
        procs = {p.pid: p for p in tagged_processes(tag)}
        for child in psutil.Process().children(recursive=True):
            procs.setdefault(child.pid, child)
        for proc in psutil.process_iter(["pid", "name", "ppid"]):
            named = (proc.info["name"] or "").startswith(("autoloader-run", "autoloader-wkr")) \
                or "autoloader-runner" in _cmdline(proc)
            if named and proc.info["ppid"] in (0, 1) and proc.pid not in procs:
                procs[proc.pid] = proc  # a trial process whose parent is gone, whoever started it
        out = []
        for proc in procs.values():
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                if proc.ppid() == me and "resource_tracker" in _cmdline(proc):
                    continue
                out.append(f"{proc.pid} ppid={proc.ppid()} {proc.name()} {_cmdline(proc)[:120]}")
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def shm_names() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def new_shm_entries(before: set[str], tag: str, grace: float = 0.5) -> list[str]:
    """torch's /dev/shm segments new since ``before`` that outlive ``grace`` and may be ours:
    torch names a segment after its creator's pid, so a live foreign creator's segment (another
    program on this machine) is skipped; names that are not torch's are other programs'."""
    import psutil

    time.sleep(grace)
    ours = {p.pid for p in tagged_processes(tag)} | {os.getpid()}
    leaked = []
    for name in sorted(shm_names() - before):
        # Only torch's segments are a loader's; others (a database server's, semaphores) belong
        # to other programs on this machine.
        if not name.startswith("torch_"):
            continue
        try:
            pid = int(name.split("_")[1])
        except (IndexError, ValueError):
            pid = -1
        if pid > 0 and psutil.pid_exists(pid) and pid not in ours:
            continue
        leaked.append(name)
    return leaked


def private_shm_available() -> bool:
    """Whether a private, small /dev/shm can be mounted (root and unshare): the only honest way to
    fill /dev/shm without filling the machine's."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /dev/shm"], capture_output=True)
    return probe.returncode == 0


def study_states(db: str) -> dict[int, tuple[str, str | None]]:
    """trial id -> (state, stored TrialResult JSON), read straight from the study's SQLite file."""
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        states = dict(conn.execute("SELECT trial_id, state FROM trials"))
        attrs = dict(conn.execute("SELECT trial_id, value_json FROM trial_user_attributes "
                                  "WHERE key = 'autoloader_result'"))
    return {tid: (state, attrs.get(tid)) for tid, state in states.items()}


def find_study(out_dir: str) -> str | None:
    for root, _, files in os.walk(out_dir):
        for name in files:
            if name.endswith(".db"):
                return os.path.join(root, name)
    return None


def sigint_as_from_a_terminal() -> None:
    """A ``preexec_fn`` for a driver that a test will Ctrl-C: SIGINT at its default, as a terminal
    starts a command, whatever this process was started with (a shell's background job inherits
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler for it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_running_trial(out_dir: str, driver, timeout_s: float) -> bool:
    """Wait until the study under ``out_dir`` has a trial running (the driver, a ``Popen``, still
    alive); False when that never came. A signal sent then meets a trial under way."""
    import sqlite3

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and driver.poll() is None:
        db = find_study(out_dir)
        if db:
            try:
                if any(s == "RUNNING" for s, _ in study_states(db).values()):
                    return True
            except sqlite3.Error:  # the driver may be mid-write
                pass
        time.sleep(0.1)
    return False


def kill_mid_study(command: list[str], out_dir: str, cwd: str, timeout_s: float) -> tuple[dict | None, list]:
    """Start ``command`` (an ``autoloader tune`` writing its study under ``out_dir``) and SIGKILL
    it once the study has two finished trials and one running. Returns the trial states at that
    moment (None when it never got there) and the processes it had below it then."""
    import sqlite3
    import subprocess

    import psutil

    driver = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and driver.poll() is None:
            db = find_study(out_dir)
            if db:
                try:
                    states = study_states(db)
                except sqlite3.Error:  # the driver may be mid-write
                    states = {}
                finished = [s for s, _ in states.values() if s in ("COMPLETE", "FAIL")]
                running = [s for s, _ in states.values() if s == "RUNNING"]
                if len(finished) >= 2 and running:
                    tree = psutil.Process(driver.pid).children(recursive=True)
                    os.kill(driver.pid, signal.SIGKILL)
                    driver.wait(10)
                    return states, tree
            time.sleep(0.1)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return None, []


class LeakFds(Tiny):
    """Each sample opens /dev/null and keeps it open (a file handle never closed), in a process
    whose descriptor limit it lowers on its first read to what is open then plus ``headroom``: the
    process runs out of file descriptors (EMFILE) within a few hundred samples. ``in_workers``:
    in DataLoader workers too, else in the trial process alone."""

    def __init__(self, headroom: int = 300, length: int = 512, in_workers: bool = False):
        super().__init__(length=length)
        self.headroom, self.kept, self.lowered, self.in_workers = headroom, [], False, in_workers

    def __getitem__(self, index: int):
        if not self.in_workers and torch.utils.data.get_worker_info() is not None:
            return super().__getitem__(index)
        if not self.lowered:
            import resource

            self.lowered = True
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            limit = len(os.listdir("/proc/self/fd")) + self.headroom
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
        self.kept.append(open(os.devnull))
        return super().__getitem__(index)


def leak_fds() -> LeakFds:
    return LeakFds()


def leak_fds_in_workers() -> LeakFds:
    return LeakFds(in_workers=True)


class Detached(Tiny):
    """On its first read in a process, starts ``sleep 300`` detached (``start_new_session=True``,
    through a shell that exits at once, so the sleep is orphaned) and appends its pid to
    ``marker``: a helper a dataset starts and never stops, which must not outlive the tune."""

    def __init__(self, marker: str, length: int = 512):
        super().__init__(length=length)
        self.marker, self.started = marker, False

    def __getitem__(self, index: int):
        if not self.started:
            import subprocess

            self.started = True
            subprocess.Popen(["sh", "-c", f"sleep 300 & echo $! >> {self.marker}"], start_new_session=True).wait()
        return super().__getitem__(index)


def interrupting_step() -> StepFaults:
    return StepFaults({64: "interrupt"})


def exiting_step() -> StepFaults:
    return StepFaults({64: "exit"})
