"""The fault suite's cases of issue 50 (a command that reads never writes; retune's key read
isolated): every read command pointed at files that are not autoloader's (a text file, a folder of
a project's JSON, an application's SQLite database), each counting the names and bytes it changed;
and ``retune`` over registries whose first dataset segfaults, exits 3 or hangs while its key is
read, each counting what it lost (the other dataset's tune, the report).

    python -m scripts.faults --only issue50 [-k WORD]     # these alone, printed (no report written)
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import tempfile
import time
from typing import Callable

from scripts.faults.checks import REPO_ROOT, Check, cli, line, tracebacks_in
from scripts.faults.inputs import result_record, write_result

PREFIX = "issue 50"
READS = f"{PREFIX}: reads"
RETUNE = f"{PREFIX}: retune"
FLEET = os.path.join(REPO_ROOT, "tests", "fleet_workloads.py")
BAD_BUDGET, GOOD_BUDGET = 20, 30   # the bad one's hang is stopped at its budget


def decoys(root: str) -> dict[str, str]:
    """A folder of things that are not autoloader's: a text file, a project's JSON in ``sub/``,
    an application's SQLite database of one table; their paths by what they are."""
    sub = os.path.join(root, "sub")
    os.makedirs(sub, exist_ok=True)
    paths = {"text": os.path.join(root, "notes.txt"), "package": os.path.join(sub, "package.json"),
             "tsconfig": os.path.join(sub, "tsconfig.json"), "db": os.path.join(sub, "app.db")}
    with open(paths["text"], "w") as fh:
        fh.write("root:x:0:0:root:/root:/bin/bash\n")
    with open(paths["package"], "w") as fh:
        json.dump({"name": "app", "version": "1.0.0", "dependencies": {"left-pad": "^1.3.0"}}, fh)
    with open(paths["tsconfig"], "w") as fh:
        json.dump({"compilerOptions": {"strict": True}}, fh)
    connection = sqlite3.connect(paths["db"])
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO users (name) VALUES ('ada')")
    connection.commit()
    connection.close()
    return paths


