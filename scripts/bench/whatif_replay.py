"""The what-ifs the bench made and measured, predicted again from their recorded tuner results
with the code checked out now: a replay, that is a prediction on old records, not a measurement.

    python -m scripts.bench whatif-replay results/benchmarks/run-20261202/whatif/records.jsonl \\
        results/benchmarks/run-20261202/whatif-f79ab31/records.jsonl [MORE/records.jsonl ...]

For every what-if in the records (phase ``whatif_summary``): the config and gain predicted then
(as recorded), the config and gain the report predicts now from the same tuner result (its
profile, bursts and final), and the gain measured (the median of the paired rounds' ratios, with
a 95% interval), with how far the prediction is: (1 + predicted) / (1 + measured) - 1. Whether
the profile timed the change (NOTE [ A quarter of the bytes ] in autoloader/search/profile.py):
where it did not (records made before it did), the bytes' share stands in for it now as well.

Then each side's batch as the bench measured it, split by the bursts' own shares into the loop's
wait in next() (collate and pin, at num_workers=0) and the step (the copy to the device and the
step's work), against the model's split now of the same config: which part shrank by less than
the model says. Reads records only; measures nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from scripts.bench.calibration import interval
from scripts.bench.records import report_main


@dataclass(frozen=True)
class Side:
    """One side of a what-if's rounds: the bench's medians, the model's figures now."""
    role: str                     # as is, changed
    config: str
    dataset: str
    batch_s: float                # the measured batch interval (batch size over the steady rate)
    next_s: float | None          # of it, waiting in next()
    step_s: float | None          # of it, in the step
    model_batch_s: float | None   # the model now: the batch interval
    model_next_s: float | None    # and its share in next()


@dataclass(frozen=True)
class Row:
    run: str
    workload: str
    whatif: str
    config_then: str
    gain_then: float | None
    config_now: str
    gain_now: float | None
    note: str                     # why there is no gain now, where there is none
    measured: float | None
    measured_interval: tuple[float, float] | None
    rounds: int
    timed: bool | None            # the tuner's profile timed the change (None: not a uint8 what-if)
    sides: tuple[Side, ...] = ()

    def off(self, gain: float | None) -> float | None:
        """(1 + predicted) / (1 + measured) - 1."""
        if gain is None or self.measured is None:
            return None
        return (1.0 + gain) / (1.0 + self.measured) - 1.0


def _sides(trials: list[dict], model, changed, calib) -> tuple[Side, ...]:
    """Each side's medians over its rounds, and the model's figures now for its config (``model``
    for the side as is, ``changed`` for the changed one)."""
    from autoloader.search.results import TrialResult
    from scripts.bench.common import short

    out = []
    for role, which in (("as is", model), ("changed", changed)):
        mine = [t for t in trials if t.get("role") == role]
        ok = [TrialResult.from_dict(t["result"]) for t in mine]
        ok = [t for t in ok if t.status == "ok" and (t.steady_samples_per_s or t.samples_per_s)]
        if not ok:
            continue
        config = ok[0].config
        intervals = [config.batch_size / (t.steady_samples_per_s or t.samples_per_s) for t in ok]
        waits = [i * t.wait_fraction for i, t in zip(intervals, ok) if t.wait_fraction is not None]
        steps = [i * t.consumer_fraction for i, t in zip(intervals, ok) if t.consumer_fraction is not None]
        prediction = which.predict(config, calib)
        model_batch = config.batch_size / prediction.steady_samples_per_s
        out.append(Side(role, short(config), mine[0].get("dataset", ""), statistics.median(intervals),
                        statistics.median(waits) if waits else None, statistics.median(steps) if steps else None,
                        model_batch, model_batch * prediction.wait_share))
    return tuple(out)


