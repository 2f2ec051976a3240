"""The in-run climb where more workers than CPUs pay (a CPU stand-in for the GPU bench's heavytail):
samples that wait (a sleep of heavy-tailed length, as a read from slow storage does) and a light
step, so that the best config has several workers per CPU.

    PYTHONPATH=. python -m scripts.bench.inrun_climb --out results/inrun/<name> [--epochs 3]

In this order: ``tuned(loader, epochs=...)`` over a plain shuffled DataLoader, ``--epochs`` epochs
of the loop (each epoch's wall time, the climb's readings); then a grid (no workers, one, two and
four per CPU: the space's maximum) and the pick, each a segment of ``--segment-s`` seconds of the
same loop a round, ``--rounds`` rounds in a shuffled order, the pick over the best
paired by rounds (search/paired.py). Writes ``climb.json`` and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Waiting(Dataset):
    """Sample i: a small tensor after a sleep of a lognormal length (median ``wait_s``)."""

    def __init__(self, length: int, wait_s: float = 0.004, seed: int = 0):
        rng = random.Random(seed)
        self.waits = [wait_s * rng.lognormvariate(0.0, 0.8) for _ in range(length)]

    def __len__(self) -> int:
        return len(self.waits)

    def __getitem__(self, i: int):
        time.sleep(self.waits[i])
        return torch.full((64,), float(i)), i % 10


def step(batch) -> None:
    x, _ = batch
    for _ in range(4):
        x = torch.tanh(x @ torch.ones(64, 64) / 64)


def segment(dataset, config, seconds: float, seed: int) -> float:
    """Samples/s of the loop under ``config`` over ``seconds`` after its first wave (and a second)."""
    from autoloader.seeding import seed_worker

    kwargs = config.loader_kwargs()
    kwargs.pop("batch_size")
    if config.num_workers:
        kwargs["worker_init_fn"] = seed_worker
    else:
        for name in ("prefetch_factor", "persistent_workers", "in_order"):
            kwargs.pop(name, None)
    sampler = RandomSampler(dataset, num_samples=1 << 30, generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(dataset, batch_size=config.batch_size, sampler=sampler, **kwargs)
    iterator = iter(loader)
    began, n = time.perf_counter(), 0
    lead = max(2, config.num_workers * (config.prefetch_factor or 2))
    for batch in iterator:
        step(batch)
        n += 1
        if n >= lead and time.perf_counter() - began > 1.0:
            break
    t0, samples = time.perf_counter(), 0
    for batch in iterator:
        step(batch)
        samples += len(batch[1])
        if time.perf_counter() - t0 >= seconds:
            break
    rate = samples / (time.perf_counter() - t0)
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown:
        shutdown()
    return rate


def main(argv: list[str] | None = None) -> int:
    import autoloader
    from autoloader.inputs.hardware import usable_cpus
    from autoloader.search.paired import by_rounds
    from autoloader.search.policy import MAX_WORKERS_PER_CPU
    from autoloader.search.space import LoaderConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--length", type=int, default=16_000, help="samples an epoch")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--segment-s", type=float, default=4.0)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    dataset = Waiting(args.length)
    record: dict = {"load_before": os.getloadavg(), "args": vars(args)}
    with tempfile.TemporaryDirectory() as home:
        plain = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(1))
        loader = autoloader.tuned(plain, device="cpu", out=home, epochs=args.epochs, progress=False)
        walls = []
        for _ in range(args.epochs):
            began = time.perf_counter()
            for batch in loader:
                step(batch)
            walls.append(time.perf_counter() - began)
        plan = loader.plan
        pick = plan.pick or plan.best
        record["in_run"] = {"epochs_s": walls, "start": plan.start.loader_kwargs(), "pick": pick.loader_kwargs(),
                            "settled": plan.state, "why": plan.why, "steps": plan.steps,
                            "readings": [r.to_dict() for r in plan.readings]}
        del loader
    cpus = usable_cpus()
    grid = {f"w{n}": LoaderConfig.make(batch_size=args.batch_size, num_workers=n, pin_memory=False,
                                       prefetch_factor=2 if n else None, persistent_workers=bool(n))
            for n in sorted({0, cpus, 2 * cpus, MAX_WORKERS_PER_CPU * cpus})}
    named = dict(grid)
    if pick not in grid.values():
        named["pick"] = pick
    rounds: list[dict] = []
    for r in range(args.rounds):
        keys = list(named)
        random.Random(r).shuffle(keys)
        rounds.append({k: segment(dataset, named[k], args.segment_s, 100 + r) for k in keys})
    by = {k: {i: rnd[k] for i, rnd in enumerate(rounds)} for k in named}
    medians = {k: statistics.median(v.values()) for k, v in by.items()}
    best = max(medians, key=medians.get)
    pick_key = next(k for k, c in named.items() if c == pick)
    ratio = by_rounds(by[pick_key], by[best]) if best != pick_key else None
    record.update(rounds=rounds, medians=medians, best=best, pick_key=pick_key,
                  pick_over_best=None if ratio is None else {"ratio": ratio.ratio, "lo": ratio.lo, "hi": ratio.hi,
                                                             "rounds": ratio.rounds},
                  load_after=os.getloadavg())
    with open(os.path.join(args.out, "climb.json"), "w") as fh:
        json.dump(record, fh, indent=2, default=str)
    climbed = " -> ".join(dict.fromkeys(f"w{r.config.num_workers}" + (f" pf{r.config.prefetch_factor}"
                                                                       if r.config.num_workers else "")
                                        for r in plan.readings))
    print(f"load {record['load_before'][0]:.1f}/{record['load_after'][0]:.1f}; in-run epochs "
          f"{', '.join(f'{w:.1f}' for w in walls)} s; read {climbed}; pick {pick_key} "
          f"({'w%d' % pick.num_workers}); {plan.why}")
    print("grid medians (samples/s): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    if ratio is None:
        print(f"the pick is the best median ({best})")
    else:
        print(f"the pick over the best ({best}): {ratio.ratio:.3f} (95% {ratio.lo:.3f}-{ratio.hi:.3f}, "
              f"{ratio.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
