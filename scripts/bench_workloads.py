"""Benchmark workloads for the DataLoader auto-tuner.

Six workloads, each stressing a different input-pipeline bottleneck, built from
real parts (PIL JPEG decode, torchvision transforms and models).  Every workload
names two zero-argument, module-level callables in this file:

* ``<name>_dataset()`` returns a picklable map-style ``Dataset``;
* ``<name>_step()`` builds the model once and returns ``step(batch)``, which
  moves the batch to ``cuda`` (``cpu`` as a fallback) with ``non_blocking=True``
  and launches the training step.  It never synchronizes: the harness times
  with CUDA events.

All data is generated deterministically, on local disk (``AUTOLOADER_BENCH_DIR``,
default ``/tmp/autoloader-bench``) or in memory; nothing is downloaded.
``AUTOLOADER_BENCH_SCALE`` (default 1.0) scales dataset lengths and the amount of
generated data (not per-sample shapes or costs), so that tests can run tiny.

Run this file directly for a quick self-check at the current scale.
"""

from __future__ import annotations

import fcntl
import io
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import Dataset

_SPEC_FILE = "scripts/bench_workloads.py"


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    batch_size: int
    dataset_spec: str
    step_spec: str


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def bench_scale() -> float:
    """AUTOLOADER_BENCH_SCALE, read at call time so tests may set it late."""
    scale = float(os.environ.get("AUTOLOADER_BENCH_SCALE", "1.0"))
    if not scale > 0:
        raise ValueError(f"AUTOLOADER_BENCH_SCALE must be > 0, got {scale}")
    return scale


def bench_dir() -> Path:
    return Path(os.environ.get("AUTOLOADER_BENCH_DIR", "/tmp/autoloader-bench"))


def _scaled(n: int, minimum: int) -> int:
    return max(minimum, int(round(n * bench_scale())))


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _autocast(device: torch.device):
    # bf16 autocast on the GPU; plain fp32 on the CPU fallback.
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                          enabled=device.type == "cuda")


def _burn_cpu(seconds: float) -> int:
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


def _classifier_step(model: nn.Module, device: torch.device, *, lr: float,
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
        with _autocast(device):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def _gpu_setup() -> torch.device:
    device = _device()
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick kernels
    torch.manual_seed(0)
    return device


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
    n_files = _scaled(_JPEG_FILES, 64)
    root = _ensure_jpegs(n_files)
    return JpegDataset(str(root), n_files, length=_scaled(160_000, 256))


def jpeg_step():
    device = _gpu_setup()
    model = torchvision.models.resnet18(weights=None, num_classes=100)
    return _classifier_step(model, device, lr=0.02, channels_last=True, cpu_side=64)


# --------------------------------------------------------------------------
# 2. small: Python per-sample work + inter-process transfer bound
# --------------------------------------------------------------------------

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_VOCAB = 4096
_SEQ = 48


class SmallDataset(Dataset):
    """Builds a tiny tokenized "record" per sample with plain Python loops.

    Each sample is a dict of six small tensors plus a Python int and str, so a
    collated batch is many tiny storages: per-batch IPC (fd passing, pickling
    of the string list) and per-sample Python dominate, not bytes moved.
    """

    def __init__(self, length: int, seed: int = 0):
        self.length = length
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        rnd = random.Random(self.seed * 1_000_003 + index)
        n_words = rnd.randint(24, _SEQ)
        words = ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(2, 9)))
                 for _ in range(n_words)]
        tokens = [0] * _SEQ
        positions = [0] * _SEQ
        for j, w in enumerate(words):
            h = 2166136261  # FNV-1a: deterministic across processes, unlike hash()
            for ch in w:
                h = ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
            tokens[j] = 1 + h % (_VOCAB - 1)
            positions[j] = j + 1
        lengths = [len(w) for w in words]
        vowels = sum(w.count(v) for w in words for v in "aeiou")
        feats = [n_words / _SEQ, sum(lengths) / (9 * n_words), vowels / max(1, sum(lengths)),
                 max(lengths) / 9, min(lengths) / 9, (index % 97) / 97.0,
                 rnd.random(), rnd.random()]
        return {
            "tokens": torch.tensor(tokens, dtype=torch.int64),
            "positions": torch.tensor(positions, dtype=torch.int64),
            "mask": torch.tensor([t != 0 for t in tokens], dtype=torch.bool),
            "lengths": torch.tensor(lengths + [0] * (_SEQ - n_words), dtype=torch.int16),
            "feats": torch.tensor(feats, dtype=torch.float32),
            "weight": torch.tensor(1.0 + (index % 3) * 0.5),
            "label": tokens[0] % 10,
            "key": f"rec-{index:08d}",
        }


