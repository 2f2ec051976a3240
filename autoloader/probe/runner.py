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
# process group of its own and asks the kernel to kill it when the driver dies (PR_SET_PDEATHSIG),
# and its workers ask the same of the runner (``_WorkerInit``), so neither a killed driver nor a
# killed runner leaves workers behind, even hung ones. Both name themselves (``autoloader-run``,
# ``autoloader-wkr`` in ps). The driver kills a tree by its group, its descendants and every
# process its guard saw in it (a crashed runner's workers are no longer its children), and never
# signals a group that is not the runner's own. A trial ends as a result about its config, never
# as an exception: see ``TrialRunner``. The runner acknowledges each trial ("begin") and reports
# progress ("beat") while batches flow, so a runner that dies before the acknowledgement is not
# blamed on the config, and a hang's report says how long nothing moved.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing as mp
import os
import signal
import time
import traceback
import warnings
import weakref
from typing import Any

from ..results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from ..space import LoaderConfig
from . import guard
from .burst import BurstSettings
from .failures import classify_failure, death_cause, death_text, describe_failure, exit_text
from .protocol import (BEAT_S, Beat, Begin, DatasetInfo, Measure, Ready, Result, RunnerSetup, SetupError,
                       SetupFailed, Stop)

SETUP_TIMEOUT_S = 600.0


# --- the runner side --------------------------------------------------------------------------

