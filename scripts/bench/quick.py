"""``python -m scripts.bench quick``: the tune's wall time at its default budget, and whether its
pick holds against the cpus-1 rule, in one short device call (issue 34: a tune that ends when it
is sure).

    python -m scripts.bench quick --out OUT                                   # the GPU machine
    python -m scripts.bench quick --device cpu --scale 0.05 --out /tmp/q      # a CPU smoke run
    python -m scripts.bench quick --out OUT --against results/benchmarks/run-20261202/run/records.jsonl

In order, inside ``--deadline-seconds`` (what does not fit is left out and said, the tunes last):

1. warm-up  one fresh process imports torch and the workloads, starts CUDA, builds each dataset
            and step, each timed (the set-up's parts: no tune measures them apart), so the first
            tune finds the libraries in the page cache as the later ones do;
2. tunes    ``autoloader tune`` of each workload as a user runs it (tuner_run.py: its default
            budget, a fresh --out), timed from outside, its phases read off its own timeline;
3. pairs    the tuner's pick against the rule it replaces (the result's ``rule``), in paired
            rounds of fresh loaders through autoloader's TrialRunner, the order shuffled each
            round, at the lean bench's final windows (1-1.5 s, 4 worker cycles): up to
            ``--rounds``, at least ``--min-rounds`` where the deadline holds them for every
            workload, the cheapest workload first. A pick that is the rule's config needs none.

Records go to OUT/records.jsonl (phases ``meta``, ``anatomy``, ``tuner`` as ``run`` writes them,
``pair`` trials, ``pair_summary``), the table to OUT/summary.md (``render``: pure, from the rows).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

DEFAULT_WORKLOADS = "hugefloat,heavytail,large"
# What a runner's start costs before its first round, and a tune beyond its budget's wall bound,
# before either is measured (the GPU bench: set-up 10-13 s).
START_S = 12.0
# The summary, the records and the runners' close, kept back from the deadline.
CLOSING_S = 5.0

ANATOMY = r"""
import json, sys, time
t = time.perf_counter(); out = {}
def mark(name):
    global t
    now = time.perf_counter(); out[name] = round(now - t, 3); t = now
import torch; mark("import torch")
cuda = sys.argv[1].startswith("cuda")
if cuda:
    torch.zeros(1, device="cuda"); torch.cuda.synchronize(); mark("CUDA start")
import scripts.bench.workloads as W; mark("import the workloads")
for name in sys.argv[2].split(","):
    getattr(W, name + "_dataset")(); mark(name + " dataset")
    getattr(W, name + "_step")(); mark(name + " step")
print(json.dumps(out))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"comma-separated (default {DEFAULT_WORKLOADS})")
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds of the pick and the rule, at most (5)")
    parser.add_argument("--min-rounds", type=int, default=3, help="paired rounds wanted at least, where they fit (3)")
    parser.add_argument("--deadline-seconds", type=float, default=220.0, help="the whole run's wall time (220)")
    parser.add_argument("--budget", type=float, default=None, help="the tuner's budget (default: its own, 60 s)")
    parser.add_argument("--scale", type=float, default=None, help="AUTOLOADER_BENCH_SCALE for a small CPU run")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when a GPU is visible)")
    parser.add_argument("--against", default=None, help="an earlier run's records.jsonl: its tune wall times beside")
    parser.add_argument("--out", required=True, help="folder for records.jsonl and summary.md")


def phases(data: dict | None) -> dict:
    """The tune's own timeline, by phase (seconds from its start): set-up (to the trial process's
    Ready), the study's opening and the like until the profile, the profile, the search's bursts,
    the final's measurements, and what is left (the gaps between them, the record)."""
    if not data:
        return {}
    timeline = (data.get("inputs") or {}).get("timeline") or []
    spent = {"set-up": 0.0, "profile": 0.0, "burst": 0.0, "final": 0.0}
    for what, start, end, _ in timeline:
        if what in spent:
            spent[what] += end - start
    profile_start = next((start for what, start, _, _ in timeline if what == "profile"), None)
    before = profile_start - spent["set-up"] if profile_start is not None else 0.0
    total = data.get("tune_seconds") or 0.0
    return {"set-up": spent["set-up"], "to profile": before, "profile": spent["profile"], "search": spent["burst"],
            "final": spent["final"], "other": max(0.0, total - sum(spent.values()) - before), "total": total,
            "bursts": sum(1 for what, *_ in timeline if what == "burst"),
            "final measurements": sum(1 for what, *_ in timeline if what == "final")}


