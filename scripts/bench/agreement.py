"""How well one bench run's measurements of the same config agree across its phases.

    python -m scripts.bench agreement results/benchmarks/run-X/part*/records.jsonl > agreement.md

The bench measures some configs three times, minutes apart: in the tuner's search (its bursts, in
the tuner's own trial process), in the grid (one long window, in the bench's trial process) and
in the final (interleaved rounds of shorter windows, same process as the grid). The burst-error target
(±5% between the tuner's estimate and the final's median) can be judged no finer than these
phases agree with each other on configs nobody chose, so this prints, per workload:

- grid / final: the grid's window over the final's median, config by config. Same process, same
  code, a few minutes apart: what the machine alone moves.
- tuner / final: the tuner's search reading (median of its bursts that ran to the end, not
  pruned) over the final's median, for every config both measured other than the pick; their
  median is the drift between the phases.
- the burst error as the bench's summary reports it, and that error divided by the drift.

Reads records only; measures nothing. Pure functions, so tests feed it records they write.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from autoloader.store.result import TuneResult
from scripts.bench.common import config_from_kwargs, short
from scripts.bench.records import report_main

CLOSE = 0.05    # the burst-error target's width, used here as the yardstick for agreement


@dataclass(frozen=True)
class PhaseRatio:
    """One config's reading in one phase over its final median."""
    config: str
    reading: float
    final_median: float

    @property
    def ratio(self) -> float:
        return self.reading / self.final_median


@dataclass(frozen=True)
class Agreement:
    workload: str
    pick: str | None
    grid_over_final: tuple[PhaseRatio, ...]
    tuner_over_final: tuple[PhaseRatio, ...]     # the pick left out
    burst_error: float | None                   # tuner's estimate over the pick's final median, minus 1

    @property
    def drift(self) -> float | None:
        """The median tuner/final ratio of configs other than the pick: how far the phases moved."""
        ratios = [r.ratio for r in self.tuner_over_final]
        return statistics.median(ratios) if ratios else None

    @property
    def burst_error_net(self) -> float | None:
        if self.burst_error is None or not self.drift:
            return None
        return (1 + self.burst_error) / self.drift - 1


def agreements(rows: list[dict]) -> list[Agreement]:
    """Per workload of each run (records of one bench run share a run_id), in the order the
    records first name it; a workload that more than one run measured is labelled with its run."""
    order: list[tuple] = []
    tuner: dict[tuple, dict] = {}
    grid: dict[tuple, dict] = {}
    final: dict[tuple, dict] = {}
    for row in rows:
        if not row.get("workload"):
            continue
        name = (row.get("run_id"), row["workload"])
        if name not in order:
            order.append(name)
        result = row.get("result") or {}
        if row["phase"] == "tuner" and row.get("tuner"):
            tuner[name] = row["tuner"]
        elif row["phase"] == "grid" and result.get("status") == "ok":
            grid.setdefault(name, {})[config_from_kwargs(result["config"])] = result["samples_per_s"]
        elif row["phase"] == "final" and result.get("status") == "ok":
            final.setdefault(name, {}).setdefault(config_from_kwargs(result["config"]), []).append(result["samples_per_s"])
    # A run that only skipped a workload (no time) did not measure it: the bench records why.
    measured = [name for name in order if name in tuner or name in grid or name in final]
    out = []
    for name in measured:
        medians = {k: statistics.median(v) for k, v in final.get(name, {}).items()}
        found = TuneResult.from_dict(tuner[name]) if name in tuner else None
        # Configs keyed as the bench keys its own (config_from_kwargs), so they meet the grid's and the final's.
        pick = config_from_kwargs(found.config.loader_kwargs()) if found else None
        searched: dict = {}
        for trial in found.trials if found else ():
            # A pruned trial stopped early on a short window: the tuner never uses it as an estimate.
            if trial.ok and trial.samples_per_s and not trial.pruned:
                searched.setdefault(config_from_kwargs(trial.config.loader_kwargs()), []).append(trial.samples_per_s)
        estimate = found.samples_per_s if found else None
        repeated = sum(1 for other in measured if other[1] == name[1]) > 1
        out.append(Agreement(
            workload=f"{name[1]} ({name[0]})" if repeated else name[1],
            pick=short(pick) if pick else None,
            grid_over_final=tuple(PhaseRatio(short(k), v, medians[k])
                                  for k, v in grid.get(name, {}).items() if medians.get(k)),
            tuner_over_final=tuple(PhaseRatio(short(k), statistics.median(v), medians[k])
                                   for k, v in searched.items() if k != pick and medians.get(k)),
            burst_error=(estimate / medians[pick] - 1) if estimate and pick in medians else None))
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def _pairs(ratios: tuple[PhaseRatio, ...]) -> str:
    return ", ".join(f"{r.config} {r.ratio:.3f}" for r in ratios) or "none"


def report(found: list[Agreement]) -> str:
    lines = ["| workload | grid / final, by config | tuner / final, by config (not the pick) | drift | "
             "burst error | burst error / drift |", "|---|---|---|---|---|---|"]
    for a in found:
        lines.append(f"| {a.workload} | {_pairs(a.grid_over_final)} | {_pairs(a.tuner_over_final)} | "
                     f"{'n/a' if a.drift is None else f'{a.drift:.3f}'} | {_pct(a.burst_error)} | "
                     f"{_pct(a.burst_error_net)} |")
    for label, pick in (("grid / final", lambda a: a.grid_over_final),
                        ("tuner / final", lambda a: a.tuner_over_final)):
        ratios = [r.ratio for a in found for r in pick(a)]
        if ratios:
            close = sum(1 for r in ratios if abs(r - 1) <= CLOSE)
            lines.append(f"\n{label}: {close} of {len(ratios)} within ±{CLOSE:.0%}; "
                         f"median |ratio - 1| {statistics.median(abs(r - 1) for r in ratios) * 100:.1f}%, "
                         f"largest {max(abs(r - 1) for r in ratios) * 100:.1f}%")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return report_main(argv, "agreement", agreements, report)
