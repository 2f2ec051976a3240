"""What this machine offers: usable CPUs, memory, /dev/shm, GPUs (through NVML, never CUDA).

# NOTE [ No CUDA in the driver ]
# The driver process (CLI or API caller) starts trial processes and must stay able to do so
# safely, so it never initialises CUDA: GPUs are discovered through NVML, which does not create a
# CUDA context. Only the trial runner (see NOTE [ Trial processes ] in probe/trial.py) touches
# CUDA.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import platform
import shutil
from dataclasses import dataclass

import psutil

from . import cgroup

SHM_PATH = "/dev/shm"


def cpu_quota() -> float | None:
    """The CPUs' worth of time the cgroup quota allows this process (None: no quota)."""
    return cgroup.read().cpu_quota


def usable_cpus() -> int:
    """CPUs this process may really use: its affinity set, capped by the cgroup's cpuset and quota
    (a container limited to 4 CPUs' time on a 64-core host has 4) and ``os.process_cpu_count()``."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        count = os.cpu_count() or 1
    process_count = getattr(os, "process_cpu_count", None)   # Python 3.13+
    limits = cgroup.read()
    bounds = [count, process_count() if process_count else None, limits.cpuset,
              math.ceil(limits.cpu_quota) if limits.cpu_quota else None]
    return max(1, min(b for b in bounds if b))


def available_memory() -> int:
    return int(psutil.virtual_memory().available)


def shm_free() -> int | None:
    """Free bytes in /dev/shm, where worker processes put the tensors they send; None without it."""
    return _shm("free")


def shm_used() -> int | None:
    return _shm("used")


def _shm(field: str) -> int | None:
    try:
        return int(getattr(shutil.disk_usage(SHM_PATH), field))
    except OSError:
        return None


def gpu_names() -> tuple[str, ...]:
    """Names of the NVIDIA GPUs NVML sees (empty when NVML or a GPU is absent)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no library: simply no GPU
        return ()
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        return tuple(name.decode() if isinstance(name, bytes) else str(name) for name in names)
    except Exception:  # noqa: BLE001
        return ()
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class Hardware:
    """The facts a tuned config depends on; its fingerprint names the results folder.

    ``ranks``: how many ranks of one job share the node. Past 1, ``cpus`` is one rank's share and
    the fingerprint ends in ``-{ranks}rank``, so single-rank and N-rank results never mix."""

    cpus: int
    cpu_model: str
    memory_gib: int
    gpus: tuple[str, ...]
    ranks: int = 1

    @property
    def fingerprint(self) -> str:
        gpu = self.gpus[0] if self.gpus else "cpu"
        short = "".join(ch if ch.isalnum() else "-" for ch in gpu.lower()).strip("-")
        short = "-".join(part for part in short.split("-") if part and part != "nvidia")[:24]
        digest = hashlib.sha1(repr((self.cpu_model, self.cpus, self.memory_gib, self.gpus)).encode()).hexdigest()[:8]
        ranks = f"-{self.ranks}rank" if self.ranks > 1 else ""
        return f"{short or 'cpu'}-{len(self.gpus)}x-{self.cpus}cpu-{self.memory_gib}g-{digest}{ranks}"

    def to_dict(self) -> dict:
        data = {"cpus": self.cpus, "cpu_model": self.cpu_model, "memory_gib": self.memory_gib,
                "gpus": list(self.gpus), "fingerprint": self.fingerprint}
        return {**data, "ranks": self.ranks} if self.ranks > 1 else data


def detect() -> Hardware:
    return Hardware(usable_cpus(), _cpu_model(), round(psutil.virtual_memory().total / 2**30), gpu_names())


_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
          "g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40, "tib": 2**40}


def parse_size(text: str | int) -> int:
    """'8G', '512MiB', '1.5gb' or a byte count -> bytes (binary units)."""
    from ..errors import usage

    if isinstance(text, int):
        value = text
    else:
        import re

        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _UNITS:
            raise usage("a memory size is a number with an optional unit K, M, G or T", text,
                        "write e.g. --max-memory 16G")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise usage("a memory size must be positive", text, "write e.g. --max-memory 16G")
    return value
