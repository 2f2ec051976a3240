"""Where the uint8 what-if's loop collate goes wrong: the loop's own next() against the profile's timings.

    python3 -m scripts.bench.uint8_loop --out OUT/uint8_loop.json           # the GPU machine
    python -m scripts.bench.uint8_loop --scale 0.02 --device cpu --out /tmp/u.json   # CPU smoke

For hugefloat (float32 samples) and hugefloat8 (the same shape in uint8) at batch 64, in one
process: (1) a DataLoader without workers, pinned, as the pick runs it: each batch's next() and
step timed apart (the step synchronised), after a warm-up; (2) the batch's collate timed as the
profile times it (a lone call, then alternating float/uint8 pairs, each side's least kept), with
and without pinning the collated batch between calls, as the loop does; (3) the profile's own
uint8 stage (probe/uint8.py) run several times. Records the per-call times; prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def _times(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--scale", type=float, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args(argv)
    if args.scale is not None:
        os.environ["AUTOLOADER_BENCH_SCALE"] = str(args.scale)
    import torch
    from torch.utils.data import DataLoader, default_collate

    from autoloader.probe.uint8 import uint8_cost
    from scripts.bench.workloads import hugefloat8_dataset, hugefloat_dataset

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dev = torch.device(device)
    record: dict = {"device": device, "threads": torch.get_num_threads(), "batch_size": 64}
    try:
        record["thp"] = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    except OSError:
        record["thp"] = None

    def step(batch):
        x, y = batch
        x = x.to(dev, non_blocking=True)
        if x.dtype == torch.uint8:
            x = x.float().div_(255.0)
        return x.mean(dim=tuple(range(1, x.dim()))).sum() + y.to(dev).float().sum()

    datasets = {"float32": hugefloat_dataset(), "uint8": hugefloat8_dataset()}
    # (1) the loop as the pick runs it
    for name, ds in datasets.items():
        loader = DataLoader(ds, batch_size=64, num_workers=0, pin_memory=cuda, shuffle=False)
        it = iter(loader)
        nexts, steps = [], []
        for i in range(args.batches + 3):
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:   # a small scale's epoch is short: the next one's first batch
                it = iter(loader)
                t0 = time.perf_counter()
                batch = next(it)
            t1 = time.perf_counter()
            step(batch)
            sync()
            t2 = time.perf_counter()
            if i >= 3:
                nexts.append(t1 - t0)
                steps.append(t2 - t1)
        record[f"loop_{name}"] = {"next_s": nexts, "step_s": steps}
        del it, loader, batch

    # (2) collate as the profile times it
    samples = {name: [ds[i] for i in range(64)] for name, ds in datasets.items()}
    lone = {name: _times(lambda s=s: default_collate(s), 1)[0] for name, s in samples.items()}
    pairs: dict[str, list[float]] = {"float32": [], "uint8": []}
    pinned_pairs: dict[str, list[float]] = {"float32": [], "uint8": []}
    for r in range(8):
        order = ("float32", "uint8") if r % 2 == 0 else ("uint8", "float32")
        for name in order:
            pairs[name] += _times(lambda: default_collate(samples[name]), 1)
        for name in order:
            t0 = time.perf_counter()
            b = default_collate(samples[name])
            t1 = time.perf_counter()
            if cuda:
                b = [t.pin_memory() for t in b]
            pinned_pairs[name].append(t1 - t0)
            del b
    record["collate_lone_s"] = lone
    record["collate_pairs_s"] = pairs
    record["collate_then_pin_s"] = pinned_pairs

    # (3) the profile's uint8 stage, several times
    batch = default_collate(samples["float32"])
    stages = []
    for _ in range(5):
        u = uint8_cost(samples["float32"], batch, 64, default_collate, device, sync,
                       lambda b: sum(t.numel() * t.element_size() for t in b if hasattr(t, "numel")))
        stages.append(None if u is None else {"loop_collate_s": u.loop_collate_s, "rounds": u.rounds,
                                              "pin_s": u.pin_s, "h2d_pinned_s": u.h2d_pinned_s})
    record["uint8_stage"] = stages

    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    lines = [f"device {device}, {record['threads']} threads, THP {record['thp']}"]
    for name in datasets:
        loop = record[f"loop_{name}"]
        lines.append(f"loop {name}: next() {med(loop['next_s']):.1f} ms (min {min(loop['next_s']) * 1e3:.1f}), "
                     f"step {med(loop['step_s']):.1f} ms")
        lines.append(f"collate {name}: lone {lone[name] * 1e3:.1f} ms; pairs median {med(pairs[name]):.1f} "
                     f"min {min(pairs[name]) * 1e3:.1f}; with a pin between: median {med(pinned_pairs[name]):.1f} "
                     f"min {min(pinned_pairs[name]) * 1e3:.1f}")
    for i, s in enumerate(stages):
        if s:
            lines.append(f"uint8 stage {i}: loop collate {s['loop_collate_s'][0] * 1e3:.1f} / "
                         f"{s['loop_collate_s'][1] * 1e3:.1f} ms ({s['rounds']} rounds)")
    record["summary"] = lines
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