class _TinyTextModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(_VOCAB, 64)
        self.pos = nn.Embedding(_SEQ + 1, 64)
        self.mlp = nn.Sequential(nn.Linear(64 + 8, 128), nn.GELU(), nn.Linear(128, 10))

    def forward(self, b):
        m = b["mask"].unsqueeze(-1)
        h = (self.emb(b["tokens"]) + self.pos(b["positions"])) * m
        h = h.sum(1) / m.sum(1).clamp(min=1)
        return self.mlp(torch.cat([h, b["feats"]], dim=1))


def small_dataset() -> Dataset:
    return SmallDataset(length=_scaled(600_000, 256))


def small_step():
    device = _gpu_setup()
    model = _TinyTextModel().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(batch):
        # "key" (list of str) stays on the host, as metadata usually does.
        b = {k: v.to(device, non_blocking=True) for k, v in batch.items()
             if isinstance(v, torch.Tensor)}
        with _autocast(device):
            logits = model(b)
            loss = (F.cross_entropy(logits, b["label"], reduction="none") * b["weight"]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


# --------------------------------------------------------------------------
# 3. large: host copies / pinning / H2D bound, memory hungry
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
    return LargeDataset(length=_scaled(24_000, 128), pool=_scaled(32, 4))


def large_step():
    device = _gpu_setup()

    def step(batch):
        x, y = batch
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        # Deliberately cheap consumer: the transfer is the cost.
        return x.mean(dim=(1, 2, 3)).sum() + y.float().sum()

    return step


# --------------------------------------------------------------------------
# 4. startup: costly per-process setup, short epochs
# --------------------------------------------------------------------------

_STARTUP_SECONDS = 1.5
_STARTUP_SAMPLE_CPU_S = 0.00075


class StartupDataset(Dataset):
    """Cheap samples behind a ~1.5 s lazy setup paid once per process.

    Mimics datasets that open an index / LMDB env / tokenizer lazily: the
    handle is per-process (rebuilt when the pid changes, i.e. in each worker),
    so non-persistent workers pay it again every epoch.  The setup builds a real
    lookup table, then sleeps for the rest (I/O-like wait).
    """

    def __init__(self, length: int, setup_seconds: float, seed: int = 0):
        self.length = length
        self.setup_seconds = setup_seconds
        self.seed = seed
        self._pid = None
        self._table = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_pid"] = None
        state["_table"] = None  # never ship the per-process handle
        return state

    def _ensure_setup(self) -> None:
        if self._pid == os.getpid():
            return
        t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        table = rng.standard_normal((4096, 64), dtype=np.float32)
        table /= np.linalg.norm(table, axis=1, keepdims=True)
        time.sleep(max(0.0, self.setup_seconds - (time.perf_counter() - t0)))
        self._table = table
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self._ensure_setup()
        t0 = time.thread_time()
        rows = [(index * 2654435761 + k * 40503) % len(self._table) for k in range(8)]
        x = torch.from_numpy(self._table[rows].sum(axis=0))
        _burn_cpu(_STARTUP_SAMPLE_CPU_S - (time.thread_time() - t0))
        return x, index % 10


def startup_dataset() -> Dataset:
    # Setup time scales with the (short) epoch so their ratio is kept at any scale.
    return StartupDataset(length=_scaled(1500, 16),
                          setup_seconds=_STARTUP_SECONDS * min(1.0, bench_scale()))


def startup_step():
    device = _gpu_setup()
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
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


# --------------------------------------------------------------------------
# 5. heavytail: heavy-tailed per-sample cost, prefetch depth decides
# --------------------------------------------------------------------------


class HeavyTailDataset(Dataset):
    """Most samples cost ~1 ms of CPU, ~2% cost 30-50 ms (fixed per index).

    In-order delivery means one slow batch stalls the consumer unless other
    workers have enough prefetched batches queued: prefetch depth decides.
    """

    def __init__(self, length: int, seed: int = 0):
        self.length = length
        rng = np.random.default_rng(seed)
        costs = rng.uniform(0.8e-3, 1.2e-3, size=length)
        heavy = rng.random(length) < 0.02
        costs[heavy] = rng.uniform(30e-3, 50e-3, size=int(heavy.sum()))
        self.costs = costs
        self.mean_cost_s = float(costs.mean())

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        t0 = time.thread_time()
        g = torch.Generator().manual_seed(index)
        x = torch.rand(3, 64, 64, generator=g)
        _burn_cpu(float(self.costs[index]) - (time.thread_time() - t0))
        return x, index % 10


def heavytail_dataset() -> Dataset:
    return HeavyTailDataset(length=_scaled(60_000, 256))


def heavytail_step():
    device = _gpu_setup()

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    model = nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    return _classifier_step(model, device, lr=0.05, channels_last=True)


# --------------------------------------------------------------------------
# 6. gpubound: GPU-bound training step with cheap data
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
    return GpuBoundDataset(length=_scaled(40_000, 256), pool=_scaled(256, 16))


def gpubound_step():
    device = _gpu_setup()
    if device.type == "cuda":
        model = torchvision.models.resnet50(weights=None, num_classes=100)
    else:  # CPU fallback for the self-check only
        model = torchvision.models.resnet18(weights=None, num_classes=100)
    return _classifier_step(model, device, lr=0.02, channels_last=True, cpu_side=64,
                            normalize_uint8=True)


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


def _workload(name: str, description: str, batch_size: int) -> Workload:
    return Workload(name, description, batch_size,
                    f"{_SPEC_FILE}:{name}_dataset", f"{_SPEC_FILE}:{name}_step")


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    _workload("jpeg", "JPEG decode and augmentation on the CPU feeding ResNet-18 at 160 px; "
              "bound by CPU decode throughput, so it wants many workers.", 256),
    _workload("small", "Many tiny dict samples built by Python loops; bound by per-sample "
              "Python and per-batch inter-process transfer, not bytes.", 64),
    _workload("large", "3 MiB float32 samples with a trivial GPU consumer; bound by host "
              "copies, pinning and H2D, and memory-hungry with deep prefetch.", 64),
    _workload("startup", "Short epochs of cheap samples behind a ~1.5 s per-process lazy "
              "setup; persistent_workers decides.", 32),
    _workload("heavytail", "Mostly ~1 ms samples with 2% at 30-50 ms; in-order delivery "
              "stalls on slow batches unless prefetch is deep enough.", 32),
    _workload("gpubound", "ResNet-50 at 224 px in bf16 with cheap in-memory data; GPU "
              "bound, so few workers suffice and more only cost CPU and RAM.", 128),
)}


