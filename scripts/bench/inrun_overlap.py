"""The next config begun during the drain (NOTE [ The next config begins during the drain ] in
autoloader/inrun/loader.py) against begun after it, paired in rounds on the CPU stand-in for
the GPU's heavytail (``inrun_climb.Waiting``: samples that sleep, so several workers per CPU pay
and every switch drains and fills deep queues).

    PYTHONPATH=. python -m scripts.bench.inrun_overlap --out results/inrun/<name> [--rounds 6]

Each round runs both, in a shuffled order, each a fresh ``tuned(loader, epochs=...)`` over the
same shuffled DataLoader from an empty results home, ``--epochs`` epochs of the loop: the wall
time of the epochs, the tune's own cost (the tuned epochs' wall time less the pick's measured
pace for their batches and one start: record.py's ``tune_cost``), the switches and the pick.
The ratio on/off of the wall time is paired by rounds (search/paired.py). Writes
``overlap.json`` and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

import torch
from torch.utils.data import DataLoader

from scripts.bench.inrun_climb import Waiting, step


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def one_run(dataset, batch_size: int, epochs: int, overlap: bool) -> dict:
    import autoloader
    from autoloader.inrun import loader as inrun_loader
    from autoloader.inrun.record import tune_cost

    inrun_loader.OVERLAP = overlap
    with tempfile.TemporaryDirectory() as home:
        plain = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(1))
        loader = autoloader.tuned(plain, device="cpu", out=home, epochs=epochs, progress=False)
        walls = []
        for _ in range(epochs):
            began = time.perf_counter()
            for batch in loader:
                step(batch)
            walls.append(time.perf_counter() - began)
        plan = loader.plan
        cost = tune_cost(loader)
        readings = plan.readings
        switches = sum(1 for a, b in zip(readings, readings[1:]) if a.config != b.config)
        said = {"overlap": overlap, "epochs_s": walls, "wall_s": sum(walls),
                "tuning_cost_s": cost[2] if cost else None, "tuned_epochs": loader.tuned_epochs,
                "pick": (plan.pick or plan.best).loader_kwargs(), "why": plan.why, "switches": switches,
                "readings": [r.to_dict() for r in readings]}
        loader.close()
    return said


def main(argv: list[str] | None = None) -> int:
    from autoloader.search.paired import by_rounds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--length", type=int, default=16_000, help="samples an epoch")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    dataset = Waiting(args.length)
    record: dict = {"load_before": os.getloadavg(), "args": vars(args), "rounds": []}
    for r in range(args.rounds):
        order = [True, False]
        random.Random(r).shuffle(order)
        runs = {("on" if o else "off"): one_run(dataset, args.batch_size, args.epochs, o) for o in order}
        record["rounds"].append({"order": ["on" if o else "off" for o in order], **runs})
        on, off = runs["on"], runs["off"]
        print(f"round {r}: " + ", ".join(f"{k} {v['wall_s']:.1f} s (cost {_s(v['tuning_cost_s'])}, {v['switches']} "
                                         f"switches, pick w{v['pick']['num_workers']})" for k, v in runs.items()),
              flush=True)
    rounds = record["rounds"]
    # Rates (1 / wall) so that by_rounds's ratio reads "on is x times as fast as off".
    ratio = by_rounds({i: 1.0 / rd["on"]["wall_s"] for i, rd in enumerate(rounds)},
                      {i: 1.0 / rd["off"]["wall_s"] for i, rd in enumerate(rounds)})
    costs = {k: [rd[k]["tuning_cost_s"] for rd in rounds if rd[k]["tuning_cost_s"] is not None] for k in ("on", "off")}
    record.update(speed_on_over_off={"ratio": ratio.ratio, "lo": ratio.lo, "hi": ratio.hi, "rounds": ratio.rounds},
                  median_cost_s={k: statistics.median(v) if v else None for k, v in costs.items()},
                  load_after=os.getloadavg())
    with open(os.path.join(args.out, "overlap.json"), "w") as fh:
        json.dump(record, fh, indent=2, default=str)
    interval = f"95% {ratio.lo:.3f}-{ratio.hi:.3f}" if ratio.judged else "no interval"
    print(f"load {record['load_before'][0]:.1f}/{record['load_after'][0]:.1f}; the {args.epochs} epochs' speed, on over "
          f"off: {ratio.ratio:.3f} ({interval}, {ratio.rounds} rounds paired); tuning cost median on "
          f"{_s(record['median_cost_s']['on'])}, off {_s(record['median_cost_s']['off'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