def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel SIGKILLs us when the driver dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _set_name(name: str) -> None:
    """PR_SET_NAME: what ps, top and psutil's name() show, so trial processes are easy to find."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 == PR_SET_NAME
    except (OSError, AttributeError):
        pass


RUNNER_NAME = "autoloader-run"
WORKER_NAME = "autoloader-wkr"


class _WorkerInit:
    """The trial's ``worker_init_fn``: the worker dies with the runner, then the user's own runs.

    A DataLoader worker notices a dead parent only at its next queue poll, and one that hangs or
    spins never does; so each worker asks the kernel for SIGKILL when the runner dies, and exits
    at once if the runner died before it could ask.
    """

    def __init__(self, runner_pid: int | None, inner=None):
        self.runner_pid = runner_pid  # the worker's parent when forked; None for forkserver/spawn
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        _die_with_parent()
        if self.runner_pid is not None and os.getppid() != self.runner_pid:
            os._exit(1)
        _set_name(WORKER_NAME)
        if self.inner is not None:
            self.inner(worker_id)


# NOTE [ Pinned memory outlives its trial ]
# PyTorch's caching host allocator keeps every page-locked block it ever handed out, for the
# process's life: the pin thread's copies of up to num_workers x prefetch_factor batches in flight
# stay with the trial process after their trial. On the H200 (results/benchmarks/run-1d66441),
# num_workers=0 on large peaked at 1.79 GB when measured first and at 6.6-7.4 GB after the
# 24-worker trials; on gpubound, 1.28 then 2.86 GB, the process growing with each larger config
# as its pinned batches in flight would (the release below is not yet measured on the GPU). A
# trial's peak then carried earlier trials' batches, which taught predict_peak too high a
# per-worker cost and could let the guard stop a small config for a large one's cache. So each
# trial's caches are released when the trial ends, and the next trial's pinned allocations start
# from empty, as a fresh training process's do; the batches the burst skips (NOTE [ Honest
# burst ]) should absorb them, which a GPU run has yet to confirm.
# A CUDA error the trial left behind (a device-side assert in the step, say) surfaces here, in
# the synchronise. It must not replace the trial's own result, and the CUDA context is now
# unusable, so the trial process ends after reporting it and the next trial gets a fresh one.


def _release_cached_memory(torch) -> str | None:
    """Return the trial's cached device and pinned host memory (NOTE [ Pinned memory outlives its
    trial ]); None, or the CUDA error that stopped it (the context is then unusable).
    ``_host_emptyCache`` is private; a torch without it keeps its cache."""
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        empty_host = getattr(torch._C, "_host_emptyCache", None)
        if empty_host is not None:
            empty_host()
    except Exception as exc:  # noqa: BLE001 - reported by the caller, never raised over a result
        return f"{type(exc).__name__}: {exc}"
    return None


def _shutdown_iterators(iterators: list) -> None:
    """Stop a trial's DataLoader workers now, whatever state the trial left them in.

    An iterator kept alive past the trial (a persistent-workers loader, a traceback) keeps its
    workers and its entry in DataLoader's SIGCHLD registry; a worker of it dying later would
    then raise "DataLoader worker ... is killed by signal" in the runner between trials, and
    the next config would be blamed. So each iterator is shut down explicitly (joins, then
    terminates, its workers) and its registry entry is dropped.
    """
    from torch.utils.data._utils import signal_handling

    for ref in iterators:
        it = ref()
        if it is None:
            continue
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            try:
                shutdown()
            except Exception:  # noqa: BLE001 - best effort; the reaper kills what is left
                pass
        if getattr(it, "_worker_pids_set", False):
            try:
                signal_handling._remove_worker_pids(id(it))
            except (RuntimeError, AttributeError):
                pass
            it._worker_pids_set = False
        del it


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
        if self.cuda and ":" in self.device:
            # Events, synchronize and memory statistics act on the current device: make it ours.
            torch.cuda.set_device(self.device)
        self.dataset = resolve_dataset(setup.dataset.load(), setup.dataset.name)
        self.iterable = isinstance(self.dataset, torch.utils.data.IterableDataset)
        self.step = None
        if setup.step is not None:
            self.step = resolve_step(setup.step.load(), setup.step.name)
        self.nvml = _NvmlUtil() if self.cuda else None
        # Set when a trial left CUDA unusable: this process then ends after its result
        # (NOTE [ Pinned memory outlives its trial ]).
        self.cuda_broken: str | None = None

    def inspect(self) -> DatasetInfo:
        from torch.utils.data import DataLoader

        from ..errors import usage

        fixed = self._fixed_kwargs()
        probe_size = min(8, self.setup.probe_batch_size)
        probe = DataLoader(self.dataset, batch_size=probe_size,
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

        length = None if self.iterable else len(self.dataset)
        # The probe's default sampler makes the first batch min(size, length) samples; reading
        # them off the batch miscounts lists of samples (their leading dimension is channels).
        count = min(probe_size, length) if length is not None else max(1, batch_size_of(batch))
        memory = guard.sample_memory(os.getpid())
        return DatasetInfo(length=length, sample_seconds=elapsed / count,
                           sample_bytes=max(1, _tensor_bytes(batch) // count),
                           runner_uss=memory.uss, runner_pss=memory.pss)

    def _sample_counter(self, config: LoaderConfig, epoch_batches: int | None):
        """Samples per batch from the sampler's arithmetic: a collate_fn's output may have no
        leading batch dimension to count (lists, detection-style tuples). None (count the
        batch) when a user sampler decides."""
        fixed = self.setup.fixed_kwargs
        if "batch_sampler" in fixed or "sampler" in fixed:
            return None
        size = config.batch_size
        remainder = 0 if self.iterable or fixed.get("drop_last") else len(self.dataset) % size
        last = remainder or size
        return lambda batch, index: last if epoch_batches and index == epoch_batches else size

    def warm_up(self) -> None:
        """Run the consumer on one full batch before any trial, so one-time costs (cuDNN's
        algorithm search, lazy initialisation, allocator growth) are not charged to the first
        config. A failure here is left for the trials to meet and report."""
        from torch.utils.data import DataLoader

        fixed = {k: v for k, v in self.setup.fixed_kwargs.items() if k == "collate_fn"}
        try:
            batch = next(iter(DataLoader(self.dataset, batch_size=self.setup.probe_batch_size,
                                         num_workers=0, **fixed)))
            consume = self._consumer(LoaderConfig.make(self.setup.probe_batch_size, 0, False))
            for _ in range(2):
                consume(batch)
            if self.cuda:
                self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - the trials report it as a result about a config
            pass

    def _fixed_kwargs(self) -> dict:
        from ..seeding import seed_worker

        fixed = dict(self.setup.fixed_kwargs)
        context = fixed.get("multiprocessing_context") or self.setup.worker_start_method
        method = context if isinstance(context, str) else getattr(context, "_name", None)
        fixed["worker_init_fn"] = _WorkerInit(os.getpid() if method == "fork" else None,
                                              fixed.get("worker_init_fn", seed_worker))
        if not self.iterable and "sampler" not in fixed and "batch_sampler" not in fixed:
            fixed.setdefault("shuffle", True)
        return fixed

    def measure(self, config: LoaderConfig, settings: BurstSettings, beat=None) -> dict:
        """One trial. Returns the fields of a TrialResult (the driver adds memory figures).
        ``beat(batches)`` is called at most every ``BEAT_S`` while batches flow, so the driver's
        watchdog can tell how long a trial has made no progress."""
        from torch.utils.data import DataLoader

        from .burst import run_burst

        torch = self.torch
        loader = DataLoader(self.dataset, **config.loader_kwargs(), **self._fixed_kwargs())
        epoch_batches = None if self.iterable else len(loader)
        consume = self._consumer(config)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        where = ["next"]

        iterators = []

        def make_iterator():
            where[0] = "next"
            it = iter(loader)
            if not any(ref() is it for ref in iterators):
                iterators.append(weakref.ref(it))
            return it

        progress = {"batches": 0, "beat": time.monotonic()}

        def consume_tracked(batch):
            where[0] = "step"
            consume(batch)
            where[0] = "next"
            progress["batches"] += 1
            now = time.monotonic()
            if beat is not None and now - progress["beat"] >= BEAT_S:
                progress["beat"] = now
                beat(progress["batches"])

        try:
            m = run_burst(make_iterator, consume_tracked, config.num_workers,
                          fresh_workers_each_epoch=config.num_workers > 0 and not config.persistent_workers,
                          epoch_batches=epoch_batches, device=self.device, settings=settings,
                          batch_samples=self._sample_counter(config, epoch_batches))
        except Exception as exc:  # noqa: BLE001 - a crash is a result about this config
            message, detail = describe_failure(exc)
            del exc
            return {"status": FAILED, "cause": classify_failure(detail, where[0]), "error": message}
        finally:
            if beat is not None:
                beat(progress["batches"])  # the teardown that follows gets a full watchdog timeout
            _shutdown_iterators(iterators)
            loader = None  # the last reference: its workers go with it
            gc.collect()
            if self.cuda:
                self.cuda_broken = _release_cached_memory(torch)
        gpu_util = self.nvml.mean_between(m.window_start_wall, m.window_end_wall) if self.nvml else None
        return {"status": OK, "samples_per_s": m.samples_per_s,
                "steady_samples_per_s": m.steady_samples_per_s, "rel_interval": m.rel_interval,
                "wait_fraction": m.wait_fraction, "consumer_fraction": m.consumer_fraction,
                "gpu_util": gpu_util, "startup_s": m.startup_s, "epoch_restart_s": m.epoch_restart_s,
                "gpu_peak_bytes": int(torch.cuda.max_memory_allocated()) if self.cuda else None,
                "batches": m.batches, "window_s": m.window_s, "epochs_crossed": m.epochs_crossed,
                "pruned": m.pruned}

    def _consumer(self, config: LoaderConfig):
        if self.step is not None:
            return self.step
        if not self.cuda:
            return lambda batch: None
        non_blocking = config.pin_memory
        return lambda batch: _to_device(batch, self.device, non_blocking)


def nvml_bus_id(props) -> str | None:
    """The PCI address NVML looks a GPU up by ("domain:bus:device.function", hexadecimal) from
    torch's device properties, or None when they lack one. Torch gives the three numbers apart:
    its ``pci_bus_id`` is the bus alone, which NVML rejects (so every trial's GPU utilisation in
    results/benchmarks/run-1d66441 is null)."""
    parts = [getattr(props, f"pci_{name}_id", None) for name in ("domain", "bus", "device")]
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
        return None
    domain, bus, device = parts
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"


class _NvmlUtil:
    """GPU utilisation from NVML's own sample buffer, averaged over exactly the burst window."""

    def __init__(self):
        self.handle = None
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            self.pynvml = pynvml
            bus_id = nvml_bus_id(torch.cuda.get_device_properties(torch.cuda.current_device()))
            # Without a PCI address, no handle: torch's device index is not NVML's when
            # CUDA_VISIBLE_DEVICES reorders or hides GPUs, and another GPU's figure would mislead.
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id is not None else None
        except Exception:  # noqa: BLE001 - NVML is a second opinion: absent is fine
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
    _set_name(RUNNER_NAME)
    mp.set_start_method(setup.worker_start_method, force=True)
    # Trying more workers than CPUs is the point of some trials; DataLoader's warning about it
    # would only clutter the user's terminal.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    from ..errors import UsageError

    try:
        runner = _Runner(setup)
        info = runner.inspect()
        if runner.cuda:
            runner.warm_up()
    except (UsageError, SetupError) as exc:
        conn.send(SetupFailed(str(exc), True))
        return
    except Exception as exc:  # noqa: BLE001 - the user's code raised: bad input, with its traceback
        what = "the dataset and step" if setup.step is not None else "the dataset"
        conn.send(SetupFailed(
                   f"building {what} and loading one batch (in a fresh process, as every trial does) must "
                   f"work, and it raised {type(exc).__name__}: {exc}. Fix: make {what} run on its own in a "
                   f"fresh Python process and tune again; "
                   f"the traceback says where it raised:\n{traceback.format_exc(limit=8)}", True))
        return
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which decides
        conn.send(SetupFailed(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}", False))
        return
    conn.send(Ready(info))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        except RuntimeError:
            # DataLoader's SIGCHLD handler reporting a worker of a finished trial: that trial
            # has its result already, so this is not about the next one.
            continue
        if isinstance(message, Stop):
            return
        conn.send(Begin(os.getpid()))
        fields = runner.measure(message.config, message.settings, beat=lambda batches: conn.send(Beat(batches)))
        conn.send(Result(fields, leaked_workers=_reap_children()))
        if runner.cuda_broken:
            return  # NOTE [ Pinned memory outlives its trial ]: the next trial gets a fresh process


def _reap_children(timeout: float = 5.0) -> int:
    """Wait for this trial's workers to exit, killing any still there after ``timeout``; reap
    them all. Returns how many are still alive after that."""
    import psutil

    def alive() -> list:
        return [child for child in psutil.Process().children(recursive=True) if not guard.gone(child)]

    deadline = time.monotonic() + timeout
    leftover = alive()
    while leftover and time.monotonic() < deadline:
        time.sleep(0.05)
        leftover = alive()
    still = guard.kill_all(leftover, timeout)
    mp.active_children()  # reaps the workers multiprocessing started (no zombies left)
    return len(still)


# --- the driver side --------------------------------------------------------------------------

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
        self._proc = context.Process(target=_runner_main, args=(child_conn, self.setup), name="autoloader-runner")
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

