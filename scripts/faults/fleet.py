"""Issue 31's fleet storage, through the real CLI and a real PostgreSQL server of the suite's own
(``pgserver.py``), stopped and started again mid-way as an outage would:

- ``dashboard --storage postgresql://...`` with the server stopped: every request a 503 of one
  line, the dashboard's log saying it once, and answering again when the server is back;
- the server stopped after a tune's first finished trial: the run goes on locally and exits 4
  (its result saved, the table saying what was not pushed); the server back, the next run pushes
  the trials kept, then its own, nothing twice (NOTE [ Local first ] in autoloader/store/study.py).
  Lost: trials the first run finished that never reach the fleet, a result not saved;
- ``report KEY --storage URL`` from another --out, for a result the storage alone holds.

Run by ``issue31.run`` in the fault suite (``python -m scripts.faults --only issue31``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from typing import Callable

from scripts.faults import pgserver
from scripts.faults.checks import AUTOLOADER, REPO_ROOT, TINY, Check, cli, line, tracebacks_in, tune_args

GROUP = "issue 31: fleet storage"
PACED = "tests/fleet_workloads.py:paced"   # trials of a few seconds each, so a run has several


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _stopped(proc: subprocess.Popen) -> tuple[str, str]:
    """Ctrl-C to ``proc`` (its output read), killed if it does not end in 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def _dashboard(server: pgserver.Server):
    def body(check: Check) -> None:
        import optuna

        from autoloader.store.storage import driver_url
    from autoloader.store.study import LOCAL_ATTR

        study = optuna.create_study(study_name="hw/key", storage=driver_url(server.url))
        study.add_trial(optuna.trial.create_trial(value=1.0))
        port = _free_port()
        dashboard = subprocess.Popen([AUTOLOADER, "dashboard", "--storage", server.url, "--port", str(port)],
                                     cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        api = f"http://127.0.0.1:{port}/api/studies"
        answers, before, after = [], (0, ""), (0, "")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and dashboard.poll() is None:
                try:
                    before = _get(api)
                    break
                except OSError:
                    time.sleep(0.3)
            server.pause()
            answers = [_get(api) for _ in range(3)] + [_get(f"{api}/0")]
            server.resume()
            after = _get(api)
        finally:
            if _down(server):   # started again even when a request raised, for the next checks
                server.resume()
            stdout, stderr = _stopped(dashboard)
        check.tracebacks += stdout.count("Traceback") + stderr.count("Traceback")
        one_line = all(code == 503 and text.count("\n") == 1 and "is not answering" in text for code, text in answers)
        check.survived = (before[0] == 200 and "hw/key" in before[1] and len(answers) == 4 and one_line
                          and after[0] == 200 and "hw/key" in after[1] and stderr.count("stopped answering") == 1
                          and stderr.count("answers again") == 1 and not check.tracebacks)
        check.told = (answers[0][1].strip() if answers else "") + " | log: " + line(stderr, "stopped answering")
        if not check.survived:
            check.note = (f"before {before[0]}, stopped {[c for c, _ in answers]}, after {after[0]}; "
                          f"{stderr.strip()[-200:]}")
    return body


def _down(server: pgserver.Server) -> bool:
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
        return False
    except OSError:
        return True


def _finished(out: str) -> int:
    dbs = [os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".db")]
    if not dbs:
        return 0
    try:
        with sqlite3.connect(dbs[0], timeout=5) as connection:
            return connection.execute("SELECT COUNT(*) FROM trials WHERE state IN ('COMPLETE', 'FAIL')").fetchone()[0]
    except sqlite3.Error:   # the driver may be mid-write
        return 0


def _fleet_trials(url: str) -> dict[str, list]:
    """The fleet's trials by run: their numbers in the local study they were measured in."""
    import optuna

    from autoloader.store import runs
    from autoloader.store.storage import driver_url
    from autoloader.store.study import LOCAL_ATTR

    by_run: dict[str, list] = {}
    for name in optuna.study.get_all_study_names(storage=driver_url(url)):
        for trial in optuna.load_study(study_name=name, storage=driver_url(url)).get_trials(deepcopy=False):
            by_run.setdefault(trial.user_attrs.get(runs.RUN_ATTR), []).append(trial.user_attrs.get(LOCAL_ATTR))
    return by_run


