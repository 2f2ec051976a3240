"""``python -m scripts.bench.workloads``: a quick self-check of every workload at the current
scale (AUTOLOADER_BENCH_SCALE): build, pickle, three batches through two workers and the step,
and a worker-free pass over 20 samples."""

from __future__ import annotations

import pickle
import time

from torch.utils.data import DataLoader

from autoloader.inputs.source import load_spec
from scripts.bench.workloads import WORKLOADS
from scripts.bench.workloads.common import bench_dir, bench_scale, pick_device
from scripts.bench.workloads.pysamples import HeavyTailDataset


def self_check() -> None:
    print(f"scale={bench_scale()} dir={bench_dir()} device={pick_device()}")
    for w in WORKLOADS.values():
        t0 = time.perf_counter()
        ds = load_spec(w.dataset_spec)()
        t_build = time.perf_counter() - t0
        pickle.loads(pickle.dumps(ds))  # workers under spawn need this
        step = load_spec(w.step_spec)()

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
    self_check()
