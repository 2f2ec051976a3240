"""How far one config's rate moves between two of its readings in the in-run climb, from the GPU
bench's stored runs (``results/inrun/gpu-*/results.json``, scripts/bench/inrun_gpu.py): the bound
a one-pair win must clear (schedule.py's FAR_AHEAD, NOTE [ The climb ]).

    python -m scripts.bench.reading_drift [--out results/inrun/<name>] [RESULTS.json ...]

For each tuned epoch, each reading paired in a round and the next reading of the same config in a
later round within three readings (the climb's next pair): their log rate ratio. A run's rates are
``made`` where its segments store ``served_per_s`` beside them (rated by what the workers made,
autoloader/inrun/made.py), else ``served`` (as the loop was served, stock included). Printed (and
written as ``summary.md`` and ``drift.json`` with ``--out``): per run, the count and the largest
move either way; over all, the quantiles of the moves' size.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys


def moves(segments: list[dict]) -> list[float]:
    """Log rate ratios of each paired reading to its config's next paired reading in a later round,
    within the three readings after it."""
    key = lambda s: json.dumps(s["config"], sort_keys=True)
    out = []
    for i, s in enumerate(segments):
        if s.get("round") is None or not s.get("samples_per_s"):
            continue
        for later in segments[i + 1:i + 4]:
            if key(later) == key(s) and later.get("round") not in (None, s["round"]) and later.get("samples_per_s"):
                out.append(math.log(later["samples_per_s"] / s["samples_per_s"]))
                break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", help="results.json files (default: results/inrun/gpu-*/results.json)")
    parser.add_argument("--out", help="a folder for summary.md and drift.json")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    paths = args.results or sorted(glob.glob("results/inrun/gpu-*/results.json"))
    if not paths:
        parser.error("no results.json given and none under results/inrun/gpu-*/: pass the bench's results files")
    runs = {}
    for path in paths:
        try:
            data = json.load(open(path))
        except (OSError, ValueError) as e:
            parser.error(f"cannot read {path}: {e}; pass inrun_gpu.py's results.json files")
        for name, workload in data.get("workloads", {}).items():
            segments = workload.get("epochs", {}).get("in_run", {}).get("segments", [])
            made = any("served_per_s" in s for s in segments)   # rated by what workers made (made.py) since it
            runs[f"{os.path.basename(os.path.dirname(path))} {name} ({'made' if made else 'served'})"] = moves(segments)
    lines = ["# How far a rate moves between two readings of one config (in-run climb, GPU bench)", "",
             f"- command: `{' '.join(['python -m scripts.bench.reading_drift', *argv])}`", "",
             "| run | moves | largest up | largest down |", "|---|---|---|---|"]
    for run, ms in runs.items():
        if ms:
            lines.append(f"| {run} | {len(ms)} | {max(ms):+.3f} | {min(ms):+.3f} |")
    for kind in ("made", "served"):
        sizes = sorted(abs(m) for run, ms in runs.items() if run.endswith(f"({kind})") for m in ms)
        if sizes:
            q = statistics.quantiles(sizes, n=20, method="inclusive") if len(sizes) >= 2 else [sizes[0]] * 19
            lines += ["", f"Rates {kind}: over {len(sizes)} moves, the size |log ratio|: median "
                          f"{statistics.median(sizes):.3f}, 95th percentile {q[18]:.3f}, largest {sizes[-1]:.3f} "
                          f"(x{math.exp(sizes[-1]):.2f})."]
    text = "\n".join(lines) + "\n"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "summary.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "drift.json"), "w") as f:
            json.dump(runs, f, indent=1)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
