"""``autoloader retune REGISTRY``: re-tune every dataset a registry lists and report the drift.

For each dataset, in order: build it here (its key needs its length and content: NOTE [ Content
fingerprint ]), find its last good result on this hardware, else the nearest other hardware's
(store/history.py), start from it (search/warm.py: the stored pick and its neighbours first, and an early
stop when it still holds), keep the new result in the dated history, and judge the drift
(NOTE [ Drift ] in tuning/compare.py). One dataset failing does not stop the others. The run's report
(markdown and JSON) is written under the reports folder, dated, and as ``latest``.

Exit codes (``RetuneReport.exit_code``): 0 nothing drifted, 3 a dataset drifted past a
threshold and past the noise measured in its run, 5 a dataset was measured on a busy machine and
is inconclusive (drift elsewhere wins over it), 1 a dataset failed (that wins over both); 2, bad
registry, is raised before anything runs (a UsageError).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

from ..api import built_problem
from ..errors import AutoloaderError
from ..inputs import hardware
from ..inputs.home import resolve_out
from ..inputs.options import DEFAULT_BUDGET_S, DEFAULT_TRIAL_TIMEOUT_S, Options
from ..inputs.source import resolve_dataset
from ..search.policy import Thresholds
from ..store.history import previous, record
from ..store.paths import held, result_path
from ..store.storage import masked
from ..store.study import atomic_write
from ..store.versions import MEASUREMENT_FORMAT, autoloader_version, now_iso
from ..tuning import compare as compare_mod
from ..tuning.run import Run
from .registry import Entry, Registry
from .warm import plan as warm_plan

OK_EXIT, FAILED_EXIT, DRIFTED_EXIT, INCONCLUSIVE_EXIT = 0, 1, 3, 5
FAILED = "failed"


@dataclass(frozen=True)
class Outcome:
    """One dataset's re-tune."""
    name: str
    status: str                      # a comparison's status (tuning/compare.py) or FAILED
    key: str | None = None
    drift: compare_mod.Comparison | None = None
    error: str | None = None
    result_path: str | None = None
    history_path: str | None = None
    warm: str | None = None          # where the run started from, in words
    pick: dict | None = None
    samples_per_s: float | None = None
    trials: int = 0
    early_stop: bool = False
    seconds: float | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "key": self.key, "error": self.error,
                "result_path": self.result_path, "history_path": self.history_path, "warm_start": self.warm,
                "pick": self.pick, "samples_per_s": self.samples_per_s, "trials": self.trials,
                "early_stop": self.early_stop, "tune_seconds": self.seconds,
                "drift": self.drift.to_dict() if self.drift else None}


@dataclass(frozen=True)
class RetuneReport:
    registry: str
    started_at: str
    finished_at: str
    hardware: dict
    thresholds: Thresholds
    outcomes: tuple[Outcome, ...]
    out: str
    storage: str | None = None
    paths: dict = field(default_factory=dict)   # where the report itself was written

    @property
    def exit_code(self) -> int:
        if any(o.status == FAILED for o in self.outcomes):
            return FAILED_EXIT
        if any(o.status == compare_mod.DRIFTED for o in self.outcomes):
            return DRIFTED_EXIT
        if any(o.status == compare_mod.INCONCLUSIVE for o in self.outcomes):
            return INCONCLUSIVE_EXIT
        return OK_EXIT

    @property
    def verdict(self) -> str:
        return {OK_EXIT: "unchanged", FAILED_EXIT: "a dataset failed", DRIFTED_EXIT: "drifted",
                INCONCLUSIVE_EXIT: "inconclusive: measured on a busy machine"}[self.exit_code]

    def to_dict(self) -> dict:
        return {"registry": self.registry, "started_at": self.started_at, "finished_at": self.finished_at,
                "hardware": self.hardware, "autoloader_version": autoloader_version(),
                "measurement_format": MEASUREMENT_FORMAT, "thresholds": self.thresholds.to_dict(),
                "out": self.out, "storage": masked(self.storage) if self.storage else None,
                "verdict": self.verdict, "exit_code": self.exit_code,
                "datasets": [o.to_dict() for o in self.outcomes], "report": self.paths}