def anatomy_lines(tuners: dict) -> list[str]:
    """Each tune's time by part, from its own record: the set-up's and the profile's parts
    (``inputs.parts``) and each burst or final measurement as start-up (iter() to the first
    batch), lead (the first clump skipped), window, teardown and the rest (the driver's side:
    the message, the memory readings, the study's write)."""
    lines = []
    for name, row in tuners.items():
        data = row.get("tuner")
        if not data:
            continue
        inputs = data.get("inputs") or {}
        parts = inputs.get("parts") or []
        out = [f"{what} {end - start:.2f}" for what, start, end in parts]
        marks = [m for m in inputs.get("timeline") or [] if m[0] in ("burst", "final")]
        by_time = {}
        for t in data.get("trials") or []:
            by_time.setdefault(_key(t.get("config")), []).append(t)
        bursts = []
        for what, start, end, key in marks:
            found = by_time.get(key) or []
            t = found.pop(0) if what == "burst" and found else None
            if t is None:
                bursts.append(f"{what} {_short(key)} {end - start:.1f}")
                continue
            known = [t.get(k) or 0.0 for k in ("startup_s", "lead_s", "window_s", "teardown_s")]
            bursts.append(f"{what} {_short(key)} {end - start:.1f} = " + "+".join(f"{x:.1f}" for x in known)
                          + f"+{max(0.0, end - start - sum(known)):.1f}")
        lines.append(f"- {name}: " + "; ".join(out) + (" | " if out else "") + "; ".join(bursts))
    if lines:
        lines = ["", "Where each tune's time went (seconds; a burst as start-up + lead + window + teardown + the "
                 "driver's rest):", ""] + lines
    return lines


def _bytecode_line(bytecode: dict | None) -> str:
    """Whether this run's interpreters compiled their imports (NOTE [ Imports compiled every start ]
    in autoloader/probe/trial.py): it moves every tune's set-up by seconds. quick_gpu.sh compiles
    them once where the machine ships no bytecode (bytecode.txt: the imports before and after)."""
    if not bytecode or not bytecode.get("PYTHONDONTWRITEBYTECODE"):
        return "- bytecode: Python's own caches"
    compiled = bytecode.get("compiled")
    if not compiled:
        return ("- bytecode: the machine sets PYTHONDONTWRITEBYTECODE=1 and nothing was compiled before the tunes: "
                "every interpreter compiled its imports")
    return (f"- bytecode: the machine sets PYTHONDONTWRITEBYTECODE=1 and ships torch without bytecode; "
            f"quick_gpu.sh compiled {', '.join(compiled.split())} and the repository once before the tunes "
            "(bytecode.txt has the imports before and after)")


def _short(key: str | None) -> str:
    """A config's key by its workers (``bs64-w15-pin1`` -> ``w15``), or whole."""
    return next((p for p in (key or "?").split("-") if p.startswith("w")), key or "?")


def _key(config: dict | None) -> str | None:
    if not config:
        return None
    from autoloader.search.space import LoaderConfig

    return LoaderConfig.from_dict(config).key


def round_estimate(result, configs, settings) -> float:
    """Seconds of one paired round of ``configs``: each from the tuner's burst nearest in workers
    (``measure_seconds``), START_S / 2 a config where the tuner measured none."""
    from autoloader.search.budget import measure_seconds
    from autoloader.search.results import OK

    ok = [t for t in result.trials if t.status == OK and t.seconds and t.window_s]
    total = 0.0
    for config in configs:
        near = min(ok, key=lambda t: (t.config != config, abs(t.config.num_workers - config.num_workers)), default=None)
        total += measure_seconds(near, settings, config.num_workers) if near is not None else START_S / 2
    return total


