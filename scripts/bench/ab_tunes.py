"""``python -m scripts.bench.ab_tunes``: the tune's wall time with this checkout's code against
another checkout's (a change undone), interleaved on one machine.

A change meant to shorten the tune is judged by its wall time at the default budget, which moves
by 10-25 s with whether a final runs and how many rounds it takes (results/benchmarks/README.md):
set against a tune of an earlier day on another machine, the change cannot be told from that.
This runs ``autoloader tune`` as a user does (``tuner_run.Tuner``: ``--json --quiet``, a fresh
``--out``), each workload from both checkouts back to back, the order alternating from one pair to
the next (AB, BA, ...), so a machine that warms or tires as the run goes weighs on both alike.

    new   this checkout (the repository's root)
    base  ``--base DIR``: a copy of the repository with the change undone; its tuner runs with DIR
          as its working folder and first on PYTHONPATH, so it imports DIR's ``autoloader``

Out: ``ab_tunes.jsonl`` (one line a tune: arm, workload, wall time, the tune's phases, pick,
verdict) and ``ab_tunes.md`` (each arm's median wall time and each workload's pairs).

    cp -r autoloader scripts pyproject.toml /tmp/base/ && sed -i '...' /tmp/base/autoloader/...
    python -m scripts.bench.ab_tunes --base /tmp/base --out OUT                     # on the GPU
    AUTOLOADER_BENCH_SCALE=0.05 python -m scripts.bench.ab_tunes --base /tmp/base --device cpu \\
        --workloads heavytail --out /tmp/ab                                           # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

ARMS = ("new", "base")
DEFAULT_WORKLOADS = "hugefloat,heavytail,large"


def order(pair: int) -> tuple[str, str]:
    """The arms' order in the pair-th pair of a workload's tunes (counted over the whole run)."""
    return ARMS if pair % 2 == 0 else ARMS[::-1]


def base_env(base: str, repo: str) -> dict:
    """The environment for the base arm's tuner: ``base`` first on PYTHONPATH, and the repository's
    own root left out of it (else the repository's ``autoloader`` would be the one imported)."""
    env = dict(os.environ)
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and os.path.realpath(p) != os.path.realpath(repo)]
    env["PYTHONPATH"] = os.pathsep.join([base] + kept)
    return env


def summary(rows: list[dict]) -> str:
    """Each arm's median tune wall time, and each workload's tunes pair by pair."""
    lines = ["| arm | tunes | median wall s | each (s) |", "|---|---|---|---|"]
    for arm in ARMS:
        walls = [r["wall_s"] for r in rows if r["arm"] == arm and r.get("wall_s") is not None]
        if walls:
            lines.append(f"| {arm} | {len(walls)} | {statistics.median(walls):.1f} | "
                         f"{', '.join(f'{w:.1f}' for w in walls)} |")
    lines += ["", ("| workload | pair | arm | wall s | set-up / to profile / profile / search / final / other s | "
              "bursts, final runs | pick | verdict |"), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ph = r.get("phases") or {}
        parts = " / ".join(f"{ph.get(k, 0.0):.1f}" for k in ("set-up", "to profile", "profile", "search", "final", "other"))
        wall = f"{r['wall_s']:.1f}" if r.get("wall_s") is not None else "failed"
        lines.append(f"| {r['workload']} | {r['pair']} | {r['arm']} | {wall} | {parts if ph else '-'} | "
                     f"{ph.get('bursts', '-')}, {ph.get('final measurements', '-')} | {r.get('pick') or '-'} | "
                     f"{(r.get('verdict') or r.get('error') or '-')[:120]} |")
    diffs = {}
    for r in rows:
        diffs.setdefault((r["workload"], r["pair"]), {})[r["arm"]] = r.get("wall_s")
    paired = [d["new"] - d["base"] for d in diffs.values() if d.get("new") is not None and d.get("base") is not None]
    if paired:
        lines += ["", (f"new - base, paired by workload and pair: median {statistics.median(paired):+.1f} s over "
                  f"{len(paired)} pairs ({', '.join(f'{d:+.1f}' for d in paired)})")]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.ab_tunes", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="a copy of the repository with the change undone")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"comma-separated (default {DEFAULT_WORKLOADS})")
    parser.add_argument("--pairs", type=int, default=1, help="pairs of tunes a workload (1)")
    parser.add_argument("--budget", type=float, default=None, help="the tuner's budget (default: its own, 60 s)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when a GPU is visible)")
    parser.add_argument("--deadline-seconds", type=float, default=None,
                        help="begin no tune past this many seconds from the start (none)")
    parser.add_argument("--out", required=True, help="folder for ab_tunes.jsonl and ab_tunes.md")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.base, "autoloader")):
        raise SystemExit(f"--base must be a copy of the repository (a folder holding autoloader/); got {args.base!r}")
    if args.pairs < 1:
        raise SystemExit(f"--pairs must be at least 1; got {args.pairs}")

    from autoloader.inputs import hardware
    from scripts.bench.common import REPO, log, short
    from scripts.bench.quick import phases
    from scripts.bench.tuner_run import Tuner
    from scripts.bench.workloads import WORKLOADS

    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--workloads names {unknown}; the workloads are {', '.join(WORKLOADS)}")
    device = args.device or ("cuda" if hardware.gpu_names() else "cpu")
    os.makedirs(args.out, exist_ok=True)
    base = os.path.realpath(args.base)
    envs = {"new": None, "base": base_env(base, REPO)}
    cwds = {"new": REPO, "base": base}
    budget = args.budget or 60.0
    t0, rows, tuner, count = time.monotonic(), [], Tuner(), 0
    try:
        with open(os.path.join(args.out, "ab_tunes.jsonl"), "a") as fh:
            for pair in range(args.pairs):
                for name in names:
                    for arm in order(count):
                        if args.deadline_seconds is not None and time.monotonic() - t0 > args.deadline_seconds:
                            log(f"[ab] {name} {arm}: not begun, past the deadline of {args.deadline_seconds:.0f} s")
                            continue
                        w = WORKLOADS[name]
                        outcome = tuner.run(w.dataset_spec, w.step_spec, w.batch_size, args.budget, budget,
                                            f"ab-{arm}-{name}", ("--device", device), cwd=cwds[arm], env=envs[arm])
                        outcome.keep_stderr(args.out, f"{arm}-{name}-{pair}")
                        data = outcome.data
                        row = {"arm": arm, "workload": name, "pair": pair, "utc": time.strftime("%H:%M:%S", time.gmtime()),
                               "wall_s": outcome.wall_s if data else None, "phases": phases(data),
                               "pick": short(outcome.pick) if data else None,
                               "verdict": (data or {}).get("verdict"), "error": outcome.error}
                        rows.append(row)
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                        log(f"[ab] {name} {arm}: {outcome.wall_s:.1f} s; pick {row['pick']}; "
                            f"{row['verdict'] or outcome.error}")
                    count += 1
    finally:
        tuner.kill()
        text = summary(rows)
        with open(os.path.join(args.out, "ab_tunes.md"), "w") as fh:
            fh.write(f"`python -m scripts.bench.ab_tunes {' '.join(argv or __import__('sys').argv[1:])}` "
                     f"({device}; the run took {time.monotonic() - t0:.0f} s)\n\n" + text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
