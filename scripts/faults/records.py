"""Issue 31's stored records and reports, through the real CLI: a result file with a bad field, the
report into a read-only or full folder, the page's path already a folder, ``<script>`` in what the
report shows, a ``.plots`` link out of --out. Each check counts the tracebacks shown and what was
lost: a pick not saved, a bad file neither kept in place nor set aside (``.corrupt-<time>``, byte
for byte), a result changed by its report, a report file neither written nor named as not written.

- bad result fields (one check a field): the file damaged as the issue did it (``"trials": [5]``,
  ``profile: {}``, ``profile.cpus: 0``, ``calibration: 5``, ``finals: [{"config": 5}]``, a NaN
  rate; and another machine's damaged file under a shared --out), then ``show`` and ``report`` on
  it, ``tune`` of its key and ``retune`` of a registry naming it: each exits as the README says,
  the bad file set aside and warned about by field (another machine's: warned about and left as it
  is, not the tune's own), the new pick saved;
- report writes: ``report`` into a read-only folder and a full one (a private mount namespace,
  as full_disk.py makes one), ``tune --report`` with ``<key>.html`` a folder: the result saved and
  untouched, the report saying what it could not write;
- report text: a dataset named ``<script>`` (the page and its markdown twin escape it), a
  ``.plots`` that links out of --out (not followed).

Run by ``issue31.run`` in the fault suite (``python -m scripts.faults --only issue31``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from typing import Callable

from scripts.faults import datasets as faulty
from scripts.faults.checks import REPO_ROOT, TINY, AUTOLOADER, Check, cli, line, tracebacks_in, tune_args
from scripts.faults.inputs import registry_text

FIELDS, REPORTS = "issue 31: bad result fields", "issue 31: report writes"
SCRIPT = "<script>alert(1)</script>"
ELSEWHERE = "big-0x-64cpu-256g-00000000"   # another machine's fingerprint, under a shared --out


def base_result(root: str) -> str:
    """The folder of one real short tune of TINY, for the checks to copy."""
    base = os.path.join(root, "issue31-base")
    run = cli(*tune_args(base, budget="10"), "--quiet")
    if run.returncode != 0:
        raise RuntimeError(f"the base tune failed (exit {run.returncode}): {run.stderr[-300:]}")
    return base


def _copy(base: str, name: str) -> tuple[str, str]:
    """A copy of the base folder, and the path of its result file."""
    out = f"{base}-{re.sub(r'[^A-Za-z0-9]+', '-', name).strip('-')}"
    shutil.copytree(base, out)
    (path,) = glob.glob(os.path.join(out, "*", "*.json"))
    return out, path


def _load(path: str):
    """The result at ``path`` through the door, quietly: its record, or None."""
    from autoloader.store.door import load_result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_result(path)


def _kept(path: str, text: str) -> bool:
    """Whether ``text`` (a damaged file) is still at ``path`` or in a file set aside beside it."""
    for candidate in [path, *glob.glob(path + ".corrupt-*")]:
        if os.path.isfile(candidate) and open(candidate).read() == text:
            return True
    return False


def _put(path: str, text: str) -> None:
    """The damaged file back in place (the last command may have set it aside; that copy was checked)."""
    for aside in glob.glob(path + ".corrupt-*"):
        os.unlink(aside)
    with open(path, "w") as fh:
        fh.write(text)


def _elsewhere(path: str, data: dict) -> str:
    """``data`` as another machine's result of the same key under the same --out."""
    other = os.path.join(os.path.dirname(os.path.dirname(path)), ELSEWHERE, os.path.basename(path))
    os.makedirs(os.path.dirname(other), exist_ok=True)
    data.update(hardware={**data["hardware"], "fingerprint": ELSEWHERE, "cpus": 64})
    return other


