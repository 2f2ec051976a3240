"""What the stored-state checks (``state.py``, ``damage.py``, ``records.py``...) share: the record
of one check, running the ``autoloader`` command from the repository's root, and counting the
tracebacks it showed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
TINY = "scripts.faults.datasets:tiny"     # 512 samples; CLI specs are imported from REPO_ROOT
WAITING = "scripts.faults.datasets:waiting"  # workers pay, so a study holds several trials


@dataclass
class Check:
    group: str
    name: str
    injected_as: str
    via: str
    survived: bool = False
    lost: int | None = None     # stored results lost (damaged stored state), or a pick or report lost
    tracebacks: int = 0         # raw tracebacks the user was shown (the checks that count them)
    told: str = ""              # what the user was told
    seconds: float = 0.0
    note: str = ""              # why it did not survive


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOLOADER, *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=timeout)


def tune_args(out: str, dataset: str = TINY, *more: str, budget: str = "20") -> list[str]:
    return ["tune", "--dataset", dataset, "--batch-size", "16", "--budget", budget, "--device", "cpu",
            "--out", out, *more]


def line(text: str, needle: str) -> str:
    """The first line that starts with ``needle``, else the first that holds it."""
    lines = [entry.strip() for entry in text.splitlines()]
    return next((entry for entry in lines if entry.startswith(needle)), next((e for e in lines if needle in e), ""))


@contextlib.contextmanager
def stderr_to(path: str):
    """File descriptor 2 (this process's and every child's) written to ``path`` meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w") as fh:
        os.dup2(fh.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


# ``python -m scripts.faults -k WORD``: only the checks whose name holds WORD run; the others are
# kept out of what is rendered (SKIPPED), so a check is developed without the suite's 15 minutes.
KEYWORD: str | None = None
SKIPPED = "skipped (-k)"


def run_check(check: Check, body: Callable[[Check], None]) -> Check:
    if KEYWORD is not None and KEYWORD.lower() not in check.name.lower():
        check.note = SKIPPED
        return check
    print(f"-- {check.group}: {check.name} ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        body(check)
    except Exception as exc:  # noqa: BLE001 - a check that raises did not survive; say why
        check.survived = False
        check.note = f"the check raised {type(exc).__name__}: {str(exc)[:300]}"
    check.seconds = time.monotonic() - t0
    return check


def orphan_last_run(db: str) -> None:
    """Leave the SQLite study at ``db`` as a driver SIGKILLed mid-run would: its newest run still
    marked running and its owner gone (another process start), so the next run resumes it
    (NOTE [ Runs in a study ] in autoloader/store/runs.py)."""
    import dataclasses

    import optuna

    from autoloader.store import runs

    storage = f"sqlite:///{db}"
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    mark = max(runs.runs_of(study).values(), key=lambda m: m.started_at)
    runs.write_mark(study, dataclasses.replace(mark, state=runs.RUNNING, finished_at=None,
                                               owner=dataclasses.replace(mark.owner, started=0.0)))


def tracebacks_in(check: Check, *runs) -> int:
    """Count the raw tracebacks in each run's output (a CompletedProcess, or a dict with stdout and
    stderr, as full_disk returns) into ``check``; the number in these."""
    found = 0
    for run in runs:
        out, err = (run["stdout"], run["stderr"]) if isinstance(run, dict) else (run.stdout, run.stderr)
        found += (out or "").count("Traceback") + (err or "").count("Traceback")
    check.tracebacks += found
    return found
