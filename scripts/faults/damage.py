"""Damaged stored state through the real tuner: a study overwritten with garbage, half-truncated,
with flipped bytes in its records, one malformed record; a result file with 400 workers, a string
for a rate, a newer format; a disk that fills mid-search, and one full from the start. Each check
counts the stored results lost: trials stored before the damage that are neither read back nor
kept aside (``X.db.corrupt-<time>``, byte for byte)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import warnings
from typing import Callable

from scripts.faults import datasets as faulty
from scripts.faults import full_disk
from scripts.faults.checks import (
    AUTOLOADER,
    REPO_ROOT,
    TINY,
    WAITING,
    Check,
    cli,
    line,
    tune_args,
)


def base_study(root: str) -> str:
    """A real study and result from one short tune, for the damage checks to copy."""
    base = os.path.join(root, "base")
    run = cli(*tune_args(base, budget="10"), "--quiet")
    if run.returncode != 0:
        raise RuntimeError(f"the base tune failed: {run.stderr[-300:]}")
    return base


def _copy_of(base: str, name: str) -> tuple[str, str]:
    out = base + "-" + re.sub(r"\W+", "-", name)
    shutil.copytree(base, out)
    return out, faulty.find_study(out)


def _finished(db: str) -> dict:
    return {tid: v for tid, v in faulty.study_states(db).items() if v[0] in ("COMPLETE", "FAIL")}


def _damaged_study(base: str, damage: Callable[[str], None]):
    def body(check: Check) -> None:
        out, db = _copy_of(base, check.name)
        before = _finished(db)
        damage(db)
        damaged = open(db, "rb").read()
        run = cli(*tune_args(out, budget="10"))
        moved = re.search(r"moved aside to (\S+\.corrupt-\S+?),", run.stderr)
        kept = bool(moved) and os.path.exists(moved.group(1)) and open(moved.group(1), "rb").read() == damaged
        check.lost = 0 if kept else len(before)
        check.survived = run.returncode == 0 and kept and "Traceback" not in run.stderr
        check.told = line(run.stderr, "Warning:")
        if not check.survived:
            check.note = f"exit {run.returncode}; {run.stderr.strip()[-200:]}"
    return body


def _garbage(db: str) -> None:
    size = os.path.getsize(db)
    with open(db, "wb") as fh:
        fh.write(os.urandom(size))


def _flip_records(db: str) -> None:
    data = bytearray(open(db, "rb").read())
    at = data.find(b'"samples_per_s"')
    data[at:at + 12] = b"\x00\xff{[\x01\x02garbag"
    open(db, "wb").write(bytes(data))


def _malformed_record(base: str):
    def body(check: Check) -> None:
        out, db = _copy_of(base, check.name)
        before = _finished(db)
        with sqlite3.connect(db) as connection:
            (attr_id, value), = connection.execute(
                "SELECT trial_user_attribute_id, value_json FROM trial_user_attributes WHERE key = "
                "'autoloader_result' ORDER BY trial_id LIMIT 1").fetchall()
            record = json.loads(value)
            record["config"]["batch_size"] = "sixteen"
            record["samples_per_s"] = "fast"
            connection.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_user_attribute_id = ?",
                               (json.dumps(record), attr_id))
            # The base run as a killed one (its owner gone, not complete), so the next run resumes it
            # and reads its records back: the damaged one must be ignored, the others kept.
            for mark_id, mark_value in connection.execute(
                    "SELECT study_user_attribute_id, value_json FROM study_user_attributes "
                    "WHERE key LIKE 'autoloader_run:%'").fetchall():
                mark = json.loads(mark_value)
                mark.update(state="running", finished_at=None, summary=None)
                mark["owner"].update(pid=2**22 + 7, started=0.0)
                connection.execute("UPDATE study_user_attributes SET value_json = ? WHERE study_user_attribute_id = ?",
                                   (json.dumps(mark), mark_id))
        run = cli(*tune_args(out, budget="10"))
        read_back = re.search(r"resuming (\d+) finished trials", run.stderr)
        damaged = min(before)
        good = {json.dumps(json.loads(v[1])["config"], sort_keys=True)
                for tid, v in before.items() if v[1] and tid != damaged}
        check.lost = len(good) - (int(read_back.group(1)) if read_back else 0)
        check.survived = run.returncode == 0 and "Warning: ignored trial" in run.stderr and check.lost == 0
        check.told = line(run.stderr, "Warning: ignored trial")
    return body


def _bad_result(base: str, edit: Callable[[dict], None]):
    def body(check: Check) -> None:
        from autoloader import stored_result

        out, _ = _copy_of(base, check.name)
        path = next(os.path.join(r, f) for r, _, fs in os.walk(out) for f in fs if f.endswith(".json"))
        data = json.load(open(path))
        edit(data)
        json.dump(data, open(path, "w"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = stored_result(TINY, batch_size=16, device="cpu", out=out)
        said = [str(w.message) for w in caught if path in str(w.message)]
        check.survived = found is None and bool(said)
        check.told = said[0] if said else ""
    return body


def _disk_full(root: str, trials: int, size: str, *more: str):
    def body(check: Check) -> None:
        if not faulty.private_shm_available():
            check.note = "not run: needs root and unshare for a private tmpfs"
            return
        out = os.path.join(root, f"disk-full-{trials}")
        command = [AUTOLOADER, *tune_args(out, WAITING, "--trial-timeout", "20", *more,
                                           budget="30")]
        run = full_disk.in_private_tmpfs(size, out, trials, command, cwd=REPO_ROOT)
        before = {k: v for k, v in (run["filled_at"] or {}).items() if v[0] in ("COMPLETE", "FAIL")}
        check.lost = sum(1 for k, v in before.items() if run["after"].get(k) != v)
        printed = "samples/s" in run["stdout"] or '"saved": false' in run["stdout"]
        check.survived = (run["returncode"] == 4 and printed and "free there" in run["stderr"]
                          and "Traceback" not in run["stderr"] and check.lost == 0)
        check.told = line(run["stderr"], "Error: the run chose")
    return body




def run(root: str, add: Callable[[Check, Callable[[Check], None]], None], group: str) -> None:
    """Every damage check, each on a copy of one base study (``add(check, body)`` runs one)."""
    try:
        base = base_study(root)
    except RuntimeError as exc:
        why = str(exc)   # the name exc is gone once the except block ends
        add(Check(group, "base study", "-", "CLI"), lambda check: setattr(check, "note", why))
        base = None
    if base is not None:
        for name, damage in (("garbage study", _garbage),
                             ("half-truncated study", lambda db: os.truncate(db, os.path.getsize(db) // 2)),
                             ("flipped bytes in stored records", _flip_records)):
            add(Check(group, name, name, "CLI"), _damaged_study(base, damage))
        add(Check(group, "one malformed stored trial", "a record's batch size and rate made strings", "CLI"),
            _malformed_record(base))
        for name, edit in (("result with 400 workers", lambda d: d["config"].update(num_workers=400)),
                           ("result with a string for a rate", lambda d: d.update(samples_per_s="fast")),
                           ("result of a newer format", lambda d: d.update(format=99))):
            add(Check(group, name, name, "stored_result()"), _bad_result(base, edit))
    add(Check(group, "disk fills mid-search", "an 8 MiB tmpfs --out filled after 2 trials", "CLI"),
        _disk_full(root, 2, "8m"))
    add(Check(group, "disk full from the start", "a 1 MiB tmpfs --out, full", "CLI --json"),
        _disk_full(root, 0, "1m", "--json"))