def plan_rounds(costs: dict[str, float], left: float, most: int, least: int) -> dict[str, int]:
    """Rounds per workload (``costs``: one round's seconds) that fit ``left`` with a runner's
    start each: ``most`` for all if that fits, else fewer for all down to ``least``; else
    ``least`` for the cheapest workloads that fit, none for the rest."""
    order = sorted(costs, key=costs.get)
    for rounds in range(most, least - 1, -1):
        if sum(START_S + rounds * costs[w] for w in order) <= left:
            return {w: rounds for w in order}
    out, spent = {}, 0.0
    for w in order:
        need = START_S + least * costs[w]
        out[w] = least if spent + need <= left else 0
        spent += need if out[w] else 0.0
    return out


def main(args) -> int:
    if args.scale is not None:
        os.environ["AUTOLOADER_BENCH_SCALE"] = str(args.scale)
    from autoloader.inputs import hardware
    from scripts.bench.common import REPO, log
    from scripts.bench.harness import Interrupted, begin_run
    from scripts.bench.records import read_records
    from scripts.bench.workloads import WORKLOADS

    import psutil

    # From the process's start: the bench's own imports (torch among them) count against the deadline.
    t0 = time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())
    deadline = t0 + args.deadline_seconds
    left = lambda: deadline - time.monotonic()  # noqa: E731
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--workloads names {unknown}; the workloads are {', '.join(WORKLOADS)}")
    os.makedirs(args.out, exist_ok=True)
    os.chdir(REPO)
    device = args.device or ("cuda" if hardware.gpu_names() else "cpu")
    meta = {"command": "quick", "argv": sys.argv[1:], "workloads": names, "device": device,
            "scale": os.environ.get("AUTOLOADER_BENCH_SCALE", "1.0"), "hardware": hardware.detect().to_dict(),
            "bytecode": {"PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
                         "compiled": os.environ.get("AUTOLOADER_BENCH_COMPILED"),
                         "PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX")}}
    records = begin_run(args.out, time.strftime("%Y%m%dT%H%M%S"), meta)
    rows: list[dict] = [{"phase": "meta", "meta": meta}]
    before = read_records([args.against]) if args.against and os.path.isfile(args.against) else []

    def write(**fields):
        records.write(**fields)
        rows.append(fields)

    try:
        log(f"[quick] warm-up: torch, CUDA, the workloads' datasets and steps ({device})")
        try:
            done = subprocess.run([sys.executable, "-c", ANATOMY, device, ",".join(names)], cwd=REPO, timeout=120,
                                  capture_output=True, text=True)
            parts = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
            write(workload=None, phase="anatomy", round=None, anatomy=parts,
                  error=None if parts else done.stderr.strip()[-300:])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            write(workload=None, phase="anatomy", round=None, anatomy=None, error=str(exc)[-300:])
        tunes = run_tunes(names, WORKLOADS, args, device, left, write, log)
        # The tunes' table now, rewritten at the end: a run cut off in its paired rounds (a device
        # machine taken back) still leaves its summary.
        summarise(rows, before, args.out, time.monotonic() - t0, note="the paired rounds were still running")
        run_pairs(tunes, WORKLOADS, args, device, left, write, log)
    except Interrupted as exc:
        log(f"[quick] interrupted: {exc}")
        write(workload=None, phase="interrupted", round=None, reason=str(exc))
    finally:
        records.close()
        print(summarise(rows, before, args.out, time.monotonic() - t0))
    return 0


def summarise(rows: list[dict], before: list[dict], out: str, took_s: float, note: str | None = None) -> str:
    """Write ``out``/summary.md from the rows so far (``note``: what the run was still doing); its text."""
    text = render(rows, before, took_s)
    if note:
        text += f"\n(written before the run ended: {note})\n"
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(text)
    return text


def run_tunes(names, workloads, args, device, left, write, log) -> dict:
    from scripts.bench.common import short
    from scripts.bench.tuner_run import Tuner, shown

    budget = args.budget or 60.0
    tuner, out = Tuner(), {}
    try:
        for name in names:
            w = workloads[name]
            # Its wall bound (search/budget.py): the tunes come first, the pairs take what is left.
            need = budget + max(0.1 * budget, 5.0)
            if need > left():
                log(f"[{name}] tune not begun: {left():.0f} s left, a tune takes up to {need:.0f} s")
                write(workload=name, phase="skipped", round=None, reason=f"tune: {left():.0f} s left of the deadline")
                continue
            log(f"[{name}] autoloader tune (budget {args.budget or 'its default'})")
            outcome = tuner.run(w.dataset_spec, w.step_spec, w.batch_size, args.budget, budget, f"quick-{name}",
                                ("--device", device))
            outcome.keep_stderr(args.out, name)
            write(workload=name, phase="tuner", round=None, tuner=outcome.data, error=outcome.error,
                  wall_s=outcome.wall_s, command=shown(outcome.command))
            if outcome.data is None:
                log(f"[{name}] tune failed: {outcome.error}")
                continue
            out[name] = outcome
            log(f"[{name}] {outcome.wall_s:.1f} s: pick {short(outcome.pick)}; {outcome.data.get('verdict')}")
    finally:
        tuner.kill()
    return out