def retune(registry: Registry, *, out: str | None = None, storage: str | None = None, reports: str | None = None,
           progress: Callable[[str, dict], None] | None = None) -> RetuneReport:
    """Re-tune every dataset of ``registry``; the options given here win over its [fleet] table."""
    progress = progress or (lambda event, data: None)
    out = resolve_out(out or registry.fleet.get("out"))
    storage = storage or registry.fleet.get("storage")
    started = now_iso()
    outcomes = []
    for index, entry in enumerate(registry.entries):
        progress("retune", {"n": index + 1, "of": len(registry.entries), "name": entry.name})
        outcomes.append(_one(entry, out, storage, registry.thresholds, progress))
        progress("retuned", {"outcome": outcomes[-1]})
    report = RetuneReport(registry.path, started, now_iso(), hardware.detect().to_dict(), registry.thresholds,
                          tuple(outcomes), out, storage)
    folder = reports or registry.fleet.get("reports") or os.path.join(out, "retune", registry.name)
    return write(report, folder)


def _one(entry: Entry, out: str, storage: str | None, thresholds: Thresholds, progress) -> Outcome:
    settings = entry.settings
    try:
        built = resolve_dataset(entry.dataset.load(), entry.dataset.name)
        problem = built_problem(built, entry.dataset, step=entry.step, batch_sizes=entry.batch_sizes,
                                device=settings.get("device"), fixed_kwargs=entry.options, version=entry.version)
        del built
        options = Options.build(settings.get("budget", DEFAULT_BUDGET_S),
                                settings.get("trial_timeout", DEFAULT_TRIAL_TIMEOUT_S),
                                settings.get("max_memory"), out, storage, thresholds)
    except AutoloaderError as exc:
        return Outcome(entry.name, FAILED, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the user's dataset raised while being built
        return Outcome(entry.name, FAILED, error=f"building the dataset raised {type(exc).__name__}: {exc}")
    fingerprint, key = problem.hardware.fingerprint, problem.key
    path = result_path(out, fingerprint, key)
    with held(path[:-len(".json")] + ".lock"):
        # The run compares with the same previous result when it ends (tuning/compare.py).
        warm = warm_plan(previous(out, problem.hardware.to_dict(), key, storage), problem)
        progress("warm", {"name": entry.name, "key": key, "warm": warm})
        try:
            result = Run(problem, options, progress, warm_start=warm.start).run()
        except AutoloaderError as exc:
            return Outcome(entry.name, FAILED, key=key, error=str(exc), warm=warm.describe())
        except Exception as exc:  # noqa: BLE001 - reported per dataset; the others still run
            return Outcome(entry.name, FAILED, key=key, error=f"{type(exc).__name__}: {exc}", warm=warm.describe())
    # The first result: a baseline, unless measured on a busy machine (then inconclusive, and no baseline).
    judged = result.since or compare_mod.compare(None, result.to_dict(), thresholds)
    return Outcome(entry.name, judged.status, key=key, drift=judged, result_path=result.path,
                   history_path=record(out, fingerprint, key, result.to_dict()), warm=warm.describe(),
                   pick=result.config.loader_kwargs(), samples_per_s=result.samples_per_s,
                   trials=len(result.trials), early_stop=result.early_stop, seconds=result.tune_seconds)


def write(report: RetuneReport, folder: str) -> RetuneReport:
    """The report as markdown and JSON, dated and as ``latest``; the report with its paths."""
    stamp = report.started_at.replace(":", "").replace("-", "").replace("+0000", "Z")
    paths = {"markdown": os.path.join(folder, f"{stamp}.md"), "json": os.path.join(folder, f"{stamp}.json"),
             "latest_markdown": os.path.join(folder, "latest.md"), "latest_json": os.path.join(folder, "latest.json")}
    report = RetuneReport(**{**report.__dict__, "paths": paths})
    from .report import markdown

    text, data = markdown(report), json.dumps(report.to_dict(), indent=2, default=str) + "\n"
    for name, content in (("markdown", text), ("json", data), ("latest_markdown", text), ("latest_json", data)):
        atomic_write(paths[name], content)
    return report
