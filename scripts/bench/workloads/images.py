"""Workloads of image-shaped tensors: jpeg (CPU decode), large (host copies of 3 MiB samples),
gpubound (a GPU-bound step) and hugefloat (192 MiB batches made for nothing: the main process's
share is the cap)."""

from __future__ import annotations

import fcntl
import io
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import Dataset

from scripts.bench.workloads.common import (
    bench_dir,
    bench_scale,
    classifier_step,
    gpu_setup,
    reduce_step,
    scaled,
)

# --------------------------------------------------------------------------
# 1. jpeg: CPU decode + augmentation bound
# --------------------------------------------------------------------------

_JPEG_SIDE = 320
_JPEG_FILES = 2000
_JPEG_VERSION = 1  # bump if the generator changes, so stale caches are not reused


def _make_jpeg(i: int) -> bytes:
    """Deterministic multi-octave smooth noise + grain, ~30-56 KB at q=90.

    Pure white noise would make unrealistically large files and pure smooth
    noise unrealistically small ones; octaves plus grain land in between.
    """
    rng = np.random.default_rng(1_000_003 + i)
    side = _JPEG_SIDE
    grain = rng.uniform(5.5, 14.0)
    fine = rng.uniform(20.0, 60.0)
    img = np.zeros((side, side, 3), np.float32)
    for cells, amp in ((4, 110.0), (16, 60.0), (64, 30.0), (160, fine)):
        small = (rng.random((cells, cells, 3), dtype=np.float32) * 255).astype(np.uint8)
        up = Image.fromarray(small).resize((side, side), Image.Resampling.BICUBIC)
        img += (np.asarray(up, np.float32) / 255.0 - 0.5) * amp
    img += rng.normal(0.0, grain, size=img.shape).astype(np.float32)
    img = np.clip(img + 128.0, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _ensure_jpegs(n: int) -> Path:
    """Generate n JPEGs once into the cache dir.

    Idempotent and safe under concurrency: an flock serializes generators, each
    file is written to a temp name and os.replace()d, and a marker file written
    last says the directory is complete.
    """
    root = bench_dir()
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"jpeg-v{_JPEG_VERSION}-{n}"
    marker = out / ".complete"
    if marker.exists():
        return out
    with open(root / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another process finished while we waited
            return out
        out.mkdir(exist_ok=True)

        def write(i: int) -> None:
            path = out / f"img_{i:05d}.jpg"
            if path.exists():  # left by an interrupted run; files are atomic
                return
            tmp = out / f".tmp-{os.getpid()}-{i:05d}.jpg"
            tmp.write_bytes(_make_jpeg(i))
            os.replace(tmp, path)

        # PIL and numpy release the GIL for the heavy parts; threads avoid
        # pickling this module into subprocesses.
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
            list(pool.map(write, range(n)))
        tmp = out / f".tmp-{os.getpid()}-complete"
        tmp.write_text(f"{n}\n")
        os.replace(tmp, marker)
    return out


class JpegDataset(Dataset):
    """Reads and decodes JPEGs from disk, then augments them (ImageNet-style)."""

    def __init__(self, root: str, n_files: int, length: int, crop: int = 160):
        self.root = root
        self.n_files = n_files
        self.length = length
        self.transform = T.Compose([
            T.RandomResizedCrop(crop, antialias=True),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        f = index % self.n_files  # the epoch cycles over the files (page-cached)
        with open(os.path.join(self.root, f"img_{f:05d}.jpg"), "rb") as fh:
            img = Image.open(fh).convert("RGB")
        return self.transform(img), f % 100


def jpeg_dataset() -> Dataset:
    n_files = scaled(_JPEG_FILES, 64)
    root = _ensure_jpegs(n_files)
    return JpegDataset(str(root), n_files, length=scaled(160_000, 256))


def jpeg_step():
    device = gpu_setup()
    model = torchvision.models.resnet18(weights=None, num_classes=100)
    return classifier_step(model, device, lr=0.02, channels_last=True, cpu_side=64)


# --------------------------------------------------------------------------
# 2. large: host copies / pinning / H2D bound, memory hungry
# --------------------------------------------------------------------------

_LARGE_SIDE = 512


class LargeDataset(Dataset):
    """3x512x512 float32 samples (3 MiB each) from an in-memory uint8 pool.

    The per-sample uint8->float conversion is cheap compute but writes 3 MiB;
    collate, shared-memory transfer, pinning and H2D then copy every byte again.
    One batch of 64 is 192 MiB, so workers x prefetch_factor x batch can take
    tens of GiB of /dev/shm and host RAM.
    """

    def __init__(self, length: int, pool: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        # Built in the parent: fork shares it copy-on-write (it is never written).
        self.pool = rng.integers(0, 256, size=(pool, 3, _LARGE_SIDE, _LARGE_SIDE),
                                 dtype=np.uint8)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        img = torch.from_numpy(self.pool[index % len(self.pool)])
        return img.float().div_(255.0), index % 10


def large_dataset() -> Dataset:
    return LargeDataset(length=scaled(24_000, 128), pool=scaled(32, 4))


def large_step():
    device = gpu_setup()

    def step(batch):
        x, y = batch
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        # Deliberately cheap consumer: the transfer is the cost.
        return x.mean(dim=(1, 2, 3)).sum() + y.float().sum()

    return step


# --------------------------------------------------------------------------
# 3. gpubound: GPU-bound training step with cheap data
# --------------------------------------------------------------------------


class GpuBoundDataset(Dataset):
    """Cheap samples: uint8 3x224x224 views of an in-memory random pool."""

    def __init__(self, length: int, pool: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        self.pool = rng.integers(0, 256, size=(pool, 3, 224, 224), dtype=np.uint8)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.from_numpy(self.pool[index % len(self.pool)]), index % 100


def gpubound_dataset() -> Dataset:
    return GpuBoundDataset(length=scaled(40_000, 256), pool=scaled(256, 16))


def gpubound_step():
    device = gpu_setup()
    if device.type == "cuda":
        model = torchvision.models.resnet50(weights=None, num_classes=100)
    else:  # CPU fallback for the self-check only
        model = torchvision.models.resnet18(weights=None, num_classes=100)
    return classifier_step(model, device, lr=0.02, channels_last=True, cpu_side=64,
                            normalize_uint8=True)


# --------------------------------------------------------------------------
# 4. hugefloat: 192 MiB batches, nothing to compute; the main process's share is the cap
# --------------------------------------------------------------------------

_HUGE_SIDE = 512


class HugeFloatDataset(Dataset):
    """3x512x512 float32 samples (3 MiB each), views of a small in-memory float pool.

    Nothing is computed per sample (large converts uint8 to float per sample; this does not):
    a worker only collates, writing 64 x 3 MiB = 192 MiB into shared memory. The main process
    then receives each batch, pins it (a copy) and copies it to the device, one batch at a time,
    so more workers stop helping once the main process is busy all the time. The step is cheap.
    Below scale 1 the side shrinks with the square root of the scale, so that bytes a batch
    scale too and the CPU smoke test stays small; at 1 and above it is 512.
    """

    def __init__(self, length: int, pool: int, side: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        # Built in the parent: fork shares it copy-on-write (it is never written).
        self.pool = rng.random((pool, 3, side, side), dtype=np.float32)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.from_numpy(self.pool[index % len(self.pool)]), index % 10


def hugefloat_side(scale: float) -> int:
    """512 at scale 1 and above; below, the side that scales a sample's bytes with the scale."""
    return _HUGE_SIDE if scale >= 1 else max(16, int(round(_HUGE_SIDE * math.sqrt(scale))))


def hugefloat_dataset() -> Dataset:
    return HugeFloatDataset(length=scaled(16_000, 128), pool=scaled(16, 4), side=hugefloat_side(bench_scale()))


def hugefloat_step():
    return reduce_step()


# --------------------------------------------------------------------------
# The uint8 what-if (scripts/bench/whatif.py): hugefloat's and large's samples as uint8,
# normalised on the device by the step, as the report's what-if tells a user to do.
# --------------------------------------------------------------------------


class Uint8Pool(Dataset):
    """The same shape of sample as hugefloat's or large's, held and served as uint8 (a quarter of
    the bytes): nothing computed per sample."""

    def __init__(self, length: int, pool: int, side: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        self.pool = rng.integers(0, 256, size=(pool, 3, side, side), dtype=np.uint8)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.from_numpy(self.pool[index % len(self.pool)]), index % 10


def hugefloat8_dataset() -> Dataset:
    return Uint8Pool(length=scaled(16_000, 128), pool=scaled(16, 4), side=hugefloat_side(bench_scale()))


def large8_dataset() -> Dataset:
    return Uint8Pool(length=scaled(24_000, 128), pool=scaled(32, 4), side=_LARGE_SIDE)


def uint8_reduce_step():
    """reduce_step's consumer after the normalisation the float datasets did on the CPU, on the device."""
    dev = gpu_setup()

    def step(batch):
        x, y = batch
        x = x.to(dev, non_blocking=True).float().div_(255.0)
        y = y.to(dev, non_blocking=True)
        return x.mean(dim=tuple(range(1, x.dim()))).sum() + y.float().sum()

    return step


def hugefloat8_step():
    return uint8_reduce_step()


def large8_step():
    return uint8_reduce_step()