def _outage(server: pgserver.Server, root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "fleet-outage")
        # 30 s: time for trials after the outage on a loaded machine (the set-up and profile take ~10 s).
        args = tune_args(out, PACED, "--storage", server.url, budget="30")
        driver = subprocess.Popen([AUTOLOADER, *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and driver.poll() is None and _finished(out) < 1:
                time.sleep(0.2)
            if driver.poll() is not None:
                check.note = f"not run: the tune ended (exit {driver.returncode}) before its first trial was stored"
                driver.communicate()
                return
            server.pause()
            at_pause = _finished(out)
            stdout, stderr = driver.communicate(timeout=240)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
            if _down(server):
                server.resume()
        check.tracebacks += stdout.count("Traceback") + stderr.count("Traceback")
        result = line(stdout, "saved ")[len("saved "):]
        first = json.load(open(result)) if result and os.path.isfile(result) else {}
        kept = _finished(out)
        told_table = any(entry.strip().startswith("not pushed to postgresql://") for entry in stdout.splitlines())
        before_next = len(_fleet_trials(server.url).get(first.get("run_id"), []))
        again = cli(*args, "--json")   # not --quiet: the push of the kept trials is a progress notice
        tracebacks_in(check, again)
        second = json.loads(again.stdout) if again.returncode == 0 else {}
        fleet = _fleet_trials(server.url)
        pushed = len(fleet.get(first.get("run_id"), []))
        twice = sum(len(numbers) - len(set(numbers)) for numbers in fleet.values())
        check.lost = (kept - pushed if first else kept) + (0 if first else 1)
        check.survived = (driver.returncode == 4 and told_table and bool(first) and again.returncode == 0
                          # trials finished after the outage: the next run pushes them, and says so
                          and (kept == at_pause or ("trials that earlier runs kept in" in again.stderr
                                                    and before_next < kept))
                          and check.lost == 0
                          and len(fleet.get(second.get("run_id"), [])) == len(second.get("trials", [None]))
                          and twice == 0 and not check.tracebacks)
        outage = line(stderr, "Error:") or line(stderr, "Warning:")
        check.told = (f"exit {driver.returncode}: {outage[:300]} ... then: "
                      f"{line(again.stderr, 'trials that earlier runs kept in')[:200]} ({at_pause} trials stored at "
                      f"the outage, {kept} by the run's end, {before_next} of them in the fleet then, {pushed} "
                      "after the next run)")
        check.note = "" if check.survived else (
            f"exits {driver.returncode} then {again.returncode}; {at_pause} trials at the outage, {kept} kept, "
            f"{before_next} in the fleet before the next run, {pushed} after, "
            f"{twice} pushed twice; table said 'not pushed': {told_table}; {again.stderr.strip()[-200:]}")
    return body


def _report_from_storage(server: pgserver.Server, root: str):
    def body(check: Check) -> None:
        tuned = cli(*tune_args(os.path.join(root, "fleet-here"), TINY, "--storage", server.url, "--json", "--quiet",
                               budget="10"))
        tracebacks_in(check, tuned)
        if tuned.returncode != 0:
            check.note = f"the tune into the storage exited {tuned.returncode}: {tuned.stderr.strip()[-200:]}"
            return
        key = json.loads(tuned.stdout)["dataset_key"]
        elsewhere = os.path.join(root, "fleet-elsewhere")
        run = cli("report", key, "--out", elsewhere, "--storage", server.url)
        tracebacks_in(check, run)
        pages = [os.path.join(r, f) for r, _, fs in os.walk(elsewhere) for f in fs if f.endswith(".html")]
        check.lost = 0 if run.returncode == 0 and len(pages) == 1 else 1
        check.survived = check.lost == 0 and pages[0] in run.stdout and not check.tracebacks
        check.told = run.stdout.strip().splitlines()[0][:300] if run.stdout.strip() else line(run.stderr, "Error:")
        if not check.survived:
            check.note = f"exit {run.returncode}; {run.stderr.strip()[-200:]}"
    return body


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    """Every check of this module on one server of its own, removed after (``add(check, body)``)."""
    checks = [("dashboard: storage stopped", "the server stopped under a dashboard, then started again",
               "CLI + HTTP", _dashboard),
              ("storage stopped mid-tune", "the server stopped after the first finished trial; started again, "
               "the same tune", "CLI", lambda server: _outage(server, root)),
              ("report --storage from another --out", "a result the storage alone holds", "CLI",
               lambda server: _report_from_storage(server, root))]
    server, why = pgserver.start()
    try:
        for name, injected, via, make in checks:
            if server is None:
                add(Check(GROUP, name, injected, via), lambda check: setattr(check, "note", f"not run: {why}"))
            else:
                add(Check(GROUP, name, injected, via), make(server))
    finally:
        if server is not None:
            server.stop()
