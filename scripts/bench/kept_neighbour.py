"""``python -m scripts.bench.kept_neighbour``: whether a final's kept worker pool leaves the
next config's reading alone, and what keeping it saves the kept config's readings.

The final reads its configs round after round in one trial process (the pick, then the rule),
and keeps the pool of a config that keeps its workers between its readings (NOTE [ A kept pool in
the final ] in autoloader/probe/kept.py). A pool kept while its workers still make their backlog
took the next reading of num_workers=0 on hugefloat from 1,643/s to 89/s on an H100
(results/benchmarks/run-20261205/quick2-h100); the tuner now keeps a pool only once it is idle.
This script measures that, through autoloader's own TrialRunner, in two trial processes side by
side, in rounds whose order is shuffled:

  fresh  the rule's reading a fresh pool, ended after (keep=False), then the neighbour's reading;
  kept   the rule's reading with keep=True (its first starts the pool, each later one resumes it),
         then the neighbour's reading, the rule's pool idle in that process meanwhile.

Out: one JSON line a reading (``kept_neighbour.jsonl``) and ``kept_neighbour.md``: the
neighbour's rate after a kept rule over its rate after a fresh one, and the rule's kept reading
over its fresh one, each paired by round with its 95% interval; each kind's wall time a reading.

    python -m scripts.bench.kept_neighbour --out OUT                 # hugefloat: w0 beside the rule
    AUTOLOADER_BENCH_SCALE=0.05 python -m scripts.bench.kept_neighbour --device cpu --rounds 2 --out /tmp/k
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

KINDS = ("fresh", "kept")


def paired(rows: list[dict], role: str) -> list[tuple[float, float]]:
    """(kept, fresh) rates of ``role`` by round, for the rounds that read both."""
    by = {(r["kind"], r["round"]): r["samples_per_s"] for r in rows if r["role"] == role and r["samples_per_s"]}
    return [(by[("kept", i)], by[("fresh", i)]) for i in sorted({r["round"] for r in rows})
            if ("kept", i) in by and ("fresh", i) in by]


def summary(rows: list[dict]) -> str:
    """The table of each kind's readings, and the two paired ratios."""
    from autoloader.search.paired import compared, paired_ratio

    lines = ["| kind | role | readings | wall s a reading (median; each) | samples/s (median; each) |",
             "|---|---|---|---|---|"]
    for kind in KINDS:
        for role in ("rule", "neighbour"):
            got = [r for r in rows if r["kind"] == kind and r["role"] == role]
            if not got:
                continue
            walls = [r["wall_s"] for r in got]
            rates = [r["samples_per_s"] or 0.0 for r in got]
            lines.append(f"| {kind} | {role} | {len(got)} | {statistics.median(walls):.2f} "
                         f"({', '.join(f'{w:.1f}' for w in walls)}) | {statistics.median(rates):,.0f} "
                         f"({', '.join(f'{v:,.0f}' for v in rates)}) |")
    lines.append("")
    for role, what in (("neighbour", "the neighbour's reading after a kept rule, over after a fresh one"),
                       ("rule", "the rule's kept reading over its fresh one")):
        pairs = paired(rows, role)
        ratio = paired_ratio(pairs) if pairs else None
        lines.append(f"- {what}, paired by round ({len(pairs)}): "
                     + (f"{ratio.ratio:.3f}x; {compared(ratio, 'the fresh one')}" if ratio else "no pair"))
    later = [r for r in rows if r["kind"] == "kept" and r["role"] == "rule" and r["round"] > 0]
    fresh = [r for r in rows if r["kind"] == "fresh" and r["role"] == "rule"]
    if later and fresh:
        lines.append(f"- the rule's resumed reading took {statistics.median(r['wall_s'] for r in later):.2f} s, "
                     f"a fresh one {statistics.median(r['wall_s'] for r in fresh):.2f} s (medians, wall time "
                     "through the trial process, the kept one's wait for its idle pool included)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.kept_neighbour", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="hugefloat")
    parser.add_argument("--neighbour-workers", type=int, default=0, help="the neighbour's num_workers (0)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--device", default=None, help="cuda when there is one, else cpu")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.neighbour_workers < 0:
        parser.error(f"--rounds must be at least 2 and --neighbour-workers at least 0, got {args.rounds} and "
                     f"{args.neighbour_workers}")

    import psutil
    import torch

    from autoloader.inputs.source import Source
    from autoloader.probe.driver import TrialRunner
    from autoloader.probe.protocol import RunnerSetup
    from autoloader.search.policy import FINAL_SETTINGS
    from autoloader.search.space import LoaderConfig
    from scripts.bench import workloads as W

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    pin = device.startswith("cuda")
    w = W.WORKLOADS[args.workload]
    cpus = len(os.sched_getaffinity(0)) or 2
    rule = LoaderConfig.make(w.batch_size, max(1, cpus - 1), pin, 2, True)
    neighbour = (LoaderConfig.make(w.batch_size, 0, pin) if args.neighbour_workers == 0 else
                 LoaderConfig.make(w.batch_size, args.neighbour_workers, False, 2, False))
    runners = {kind: TrialRunner(RunnerSetup(Source.from_spec(w.dataset_spec), Source.from_spec(w.step_spec),
                                             device, {}, w.batch_size),
                                 max_memory=int(0.4 * psutil.virtual_memory().available), hang_timeout_s=120.0)
               for kind in KINDS}
    name = torch.cuda.get_device_name(0) if pin else "cpu"
    os.makedirs(args.out, exist_ok=True)
    rows: list[dict] = []
    rng = random.Random(0)
    try:
        for runner in runners.values():
            runner.start()
        with open(os.path.join(args.out, "kept_neighbour.jsonl"), "w") as fh:
            for index in range(args.rounds):
                order = list(KINDS)
                rng.shuffle(order)
                for kind in order:
                    for role, config in (("rule", rule), ("neighbour", neighbour)):
                        t0 = time.perf_counter()
                        result = runners[kind].measure(config, FINAL_SETTINGS, keep=kind == "kept")
                        wall = time.perf_counter() - t0
                        row = {"kind": kind, "role": role, "round": index, "key": config.key, "wall_s": wall,
                               "status": result.status, "samples_per_s": result.samples_per_s,
                               "startup_s": result.startup_s, "lead_s": result.lead_s, "window_s": result.window_s,
                               "teardown_s": result.teardown_s, "error": result.error, "workload": w.name,
                               "device": name}
                        rows.append(row)
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                        print(f"[kept_neighbour] r{index} {kind} {role} {config.key}: {wall:.2f} s, "
                              f"{(result.samples_per_s or 0):,.0f}/s {result.status} (start {result.startup_s or 0:.2f}, "
                              f"lead {result.lead_s or 0:.2f}, teardown {result.teardown_s or 0:.2f})", flush=True)
    finally:
        for runner in runners.values():
            runner.close()
    text = (f"# A kept pool beside the next reading: {w.name}, the rule {rule.key} and the neighbour "
            f"{neighbour.key}, on {name}\n\n`python -m scripts.bench.kept_neighbour --workload {w.name} "
            f"--rounds {args.rounds}`\n\n" + summary(rows))
    with open(os.path.join(args.out, "kept_neighbour.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