# --------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------


def _resolve(spec: str):
    fn_name = spec.split(":", 1)[1]
    return globals()[fn_name]


def _self_check() -> None:
    import pickle

    from torch.utils.data import DataLoader

    print(f"scale={bench_scale()} dir={bench_dir()} device={_device()}")
    for w in WORKLOADS.values():
        t0 = time.perf_counter()
        ds = _resolve(w.dataset_spec)()
        t_build = time.perf_counter() - t0
        pickle.loads(pickle.dumps(ds))  # workers under spawn need this
        step = _resolve(w.step_spec)()

        t0 = time.perf_counter()
        loader = DataLoader(ds, batch_size=min(w.batch_size, 8), num_workers=2)
        for i, batch in enumerate(loader):
            step(batch)
            if i == 2:
                break
        del loader
        t_loader = time.perf_counter() - t0

        # One worker-free pass over 20 samples spread across the dataset; the
        # first access (which pays any lazy setup) is timed separately.
        t0 = time.perf_counter()
        ds[0]
        t_first = time.perf_counter() - t0
        idx = [(k * len(ds)) // 20 for k in range(20)]
        t0 = time.perf_counter()
        for k in idx:
            ds[k]
        per_sample = (time.perf_counter() - t0) / 20
        extra = ""
        if isinstance(ds, HeavyTailDataset):
            extra = f" (expected mean {ds.mean_cost_s * 1e3:.2f} ms)"
        print(f"{w.name:10s} len={len(ds):7d} bs={w.batch_size:4d} build={t_build:6.2f}s "
              f"3-batch loop={t_loader:6.2f}s first={t_first * 1e3:8.2f}ms "
              f"per-sample={per_sample * 1e3:7.3f}ms{extra}")


if __name__ == "__main__":
    _self_check()