def run_pairs(tunes, workloads, args, device, left, write, log) -> None:
    from autoloader.inputs import hardware
    from autoloader.inputs.source import Source
    from autoloader.probe.driver import TrialRunner
    from autoloader.probe.protocol import RunnerSetup, SetupError
    from autoloader.search.paired import paired_ratio
    from autoloader.search.results import OK
    from scripts.bench import plan
    from scripts.bench.common import short

    settings = plan.SETTINGS["lean"][1]
    pairs, costs = {}, {}
    for name, outcome in tunes.items():
        result = outcome.result
        pick, rule = outcome.pick, result.rule
        if rule is None or pick == rule:
            write(workload=name, phase="pair_summary", round=None, pick=short(pick), rule=short(rule), rounds=0,
                  ratio=1.0 if rule is not None else None, interval=None,
                  note="the pick is the rule's config" if rule is not None else "the tune held no rule")
            continue
        pairs[name] = (pick, rule)
        costs[name] = round_estimate(result, (pick, rule), settings)
    allowed = plan_rounds(costs, left() - CLOSING_S, args.rounds, args.min_rounds)
    for name in sorted(pairs, key=costs.get):
        pick, rule = pairs[name]
        if not allowed.get(name):
            write(workload=name, phase="pair_summary", round=None, pick=short(pick), rule=short(rule), rounds=0,
                  ratio=None, interval=None, note=f"not measured: {left():.0f} s left of the deadline")
            continue
        w = workloads[name]
        runner = TrialRunner(RunnerSetup(Source.from_spec(w.dataset_spec), Source.from_spec(w.step_spec), device, {},
                                         w.batch_size),
                             max_memory=int(plan.MEMORY_SHARE * hardware.available_memory()),
                             hang_timeout_s=plan.HANG_TIMEOUT_S)
        got: list[tuple[float, float]] = []
        try:
            runner.start()
            for round_ in range(1, allowed[name] + 1):
                if costs[name] + CLOSING_S > left():
                    log(f"[{name}] round {round_} not begun: {left():.0f} s left")
                    break
                order = [("pick", pick), ("rule", rule)]
                random.Random(round_).shuffle(order)
                rates = {}
                for role, config in order:
                    t_start = time.time()
                    measured = runner.measure(config, settings, plan.HANG_TIMEOUT_S)
                    write(workload=name, phase="pair", round=round_, role=role, config=config.loader_kwargs(),
                          key=config.key, result=measured.to_dict(), t_start=t_start, t_end=time.time())
                    if measured.status == OK and measured.samples_per_s:
                        rates[role] = measured.samples_per_s
                    log(f"[{name}] r{round_} {role} {short(config)} {(measured.samples_per_s or 0):,.0f}/s "
                        f"{measured.status}")
                if len(rates) == 2:
                    got.append((rates["pick"], rates["rule"]))
        except SetupError as exc:
            log(f"[{name}] runner set-up failed: {exc}")
        finally:
            runner.close()
        ratio = paired_ratio(got)
        write(workload=name, phase="pair_summary", round=None, pick=short(pick), rule=short(rule), rounds=len(got),
              ratio=ratio.ratio if ratio else None, interval=list(ratio.interval) if ratio and ratio.judged else None,
              pick_rates=[a for a, _ in got], rule_rates=[b for _, b in got], note=None)


