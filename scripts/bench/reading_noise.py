"""Whether an in-run reading's own noise (its blocks' spread, schedule.Reading.variance) says how
far two readings of one config land apart, where samples are heavy-tailed and delivered in order.

    PYTHONPATH=. python -m scripts.bench.reading_noise --out results/inrun/<name> [--seconds 90]

For each loader config and sample cost, one long epoch of a plain DataLoader under a loop with a
light step, every batch's call and arrival timed, and the time each was made (as the in-run
loader's dataset marks it); the epoch is cut into consecutive readings as the in-run tune cuts a
config that reads on (schedule.Plan.cut's sizes: SEGMENT_S, READ_CYCLES worker cycles, the queue's
depth), each rated two ways: served, and made. Adjacent readings are null pairs (one config twice):
their log ratio's spread is what the blocks' noise should state. Written: ``noise.json`` (every
reading's rate and own variance, each way) and ``summary.md``: per case, the pairs, the blocks' stated standard error
of a pair against the pairs' measured spread, and the share of pairs past Z stated errors (about
5% where the blocks are right, far less where they overstate).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import statistics
import sys
import time
import warnings

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from autoloader.inrun import schedule
from autoloader.inrun.made import MadeTimes, Pulled, StampedSamples
from autoloader.inrun.schedule import Reading, queue_depth
from autoloader.search.space import LoaderConfig


class Sleeps(Dataset):
    """Sample i: a small tensor after a sleep (no CPU, so many workers fit on few CPUs). Heavy:
    ~1 ms, and 2% of samples 30-50 ms (heavytail's shape, as a wait); light: 1.78 ms, +-20%."""

    def __init__(self, length: int, heavy: bool, seed: int = 0):
        rng = random.Random(seed)
        if heavy:
            self.waits = [rng.uniform(30e-3, 50e-3) if rng.random() < 0.02 else rng.uniform(0.8e-3, 1.2e-3)
                          for _ in range(length)]
        else:
            self.waits = [1.78e-3 * rng.uniform(0.8, 1.2) for _ in range(length)]

    def __len__(self) -> int:
        return len(self.waits)

    def __getitem__(self, i: int):
        time.sleep(self.waits[i])
        return torch.full((64,), float(i))


class Placed:
    """A shuffled epoch's batches, each with its place (``Pulled.at``), as the in-run feed pulls
    them: the slots StampedSamples marks when each was made."""

    def __init__(self, length: int, batch_size: int):
        self.inner = BatchSampler(RandomSampler(range(length), generator=torch.Generator().manual_seed(0)),
                                  batch_size, drop_last=False)

    def __iter__(self):
        for at, batch in enumerate(self.inner):
            yield Pulled(batch, at)

    def __len__(self) -> int:
        return len(self.inner)


def timed_epoch(dataset, config: LoaderConfig, seconds: float, step_s: float
                ) -> tuple[list[float], list[float], float, list[float]]:
    """(calls, arrivals, end, when each batch was made: 0 where not) of the loop over ``seconds``
    of one epoch, from its first call."""
    kwargs = config.loader_kwargs()
    kwargs.pop("batch_size")
    sampler = Placed(len(dataset), config.batch_size)
    made = MadeTimes(len(sampler))
    loader = DataLoader(StampedSamples(dataset, made), batch_sampler=sampler, **kwargs)
    calls, got = [], []
    it = iter(loader)
    t0 = time.perf_counter()
    while True:
        called = time.perf_counter()
        if called - t0 > seconds:
            break
        try:
            next(it)
        except StopIteration:
            break
        calls.append(called - t0)
        got.append(time.perf_counter() - t0)
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:   # the step: a CPU's worth, as a launch-bound GPU step takes
            pass
    end = time.perf_counter() - t0
    del it, loader
    return calls, got, end, [t - t0 if t > 0 else 0.0 for t in made.read(len(sampler))]


def readings(config: LoaderConfig, calls: list[float], got: list[float], skip: int,
             made: list[float] | None = None) -> list[Reading]:
    """The epoch after its first ``skip`` batches, cut as the tune cuts a config that reads on;
    with ``made`` (each batch's time made), each reading rates what was made in it."""
    made = sorted(t for t in made or () if t > 0)
    need = max(schedule.MIN_STEADY_BATCHES, schedule.READ_CYCLES * config.num_workers, queue_depth(config))
    out, a = [], skip
    while a < len(calls):
        b = a + need
        while b < len(calls) and calls[b] - calls[a] < schedule.SEGMENT_S:
            b += 1
        if b >= len(calls):
            break
        t0 = calls[a]
        lo, hi = bisect.bisect_left(made, t0), bisect.bisect_left(made, calls[b])
        out.append(Reading(config, None, [config.batch_size] * (b - a), [c - t0 for c in calls[a:b]],
                           [g - t0 for g in got[a:b]], calls[b] - t0, lead=0, steady_end=b - a, started=False,
                           made=tuple((t - t0, config.batch_size) for t in made[lo:hi])))
        a = b
    return out


def judged(rs: list[Reading]) -> dict:
    """Adjacent readings as null pairs: the blocks' stated error of each against their spread."""
    pairs = [(rs[i], rs[i + 1]) for i in range(0, len(rs) - 1, 2)]
    ds, stated = [], []
    for first, second in pairs:
        v1, v2 = first.variance(), second.variance()
        if v1 is None or v2 is None:
            continue
        ds.append(math.log(second.rate / first.rate))
        stated.append(math.sqrt(v1 + v2))
    if len(ds) < 3:
        return {"pairs": len(ds)}
    measured = math.sqrt(statistics.fmean(d * d for d in ds))   # around 0: a null pair's true log ratio
    return {"pairs": len(ds), "readings": len(rs), "batches_a_reading": statistics.median(r.batches for r in rs),
            "rate": statistics.median(r.rate for r in rs), "measured_sd": measured,
            "stated_sd": math.sqrt(statistics.fmean(s * s for s in stated)),
            "past_z": sum(abs(d) > schedule.Z * s for d, s in zip(ds, stated)) / len(ds),
            "past_z_measured": sum(abs(d) > schedule.Z * measured for d in ds) / len(ds)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=90.0, help="each case's epoch (default 90)")
    parser.add_argument("--step-ms", type=float, default=2.0, help="the loop's step (default 2 ms)")
    parser.add_argument("--workers", default="4,8,16", help="worker counts, comma-separated (default 4,8,16)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.step_ms < 0:
        parser.error(f"--seconds must be > 0 and --step-ms >= 0, got {args.seconds} and {args.step_ms}")
    try:
        workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes counts like 4,8,16, got {args.workers!r}")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cases = []
    for heavy in (True, False):
        dataset = Sleeps(400_000, heavy)
        for n in workers:
            config = LoaderConfig.make(batch_size=32, num_workers=n, pin_memory=False, prefetch_factor=4,
                                       persistent_workers=False)
            calls, got, _, made = timed_epoch(dataset, config, args.seconds, args.step_ms / 1000)
            case = {"samples": "heavy" if heavy else "light", "config": config.loader_kwargs()}
            for rated, times in (("served", None), ("made", made)):
                rs = readings(config, calls, got, skip=2 * queue_depth(config), made=times)
                case[rated] = {**judged(rs), "each": [{"rate": r.rate, "variance": r.variance(), "batches": r.batches}
                                                      for r in rs]}
            cases.append(case)
            print(f"{case['samples']} w{n}: " + "; ".join(
                f"{rated}: {case[rated].get('pairs')} pairs, measured sd {case[rated].get('measured_sd', 0):.4f}, "
                f"stated {case[rated].get('stated_sd', 0):.4f}" for rated in ("served", "made")), flush=True)
    meta = {"command": "python -m scripts.bench.reading_noise " + " ".join(argv if argv is not None else sys.argv[1:]),
            "cpus": os.cpu_count(), "torch": torch.__version__, "segment_s": schedule.SEGMENT_S, "z": schedule.Z}
    with open(os.path.join(args.out, "noise.json"), "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=1)
    lines = ["# A reading's own noise against two readings' spread (null pairs)", "",
             f"Command: `PYTHONPATH=. {meta['command']}`; {meta['cpus']} CPUs; torch {meta['torch']}.", "",
             "Each reading rated two ways: the samples the loop was served, and the samples its workers made "
             "(NOTE [ When a batch was made ], autoloader/inrun/made.py), over the same steady part.", "",
             "| samples | config | rated by | pairs | batches a reading | samples/s | pair's sd, measured | "
             "stated by the blocks | pairs past Z stated | past Z measured |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        for rated in ("served", "made"):
            j = c[rated]
            if "measured_sd" not in j:
                lines.append(f"| {c['samples']} | w{c['config']['num_workers']} pf4 | {rated} | {j['pairs']} | too few pairs | | | | | |")
                continue
            lines.append(f"| {c['samples']} | w{c['config']['num_workers']} pf4 | {rated} | {j['pairs']} | "
                         f"{j['batches_a_reading']:.0f} | {j['rate']:.0f} | {j['measured_sd']:.4f} | {j['stated_sd']:.4f} | "
                         f"{j['past_z']:.2f} | {j['past_z_measured']:.2f} |")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
