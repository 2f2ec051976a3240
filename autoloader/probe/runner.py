"""The trial process: where configs are measured, away from the driver.

# NOTE [ Trial processes ]
# A trial can segfault, exhaust /dev/shm, trip the OOM killer or hang; none of that may take the
# driver (the search, its storage, the user's process) with it. So trials run in a child process,
# the runner, started with 'spawn': a clean interpreter that inherits no threads, locks or CUDA
# state from the driver (see NOTE [ Getting the dataset into a trial process ] in source.py).
# One runner serves many trials so the import, the dataset build and the step factory (a model
# on the GPU) are paid once; after a crash, a kill or a hang the driver kills the runner's whole
# tree and starts a new one. The runner is what a training process looks like: it owns CUDA and
# its DataLoader workers are started the DataLoader's way (fork on Linux, unless the user passes
# multiprocessing_context), and they must not touch CUDA, exactly as in the user's own run.
# The driver never initialises CUDA (NOTE [ No CUDA in the driver ]). The runner puts itself in a
# process group of its own and asks the kernel to kill it when the driver dies, so neither a
# killed driver nor a killed runner leaves workers behind.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import multiprocessing as mp
import os
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ..results import CONSTRAINT, FAILED, HANG, OK, TrialResult, classify_failure
from ..source import Source
from ..space import LoaderConfig
from . import guard
from .burst import BurstSettings

SETUP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RunnerSetup:
    dataset: Source
    step: Source | None
    device: str
    fixed_kwargs: dict
    probe_batch_size: int
    # The driver's default start method. A spawned child would otherwise default to 'spawn'
    # for its own children, and DataLoader workers must start as in the user's process.
    worker_start_method: str = dataclasses.field(
        default_factory=lambda: mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0])


@dataclass(frozen=True)
class DatasetInfo:
    """What the runner learned about the dataset before any trial."""

    length: int | None          # None for an IterableDataset
    iterable: bool
    sample_seconds: float       # one sample's __getitem__ in the runner
    sample_bytes: int           # collated bytes per sample
    runner_uss: int             # the runner's own memory once the dataset and step are built
    cuda: bool


class SetupError(Exception):
    """The runner could not build the dataset or step; ``usage`` says whether it is bad input."""

    def __init__(self, message: str, usage: bool):
        super().__init__(message)
        self.usage = usage


# --- the runner side --------------------------------------------------------------------------

def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel SIGKILLs us when the driver dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _tensor_bytes(obj: Any) -> int:
    if hasattr(obj, "element_size") and hasattr(obj, "nelement"):
        return int(obj.element_size() * obj.nelement())
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def _to_device(batch: Any, device: str, non_blocking: bool) -> Any:
    if hasattr(batch, "to") and hasattr(batch, "is_pinned"):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device, non_blocking) for v in batch) if not hasattr(batch, "_fields") \
            else type(batch)(*(_to_device(v, device, non_blocking) for v in batch))
    return batch


class _Runner:
    def __init__(self, setup: RunnerSetup):
        import torch

        from ..source import resolve_dataset, resolve_step

        self.torch = torch
        self.setup = setup
        self.device = setup.device
        self.cuda = setup.device.startswith("cuda")
        if self.cuda and not torch.cuda.is_available():
            raise SetupError("--device cuda needs a CUDA GPU that torch can use (got "
                             f"torch {torch.__version__}, torch.cuda.is_available() is False). "
                             "Fix: pass --device cpu, or install a CUDA build of torch", usage=True)
        self.dataset = resolve_dataset(setup.dataset.load(), setup.dataset.name)
        self.iterable = isinstance(self.dataset, torch.utils.data.IterableDataset)
        self.step = None
        if setup.step is not None:
            self.step = resolve_step(setup.step.load(), setup.step.name)
        self.nvml = _NvmlUtil() if self.cuda else None

    def inspect(self) -> DatasetInfo:
        from torch.utils.data import DataLoader

        from ..errors import usage

        fixed = self._fixed_kwargs()
        probe = DataLoader(self.dataset, batch_size=min(8, self.setup.probe_batch_size),
                           num_workers=0, **{k: v for k, v in fixed.items() if k == "collate_fn"})
        t0 = time.perf_counter()
        try:
            batch = next(iter(probe))
        except StopIteration:
            raise usage("the dataset must hold at least one sample", "it yielded none",
                        "check the data path or filters that built it") from None
        except Exception as exc:  # noqa: BLE001
            where = "collate" if "collate" in traceback.format_exc() else "__getitem__"
            raise usage(f"the dataset's samples must load and collate into a batch ({where} failed)",
                        f"{type(exc).__name__}: {exc}",
                        "make __getitem__ return tensors, numbers, or dicts/tuples of them, or pass a "
                        "collate_fn that handles your samples") from None
        elapsed = time.perf_counter() - t0
        from .burst import batch_size_of

        count = max(1, batch_size_of(batch))
        length = None if self.iterable else len(self.dataset)
        return DatasetInfo(length=length, iterable=self.iterable, sample_seconds=elapsed / count,
                           sample_bytes=max(1, _tensor_bytes(batch) // count),
                           runner_uss=guard.sample_memory(os.getpid()).uss, cuda=self.cuda)

    def _fixed_kwargs(self) -> dict:
        from ..seeding import seed_worker

        fixed = dict(self.setup.fixed_kwargs)
        fixed.setdefault("worker_init_fn", seed_worker)
        if not self.iterable and "sampler" not in fixed and "batch_sampler" not in fixed:
            fixed.setdefault("shuffle", True)
        return fixed

    def measure(self, config: LoaderConfig, settings: BurstSettings) -> dict:
        """One trial. Returns the fields of a TrialResult (the driver adds memory figures)."""
        from torch.utils.data import DataLoader

        from .burst import run_burst

        torch = self.torch
        loader = DataLoader(self.dataset, **config.loader_kwargs(), **self._fixed_kwargs())
        epoch_batches = None if self.iterable else len(loader)
        consume = self._consumer(config)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        where = ["next"]

        def make_iterator():
            where[0] = "next"
            return iter(loader)

        def consume_tracked(batch):
            where[0] = "step"
            consume(batch)
            where[0] = "next"

        try:
            m = run_burst(make_iterator, consume_tracked, config.num_workers,
                          fresh_workers_each_epoch=config.num_workers > 0 and not config.persistent_workers,
                          epoch_batches=epoch_batches, device=self.device, settings=settings)
        except Exception as exc:  # noqa: BLE001 - a crash is a result about this config
            message = f"{type(exc).__name__}: {exc}"
            detail = traceback.format_exc(limit=6)
            return {"status": FAILED, "cause": classify_failure(message + detail, where[0]),
                    "error": message.strip().splitlines()[0][:500] if message.strip() else type(exc).__name__}
        finally:
            del loader
            gc.collect()
            if self.cuda:
                torch.cuda.empty_cache()
        gpu_util = self.nvml.mean_between(m.window_start_wall, m.window_end_wall) if self.nvml else None
        return {"status": OK, "samples_per_s": m.samples_per_s,
                "steady_samples_per_s": m.steady_samples_per_s, "rel_interval": m.rel_interval,
                "wait_fraction": m.wait_fraction, "consumer_fraction": m.consumer_fraction,
                "gpu_util": gpu_util, "startup_s": m.startup_s, "epoch_restart_s": m.epoch_restart_s,
                "gpu_peak_bytes": int(torch.cuda.max_memory_allocated()) if self.cuda else None,
                "batches": m.batches, "window_s": m.window_s, "epochs_crossed": m.epochs_crossed}

    def _consumer(self, config: LoaderConfig):
        if self.step is not None:
            return self.step
        if not self.cuda:
            return lambda batch: None
        non_blocking = config.pin_memory
        return lambda batch: _to_device(batch, self.device, non_blocking)


class _NvmlUtil:
    """GPU utilisation from NVML's own sample buffer, averaged over exactly the burst window."""

    def __init__(self):
        self.handle = None
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            self.pynvml = pynvml
            bus_id = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "pci_bus_id", None)
            if bus_id is not None:
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(
                    f"{bus_id:08x}" if isinstance(bus_id, int) else str(bus_id))
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        except Exception:  # noqa: BLE001 - NVML is a second opinion: absent is fine
            try:
                import pynvml

                self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            except Exception:  # noqa: BLE001
                self.handle = None

    def mean_between(self, start_wall: float, end_wall: float) -> float | None:
        if self.handle is None:
            return None
        try:
            _, samples = self.pynvml.nvmlDeviceGetSamples(
                self.handle, self.pynvml.NVML_GPU_UTILIZATION_SAMPLES, int(start_wall * 1e6))
        except Exception:  # noqa: BLE001
            return None
        values = [s.sampleValue.uiVal for s in samples if start_wall * 1e6 <= s.timeStamp <= end_wall * 1e6]
        return sum(values) / len(values) / 100.0 if values else None


