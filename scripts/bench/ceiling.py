"""The ceiling of one benchmark workload, measured in a spawned child of the bench's run.

ceiling = min(consumer rate, cores x one worker's rate), where
  consumer rate    = the step replayed over ~8 batches already on the device (no loading, no H2D),
                     timed with a device synchronise around whole passes;
  one worker's rate = the loader alone (no step, no device copy) at num_workers=0, with torch held
                     to one thread as inside a DataLoader worker.
No loader config can beat the consumer, and none can beat every core loading at one worker's rate.

Beside it, on CUDA, the main process's own share of each batch with workers: pinning a collated
host batch (the pin thread's copy) and copying it to the device, each timed alone, one batch
after another; ``main_samples_per_s`` is the batch over the slower of the two. With perfect
overlap of the two and nothing else (no receive from the workers, no step launch), that is the
most the main process can pass on, so when it is below the ceiling, the main process caps the
loop: ``cap`` names the lowest of the three (consumer, cores, main). The ceiling itself stays as
shared/BENCHMARK.md defines it.

The child is started with 'spawn' and owns CUDA; the bench's main process never touches CUDA (see
NOTE [ No CUDA in the driver ] in autoloader/inputs/hardware.py). It builds everything and warms up while
the trial runner of the same workload starts (both are set-up, nothing is being measured), says
"ready", and measures only when told "go", after the workload's other measurements, so it never
runs alongside one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback

from autoloader.probe.workers import die_with_parent


class CeilingChild:
    """The parent's handle on the ceiling child: started at once (it builds and warms up while
    the trial runner starts), ``ready()`` waits for its set-up, ``measure()`` tells it to go and
    returns its result; each answers ``(kind, payload)``, kind "error" with the reason on failure."""

    def __init__(self, dataset_spec: str, step_spec: str, batch_size: int, settings: dict,
                 worker_start_method: str):
        context = mp.get_context("spawn")
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=ceiling_main, name="bench-ceiling",
                                    args=(child, dataset_spec, step_spec, batch_size, settings, worker_start_method))
        self.proc.start()
        child.close()

    def _recv(self, timeout: float):
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.2):
            if not self.proc.is_alive():
                raise RuntimeError(f"the ceiling process died (exit code {self.proc.exitcode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer from the ceiling process in {timeout:.0f} s")
        return self.conn.recv()

    def ready(self, timeout: float = 300.0) -> tuple[str, object]:
        try:
            return self._recv(timeout)
        except (RuntimeError, EOFError, OSError) as exc:
            return "error", str(exc)

    def measure(self, timeout: float = 300.0) -> tuple[str, object]:
        try:
            self.conn.send("go")
            return self._recv(timeout)
        except (RuntimeError, EOFError, OSError) as exc:
            return "error", str(exc)

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


def _map_tensors(obj, fn, torch):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn, torch) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map_tensors(v, fn, torch) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn, torch) for v in obj)
    return obj


def _to_device(obj, device, torch, non_blocking: bool = False):
    return _map_tensors(obj, lambda t: t.to(device, non_blocking=non_blocking), torch)


def _pinned(obj, torch):
    return _map_tensors(obj, lambda t: t.pin_memory(), torch)


def ceiling_main(conn, dataset_spec: str, step_spec: str | None, batch_size: int, settings: dict,
                 worker_start_method: str) -> None:
    """settings: replay_batches, consumer_window_s, loader_window_s, loader_warmup_s and
    main_window_s (each of the main process's two timings; default half loader_window_s).
    worker_start_method: the parent's default, for DataLoader workers here (a spawned child would
    default to 'spawn', which cannot re-import a dataset loaded from a file path)."""
    import multiprocessing as mp

    die_with_parent()
    mp.set_start_method(worker_start_method, force=True)
    try:
        info = _Ceiling(dataset_spec, step_spec, batch_size, settings)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
        return
    conn.send(("ready", info.facts))
    try:
        message = conn.recv()
    except (EOFError, OSError):
        return
    if message != "go":
        return
    try:
        conn.send(("result", info.measure()))
    except BaseException as exc:  # noqa: BLE001
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))


class _Ceiling:
    def __init__(self, dataset_spec, step_spec, batch_size, settings):
        t0 = time.perf_counter()
        import torch
        from torch.utils.data import DataLoader

        from autoloader.inputs.source import Source, resolve_dataset, resolve_step
        from autoloader.batches import samples_in

        self.torch = torch
        self.settings = settings
        self.batch_size = batch_size
        self.batch_size_of = samples_in
        self.dataset = resolve_dataset(Source.from_spec(dataset_spec).load(), dataset_spec)
        self.cores = len(os.sched_getaffinity(0))
        # The batches the consumer replays, moved to the device once. They are taken before the
        # step is built (so before this process touches CUDA) with a few workers: set-up time is
        # scarce and the batches are the same as num_workers=0 would give. Should workers fail
        # (a small /dev/shm, say), num_workers=0 takes them.
        host_batches = []
        for workers in (min(4, self.cores), 0):
            host_batches = []
            try:
                for batch in DataLoader(self.dataset, batch_size=batch_size, shuffle=True, num_workers=workers):
                    host_batches.append(batch)
                    if len(host_batches) >= settings["replay_batches"]:
                        break
                break
            except Exception:  # noqa: BLE001
                if workers == 0:
                    raise
        # Same rule as the workloads' own steps (workloads.common.device); asked only now, after
        # the workers above are gone.
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.step = resolve_step(Source.from_spec(step_spec).load(), step_spec) if step_spec else None
        self.batches = [_to_device(b, self.device, torch) for b in host_batches]
        # Two host batches stay for the main process's pin and copy (CUDA only).
        self.host_batches = host_batches[:2] if self.cuda else []
        del host_batches
        self.samples_per_pass = sum(samples_in(b) for b in self.batches)
        # Warm-up (cuDNN autotune, allocator, lazy init): two passes, synchronised.
        for _ in range(2):
            self._pass()
        self._sync()
        self.facts = {"gpu_name": torch.cuda.get_device_name(0) if self.cuda else None,
                      "device": str(self.device), "cores": self.cores, "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads(), "replay_batches": len(self.batches),
                      "setup_s": time.perf_counter() - t0}

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def _pass(self) -> None:
        if self.step is None:
            return
        for batch in self.batches:
            # The step moves the batch to the device itself; on device-resident tensors that
            # .to(device, non_blocking=True) is a no-op.
            self.step(batch)

    def measure(self) -> dict:
        from torch.utils.data import DataLoader

        torch = self.torch
        s = self.settings
        # (a) the consumer on device-resident batches, whole passes between synchronises.
        consumer = None
        passes = 0
        if self.step is not None:
            self._sync()
            t0 = time.perf_counter()
            while True:
                self._pass()
                self._sync()
                passes += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= s["consumer_window_s"]:
                    break
            consumer = passes * self.samples_per_pass / elapsed
            consumer_window = elapsed
        else:
            consumer_window = 0.0
        # (b) one worker: the loader alone at num_workers=0, one torch thread as in a worker
        # (DataLoader's worker loop calls torch.set_num_threads(1)).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            loader = DataLoader(self.dataset, batch_size=self.batch_size, num_workers=0, shuffle=True)
            it = iter(loader)

            def fetch():
                nonlocal it
                try:
                    return next(it)
                except StopIteration:
                    it = iter(loader)
                    return next(it)

            t0 = time.perf_counter()
            while True:  # short warm-up: at least one batch
                fetch()
                if time.perf_counter() - t0 >= s["loader_warmup_s"]:
                    break
            samples = 0
            t0 = time.perf_counter()
            while True:
                samples += self.batch_size_of(fetch())
                elapsed = time.perf_counter() - t0
                if elapsed >= s["loader_window_s"]:
                    break
            one_worker = samples / elapsed
            loader_window = elapsed
        finally:
            torch.set_num_threads(threads)
        cores_rate = self.cores * one_worker
        ceiling = min(consumer, cores_rate) if consumer is not None else cores_rate
        main = self._main_copy(s.get("main_window_s", s["loader_window_s"] / 2))
        bounds = {"consumer": consumer, "cores": cores_rate, "main": main["main_samples_per_s"]}
        return {"consumer_samples_per_s": consumer, "consumer_window_s": consumer_window,
                "consumer_passes": passes, "one_worker_samples_per_s": one_worker,
                "loader_window_s": loader_window, "loader_samples": samples, "cores": self.cores,
                "cores_samples_per_s": cores_rate, "ceiling_samples_per_s": ceiling,
                "bound": "consumer" if consumer is not None and consumer <= cores_rate else "cores",
                **main, "cap": min((k for k, v in bounds.items() if v is not None), key=lambda k: bounds[k])}

    def _main_copy(self, window_s: float) -> dict:
        """Seconds a batch to pin, and to copy pinned to the device, each alone; the rate the
        slower of them allows. None on the CPU (nothing is pinned or copied there)."""
        none = {"main_samples_per_s": None, "main_pin_s": None, "main_copy_s": None}
        if not self.cuda or not self.host_batches:
            return none
        try:
            return self._time_main_copy(window_s)
        except Exception as exc:  # noqa: BLE001 - a diagnostic beside the ceiling must not cost the ceiling
            return dict(none, main_error=f"{type(exc).__name__}: {exc}"[:300])

    def _time_main_copy(self, window_s: float) -> dict:
        torch = self.torch

        def per_batch(batches, fn) -> float:
            fn(batches[0])  # warm-up: allocator, first pinned pages
            self._sync()
            n = 0
            t0 = time.perf_counter()
            while True:
                for batch in batches:
                    fn(batch)
                    self._sync()
                    n += 1
                if time.perf_counter() - t0 >= window_s:
                    return (time.perf_counter() - t0) / n

        pin_s = per_batch(self.host_batches, lambda b: _pinned(b, torch))
        pinned = [_pinned(b, torch) for b in self.host_batches]
        copy_s = per_batch(pinned, lambda b: _to_device(b, self.device, torch, non_blocking=True))
        samples = sum(self.batch_size_of(b) for b in self.host_batches) / len(self.host_batches)
        return {"main_samples_per_s": samples / max(pin_s, copy_s), "main_pin_s": pin_s, "main_copy_s": copy_s}