def _bad_field(base: str, edit: Callable[[dict], None], other_machine: bool = False):
    def body(check: Check) -> None:
        out, path = _copy(base, check.name)
        data = json.load(open(path))
        edit(data)
        bad = _elsewhere(path, data) if other_machine else path
        text = json.dumps(data)   # a NaN is written as NaN, as Python's json reads it back
        problems, told = [], []
        check.lost = 0
        for args in (["show", bad], ["report", bad]):
            _put(bad, text)
            run = cli(*args)
            tracebacks_in(check, run)
            if run.returncode not in (0, 2):
                problems.append(f"{args[0]} exit {run.returncode}")
            if not _kept(bad, text):
                check.lost += 1
                problems.append(f"{args[0]} lost the file")
            if not told:
                told.append(line(run.stderr, "Warning:") or line(run.stderr, "Error:"))
        registry = os.path.join(out, "fleet.toml")
        with open(registry, "w") as fh:
            fh.write(registry_text(TINY))
        for args in (tune_args(out, budget="10") + ["--json", "--quiet"],
                     ["retune", registry, "--out", out, "--json", "--quiet"]):
            _put(bad, text)
            if other_machine and os.path.exists(path):
                # This machine's first tune into the shared --out: none of its own, so the run
                # reads the nearest other machine's (store/history.py's previous).
                os.unlink(path)
            run = cli(*args)
            tracebacks_in(check, run)
            said = f"ignored the stored result {bad}: " in run.stderr
            try:
                printed = json.loads(run.stdout)
            except ValueError:
                printed = {}
            if args[0] == "tune":
                pick = printed.get("config") if run.returncode == 0 else None
            else:   # a retune's exit 3 or 5 (a change, a busy machine) is no failure of its entry
                entry = (printed.get("datasets") or [{}])[0]
                pick = entry.get("pick") if run.returncode != 1 and entry.get("status") != "failed" \
                    and entry.get("error") is None else None
            stored = _load(path)
            saved = pick is not None and stored is not None and stored.config.loader_kwargs() == pick
            if not saved:
                check.lost += 1
                problems.append(f"{args[0]} exit {run.returncode}: pick not saved ({run.stderr.strip()[-160:]})")
            if other_machine:   # not this tune's own result: warned about by name and left as it is (issue 50)
                if not said or not _kept(bad, text):
                    check.lost += 0 if _kept(bad, text) else 1
                    problems.append(f"{args[0]}: the other machine's bad file was not named and left as it is")
                continue
            aside = any(open(a).read() == text for a in glob.glob(bad + ".corrupt-*"))
            if not aside or not said:
                check.lost += 0 if _kept(bad, text) else 1
                problems.append(f"{args[0]}: the bad file was not set aside and named")
        check.survived = not problems and not check.tracebacks
        check.told = (told[0].split(": ", 1)[-1] if told else "")[:300]
        check.note = "; ".join(problems)[:400]
    return body


def _in_namespace(path: str, mount: str, command: list[str]) -> tuple[subprocess.CompletedProcess, str | None]:
    """``command`` in a private mount namespace where the result's folder is mounted first: "ro"
    (bound read-only onto itself) or "full" (a 1 MiB tmpfs holding the result, filled); and the
    result's text as it was there after the command (the tmpfs goes with the namespace)."""
    folder, parent = os.path.dirname(path), os.path.dirname(os.path.dirname(path))
    q = shlex.quote
    keep, after = os.path.join(parent, "keep.json"), os.path.join(parent, "after.json")
    if mount == "ro":
        setup = f"mount --bind {q(folder)} {q(folder)} && mount -o remount,bind,ro {q(folder)}"
    else:
        fill = f"from scripts.faults.full_disk import fill; fill({folder!r})"
        setup = (f"cp {q(path)} {q(keep)} && mount -t tmpfs -o size=1m tmpfs {q(folder)} && cp {q(keep)} {q(path)}"
                 f" && {q(sys.executable)} -c {q(fill)}")
    inner = " ".join(q(c) for c in command)
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"{setup} && {{ {inner}; code=$?; cp {q(path)} {q(after)}; exit $code; }}"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=180)
    return done, (open(after).read() if os.path.isfile(after) else None)


def _report_into(base: str, mount: str, says: str):
    def body(check: Check) -> None:
        if not faulty.private_shm_available():
            check.note = "not run: needs root and unshare for a private mount"
            return
        _, path = _copy(base, check.name)
        before = open(path).read()
        run, after = _in_namespace(path, mount, [AUTOLOADER, "report", path])
        tracebacks_in(check, run)
        named = [what for what in ("the report page", "its markdown twin", "the plots") if what in run.stdout]
        said = "report not written" in run.stdout and says in run.stdout and len(named) == 3
        check.lost = (0 if after == before else 1) + (0 if said else 1)
        check.survived = run.returncode == 4 and said and check.lost == 0 and not check.tracebacks
        check.told = line(run.stdout, "autoloader: report not written") or run.stdout.strip()[:300]
        if not check.survived:
            check.note = f"exit {run.returncode}; named {named}; {run.stderr.strip()[-200:]}"
    return body


