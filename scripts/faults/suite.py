"""Run every fault class through the real tuner once and report how it fared.

    .venv/bin/python -m scripts.faults [--report results/reliability.md] [--trial-timeout 8]

(from the repository's root). Each fault (from ``scripts/faults/datasets.py``) is injected into a tiny dataset or step and a whole
tuning run is made with it, through ``autoloader.tune`` or the ``autoloader`` command. A fault
is survived when the run completed, every failed trial names the expected cause, and the pick
is a config that ran. Then the driver itself is SIGKILLed mid-study and the same command rerun:
every trial finished before the kill must be in the study unchanged (results lost: 0). Then the
stored-state and bad-input checks (``state.py``): user code fixed after it failed, a one-off
crash, a raising sampler, a hang under a short budget, Ctrl-C, a password in --storage, damaged
studies and result files, a full disk (each counts the stored results it lost), and the commands'
bad inputs, unwritable folders and full disks (``commands.py``: tracebacks and picks or reports
lost counted). Then the hangs (``hangs.py``): a module-level best_loader() or tune(), a start-up
that never ends, a node rank stopped, Ctrl-C on a node tune, each under a bound of its own. Then
issue 31's cases (``issue31.py``: bad result fields, the report's writes and text, specs that name
no dataset, a worker's failure line, the memory ceiling in the final, a PostgreSQL storage stopped
under the dashboard and mid-tune, ``report --storage``). After
all runs, no process of the suite may be alive (every trial process and worker inherits an
environment tag, so re-parented orphans are found too) and /dev/shm must hold nothing new.
Prints the report and writes it as Markdown.

Then issue 50's cases (``issue50.py``: every read command among decoy files, which must keep every
name and byte; retune over a dataset that segfaults, exits or hangs while its key is read).

``--only state|hangs|issue31|issue50`` (repeatable) runs those parts alone and ``-k WORD`` only their
checks whose name holds WORD: printed as the report renders them, with the processes left
behind; no report is written (developing one check without the suite's 15 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from scripts.faults import (
    datasets as faulty,  # the fault datasets and the leftover checks, shared with the tests
)
from scripts.faults import checks as shared
from scripts.faults import hangs, issue31, issue50, state
from scripts.faults.checks import run_check

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAULTY = "scripts.faults.datasets"  # the CLI's --dataset module; its commands run from REPO_ROOT
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
BUDGET = 60


@dataclass
class Row:
    fault: str
    injected_as: str
    expected: str
    via: str = "tune()"
    completed: bool = False
    trials: int = 0
    hit: int = 0                     # trials the fault ended
    causes: dict = field(default_factory=dict)
    pick: str = "-"
    pick_healthy: bool = False
    seconds: float = 0.0
    note: str = ""

    @property
    def survived(self) -> bool:
        return (self.completed and self.hit > 0 and set(self.causes) == {self.expected}
                and self.pick_healthy)


def _row_from_trials(row: Row, trials: list[dict], pick: dict) -> None:
    row.trials = len(trials)
    failed = [t for t in trials if t["status"] != "ok"]
    row.hit = len(failed)
    for t in failed:
        row.causes[t["cause"]] = row.causes.get(t["cause"], 0) + 1
    healthy = {_key(t["config"]) for t in trials if t["status"] == "ok"}
    row.pick_healthy = _key(pick) in healthy
    row.pick = _key(pick)
    if failed:
        row.note = failed[0]["error"] or ""


def _key(config: dict) -> str:
    """A config's name, from a full LoaderConfig dict or the CLI's DataLoader kwargs."""
    key = f"bs{config['batch_size']}-w{config['num_workers']}-pin{int(bool(config.get('pin_memory')))}"
    if config["num_workers"]:
        key += f"-pf{config.get('prefetch_factor')}-pw{int(bool(config.get('persistent_workers')))}"
    return key


def run_api(row: Row, dataset, out_root: str, trial_timeout: float, **kwargs):
    from autoloader import tune

    events = []
    t0 = time.monotonic()
    kwargs.setdefault("batch_size", 16)
    try:
        result = tune(dataset, budget=BUDGET, device="cpu", out=os.path.join(out_root, row.fault.replace(" ", "-")),
                      trial_timeout=trial_timeout, progress=lambda e: events.append((time.time(), e)),
                      **kwargs)
    except Exception as exc:  # noqa: BLE001 - a crash of the tuner is what this suite looks for
        row.seconds = time.monotonic() - t0
        row.note = f"tuner raised {type(exc).__name__}: {exc}"
        return None, events
    row.seconds = time.monotonic() - t0
    row.completed = True
    _row_from_trials(row, [t.to_dict() for t in result.trials], _config_dict(result.config))
    return result, events


def _config_dict(config) -> dict:
    # Every knob, those that do not apply at their defaults (LoaderConfig is no dataclass since
    # its fields became the settings table's).
    return config.to_dict()


def run_shm_full(row: Row, out_root: str) -> None:
    """The CLI in a private mount namespace whose /dev/shm is a 32 MiB tmpfs of its own."""
    row.via = "CLI, private 32 MiB /dev/shm"
    if not faulty.private_shm_available():
        row.note = "not run: needs root and unshare for a private /dev/shm"
        return
    out = os.path.join(out_root, "shm-full")
    command = " ".join(shlex.quote(a) for a in [
        AUTOLOADER, "tune", "--dataset", f"{FAULTY}:fill_shm", "--batch-size", "16", "--budget", str(BUDGET),
        "--trial-timeout", "20", "--device", "cpu", "--out", out, "--json", "--quiet"])
    t0 = time.monotonic()
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          f"mount -t tmpfs -o size=32m tmpfs /dev/shm && exec {command}"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    row.seconds = time.monotonic() - t0
    if run.returncode != 0:
        row.note = f"exit {run.returncode}: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ''}"
        return
    data = json.loads(run.stdout)
    row.completed = True
    _row_from_trials(row, data["trials"], data["config"])


@dataclass
class KillResume:
    finished_before: int = 0
    stale_before: int = 0
    lost: int = -1
    stale_marked_fail: int = 0
    resumed_line: str = ""
    orphans_after_kill: list = field(default_factory=list)
    completed: bool = False
    seconds: float = 0.0
    note: str = ""


def run_kill_resume(out_root: str, tag: str) -> KillResume:
    """``autoloader tune`` SIGKILLed once its study has 2 finished trials and one running, then
    the same command again."""
    report = KillResume()
    out = os.path.join(out_root, "sigkill")
    command = [AUTOLOADER, "tune", "--dataset", f"{FAULTY}:waiting", "--batch-size", "16", "--budget", "60",
               "--device", "cpu", "--out", out, "--trial-timeout", "20"]
    t0 = time.monotonic()
    before, _ = faulty.kill_mid_study(command, out, REPO_ROOT, timeout_s=180)
    if before is None:
        report.note = "the driver ended before its study had 2 finished trials and 1 running"
        return report
    report.orphans_after_kill = faulty.leftover_processes(tag)
    finished = {tid: attr for tid, (state, attr) in before.items() if state in ("COMPLETE", "FAIL")}
    stale = [tid for tid, (state, _) in before.items() if state == "RUNNING"]
    report.finished_before, report.stale_before = len(finished), len(stale)
    rerun = subprocess.run(command + ["--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    report.seconds = time.monotonic() - t0
    match = re.search(r"resuming \d+ finished trials( \(\d+ interrupted trials marked failed\))?", rerun.stderr)
    report.resumed_line = match.group(0) if match else ""
    if rerun.returncode != 0:
        report.note = f"rerun exit {rerun.returncode}: {rerun.stderr.strip().splitlines()[-1:]}"
        return report
    report.completed = bool(json.loads(rerun.stdout).get("config"))
    after = faulty.study_states(faulty.find_study(out))
    report.lost = sum(1 for tid, attr in finished.items()
                      if tid not in after or after[tid][1] != attr or after[tid][0] != before[tid][0])
    report.stale_marked_fail = sum(1 for tid in stale if after.get(tid, ("",))[0] == "FAIL")
    return report


def hang_detection(events, marker: str) -> list[tuple[float, float]]:
    """(seconds from the first worker's hang to the trial's end, the tuner's own stalled_s) per
    hang trial."""
    starts = sorted(float(line.split()[0]) for line in open(marker)) if os.path.exists(marker) else []
    out = []
    for wall, event in events:
        result = event.result if event.kind == "trial" else None
        if result is None or result.status != "hang":
            continue
        began = [s for s in starts if s <= wall]
        if began:
            out.append((wall - max(began), result.stalled_s))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default=os.path.join(REPO_ROOT, "results", "reliability.md"))
    parser.add_argument("--trial-timeout", type=float, default=8.0)
    parser.add_argument("--only", action="append", choices=ONLY, help="run only these parts; no report written")
    parser.add_argument("-k", dest="keyword", help="with --only: only the checks whose name holds this")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.only:
        return only(args.only, args.keyword)
    command = "python " + " ".join(shlex.quote(a) for a in ["-m", "scripts.faults", *argv])
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()   # the suite's run times are the machine's as loaded then
    tag = uuid.uuid4().hex
    os.environ[faulty.TAG_VAR] = tag
    shm_before = faulty.shm_names()
    out_root = tempfile.mkdtemp(prefix="autoloader-faults-")
    t_suite = time.monotonic()
    tt = args.trial_timeout
    rows: list[Row] = []
    hang_times: list[tuple[float, float]] = []
    orphans_reported = 0

    def api(row: Row, dataset, **kwargs):
        nonlocal orphans_reported
        print(f"-- {row.fault} ...", file=sys.stderr, flush=True)
        result, events = run_api(row, dataset, out_root, tt, **kwargs)
        orphans_reported += result.orphans if result is not None else 0
        rows.append(row)
        return events

    api(Row("worker segfault", "SIGSEGV in __getitem__, in workers", "worker_segfault"),
        faulty.SignalInWorker(signal.SIGSEGV))
    api(Row("worker OOM-killed", "SIGKILL in __getitem__, in workers", "worker_killed"),
        faulty.SignalInWorker(signal.SIGKILL))
    api(Row("worker bus error", "SIGBUS in __getitem__, in workers", "shm_exhausted"),
        faulty.SignalInWorker(signal.SIGBUS))
    print("-- /dev/shm really full ...", file=sys.stderr, flush=True)
    shm_row = Row("/dev/shm full", "worker 0 takes all of /dev/shm", "shm_exhausted")
    run_shm_full(shm_row, out_root)
    rows.append(shm_row)
    api(Row("host memory > --max-memory", "+200 MB per batch per worker, any workers; max_memory=1.5G",
            "host_memory"), faulty.HoardInWorker(min_workers=1), max_memory="1.5G")
    api(Row("CUDA out of memory", "step raises torch.OutOfMemoryError from batch 64; --batch-sizes 16,64",
            "cuda_oom"), faulty.Tiny(), batch_size=None, batch_sizes=[16, 64],
        step=faulty.StepFaults({64: "cuda_oom"}))
    api(Row("trial process OOM-killed", "step SIGKILLs its own process from batch 64", "runner_killed"),
        faulty.Tiny(), batch_size=None, batch_sizes=[16, 64], step=faulty.StepFaults({64: "kill"}))
    api(Row("__getitem__ raises", "ValueError in workers", "dataset_error"), faulty.RaiseInWorker())
    api(Row("collate_fn raises", "ValueError in workers", "collate_error"), faulty.Tiny(),
        collate_fn=faulty.collate_breaks_in_workers)
    api(Row("step raises", "RuntimeError from batch 64; --batch-sizes 16,64", "step_error"), faulty.Tiny(),
        batch_size=None, batch_sizes=[16, 64], step=faulty.StepFaults({64: "raise"}))
    marker = os.path.join(out_root, "hang-started")
    events = api(Row("hang", f"a worker sleeps forever, any workers; trial_timeout={tt:g}", "hang"),
                 faulty.HangInWorker(marker, min_workers=1))
    hang_times = hang_detection(events, marker)
    print("-- driver SIGKILLed mid-study, then resumed ...", file=sys.stderr, flush=True)
    kill = run_kill_resume(out_root, tag)
    checks = state.run_all(out_root)
    hangs.run(out_root, lambda check, body: checks.append(run_check(check, body)))
    issue31.run(out_root, lambda check, body: checks.append(run_check(check, body)))
    issue50.run(out_root, lambda check, body: checks.append(run_check(check, body)))
    issue31_orphans = issue31.leftover(tag)
    for check in checks:   # the scratch folder's name says nothing
        check.told = check.told.replace(out_root, "$TMP")

    leftover = faulty.leftover_processes(tag)
    shm_leaks = faulty.new_shm_entries(shm_before, tag)
    suite_s = time.monotonic() - t_suite
    shutil.rmtree(out_root, ignore_errors=True)

    text = render(rows, kill, leftover, shm_leaks, hang_times, tt, orphans_reported, suite_s, command, started,
                  checks, issue31_orphans, loads=(load_before, os.getloadavg()))
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    with open(args.report, "w") as fh:
        fh.write(text)
    print(f"written to {os.path.relpath(args.report, REPO_ROOT)}", file=sys.stderr)
    ok = (all(r.survived for r in rows if not r.note.startswith("not run")) and kill.lost == 0
          and kill.completed and not leftover and not shm_leaks and not kill.orphans_after_kill
          and state.all_survived(checks) and not issue31_orphans)
    return 0 if ok else 1


ONLY = ("state", "hangs", "issue31", "issue50")


def only(parts: list[str], keyword: str | None) -> int:
    """``--only``: the checks of ``parts`` (``-k``: those whose name holds ``keyword``), printed."""
    tag = uuid.uuid4().hex
    os.environ[faulty.TAG_VAR] = tag
    shared.KEYWORD = keyword
    root = tempfile.mkdtemp(prefix="autoloader-faults-")
    checks: list = []
    add = lambda check, body: checks.append(run_check(check, body))  # noqa: E731
    try:
        if "state" in parts:
            checks += state.run_all(root)
        if "hangs" in parts:
            hangs.run(root, add)
        if "issue31" in parts:
            issue31.run(root, add)
        if "issue50" in parts:
            issue50.run(root, add)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    leftover = faulty.leftover_processes(tag)
    checks = [c for c in checks if c.note != shared.SKIPPED]
    for check in checks:
        check.told = check.told.replace(root, "$TMP")
    others = [c for c in checks if not issue31.owns(c) and not issue50.owns(c)]
    mine = [c for c in checks if issue31.owns(c)]
    print("\n".join([*(state.render(others) if others else []), *(issue31.render(mine) if mine else []),
                     *issue50.render(checks),
                     "| measure | value | required |", "|---|---|---|",
                     *(state.totals(others) + hangs.totals(others) if others else []),
                     *(issue31.totals(mine, leftover) if mine else [f"| processes left behind | {len(leftover)} | 0 |"]),
                     *issue50.totals(checks)]))
    return 0 if state.all_survived(checks) and not leftover else 1


def render(rows, kill: KillResume, leftover, shm_leaks, hang_times, tt, orphans_reported, suite_s,
           command, started, checks=(), issue31_orphans=(), loads=None) -> str:
    import psutil
    import torch

    def yes(flag: bool) -> str:
        return "yes" if flag else "**NO**"

    lines = ["# Reliability: faults injected into real tuning runs", "",
             f"- command: `{command}` (from the repository root)",
             f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}",
             f"- machine: {len(os.sched_getaffinity(0))} usable CPUs, "
             f"{round(psutil.virtual_memory().total / 2**30)} GiB RAM, no GPU; Python {platform.python_version()}, "
             f"torch {torch.__version__}",
             f"- every run: `--budget {BUDGET}`, `--batch-size 16` unless stated, `trial_timeout={tt:g}` s; "
             f"suite wall time {suite_s:.0f} s",
             *([f"- load average (1, 5, 15 min; uptime's): {', '.join(f'{x:.2f}' for x in loads[0])} at the start, "
                f"{', '.join(f'{x:.2f}' for x in loads[1])} at the end"] if loads else []),
             "",
             "## Faults by class", "",
             "Survived = the tuner completed, every failed trial names the expected cause, and the pick "
             "is a config that ran. Trials hit = trials the fault ended and the search counted (a crash is "
             "tried once more before it counts, so a crashing config ran twice; other failures once).", "",
             "| fault | injected as | via | trials hit / all | cause named | survived | pick | run s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        causes = ", ".join(f"{c} x{n}" for c, n in r.causes.items()) or "-"
        if r.note.startswith("not run"):
            lines.append(f"| {r.fault} | {r.injected_as} | {r.via} | - | - | not run: {r.note[9:]} | - | - |")
            continue
        lines.append(f"| {r.fault} | {r.injected_as} | {r.via} | {r.hit} / {r.trials} | {causes} | "
                     f"{yes(r.survived)} | {r.pick} | {r.seconds:.0f} |")
    lines += ["", "What the user was told (first failed trial of each run):", ""]
    for r in rows:
        if r.note:
            lines.append(f"- {r.fault}: `{r.note[:300]}`")
    hang = ", ".join(f"{d:.2f} s (tuner: no batch for {s:.2f} s)" for d, s in hang_times) or "no hang trial"
    others = [c for c in checks if not issue31.owns(c) and not issue50.owns(c)]
    lines += ["", *state.render(others), *issue31.render(list(checks)), *issue50.render(list(checks))]
    lines += ["## Totals", "",
              "| measure | value | required |", "|---|---|---|",
              f"| fault classes survived | {sum(r.survived for r in rows)} of "
              f"{sum(1 for r in rows if not r.note.startswith('not run'))} | all |",
              f"| results lost after SIGKILL of the driver + resume | {kill.lost if kill.lost >= 0 else 'n/a'} "
              f"(of {kill.finished_before} finished before the kill) | 0 |",
              f"| stale RUNNING trials marked FAIL on resume | {kill.stale_marked_fail} of {kill.stale_before} | all |",
              f"| resumed run completed with a result | {yes(kill.completed)} | yes |",
              f"| trial processes alive after the driver's SIGKILL | {len(kill.orphans_after_kill)} | 0 |",
              f"| orphan processes after the suite | {len(leftover)} | 0 |",
              f"| orphans counted by the tuner (TuneResult.orphans, summed) | {orphans_reported} | 0 |",
              f"| new /dev/shm entries after the suite | {len(shm_leaks)} | 0 |",
              f"| time to detect a hang (hang start to trial ended and recorded), trial_timeout={tt:g} s | "
              f"{hang} | about trial_timeout (the watchdog's bound, then the kill and the study write) |",
              *state.totals(others), *hangs.totals(others), *issue31.totals(list(checks), list(issue31_orphans)),
              *issue50.totals(list(checks))]
    if kill.resumed_line:
        lines += ["", f"The resumed run said: `{kill.resumed_line}`."]
    if kill.note:
        lines += ["", f"Kill/resume note: {kill.note}"]
    if leftover:
        lines += ["", "Leftover processes:", "", *[f"- `{p}`" for p in leftover]]
    if shm_leaks:
        lines += ["", "Leftover /dev/shm entries:", "", *[f"- `{n}`" for n in shm_leaks]]
    lines += ["", "Notes:", "",
              "- Faults fire only inside DataLoader workers (or, for step faults, from a batch size up), so "
              "every study also has healthy configs; the search measures num_workers=0, the model's pick and "
              "the cpus-1 rule first (the profile before them starts one worker), so a faulty config runs "
              "early.",
              "- The stored-state and bad-input checks are scripts/faults/state.py, damage.py and commands.py "
              "(show, dashboard, retune and best_loader given bad input, unwritable folders, full disks): each is one "
              "or two real runs of the CLI or the API, on a copy of one base study where it damages stored "
              "state; a full disk is a small tmpfs --out in a private mount namespace, filled while the run "
              "goes (scripts/faults/full_disk.py).",
              "- Issue 31's cases are scripts/faults/records.py, specs.py and fleet.py (wired by issue31.py): "
              "each stored-record case damages a copy of one real result; the fleet's cases run a PostgreSQL "
              "server of their own (scripts/faults/pgserver.py), stopped with `pg_ctl -m immediate` and started "
              "again on the same port. `python -m scripts.faults --only issue31` runs them alone.",
              "- Signals stand in for the kernel: SIGSEGV for a crash in native decoding code, SIGKILL for "
              "the OOM killer, SIGBUS for what a worker gets writing into a full /dev/shm. The /dev/shm-full "
              "run is real: a private mount namespace with a 32 MiB /dev/shm of its own, which a worker "
              "fills; this machine's /dev/shm is never touched.",
              "- Hang detection: the watchdog ends a trial after trial_timeout without progress (no batch), "
              "so the time from the hang's start is trial_timeout, plus up to one progress report (0.5 s) "
              "and the kill.",
              ""]
    return "\n".join(lines)
