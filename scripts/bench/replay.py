"""How well the model, corrected by a run's own tuner bursts, predicts what the bench measured.

    python -m scripts.bench replay results/benchmarks/run-X/run/records.jsonl [MORE ...]

Each tuner run's JSON in the records holds its profile and its bursts. This rebuilds the model of
that profile with the code checked out now, calibrates it on those bursts as the tuner does
(NOTE [ Model first ] in autoloader/search/model_first.py), and sets its prediction of every config the
bench measured (the grid's long windows, the final's medians) against the measurement. So a
change to the model or its calibration can be judged on runs already made, before a GPU run: the
same records, the code before and after. It cannot say what the changed search would have
measured (a burst it would have run is not in the records), only how the model reads the
measurements that were made, which config it would now pick from the same bursts, and which the
final's choice (autoloader/search/choice.py) now makes of the same final rounds, against the pick
the run handed back.

Reads records only; measures nothing. Pure functions, so tests feed it records they write.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from autoloader.search.choice import choose
from autoloader.search.model import Model
from autoloader.search.model_first import ModelFirst
from autoloader.search.results import TrialResult
from autoloader.search.space import search_space
from autoloader.store.result import TuneResult
from scripts.bench.common import short
from scripts.bench.records import report_main


@dataclass(frozen=True)
class Reading:
    """One config the bench measured, and the corrected model's prediction of it."""
    phase: str            # grid or final (the final's median over its rounds)
    config: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """log(predicted / measured): symmetric, so +x and -x are equally far off."""
        return math.log(self.predicted / self.measured)


@dataclass(frozen=True)
class Replay:
    workload: str
    readings: tuple[Reading, ...]
    pick: str             # the corrected model's pick from the run's bursts
    recorded: str = ""    # the pick the run handed back
    chosen: str = ""      # the final's choice now from the run's final rounds (and its bursts)

    @property
    def mean_error(self) -> float:
        return statistics.fmean(abs(r.error) for r in self.readings) if self.readings else 0.0


def replays(rows: list[dict]) -> list[Replay]:
    """Per workload of each run (the first tuner of a workload: a stability check's later tunes
    are left out), in the order the records name them."""
    tuners: dict[tuple, TuneResult] = {}
    grid: dict[tuple, dict] = {}
    final: dict[tuple, dict] = {}
    for row in rows:
        if not row.get("workload"):
            continue
        name = (row.get("run_id"), row["workload"])
        result = row.get("result") or {}
        tuned = TuneResult.from_dict(row["tuner"]) if row["phase"] == "tuner" and row.get("tuner") else None
        if tuned is not None and tuned.profile is not None and name not in tuners:
            tuners[name] = tuned
        elif row["phase"] == "grid" and result.get("status") == "ok" and result.get("samples_per_s"):
            grid.setdefault(name, {})[TrialResult.from_dict(result).config] = result["samples_per_s"]
        elif row["phase"] == "final" and result.get("status") == "ok" and result.get("samples_per_s"):
            final.setdefault(name, {}).setdefault(TrialResult.from_dict(result).config, []).append(
                result["samples_per_s"])
    out = []
    repeated = {w for _, w in tuners if sum(1 for _, v in tuners if v == w) > 1}
    for name, tuner in tuners.items():
        profile, trials = tuner.profile, list(tuner.trials)
        cpus = int(tuner.hardware.cpus)
        cuda = tuner.device.startswith("cuda")
        # The tuner's own space (autoloader/search/space.py), at the batch size it profiled.
        space = search_space((profile.batch_size,), cpus, "cuda" if cuda else "cpu")
        model = Model(profile, "cuda" if cuda else "cpu")
        search = ModelFirst(space, model, cpus)
        calib = search.calibration(trials)
        measured = [("grid", c, v) for c, v in grid.get(name, {}).items()]
        measured += [("final", c, statistics.median(v)) for c, v in final.get(name, {}).items()]
        readings = tuple(Reading(phase, short(c), v, model.predict(c, calib).samples_per_s)
                         for phase, c, v in measured if c.batch_size == profile.batch_size)
        pick = search.pick(search.predictions(trials, calib)).config
        finals = list(tuner.finals)
        narrow = search.short_of_headroom([f.config for f in finals], trials)
        chosen = choose(finals, trials, tuner.rule, widen=tuner.load.widen if tuner.load else 0.0,
                        narrow=narrow).config
        out.append(Replay(f"{name[1]} ({name[0]})" if name[1] in repeated else name[1], readings, short(pick),
                          short(tuner.config), short(chosen)))
    return out


def report(found: list[Replay]) -> str:
    lines = ["| workload | mean |error| | largest error | within ±10% | corrected model's pick | pick handed back "
             "| the final's choice now |",
             "|---|---|---|---|---|---|---|"]
    for r in found:
        worst = max(r.readings, key=lambda x: abs(x.error), default=None)
        close = sum(1 for x in r.readings if abs(math.exp(x.error) - 1) <= 0.10)
        lines.append(f"| {r.workload} | {r.mean_error * 100:.1f}% | "
                     + (f"{(math.exp(worst.error) - 1) * 100:+.1f}% ({worst.phase} {worst.config})" if worst else "n/a")
                     + f" | {close} of {len(r.readings)} | {r.pick} | {r.recorded} | "
                     + (r.chosen if r.chosen == r.recorded else f"**{r.chosen}**") + " |")
    every = [x for r in found for x in r.readings]
    if every:
        lines.append(f"\nover {len(found)} workload(s), {len(every)} measurements: mean |log(predicted / measured)| "
                     f"{statistics.fmean(abs(x.error) for x in every) * 100:.1f}%; within ±10%: "
                     f"{sum(1 for x in every if abs(math.exp(x.error) - 1) <= 0.10)} of {len(every)}")
    changed = [r for r in found if r.chosen != r.recorded]
    lines.append(f"\nthe final's choice now differs from the pick handed back in {len(changed)} of {len(found)} "
                 "tune(s) (in bold)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return report_main(argv, "replay", replays, report)
