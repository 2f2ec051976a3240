"""``python -m scripts.bench run``: measure workloads (harness.py) and write the summary.

Every measurement is appended to OUT/records.jsonl as it is made; OUT/summary.md and
OUT/results.json are written when the run starts (the plan, nothing measured yet) and rewritten
after each workload, so a run started in the background can be polled, and a killed run keeps
what it finished (``rebuild`` writes the summary from the records alone).

Time: each workload has a wall budget (--workload-seconds). The tuner(s), the worker sweep, the
final round and the ceiling always run; the grid's variants run in priority order only while
the estimated cost of what must still follow fits the budget. Skipped variants are listed.
--deadline-seconds bounds the whole run (a device call is killed outright at its limit, with no
chance to write a summary): tunes, variants, final rounds and whole workloads that the time left
cannot hold are not begun, and the summary says which.

--stability W[,W]: three fresh tunes of W, their picks in one interleaved round, and whether they
read within 2% of each other. A W also in --workloads is measured there in full: its first tune
is the workload's own, and the three picks join its final. Other Ws are checked alone, after
the workloads (tunes and a round of the picks; no grid, no ceiling).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import shlex
import time

from autoloader.api import DEFAULT_BUDGET_S
from autoloader.inputs import hardware
from scripts.bench import plan
from scripts.bench.common import REPO, log
from scripts.bench.harness import Interrupted, Mode, Workload, begin_run
from scripts.bench.report import (
    METHOD,
    VARIANTS_TEXT,
    one_line,
    run_state,
    table,
    write_summary,
)

DEFAULT_WORKLOADS = "jpeg,small,large,startup,heavytail,gpubound,hugefloat,pyobjects"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                        help="comma-separated names from scripts/bench/workloads (default: all eight)")
    parser.add_argument("--out", default="results/benchmarks", help="folder for records.jsonl and summary.md")
    parser.add_argument("--scale", type=float, default=None,
                        help="AUTOLOADER_BENCH_SCALE for the workloads (default: the environment's, else 1.0)")
    parser.add_argument("--quick", action="store_true",
                        help=f"CPU smoke test: workers {{0,1,2}}, {plan.QUICK_ROUNDS} round, short windows, "
                             f"tuner --budget {plan.QUICK_TUNER_BUDGET:g} (unless --tuner-budget)")
    parser.add_argument("--grid", choices=plan.GRIDS, default="full",
                        help="full: the sweep 0,2,4,8,12,16,24 and four variants at its best two counts, the "
                             "top 3 into the final; lean: workers 0, cpus/4, cpus/2, cpus-1, cpus, 1.5 cpus, "
                             "prefetch 8 at the best, the top 2 into the final, shorter windows (NOTE [ The grid ] "
                             "in plan.py)")
    parser.add_argument("--sweep", default=None, metavar="N,N,...",
                        help="worker counts of the grid's sweep (default: the --grid's; quick 0,1,2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"runs of each config in the interleaved final (default {plan.ROUNDS}; "
                             f"quick {plan.QUICK_ROUNDS})")
    parser.add_argument("--tuner-budget", type=float, default=None, metavar="S",
                        help="pass --budget S to `autoloader tune` (default: none, the tuner's own default; "
                             f"quick {plan.QUICK_TUNER_BUDGET:g})")
    parser.add_argument("--stability", default=None, metavar="W[,W]",
                        help="three fresh tunes of each W, their picks in one interleaved round: do they read "
                             "within 2%% of each other?")
    parser.add_argument("--workload-seconds", type=float, default=None,
                        help="wall budget per workload; grid variants that do not fit are skipped "
                             f"(default full {plan.WORKLOAD_SECONDS['full']:.0f}, lean "
                             f"{plan.WORKLOAD_SECONDS['lean']:.0f}, quick {plan.WORKLOAD_SECONDS['quick']:.0f})")
    parser.add_argument("--deadline-seconds", type=float, default=None,
                        help="wall time the whole run must end within (e.g. a device session's time less a "
                             "margin): tunes, grid variants, final rounds and whole workloads that would not "
                             "fit are left out and the summary says so, instead of the run being killed")


def _names(text: str | None) -> list[str]:
    return list(dict.fromkeys(n.strip() for n in (text or "").split(",") if n.strip()))


def make_mode(args, parser, cpus: int, t_begin: float) -> Mode:
    profile = "quick" if args.quick else args.grid
    grid, final = plan.SETTINGS[profile]
    budget = args.tuner_budget if args.tuner_budget is not None else (plan.QUICK_TUNER_BUDGET if args.quick else None)
    if budget is not None and not budget > 0:
        parser.error("--tuner-budget must be > 0")
    mode = Mode(plan.sweep_for(args.grid, cpus, args.quick), grid, final,
                plan.QUICK_ROUNDS if args.quick else plan.ROUNDS, plan.CEILING[profile], budget,
                args.workload_seconds or plan.WORKLOAD_SECONDS[profile], plan.CEILING_ESTIMATE_S[profile],
                name=profile, variants="lean" if args.grid == "lean" else "full",
                top_from_grid=plan.TOP_FROM_GRID[args.grid],
                budget_s=budget if budget is not None else DEFAULT_BUDGET_S,
                floor_extra_s=plan.FLOOR_EXTRA_S[profile])
    if args.sweep:
        try:
            mode.sweep = tuple(sorted({int(n) for n in args.sweep.split(",") if n.strip()}))
        except ValueError:
            parser.error("--sweep takes comma-separated worker counts, e.g. 0,2,4,8")
        if not mode.sweep or min(mode.sweep) < 0:
            parser.error("--sweep needs worker counts >= 0")
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be 1 or more")
        mode.rounds = args.rounds
    if args.deadline_seconds is not None:
        if not args.deadline_seconds > 0:
            parser.error(f"--deadline-seconds must be > 0, got {args.deadline_seconds}; "
                         "pass the device time left less a margin, e.g. 1500")
        mode.deadline = t_begin + args.deadline_seconds
    return mode


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def main(args, parser, argv: list[str]) -> int:
    """``args`` parsed by ``parser`` (add_arguments) from ``argv``, the words after
    ``python -m scripts.bench`` (the command's record)."""
    t_begin = time.monotonic()  # a device call's limit started a little earlier (interpreter, imports)
    out = os.path.abspath(args.out)  # before chdir: relative to where the command was given
    os.makedirs(out, exist_ok=True)
    os.chdir(REPO)  # the tuner and the runner resolve the workloads' specs from the root
    if args.scale is not None:
        if not args.scale > 0:
            parser.error("--scale must be > 0")
        os.environ["AUTOLOADER_BENCH_SCALE"] = repr(args.scale)
    scale = os.environ.setdefault("AUTOLOADER_BENCH_SCALE", "1.0")

    from scripts.bench.workloads import WORKLOADS

    names, checked = _names(args.workloads), _names(args.stability)
    unknown = [n for n in names + checked if n not in WORKLOADS]
    if unknown or not (names or checked):
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    alone = [n for n in checked if n not in names]

    cpus = hardware.usable_cpus()
    mode = make_mode(args, parser, cpus, t_begin)
    gpus = hardware.gpu_names()  # cuda when NVML sees a GPU (as the tuner decides), never through torch.cuda here
    device = "cuda" if gpus else "cpu"
    machine = hardware.detect()
    import psutil

    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    estimates = {n: plan.estimate(mode, cpus, 3 if n in checked else 1) for n in names}
    estimates.update({n: plan.estimate(mode, cpus, 3, grid=False) for n in alone})
    total = sum(e.total for e in estimates.values())
    plain = plan.estimate(mode, cpus)
    plan_text = (f"a workload {plain.text()}; " + "".join(f"{n} with --stability {estimates[n].text()}; " for n in checked)
                 + f"all {len(estimates)}: about {total:.0f} s"
                 + (f" ({args.deadline_seconds:.0f} s allowed by --deadline-seconds"
                    + ("; what does not fit is left out, the last in order first)" if total > args.deadline_seconds else ")")
                    if args.deadline_seconds else ""))
    tuner_budget = (f"--budget {mode.tuner_budget:g}" if mode.tuner_budget is not None
                    else f"its default budget ({mode.budget_s:g} s)")
    meta = {
        "command": " ".join([f"AUTOLOADER_BENCH_SCALE={scale}", "python3", "-m", "scripts.bench"]
                            + [shlex.quote(a) for a in argv]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "run_id": run_id,
        "gpu": gpus[0] if gpus else None, "gpus": list(gpus), "cpus": cpus, "cpu_model": machine.cpu_model,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1), "device": device,
        "python": platform.python_version(), "torch": _version("torch"), "torchvision": _version("torchvision"),
        "optuna": _version("optuna"), "scale": scale, "mode": "quick" if args.quick else args.grid,
        "workload_seconds": mode.workload_seconds, "workloads": names, "stability": checked, "plan": plan_text,
        "method": METHOD.format(
            sweep="{" + ", ".join(map(str, mode.sweep)) + "}", rounds=mode.rounds, tuner_budget=tuner_budget,
            grid_win=f"{mode.grid.min_window_s:g}-{mode.grid.max_window_s:g} s",
            grid_target=f"{mode.grid.target_rel_interval * 100:g}%", variants=VARIANTS_TEXT[mode.variants],
            top=mode.top_from_grid, final_win=f"{mode.final.min_window_s:g}-{mode.final.max_window_s:g} s",
            stability=(" Stability (" + ", ".join(checked) + "): three fresh tunes, each with its own --out, and "
                       "their picks in one interleaved round (the workload's final when it is measured too)."
                       if checked else "")),
    }
    log(f"bench {run_id}: {', '.join(names + [n + ' (stability)' for n in alone])} on {meta['gpu'] or 'CPU'}, "
        f"{cpus} CPUs, {meta['ram_gib']} GiB, scale {scale}, {meta['mode']} mode, tuner {tuner_budget} -> {out}")
    log(f"plan: {plan_text}")

    records = begin_run(out, run_id, meta)
    summaries: list[dict] = []
    interrupted = False
    write_summary(out, summaries, meta, "in progress")
    t_all = time.monotonic()
    for name in names + alone:
        tunes = 3 if name in checked else 1
        # A measured workload begins when one tune and the rest fit (its stability tunes are then
        # cut by the deadline, and say so); a stability check alone needs its three tunes.
        floor = mode.floor_s(1) if name in names else 3 * 1.1 * mode.budget_s + 30.0
        if mode.seconds_left() < floor:
            reason = (f"not begun: {max(0.0, mode.seconds_left()):.0f} s were left of --deadline-seconds, "
                      f"a workload needs about {floor:.0f} s")
            log(f"[{name}] {reason}")
            records.write(workload=name, phase="skipped", round=None, reason=reason)
            meta.setdefault("not_run", []).append(f"{name} ({reason})")
            continue
        bench = Workload(WORKLOADS[name], mode, records, out, device, cpus, tunes=tunes, grid=name in names)
        try:
            bench.run()
        except Interrupted as exc:
            interrupted = True
            log(f"[{name}] interrupted by {exc}; writing what was measured")
        summary = bench.summary()
        if bench.ceiling_facts and bench.ceiling_facts.get("gpu_name"):
            meta["gpu_torch"] = bench.ceiling_facts["gpu_name"]
            meta["torch_in_child"] = bench.ceiling_facts.get("torch")
        summaries.append(summary)
        records.write(workload=name, phase="summary", round=None, summary=summary)
        log(one_line(summary))
        write_summary(out, summaries, meta, "interrupted" if interrupted else "in progress")
        if interrupted:
            break
    meta["total_seconds"] = time.monotonic() - t_all
    body = write_summary(out, summaries, meta, run_state(summaries, meta.get("not_run", []), interrupted))
    records.close()
    # The short table at the very end, for the log.
    log("")
    log("```")
    log(meta["command"])
    log("```")
    log(table(summaries))
    log(f"\n(total {meta['total_seconds']:.0f} s, planned {total:.0f} s; full report {os.path.join(out, 'summary.md')}, "
        f"{len(body)} chars)")
    return 1 if interrupted else 0