def _page_a_folder(base: str):
    def body(check: Check) -> None:
        from autoloader.explain.page import report_paths

        out, path = _copy(base, check.name)
        paths = report_paths(path)
        before = _load(path).finished_at
        inside = os.path.join(paths["html"], "inside")
        os.makedirs(inside)
        run = cli(*tune_args(out, budget="10"), "--report", "--quiet")
        tracebacks_in(check, run)
        stored = _load(path)
        saved = f"saved {path}" in run.stdout and stored is not None and stored.finished_at != before
        said = "report partly written" in run.stderr and "a folder is there" in run.stderr
        check.lost = 0 if saved and said else 1
        check.survived = (run.returncode == 0 and saved and said and os.path.isdir(inside)
                          and os.path.isfile(paths["markdown"]) and not check.tracebacks)
        check.told = line(run.stderr, "Warning:") or line(run.stderr, "report partly written")
        if not check.survived:
            check.note = f"exit {run.returncode}; {run.stderr.strip()[-200:]}"
    return body


def _script_in_name(base: str):
    def body(check: Check) -> None:
        from autoloader.explain.page import report_paths

        _, path = _copy(base, check.name)
        data = json.load(open(path))
        data["dataset"] = {**(data.get("dataset") or {}), "name": SCRIPT}
        with open(path, "w") as fh:
            json.dump(data, fh)
        run = cli("report", path)
        tracebacks_in(check, run)
        paths = report_paths(path)
        pages = [open(paths[k]).read() if os.path.isfile(paths[k]) else "" for k in ("html", "markdown")]
        escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
        check.lost = 0 if all(pages) else 1
        check.survived = (run.returncode == 0 and all(SCRIPT not in p and escaped in p for p in pages)
                          and not check.tracebacks)
        check.told = (f"the page and its twin show {escaped}" if check.survived
                      else f"exit {run.returncode}; raw in {[k for k, p in zip(('html', 'md'), pages) if SCRIPT in p]}")
    return body


def _plots_link(base: str, root: str):
    def body(check: Check) -> None:
        from autoloader.explain.page import report_paths

        _, path = _copy(base, check.name)
        outside = os.path.join(root, "outside-out")
        os.makedirs(outside)
        paths = report_paths(path)
        os.symlink(outside, paths["plots"])
        run = cli("report", path)
        tracebacks_in(check, run)
        written = all(os.path.isfile(paths[k]) for k in ("html", "markdown"))
        check.lost = 0 if written else 1
        check.survived = (run.returncode == 4 and os.listdir(outside) == [] and os.path.islink(paths["plots"])
                          and "symbolic link" in run.stdout + run.stderr and written and not check.tracebacks)
        check.told = line(run.stdout + "\n" + run.stderr, "symbolic link") if "symbolic link" in run.stdout + \
            run.stderr else run.stdout.strip()[-200:]
        if not check.survived:
            check.note = f"exit {run.returncode}; written through the link: {os.listdir(outside)}"
    return body


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    """Every check of this module (``add(check, body)`` runs one); ``root`` is a scratch folder."""
    try:
        base = base_result(root)
    except RuntimeError as exc:
        why = f"not run: {exc}"
        add(Check(FIELDS, "base result", "-", "CLI"), lambda check: setattr(check, "note", why))
        return
    nan = float("nan")
    for name, edit in (("trials: [5]", lambda d: d.update(trials=[5])),
                       ("profile: {}", lambda d: d.update(profile={})),
                       ("profile.cpus: 0", lambda d: d["profile"].update(cpus=0)),
                       ("calibration: 5", lambda d: d.update(calibration=5)),
                       ('finals: [{"config": 5}]', lambda d: d.update(finals=[{"config": 5}])),
                       ("a NaN rate", lambda d: d.update(samples_per_s=nan))):
        add(Check(FIELDS, name, f"the stored result's {name}; show, report, tune, retune", "CLI"),
            _bad_field(base, edit))
    add(Check(FIELDS, "another machine's bad result", 'finals: [{"config": 5}] in a shared --out\'s other '
              "fingerprint; show, report, tune, retune", "CLI"),
        _bad_field(base, lambda d: d.update(finals=[{"config": 5}]), other_machine=True))
    add(Check(REPORTS, "report into a read-only folder", "the result's folder bound read-only", "CLI"),
        _report_into(base, "ro", "Read-only file system"))
    add(Check(REPORTS, "report into a full folder", "the result's folder a 1 MiB tmpfs, full", "CLI"),
        _report_into(base, "full", "free there"))
    add(Check(REPORTS, "tune --report, the page a folder", "<key>.html a folder before the tune", "CLI"),
        _page_a_folder(base))
    add(Check(REPORTS, "<script> in the dataset's name", f"dataset.name {SCRIPT}; report", "CLI"),
        _script_in_name(base))
    add(Check(REPORTS, ".plots links out of --out", "<key>.plots a symbolic link to a folder outside", "CLI"),
        _plots_link(base, root))
