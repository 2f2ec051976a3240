"""``python -m scripts.busy_receive``: how long the main process takes a batch from a DataLoader
worker that is idle, busy in Python, or asleep, under both of torch's sharing strategies (the
evidence behind NOTE [ A busy worker's receive ] in autoloader/search/model.py). CPU only; prints
Markdown.

One worker, prefetch 4: the queue is left to fill, then three batches are taken one after
another. The first take meets the worker idle (and hands it a new index); the next two meet it
making that batch.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset

CYCLES = 20
DEPTH = 4


class Work(Dataset):
    """Each sample costs ``cost`` seconds spent spinning in Python (holding the interpreter) or
    asleep (holding nothing), and is a 48 KiB float tensor."""

    def __init__(self, cost: float, spin: bool):
        self.cost, self.spin = cost, spin

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int):
        if self.spin:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < self.cost:
                pass
        else:
            time.sleep(self.cost)
        return torch.zeros(12288)


def takes(strategy: str, spin: bool, batch_size: int = 32, cost: float = 0.002) -> tuple[float, float]:
    """(median idle take, median busy take) in seconds."""
    torch.multiprocessing.set_sharing_strategy(strategy)
    it = iter(DataLoader(Work(cost, spin), batch_size=batch_size, num_workers=1, prefetch_factor=DEPTH))
    next(it)
    idle, busy = [], []
    for _ in range(CYCLES):
        time.sleep(DEPTH * batch_size * cost * 1.5 + 0.01)
        for j in range(DEPTH - 1):
            t0 = time.perf_counter()
            next(it)
            (idle if j == 0 else busy).append(time.perf_counter() - t0)
    it._shutdown_workers()
    return statistics.median(idle), statistics.median(busy)


def main() -> None:
    print("| worker's samples | sharing strategy | idle take, ms | busy take, ms |")
    print("| --- | --- | --- | --- |")
    for spin in (True, False):
        for strategy in ("file_descriptor", "file_system"):
            idle, busy = takes(strategy, spin)
            print(f"| {'spin in Python' if spin else 'asleep'} | {strategy} | {idle * 1e3:.2f} | {busy * 1e3:.2f} |")
    torch.multiprocessing.set_sharing_strategy("file_descriptor")


if __name__ == "__main__":
    main()
