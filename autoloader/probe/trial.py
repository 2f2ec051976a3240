"""The trial process's work (``_Runner``; ``serve.main`` is its entry point): it builds the dataset
and the step once, then measures one config per Measure (NOTE [ Trial protocol ] in protocol.py).
Its set-up is timed and looked at: its parts (``Parts``), whether a dataset was built at its
module's import (``module_holds``), which packages have no bytecode (``uncompiled``).
Its GPU besides the step (NOTE [ No CUDA in the driver ] in inputs/hardware.py): batches copied
to it, its cached memory returned, its utilisation from NVML.

# NOTE [ Trial processes ]
# A trial can segfault, exhaust /dev/shm, trip the OOM killer or hang; none of that may take the
# driver (the search, its storage, the user's process) with it. So trials run in a child process,
# the runner, started with 'spawn' (no threads, locks or CUDA state inherited: NOTE [ Getting the
# dataset into a trial process ] in inputs/source.py). One runner serves many trials, so the
# imports, the dataset and the step are built once; after a crash, a kill or a hang the driver
# kills its whole tree and starts a new one. The runner is a training process: it owns CUDA (the
# driver never does: NOTE [ No CUDA in the driver ] in inputs/hardware.py), and its DataLoader
# workers start the DataLoader's way (fork on Linux, unless multiprocessing_context says) and must
# not touch CUDA, as in the user's run. The runner leads a process group of its own and dies with
# the driver (PR_SET_PDEATHSIG), its workers with it (``WorkerInit``), so no kill leaves workers
# behind, even hung ones; both name themselves (``autoloader-run``, ``autoloader-wkr``). The driver
# kills a tree by its group, its descendants and every process its guard saw in it (a crashed
# runner's workers are no longer its children), never a group not the runner's own. A trial ends as
# a result about its config, never as an exception; the two speak NOTE [ Trial protocol ].

# NOTE [ Pinned memory outlives its trial ]
# PyTorch's caching host allocator keeps every page-locked block it handed out for the process's
# life: the pin thread's copies of up to num_workers x prefetch_factor batches stay after their
# trial. One config after another in one process, each peak would carry every larger config's
# pinned batches before it, teaching predict_peak too high a per-worker cost and letting the guard
# stop a small config for a large one's cache. So each trial's caches are released when it ends,
# and the next trial's pinned allocations start from empty, as a fresh training process's do (a
# start-up cost the burst's skipped batches absorb: NOTE [ Honest burst ]). A CUDA error the trial
# left behind (a device-side assert in the step) surfaces here, in the synchronise: it must not
# replace the trial's own result, and the context is unusable, so the trial process ends after
# reporting it and the next trial gets a fresh one.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import time
import traceback
import weakref
from typing import Any

from ..batches import bytes_in, map_tensors, samples_in
from ..inputs.content import dataset_class, dataset_fingerprint
from ..search.policy import BurstSettings
from ..search.profile import Profile
from ..search.results import FAILED, LOADER_ARGUMENTS, OK, TrialResult
from ..search.space import LoaderConfig
from . import guard, nodes
from .failures import (FD_EXHAUSTED_IN_WORKER, classify_failure, describe_failure, failure_line, handover_lost,
                       raised_os_error)
from .growth import NewestIterator, anonymous_bytes, with_growth, with_methods
from .protocol import BEAT_S, DatasetInfo, RunnerSetup, SetupError
from .shards import Counted, shard_fields, with_stream
from .workers import WorkerInit, ended_out_of_descriptors, half_built_iterator, pss, shutdown_iterators

# A dataset longer than this is named when drawing its indices fails (a permutation: GBs of int64).
HUGE_LENGTH = 2**28
# How long a trial that lost a batch's hand-over waits for its workers to end, to read from their
# exit codes whether one ran out of file descriptors (NOTE [ A worker out of file descriptors ] in
# workers.py): such a worker ends just after the hand-over it broke.
HANDOVER_WAIT_S = 2.0


class StepExited(Exception):
    """The step raised KeyboardInterrupt or SystemExit: a step_error, not the trial process's end."""

    def __init__(self, exc: BaseException):
        said = f"({exc})" if str(exc) else "()"
        super().__init__(f"the step raised {type(exc).__name__}{said}: a step must return, not exit the process "
                         "or interrupt it. Fix: raise an exception of your own in the step (or let it return)")