def tree(root: str) -> dict[str, str]:
    """Every name under ``root`` and a hash of each file's bytes (a folder: its name alone)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root) + "/"] = "folder"
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as fh:
                found[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return found


def changed(before: dict[str, str], after: dict[str, str], ours: str = "") -> int:
    """Names gone, added or whose bytes differ, autoloader's own (a report beside its result,
    names under ``ours``) aside."""
    names = {n for n in set(before) | set(after) if not (ours and n.startswith(ours))}
    return sum(before.get(n) != after.get(n) for n in names)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(name: str, args: Callable[[dict, str], list[str]], codes: tuple[int, ...], says: str, result: bool = False):
    key = result_record()["dataset_key"]
    ours = os.path.join(result_record()["hardware"]["fingerprint"], key) + "."

    def body(check: Check) -> None:
        root = tempfile.mkdtemp(prefix="decoys-", dir=BASE[0])
        paths = decoys(root)
        if result:
            write_result(root, result_record())
        before = tree(root)
        run = cli(*args(paths, root), timeout=120)
        check.lost = changed(before, tree(root), ours)
        tracebacks_in(check, run)
        check.told = line(run.stderr, "Error:") or line(run.stderr, "Warning:")
        check.survived = (run.returncode in codes and says in run.stdout + run.stderr and check.lost == 0
                          and check.tracebacks == 0)
        if not check.survived:
            check.note = f"exit {run.returncode}; {(run.stderr.strip().splitlines() or [''])[-1][:200]}"

    return Check(READS, name, "a text file, sub/package.json, sub/tsconfig.json, sub/app.db (1 table)", "CLI"), body


READ_CASES = [
    ("show FILE (a text file)", lambda p, r: ["show", p["text"]], (2,), "not an autoloader result"),
    ("show FILE (package.json)", lambda p, r: ["show", p["package"]], (2,), "not an autoloader result"),
    ("show --out DIR", lambda p, r: ["show", "--out", r], (0,), "left as it is"),
    ("show --json --out DIR", lambda p, r: ["show", "--json", "--out", r], (0,), "left as it is"),
    ("show --storage sqlite:///app.db", lambda p, r: ["show", "--out", os.path.join(r, "none"), "--storage",
                                                      f"sqlite:///{p['db']}"], (2,), "not a study"),
    ("report FILE (package.json)", lambda p, r: ["report", p["package"]], (2,), "not an autoloader result"),
    # A report of a thin record may be refused (exit 2, "tune again"): the decoys are what is judged.
    ("report KEY --out DIR", lambda p, r: ["report", result_record()["dataset_key"], "--out", r], (0, 2),
     "left as it is"),
    ("dashboard --out DIR", lambda p, r: ["dashboard", "--out", r, "--port", str(_free_port())], (2,), "not a study"),
]

BASE: list[str] = [""]


def _retune(bad: str, cause: str):
    def body(check: Check) -> None:
        root = tempfile.mkdtemp(prefix="retune-", dir=BASE[0])
        registry = os.path.join(root, "nightly.toml")
        with open(registry, "w") as fh:
            fh.write("\n".join([
                "[defaults]", 'device = "cpu"', "", "[thresholds]", "busy = 0.99", "",
                "[[datasets]]", 'name = "bad"', f'dataset = "{FLEET}:{bad}"', "batch_size = 16",
                f"budget = {BAD_BUDGET}", "",
                "[[datasets]]", 'name = "good"', f'dataset = "{FLEET}:small"', "batch_size = 16",
                f"budget = {GOOD_BUDGET}", ""]))
        t0 = time.monotonic()
        run = cli("retune", registry, "--out", os.path.join(root, "out"), "--reports", os.path.join(root, "reports"),
                  "--json", "--quiet", timeout=300)
        took = time.monotonic() - t0
        tracebacks_in(check, run)
        try:
            report = json.loads(run.stdout)
            first, second = report["datasets"]
        except (ValueError, KeyError):
            check.lost = 2
            check.note = f"exit {run.returncode}, no report: {(run.stderr.strip().splitlines() or [''])[-1][:200]}"
            return
        written = os.path.isfile(os.path.join(root, "reports", "latest.json"))
        check.lost = int(second["status"] == "failed") + int(not written)
        check.told = f"exit {run.returncode} in {took:.0f} s; bad: {first['error'][:300]}; good: {second['status']}"
        check.survived = (run.returncode == 1 and first["status"] == "failed" and cause in (first["error"] or "")
                          and check.lost == 0 and check.tracebacks == 0 and took < BAD_BUDGET + 2 * GOOD_BUDGET + 30)
        if not check.survived:
            check.note = f"the good dataset: {second['status']} {(second['error'] or '')[:200]}"

    return Check(RETUNE, f"key read: {bad}", f"{bad} (its last sample; budget {BAD_BUDGET} s), then a good "
                 f"dataset (budget {GOOD_BUDGET} s)", "CLI"), body


RETUNE_CASES = [("segfault_in_key", "ended by SIGSEGV"), ("exit_in_key", "exited with code 3"),
                ("hang_in_key", "did not end within its budget")]


SMALL = f"{PREFIX}: smaller"


def _cli_case(name: str, injected: str, args: Callable[[str], list[str]], says: tuple[str, ...],
              codes: tuple[int, ...], before: Callable[[str], None] | None = None):
    """A CLI run that must exit with one of ``codes``, say each of ``says``, show no traceback,
    no usage header and no resource_tracker warning."""
    def body(check: Check) -> None:
        work = tempfile.mkdtemp(prefix="small-", dir=BASE[0])
        if before is not None:
            before(work)
        run = cli(*args(work), timeout=300)
        tracebacks_in(check, run)
        missing = [s for s in says if s not in run.stderr + run.stdout]
        check.told = next((line(run.stderr, s) for s in says if s in run.stderr), "") or \
            (run.stderr.strip().splitlines() or [""])[-1]
        check.survived = (run.returncode in codes and not missing and check.tracebacks == 0
                          and "Usage:" not in run.stderr and "leaked semaphore" not in run.stderr)
        if not check.survived:
            last = (run.stderr.strip().splitlines() or [""])[-1][:200]
            check.note = f"exit {run.returncode}; missing {missing}; {last}"

    return Check(SMALL, name, injected, "CLI"), body


def _symlinked_lock(work: str) -> None:
    from autoloader.api import built_problem
    from autoloader.inputs.source import Source
    from autoloader.store.paths import lock_path
    from scripts.faults.datasets import tiny

    problem = built_problem(tiny(), Source.from_spec("scripts.faults.datasets:tiny"), batch_size=16, device="cpu")
    lock = lock_path(os.path.join(work, "out"), problem.hardware.fingerprint, problem.key)
    os.makedirs(os.path.dirname(lock))
    with open(os.path.join(work, "target"), "w") as fh:
        fh.write("x")
    os.symlink(os.path.join(work, "target"), lock)


def _tune(dataset: str, *more: str, budget: str = "40") -> Callable[[str], list[str]]:
    return lambda work: ["tune", "--dataset", dataset, "--batch-size", "16", "--budget", budget, "--device", "cpu",
                         "--trial-timeout", "10", "--out", os.path.join(work, "out"), *more]


SMALL_CASES = [
    ("a symlinked lock", "<key>.lock a symbolic link to a file elsewhere", _tune("scripts.faults.datasets:tiny"),
     ("symbolic link", "Fix: remove it"), (2,), _symlinked_lock),
    ("a server that refuses the connection", "show --storage postgresql://...@127.0.0.1:9/studies",
     lambda work: ["show", "--storage", "postgresql+psycopg://tuner:hunter2@127.0.0.1:9/studies"],
     ("could not connect: connection refused", "start the database server"), (2,), None),
    ("a dataset leaking file descriptors", "each sample opens /dev/null and keeps it, in the trial process; "
     "RLIMIT_NOFILE lowered", _tune("scripts.faults.datasets:leak_fds"),
     ("ran out of file descriptors", "Fix: close each file"), (0, 1), None),
    ("a dataset leaking file descriptors in its workers", "as above, in DataLoader workers too",
     _tune("scripts.faults.datasets:leak_fds_in_workers"), ("ran out of file descriptors", "Fix: close each file"),
     (0, 1), None),
    ("a step raising KeyboardInterrupt", "step(batch) raises KeyboardInterrupt from batch 64; --batch-sizes 16,64",
     lambda work: ["tune", "--dataset", "scripts.faults.datasets:tiny", "--step",
                   "scripts.faults.datasets:interrupting_step", "--batch-sizes", "16,64", "--budget", "60",
                   "--device", "cpu", "--out", os.path.join(work, "out")],
     ("the step raised KeyboardInterrupt()",), (0,), None),
    ("a step raising SystemExit", "step(batch) raises SystemExit(3) from batch 64; --batch-sizes 16,64",
     lambda work: ["tune", "--dataset", "scripts.faults.datasets:tiny", "--step",
                   "scripts.faults.datasets:exiting_step", "--batch-sizes", "16,64", "--budget", "60",
                   "--device", "cpu", "--out", os.path.join(work, "out")],
     ("the step raised SystemExit(3)",), (0,), None),
    ("a zero-argument factory of a torchdata.nodes graph", "--dataset tests/nodes_workloads.py:graph",
     _tune(f"{os.path.join(REPO_ROOT, 'tests', 'nodes_workloads.py')}:graph", "--json"),
     ('"nodes"',), (0,), None),
]


def _detached(check: Check) -> None:
    """A dataset that starts ``sleep 300`` detached: none may be alive after the tune."""
    import psutil

    from autoloader import tune
    from scripts.faults.datasets import Detached

    work = tempfile.mkdtemp(prefix="detached-", dir=BASE[0])
    marker = os.path.join(work, "pids")
    tune(Detached(marker), batch_size=16, budget=40, device="cpu", out=os.path.join(work, "out"), progress=False)
    with open(marker) as fh:
        pids = [int(x) for x in fh.read().split()]
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    for pid in alive:
        psutil.Process(pid).kill()
    check.lost = len(alive)
    check.told = f"{len(pids)} started, {len(alive)} alive after the tune"
    check.survived = bool(pids) and not alive


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    BASE[0] = root
    for name, args, codes, says in READ_CASES:
        add(*_read(name, args, codes, says, result="KEY" in name))
    for bad, cause in RETUNE_CASES:
        add(*_retune(bad, cause))
    for case in SMALL_CASES:
        add(*_cli_case(*case))
    add(Check(SMALL, "processes a dataset starts detached", "sleep 300 started with start_new_session=True, "
              "orphaned", "tune()"), _detached)


def owns(check: Check) -> bool:
    return check.group.startswith(PREFIX)


def _ran(checks: list[Check]) -> list[Check]:
    return [c for c in checks if owns(c) and not c.note.startswith("not run")]


def render(checks: list[Check]) -> list[str]:
    mine = [c for c in checks if owns(c)]
    if not mine:
        return []
    lines = ["## Issue 50: a command that reads never writes; retune's key read isolated", "",
             "Each is a real run of the CLI. Reads: a folder of decoys (not autoloader's) hashed before and after; "
             "survived = the command refused or listed around them as the README says, with no traceback and no "
             "name or byte changed (lost = names or files changed; a report beside its own result is autoloader's). "
             "Retune: a registry whose first dataset fails while its key is read, then a good one; survived = exit 1, "
             "the failure named with its cause, the good dataset tuned, the report written (lost = a dataset not "
             "tuned, a report not written), within the budgets. Smaller: each fault named with its fix, no traceback, "
             "no usage header, no resource_tracker warning (lost = the dataset's processes alive after the tune).", "",
             "| group | case | injected as | via | survived | tracebacks | lost | run s |",
             "|---|---|---|---|---|---|---|---|"]
    for c in mine:
        group = c.group[len(PREFIX) + 2:]
        lines.append(f"| {group} | {c.name} | {c.injected_as} | {c.via} | {'yes' if c.survived else '**NO**'} | "
                     f"{c.tracebacks} | {c.lost if c.lost is not None else 0} | {c.seconds:.0f} |")
    lines += ["", "What the user was told:", ""]
    lines += [f"- {c.name}: `{c.told[:600]}`" + (f" ({c.note})" if c.note else "") for c in mine if c.told or c.note]
    return lines + [""]


def totals(checks: list[Check]) -> list[str]:
    ran = _ran(checks)
    if not ran:
        return []
    return [f"| issue-50 cases survived | {sum(c.survived for c in ran)} of {len(ran)} | all |",
            f"| tracebacks shown by the issue-50 checks | {sum(c.tracebacks for c in ran)} | 0 |",
            f"| decoy names and bytes changed, datasets, reports and processes lost to them | "
            f"{sum(c.lost or 0 for c in ran)} | 0 |"]
