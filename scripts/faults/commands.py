"""The commands' bad inputs and full disks, through the real CLI and API: ``show``, ``dashboard``,
``retune`` and ``best_loader`` given what an adversarial user would give them (issue 23). Each
check is survived when every try was refused with a usage error (exit 2, the rule and the fix)
or went on as the README says, with no traceback; it counts the tracebacks shown and the results
and reports lost (a pick chosen but not handed back, a report neither written nor printed).

Run by ``state.run_all`` in the fault suite (``python -m scripts.faults``); tests/test_commands.py
has one test per item.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import warnings
from typing import Callable

from scripts.faults import datasets as faulty
from scripts.faults import full_disk
from scripts.faults.checks import (
    AUTOLOADER,
    REPO_ROOT,
    TINY,
    Check,
    cli,
    line,
    tune_args,
)
from scripts.faults.inputs import Small, registry_text, result_record, write_result

GROUP = "commands"


def _refused(runs: list[subprocess.CompletedProcess], check: Check, *needles: str) -> bool:
    """Whether every run exited 2 with "Error: ... Fix:" (and the needles, in one of them);
    tracebacks counted, the first run's error kept as what the user was told."""
    check.tracebacks += sum(r.stderr.count("Traceback") for r in runs)
    told = [line(r.stderr, "Error:") for r in runs]
    check.told = " | ".join(t[:200] for t in told[:2])
    ok = all(r.returncode == 2 and "Fix:" in r.stderr and "Traceback" not in r.stderr for r in runs) \
        and all(any(n in r.stderr for r in runs) for n in needles)
    if not ok:
        check.note = f"exits {[r.returncode for r in runs]}"
    return ok


def _show_malformed(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "show-malformed")
        kinds = {"dataset": {"dataset": "images"}, "trials": {"trials": 3},
                 "fingerprint": {"hardware": {"fingerprint": 7, "cpus": 2}},
                 "infinite rate": {"samples_per_s": float("inf")},
                 "boolean workers": {"config": {"batch_size": 16, "num_workers": True, "pin_memory": False}}}
        runs = [cli("show", write_result(out, result_record(**change), "hw", re.sub(r"\W+", "-", kind)))
                for kind, change in kinds.items()]
        check.survived = _refused(runs, check, "passes its checks")
        check.told = " | ".join(line(r.stderr, "Warning:").split(": ", 2)[-1].split(". It is not used")[0]
                                for r in runs)
    return body


def _show_listing(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "show-listing")
        write_result(out, result_record())
        bad = write_result(out, result_record(hardware={"fingerprint": None, "cpus": 2}), "other", "bad")
        run = cli("show", "--out", out)
        check.tracebacks += run.stderr.count("Traceback")
        check.survived = (run.returncode == 0 and "1,000 samples/s" in run.stdout and run.stdout.count("samples/s") == 1
                          and f"ignored the stored result {bad}" in run.stderr and not check.tracebacks)
        check.told = line(run.stderr, "Warning:")
    return body


def _show_storage(root: str):
    def body(check: Check) -> None:
        new = os.path.join(root, "new.db")
        runs = [cli("show", "--out", root, "--storage", url) for url in ("bogus://x", f"sqlite:///{new}")]
        check.survived = _refused(runs, check, "'bogus://x'", "must name a storage that exists") \
            and not os.path.exists(new)
    return body


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _dashboard_address(root: str):
    def body(check: Check) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            runs = [cli("dashboard", "--out", root, *args, timeout=60) for args in
                    (["--port", port], ["--port", "99999"], ["--host", "no.such.host.invalid", "--port", port],
                     ["--storage", "bogus://x", "--port", str(_free_port())])]
        check.survived = _refused(runs, check, "no other program listens", "1 to 65535", "--host", "'bogus://x'")
    return body


def _dashboard_damaged(root: str):
    def body(check: Check) -> None:
        import optuna

        from autoloader.fleet import dashboard

        out = os.path.join(root, "dashboard-studies")
        for name in ("hwA/a", "hwB/b"):
            os.makedirs(os.path.join(out, name.split("/")[0]))
            study = optuna.create_study(study_name=name, storage=f"sqlite:///{os.path.join(out, name)}.db")
            study.add_trial(optuna.trial.create_trial(value=1.0))
        os.makedirs(os.path.join(out, "hwC"))
        with open(os.path.join(out, "hwC", "c.db"), "wb") as fh:
            fh.write(os.urandom(40000))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            served = dashboard.storage_to_serve(out, None)
        said = [str(w.message) for w in caught if issubclass(w.category, dashboard.StudySkipped)]
        check.survived = (sorted(optuna.study.get_all_study_names(served.storage)) == ["hwA/a", "hwB/b"]
                          and len(said) == 1 and "hwC/c.db" in said[0])
        check.told = said[0] if said else served.description
    return body


def _registry(root: str, name: str, text: bytes) -> str:
    path = os.path.join(root, name)
    with open(path, "wb") as fh:
        fh.write(text)
    return path


