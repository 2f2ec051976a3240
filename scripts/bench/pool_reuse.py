"""``python -m scripts.bench.pool_reuse``: what keeping a finalist's worker pool across the
final's rounds would save its readings, and whether a kept pool's reading agrees with a fresh one.

On the GPU bench the cpus-1 rule's reading costs a tune most: 15 workers on 192 MiB batches take
7-10 s a reading (a start of 1-3 s, a lead of 2-4 s, a window of 3-4.5 s, a teardown of about 1 s),
and a judged final reads it three times (the search's opening burst and two rounds). A final could
keep the rule's DataLoader iterator (the rule keeps its workers: persistent_workers=True) between
its rounds instead of starting and ending it each time. Whether that pays is this script's
question, in interleaved rounds of one process, each round in a shuffled order:

  fresh  a new iterator each reading, its workers shut down and the caches released after, as the
         final measures now (run_burst under FINAL_SETTINGS, the teardown timed with it);
  kept   one iterator for every round: its first reading starts it; each later one resumes it
         after the pause, skips the backlog the idle pool made (prefetch_factor x num_workers + 2
         batches, where a fresh reading skips num_workers + 2), then reads the same window.

Between two readings a pause of ``--pause-s`` stands for the other finalist's reading; the kept
pool sits idle through it and through every fresh reading, as it would in a final. Out: one JSON
line a reading (``pool_reuse.jsonl``) and ``pool_reuse.md``: each kind's wall time a reading, and
the kept reading's rate over the fresh one's paired by round, with its 95% interval.

    python -m scripts.bench.pool_reuse --out OUT                          # hugefloat, the rule
    python -m scripts.bench.pool_reuse --workload large --rounds 4 --out OUT
    AUTOLOADER_BENCH_SCALE=0.05 python -m scripts.bench.pool_reuse --out /tmp/p --rounds 2   # CPU smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import random
import statistics
import time

KINDS = ("fresh", "kept")


def backlog_settings(settings, num_workers: int, prefetch_factor: int):
    """``settings`` with the skip of a resumed pool: run_burst skips num_workers + extra_skip
    batches; an idle pool has made prefetch_factor x num_workers of them, and two more."""
    return dataclasses.replace(settings, extra_skip=max(settings.extra_skip,
                                                        prefetch_factor * num_workers + 2 - num_workers))


def summary(rows: list[dict]) -> str:
    """The table: each kind's readings and wall time, and kept over fresh paired by round."""
    from autoloader.search.paired import compared, paired_ratio

    lines = ["| kind | readings | wall s a reading (median; each) | samples/s (median; each) | start / lead / window s (medians) |",
             "|---|---|---|---|---|"]
    by = {k: [r for r in rows if r["kind"] == k] for k in KINDS}
    for kind, got in by.items():
        if not got:
            continue
        walls, rates = [r["wall_s"] for r in got], [r["samples_per_s"] for r in got]
        parts = " / ".join(f"{statistics.median(r[p] for r in got):.2f}" for p in ("startup_s", "lead_s", "window_s"))
        lines.append(f"| {kind} | {len(got)} | {statistics.median(walls):.2f} ({', '.join(f'{w:.1f}' for w in walls)}) | "
                     f"{statistics.median(rates):,.0f} ({', '.join(f'{v:,.0f}' for v in rates)}) | {parts} |")
    rounds = sorted({r["round"] for r in rows})
    pairs = [(next(r["samples_per_s"] for r in by["kept"] if r["round"] == i),
              next(r["samples_per_s"] for r in by["fresh"] if r["round"] == i))
             for i in rounds if any(r["round"] == i for r in by["kept"]) and any(r["round"] == i for r in by["fresh"])]
    ratio = paired_ratio(pairs) if pairs else None
    lines.append("")
    lines.append(f"kept over fresh, paired by round ({len(pairs)} rounds): "
                 + (f"{ratio.ratio:.3f}x; the kept reading is {compared(ratio, 'the fresh one')}" if ratio else "no pair"))
    later = [r for r in by["kept"] if r["round"] > 0]
    if later and by["fresh"]:
        lines.append(f"a resumed kept reading against a fresh one, wall time: {statistics.median(r['wall_s'] for r in later):.2f} s "
                     f"against {statistics.median(r['wall_s'] for r in by['fresh']):.2f} s (medians)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.pool_reuse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="hugefloat")
    parser.add_argument("--workers", type=int, default=None, help="num_workers (default: the cpus-1 rule's)")
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pause-s", type=float, default=2.5, help="the other finalist's reading, idle (2.5)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    import torch
    from torch.utils.data import DataLoader

    from autoloader.probe.burst import run_burst
    from autoloader.probe.device import release_cached_memory
    from autoloader.search.policy import FINAL_SETTINGS
    from scripts.bench import workloads as W

    if args.rounds < 2 or args.pause_s < 0:
        parser.error(f"--rounds must be at least 2 and --pause-s at least 0, got {args.rounds} and {args.pause_s}")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    spec = W.WORKLOADS[args.workload]
    dataset, step = getattr(W, f"{spec.name}_dataset")(), getattr(W, f"{spec.name}_step")()
    workers = args.workers if args.workers is not None else max(1, (len(os.sched_getaffinity(0)) or 2) - 1)
    kwargs = dict(batch_size=spec.batch_size, shuffle=True, num_workers=workers, prefetch_factor=args.prefetch,
                  pin_memory=cuda, persistent_workers=True, drop_last=True)
    epoch = len(DataLoader(dataset, **kwargs))
    os.makedirs(args.out, exist_ok=True)
    rows: list[dict] = []
    kept_loader = DataLoader(dataset, **kwargs)
    kept_iter = [None]

    def reading(kind: str, index: int) -> dict:
        t0 = time.perf_counter()
        if kind == "fresh":
            loader = DataLoader(dataset, **kwargs)
            m = run_burst(lambda: iter(loader), step, workers, False, epoch, device, FINAL_SETTINGS)
            it = loader._iterator
            if it is not None:
                it._shutdown_workers()
            del loader, it
            gc.collect()
            if cuda:
                release_cached_memory(torch)
        else:
            resumed = kept_iter[0] is not None
            first = [kept_iter[0]]

            def make():
                # The kept iterator once; at an epoch's end a new one over the same workers.
                it = first.pop() if first and first[0] is not None else iter(kept_loader)
                first.clear()
                kept_iter[0] = it
                return it

            settings = backlog_settings(FINAL_SETTINGS, workers, args.prefetch) if resumed else FINAL_SETTINGS
            m = run_burst(make, step, workers, False, epoch, device, settings)
        wall = time.perf_counter() - t0
        row = {"kind": kind, "round": index, "wall_s": wall, "samples_per_s": m.samples_per_s,
               "rel_interval": m.rel_interval, "startup_s": m.startup_s, "lead_s": m.lead_s, "window_s": m.window_s,
               "batches": m.batches, "workers": workers, "prefetch": args.prefetch, "workload": spec.name,
               "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
        print(f"[pool_reuse] r{index} {kind}: {wall:.2f} s, {m.samples_per_s:,.0f}/s (start {m.startup_s:.2f}, "
              f"lead {m.lead_s:.2f}, window {m.window_s:.2f})", flush=True)
        return row

    rng = random.Random(0)
    with open(os.path.join(args.out, "pool_reuse.jsonl"), "w") as fh:
        for index in range(args.rounds):
            order = list(KINDS)
            rng.shuffle(order)
            for kind in order:
                row = reading(kind, index)
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                time.sleep(args.pause_s)
    it = kept_iter[0]
    if it is not None:
        it._shutdown_workers()
    text = (f"# A kept worker pool against fresh readings: {spec.name}, num_workers={workers}, "
            f"prefetch_factor={args.prefetch}, pinned={cuda}, on {rows[0]['device']}\n\n"
            f"`python -m scripts.bench.pool_reuse --workload {spec.name} --rounds {args.rounds} --pause-s {args.pause_s:g}`\n\n"
            + summary(rows))
    with open(os.path.join(args.out, "pool_reuse.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
