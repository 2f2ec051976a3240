"""How well the tuner's claims held: every recorded pick and what-if, predicted against measured.

    python -m scripts.bench calibration results/benchmarks/run-*/run/records.jsonl results/benchmarks/run-*/whatif/records.jsonl

For every tuner result in the records (phase ``tuner``) the pick's predicted rate (the result's
``predicted_samples_per_s``, and the model's prediction with the code checked out now, calibrated
on the same bursts as ``replay`` does) against what the bench measured of that config afterwards:
the median of its interleaved final rounds (phase ``final``), else of the re-measures of
``predictions`` (phase ``remeasure``), with a 95% interval over those rounds. For every what-if
the bench made and measured (phase ``whatif_summary``) the predicted gain (as recorded, and as
the report predicts it now) against the measured one, whose 95% interval is over the paired
rounds' ratios. An interval is a t-interval on the logs of the rounds (rates, or paired ratios).

"Held" is counted two ways: whether the prediction lies inside the measured interval, and, for
picks, whether the tuner's own stated interval (its rate +- ``rel_interval``) holds the bench's
median. Reads records only; measures nothing. Pure functions, so tests feed it records.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from autoloader.search.paired import t95
from scripts.bench.records import report_main


def interval(values: list[float]) -> tuple[float, float] | None:
    """A 95% interval of the centre of positive ``values`` (a t-interval on their logs, back on
    their scale); None below two values."""
    logs = [math.log(v) for v in values if v and v > 0]
    if len(logs) < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t95(len(logs) - 1) * sd / math.sqrt(len(logs))
    return math.exp(mean - half), math.exp(mean + half)


@dataclass(frozen=True)
class PickRow:
    run: str
    workload: str
    pick: str
    predicted: float | None        # as the result recorded it
    predicted_now: float | None    # the model with the code checked out now, on the same bursts
    tuned: float | None            # the tuner's own measurement of the pick
    tuned_interval: float | None   # its relative interval (rel_interval)
    measured: float | None         # the bench's median afterwards
    rounds: int
    measured_interval: tuple[float, float] | None
    source: str                    # final, remeasure or none

    def inside(self, value: float | None) -> bool | None:
        if value is None or self.measured_interval is None:
            return None
        return self.measured_interval[0] <= value <= self.measured_interval[1]

    @property
    def stated_held(self) -> bool | None:
        if self.tuned is None or self.tuned_interval is None or self.measured is None:
            return None
        return abs(self.measured / self.tuned - 1.0) <= self.tuned_interval


@dataclass(frozen=True)
class WhatIfRow:
    run: str
    workload: str
    whatif: str
    predicted: float | None        # gain, as recorded
    predicted_now: float | None    # gain, as the report predicts it now (None: not offered or not predicted)
    now_note: str                  # why there is no predicted_now, where there is none
    measured: float | None
    rounds: int
    measured_interval: tuple[float, float] | None   # of the gain

    def inside(self, gain: float | None) -> bool | None:
        if gain is None or self.measured_interval is None:
            return None
        return self.measured_interval[0] <= gain <= self.measured_interval[1]


def _predict_now(tuner: dict) -> float | None:
    """The pick's rate as the model with the code checked out now predicts it, calibrated on the
    result's bursts (as ``replay`` does)."""
    from autoloader.search.model import Model
    from autoloader.search.model_first import ModelFirst
    from autoloader.search.space import search_space
    from autoloader.store.result import TuneResult

    try:
        result = TuneResult.from_dict(tuner)
    except Exception:  # noqa: BLE001 (a record an older format cannot rebuild: no re-prediction)
        return None
    if result.profile is None:
        return None
    device = "cuda" if result.device.startswith("cuda") else "cpu"
    cpus = int(result.hardware.cpus)
    model = Model(result.profile, device)
    search = ModelFirst(search_space((result.profile.batch_size,), cpus, device), model, cpus)
    return model.predict(result.tuned.config, search.calibration(list(result.trials))).samples_per_s


def _whatif_now(tuner: dict, name: str) -> tuple[float | None, str]:
    from autoloader.explain import explain
    from autoloader.store.result import TuneResult

    try:
        found = {w.name: w for w in explain(TuneResult.from_dict(tuner)).whatifs}
    except Exception as exc:  # noqa: BLE001
        return None, f"not rebuilt ({type(exc).__name__})"
    w = found.get(name)
    if w is None:
        return None, "not offered now"
    return (w.gain, "") if w.predicted else (None, w.unpredicted or "not predicted")