def replays(rows: list[dict]) -> list[Row]:
    from autoloader.explain import explain
    from autoloader.explain.whatif import uint8_profile
    from autoloader.search.model import Model
    from autoloader.store.result import TuneResult
    from scripts.bench.common import short

    tuners = {(r.get("run_id"), r.get("workload")): r["tuner"] for r in rows
              if r.get("phase") == "tuner" and r.get("tuner")}
    out = []
    for row in rows:
        if row.get("phase") != "whatif_summary" or "predicted_gain" not in row:
            continue
        key = (row.get("run_id"), row.get("workload"))
        name = row["whatif"]
        tuner = tuners.get(key)
        config_now, gain_now, note, timed, sides = "-", None, "no tuner record", None, ()
        ratios = [r for r in row.get("ratios") or [] if r and r > 0]
        if tuner is not None:
            result = TuneResult.from_dict(tuner)
            found = explain(result)
            w = next((x for x in found.whatifs if x.name == name), None)
            timed = result.profile.uint8 is not None if name == "uint8" else None
            if w is None:
                note = "not offered now"
            else:
                config_now, note = short(w.config), w.unpredicted or ""
                gain_now = w.gain if w.predicted else None
            trials = [r for r in rows if r.get("phase") == "whatif" and r.get("whatif") == name
                      and (r.get("run_id"), r.get("workload")) == key and r.get("result")]
            model = found.evidence.model
            changed = Model(uint8_profile(result.profile), found.evidence.device) if name == "uint8" else model
            sides = _sides(trials, model, changed, found.evidence.calibration) if trials and name == "uint8" else ()
        found_iv = interval(ratios)
        out.append(Row(row.get("run_id") or "?", row.get("workload") or "?", name, row.get("config") or "-",
                       row.get("predicted_gain"), config_now, gain_now, note, row.get("measured_gain"),
                       (found_iv[0] - 1.0, found_iv[1] - 1.0) if found_iv else None, len(ratios), timed, sides))
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.0f}%"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def _shrink(a: float | None, b: float | None) -> str:
    return "n/a" if not a or not b else f"{a / b:.2f}x"


def report(found: list[Row]) -> str:
    lines = ["## What-ifs replayed: the prediction now from the recorded tuner results, against the measurement", "",
             "A replay: the report's prediction with the code checked out now, on the profile, bursts and final the "
             "tuner recorded then; the measurement is the bench's, as recorded.", "",
             "| run | workload | what-if | predicted then (config) | predicted now (config) | measured (rounds, 95% "
             "interval) | then / measured | now / measured | profile timed the change |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in found:
        iv = f"{_pct(r.measured_interval[0])}…{_pct(r.measured_interval[1])}" if r.measured_interval else "n/a"
        now = f"{_pct(r.gain_now)} ({r.config_now})" if r.gain_now is not None else (r.note or "n/a")
        lines.append(f"| {r.run} | {r.workload} | {r.whatif} | {_pct(r.gain_then)} ({r.config_then}) | {now} | "
                     f"{_pct(r.measured)} ({r.rounds}, {iv}) | {_pct(r.off(r.gain_then))} | {_pct(r.off(r.gain_now))} | "
                     f"{'-' if r.timed is None else 'yes' if r.timed else 'no (the bytes share stands in)'} |")
    parts = [r for r in found if len(r.sides) == 2]
    if parts:
        lines += ["", "Each side of a uint8 what-if, its batch measured (split by the bursts' wait and consumer shares) "
                  "against the model now:",
                  "", "| run | workload | what-if | side (dataset) | batch measured / model | next() measured / model "
                  "| step measured |", "|---|---|---|---|---|---|---|"]
        for r in parts:
            for s in r.sides:
                lines.append(f"| {r.run} | {r.workload} | {r.whatif} | {s.role}: {s.config} ({s.dataset}) | "
                             f"{_ms(s.batch_s)} / {_ms(s.model_batch_s)} | {_ms(s.next_s)} / {_ms(s.model_next_s)} | "
                             f"{_ms(s.step_s)} |")
            a, b = r.sides
            lines.append(f"| {r.run} | {r.workload} | {r.whatif} | shrink, as is / changed | "
                         f"{_shrink(a.batch_s, b.batch_s)} / {_shrink(a.model_batch_s, b.model_batch_s)} | "
                         f"{_shrink(a.next_s, b.next_s)} / {_shrink(a.model_next_s, b.model_next_s)} | "
                         f"{_shrink(a.step_s, b.step_s)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return report_main(argv, "whatif-replay", replays, report)
