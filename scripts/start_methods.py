"""``python -m scripts.start_methods``: what the worker start method (DataLoader's
``multiprocessing_context``) costs, per epoch, with and without kept workers. CPU only; prints
Markdown. The evidence for why the tuner does not search the start method (results/benchmarks/
README.md, "Evidence behind mechanisms in the code").

For each start method this platform has and each worker count: a fresh DataLoader, the time from
``iter()`` to the first batch (the start-up every epoch pays without ``persistent_workers``), and,
with ``persistent_workers=True``, the time from the second epoch's ``iter()`` to its first batch
(the epoch boundary a kept worker pays instead). The dataset is autoloader's demo ``images``
(JPEG decode), built in this process, so ``spawn`` and ``forkserver`` pickle it to every worker
as they would a user's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
import warnings

from torch.utils.data import DataLoader

from autoloader.demo import JpegImages


def first_batch_s(loader: DataLoader) -> tuple[float, float | None]:
    """(iter() to the first batch, and with kept workers the second epoch's iter() to its first
    batch; None without kept workers)."""
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    start = time.perf_counter() - t0
    if not loader.persistent_workers:
        del it
        return start, None
    for _ in it:       # drain the first epoch
        pass
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    boundary = time.perf_counter() - t0
    for _ in it:
        pass
    return start, boundary


def measure(method: str, workers: int, repeats: int, length: int) -> dict:
    dataset = JpegImages(length=length, size=96)
    starts, boundaries = [], []
    for _ in range(repeats):
        loader = DataLoader(dataset, batch_size=32, num_workers=workers, multiprocessing_context=method,
                            persistent_workers=True, prefetch_factor=2)
        start, boundary = first_batch_s(loader)
        starts.append(start)
        boundaries.append(boundary)
        del loader
    return {"method": method, "workers": workers, "start_s": statistics.median(starts),
            "boundary_s": statistics.median(boundaries)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.start_methods", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,4", help="worker counts, comma-separated (default 1,4)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    # DataLoader warns when the workers outnumber the CPUs; here that is the point of the count.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    counts = [int(n) for n in args.workers.split(",")]
    default = mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]
    print(f"platform default start method: {default}; {mp.cpu_count()} CPUs; median of {args.repeats}\n")
    print("| start method | workers | iter() to first batch (fresh workers, every epoch) "
          "| epoch boundary with kept workers |")
    print("| --- | --- | --- | --- |")
    for method in mp.get_all_start_methods():
        for n in counts:
            row = measure(method, n, args.repeats, length=32 * n * 4)
            print(f"| {method} | {n} | {row['start_s'] * 1000:,.0f} ms | {row['boundary_s'] * 1000:,.0f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
