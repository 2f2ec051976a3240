"""``python -m scripts.bench node``: the tuner on a node of N ranks (issue 16), per shared/BENCHMARK.md.

Per workload, in order:

1. node tune    ``autoloader tune --nproc-per-node N --device D --json`` (tuner_run.py): the
                per-rank pick and the node's rate as the tuner estimates it, timed from outside.
2. single tune  the same without --nproc-per-node: what a user tuning one rank alone gets.
3. measurement  three configs applied on every rank, measured through the node's own machinery
                (autoloader/node.py): this process becomes rank 0 of N (``node.launched``), the
                others ``serve`` it, and rank 0's NodeRunner runs every burst on all ranks at once,
                each rank on its DistributedSampler shard and its own device (cuda:LOCAL_RANK, or
                the CPU). The configs: the node pick, the single-rank pick on every rank, and the
                ``cpus - 1`` rule per rank (num_workers = the node's usable CPUs - 1 on every rank,
                pinned on CUDA, prefetch 2, kept workers), --rounds rounds of A B C interleaved
                with the bench's final-round windows (--windows). A config both picks share is
                measured once, with both roles.

The node's rate of a config in a round is N x its slowest rank's samples/s (synchronous training
steps at the slowest rank's pace); a config's figure is the median of its rounds, and the ratios
(node pick / single-rank pick, node pick / rule) are of those medians, all from one run. Every
rank's rate of every round is recorded. A failed trial is a result about its config (recorded,
shown, its round left out of the median), never the end of the bench; a rank lost or a runner
that cannot start ends that workload's measurement, said in the summary, and the next workload
goes on.

OUT/records.jsonl holds every measurement as made (phases ``meta``, ``node_tuner``,
``single_tuner``, ``node_final`` with ``round``, ``roles`` and ``node_samples_per_s``,
``node_error``, ``summary``, ``skipped``); OUT/summary.md and OUT/results.json are rewritten
after each workload. --deadline-seconds: a workload whose tunes and one round cannot fit in the
time left is not begun ("Not run"), rounds that cannot fit are cut, and the summary says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import time

from autoloader.inputs import hardware
from autoloader.search.model_first import heuristic_config
from autoloader.search.results import FAILED, OK, TrialResult
from autoloader.search.space import LoaderConfig, search_space
from scripts.bench import plan
from scripts.bench.common import (
    REPO,
    config_from_kwargs,
    fmt_rate,
    fmt_ratio,
    log,
    median,
    ratio,
    short,
    utc_now,
)
from scripts.bench.harness import Interrupted, begin_run
from scripts.bench.records import Records
from scripts.bench.tuner_run import Tuner, shown

DEFAULT_WORKLOADS = "jpeg,gpubound"
ROLES = ("node_pick", "single_pick", "rule")
ROLE_TEXT = {"node_pick": "node pick", "single_pick": "single-rank pick", "rule": "cpus-1 rule"}
WINDOWS = {name: plan.SETTINGS[name][1] for name in ("full", "lean", "quick")}   # the final round's
LAUNCH_S = 20.0      # starting N-1 ranks (each imports torch) and their trial processes: a guess


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc-per-node", type=int, required=True, metavar="N",
                        help="ranks of the node (as torchrun --nproc-per-node N): one per GPU on CUDA")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                        help=f"comma-separated names from scripts/bench/workloads (default {DEFAULT_WORKLOADS})")
    parser.add_argument("--out", required=True, help="folder for records.jsonl, summary.md and results.json")
    parser.add_argument("--rounds", type=int, default=plan.ROUNDS,
                        help=f"interleaved rounds of the three configs (default {plan.ROUNDS})")
    parser.add_argument("--deadline-seconds", type=float, default=None,
                        help="wall time the whole run must end within: workloads and rounds that would not fit "
                             "are left out and the summary says so")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="cuda (one GPU a rank) or cpu (gloo ranks on the CPU); default cuda when a GPU is visible")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="pass --budget to both tunes (default: the tuner's own default)")
    parser.add_argument("--windows", choices=tuple(WINDOWS), default="full",
                        help="the measurement's burst windows, as the run command's final round of that profile "
                             "(full 2-3 s, lean 1-1.5 s, quick 0.4-0.8 s for CPU tests)")
    parser.add_argument("--scale", type=float, default=None,
                        help="AUTOLOADER_BENCH_SCALE for the workloads (default: the environment's, else 1.0)")
    parser.add_argument("--commit", default=None,
                        help="the commit measured, when the checkout has no git (else `git rev-parse`, else commit.txt)")


# --- the summary's arithmetic: pure functions of the records ----------------------------------

def node_rate(result: dict, ranks: int) -> float | None:
    """A node trial's rate: ranks x its slowest rank's (the trial's samples_per_s is that rank's)."""
    if result.get("status") != OK:
        return None
    rates = result.get("rank_samples_per_s")
    slowest = min(rates) if rates else result.get("samples_per_s")
    return ranks * slowest if slowest else None


def summarise_measurement(rows: list[dict], ranks: int) -> dict:
    """Per role: the config, every round's node rate and per-rank rates, failures, the median;
    and the ratios of the medians (node pick / single-rank pick, node pick / rule) with their
    range over the rounds. ``rows``: one workload's ``node_final`` records."""
    configs: dict[str, dict] = {}
    for row in rows:
        result = row["result"]
        rate = node_rate(result, ranks)
        for role in row["roles"]:
            entry = configs.setdefault(role, {"config": row["config"], "key": row["key"], "rounds": [],
                                              "failures": []})
            entry["rounds"].append({"round": row["round"], "node_samples_per_s": rate,
                                    "rank_samples_per_s": result.get("rank_samples_per_s"),
                                    "status": result.get("status")})
            if rate is None:
                entry["failures"].append({"round": row["round"], "status": result.get("status"),
                                          "cause": result.get("cause"), "error": result.get("error")})
    for entry in configs.values():
        ok = [r for r in entry["rounds"] if r["node_samples_per_s"] is not None]
        entry["node_samples_per_s"] = median([r["node_samples_per_s"] for r in ok])
        per_rank = [r["rank_samples_per_s"] for r in ok if r["rank_samples_per_s"]]
        entry["rank_median_samples_per_s"] = ([median([rates[i] for rates in per_rank]) for i in range(ranks)]
                                              if per_rank and all(len(p) == ranks for p in per_rank) else None)

    def compare(a: str, b: str) -> dict:
        if a not in configs or b not in configs:
            return {"ratio": None, "by_round": None, "same_config": False}
        by_round = {}
        for name, entry in ((a, configs[a]), (b, configs[b])):
            for r in entry["rounds"]:
                by_round.setdefault(r["round"], {})[name] = r["node_samples_per_s"]
        rounds = [ratio(v.get(a), v.get(b)) for _, v in sorted(by_round.items())]
        rounds = [x for x in rounds if x is not None]
        return {"ratio": ratio(configs[a]["node_samples_per_s"], configs[b]["node_samples_per_s"]),
                "by_round": [min(rounds), max(rounds)] if rounds else None,
                "same_config": configs[a]["key"] == configs[b]["key"]}

    return {"configs": configs, "node_vs_single": compare("node_pick", "single_pick"),
            "node_vs_rule": compare("node_pick", "rule")}


