"""Issue 51's busy machine: ``autoloader tune --budget 60`` of a dataset of 4 MiB samples beside
4 CPU spinners (two per CPU on the 2-CPU machine), RUNS times; each run's exit code (0 with a
measured pick, or 5 with the load said; never 1), its pick or its error line, and the load.
Run from the repository's root: ``python results/load/busy_tune.py OUT_DIR [RUNS]``."""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from burner import Burner, background  # noqa: E402

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")


def one(out: str) -> tuple[int, str]:
    """One tune beside the spinners: (exit code, what it said in a line); its stderr is kept in
    OUT/stderr.log."""
    os.makedirs(out, exist_ok=True)
    t0 = time.monotonic()
    done = subprocess.run([AUTOLOADER, "tune", "--dataset", f"{ROOT}/tests/where_workloads.py:big", "--batch-size",
                           "16", "--budget", "60", "--device", "cpu", "--out", out, "--json"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT, "AUTOLOADER_BUSY_SHARE": "0.5"},
                          check=False)
    wall = time.monotonic() - t0
    with open(os.path.join(out, "stderr.log"), "w") as fh:   # the run's progress lines, for the record
        fh.write(done.stderr)
    if done.returncode == 0:
        data = json.loads(done.stdout)
        load = data.get("load") or {}
        trials = data["trials"]
        said = (f"pick {data['config']} at {data['samples_per_s']:.1f}/s, {sum(t['status'] == 'ok' for t in trials)} "
                f"of {len(trials)} trials measured, {len(data['finals'])} in the final, provisional: "
                f"{data.get('provisional')}; others {load.get('others_cpus')} of {load.get('usable_cpus')} CPUs")
    else:
        said = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
    return done.returncode, f"exit {done.returncode} in {wall:.0f} s: {said}"


def main(out: str, runs: int = 5) -> None:
    os.makedirs(out, exist_ok=True)
    print(f"background before the spinners: {background():.2f} CPUs busy", flush=True)
    codes = []
    with Burner(per_cpu=2):
        for i in range(runs):
            code, line = one(os.path.join(out, f"run{i}"))
            codes.append(code)
            print(line, flush=True)
    print(f"exit codes {codes}: {sum(c in (0, 5) for c in codes)} of {runs} answered (0 or 5), "
          f"{codes.count(1)} exit 1", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
