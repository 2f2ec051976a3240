"""A trial's GPU besides the step, in the trial process alone (NOTE [ No CUDA in the driver ] in
inputs/hardware.py): batches copied to it, its cached memory returned, its utilisation from NVML.

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

from typing import Any

from ..batches import map_tensors


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
