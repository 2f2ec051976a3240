"""Summaries made from what earlier runs wrote, measuring nothing: ``merge`` (one summary of runs
made in parts, from their results.json) and ``rebuild`` (a run killed before it could write its
summary, from its records.jsonl alone)."""

from __future__ import annotations

import os
from collections import Counter

from autoloader.search.results import TrialResult
from scripts.bench.common import config_from_kwargs
from scripts.bench.harness import Workload
from scripts.bench.records import read_records
from scripts.bench.report import run_state, write_summary


def workload_from_records(w, rows: list[dict], cpus: int, device: str, tunes: int = 1, grid: bool = True) -> Workload:
    """A Workload holding what ``rows`` (one workload's records) measured, for its summary;
    ``tunes`` and ``grid`` as the run made it (harness.Workload)."""
    bench = Workload(w, None, None, "", device, cpus, tunes=tunes, grid=grid)
    starts, ends = [], []
    for row in rows:
        if row.get("t_start"):
            starts.append(row["t_start"])
        if row.get("t_end"):
            ends.append(row["t_end"])
        phase = row["phase"]
        if phase in ("tuner", "stability_tuner"):
            pick = config_from_kwargs(row["config"]) if row.get("config") else None
            if phase == "tuner":
                bench.tuner, bench.tuner_error, bench.tuner_wall = row.get("tuner"), row.get("error"), row.get("wall_s")
                bench.pick = pick
                bench.phase_s["tuner"] = row.get("wall_s") or 0.0
                bench.estimate_s = row.get("estimate_s")
            if tunes > 1:
                bench.stability_runs.append({"index": row.get("index") or 1, "pick": pick, "wall_s": row.get("wall_s"),
                                             "error": row.get("error"), "tuner": row.get("tuner")})
        elif phase == "grid" and row.get("skipped"):
            bench.skipped = [config_from_kwargs(k) for k in row["skipped"]]
        elif phase == "grid" and row.get("result"):
            bench.grid.append(TrialResult.from_dict(row["result"]))
        elif phase == "final" and row.get("result"):
            result = TrialResult.from_dict(row["result"])
            bench.final.setdefault(result.config, []).append(result)
            bench.final_roles[result.config] = list(row.get("roles") or [])
        elif phase == "ceiling":
            bench.ceiling, bench.ceiling_facts = row.get("ceiling"), row.get("facts")
            bench.ceiling_error = row.get("error")
    bench.stability_runs.sort(key=lambda r: r["index"])
    for phase in ("grid", "final"):
        times = [(r["t_start"], r["t_end"]) for r in rows if r["phase"] == phase and r.get("t_end")]
        if times:
            bench.phase_s[phase] = max(e for _, e in times) - min(b for b, _ in times)
    if starts and ends:
        bench.phase_s["total"] = max(ends) - min(starts)
    return bench


def rebuild(source: str, out: str) -> str:
    """Summaries from a run's records.jsonl alone. A run killed outright (SIGKILL at the device's
    time limit leaves no moment to write) keeps its records line by line: every workload that
    finished is taken from its summary record, and the one cut short is summarised from its
    measurements and marked partial, saying what it lacks."""
    from scripts.bench.workloads import WORKLOADS

    path = os.path.join(source, "records.jsonl")
    if not os.path.isfile(path):
        raise SystemExit(f"rebuild needs a bench run's records, and {path} does not exist. "
                         "Fix: pass the --out folder of a `python -m scripts.bench run`")
    rows = read_records([path])
    meta = next((r["meta"] for r in rows if r["phase"] == "meta"), None)
    if meta is None:
        raise SystemExit(f"{path} has no meta record, so it is not a bench run's. "
                         "Fix: pass the --out folder of a `python -m scripts.bench run`")
    meta = dict(meta, not_run=list(meta.get("not_run", [])))
    by_workload: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("phase") == "skipped":
            meta["not_run"].append(f"{row['workload']} ({row.get('reason')})")
        elif row.get("workload"):
            by_workload.setdefault(row["workload"], []).append(row)
    unknown = [name for name in by_workload if name not in WORKLOADS]
    if unknown:
        raise SystemExit(f"{path} has workloads this checkout does not define: {', '.join(unknown)}. "
                         "Fix: rebuild with the commit that made the run (scripts/bench/workloads)")
    summaries = []
    for name, mine in by_workload.items():
        done = next((r["summary"] for r in mine if r["phase"] == "summary"), None)
        if done is not None:
            summaries.append(done)
            continue
        checked = name in meta.get("stability", [])
        bench = workload_from_records(WORKLOADS[name], mine, meta["cpus"], meta["device"], tunes=3 if checked else 1,
                                      grid=not checked or name in meta.get("workloads", []))
        last = max(mine, key=lambda r: r.get("t_end") or 0)
        wanted = ("tuner", "grid", "final", "ceiling") if bench.with_grid else ("tuner", "final")
        missing = [p for p in wanted if not any(r["phase"] == p for r in mine)]
        per_round = Counter(r["round"] for r in mine if r["phase"] == "final")
        finalists = max(per_round.values(), default=0)
        short_rounds = [f"round {n} has {k} of {finalists} configs" for n, k in sorted(per_round.items())
                        if k < finalists]
        if len(per_round) == 1 and last["phase"] == "final":
            short_rounds.append("the number of finalists is unknown (killed in round 1)")
        where = f"{last['phase']}" + (f" round {last['round']}" if last.get("round") else "")
        bench.interrupted = (f"killed after its last record ({where})"
                             + (f"; no {', no '.join(missing)}" if missing else "")
                             + (f"; final {', '.join(short_rounds)}" if short_rounds else "")
                             + "; rebuilt from records.jsonl")
        summaries.append(bench.summary())
    # A workload killed during its preparation or its tuner wrote no record at all.
    killed = False
    for name in dict.fromkeys(meta.get("workloads", []) + meta.get("stability", [])):
        if name not in by_workload and not any(entry.startswith(f"{name} (") for entry in meta["not_run"]):
            meta["not_run"].append(f"{name} (no record: killed before its tuner ended, or never begun)")
            killed = True
    meta["rebuilt_from"] = os.path.relpath(path, out)
    os.makedirs(out, exist_ok=True)
    return write_summary(out, summaries, meta, run_state(summaries, meta["not_run"], killed))


