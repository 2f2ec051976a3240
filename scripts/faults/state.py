"""Stored state and bad inputs through the real tuner: one check per fault, each a real run.

Three groups, beside the suite's fault classes (``suite.py``):

- stored verdicts: a failure of the user's code, then the code fixed (a step, a dataset whose
  samples stopped varying in size; a killed run's failed step, resumed), and a one-off crash:
  the fixed code and the crashed config must be measured again;
- bad inputs: a raising sampler, a dataset too long to shuffle, a hang under a budget shorter
  than the watchdog, a memory ceiling past the RAM, a batch larger than the dataset (and a short
  dataset of large samples), Ctrl-C, a storage URL with a password: each must be named, refused
  or survived as the README says, with no traceback;
- damaged stored state: a study overwritten with garbage, half-truncated, with flipped bytes in
  its records, one malformed record; a result file with 400 workers, a string for a rate, a newer
  format; a disk that fills mid-search, and one full from the start. Each counts the stored
  results lost: trials stored before the damage that are neither read back nor kept aside;
- commands (``commands.py``): show, dashboard, retune and best_loader given bad input, an
  unwritable folder or a full disk; each counts the tracebacks shown and the picks and reports lost.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
import warnings
from typing import Callable

from scripts.faults import commands, damage, inputs
from scripts.faults import datasets as faulty
from scripts.faults.checks import (
    AUTOLOADER,
    REPO_ROOT,
    TINY,
    WAITING,
    Check,
    cli,
    line,
    orphan_last_run,
    run_check,
    stderr_to,
    tune_args,
)

PASSWORD = "hunter2-s3cret"


# --- stored verdicts ----------------------------------------------------------------------------

def _fixed_code(root: str, module_name: str, broken: str, fixed: str, spec_attr: str, as_step: bool,
                first_says: str, killed: bool = False):
    """A run that fails on the user's code, the code fixed, the same command again: the fix is
    measured. ``killed``: the failed run is left as a killed one (``orphan_last_run``), so the
    next run resumes it with the failures, which must go as the code changed."""
    def body(check: Check) -> None:
        work = tempfile.mkdtemp(prefix="fixed-", dir=root)
        path = os.path.join(work, module_name)
        inputs.write_module(path, broken)
        out = os.path.join(work, "out")
        args = (tune_args(out, TINY, "--step", f"{path}:{spec_attr}") if as_step
                else tune_args(out, f"{path}:{spec_attr}"))
        first = cli(*args)
        if killed:
            orphan_last_run(faulty.find_study(out))
        inputs.write_module(path, fixed)
        second = cli(*args)
        retried = re.search(r"\(\d+ failed under code since changed, measured again\)", second.stderr)
        # A changed step is another problem (NOTE [ A step keyed by what it is ] in
        # inputs/code_digest.py): its key differs, so the killed run's failures are another
        # study's and the fix is measured afresh; a changed dataset module keeps the key, and
        # the resumed run measures its failures again.
        keys = [re.search(r"autoloader: tuning (\S+) on", run.stderr) for run in (first, second)]
        rekeyed = all(keys) and keys[0].group(1) != keys[1].group(1)
        check.survived = (first.returncode == 1 and first_says in first.stderr and second.returncode == 0
                          and (bool(retried) or (rekeyed and "resuming" not in second.stderr) if killed
                               else "resuming" not in second.stderr))
        check.told = (retried.group(0) if retried else
                      f"{line(first.stderr, 'Error:')[:160]} ... then exit {second.returncode}, measured afresh"
                      + (f" (the fixed step is another problem: {keys[0].group(1)} then {keys[1].group(1)})"
                         if killed and rekeyed else ""))
        if not check.survived:
            check.note = f"exits {first.returncode} then {second.returncode}"
    return body


def _one_off_crash(root: str):
    def body(check: Check) -> None:
        from autoloader import tune

        events = []
        result = tune(faulty.CrashOnce(os.path.join(root, "crashed")), batch_size=16, budget=30, device="cpu",
                      out=os.path.join(root, "crash-once"), trial_timeout=20,
                      progress=events.append)
        trials = [e for e in events if e.kind == "trial"]
        again = [i for i, e in enumerate(trials) if e.again]
        retry = trials[again[0] + 1].result if again and again[0] + 1 < len(trials) else None
        first = trials[again[0]].result if again else None
        check.survived = bool(first and retry and retry.config == first.config and retry.status == "ok"
                              and all(t.status == "ok" for t in result.trials))
        check.told = (f"{first.config.key}: FAILED {first.describe_failure()} (a crash can be a one-off: "
                      f"trying it once more); then {retry.samples_per_s:,.0f}/s") if check.survived else ""
    return body


# --- bad inputs --------------------------------------------------------------------------------

def _sampler_fault(root: str, dataset_of: Callable[[str], tuple]):
    def body(check: Check) -> None:
        from autoloader import NoFeasibleConfig, tune

        marker = os.path.join(root, f"asked-{check.name[:6]}")
        dataset, kwargs = dataset_of(marker)
        events, message = [], ""
        log = os.path.join(root, f"stderr-{check.name[:6]}")
        with stderr_to(log):
            try:
                tune(dataset, batch_size=16, budget=20, device="cpu", out=os.path.join(root, check.name[:6]),
                     trial_timeout=20, progress=events.append, **kwargs)
            except NoFeasibleConfig as exc:
                message = str(exc)
        trials = [e.result for e in events if e.kind == "trial"]
        pids = set(open(marker).read().split()) if os.path.exists(marker) else set()
        traceback_shown = "Traceback" in open(log).read()
        check.survived = (bool(message) and len(trials) >= 2 and all(t.cause == "sampler_error" for t in trials)
                          and not traceback_shown and len(pids) <= 1)
        check.told = (trials[0].error or "") if trials else message[:200]
        if not check.survived:
            check.note = f"causes {[t.cause for t in trials]}, traceback shown: {traceback_shown}, pids {len(pids)}"
    return body


def _hang_under_budget(root: str):
    def body(check: Check) -> None:
        from autoloader import tune

        events = []
        t0 = time.monotonic()
        result = tune(faulty.HangInWorker(os.path.join(root, "hung"), min_workers=1), batch_size=16, budget=20,
                      trial_timeout=60, device="cpu", out=os.path.join(root, "hang-budget"),
                      progress=events.append)
        wall = time.monotonic() - t0
        said = [e.error or "" for e in events if e.kind == "profile"]
        said += [t.error or "" for t in result.trials if t.status == "hang"]
        clipped = [s for s in said if "clipped from 60 s" in s]
        check.survived = bool(clipped) and wall < 20 + 15
        check.told = f"{clipped[0]} (the run took {wall:.0f} s)" if clipped else f"{wall:.0f} s"
    return body


def _cli_check(args_of: Callable[[str], list[str]], ok: Callable[[subprocess.CompletedProcess], bool],
               needle: str, root: str):
    def body(check: Check) -> None:
        run = cli(*args_of(os.path.join(root, re.sub(r"\W+", "-", check.name))))
        check.survived = ok(run) and "Traceback" not in run.stderr
        check.told = line(run.stderr, needle) or run.stderr.strip()[-200:]
        if not check.survived:
            check.note = f"exit {run.returncode}"
    return body


def _short_dataset(root: str):
    def body(check: Check) -> None:
        from autoloader import tune

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = tune(faulty.BigSamples(width=4 * 2**20, length=4), batch_size=1024, budget=15, device="cpu",
                          out=os.path.join(root, "short"), max_memory="2G")
        said = [str(w.message) for w in caught if "larger than the dataset" in str(w.message)]
        check.survived = bool(said) and "predicted_memory" not in result.faults() and result.samples_per_s > 0
        check.told = said[0] if said else str(result.faults())
    return body


def _ctrl_c(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "ctrl-c")
        driver = subprocess.Popen([AUTOLOADER, *tune_args(out, WAITING, budget="60")],
                                  cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=faulty.sigint_as_from_a_terminal)
        faulty.wait_for_running_trial(out, driver, 120)
        time.sleep(0.3)   # into the trial
        driver.send_signal(signal.SIGINT)
        _, stderr = driver.communicate(timeout=60)
        check.survived = driver.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
        check.told = f"exit {driver.returncode}: {line(stderr, 'interrupted')}"
    return body


def run_all(root: str) -> list[Check]:
    """Every check, in order; ``root`` is a scratch folder."""
    checks = []
    add = lambda check, body: checks.append(run_check(check, body))  # noqa: E731
    verdicts, bad, damaged = "stored verdicts", "bad inputs", "damaged stored state"
    add(Check(verdicts, "step raised, then fixed", "step raises RuntimeError; the file is then fixed", "CLI"),
        _fixed_code(root, "mystep.py", inputs.BROKEN_STEP, inputs.FIXED_STEP, "step", True, "step boom"))
    add(Check(verdicts, "killed run's step fixed", "as above, the failed run left as a killed one (the fixed step is another key)",
              "CLI"), _fixed_code(root, "mystep.py", inputs.BROKEN_STEP, inputs.FIXED_STEP, "step", True,
                                  "step boom", killed=True))
    add(Check(verdicts, "samples varied in size, then did not", "samples 8+ vary in size; the file is then fixed",
              "CLI"), _fixed_code(root, "ragged.py", inputs.RAGGED.format(vary=True), inputs.RAGGED.format(vary=False),
                                  "make", False, "collating samples"))
    add(Check(verdicts, "one-off crash", "one worker segfaults once", "tune()"), _one_off_crash(root))
    add(Check(bad, "sampler raises", "sampler.__iter__ raises ValueError", "tune(sampler=)"),
        _sampler_fault(root, lambda marker: (inputs.Small(), {"sampler": inputs.RaisingSampler(marker)})))
    add(Check(bad, "__len__ of 10^12", "shuffling needs a permutation of 10^12 indices", "tune()"),
        _sampler_fault(root, lambda marker: (inputs.HugeLength(), {})))
    add(Check(bad, "hang under a short budget", "a worker hangs; --budget 20, --trial-timeout 60", "tune()"),
        _hang_under_budget(root))
    add(Check(bad, "--max-memory past the RAM", "--max-memory 100T", "CLI"),
        _cli_check(lambda out: tune_args(out, TINY, "--max-memory", "100T"), lambda r: r.returncode == 2,
                   "Error:", root))
    add(Check(bad, "batch larger than the dataset", "--batch-size 1024 on 512 samples", "CLI"),
        _cli_check(lambda out: [*tune_args(out, budget="10"), "--batch-size", "1024"],
                   lambda r: r.returncode == 0 and "is larger than the dataset (512 samples)" in r.stderr,
                   "Warning:", root))
    add(Check(bad, "dataset shorter than a batch", "4 samples of 16 MiB, batch 1024, --max-memory 2G", "tune()"),
        _short_dataset(root))
    add(Check(bad, "Ctrl-C", "SIGINT to the CLI mid-trial", "CLI"), _ctrl_c(root))
    url = f"postgresql+psycopg://autoloader:{PASSWORD}@127.0.0.1:9/studies"
    add(Check(bad, "password in --storage", "an unreachable PostgreSQL URL with a password", "CLI"),
        _cli_check(lambda out: tune_args(out, TINY, "--storage", url, "--quiet"),
                   lambda r: r.returncode == 2 and PASSWORD not in r.stdout + r.stderr and "***" in r.stderr,
                   "Error:", root))
    damage.run(root, add, damaged)
    commands.run_all(root, add)
    for check in checks:   # the scratch folder's name says nothing
        check.told = check.told.replace(root, "$TMP")
    return checks


def render(checks: list[Check]) -> list[str]:
    """The report's section on these checks, and its totals."""
    lines = ["## Stored state and bad inputs", "",
             "Survived = the run did what the README says for that input (named it, refused it with the "
             "rule and the fix, or went on), with no traceback. Lost = results stored before the damage "
             "that were neither read back nor kept aside (`X.db.corrupt-<time>`, byte for byte).", "",
             "| group | fault | injected as | via | survived | lost | run s |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        if c.note.startswith("not run"):
            lines.append(f"| {c.group} | {c.name} | {c.injected_as} | {c.via} | {c.note} | - | - |")
            continue
        lost = "-" if c.lost is None else str(c.lost)
        lines.append(f"| {c.group} | {c.name} | {c.injected_as} | {c.via} | "
                     f"{'yes' if c.survived else '**NO**'} | {lost} | {c.seconds:.0f} |")
    lines += ["", "What the user was told:", ""]
    lines += [f"- {c.name}: `{c.told[:700]}`" + (f" ({c.note})" if c.note and not c.note.startswith("not run") else "")
              for c in checks if c.told or c.note]
    return lines + [""]


def totals(checks: list[Check]) -> list[str]:
    """Rows for the report's totals table."""
    def count(group: str) -> str:
        run = [c for c in checks if c.group == group and not c.note.startswith("not run")]
        return f"{sum(c.survived for c in run)} of {len(run)}"
    lost = sum(c.lost or 0 for c in checks)
    counted = [c for c in checks if c.group == commands.GROUP and not c.note.startswith("not run")]
    return [f"| stored verdicts re-measured (code fixed, one-off crash) | {count('stored verdicts')} | all |",
            f"| bad inputs tried and survived | {count('bad inputs')} | all |",
            f"| stored-state faults injected and survived | {count('damaged stored state')} | all |",
            f"| commands' bad inputs, unwritable folders and full disks survived | {count(commands.GROUP)} | all |",
            f"| tracebacks shown by the commands' checks | {sum(c.tracebacks for c in counted)} | 0 |",
            f"| stored results, picks and reports lost to them | {lost} | 0 |"]


def all_survived(checks: list[Check]) -> bool:
    return all(c.survived for c in checks if not c.note.startswith("not run")) and \
        not sum(c.lost or 0 for c in checks)
