"""What every benchmark workload shares: the scale, the cache folder, the device and the steps'
common parts. See the package's docstring for the rules every workload keeps."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# Where the workloads' factories live, for the specs handed to `autoloader tune` and the runner.
SPEC_MODULE = "scripts.bench.workloads"


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    batch_size: int
    dataset_spec: str
    step_spec: str


def workload(name: str, description: str, batch_size: int) -> Workload:
    """A workload whose factories are ``<name>_dataset`` and ``<name>_step`` of the package."""
    return Workload(name, description, batch_size, f"{SPEC_MODULE}:{name}_dataset", f"{SPEC_MODULE}:{name}_step")


def bench_scale() -> float:
    """AUTOLOADER_BENCH_SCALE, read at call time so tests may set it late."""
    scale = float(os.environ.get("AUTOLOADER_BENCH_SCALE", "1.0"))
    if not scale > 0:
        raise ValueError(f"AUTOLOADER_BENCH_SCALE must be > 0, got {scale}")
    return scale


def bench_dir() -> Path:
    return Path(os.environ.get("AUTOLOADER_BENCH_DIR", "/tmp/autoloader-bench"))


def scaled(n: int, minimum: int) -> int:
    return max(minimum, int(round(n * bench_scale())))


def pick_device() -> torch.device:
    """cuda when torch sees a GPU, else the CPU (a fallback for the self-check and the smoke test)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast(device: torch.device):
    # bf16 autocast on the GPU; plain fp32 on the CPU fallback.
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                          enabled=device.type == "cuda")


def burn_cpu(seconds: float) -> int:
    """Spin for `seconds` of this thread's *CPU* time (not wall time).

    Stands in for decode/augment work of a fixed cost.  Counting CPU time means
    an oversubscribed worker (more workers than cores) is charged as real work
    would be, instead of finishing "for free" while descheduled.
    """
    end = time.thread_time() + seconds
    acc = 0
    while time.thread_time() < end:
        for k in range(64):
            acc += k * k
    return acc


def classifier_step(model: nn.Module, device: torch.device, *, lr: float,
                     channels_last: bool, cpu_side: int | None = None,
                     normalize_uint8: bool = False):
    """A standard SGD classification step over (images, labels) batches.

    `cpu_side` downsizes inputs on the CPU fallback only, so the self-check
    stays quick; the GPU path always runs at full resolution.
    """
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(device, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255

    def step(batch):
        x, y = batch
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        if normalize_uint8:  # cheap data: normalize on the device, not the loader
            x = (x.float() - mean) / std
        if device.type == "cpu" and cpu_side is not None and x.shape[-1] > cpu_side:
            x = F.interpolate(x, size=(cpu_side, cpu_side), mode="bilinear",
                              align_corners=False)
        x = x.contiguous(memory_format=fmt)
        with autocast(device):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def mlp_step(in_features: int, hidden: int):
    """A light SGD step over (features, labels) batches: a two-layer MLP on the bench's device,
    for workloads where the loader, not the step, is under test."""
    device = gpu_setup()
    model = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(batch):
        x, y = batch
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def gpu_setup() -> torch.device:
    device = pick_device()
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick kernels
    torch.manual_seed(0)
    return device


def reduce_step():
    """A deliberately cheap consumer for (x, y) batches: the transfer is the cost."""
    dev = gpu_setup()

    def step(batch):
        x, y = batch
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        return x.mean(dim=tuple(range(1, x.dim()))).sum() + y.float().sum()

    return step
