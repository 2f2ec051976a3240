"""``python -m scripts.bench.start_methods --out FILE``: what each worker start method costs on one
Python-object-rows workload at a fixed worker count: start-up (iter() to the first batch, and to
every worker's first), the rate over an epoch-ish burst, and the workers' memory (USS and PSS, by
/proc/<pid>/smaps_rollup) at its end. Prints a markdown table, writes the JSON record.

    python -m scripts.bench.start_methods --workers 8 --rows 1000000 --out /tmp/start_methods.json
    python -m scripts.bench.start_methods --quick --out /tmp/start_methods.json   # seconds, on a CPU

The rows are ``{"id", "boxes": [floats], "tag"}`` dicts built in this process (the shape
scripts/bench/workloads/pyrows.py builds), so fork's workers copy the pages they read (NOTE
[ Copy on read ] in autoloader/search/growth.py) and spawn's and forkserver's unpickle their own
copy (NOTE [ What a start method costs ] in autoloader/search/methods.py). No Optuna, no tune: each
method is one DataLoader, measured here.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    """Python-object rows; a sample is a row's boxes as a tensor and its id's class."""

    def __init__(self, length: int, boxes: int):
        gc.disable()
        try:
            values = np.random.default_rng(0).random((length, boxes)).tolist()
            self.rows = [{"id": i, "boxes": row, "tag": f"img-{i:08d}.jpg"} for i, row in enumerate(values)]
            del values
        finally:
            gc.enable()
        gc.collect()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        row = self.rows[index]
        return torch.tensor(row["boxes"], dtype=torch.float32), row["id"] % 10


def memory(pid: int) -> dict | None:
    """A process's USS (private clean + dirty), PSS and anonymous bytes, from smaps_rollup."""
    fields: dict = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    fields[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        return None
    return {"uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0), "pss": fields.get("Pss", 0),
            "anon": fields.get("Anonymous", 0)}


def measure(dataset: Rows, method: str, workers: int, batch_size: int, seconds: float) -> dict:
    """One loader of ``workers`` workers started by ``method``: iter() to its first batch and to
    one batch from each worker (in order: batch k is worker k's), then a burst of ``seconds`` (or
    one epoch, the shorter) and the workers' memory at its end."""
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                        multiprocessing_context=method, persistent_workers=True, prefetch_factor=2)
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    for _ in range(workers - 1):
        next(it)
    every = time.perf_counter() - t0
    batches, samples, t1 = 0, 0, time.perf_counter()
    for batch in it:
        batches += 1
        samples += int(batch[0].shape[0])
        if time.perf_counter() - t1 >= seconds:
            break
    burst = time.perf_counter() - t1
    readings = [m for m in (memory(w.pid) for w in getattr(it, "_workers", ())) if m is not None]
    it._shutdown_workers()
    del it, loader
    mean = lambda key: int(sum(r[key] for r in readings) / len(readings)) if readings else None  # noqa: E731
    return {"method": method, "workers": workers, "first_batch_s": first, "every_worker_s": every,
            "burst_s": burst, "batches": batches, "samples": samples,
            "samples_per_s": samples / burst if burst > 0 else None, "samples_per_worker": samples / workers,
            "worker_uss_bytes": mean("uss"), "worker_pss_bytes": mean("pss"), "worker_anon_bytes": mean("anon"),
            "workers_read": len(readings)}


def table(rows: list[dict]) -> str:
    gib = lambda n: "-" if n is None else f"{n / 2**30:.2f} GiB"  # noqa: E731
    lines = ["| method | workers | first batch | every worker's first | samples/s | worker USS | worker PSS | "
             "samples a worker read |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['method']} | {r['workers']} | failed: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['method']} | {r['workers']} | {r['first_batch_s']:.2f} s | {r['every_worker_s']:.2f} s | "
                     f"{r['samples_per_s']:,.0f} | {gib(r['worker_uss_bytes'])} | {gib(r['worker_pss_bytes'])} | "
                     f"{r['samples_per_worker']:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.start_methods", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1_000_000, help="Python-object rows in the dataset")
    parser.add_argument("--boxes", type=int, default=32, help="floats a row holds")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=60.0, help="the burst's most seconds (an epoch at most)")
    parser.add_argument("--methods", default=",".join(mp.get_all_start_methods()))
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a CPU check: 20k rows, 2 workers, 3 s")
    parser.add_argument("--out", required=True, help="the JSON record's path")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.workers, args.seconds, args.batch_size = 20_000, 2, 3.0, 64
    t0 = time.perf_counter()
    dataset = Rows(args.rows, args.boxes)
    build_s = time.perf_counter() - t0
    rows = []
    for method in [m for m in args.methods.split(",") if m]:
        print(f"[start_methods] {method}: {args.workers} workers", file=sys.stderr, flush=True)
        try:
            rows.append(measure(dataset, method, args.workers, args.batch_size, args.seconds))
        except Exception as exc:  # noqa: BLE001 - a method that fails is a row of the table
            rows.append({"method": method, "workers": args.workers, "error": f"{type(exc).__name__}: {exc}"[:300]})
    given = argv if argv is not None else sys.argv[1:]
    record = {"command": "python -m scripts.bench.start_methods " + " ".join(given),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
              "default_method": mp.get_start_method(allow_none=True), "rows": args.rows, "boxes": args.boxes,
              "batch_size": args.batch_size, "build_s": build_s, "results": rows}
    print(table(rows))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