def _runner_main(conn, setup: RunnerSetup) -> None:
    os.setpgrp()
    _die_with_parent()
    mp.set_start_method(setup.worker_start_method, force=True)
    from ..errors import UsageError

    try:
        runner = _Runner(setup)
        info = runner.inspect()
    except (UsageError, SetupError) as exc:
        conn.send(("setup_error", str(exc), True))
        return
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which decides
        conn.send(("setup_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}", False))
        return
    conn.send(("ready", info))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        _, config, settings = message
        result = runner.measure(config, settings)
        result["leaked_workers"] = _reap_children()
        conn.send(("result", result))


def _reap_children(timeout: float = 5.0) -> int:
    """Wait for this trial's workers to exit; kill and count any that did not."""
    import psutil

    me = psutil.Process()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = [c for c in me.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
        if not children:
            return 0
        time.sleep(0.05)
    leftover = me.children(recursive=True)
    for child in leftover:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    return len(leftover)


# --- the driver side --------------------------------------------------------------------------

def _signal_name(exitcode: int | None) -> str:
    if exitcode is None or exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


class TrialRunner:
    """The driver's handle on the trial process: sends configs, guards memory, enforces the
    watchdog, and restarts the process after anything kills it."""

    def __init__(self, setup: RunnerSetup, max_memory: int, hang_timeout_s: float = 60.0,
                 setup_timeout_s: float = SETUP_TIMEOUT_S):
        self.setup = setup
        self.max_memory = max_memory
        self.hang_timeout_s = hang_timeout_s
        self.setup_timeout_s = setup_timeout_s
        self.info: DatasetInfo | None = None
        self.restarts = 0
        self.orphans = 0
        self._proc = None
        self._conn = None

    def start(self) -> DatasetInfo:
        context = mp.get_context("spawn")
        parent_conn, child_conn = context.Pipe()
        self._proc = context.Process(target=_runner_main, args=(child_conn, self.setup), name="autoloader-runner")
        self._proc.start()
        child_conn.close()
        self._conn = parent_conn
        deadline = time.monotonic() + self.setup_timeout_s
        while not parent_conn.poll(0.2):
            if not self._proc.is_alive():
                self._kill()
                raise SetupError(f"the trial process died while building the dataset or step "
                                 f"({_signal_name(self._proc.exitcode)})", usage=False)
            if time.monotonic() > deadline:
                self._kill()
                raise SetupError(f"building the dataset and step took over {self.setup_timeout_s:.0f} s",
                                 usage=False)
        try:
            message = parent_conn.recv()
        except (EOFError, OSError):
            self._kill()
            raise SetupError("the trial process closed its pipe while starting", usage=False) from None
        if message[0] == "setup_error":
            self._kill()
            raise SetupError(message[1], usage=message[2])
        self.info = message[1]
        return self.info

    def measure(self, config: LoaderConfig, settings: BurstSettings) -> TrialResult:
        if self._proc is None or not self._proc.is_alive():
            self.restarts += self._proc is not None
            self.start()
        t0 = time.monotonic()
        watch = guard.TreeWatch(self._proc.pid)
        try:
            self._conn.send(("measure", config, settings))
        except (BrokenPipeError, OSError):
            self._kill()
            return TrialResult(config, FAILED, cause="runner_killed", error="the trial process was gone")
        status = cause = error = None
        fields: dict = {}
        while True:
            if self._conn.poll(0.05):
                try:
                    kind, payload = self._conn.recv()
                    fields = payload
                except (EOFError, OSError):
                    status, cause = FAILED, "runner_killed"
                    error = f"the trial process died ({_signal_name(self._wait_exitcode())})"
                    self._kill()
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
                self._kill()
                status, cause = FAILED, ("shm_exhausted" if code == -signal.SIGBUS else "runner_killed")
                error = f"the trial process died ({_signal_name(code)})"
                break
            if time.monotonic() - t0 > self.hang_timeout_s:
                self._kill()
                status, cause = HANG, "hang"
                error = f"no result after {self.hang_timeout_s:.0f} s; the trial's process tree was killed"
                break
        watch.poll()
        fields = dict(fields)
        self.orphans += int(fields.pop("leaked_workers", 0) or 0)
        if status is not None:
            fields = {"status": status, "cause": cause, "error": error}
        return TrialResult(config=config, peak_host_bytes=watch.peak.uss or None,
                           peak_shm_bytes=watch.peak_shm,
                           batch_bytes=(self.info.sample_bytes * config.batch_size) if self.info else None,
                           seconds=time.monotonic() - t0, **fields)

    def _wait_exitcode(self) -> int | None:
        self._proc.join(timeout=2.0)
        return self._proc.exitcode

    def _kill(self) -> None:
        if self._proc is None:
            return
        if self._proc.pid is not None:
            self.orphans += len(guard.kill_tree(self._proc.pid))
        self._proc.join(timeout=5.0)
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        """Stop the runner politely, then make sure nothing of its tree is left."""
        if self._proc is None:
            return
        if self._proc.is_alive() and self._conn is not None:
            try:
                self._conn.send(("stop",))
                self._proc.join(timeout=5.0)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
        self._proc = None

    def __enter__(self) -> "TrialRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