def merge(parts: list[str], out: str) -> str:
    """One summary from runs made in parts (the device time of one call fits two workloads):
    their workloads in order, every part's command and date. The records stay in the parts."""
    import json

    if os.path.abspath(out) in {os.path.abspath(p) for p in parts}:
        raise SystemExit(f"--out {out} is one of the parts; its results.json would be overwritten. "
                         "Fix: write the merged summary to another folder")
    metas, measured = [], []
    for part in parts:
        with open(os.path.join(part, "results.json")) as fh:
            data = json.load(fh)
        commit = commit_of(part)
        label = os.path.basename(os.path.normpath(part)) + (f", at {commit}" if commit else "")
        metas.append(dict(data["meta"], part=label))
        measured += [(label, s) for s in data["workloads"]]
    # A workload measured in several parts: the table holds the last part's (the latest code and
    # the latest run, whatever it read) unless that one was cut short and an earlier one was not;
    # the others are listed as repeats.
    latest: dict[str, dict] = {}
    for _, s in measured:
        if not (s["interrupted"] and s["workload"] in latest and not latest[s["workload"]]["interrupted"]):
            latest[s["workload"]] = s
    summaries = [latest[w] for w in dict.fromkeys(s["workload"] for _, s in measured)]
    for key in ("cpus", "gpu", "device", "mode", "scale", "torch"):
        values = {str(m.get(key)) for m in metas}
        if len(values) > 1:
            raise SystemExit(f"the parts must come from one machine and mode: {key} differs ({', '.join(sorted(values))}). "
                             "Fix: merge only parts run with the same settings on the same machine")
    meta = dict(metas[0])
    meta["command"] = "\n".join(f"{m['command']}   # {m['part']}" for m in metas)
    meta["repeats"] = [dict(s, part=label) for label, s in measured if latest[s["workload"]] is not s]
    if len({m["method"] for m in metas}) > 1:
        meta["method"] += (" The parts differ in these settings (rounds, windows or budget); each part's "
                           "command above and its own summary.md give its own.")
    meta["date"] = f"{metas[0]['date']} to {metas[-1]['date']}" if len(metas) > 1 else metas[0]["date"]
    meta["parts"] = metas
    meta.pop("plan", None)  # each part's plan is its own
    # A workload one part had no time for may have run in another; listed once, by its first reason.
    ran = {s["workload"] for s in summaries}
    not_run: dict[str, str] = {}
    for entry in (e for m in metas for e in m.get("not_run", [])):
        not_run.setdefault(entry.split(" (", 1)[0], entry)
    meta["not_run"] = [entry for name, entry in not_run.items() if name not in ran]
    budgets = sorted({m["workload_seconds"] for m in metas})
    if len(budgets) > 1:
        meta["workload_seconds_text"] = f"{budgets[0]:.0f}-{budgets[-1]:.0f} s (by part)"
    meta["records"] = [os.path.join(os.path.relpath(part, out), "records.jsonl") for part in parts]
    os.makedirs(out, exist_ok=True)
    return write_summary(out, summaries, meta, run_state(summaries, meta["not_run"]))


def commit_of(part: str) -> str | None:
    """The commit a part's code was taken from, when its folder says (a file ``commit.txt``; the
    device gets a snapshot of the code without git, so the run itself cannot tell)."""
    path = os.path.join(part, "commit.txt")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return fh.read().strip() or None