def render(rows: list[dict], before: list[dict], took_s: float) -> str:
    """summary.md from the run's rows (and an earlier run's, ``before``, for its tune wall times)."""
    from scripts.bench.common import rule_field

    meta = next((r["meta"] for r in rows if r.get("phase") == "meta"), {})
    then = {r["workload"]: r.get("wall_s") for r in before if r.get("phase") == "tuner" and r.get("wall_s")}
    tuners = {r["workload"]: r for r in rows if r.get("phase") == "tuner"}
    pairs = {r["workload"]: r for r in rows if r.get("phase") == "pair_summary"}
    hw = meta.get("hardware") or {}
    lines = ["# A tune that ends when it is sure: wall time and the pick against the rule", "",
             f"`python -m scripts.bench {' '.join(meta.get('argv') or ['quick'])}`", "",
             f"- machine: {', '.join(hw.get('gpus') or []) or 'no GPU'}; {hw.get('cpus')} usable CPUs; device "
             f"{meta.get('device')}; AUTOLOADER_BENCH_SCALE={meta.get('scale')}; the run took {took_s:.0f} s",
             _bytecode_line(meta.get("bytecode")), "",
             "| workload | tune wall s | before | set-up / to profile / profile / search / final / other s | "
             "bursts, final runs | pick | rule | the tuner's pick/rule | pick/rule, paired here (95%) |",
             "|---|---|---|---|---|---|---|---|---|"]
    walls = []
    for name, row in tuners.items():
        data, p = row.get("tuner"), phases(row.get("tuner"))
        if data is None:
            lines.append(f"| {name} | failed | {_s(then.get(name))} | - | - | - | - | {row.get('error')} | - |")
            continue
        walls.append(row["wall_s"])
        parts = " / ".join(f"{p[k]:.1f}" for k in ("set-up", "to profile", "profile", "search", "final", "other"))
        pair = pairs.get(name) or {}
        lines.append(f"| {name} | {row['wall_s']:.1f} | {_s(then.get(name))} | {parts} | {p['bursts']}, "
                     f"{p['final measurements']} | {short_kwargs(data.get('config'))} | "
                     f"{short_kwargs(rule_field(data)) if rule_field(data) else '-'} | {data.get('verdict')} | "
                     f"{_pair(pair)} |")
    lines.append("")
    if walls:
        lines.append(f"tune wall time over {len(walls)} workload(s): median {statistics.median(walls):.1f} s "
                     f"(min {min(walls):.1f}, max {max(walls):.1f})"
                     + (f"; before: median {statistics.median(then.values()):.1f} s over {len(then)}" if then else ""))
    lines += anatomy_lines(tuners)
    anatomy = next((r for r in rows if r.get("phase") == "anatomy"), None)
    if anatomy is not None:
        found = anatomy.get("anatomy")
        lines += ["", "warm-up, one fresh process (the set-up's parts, cold): "
                  + ("; ".join(f"{k} {v:.2f} s" for k, v in found.items()) if found
                     else f"failed: {anatomy.get('error')}")]
    skipped = [r for r in rows if r.get("phase") in ("skipped", "interrupted")]
    lines += [f"- {r.get('workload') or 'run'}: {r.get('reason')}" for r in skipped]
    lines += ["", "Columns: tune wall s = `autoloader tune` at its default budget, timed from outside; before = the "
              "same in the --against run; the phases from the tune's own timeline (set-up: the trial process's start, "
              "to profile: the study's opening, search: its bursts, final: its rounds); the tuner's pick/rule = its "
              "verdict; paired here = the pick's rate over the rule's in fresh rounds of this run, the order shuffled "
              "each round, 1-1.5 s windows of 4 worker cycles, with its 95% interval (Student's t over the rounds' "
              "log ratios)."]
    return "\n".join(lines) + "\n"


def short_kwargs(kwargs: dict | None) -> str:
    from scripts.bench.common import config_from_kwargs, short

    return short(config_from_kwargs(kwargs)) if kwargs else "-"


def _s(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"


def _pair(row: dict) -> str:
    if not row:
        return "-"
    if row.get("note") and not row.get("rounds"):
        return f"{row['ratio']:.2f} ({row['note']})" if row.get("ratio") else row["note"]
    interval = row.get("interval")
    return (f"{row['ratio']:.2f}x" + (f" ({interval[0]:.2f}-{interval[1]:.2f})" if interval else " (no interval)")
            + f", {row['rounds']} rounds")
