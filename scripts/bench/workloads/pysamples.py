"""Workloads of per-sample Python work: small (tiny dict samples, IPC bound), startup (a costly
per-process set-up), heavytail (a heavy-tailed sample cost) and pyobjects (a corpus of Python
objects that forked workers copy as they read it)."""

from __future__ import annotations

import gc
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

from scripts.bench.workloads.common import (
    autocast,
    bench_scale,
    burn_cpu,
    classifier_step,
    gpu_setup,
    mlp_step,
    scaled,
)

# --------------------------------------------------------------------------
# 1. small: Python per-sample work + inter-process transfer bound
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
    return SmallDataset(length=scaled(600_000, 256))


def small_step():
    device = gpu_setup()
    model = _TinyTextModel().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(batch):
        # "key" (list of str) stays on the host, as metadata usually does.
        b = {k: v.to(device, non_blocking=True) for k, v in batch.items()
             if isinstance(v, torch.Tensor)}
        with autocast(device):
            logits = model(b)
            loss = (F.cross_entropy(logits, b["label"], reduction="none") * b["weight"]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


# --------------------------------------------------------------------------
# 2. startup: costly per-process setup, short epochs
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
        burn_cpu(_STARTUP_SAMPLE_CPU_S - (time.thread_time() - t0))
        return x, index % 10


def startup_dataset() -> Dataset:
    # Setup time scales with the (short) epoch so their ratio is kept at any scale.
    return StartupDataset(length=scaled(1500, 16),
                          setup_seconds=_STARTUP_SECONDS * min(1.0, bench_scale()))


def startup_step():
    return mlp_step(64, 256)


# --------------------------------------------------------------------------
# 3. heavytail: heavy-tailed per-sample cost, prefetch depth decides
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
        burn_cpu(float(self.costs[index]) - (time.thread_time() - t0))
        return x, index % 10


def heavytail_dataset() -> Dataset:
    return HeavyTailDataset(length=scaled(60_000, 256))


def heavytail_step():
    device = gpu_setup()

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    model = nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    return classifier_step(model, device, lr=0.05, channels_last=True)


# --------------------------------------------------------------------------
# 4. pyobjects: a corpus of Python objects; copy on read makes memory grow with workers
# --------------------------------------------------------------------------

_PYOBJ_WORDS = 2048
_PYOBJ_READS = 64   # records a sample reads


class PyObjectsDataset(Dataset):
    """Samples made from a corpus of Python objects built in ``__init__``.

    One dict per record, holding an int, a str of 40-89 characters, a list of 16 ints (all above
    256, so objects of their own) and a float: about 1 KB of objects a record, ~300 MB for the
    300,000 records at scale 1. Each sample reads 64 records spread over the corpus and returns
    8 features. Reading a Python object writes its reference count, so a forked worker copies
    every page it reads (and the cyclic collector's full passes touch every container): each
    worker's private memory grows towards the whole corpus within its first batches, and peak
    memory grows with the number of workers. The step is light.
    """

    def __init__(self, length: int, records: int, seed: int = 0):
        self.length = length
        rnd = random.Random(seed)
        words = ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(3, 10))) for _ in range(_PYOBJ_WORDS)]
        phrases = [" ".join(words[(j * 7 + k * 13) % _PYOBJ_WORDS] for k in range(12)) for j in range(4096)]
        # Each record's objects are its own (a slice is a new str, range's ints above 256 are new
        # ints). The collector is held off while they are made: it would walk the growing corpus
        # again and again (0.6 s instead of several seconds for 300,000 records).
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.records = [{"id": i, "text": phrases[i % 4096][:40 + i % 50],
                             "tokens": list(range(300 + i % 5000, 316 + i % 5000)), "score": (i % 1000) / 1000.0}
                            for i in range(records)]
        finally:
            if collecting:
                gc.enable()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        n = len(self.records)
        chars = tokens = score = longest = 0.0
        for k in range(_PYOBJ_READS):
            record = self.records[(index * 2654435761 + k * 40503) % n]
            text = record["text"]
            chars += len(text)
            longest = max(longest, len(text))
            tokens += sum(record["tokens"])
            score += record["score"]
        x = torch.tensor([chars / _PYOBJ_READS / 100, tokens / _PYOBJ_READS / 50_000, score / _PYOBJ_READS,
                          longest / 100, (index % 97) / 97, (index % 13) / 13, 1.0, 0.0], dtype=torch.float32)
        return x, index % 10


def pyobjects_dataset() -> Dataset:
    return PyObjectsDataset(length=scaled(200_000, 512), records=scaled(300_000, 2_000))


def pyobjects_step():
    return mlp_step(8, 64)
