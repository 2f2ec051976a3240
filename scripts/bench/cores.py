"""``python -m scripts.bench.cores``: default tunes of a CPU-bound dataset whose best is
``num_workers = CPUs``, and how often the tune picks it (NOTE [ Past the cores ] in
autoloader/search/choice.py; NOTE [ Loose readings ] in autoloader/search/results.py).

    python -m scripts.bench.cores --tunes 10 --out results/cores/run-YYYYMMDD

Each sample costs ``--cost-ms`` of pure-Python CPU that holds the GIL, so only worker processes
run samples in parallel and past one worker a CPU they only share the cores; with no step, the
loop's pace is the loader's. First, one interleaved check of num_workers 0 .. CPUs+2 read by plain
DataLoaders in this process (rounds A B C ... A B C ..., each a fixed count of batches after one
warm-up epoch's start) says which count is best on this machine now; then ``--tunes`` default
``autoloader tune`` runs, each into a fresh folder (no warm start, no stored result), and for each:
the pick, its rate, whether num_workers = CPUs was measured in the run, the wall time and the load
average around it. Records go to OUT/records.jsonl, the table to OUT/summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader

from tests.workloads import BusyWork

# The repository's root: the tune resolves the dataset's spec from here.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_samples() -> BusyWork:
    """Samples of ``--cost-ms`` CPU each (the tests' ``BusyWork``: a spin that holds the GIL)."""
    return BusyWork(cost_s=float(os.environ.get("AUTOLOADER_BENCH_COST_MS", "3")) / 1000)


def loads() -> tuple[float, float, float]:
    return os.getloadavg()


def check(cpus: int, batch_size: int, batches: int, rounds: int) -> dict[int, list[float]]:
    """Samples/s of num_workers 0 .. cpus+2, interleaved over ``rounds``, each round ``batches``
    batches after the loader's first batch."""
    rates: dict[int, list[float]] = {n: [] for n in range(cpus + 3)}
    dataset = cpu_samples()
    for _ in range(rounds):
        for n in rates:
            loader = DataLoader(dataset, batch_size=batch_size, num_workers=n, shuffle=True,
                                persistent_workers=False, prefetch_factor=2 if n else None)
            it = iter(loader)
            next(it)
            start = time.perf_counter()
            for _ in range(batches):
                next(it)
            rates[n].append(batches * batch_size / (time.perf_counter() - start))
            del it
    return rates


def tune_once(budget: float | None, batch_size: int, cpus: int) -> dict:
    out = tempfile.mkdtemp(prefix="autoloader-cores-")
    command = [sys.executable, "-m", "autoloader.cli", "tune", "--dataset", "scripts.bench.cores:cpu_samples",
               "--batch-size", str(batch_size), "--device", "cpu", "--json", "--out", out]
    if budget is not None:
        command += ["--budget", f"{budget:g}"]
    before, start = loads(), time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    wall, after = time.monotonic() - start, loads()
    record = {"command": " ".join(command[1:]), "exit": done.returncode, "wall_s": wall,
              "load_before": before, "load_after": after}
    try:
        data = json.loads(done.stdout)
        with open(data["path"]) as fh:
            stored = json.load(fh)
        trials = [t for t in stored["trials"] if t["status"] == "ok"]
        record.update(pick=data["config"]["num_workers"], rate=data["samples_per_s"],
                      measured=sorted({t["config"]["num_workers"] for t in trials}),
                      finals=[f["config"]["num_workers"] for f in stored.get("finals") or []],
                      cores_measured=any(t["config"]["num_workers"] == cpus for t in trials),
                      busy=(stored.get("load") or {}).get("busy"))
    except (ValueError, KeyError, OSError) as exc:
        record.update(error=f"{type(exc).__name__}: {exc}", stderr=done.stderr[-2000:])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return record



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.cores", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tunes", type=int, default=10)
    parser.add_argument("--budget", type=float, default=None, help="the tune's budget (default: its own, 60 s)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--check-rounds", type=int, default=3, help="rounds of the interleaved check (0: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    os.chdir(REPO)
    from autoloader.inputs import hardware

    cpus = hardware.usable_cpus()
    os.makedirs(args.out, exist_ok=True)
    shown = "python -m scripts.bench.cores " + " ".join(argv if argv is not None else sys.argv[1:])
    records = open(os.path.join(args.out, "records.jsonl"), "a")

    def write(**record):
        records.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **record}) + "\n")
        records.flush()

    write(phase="meta", command=shown, cpus=cpus, hardware=hardware.detect().to_dict())
    rates = {}
    if args.check_rounds:
        before = loads()
        rates = check(cpus, args.batch_size, 40, args.check_rounds)
        write(phase="check", rates=rates, load_before=before, load_after=loads())
        print("check:", {n: round(statistics.median(r)) for n, r in rates.items()}, flush=True)
    tunes = []
    for i in range(args.tunes):
        record = tune_once(args.budget, args.batch_size, cpus)
        write(phase="tune", index=i, **record)
        tunes.append(record)
        print(f"tune {i + 1}: pick w{record.get('pick')} at {record.get('rate') or 0:,.0f}/s, measured "
              f"{record.get('measured')}, final {record.get('finals')}, exit {record['exit']}, "
              f"{record['wall_s']:.0f} s, load {record['load_before'][0]:.1f} -> {record['load_after'][0]:.1f}",
              flush=True)
    records.close()
    picked = sum(1 for t in tunes if t.get("pick") == cpus)
    lines = [f"# Default tunes of a CPU-bound dataset on {cpus} CPUs: how often num_workers = CPUs is picked", "",
             f"`{shown}`", ""]
    if rates:
        medians = {n: statistics.median(r) for n, r in rates.items()}
        best = max(medians, key=medians.get)
        lines += [f"Interleaved check ({args.check_rounds} rounds, plain DataLoaders, no step), median samples/s: "
                  + ", ".join(f"w{n} {m:,.0f}" for n, m in medians.items()) + f"; best w{best}.", ""]
    lines += [f"Picked num_workers = {cpus}: **{picked} of {len(tunes)}**.", "",
              "| # | pick | its rate | measured | final | w=CPUs measured | busy | exit | wall s | load 1 min before, after |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for i, t in enumerate(tunes, 1):
        lines.append(f"| {i} | w{t.get('pick', '-')} | {t.get('rate') or 0:,.0f}/s | {t.get('measured', '-')} | "
                     f"{t.get('finals', '-')} | {t.get('cores_measured', '-')} | {t.get('busy', '-')} | {t['exit']} | "
                     f"{t['wall_s']:.0f} | {t['load_before'][0]:.1f}, {t['load_after'][0]:.1f} |")
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if picked == len(tunes) else 1


if __name__ == "__main__":
    sys.exit(main())
