"""``python -m scripts.bench tunes``: each workload's ``autoloader tune`` as a user runs it (its
default budget), and what the report (autoloader/explain) makes of each result.

    python -m scripts.bench tunes --workloads jpeg,small,large --out OUT     # the GPU machine

Records go to OUT/records.jsonl (phase ``tuner``, the tuner's JSON under ``tuner``, as ``run``
writes them, so ``verdicts`` and ``replay`` read them), the table to OUT/summary.md: the
verdict's class, the loop's wait, the top what-if with its predicted gain and tuned / ceiling,
beside what each workload was built to stress. No grid, no final of its own: the pick's own
rate is the tuner's.
"""

from __future__ import annotations

import argparse
import os
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scripts.bench.run import DEFAULT_WORKLOADS

    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS, help="comma-separated names (default: the eight)")
    parser.add_argument("--budget", type=float, default=None, help="the tuner's budget (default: its own, 60 s)")
    parser.add_argument("--scale", type=float, default=None, help="AUTOLOADER_BENCH_SCALE for a small CPU run")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when a GPU is visible)")
    parser.add_argument("--out", required=True, help="folder for records.jsonl and summary.md")


def main(args) -> int:
    if args.scale is not None:
        os.environ["AUTOLOADER_BENCH_SCALE"] = str(args.scale)
    from autoloader.explain import benchmark_row
    from autoloader.inputs import hardware
    from scripts.bench.common import REPO, log, short
    from scripts.bench.harness import Interrupted, begin_run
    from scripts.bench.tuner_run import Tuner, shown
    from scripts.bench.whatif import verdict_table
    from scripts.bench.workloads import WORKLOADS

    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    os.makedirs(args.out, exist_ok=True)
    os.chdir(REPO)
    device = args.device or ("cuda" if hardware.gpu_names() else "cpu")
    records = begin_run(args.out, time.strftime("%Y%m%dT%H%M%S"),
                        {"command": "tunes", "workloads": names, "budget": args.budget, "device": device,
                         "hardware": hardware.detect().to_dict()})
    rows, picks, tuner = [], {}, Tuner()
    try:
        for name in names:
            w = WORKLOADS[name]
            log(f"[{name}] tuner (budget {args.budget or 'default'})")
            outcome = tuner.run(w.dataset_spec, w.step_spec, w.batch_size, args.budget, args.budget or 60.0,
                                f"tunes-{name}", ("--device", device))
            records.write(workload=name, phase="tuner", round=None, tuner=outcome.data, error=outcome.error,
                          wall_s=outcome.wall_s, command=shown(outcome.command))
            if outcome.data is None:
                log(f"[{name}] tuner failed: {outcome.error}")
                continue
            rows.append((name, benchmark_row(outcome.result)))
            picks[name] = (short(outcome.pick), outcome.result.samples_per_s, outcome.wall_s)
            log(f"[{name}] pick {picks[name][0]} at {picks[name][1]:,.0f}/s: {rows[-1][1]['headline']}")
    except Interrupted as exc:
        log(f"interrupted: {exc}")
    finally:
        tuner.kill()
        records.close()
    lines = ["# The report's verdicts, one tune a workload", "",
             f"`python -m scripts.bench tunes --workloads {','.join(names)}"
             + (f" --budget {args.budget:g}" if args.budget else "") + (f" --scale {args.scale:g}" if args.scale else "")
             + f" --out {args.out}`", "", *verdict_table(rows), "",
             "| workload | built to stress | pick | its rate | tune s |", "|---|---|---|---|---|"]
    for name, (pick, rate, wall) in picks.items():
        lines.append(f"| {name} | {WORKLOADS[name].description} | {pick} | {rate:,.0f}/s | {wall:.0f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0