# --- one workload ---------------------------------------------------------------------------

class NodeWorkload:
    """One workload's two tunes and its interleaved measurement on N ranks."""

    def __init__(self, w, args, records: Records, out: str, device: str, deadline: float | None):
        self.w, self.name, self.bs = w, w.name, w.batch_size
        self.args, self.records, self.out, self.device = args, records, out, device
        self.ranks = args.nproc_per_node
        self.settings = WINDOWS[args.windows]
        self.deadline = deadline
        self.tunes: dict[str, dict] = {}          # "node"/"single" -> pick, wall_s, error, tuner, command
        self.rows: list[dict] = []                # the node_final records, as written
        self.node_cpus: int | None = None
        self.rule: LoaderConfig | None = None
        self.notes: list[str] = []                # what was cut or failed, for the summary
        self.error: str | None = None             # the measurement ended early: why
        self._tuner = Tuner()
        self.t0 = time.monotonic()

    def seconds_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def tune_s(self) -> float:
        return 1.1 * budget_in_effect(self.args) + plan.TUNER_OVERHEAD_S

    def round_guess_s(self) -> float:
        """One round of the three configs: from this run's trials once there are some, else the plan's guess."""
        done = [r["result"]["seconds"] for r in self.rows if r["result"].get("seconds")]
        if done:
            return 3 * max(done) + 2.0
        return 3 * plan.trial_guess_s(self.settings, hardware.usable_cpus())

    def prepare(self) -> None:
        """Build the dataset once here, so one-time data generation (jpeg's files) is no tune's cost."""
        from autoloader.inputs.source import load_spec, resolve_dataset

        dataset = resolve_dataset(load_spec(self.w.dataset_spec), self.w.dataset_spec)
        del dataset

    def tune(self, which: str) -> None:
        extra = ("--device", self.device) + (("--nproc-per-node", str(self.ranks)) if which == "node" else ())
        log(f"[{self.name}] {which} tune: autoloader tune --dataset {self.w.dataset_spec} ... "
            f"{' '.join(extra)}" + (f" --budget {self.args.budget:g}" if self.args.budget else " (its default budget)"))
        outcome = self._tuner.run(self.w.dataset_spec, self.w.step_spec, self.bs, self.args.budget,
                                  budget_in_effect(self.args), f"{self.name}-{which}", extra=extra)
        outcome.keep_stderr(self.out, f"{self.name}-{which}")
        data, pick = outcome.data, outcome.pick
        if data is None:
            log(f"[{self.name}] {which} tune FAILED ({outcome.error})")
        else:
            log(f"[{self.name}] {which} tune: {outcome.wall_s:.0f} s wall, pick {short(pick)} at "
                f"{fmt_rate(data.get('samples_per_s'))}/s (its estimate"
                + (", the node's" if which == "node" else "") + ")")
        self.tunes[which] = {"pick": pick, "wall_s": outcome.wall_s, "error": outcome.error, "tuner": data,
                             "command": shown(outcome.command)}
        self.records.write(workload=self.name, phase=f"{which}_tuner", round=None,
                           config=data["config"] if data else None, t_start=outcome.t_start, t_end=outcome.t_end,
                           wall_s=outcome.wall_s, returncode=outcome.returncode, error=outcome.error, tuner=data,
                           command=shown(outcome.command))

    def order(self, node_cpus: int) -> list[tuple[LoaderConfig, list[str]]]:
        """The configs in measuring order with their roles; a config two roles share is measured once."""
        # The rule as the tuner holds it on a node: the same on every rank (NOTE [ Tuning a node's ranks ]).
        self.rule = heuristic_config(search_space((self.bs,), node_cpus, self.device), node_cpus)
        out: dict[LoaderConfig, list[str]] = {}
        for role, config in (("node_pick", self.tunes.get("node", {}).get("pick")),
                             ("single_pick", self.tunes.get("single", {}).get("pick")), ("rule", self.rule)):
            if config is not None:
                out.setdefault(config, []).append(role)
        return list(out.items())

    def measure(self) -> None:
        """Every rank at once, through autoloader.node: this process rank 0 of a launched node, NodeRunner's bursts."""
        from autoloader.inputs.source import Source
        from autoloader.node import group, launch
        from autoloader.node import runner as node_runner
        from autoloader.probe.protocol import RunnerSetup

        setup = RunnerSetup(Source.from_spec(self.w.dataset_spec), Source.from_spec(self.w.step_spec),
                            self.device, {}, self.bs)
        max_memory = int(plan.MEMORY_SHARE * hardware.available_memory())

        def work() -> None:
            node = group.joined()   # this process's Node (rank 0), joined in launched()
            self.node_cpus = node.node_cpus
            order = self.order(node.node_cpus)
            log(f"[{self.name}] measurement: {len(order)} configs x {self.args.rounds} rounds on {self.ranks} ranks, "
                f"interleaved ({node.node_cpus} node CPUs, {node.rank_cpus} a rank): "
                + "; ".join(f"{short(c)} ({'/'.join(ROLE_TEXT[r] for r in roles)})" for c, roles in order))
            runner = node_runner.NodeRunner(node, setup, max_memory, plan.HANG_TIMEOUT_S)
            try:
                runner.start()
                for round_ in range(1, self.args.rounds + 1):
                    need = self.round_guess_s()
                    if round_ > 1 and need > self.seconds_left():
                        note = (f"measurement cut to {round_ - 1} of {self.args.rounds} rounds: the next needed about "
                                f"{need:.0f} s, {max(0.0, self.seconds_left()):.0f} s were left of --deadline-seconds")
                        self.notes.append(note)
                        log(f"[{self.name}] {note}")
                        break
                    for config, roles in order:
                        self._measure_one(runner, round_, config, roles)
            finally:
                runner.close()

        with launch.launched(self.ranks):
            node = group.joined()
            if node is None:
                raise RuntimeError("the launched ranks did not form a node")
            node_runner.on_node(node, work)

    def _measure_one(self, runner, round_: int, config: LoaderConfig, roles: list[str]) -> None:
        t_start = time.time()
        try:
            result = runner.measure(config, self.settings, plan.HANG_TIMEOUT_S)
        except Exception as exc:  # a rank lost: this config's trial failed, and the node is gone
            result = TrialResult(config, FAILED, cause="rank_lost", error=f"{type(exc).__name__}: {exc}")
            self._write(round_, roles, result, t_start)
            raise
        self._write(round_, roles, result, t_start)

    def _write(self, round_: int, roles: list[str], result: TrialResult, t_start: float) -> None:
        data = result.to_dict()
        rate = node_rate(data, self.ranks)
        row = {"workload": self.name, "phase": "node_final", "round": round_, "config": result.config.loader_kwargs(),
               "key": result.config.key, "result": data, "t_start": t_start, "t_end": time.time(), "roles": roles,
               "node_samples_per_s": rate, "ranks": self.ranks}
        self.records.write(**row)
        self.rows.append(row)
        where = f"r{round_} {short(result.config):22s} ({'/'.join(ROLE_TEXT[r] for r in roles)})"
        if rate is not None:
            ranks = ", ".join(fmt_rate(r) for r in (data.get("rank_samples_per_s") or ()))
            log(f"[{self.name}] {where} node {fmt_rate(rate)}/s (ranks {ranks})")
        else:
            log(f"[{self.name}] {where} {result.status}: {result.cause} {(result.error or '')[:120]}")

    def run(self) -> None:
        try:
            self.prepare()
            self.tune("node")
            if self.tune_s() + LAUNCH_S + self.round_guess_s() > self.seconds_left():
                note = (f"single-rank tune not begun: {max(0.0, self.seconds_left()):.0f} s were left of "
                        "--deadline-seconds, it and one round needed more")
                self.notes.append(note)
                log(f"[{self.name}] {note}")
            else:
                self.tune("single")
            if LAUNCH_S + self.round_guess_s() > self.seconds_left():
                self.error = (f"measurement not begun: {max(0.0, self.seconds_left()):.0f} s were left of "
                              "--deadline-seconds")
                return
            self.measure()
        except Interrupted as exc:
            self.error = f"interrupted by {exc}"
            raise
        except Exception as exc:  # the node's machinery failed: this workload's result, the bench goes on
            self.error = f"{type(exc).__name__}: {str(exc).strip()[:500]}"
            log(f"[{self.name}] measurement ended: {self.error}")
            self.records.write(workload=self.name, phase="node_error", round=None, error=self.error)
        finally:
            self._tuner.kill()

    def summary(self) -> dict:
        return workload_summary(self.name, self.ranks, self.tunes, self.rows, self.rule, self.node_cpus, self.notes,
                                self.error, time.monotonic() - self.t0)


