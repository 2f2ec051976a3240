"""Workloads where the step sets the pace, new to the tuner (no rule was made on them):

* stepbound: ResNet-50 built from its constructor (no weights downloaded), a real backward step
  in bf16 at 176 px, on cheap uint8 images: a random crop of a 200 px image from an in-memory pool
  and a flip, per sample in the worker; normalised on the device. The GPU sets the pace from a few
  workers on, and the workers' supply must keep a short queue from running dry.
* launchbound: samples of about 1 ms of CPU (the log spectrum of a 32k-sample signal, pooled to
  256 features) beside a step launch-bound by its many small kernels (a 48-block residual MLP of
  width 256, forward, backward and AdamW): the main process's thread is busy launching all the
  time, beside the workers.

On the CPU (the fallback for the self-check and the smoke test only) stepbound trains a small
CNN on inputs downsized to 32 px and launchbound has 8 blocks, so that a quick run stays quick.
"""

from __future__ import annotations

import numpy as np
import torch
import torchvision
from torch import nn
from torch.utils.data import Dataset

from scripts.bench.workloads.common import classifier_step, gpu_setup, scaled

_POOL_SIDE = 200
_CROP = 176


class CropPool(Dataset):
    """uint8 3x176x176 random crops (and flips) of an in-memory pool of 200 px images: a few tens
    of microseconds a sample, so the step, not the loader, sets the pace."""

    def __init__(self, length: int, pool: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        self.pool = torch.from_numpy(rng.integers(0, 256, size=(pool, 3, _POOL_SIDE, _POOL_SIDE), dtype=np.uint8))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        rng = np.random.default_rng(index)
        top, left = (int(v) for v in rng.integers(0, _POOL_SIDE - _CROP + 1, size=2))
        img = self.pool[index % len(self.pool), :, top:top + _CROP, left:left + _CROP]
        if rng.random() < 0.5:
            img = img.flip(-1)
        return img.contiguous(), index % 1000


def stepbound_dataset() -> Dataset:
    return CropPool(length=scaled(50_000, 256), pool=scaled(512, 16))


def stepbound_step():
    device = gpu_setup()
    if device.type == "cuda":
        model = torchvision.models.resnet50(weights=None, num_classes=1000)
    else:  # the CPU fallback, for the self-check and the smoke test only
        model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1000))
    return classifier_step(model, device, lr=0.05, channels_last=True, cpu_side=32, normalize_uint8=True)


_SIGNAL = 32_768
_FEATURES = 256


class PooledSpectra(Dataset):
    """The log magnitude spectrum of a windowed signal, pooled to 256 features: about 1 ms of CPU."""

    def __init__(self, length: int, pool: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        self.signals = rng.standard_normal((pool, _SIGNAL)).astype(np.float32)
        self.window = np.hanning(_SIGNAL).astype(np.float32)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        x = self.signals[index % len(self.signals)] * self.window
        spectrum = np.abs(np.fft.rfft(x))[:_SIGNAL // 2]
        features = np.log1p(spectrum).reshape(_FEATURES, -1).mean(axis=1).astype(np.float32)
        return torch.from_numpy(features), index % 10


class _Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


def launchbound_dataset() -> Dataset:
    return PooledSpectra(length=scaled(80_000, 512), pool=scaled(256, 16))


def launchbound_step():
    device = gpu_setup()
    blocks = 48 if device.type == "cuda" else 8   # the CPU fallback: the smoke test stays quick
    model = nn.Sequential(*[_Block(_FEATURES) for _ in range(blocks)], nn.Linear(_FEATURES, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(batch):
        x, y = batch
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step
