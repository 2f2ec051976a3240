"""A reading that begins with a full queue, rated by what its workers made and by what the loop
was served (NOTE [ When a batch was made ], autoloader/inrun/made.py), on this machine's CPUs.

    PYTHONPATH=. python -m scripts.bench.full_queue --out results/inrun/<name> [--seconds 40]

An in-run loader over samples that sleep ``--sample-ms`` (no CPU, so workers fit on two CPUs),
under a loop whose step busy-waits ``--step-ms``, alternates two configs as the climb does (pairs
in turn, each never judged, so the pairs go on): ``--few`` workers that make less than the step
takes and ``--many`` that make more. Each reading of the few after the many's drain begins with
its queue full (its loader began during the drain). Written: ``readings.json`` and
``summary.md``: each reading's workers, prefilled batches, made and served rates, wait share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset

from autoloader.inrun import schedule
from autoloader.inrun.loader import InRunLoader
from autoloader.inrun.schedule import Plan
from autoloader.search.space import LoaderConfig, SearchSpace


class Naps(Dataset):
    def __init__(self, seconds: float, length: int = 200_000):
        self.seconds, self.length = seconds, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        time.sleep(self.seconds)
        return torch.zeros(16)


class TwoConfigs:
    """A proposer that starts at ``first`` and whose one step up is ``second``."""

    def __init__(self, first: LoaderConfig, second: LoaderConfig):
        self.profile, self.first, self.second, self.rule = None, first, second, first
        self.space = SearchSpace((first.batch_size,), 0)
        self.fits = lambda c: True

    def start(self) -> LoaderConfig:
        return self.first

    def neighbour(self, best: LoaderConfig, direction: str) -> LoaderConfig | None:
        return self.second if direction == schedule.UP and best == self.first else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--sample-ms", type=float, default=6.0)
    parser.add_argument("--step-ms", type=float, default=14.0)
    parser.add_argument("--few", type=int, default=2)
    parser.add_argument("--many", type=int, default=8)
    parser.add_argument("--prefetch", type=int, default=16)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.sample_ms <= 0 or args.step_ms < 0 or not 0 < args.few < args.many or args.prefetch < 1:
        parser.error("--seconds and --sample-ms must be > 0, --step-ms >= 0, 0 < --few < --many and --prefetch >= 1; "
                     f"got {args.seconds}, {args.sample_ms}, {args.step_ms}, {args.few}, {args.many}, {args.prefetch}")
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    few, many = (LoaderConfig.make(batch_size=8, num_workers=n, pin_memory=False, prefetch_factor=args.prefetch,
                                   persistent_workers=True) for n in (args.few, args.many))
    saved = (Plan.__dict__["judge"], Plan.__dict__["behind"], Plan.__dict__["ahead"], schedule.PAIRS_PER_STEP,
             schedule.PAIRS_FOR_A_GAIN)
    Plan.judge = staticmethod(lambda pairs, direction: None)   # never decided: the pairs go on
    Plan.behind = lambda self, reading: False                  # and no reading is cut short
    Plan.ahead = lambda self, reading: False                   # or read on
    schedule.PAIRS_PER_STEP = schedule.PAIRS_FOR_A_GAIN = 10 ** 6
    try:
        loader = InRunLoader(DataLoader(Naps(args.sample_ms / 1000), batch_size=8, shuffle=True),
                             TwoConfigs(few, many))
        began = time.perf_counter()
        for _ in loader:
            end = time.perf_counter() + args.step_ms / 1000
            while time.perf_counter() < end:
                pass
            if time.perf_counter() - began > args.seconds:
                break
        loader.close()
    finally:
        Plan.judge, Plan.behind, Plan.ahead, schedule.PAIRS_PER_STEP, schedule.PAIRS_FOR_A_GAIN = saved
    rows = [{"workers": r.config.num_workers, "prefilled": r.prefilled, "batches": r.batches, "made_per_s": r.rate,
             "served_per_s": r.served_rate, "wait_share": r.wait_share} for r in loader.plan.readings]
    os.makedirs(args.out, exist_ok=True)
    command = "python -m scripts.bench.full_queue " + " ".join(argv if argv is not None else sys.argv[1:])
    with open(os.path.join(args.out, "readings.json"), "w") as f:
        json.dump({"command": command, "cpus": os.cpu_count(), "torch": torch.__version__, "readings": rows}, f, indent=1)
    lines = ["# A reading that begins with a full queue: made against served", "",
             f"Command: `PYTHONPATH=. {command}`; {os.cpu_count()} CPUs; torch {torch.__version__}.", "",
             "| workers | prefilled | batches | made /s | served /s | waiting |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['workers']} | {r['prefilled']} | {r['batches']} | {r['made_per_s']:.0f} | {r['served_per_s']:.0f} "
              f"| {r['wait_share']:.2f} |" for r in rows]
    for n in (args.few, args.many):
        for stocked in (False, True):
            made = [r["made_per_s"] for r in rows if r["workers"] == n and bool(r["prefilled"]) == stocked]
            served = [r["served_per_s"] for r in rows if r["workers"] == n and bool(r["prefilled"]) == stocked]
            if made:
                lines.append(f"\nw{n}, {'begun with a full queue' if stocked else 'begun without a stock'}: "
                             f"{len(made)} readings, median made {statistics.median(made):.0f}/s, "
                             f"served {statistics.median(served):.0f}/s.")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
