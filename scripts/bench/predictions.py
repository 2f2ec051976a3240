"""Predictions that hold: the same default tune run again and again, each pick re-measured.

    python -m scripts.bench predictions --workload small --tunes 3 --spinner 2 --scale 0.1 --device cpu --out OUT

Runs ``autoloader tune`` of one workload ``--tunes`` times in a row (its default budget unless
``--budget``), then re-measures each tune's pick in ``--rounds`` fresh bursts of the final's
length, at once, in the same process layout the tuner measured it in, and then the pick against
the cpus-1 rule (the result's ``rule``) in ``--pair-rounds`` paired rounds (the order shuffled
each round): their ratio's 95% interval against the one the tuner stated. ``--spinner N`` runs one
pure-Python CPU spinner beside the N-th tune and its re-measure (the issue's busy case). Records
go to OUT/records.jsonl (phases ``tuner`` and ``remeasure``), the table of the pick's
prediction against its re-measure (their ratio less one) to OUT/summary.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="small", help="a name from scripts/bench/workloads (default small)")
    parser.add_argument("--tunes", type=int, default=3, help="tunes in a row (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="re-measures of each pick (default 3)")
    parser.add_argument("--pair-rounds", type=int, default=5,
                        help="paired rounds of the pick against the rule after its re-measures (default 5; 0: none)")
    parser.add_argument("--spinner", type=int, default=0, help="the tune (from 1) run beside a CPU spinner (0: none)")
    parser.add_argument("--budget", type=float, default=None, help="the tuner's budget (default: its own, 60 s)")
    parser.add_argument("--scale", type=float, default=None, help="AUTOLOADER_BENCH_SCALE for a small CPU run")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when a GPU is visible)")
    parser.add_argument("--out", required=True, help="folder for records.jsonl and summary.md")


SPIN = "import time\nwhile True:\n    time.perf_counter()\n"


def main(args) -> int:
    if args.scale is not None:
        os.environ["AUTOLOADER_BENCH_SCALE"] = str(args.scale)
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

    if args.workload not in WORKLOADS:
        raise SystemExit(f"--workload names {args.workload!r}; the workloads are {', '.join(WORKLOADS)}")
    w = WORKLOADS[args.workload]
    os.makedirs(args.out, exist_ok=True)
    os.chdir(REPO)
    device = args.device or ("cuda" if hardware.gpu_names() else "cpu")
    records = begin_run(args.out, time.strftime("%Y%m%dT%H%M%S"),
                        {"command": "predictions", "workload": w.name, "tunes": args.tunes, "rounds": args.rounds,
                         "spinner": args.spinner, "budget": args.budget, "device": device,
                         "hardware": hardware.detect().to_dict()})
    rows, tuner = [], Tuner()
    try:
        for i in range(1, args.tunes + 1):
            # The spinner in a session of its own, as the tune (tuner_run.py) is: where the kernel
            # groups the scheduler's shares by session (autogroup), a tune in its own session beside
            # a spinner in the bench's gets one CPU of two while the re-measure (in the bench's
            # session) got more, so the pick's re-measure was not made as it was tuned. In a third
            # session each of the two gets the same share as the tune did.
            spinner = (subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
                       if i == args.spinner else None)
            try:
                log(f"[{w.name}] tune {i}{' beside a spinner' if spinner else ''}")
                outcome = tuner.run(w.dataset_spec, w.step_spec, w.batch_size, args.budget, args.budget or 60.0,
                                    f"predictions-{w.name}", ("--device", device))
                records.write(workload=w.name, phase="tuner", round=i, tuner=outcome.data, error=outcome.error,
                              wall_s=outcome.wall_s, command=shown(outcome.command), spinner=bool(spinner))
                if outcome.data is None:
                    log(f"[{w.name}] tune {i} failed: {outcome.error}")
                    continue
                pick, data = outcome.pick, outcome.data
                setup = RunnerSetup(Source.from_spec(w.dataset_spec), Source.from_spec(w.step_spec), device, {},
                                    w.batch_size)
                runner = TrialRunner(setup, max_memory=int(0.6 * hardware.available_memory()), hang_timeout_s=120.0)
                rates = []
                try:
                    runner.start()
                    for r in range(1, args.rounds + 1):
                        t0 = time.time()
                        result = runner.measure(pick, FINAL_SETTINGS, 120.0)
                        records.trial(w.name, "remeasure", r, result, t0, time.time(), tune=i)
                        if result.status == OK and result.samples_per_s:
                            rates.append(result.samples_per_s)
                    pair = _pair_rule(runner, pick, data, args.pair_rounds, records, w.name, i)
                finally:
                    runner.close()
                load = data.get("load") or {}
                row = {"tune": i, "spinner": bool(spinner), "pick": short(pick),
                       "predicted": data.get("predicted_samples_per_s"), "tuned": data.get("samples_per_s"),
                       "remeasured": statistics.median(rates) if rates else None, "rates": rates,
                       "others_cpus": load.get("others_cpus"), "profile_others_cpus": load.get("profile_others_cpus"),
                       "profile_delay_share": (data.get("profile") or {}).get("sample_delay_share"),
                       "tune_s": data.get("tune_seconds"), **pair}
                rows.append(row)
                records.write(workload=w.name, phase="predictions_summary", round=i, **row)
                log(f"[{w.name}] tune {i}: pick {row['pick']} predicted {_rate(row['predicted'])}, "
                    f"re-measured {_rate(row['remeasured'])} ({_err(row)}); against the rule: stated "
                    f"{_ratio(row.get('stated_ratio'), row.get('stated_interval'))}, paired here "
                    f"{_ratio(row.get('paired_ratio'), row.get('paired_interval'))} ({_held(row)})")
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
    except Interrupted as exc:
        log(f"interrupted: {exc}")
    finally:
        tuner.kill()
        records.close()
    text = render(rows, args)
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


def _pair_rule(runner, pick, data: dict, rounds: int, records, name: str, tune: int) -> dict:
    """The pick against the rule the tuner compared it with, in ``rounds`` paired rounds on
    ``runner``: the stated ratio and interval beside the paired one."""
    import random

    from autoloader.search.space import LoaderConfig
    from autoloader.search.paired import paired_ratio
    from autoloader.search.policy import FINAL_SETTINGS
    from autoloader.search.results import OK
    from scripts.bench.common import rule_field

    stored = rule_field(data)
    stated = rule_field(data, "_ratio_interval")
    out = {"rule": None, "stated_ratio": rule_field(data, "_ratio"), "stated_interval": stated,
           "paired_ratio": None, "paired_interval": None, "pair_rounds": 0}
    if not stored or rounds <= 0:
        return out
    rule = LoaderConfig.from_dict(stored)
    out["rule"] = rule.key
    if rule == pick:
        out["paired_ratio"], out["note"] = 1.0, "the pick is the rule's config"
        return out
    got = []
    for r in range(1, rounds + 1):
        order = [("pick", pick), ("rule", rule)]
        random.Random(r).shuffle(order)
        rates = {}
        for role, config in order:
            t0 = time.time()
            result = runner.measure(config, FINAL_SETTINGS, 120.0)
            records.trial(name, "pair", r, result, t0, time.time(), tune=tune, role=role)
            if result.status == OK and result.samples_per_s:
                rates[role] = result.samples_per_s
        if len(rates) == 2:
            got.append((rates["pick"], rates["rule"]))
    ratio = paired_ratio(got)
    out["pair_rounds"] = len(got)
    if ratio is not None:
        out["paired_ratio"] = ratio.ratio
        out["paired_interval"] = list(ratio.interval) if ratio.judged else None
    return out


def _ratio(ratio: float | None, interval) -> str:
    if ratio is None:
        return "n/a"
    return f"{ratio:.2f}x" + (f" ({interval[0]:.2f}-{interval[1]:.2f})" if interval else "")


def _held(row: dict) -> str:
    """Whether the tuner's stated pick/rule interval holds the paired re-measure's ratio."""
    stated, paired = row.get("stated_interval"), row.get("paired_ratio")
    if row.get("note"):
        return row["note"]
    if stated is None or paired is None:
        return "no interval stated" if paired is not None else "not paired"
    return "held" if stated[0] <= paired <= stated[1] else "not held"


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}/s"


def _err(row: dict) -> str:
    if not row.get("predicted") or not row.get("remeasured"):
        return "n/a"
    return f"{row['predicted'] / row['remeasured'] - 1:+.1%}"


def render(rows: list[dict], args) -> str:
    lines = [f"# {args.workload}: {args.tunes} default tunes in a row, each pick re-measured {args.rounds}x", "",
             "| tune | beside a spinner | pick | predicted | re-measured (median) | predicted / re-measured - 1 | "
             "others' CPUs (run / profile) | profile's samples descheduled | pick/rule stated (95%) | "
             "pick/rule paired here (95%, rounds) | stated interval holds it |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = r.get("profile_delay_share")
        lines.append(f"| {r['tune']} | {'yes' if r['spinner'] else 'no'} | {r['pick']} | {_rate(r['predicted'])} | "
                     f"{_rate(r['remeasured'])} | {_err(r)} | {_f(r['others_cpus'])} / {_f(r['profile_others_cpus'])} | "
                     f"{'n/a' if share is None else f'{share:.0%}'} | "
                     f"{_ratio(r.get('stated_ratio'), r.get('stated_interval'))} | "
                     f"{_ratio(r.get('paired_ratio'), r.get('paired_interval'))}, {r.get('pair_rounds', 0)} | {_held(r)} |")
    within = [r for r in rows if r.get("predicted") and r.get("remeasured")
              and abs(r["predicted"] / r["remeasured"] - 1) <= 0.10]
    held = [r for r in rows if _held(r) == "held"]
    stated = [r for r in rows if r.get("stated_interval") and r.get("paired_ratio") is not None and not r.get("note")]
    lines.append(f"\nwithin ±10% of the re-measure: {len(within)} of {len(rows)}; the stated pick/rule interval "
                 f"holds the paired re-measure: {len(held)} of {len(stated)} stated")
    return "\n".join(lines) + "\n"


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"
