"""Issue 31's specs and messages, through the real CLI: what ``--dataset`` names when it is no
dataset, how a trial's failure is told, and the memory ceiling in the final.

- ``--dataset mod:NeedsArgs`` (a Dataset class whose ``__init__`` needs arguments), a factory
  returning None, one returning a number, and ``--step mod:StepClass`` whose ``__init__`` needs
  a model: each a usage error (exit 2, the rule and the fix), no traceback;
- a dataset whose workers raise an error of a long line and a second one: the profile's and every
  failed trial's line (and the stored record's) is the error's line whole, where it came from,
  no "Original Traceback" fragment, nothing cut;
- ``--max-memory`` between the main process's reading and the cpus-1 rule's forecast, on rows of
  Python objects that workers copy as they read (tests/growth_workloads.py): no config whose
  forecast is past the ceiling runs in the final, the rule included, and the table says so.

Run by ``issue31.run`` in the fault suite (``python -m scripts.faults --only issue31``).
"""

from __future__ import annotations

import json
import os
from typing import Callable

from scripts.faults.checks import Check, cli, line, tracebacks_in, tune_args
from scripts.faults.inputs import write_module

GROUP = "issue 31: specs and messages"

NOT_DATASETS = '''import torch
from torch.utils.data import Dataset


class NeedsArgs(Dataset):
    def __init__(self, root, length):
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return torch.zeros(4)


def returns_none():
    NeedsArgs("/data", 8)   # built, and the return forgotten


def returns_a_number():
    return 5


class StepNeedsModel:
    def __init__(self, model):
        self.model = model

    def __call__(self, batch):
        return None
'''

# Raises in workers only, so the search has a healthy config (num_workers=0) to pick; each sample
# waits 1 ms, so configs with workers are measured early.
RAISING = '''from torch.utils.data import get_worker_info

from scripts.faults.datasets import Tiny

WORDS = " ".join(f"word{{i}}" for i in range(40))


class Raising(Tiny):
    def __getitem__(self, index):
        if get_worker_info() is not None:
            raise ValueError(f"cannot decode sample {{index}}: {{WORDS}} {end}\\nthe header reads 0x00")
        return super().__getitem__(index)


def make():
    return Raising(sleep_s=0.001)
'''
END = "END-OF-THE-LINE"
ROWS = "tests/growth_workloads.py:rows"   # 100,000 rows of Python objects: workers copy them as they read


def _not_datasets(root: str):
    def body(check: Check) -> None:
        module = os.path.join(root, "not_datasets.py")
        write_module(module, NOT_DATASETS)
        out = os.path.join(root, "not-datasets")
        tries = {"NeedsArgs": ("--dataset", "class NeedsArgs(root, length)"),
                 "returns_none": ("--dataset", "returns_none() returned None"),
                 "returns_a_number": ("--dataset", "returns_a_number() returned int"),
                 "StepNeedsModel": ("--step", "class StepNeedsModel(model)")}
        runs, told, problems = [], [], []
        for attr, (flag, says) in tries.items():
            args = tune_args(out, f"{module}:{attr}", budget="10") if flag == "--dataset" else \
                tune_args(out, budget="10") + ["--step", f"{module}:{attr}"]
            run = cli(*args)
            runs.append(run)
            error = line(run.stderr, "Error:")
            told.append(error)
            if run.returncode != 2 or says not in error or "Fix:" not in error:
                problems.append(f"{attr}: exit {run.returncode}, {error[:120] or run.stderr.strip()[-160:]}")
        tracebacks_in(check, *runs)
        check.survived = not problems and not check.tracebacks
        check.told = " | ".join(t.split(" (got ")[-1][:150] for t in told[:3])
        check.note = "; ".join(problems)[:400]
    return body


def _failure_lines(root: str):
    def body(check: Check) -> None:
        module = os.path.join(root, "raising.py")
        write_module(module, RAISING.format(end=END))
        out = os.path.join(root, "failure-lines")
        run = cli(*tune_args(out, f"{module}:make", "--trial-timeout", "20", budget="20"))
        tracebacks_in(check, run)
        lines = [entry for entry in run.stderr.splitlines() if "ValueError" in entry]
        saved = line(run.stdout, "saved ")[len("saved "):]
        stored = json.load(open(saved)) if saved and os.path.isfile(saved) else {}
        errors = [t["error"] for t in stored.get("trials", []) if t.get("status") != "ok"]
        whole = f"word39 {END} (ValueError in DataLoader worker process"
        profile = [entry for entry in lines if "profile:" in entry]
        trials = [entry for entry in lines if "FAILED" in entry]
        every = lines + errors
        check.survived = (run.returncode == 0 and bool(profile) and bool(trials) and bool(errors)
                          and all(whole in entry and "Original Traceback" not in entry for entry in every)
                          and not check.tracebacks)
        check.told = (trials or profile or [run.stderr.strip()[-200:]])[0].strip()
        if not check.survived:
            check.note = (f"exit {run.returncode}; {len(profile)} profile, {len(trials)} trial, {len(errors)} stored "
                          f"failure lines; cut or with a traceback: {[e[:80] for e in every if whole not in e][:2]}")
    return body