def workload_summary(name: str, ranks: int, tunes: dict, rows: list[dict], rule: LoaderConfig | None,
                     node_cpus: int | None, notes: list[str], error: str | None, seconds: float) -> dict:
    """A workload's figures (results.json's entry), from its tunes and measurement records."""
    measured = summarise_measurement(rows, ranks)

    def tune_entry(which: str) -> dict | None:
        t = tunes.get(which)
        if t is None:
            return None
        data = t["tuner"] or {}
        return {"pick": t["pick"].loader_kwargs() if t["pick"] else None, "pick_text": short(t["pick"]),
                "wall_s": t["wall_s"], "error": t["error"], "command": t["command"],
                "tune_seconds": data.get("tune_seconds"), "estimate_samples_per_s": data.get("samples_per_s"),
                "trials": len(data.get("trials") or ()), "node": data.get("node"),
                "fingerprint": (data.get("hardware") or {}).get("fingerprint")}

    return {"workload": name, "ranks": ranks, "node_cpus": node_cpus,
            "rule": rule.loader_kwargs() if rule else None, "rule_text": short(rule) if rule else None,
            "node_tune": tune_entry("node"), "single_tune": tune_entry("single"), **measured,
            "notes": list(notes), "error": error, "seconds": seconds}


def plan_s(args, cpus: int) -> float:
    """A workload's seconds by the plan: two tunes, the ranks' launch, --rounds rounds of three configs."""
    tune = 1.1 * budget_in_effect(args) + plan.TUNER_OVERHEAD_S
    return 2 * tune + LAUNCH_S + args.rounds * 3 * plan.trial_guess_s(WINDOWS[args.windows], max(0, cpus - 1))