def _retune_inputs(root: str):
    def body(check: Check) -> None:
        reports = os.path.join(root, "reports-file")
        with open(reports, "w") as fh:
            fh.write("a file")
        good = _registry(root, "fleet.toml", registry_text(TINY).encode())
        out = os.path.join(root, "retune-out")
        runs = [cli("retune", good, "--out", out, "--reports", reports),
                cli("retune", _registry(root, "latin1.toml", registry_text(TINY).encode() + b'name = "caf\xe9"\n'),
                    "--out", out),
                cli("retune", _registry(root, "options.toml", registry_text(TINY, 'options = { drop_last = "yes" }')
                                        .encode()), "--out", out)]
        check.survived = _refused(runs, check, "the reports folder", "readable TOML", "drop_last") \
            and faulty.find_study(out) is None
    return body


def _loader_arguments(root: str):
    def body(check: Check) -> None:
        from autoloader import UsageError, tune

        said, slow = [], []
        for kwargs in ({"nonsense_kw": 1}, {"drop_last": "yes"}, {"timeout": -1}, {"batch_sampler": 3}):
            t0 = time.monotonic()
            try:
                tune(Small(), batch_size=16, budget=10, device="cpu", out=os.path.join(root, "args"), **kwargs)
            except UsageError as exc:
                said.append(str(exc))
            slow += [kwargs] if time.monotonic() - t0 > 5 else []
        check.survived = len(said) == 4 and not slow and all("Fix:" in s for s in said)
        check.told = said[0][:200] if said else ""
        if not check.survived:
            check.note = f"{len(said)} of 4 refused; took over 5 s: {slow}"
    return body


def _widened_limits(root: str):
    def body(check: Check) -> None:
        from autoloader import stored_result
        from autoloader.api import built_problem
        from autoloader.inputs.hardware import usable_cpus
        from autoloader.search.policy import MAX_WORKERS_PER_CPU

        dataset, out = Small(), os.path.join(root, "widened")
        problem = built_problem(dataset, dataset, batch_size=16, device="cpu")
        past = MAX_WORKERS_PER_CPU * usable_cpus() + 1
        edits = ({"hardware": {"fingerprint": "x", "cpus": 200},
                  "config": {"batch_size": 16, "num_workers": past, "pin_memory": False, "prefetch_factor": 2}},
                 {"config": {"batch_size": 999999, "num_workers": 1, "pin_memory": False, "prefetch_factor": 2}})
        said = []
        for edit in edits:
            write_result(out, result_record(dataset_key=problem.key, **edit), problem.hardware.fingerprint)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                found = stored_result(dataset, batch_size=16, device="cpu", out=out)
            said += [str(w.message) for w in caught if "ignored the stored result" in str(w.message)] \
                if found is None else []
        check.survived = len(said) == 2
        check.told = " | ".join(s.split(": ", 1)[-1][:120] for s in said)
    return body


def _small_ones(root: str):
    def body(check: Check) -> None:
        parent = os.path.join(root, "a-file")
        with open(parent, "w") as fh:
            fh.write("x")
        module = os.path.join(root, "paths.py")
        with open(module, "w") as fh:
            fh.write('TRAIN = "/data/train"\n')
        env = {**os.environ, "AUTOLOADER_HOME": os.path.join(parent, "home")}
        runs = [cli(*tune_args("")),
                cli("tune", "--dataset", TINY, "--batch-sizes", "16,,32", "--out", os.path.join(root, "sizes")),
                cli("tune", "--dataset", f"{module}:TRAIN", "--device", "cpu", "--out", os.path.join(root, "text")),
                subprocess.run([AUTOLOADER, "tune", "--dataset", TINY, "--device", "cpu"], capture_output=True,
                               text=True, cwd=REPO_ROOT, env=env, timeout=120)]
        check.survived = _refused(runs, check, "(got '')", "none of them empty", "not text", "$AUTOLOADER_HOME")
    return body


def _unwritable_folders(root: str):
    def body(check: Check) -> None:
        from autoloader import UsageError, best_loader

        base = os.path.join(root, "unwritable")
        os.makedirs(base)
        os.symlink(os.path.join(base, "gone"), os.path.join(base, "dangling"))
        with open(os.path.join(base, "file"), "w") as fh:
            fh.write("x")
        said = []
        for out in ("dangling", "file", os.path.join("file", "sub")):
            try:
                best_loader(Small(), batch_size=16, budget=10, device="cpu", out=os.path.join(base, out))
            except UsageError as exc:
                said.append(str(exc))
        ro = os.path.join(base, "read-only")
        os.makedirs(ro)
        code = ("from autoloader import best_loader, UsageError\nfrom scripts.faults.inputs import Small\ntry:\n"
                f"    best_loader(Small(), batch_size=16, budget=10, device='cpu', out={ro!r})\n"
                "except UsageError as exc:\n    print(exc)\n")
        done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               f"mount -t tmpfs -o ro,size=1m tmpfs {ro} && exec {sys.executable} -c \"$0\"", code],
                              capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
        check.tracebacks += done.stderr.count("Traceback")
        said += [done.stdout.strip()] if "read-only" in done.stdout else []
        check.survived = len(said) == 4 and all("Fix:" in s for s in said) and not check.tracebacks
        got = [re.search(r"\(got '(.*?)'\)\. Fix", s) for s in said]
        check.told = " | ".join(g.group(1).replace(base, "") for g in got if g)
    return body