class _Runner:
    """The dataset, the step, the device, built once; ``inspect`` and ``warm_up`` run before any
    trial, ``measure`` runs one."""

    def __init__(self, setup: RunnerSetup, began: float | None = None):
        self.parts = Parts(began)
        import torch

        from ..inputs.source import is_factory, resolve_dataset, resolve_step

        self.parts.mark("start the interpreter, import torch")

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
        # What the dataset adds to this process's heap: all a forked worker could come to copy. A
        # factory's module is imported first and the heap read after it: its imports are not the
        # dataset's rows (GROWTH_MIN_DATASET). A dataset built at the module's import counts the
        # module with it: the two cannot be told apart.
        before = anonymous_bytes()
        loaded = nodes.load(setup.dataset)
        self.parts.mark("import the dataset's module")
        imported = anonymous_bytes()
        # A torchdata.nodes graph: NOTE [ Tuning a torchdata.nodes graph ] in nodes.py.
        given = nodes.given_graph(loaded)   # a zero-argument factory's graph
        self.pipeline = nodes.Pipeline(given, setup.dataset.name) if nodes.is_nodes(given) else None
        self.dataset = self.pipeline if self.pipeline else resolve_dataset(given, setup.dataset.name)
        after = anonymous_bytes()
        self.parts.mark("build the dataset")
        if is_factory(loaded) and not module_holds(loaded, self.dataset):
            before = imported
        self.dataset_bytes = max(0, after - before) if before is not None and after is not None else None
        self.iterable = self.pipeline is not None or isinstance(self.dataset, torch.utils.data.IterableDataset)
        self.step = None
        self.step_identity = None
        if setup.step is not None:
            from ..inputs.code_digest import callable_identity

            given = setup.step.load()
            self.step_identity = callable_identity(given)   # the factory, when one was given: as the caller names it
            self.step = resolve_step(given, setup.step.name)
            self.parts.mark("build the step")
        self.nvml = NvmlUtil() if self.cuda else None
        # Set when a trial left CUDA unusable: this process then ends after its result
        # (NOTE [ Pinned memory outlives its trial ]).
        self.cuda_broken: str | None = None

    def inspect(self) -> DatasetInfo:
        from torch.utils.data import DataLoader

        from ..errors import usage

        if self.pipeline is not None:
            return nodes.inspect_graph(self)
        fixed = self._fixed_kwargs()
        self._check_loader()
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
        length = None if self.iterable else len(self.dataset)
        # The probe's default sampler makes the first batch min(size, length) samples; reading
        # them off the batch miscounts lists of samples (their leading dimension is channels).
        count = min(probe_size, length) if length is not None else max(1, samples_in(batch))
        self.parts.mark("load a first batch")
        from ..inputs.code_digest import code_fingerprint

        info = self.info(batch, elapsed, count, length=length, fingerprint=dataset_fingerprint(self.dataset),
                         dataset_class=dataset_class(self.dataset), step_identity=self.step_identity,
                         code=code_fingerprint(self.dataset, self.step, self.setup.fixed_kwargs),
                         **shard_fields(self.dataset, self.iterable))
        self.parts.mark("fingerprint the dataset and code")
        return info

    def info(self, batch, seconds: float, count: int, **fields) -> DatasetInfo:
        """What the set-up learned, from a first batch of ``count`` samples made in ``seconds``."""
        memory = guard.sample_memory(os.getpid())
        return DatasetInfo(sample_seconds=seconds / count, sample_bytes=max(1, bytes_in(batch) // count),
                           runner_uss=memory.uss, runner_pss=memory.pss, dataset_bytes=self.dataset_bytes,
                           threads=self.torch.get_num_threads(), **fields)

    def _check_loader(self) -> None:
        """The first trial's DataLoader built, not iterated: an argument only DataLoader refuses is
        a usage error (NOTE [ Fixed DataLoader arguments ] in inputs/loader_args.py)."""
        config = LoaderConfig.make(self.setup.probe_batch_size, 0, False)
        try:
            self._loader(config)
        except Exception as exc:  # noqa: BLE001 - DataLoader raises ValueError, TypeError and more
            raise SetupError(self._refused(config, exc), usage=True) from None

    def _loader(self, config: LoaderConfig, counted: Counted | None = None):
        from torch.utils.data import DataLoader

        if self.pipeline is not None:
            return self.pipeline.build(config)
        fixed = self._fixed_kwargs(config.num_workers, config.multiprocessing_context)
        if counted is not None:   # NOTE [ Counting what each worker delivered ] in shards.py
            fixed["collate_fn"] = counted
        return DataLoader(self.dataset, **config.loader_kwargs(), **fixed)

    def _refused(self, config: LoaderConfig, exc: Exception) -> str:
        given = sorted(self.setup.fixed_kwargs)
        return (f"the DataLoader arguments given ({', '.join(given) or 'none'}) must build a DataLoader with "
                f"{config.key} (got {type(exc).__name__}: {exc}). Fix: change or drop the argument DataLoader "
                "names (see torch.utils.data.DataLoader's documentation)")

    def _sample_counter(self, config: LoaderConfig, epoch_batches: int | None):
        """Samples per batch from the sampler's arithmetic (a collate_fn's output may have no
        leading dimension to count); None (count the batch) when a user sampler decides."""
        fixed = self.setup.fixed_kwargs
        if "batch_sampler" in fixed or "sampler" in fixed:
            return None
        size = config.batch_size
        remainder = 0 if self.iterable or fixed.get("drop_last") else self._rank_length() % size
        last = remainder or size
        return lambda batch, index: last if epoch_batches and index == epoch_batches else size

    def warm_up(self) -> None:
        """The consumer on one batch before any trial: one-time costs (cuDNN's algorithm search,
        lazy initialisation) are not the first config's. A failure is left for the trials."""
        from torch.utils.data import DataLoader

        fixed = {k: v for k, v in self.setup.fixed_kwargs.items() if k == "collate_fn"}
        try:
            batch = self.pipeline.first_batch(nodes.inline(self)) if self.pipeline else next(iter(
                DataLoader(self.dataset, batch_size=self.setup.probe_batch_size, num_workers=0, **fixed)))
            consume = self._consumer(LoaderConfig.make(self.setup.probe_batch_size, 0, False))
            for _ in range(2):
                consume(batch)
            if self.cuda:
                self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - the trials report it as a result about a config
            pass
        self.parts.mark("warm the step up")

    def _fixed_kwargs(self, workers: int | None = None, method: str | None = None) -> dict:
        """The user's arguments for a loader of ``workers`` workers started by ``method`` (None:
        the user's, else the default)."""
        from ..seeding import seed_worker

        fixed = dict(self.setup.fixed_kwargs)
        if workers == 0:   # DataLoader refuses a start method for workers it does not start
            fixed.pop("multiprocessing_context", None)
        context = method or fixed.get("multiprocessing_context") or self.setup.worker_start_method
        method = context if isinstance(context, str) else getattr(context, "_name", None)
        fixed["worker_init_fn"] = WorkerInit(os.getpid() if method == "fork" else None,
                                              fixed.get("worker_init_fn", seed_worker))
        if not self.iterable and "sampler" not in fixed and "batch_sampler" not in fixed:
            shuffle = fixed.pop("shuffle", True)
            if self.setup.shard is None:
                fixed["shuffle"] = shuffle
            else:  # one rank of a node: its shard, as DistributedSampler gives it in training
                from torch.utils.data.distributed import DistributedSampler

                rank, world = self.setup.shard
                fixed["sampler"] = DistributedSampler(self.dataset, num_replicas=world, rank=rank,
                                                      shuffle=bool(shuffle))
        return fixed

    def _worker_kwargs(self, method: str | None) -> dict:
        fixed = self._fixed_kwargs(None, method)
        return {k: v for k, v in fixed.items() if k in ("collate_fn", "worker_init_fn")}

    def _rank_length(self) -> int | None:
        """An epoch's samples: the dataset's, or its rank's shard's (padded to equal length)."""
        if self.iterable:
            return None
        if self.setup.shard is None:
            return len(self.dataset)
        world = self.setup.shard[1]
        return -(-len(self.dataset) // world)

    def measure(self, config: LoaderConfig, settings: BurstSettings, beat=None) -> TrialResult:
        """One trial's TrialResult (the driver adds what it saw of the tree); ``beat(batches)`` at
        most every ``BEAT_S`` while batches flow, for the driver's watchdog."""
        from .burst import run_burst

        torch = self.torch
        counted = None if self.pipeline else Counted.for_trial(self.iterable, self.setup.fixed_kwargs.get("collate_fn"),
                                                               config.num_workers)
        try:   # inside the trial's error handling: NOTE [ Fixed DataLoader arguments ] in inputs/loader_args.py
            loader = self._loader(config, counted)
        except Exception as exc:  # noqa: BLE001 - DataLoader raises ValueError, TypeError and more
            return TrialResult(config, FAILED, cause=LOADER_ARGUMENTS, error=self._refused(config, exc))
        epoch_batches = None if self.iterable else len(loader)
        consume = self._consumer(config)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            reset_pinned_peak(torch)
        where = ["next"]

        iterators = []
        epoch = [0]
        newest = NewestIterator()   # how far its workers read: NOTE [ Copy on read ] in search/growth.py

        def make_iterator():
            where[0] = "iter"
            if hasattr(getattr(loader, "sampler", None), "set_epoch"):   # a rank's shard: a new order each epoch
                loader.sampler.set_epoch(epoch[0])
                epoch[0] += 1
            try:
                it = iter(loader)
            except BaseException as exc:  # its workers run: NOTE [ An iterator that raised while starting ]
                half = half_built_iterator(exc)
                if half is not None:
                    shutdown_iterators([weakref.ref(half)])
                raise
            where[0] = "next"
            if not any(ref() is it for ref in iterators):
                iterators.append(weakref.ref(it))
                newest.made(it)
            return it

        progress = {"batches": 0, "beat": time.monotonic()}

        def consume_tracked(batch):
            where[0] = "step"
            consume(batch)
            where[0] = "next"
            progress["batches"] += 1
            newest.batches += 1
            now = time.monotonic()
            if beat is not None and now - progress["beat"] >= BEAT_S:
                progress["beat"] = now
                beat(progress["batches"])

        try:
            m = run_burst(make_iterator, consume_tracked, config.num_workers,
                          fresh_workers_each_epoch=config.num_workers > 0 and not config.persistent_workers,
                          epoch_batches=epoch_batches, device=self.device, settings=settings,
                          batch_samples=self._sample_counter(config, epoch_batches))
            grown = newest.point(config)
            delivered = counted.read() if counted is not None else {}
            pinned = pinned_peak(torch) if self.cuda and config.pin_memory else None
        except Exception as exc:  # noqa: BLE001 - a crash is a result about this config
            # First: a worker that ran out of descriptors ends now, and its end is read, not raised.
            ran_out = ended_out_of_descriptors(iterators, HANDOVER_WAIT_S if handover_lost(exc) else 0.0)
            message, detail = describe_failure(exc)
            os_error = raised_os_error(exc)   # the environment's: re-measured on resume (store/study.py)
            del exc
            if ran_out and message != FD_EXHAUSTED_IN_WORKER:
                message, detail = FD_EXHAUSTED_IN_WORKER, f"{detail}\n{FD_EXHAUSTED_IN_WORKER}"
            cause = classify_failure(detail, where[0])
            if cause == "sampler_error" and not self.iterable and len(self.dataset) > HUGE_LENGTH:
                message += (f" (the dataset's __len__ is {len(self.dataset):,}: shuffling draws a permutation of "
                            "that many indices)")
            return TrialResult(config, FAILED, cause=cause, error=message, os_error=os_error)
        finally:
            down = time.perf_counter()
            if beat is not None:
                beat(progress["batches"])  # the teardown that follows gets a full watchdog timeout
            shutdown_iterators(iterators)
            if self.pipeline is not None:
                nodes.stop(loader)
            newest.clear()
            loader = None  # the last reference: its workers go with it
            gc.collect()
            if self.cuda:
                self.cuda_broken = release_cached_memory(torch)
            down = time.perf_counter() - down
        measured = dataclasses.asdict(m)
        window = measured.pop("window_start_wall"), measured.pop("window_end_wall")
        grown = dict(zip(("worker_samples", "worker_uss_bytes", "worker_file_bytes"), grown or [None] * 3))
        return TrialResult(config, OK, gpu_util=self.nvml.mean_between(*window) if self.nvml else None,
                           teardown_s=down, pinned_bytes=pinned,
                           gpu_peak_bytes=int(torch.cuda.max_memory_allocated()) if self.cuda else None,
                           **grown, **measured, **delivered)

    def profile(self, batch_size: int, beat, memory_budget: int | None = None, limit_s: float | None = None,
                step_stall_s: float | None = None) -> tuple[Profile | None, str | None]:
        """(the profile, None) or (None, why): the dataset or step raised on the way. Past
        ``limit_s`` (NOTE [ A profile within its share ]) the growth and start-method stages are
        skipped; ``step_stall_s``: how long one call of the step counts as progress."""
        from .profiler import run_profile

        consume = self._consumer(LoaderConfig.make(batch_size, 0, self.cuda))
        try:
            if self.pipeline is not None:
                return nodes.profile_nodes(self.pipeline, nodes.inline(self, batch_size), consume,
                                           lambda: beat(0)), None
            profile = run_profile(self.dataset, self._fixed_kwargs(), batch_size, consume, self.device,
                                  lambda pid: pss(pid), beat=lambda: beat(0),
                                  memory_budget=memory_budget, limit_s=limit_s, step_stall_s=step_stall_s)
            t0 = time.perf_counter()
            if limit_s is not None and profile.seconds >= limit_s:
                profile = dataclasses.replace(profile, cut_s=limit_s)
            if profile.cut_s is None:
                profile = with_growth(profile, self.dataset, self._fixed_kwargs(), self.dataset_bytes, lambda: beat(0))
            t1 = time.perf_counter()
            profile = with_stream(profile, self.dataset, self._fixed_kwargs(), batch_size, lambda: beat(0))
            t2 = time.perf_counter()
            if self.setup.start_methods and profile.cut_s is None:   # NOTE [ What a start method costs ] in search/methods.py
                default = self.setup.worker_start_method
                profile = with_methods(profile, self.dataset, self.setup.start_methods, default,
                                       lambda m: self._worker_kwargs(None if m == default else m), lambda: beat(0))
            stages = (("growth", t1 - t0), ("stream", t2 - t1), ("start methods", time.perf_counter() - t2))
            profile = dataclasses.replace(profile, stage_s=profile.stage_s + tuple(s for s in stages if s[1] >= 0.005))
        except Exception as exc:  # noqa: BLE001 - a profile that fails is reported, never raised
            return None, failure_line(exc)
        finally:
            if self.cuda:
                self.cuda_broken = release_cached_memory(self.torch)
        return profile, None

    def _consumer(self, config: LoaderConfig):
        if self.step is not None:
            step = self.step

            def stepped(batch):
                try:
                    return step(batch)
                except (KeyboardInterrupt, SystemExit) as exc:
                    # The step's own: this process is in a process group of its own (serve.main),
                    # so a Ctrl-C at the terminal never reaches it. Its failure, not the process's end.
                    raise StepExited(exc) from None

            return stepped
        if not self.cuda:
            return lambda batch: None
        non_blocking = config.pin_memory
        return lambda batch: to_device(batch, self.device, non_blocking)


# NOTE [ Imports compiled every start ]
# Python caches each module's bytecode beside its source the first time it imports it. Where no
# cache can be written (PYTHONDONTWRITEBYTECODE=1, common in container images, with packages a tool
# installed uncompiled, uv's default; or a read-only install), every fresh interpreter compiles
# torch's thousands of modules again, seconds of every start. The trial process is one, started by
# every tune, so after its imports it looks for the bytecode of the costliest packages, and the tune
# says which it compiled and how to compile them once, beside their sources (PYTHONPYCACHEPREFIX is
# no fix: it moves every cache, the standard library's too).
UNCOMPILED_CHECKED = ("torch", "torchvision", "numpy")


def uncompiled(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The packages among UNCOMPILED_CHECKED and ``extra`` imported here with no bytecode cached
    where this interpreter looks (NOTE [ Imports compiled every start ])."""
    import importlib.util

    found = []
    for name in dict.fromkeys(UNCOMPILED_CHECKED + extra):
        path = getattr(sys.modules.get(name), "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        try:
            cached = importlib.util.cache_from_source(path)
        except (NotImplementedError, ValueError):
            continue
        if not os.path.exists(cached):
            found.append(name)
    return tuple(found)


def module_holds(factory, dataset) -> bool:
    """Whether ``dataset`` is one of the names of ``factory``'s module (built at its import)."""
    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    return module is not None and any(value is dataset for value in vars(module).values())


class Parts:
    """The set-up's parts as they end, each (what, start, end) in ``time.monotonic()`` seconds (the
    host's one clock), the first from ``began`` (when the driver started this process) or now."""

    def __init__(self, began: float | None = None):
        self.marks: list[tuple[str, float, float]] = []
        self.last = began if began is not None else time.monotonic()

    def mark(self, what: str) -> None:
        now = time.monotonic()
        self.marks.append((what, self.last, now))
        self.last = now


def release_cached_memory(torch) -> str | None:
    """The trial's cached device and pinned host memory returned (NOTE [ Pinned memory outlives its
    trial ]); None, or the CUDA error that stopped it (the context is then unusable)."""
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        empty_host = getattr(torch._C, "_host_emptyCache", None)
        if empty_host is not None:
            empty_host()
    except Exception as exc:  # noqa: BLE001 - reported by the caller, never raised over a result
        return f"{type(exc).__name__}: {exc}"
    return None


def reset_pinned_peak(torch) -> None:
    reset = getattr(torch.cuda, "reset_peak_host_memory_stats", None)
    if reset is not None:
        try:
            reset()
        except Exception:  # noqa: BLE001 - the figure is then the process's peak, an upper bound
            pass


def pinned_peak(torch) -> int | None:
    """The caching host allocator's peak since the reset, in its blocks (NOTE [ Pinned batches ] in
    search/memory.py); None where torch keeps no such statistics."""
    stats = getattr(torch.cuda, "host_memory_stats", None)
    if stats is None:
        return None
    try:
        value = stats().get("allocated_bytes.peak")
    except Exception:  # noqa: BLE001 - no figure rather than no result
        return None
    return int(value) if value is not None else None


def to_device(batch: Any, device: str, non_blocking: bool) -> Any:
    return map_tensors(batch, lambda t: t.to(device, non_blocking=non_blocking))


def nvml_bus_id(props) -> str | None:
    """The PCI address NVML finds a GPU by, from torch's device properties (their ``pci_bus_id`` is
    the bus alone, which NVML rejects); None when they lack one."""
    parts = [getattr(props, f"pci_{name}_id", None) for name in ("domain", "bus", "device")]
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
        return None
    domain, bus, device = parts
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"


class NvmlUtil:
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