def calibration(rows: list[dict], now: bool = True) -> tuple[list[PickRow], list[WhatIfRow]]:
    """The table's rows from the records (``now``: with the current code's predictions too)."""
    from autoloader.search.results import TrialResult
    from autoloader.search.space import LoaderConfig
    from scripts.bench.common import short

    finals: dict[tuple, list[float]] = {}
    remeasures: dict[tuple, list[float]] = {}
    tuners: list[tuple[tuple, dict, object]] = []
    whatifs: list[dict] = []
    for row in rows:
        run, workload, phase = row.get("run_id"), row.get("workload"), row.get("phase")
        result = row.get("result") or {}
        ok = result.get("status") == "ok" and result.get("samples_per_s")
        if phase == "tuner" and row.get("tuner"):
            tuners.append(((run, workload, row.get("round")), row["tuner"], row))
        elif phase == "final" and ok:
            config = TrialResult.from_dict(result).config
            finals.setdefault((run, workload, config), []).append(result["samples_per_s"])
        elif phase == "remeasure" and ok:
            remeasures.setdefault((run, workload, row.get("tune")), []).append(result["samples_per_s"])
        elif phase == "whatif_summary" and row.get("whatif") and "predicted_gain" in row:
            whatifs.append(row)
    picks = []
    for (run, workload, tune), tuner, _ in tuners:
        config = LoaderConfig.from_dict(tuner["config"]) if isinstance(tuner.get("config"), dict) else None
        rates, source = finals.get((run, workload, config), []), "final"
        if not rates:
            rates, source = remeasures.get((run, workload, tune), []), "remeasure"
        if not rates:
            source = "none"
        picks.append(PickRow(run or "?", workload or "?", short(config) if config else "?",
                             tuner.get("predicted_samples_per_s"), _predict_now(tuner) if now else None,
                             tuner.get("samples_per_s"), tuner.get("rel_interval"),
                             statistics.median(rates) if rates else None, len(rates), interval(rates), source))
    by_tuner = {(run, workload): tuner for (run, workload, _), tuner, _ in tuners}
    changes = []
    for row in whatifs:
        ratios = [r for r in row.get("ratios") or [] if r and r > 0]
        found = interval(ratios)
        tuner = by_tuner.get((row.get("run_id"), row.get("workload")))
        gain_now, note = _whatif_now(tuner, row["whatif"]) if now and tuner else (None, "no tuner record")
        changes.append(WhatIfRow(row.get("run_id") or "?", row.get("workload") or "?", row["whatif"],
                                 row.get("predicted_gain"), gain_now, note, row.get("measured_gain"), len(ratios),
                                 (found[0] - 1.0, found[1] - 1.0) if found else None))
    return picks, changes


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}/s"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.0f}%"


def _off(predicted: float | None, measured: float | None) -> str:
    return "n/a" if not predicted or not measured else f"{predicted / measured - 1:+.1%}"


def _yes(x: bool | None) -> str:
    return "n/a" if x is None else ("yes" if x else "no")


def _count(flags: list[bool | None]) -> str:
    known = [f for f in flags if f is not None]
    return f"{sum(known)} of {len(known)}"


def report(found: tuple[list[PickRow], list[WhatIfRow]]) -> str:
    picks, changes = found
    lines = ["## Picks: predicted against the bench's re-measure", "",
             "| run | workload | pick | predicted (then / now) | tuner's own ± its interval | bench median "
             "(rounds, 95% interval) | predicted / bench − 1 (then / now) | prediction in the interval (then / now) "
             "| tuner's interval held the bench |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in picks:
        iv = f"{_rate(p.measured_interval[0])}-{_rate(p.measured_interval[1])}" if p.measured_interval else "n/a"
        own = (f"{_rate(p.tuned)} ± {p.tuned_interval:.0%}" if p.tuned is not None and p.tuned_interval is not None
               else _rate(p.tuned))
        lines.append(f"| {p.run} | {p.workload} | {p.pick} | {_rate(p.predicted)} / {_rate(p.predicted_now)} | {own} | "
                     f"{_rate(p.measured)} ({p.rounds} {p.source}, {iv}) | {_off(p.predicted, p.measured)} / "
                     f"{_off(p.predicted_now, p.measured)} | {_yes(p.inside(p.predicted))} / "
                     f"{_yes(p.inside(p.predicted_now))} | {_yes(p.stated_held)} |")
    measured = [p for p in picks if p.measured]
    within = lambda get: sum(1 for p in measured if get(p) and abs(get(p) / p.measured - 1) <= 0.10)  # noqa: E731
    lines += ["", f"{len(picks)} picks, {len(measured)} re-measured by the bench: the prediction within ±10% of the "
                  f"bench's median {within(lambda p: p.predicted)} (then) / {within(lambda p: p.predicted_now)} (now) "
                  f"of {len(measured)}; inside the bench's 95% interval {_count([p.inside(p.predicted) for p in picks])}"
                  f" (then) / {_count([p.inside(p.predicted_now) for p in picks])} (now); the tuner's stated interval "
                  f"held the bench's median {_count([p.stated_held for p in picks])}."]
    lines += ["", "## What-ifs: predicted gain against the gain measured in paired rounds", "",
              "| run | workload | what-if | predicted (then) | predicted (now) | measured (rounds, 95% interval) | "
              "prediction in the interval (then / now) |",
              "|---|---|---|---|---|---|---|"]
    for w in changes:
        iv = f"{_pct(w.measured_interval[0])}…{_pct(w.measured_interval[1])}" if w.measured_interval else "n/a"
        lines.append(f"| {w.run} | {w.workload} | {w.whatif} | {_pct(w.predicted)} | "
                     f"{_pct(w.predicted_now) if w.predicted_now is not None else w.now_note or 'n/a'} | "
                     f"{_pct(w.measured)} ({w.rounds}, {iv}) | {_yes(w.inside(w.predicted))} / "
                     f"{_yes(w.inside(w.predicted_now))} |")
    lines += ["", f"{len(changes)} what-ifs: the prediction inside the measured interval "
                  f"{_count([w.inside(w.predicted) for w in changes])} (then) / "
                  f"{_count([w.inside(w.predicted_now) for w in changes])} (now; a change the report no longer "
                  "predicts counts in neither)."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return report_main(argv, "calibration", calibration, report)
