"""Five unchanged retunes with a burner on, judged up to 0.95 of the CPUs taken by others, so that
nothing is set aside as busy: does the noise rule alone hold the alarm? Run from the repository's
root: ``python results/load/burner_quiet.py OUT_DIR``."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from burner import QUIET_BUSY, Burner  # noqa: E402

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    registry = os.path.join(out, "fleet.toml")
    with open(registry, "w") as fh:
        fh.write(f'[defaults]\nbudget = 10\ndevice = "cpu"\n\n[thresholds]\nbusy = {QUIET_BUSY}\n\n[[datasets]]\n'
                 f'name = "paced"\ndataset = "{ROOT}/tests/fleet_workloads.py:paced"\nbatch_size = 16\n')

    def run() -> None:
        done = subprocess.run([AUTOLOADER, "retune", registry, "--out", out, "--json", "--quiet"], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": ROOT}, check=False)
        entry = json.loads(done.stdout)["datasets"][0]
        drift = entry.get("drift") or {}
        print(done.returncode, entry["status"], (drift.get("load") or {}).get("others_cpus"), drift.get("rate_ratio"),
              drift.get("reasons"), flush=True)

    print("baseline, no burner:")
    run()
    with Burner():
        for _ in range(5):
            run()


if __name__ == "__main__":
    main(sys.argv[1])
