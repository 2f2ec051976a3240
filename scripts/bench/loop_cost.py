"""What the in-run loader costs the loop a batch once it has settled, against a plain DataLoader
of the same config (issue 54: the loader wraps the user's every epoch).

    PYTHONPATH=. python -m scripts.bench.loop_cost --out results/inrun/<name> [--rounds 5]

Samples cost nothing to make (an index), so a batch's time is the loader's own: its sampler,
fetch, collate and, for the in-run loader, its books (the feed, the reading's times, the made
times: NOTE [ When a batch was made ] in autoloader/inrun/made.py). For each ``--workers`` count,
rounds of four epochs in turn (plain, in-run, in-run, plain: a drift over the round cancels);
each in-run epoch is a fresh loader fixed at that config (its proposer offers no step), and its
cost a batch is that of its last reading, the settled pick's, over the epoch's rest (an epoch is
sized to ``--seconds`` of the plain loader's pace, so that its first reading ends early). Written:
``loop_cost.json`` and ``summary.md``: per config the median microseconds a batch of each, and
the in-run over the plain, paired by round (``paired_ratio``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

from autoloader.search.paired import paired_ratio


class Indices(Dataset):
    """Sample i is i: nothing to make."""

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> int:
        return i


class Fixed:
    """A proposer that starts at ``config`` and offers no step."""

    def __init__(self, config):
        from autoloader.search.space import SearchSpace

        self.profile, self.rule, self._config = None, config, config
        self.space = SearchSpace((config.batch_size,), config.num_workers)
        self.fits = lambda c: True

    def start(self):
        return self._config

    def neighbour(self, best, direction):
        return None


def plain(dataset, config) -> DataLoader:
    return DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(0), **config.loader_kwargs())


def per_batch_us(loader) -> tuple[float, int]:
    """(microseconds a batch over the epoch, batches)."""
    began = time.perf_counter()
    n = sum(1 for _ in loader)
    return (time.perf_counter() - began) / n * 1e6, n


def in_run_us(dataset, config) -> tuple[float, int, list]:
    """(microseconds a batch of the settled pick's reading, its batches, every reading's (workers,
    batches))."""
    from autoloader.inrun.loader import InRunLoader

    loader = InRunLoader(plain(dataset, config), Fixed(config))
    try:
        sum(1 for _ in loader)
        final = loader.final
        if final is None:
            raise SystemExit(f"the in-run loader did not settle within the epoch ({len(dataset)} samples): "
                             "pass a larger --seconds")
        return final.wall_s / final.batches * 1e6, final.batches, \
            [(r.config.num_workers, r.batches) for r in loader.plan.readings]
    finally:
        loader.close()


def main(argv: list[str] | None = None) -> int:
    from autoloader.search.space import LoaderConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="an epoch's length at the plain loader's pace")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args(argv)
    for name in ("rounds", "seconds", "batch_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0, got --{name.replace('_', '-')} "
                         f"{getattr(args, name)}: pass a positive count")
    if any(w < 0 for w in args.workers):
        parser.error(f"--workers counts must be 0 or more, got --workers {' '.join(map(str, args.workers))}")
    os.makedirs(args.out, exist_ok=True)
    command = "PYTHONPATH=. python -m scripts.bench.loop_cost " + " ".join(sys.argv[1:] if argv is None else argv)
    results: dict = {"command": command, "configs": {}}
    for workers in args.workers:
        config = LoaderConfig.make(batch_size=args.batch_size, num_workers=workers, pin_memory=False,
                                   prefetch_factor=2 if workers else None, persistent_workers=bool(workers))
        gauge, _ = per_batch_us(plain(Indices(2000 * args.batch_size), config))   # its first epoch: slower
        dataset = Indices(max(2000, int(args.seconds * 1e6 / gauge)) * args.batch_size)
        per_batch_us(plain(dataset, config))
        rounds = []
        for r in range(args.rounds):
            p1, _ = per_batch_us(plain(dataset, config))
            i1, settled1, read1 = in_run_us(dataset, config)
            i2, settled2, read2 = in_run_us(dataset, config)
            p2, _ = per_batch_us(plain(dataset, config))
            rounds.append({"plain_us": [p1, p2], "in_run_us": [i1, i2], "settled_batches": [settled1, settled2],
                           "readings": [read1, read2]})
            print(f"w{workers} round {r}: plain {p1:.1f}/{p2:.1f} us, in-run {i1:.1f}/{i2:.1f} us a batch", flush=True)
        ratio = paired_ratio([(statistics.fmean(x["in_run_us"]), statistics.fmean(x["plain_us"])) for x in rounds])
        results["configs"][f"w{workers}"] = {"rounds": rounds, "ratio": ratio.to_dict() if ratio else None}
        with open(os.path.join(args.out, "loop_cost.json"), "w") as f:
            json.dump(results, f, indent=1)
    lines = ["# The in-run loader's cost a batch once settled, against a plain DataLoader", "",
             f"Command: `{command}`", "",
             "| config | plain us/batch (median) | in-run us/batch (median) | in-run - plain | in-run / plain (95%) |",
             "|---|---|---|---|---|"]
    for name, got in results["configs"].items():
        p = statistics.median(v for x in got["rounds"] for v in x["plain_us"])
        i = statistics.median(v for x in got["rounds"] for v in x["in_run_us"])
        r = got["ratio"]
        span = "-" if r is None or r["interval"] is None else \
            f"{r['ratio']:.3f}x ({r['interval'][0]:.3f}-{r['interval'][1]:.3f})"
        lines.append(f"| {name} | {p:.1f} | {i:.1f} | {i - p:+.1f} | {span} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