def budget_in_effect(args) -> float:
    from autoloader.api import DEFAULT_BUDGET_S

    return args.budget if args.budget is not None else DEFAULT_BUDGET_S


# --- summary.md ------------------------------------------------------------------------------

def _cfg(kwargs: dict | None) -> str:
    return short(config_from_kwargs(kwargs)) if kwargs else "-"


def render(summaries: list[dict], meta: dict, state: str) -> str:
    ranks = meta["nproc_per_node"]
    lines = [f"# Node benchmark: {ranks} ranks ({state})", "",
             f"Issue 16's run: the node tune's per-rank pick against the single-rank pick on every rank and the "
             f"`cpus - 1` rule on every rank, measured interleaved in one run, every rank at once "
             f"(autoloader/node.py's NodeRunner). The node's rate is {ranks} x the slowest rank's samples/s; "
             f"each figure is the median over rounds, ratios are of medians (by round: the range of the "
             f"per-round ratios).", "", "```", meta["command"], "```", "",
             f"- date: {meta['date']}; commit: {meta['commit']}",
             f"- machine: {len(meta['gpus'])} GPU(s) {', '.join(meta['gpus']) or '(none)'}; {meta['cpus']} usable CPUs "
             f"({meta['cpu_model']}); {meta['ram_gib']} GiB RAM; device {meta['device']}",
             f"- Python {meta['python']}, torch {meta['torch']}, optuna {meta['optuna']}; "
             f"AUTOLOADER_BENCH_SCALE={meta['scale']}; windows {meta['windows']}; {meta['rounds']} rounds; "
             f"tunes {meta['budget_text']}",
             f"- plan: {meta.get('plan', 'n/a')}" + (f"; took {meta['total_seconds']:.0f} s" if "total_seconds" in meta else ""),
             ""]
    if summaries:
        lines += ["| workload | node pick (per rank) | node samples/s | node / single-rank pick | node / rule | "
                  "single-rank pick | rule | tune s (node, single) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for s in summaries:
            lines.append(" | ".join(["| " + s["workload"], _pick_text(s, "node_tune"),
                                     fmt_rate(_rate(s, "node_pick")), _ratio_text(s["node_vs_single"]),
                                     _ratio_text(s["node_vs_rule"]), _pick_text(s, "single_tune"),
                                     s["rule_text"] or "-", _tune_s(s)]) + " |")
        lines += ["", "w = num_workers, pf = prefetch_factor, pin/pw = pinned/kept workers (1 yes, 0 no); a config on "
                  "every rank, each on its DistributedSampler shard.", ""]
    for s in summaries:
        lines += _details(s, ranks)
    not_run = meta.get("not_run") or []
    lines.append("Not run: " + ("; ".join(not_run) if not_run else "none") + ".")
    return "\n".join(lines) + "\n"


def _rate(s: dict, role: str) -> float | None:
    return (s["configs"].get(role) or {}).get("node_samples_per_s")


def _pick_text(s: dict, which: str) -> str:
    t = s.get(which)
    if t is None:
        return "not run"
    return "tune failed" if t["pick"] is None else t["pick_text"]


def _ratio_text(c: dict) -> str:
    if c["ratio"] is None:
        return "n/a"
    text = fmt_ratio(c["ratio"])
    if c["same_config"]:
        return text + " (same config)"
    if c["by_round"]:
        text += f" ({c['by_round'][0]:.2f}-{c['by_round'][1]:.2f})"
    return text


def _tune_s(s: dict) -> str:
    return ", ".join("-" if s.get(k) is None else f"{s[k]['wall_s']:.0f}" for k in ("node_tune", "single_tune"))


def _details(s: dict, ranks: int) -> list[str]:
    out = [f"## {s['workload']}", ""]
    for which, label in (("node_tune", f"node tune ({ranks} ranks)"), ("single_tune", "single-rank tune")):
        t = s.get(which)
        if t is None:
            out.append(f"- {label}: not run")
            continue
        if t["pick"] is None:
            out.append(f"- {label}: FAILED ({t['error']}); `{t['command']}`")
            continue
        out.append(f"- {label}: pick {_cfg(t['pick'])}, its estimate {fmt_rate(t['estimate_samples_per_s'])}/s"
                   f"{' (the node' + chr(39) + 's)' if which == 'node_tune' else ''}, {t['trials']} trials, "
                   f"{t['wall_s']:.0f} s wall ({(t['tune_seconds'] or 0):.0f} s inside)"
                   + (f"; {t['node'].get('node_cpus')} node CPUs, {t['node'].get('cpus_per_rank')} a rank"
                      if which == "node_tune" and t.get("node") else "") + f"; `{t['command']}`")
    if s["node_cpus"] is not None:
        out.append(f"- rule: {s['rule_text']} on every rank (num_workers = the node's {s['node_cpus']} usable CPUs - 1)")
    out.append("")
    if s["configs"]:
        rounds = sorted({r["round"] for c in s["configs"].values() for r in c["rounds"]})
        out += ["| config | role | median node samples/s | per-rank medians | "
                + " | ".join(f"round {r}: node (ranks)" for r in rounds) + " |",
                "| --- | --- | --- | --- | " + " | ".join("---" for _ in rounds) + " |"]
        for role in ROLES:
            c = s["configs"].get(role)
            if c is None:
                continue
            per_round = {r["round"]: r for r in c["rounds"]}
            cells = []
            for r in rounds:
                x = per_round.get(r)
                if x is None:
                    cells.append("-")
                elif x["node_samples_per_s"] is None:
                    cells.append(x["status"])
                else:
                    cells.append(f"{fmt_rate(x['node_samples_per_s'])} ("
                                 + ", ".join(fmt_rate(v) for v in x["rank_samples_per_s"] or ()) + ")")
            medians = ", ".join(fmt_rate(v) for v in c["rank_median_samples_per_s"] or ()) or "n/a"
            out.append(f"| {_cfg(c['config'])} | {ROLE_TEXT[role]} | {fmt_rate(c['node_samples_per_s'])} | {medians} | "
                       + " | ".join(cells) + " |")
        out.append("")
        for role in ROLES:
            for f in (s["configs"].get(role) or {}).get("failures", []):
                out.append(f"- {ROLE_TEXT[role]} round {f['round']}: {f['status']} ({f['cause']}): "
                           f"{(f['error'] or '')[:300]}")
    for note in s["notes"]:
        out.append(f"- {note}")
    if s["error"]:
        out.append(f"- measurement ended early: {s['error']}")
    out.append("")
    return out


def write_summary(out: str, summaries: list[dict], meta: dict, state: str) -> None:
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(render(summaries, meta, state))
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"state": state, "meta": meta, "workloads": summaries}, fh, indent=2, default=str)
        fh.write("\n")


