"""The in-run climb's first pair, with and without a one-pair win (issue 54's epoch-1 overhead), on
this machine's CPUs: where more workers than CPUs pay (``inrun_climb``'s waiting samples), the
start (``--start``) is far below the pick, and its first step up reads far ahead of it.

    PYTHONPATH=. python -m scripts.bench.first_pair --out results/inrun/<name> [--runs 4]

Each run, in a shuffled order, two arms over a fresh results home: ``one-pair``, the climb as it
is (a step read FAR_AHEAD of the best past Z errors wins in one pair, and one that reads far ahead
but not yet past them reads on: NOTE [ The climb ] in autoloader/inrun/schedule.py), and
``two-pairs``, its control (FAR_AHEAD infinite: every win waits for a second pair). Each arm:
epoch 1 of ``tuned(loader, epochs=--epochs)`` timed from ``iter()`` to its last step, then an
epoch of a plain DataLoader with that arm's pick from the start, timed the same way (its workers'
start included). Written: ``first_pair.json`` and ``summary.md``: per arm each run's epoch 1 over
its pick's epoch, the pairs and switches it read, its pick; the arms' epochs 1 paired by run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings

import torch
from torch.utils.data import DataLoader

from autoloader.search.paired import paired_ratio
from scripts.bench.inrun_climb import Waiting, step

ARMS = ("one-pair", "two-pairs")


def timed_epoch(loader) -> float:
    began = time.perf_counter()
    for batch in loader:
        step(batch)
    return time.perf_counter() - began


def arm(name: str, dataset, args, seed: int) -> dict:
    import autoloader
    from autoloader.inrun import schedule

    from autoloader.inrun.quick import Proposer

    saved = schedule.FAR_AHEAD, Proposer.start
    if name == "two-pairs":
        schedule.FAR_AHEAD = math.inf
    if args.start is not None:   # a start as far below the pick as a 16-CPU machine's guess is
        guess = Proposer.start
        Proposer.start = lambda self: guess(self).replace(num_workers=args.start)
    try:
        with tempfile.TemporaryDirectory() as home:
            plain = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                               generator=torch.Generator().manual_seed(seed))
            loader = autoloader.tuned(plain, device="cpu", out=home, epochs=args.epochs, progress=False)
            epoch_s = timed_epoch(loader)
            plan = loader.plan
            pick = plan.pick or plan.best
            row = {"epoch_s": epoch_s, "settled": plan.state == "settled", "why": plan.why,
                   "start": f"w{plan.start.num_workers}", "pick": f"w{pick.num_workers} pf{pick.prefetch_factor}",
                   "pairs": plan.rounds_done, "switches": sum(1 for r in plan.readings if r.drain_s > 0),
                   "climb": [f"w{r.config.num_workers}" for r in plan.readings]}
            loader.close()
            del loader
    finally:
        schedule.FAR_AHEAD, Proposer.start = saved
    kwargs = pick.loader_kwargs()
    kwargs.pop("batch_size")
    if not pick.num_workers:
        for key in ("prefetch_factor", "persistent_workers", "in_order"):
            kwargs.pop(key, None)
    fixed = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                       generator=torch.Generator().manual_seed(seed), **kwargs)
    row["pick_epoch_s"] = timed_epoch(fixed)
    row["over_pick"] = row["epoch_s"] / row["pick_epoch_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--length", type=int, default=16_000, help="samples an epoch")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3, help="epochs the tune is told the run reads")
    parser.add_argument("--start", type=int, default=None,
                        help="the start's workers (default: the quick profile's guess)")
    args = parser.parse_args(argv)
    if args.start is not None and args.start < 1:
        parser.error(f"--start takes 1 worker or more (a start far below the pick); got {args.start}")
    if args.runs < 1 or args.length < 16 * args.batch_size or args.batch_size < 1 or args.epochs < 1:
        parser.error(f"--runs, --batch-size and --epochs take 1 or more and --length at least 16 batches; got "
                     f"--runs {args.runs} --batch-size {args.batch_size} --epochs {args.epochs} --length {args.length}")
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    os.makedirs(args.out, exist_ok=True)
    dataset = Waiting(args.length)
    runs = []
    for r in range(args.runs):
        order = list(ARMS)
        random.Random(r).shuffle(order)
        runs.append({name: arm(name, dataset, args, seed=1 + r) for name in order})
        runs[-1]["order"] = order
        print(f"run {r}: " + "; ".join(f"{n} {runs[-1][n]['epoch_s']:.1f} s ({runs[-1][n]['over_pick']:.3f}x its pick's, "
                                     f"{runs[-1][n]['pairs']} pairs, {runs[-1][n]['pick']})" for n in order), flush=True)
        versus = paired_ratio([(run["one-pair"]["epoch_s"], run["two-pairs"]["epoch_s"]) for run in runs])
        record = {"args": vars(args), "load": os.getloadavg(), "runs": runs,
                  "one_pair_over_two_pairs": versus.to_dict()}
        with open(os.path.join(args.out, "first_pair.json"), "w") as fh:   # after each run: a cut bench keeps them
            json.dump(record, fh, indent=1)
    lines = ["# The in-run climb's first pair: a one-pair win against two pairs (CPU)", "",
             f"- command: `PYTHONPATH=. python -m scripts.bench.first_pair {' '.join(argv)}`",
             f"- {os.cpu_count()} CPUs; load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}", "",
             "| run | arm | epoch 1 s | its pick's epoch s | epoch 1 / pick's | pairs | switches | pick | climb |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, run in enumerate(runs):
        for name in run["order"]:
            a = run[name]
            lines.append(f"| {i} | {name} | {a['epoch_s']:.1f} | {a['pick_epoch_s']:.1f} | {a['over_pick']:.3f} | "
                         f"{a['pairs']} | {a['switches']} | {a['pick']}{'' if a['settled'] else ' (not settled)'} | "
                         f"{' '.join(a['climb'])} |")
    for name in ARMS:
        ratio = paired_ratio([(run[name]["epoch_s"], run[name]["pick_epoch_s"]) for run in runs])
        lines.append("")
        lines.append(f"{name}: epoch 1 over its pick's epoch, geometric mean {ratio.ratio:.3f}x"
                     + (f" (95% {ratio.lo:.3f}-{ratio.hi:.3f}, {len(runs)} runs)" if ratio.judged else ""))
    lines += ["", f"one-pair's epoch 1 over two-pairs', paired by run: {versus.ratio:.3f}x"
              + (f" (95% {versus.lo:.3f}-{versus.hi:.3f}, {len(runs)} runs)" if versus.judged else " (one run: no interval)")]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
