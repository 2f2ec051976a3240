"""What-ifs, made and measured: a change the report predicts a gain for, against the gain measured.

    python -m scripts.bench whatif --items hugefloat:uint8,heavytail:in_order --out OUT   # the GPU machine
    python -m scripts.bench whatif --items hugefloat:pin_off --scale 0.02 --budget 15 --out /tmp/w  # CPU smoke
    python -m scripts.bench verdicts RUN/records.jsonl [MORE ...]   # the verdict of every recorded tune

For each workload named in ``--items`` it runs ``autoloader tune`` as a user would (its default
budget unless ``--budget``), asks the report (autoloader/explain) for the named what-ifs of that
result, and then measures the tuner's pick as it is (or the config the what-if's gain is over,
where that is not the pick: ``WhatIf.base_config``) against the what-if's config with the change
made, interleaved in ``--rounds`` rounds of fresh loaders (the order shuffled each round), in
this one run. The measured gain is the median over rounds of the paired ratio (changed / as is)
less one: the protocol's way of separating a few percent (shared/BENCHMARK.md). A change to the
loader (in_order, pin_off, workers, workers_past_cores) runs on the workload's own dataset; a
change to the data (uint8) on the workload's variant that makes it (``VARIANTS``: the same
samples as uint8, normalised on the device by its step). Records go to OUT/records.jsonl (phases
``tuner``, ``whatif``, ``whatif_summary``) and the table to OUT/summary.md.

``verdicts`` reads records only: the report's verdict and top what-if of each tuner result they
hold, computed with the code checked out now.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from scripts.bench.records import report_main

# The workload that makes a data what-if's change, by (workload, what-if).
VARIANTS = {("hugefloat", "uint8"): "hugefloat8", ("large", "uint8"): "large8"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", required=True, help="WORKLOAD:WHATIF,... (e.g. hugefloat:uint8,heavytail:in_order)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the two configs (default 5)")
    parser.add_argument("--budget", type=float, default=None, help="the tuner's budget (default: its own, 60 s)")
    parser.add_argument("--scale", type=float, default=None, help="AUTOLOADER_BENCH_SCALE for a small CPU run")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when a GPU is visible)")
    parser.add_argument("--out", required=True, help="folder for records.jsonl and summary.md")


def _items(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        workload, sep, name = item.partition(":")
        if not sep or not workload or not name:
            raise SystemExit(f"--items takes WORKLOAD:WHATIF pairs, got {item!r} (e.g. hugefloat:uint8)")
        out.setdefault(workload, []).append(name)
    return out


def main(args) -> int:
    if args.scale is not None:
        os.environ["AUTOLOADER_BENCH_SCALE"] = str(args.scale)
    from autoloader.explain import benchmark_row, explain
    from autoloader.inputs import hardware
    from autoloader.inputs.source import Source
    from autoloader.probe.driver import TrialRunner
    from autoloader.probe.protocol import RunnerSetup
    from autoloader.search.policy import FINAL_SETTINGS
    from autoloader.search.results import OK
    from scripts.bench.common import REPO, log, short
    from scripts.bench.harness import Interrupted, begin_run
    from scripts.bench.tuner_run import Tuner, shown
    from scripts.bench.workloads import WORKLOADS

    wanted = _items(args.items)
    for workload, names in wanted.items():
        if workload not in WORKLOADS:
            raise SystemExit(f"--items names workload {workload!r}; the workloads are {', '.join(WORKLOADS)}")
        for name in names:
            if (workload, name) not in VARIANTS and name == "uint8":
                raise SystemExit(f"{workload}:uint8 needs a variant workload; VARIANTS has {sorted(VARIANTS)}")
    os.makedirs(args.out, exist_ok=True)
    os.chdir(REPO)
    device = args.device or ("cuda" if hardware.gpu_names() else "cpu")
    run_id = time.strftime("%Y%m%dT%H%M%S")
    records = begin_run(args.out, run_id, {"command": "whatif", "items": args.items, "rounds": args.rounds,
                                           "budget": args.budget, "device": device,
                                           "hardware": hardware.detect().to_dict()})
    rows, tables = [], []
    tuner = Tuner()
    try:
        for workload, names in wanted.items():
            w = WORKLOADS[workload]
            log(f"[{workload}] tuner (budget {args.budget or 'default'})")
            outcome = tuner.run(w.dataset_spec, w.step_spec, w.batch_size, args.budget, args.budget or 60.0,
                                f"whatif-{workload}", ("--device", device))
            records.write(workload=workload, phase="tuner", round=None, tuner=outcome.data, error=outcome.error,
                          wall_s=outcome.wall_s, command=shown(outcome.command))
            if outcome.data is None:
                log(f"[{workload}] tuner failed: {outcome.error}")
                continue
            result = outcome.result
            tables.append((workload, benchmark_row(result)))
            found = {x.name: x for x in explain(result).whatifs}
            pick = outcome.pick
            for name in names:
                change = found.get(name)
                if change is None:
                    log(f"[{workload}] no {name} what-if for this result (offered: {', '.join(found)})")
                    records.write(workload=workload, phase="whatif_summary", round=None, whatif=name,
                                  error=f"not offered; offered: {', '.join(found)}")
                    continue
                variant = WORKLOADS[VARIANTS[(workload, name)]] if (workload, name) in VARIANTS else w
                # The change against the config its gain is over: the pick, or the model's best
                # along the ladder unchanged where that beat the pick (WhatIf.base_config).
                base = change.base_config or pick
                specs = {"as is": (w, base), "changed": (variant, change.config)}
                runners = {}
                try:
                    for role, (wl, _) in specs.items():
                        if wl.name not in runners:
                            setup = RunnerSetup(Source.from_spec(wl.dataset_spec), Source.from_spec(wl.step_spec),
                                                device, {}, wl.batch_size)
                            runners[wl.name] = TrialRunner(setup, max_memory=int(0.6 * hardware.available_memory()),
                                                           hang_timeout_s=120.0)
                            runners[wl.name].start()
                    rates: dict[str, list[float]] = {"as is": [], "changed": []}
                    ratios = []
                    for round_ in range(1, args.rounds + 1):
                        order = list(specs)
                        random.Random(round_).shuffle(order)
                        got = {}
                        for role in order:
                            wl, config = specs[role]
                            t0 = time.time()
                            result = runners[wl.name].measure(config, FINAL_SETTINGS, 120.0)
                            records.trial(workload, "whatif", round_, result, t0, time.time(), whatif=name, role=role,
                                          dataset=wl.name)
                            if result.status == OK and result.samples_per_s:
                                got[role] = result.samples_per_s
                                rates[role].append(result.samples_per_s)
                            log(f"[{workload}] {name} r{round_} {role:7s} {wl.name} {short(config)} "
                                f"{(result.samples_per_s or 0):,.0f}/s {result.status}")
                        if len(got) == 2:
                            ratios.append(got["changed"] / got["as is"])
                finally:
                    for runner in runners.values():
                        runner.close()
                measured = statistics.median(ratios) - 1.0 if ratios else None
                row = {"workload": workload, "whatif": name, "title": change.title, "dataset": variant.name,
                       "pick": short(pick), "base": short(base), "config": short(change.config),
                       "predicted_gain": change.gain,
                       "measured_gain": measured, "rounds": len(ratios),
                       "as_is_median": statistics.median(rates["as is"]) if rates["as is"] else None,
                       "changed_median": statistics.median(rates["changed"]) if rates["changed"] else None,
                       "ratios": ratios}
                rows.append(row)
                records.write(phase="whatif_summary", round=None, **row)
    except Interrupted as exc:
        log(f"interrupted: {exc}")
    finally:
        tuner.kill()
        records.close()
    text = render(rows, tables, args)
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}%"


def render(rows: list[dict], tables: list[tuple[str, dict]], args) -> str:
    lines = ["# What-ifs, predicted and measured", "",
             f"`python -m scripts.bench whatif --items {args.items} --rounds {args.rounds}"
             + (f" --budget {args.budget:g}" if args.budget else "") + (f" --scale {args.scale:g}" if args.scale else "")
             + f" --out {args.out}`", "",
             "| workload | what-if | the tuner's pick | changed config (dataset) | predicted gain | measured gain "
             "(median of paired rounds) | rounds | as is / changed, medians |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        # The side as is, where the gain is over another config than the pick (WhatIf.base_config).
        base = f" (as is: {r['base']})" if r.get("base") not in (None, r["pick"]) else ""
        lines.append(f"| {r['workload']} | {r['title']} | {r['pick']}{base} | {r['config']} ({r['dataset']}) | "
                     f"{_pct(r['predicted_gain'])} | {_pct(r['measured_gain'])} | {r['rounds']} | "
                     f"{(r['as_is_median'] or 0):,.0f} / {(r['changed_median'] or 0):,.0f} |")
    lines += ["", "The tuner's results, as the report reads them:", ""] + verdict_table(tables)
    return "\n".join(lines) + "\n"


def verdict_table(tables: list[tuple[str, dict]]) -> list[str]:
    lines = ["| workload | verdict | wait | top what-if | predicted gain | tuned / ceiling |", "|---|---|---|---|---|---|"]
    for workload, row in tables:
        wait = "n/a" if row["wait_share"] is None else f"{row['wait_share']:.0%} {row['wait_source']}"
        gap = "n/a" if row["gap"] is None else f"{row['gap']:.2f}"
        lines.append(f"| {workload} | {row['kind']} | {wait} | {row['top_title'] or '-'} | "
                     f"{_pct(row['top_gain']) if row['top_gain'] is not None else '-'} | {gap} |")
    return lines


def verdicts(rows: list[dict]) -> list[tuple[str, dict]]:
    """The report's benchmark row of every tuner result in the records (the first of each workload
    per run)."""
    from autoloader.explain import benchmark_row
    from autoloader.store.result import TuneResult

    seen, out = set(), []
    for row in rows:
        tuner = row.get("tuner") if row.get("phase") == "tuner" else None
        result = TuneResult.from_dict(tuner) if tuner else None
        key = (row.get("run_id"), row.get("workload"))
        if result is not None and result.profile is not None and key not in seen:
            seen.add(key)
            out.append((row["workload"], benchmark_row(result)))
    return out


def verdicts_main(argv: list[str]) -> int:
    return report_main(argv, "verdicts", verdicts, lambda found: "\n".join(verdict_table(found)))