# --- the command -----------------------------------------------------------------------------

def commit_of(given: str | None) -> str:
    """The commit measured: git's (with "+changes" when the tree differs), else --commit, else commit.txt."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        if head:
            dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return head + (" (+uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    if given:
        return given
    try:
        with open(os.path.join(REPO, "commit.txt")) as fh:
            return fh.read().strip().splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def main(args, parser, argv: list[str]) -> int:
    from autoloader.errors import UsageError
    from autoloader.node import group
    from scripts.bench.run import _names, _version

    t_begin = time.monotonic()
    out = os.path.abspath(args.out)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    if args.deadline_seconds is not None and not args.deadline_seconds > 0:
        parser.error("--deadline-seconds must be > 0")
    if args.budget is not None and not args.budget > 0:
        parser.error("--budget must be > 0")
    if args.scale is not None:
        if not args.scale > 0:
            parser.error("--scale must be > 0")
        os.environ["AUTOLOADER_BENCH_SCALE"] = repr(args.scale)
    scale = os.environ.setdefault("AUTOLOADER_BENCH_SCALE", "1.0")
    os.makedirs(out, exist_ok=True)
    os.chdir(REPO)   # the tuner, the ranks and the runner resolve the workloads' specs from the root

    from scripts.bench.workloads import WORKLOADS

    names = _names(args.workloads)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    gpus = list(hardware.gpu_names())   # NVML: the main process never initialises CUDA
    device = args.device or ("cuda" if gpus else "cpu")
    cpus = hardware.usable_cpus()
    try:
        group.check_nproc(args.nproc_per_node, device, len(gpus), cpus)
    except UsageError as exc:
        parser.error(str(exc))
    import psutil

    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    budget_text = (f"--budget {args.budget:g}" if args.budget is not None
                   else f"the tuner's default budget ({budget_in_effect(args):g} s)")
    meta = {
        "command": " ".join([f"AUTOLOADER_BENCH_SCALE={scale}", "python3", "-m", "scripts.bench"]
                            + [shlex.quote(a) for a in argv]),
        "date": utc_now(), "run_id": run_id, "commit": commit_of(args.commit), "nproc_per_node": args.nproc_per_node,
        "gpus": gpus, "gpu_count": len(gpus), "cpus": cpus, "cpu_model": hardware.detect().cpu_model,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1), "device": device,
        "python": platform.python_version(), "torch": _version("torch"), "optuna": _version("optuna"),
        "scale": scale, "windows": args.windows, "rounds": args.rounds, "budget_text": budget_text,
        "workloads": names, "not_run": [],
        "plan": f"about {plan_s(args, cpus):.0f} s a workload, {len(names) * plan_s(args, cpus):.0f} s for "
                f"{len(names)}" + (f" ({args.deadline_seconds:.0f} s allowed by --deadline-seconds)"
                                   if args.deadline_seconds else ""),
    }
    deadline = t_begin + args.deadline_seconds if args.deadline_seconds else None
    log(f"node bench {run_id}: {', '.join(names)} on {args.nproc_per_node} ranks ({device}; "
        f"{len(gpus)} GPU(s) {', '.join(gpus)}), {cpus} CPUs, {meta['ram_gib']} GiB, scale {scale}, "
        f"tunes {budget_text}, {args.rounds} rounds -> {out}")
    log(f"plan: {meta['plan']}")

    records = begin_run(out, run_id, meta)
    summaries: list[dict] = []
    interrupted = False
    write_summary(out, summaries, meta, "in progress")
    for index, name in enumerate(names):
        w = WORKLOADS[name]
        bench = NodeWorkload(w, args, records, out, device, deadline)
        floor = 2 * bench.tune_s() + LAUNCH_S + bench.round_guess_s()
        if interrupted or bench.seconds_left() < floor:
            reason = ("not begun: the run was interrupted" if interrupted else
                      f"not begun: {max(0.0, bench.seconds_left()):.0f} s were left of --deadline-seconds, "
                      f"a workload needs about {floor:.0f} s")
            log(f"[{name}] {reason}")
            records.write(workload=name, phase="skipped", round=None, reason=reason)
            meta["not_run"].append(f"{name} ({reason})")
            continue
        log(f"[{name}] {w.description}")
        try:
            bench.run()
        except Interrupted as exc:
            interrupted = True
            log(f"[{name}] interrupted by {exc}; writing what was measured")
        summary = bench.summary()
        summaries.append(summary)
        records.write(workload=name, phase="summary", round=None, summary=summary)
        log(f"[{name}] node pick {_pick_text(summary, 'node_tune')}: node {fmt_rate(_rate(summary, 'node_pick'))} samples/s, "
            f"{_ratio_text(summary['node_vs_single'])} the single-rank pick, {_ratio_text(summary['node_vs_rule'])} "
            "the rule")
        write_summary(out, summaries, meta, "interrupted" if interrupted else "in progress")
    meta["total_seconds"] = time.monotonic() - t_begin
    state = "interrupted" if interrupted else ("complete" if not meta["not_run"] else "partial")
    write_summary(out, summaries, meta, state)
    records.close()
    log(f"node bench {state} in {meta['total_seconds']:.0f} s; {os.path.join(out, 'summary.md')}")
    return 1 if interrupted else 0