def _take_turns(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "turns")
        command = [AUTOLOADER, "tune", "--dataset", TINY, "--batch-size", "16", "--budget", "10", "--device", "cpu",
                   "--out", out, "--json"]
        runs = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        done = [r.communicate(timeout=300) for r in runs]
        check.tracebacks += sum(e.count("Traceback") for _, e in done)
        waited = [line(e, "autoloader: another process") for _, e in done
                  if re.search(r"another process( \(pid \d+\))? is tuning", e)]
        check.survived = [r.returncode for r in runs] == [0, 0] and len(waited) == 1
        check.told = waited[0][:200] if waited else ""
    return body


def _full_disk(root: str, what: str, command_of: Callable[[str], list[str]], judge):
    def body(check: Check) -> None:
        if not faulty.private_shm_available():
            check.note = "not run: needs root and unshare for a private tmpfs"
            return
        out = os.path.join(root, f"full-{what}")
        run = full_disk.in_private_tmpfs("1m", out, 0, command_of(out), cwd=REPO_ROOT)
        check.tracebacks += run["stderr"].count("Traceback")
        check.survived, check.lost, check.told = judge(run)
        check.survived = check.survived and not check.tracebacks
        if not check.survived:
            check.note = f"exit {run['returncode']}; {run['stderr'].strip()[-200:]}"
    return body


def _retune_judged(run: dict) -> tuple[bool, int, str]:
    printed = run["stdout"].startswith("# autoloader retune") and "bs=16 w=" in run["stdout"]
    return (run["returncode"] == 4 and printed and "free there" in run["stderr"], 0 if printed else 1,
            line(run["stderr"], "Error: could not write the report"))


def _best_loader_judged(run: dict) -> tuple[bool, int, str]:
    try:
        loaded = json.loads(run["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, 1, run["stderr"].strip()[-200:]
    said = [w for w in loaded["warnings"] if "not stored" in w]
    return (run["returncode"] == 0 and loaded["batch_size"] == 16 and bool(said), 0,
            f"loader of {loaded['num_workers']} workers returned; Warning: {said[0][:160] if said else ''}")


def run_all(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    """Every check of the commands (``add(check, body)`` runs one); ``root`` is a scratch folder."""
    registry = os.path.join(root, "full-disk-fleet.toml")
    with open(registry, "w") as fh:
        fh.write(registry_text(TINY))
    checks = [
        ("show FILE: malformed results", "a dataset, trials, fingerprint that are no such thing; inf; a bool",
         "CLI", _show_malformed),
        ("show: a null fingerprint among good", "one result's hardware.fingerprint null", "CLI", _show_listing),
        ("show --storage: bad, missing", "bogus://x; sqlite:///new.db (not there)", "CLI", _show_storage),
        ("dashboard: port and host", "a port in use, 99999, an unknown host, a bad --storage", "CLI",
         _dashboard_address),
        ("dashboard: one damaged study", "garbage .db beside two good ones", "dashboard.storage_to_serve",
         _dashboard_damaged),
        ("retune: reports, registry", "--reports a file; a registry not UTF-8; options drop_last='yes'", "CLI",
         _retune_inputs),
        ("DataLoader arguments", "nonsense_kw=1, drop_last='yes', timeout=-1, batch_sampler=3", "tune()",
         _loader_arguments),
        ("a result widens its limits", "400 workers beside cpus: 200; batch 999999 under a key for 16",
         "stored_result()", _widened_limits),
        ("small ones", "--out ''; --batch-sizes 16,,32; a str dataset; a bad $AUTOLOADER_HOME", "CLI", _small_ones),
        ("best_loader: unwritable folder", "a dangling link, a file, a file in the path, a read-only mount",
         "best_loader()", _unwritable_folders),
        ("two tunes of one problem", "two CLI tunes at once into one folder", "CLI", _take_turns),
        ("retune on a full disk", "a 1 MiB tmpfs --out, full", "CLI",
         lambda root: _full_disk(root, "retune", lambda out: [AUTOLOADER, "retune", registry, "--out", out,
                                                               "--quiet"], _retune_judged)),
        ("best_loader on a full disk", "a 1 MiB tmpfs out=, full", "best_loader()",
         lambda root: _full_disk(root, "best-loader", lambda out: [sys.executable, "-m", "scripts.faults.inputs",
                                                                    "best_loader", out], _best_loader_judged)),
    ]
    for name, injected, via, make in checks:
        add(Check(GROUP, name, injected, via), make(root))