def _memory_ceiling(root: str):
    def body(check: Check) -> None:
        out = os.path.join(root, "ceiling")
        first = cli(*tune_args(out, ROWS, "--batch-size", "64", "--json", "--quiet", budget="30"))
        tracebacks_in(check, first)
        if first.returncode != 0:
            check.note = f"the first tune exited {first.returncode}: {first.stderr.strip()[-200:]}"
            return
        data = json.loads(first.stdout)
        main_only = max(t["peak_pss_bytes"] for t in data["trials"] if t["status"] == "ok"
                        and not t["config"]["num_workers"])
        memory = data.get("memory") or {}
        rule = (memory.get("rule") or memory.get("control") or {}).get("host_bytes")
        if not rule:
            check.note = "not run: the first tune made no forecast of the cpus-1 rule's memory"
            return
        # Between the two, with room for the main process's own readings to vary run to run.
        ceiling = int(max(1.2 * main_only, (main_only + rule) / 2))
        if ceiling > 0.95 * rule:
            check.note = (f"not run: the rule's forecast {rule / 2**20:.0f} MiB is not past the main process's "
                          f"{main_only / 2**20:.0f} MiB by enough to set a ceiling between")
            return
        second = cli(*tune_args(out, ROWS, "--batch-size", "64", "--max-memory", str(ceiling), "--quiet",
                                budget="30"))
        tracebacks_in(check, second)
        saved = line(second.stdout, "saved ")[len("saved "):]
        if second.returncode != 0 or not os.path.isfile(saved):
            check.lost = 1
            check.note = f"the tune under the ceiling exited {second.returncode}: {second.stderr.strip()[-200:]}"
            return
        result = json.load(open(saved))
        memory = result.get("memory") or {}
        forecast = memory.get("rule") or memory.get("control") or {}   # ``control`` before it was the rule
        said = line(second.stdout, "cpus-1 rule")
        finals = [f["config"] for f in result.get("finals") or []]
        past = forecast.get("host_bytes", 0) > ceiling
        # Kept out of the final by its forecast ("is past the ... ceiling: not measured in the final"),
        # or refused before it ran at all ("could not run here ... past the ceiling").
        rule_kept_out = forecast.get("config") not in finals and (
            ("is past the" in said and "not measured in the final" in said)
            or ("could not run" in said and "ceiling" in said))
        pick_fits = (memory.get("pick") or {}).get("host_bytes", 0) <= ceiling
        if not past:   # the readings vary run to run: this run's forecast of the rule fit after all
            check.note = (f"not run: under the {ceiling / 2**20:.0f} MiB ceiling this run forecast the rule at "
                          f"{forecast.get('host_bytes', 0) / 2**20:.0f} MiB, inside it: nothing to keep out")
            return
        check.survived = rule_kept_out and pick_fits and not check.tracebacks
        check.told = (f"--max-memory {ceiling / 2**30:.2f} GiB (the main process read {main_only / 2**30:.2f} GiB, "
                      f"the rule's forecast {rule / 2**30:.2f} GiB): " + " ".join(said.split()[2:]))[:500]
        if not check.survived:
            check.note = (f"rule past the ceiling in this run: {past}; kept out of the final and said: {rule_kept_out};"
                          f" the pick fits: {pick_fits}; finals {[c['num_workers'] for c in finals]}")
    return body


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    """Every check of this module (``add(check, body)`` runs one); ``root`` is a scratch folder."""
    add(Check(GROUP, "specs that name no dataset", "--dataset mod:NeedsArgs, a factory returning None or 5; "
              "--step mod:StepNeedsModel", "CLI"), _not_datasets(root))
    add(Check(GROUP, "a worker's error of two lines", "ValueError of a 300-character line and a second one, "
              "in every worker", "CLI"), _failure_lines(root))
    add(Check(GROUP, "the rule past the memory ceiling", "--max-memory between the main process's reading and "
              "the cpus-1 rule's forecast; 100,000 Python-object rows", "CLI"), _memory_ceiling(root))
