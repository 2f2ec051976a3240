"""The least a judged tune can take, on a run's own figures: how far each tune's wall time lies
above it, and so whether a wall-time target fits under what the verdict's measurements cost.

    python -m scripts.bench floor results/benchmarks/run-X/quick/records.jsonl [MORE ...]

A judged verdict (pick against the rule, with its interval) needs the pick and the rule paired in
two rounds at least: the opening round of the search's own bursts and one round of the final
(NOTE [ A final that can settle ] in autoloader/tuning/final.py; shared/BENCHMARK.md: a ratio
from paired rounds). Every reading pays its workers' start, the protocol's lead (num_workers + 2
batches skipped), a window of at least two worker cycles, and its teardown. So a tune that
explores nothing past the opening round and settles at two pairs still takes

    floor = before its first burst (the trial process's set-up, the study's opening, the profile)
            + outside its own clock (the CLI's start and exit, timed from outside)
            + 2 x (the pick's reading + the rule's reading), each the median of its readings
            + the three gaps between those four readings (the median gap between the tune's readings)

each part read off the tune's own timeline. The wall time past the floor is what the search
explored beyond the opening and the final's rounds past one. A tune whose pick is the rule's
config needs no pair and has no floor of this kind; one with no final (its verdict not judged)
ran under it, which the table marks.

Reads records only; measures nothing. Pure functions, so tests feed it rows they write.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from scripts.bench.common import config_from_kwargs, rule_field, short
from scripts.bench.records import report_main


@dataclass(frozen=True)
class Floor:
    run: str
    workload: str
    wall_s: float
    judged: bool          # the verdict came with an interval (rule_ratio_interval)
    before_s: float       # the tune's clock at its first burst
    outside_s: float      # wall time outside the tune's clock
    pick_s: float         # the pick's reading, median of its bursts and final readings
    rule_s: float         # the rule's reading, likewise
    gap_s: float          # the median gap between two readings
    pick: str = ""

    @property
    def floor_s(self) -> float:
        return self.before_s + self.outside_s + 2 * (self.pick_s + self.rule_s) + 3 * self.gap_s

    @property
    def above_s(self) -> float:
        return self.wall_s - self.floor_s


def floors(rows: list[dict]) -> list[Floor]:
    """One Floor per tune whose pick is not the rule's config (a bench run's first
    tune of each workload), in the order the records hold them."""
    out, seen = [], set()
    for row in rows:
        data = row.get("tuner")
        if row.get("phase") != "tuner" or not data or not rule_field(data) or not row.get("wall_s"):
            continue
        name = (row.get("run_id") or "", row.get("workload") or "")
        if name in seen:
            continue
        seen.add(name)
        pick, rule = config_from_kwargs(data["config"]), config_from_kwargs(rule_field(data))
        if pick == rule:
            continue
        marks = [m for m in (data.get("inputs") or {}).get("timeline") or [] if m[0] in ("burst", "final")]
        if not marks:
            continue
        times = {pick.key: [], rule.key: []}
        for _, start, end, key in marks:
            if key in times:
                times[key].append(end - start)
        if not times[pick.key] or not times[rule.key]:
            continue
        gaps = [b[1] - a[2] for a, b in zip(marks, marks[1:])]
        out.append(Floor(name[0], name[1], float(row["wall_s"]), bool(rule_field(data, "_ratio_interval")),
                         marks[0][1], max(0.0, float(row["wall_s"]) - float(data.get("tune_seconds") or 0.0)),
                         statistics.median(times[pick.key]), statistics.median(times[rule.key]),
                         statistics.median(gaps) if gaps else 0.0, short(pick)))
    return out


def report(found: list[Floor], target_s: float = 35.0) -> str:
    lines = ["| run | workload | pick | wall s | judged | before the first burst | outside | pick's reading "
             "| rule's reading | gap | floor | wall past the floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in found:
        lines.append(f"| {f.run} | {f.workload} | {f.pick} | {f.wall_s:.1f} | {'yes' if f.judged else 'no'} | "
                     f"{f.before_s:.1f} | {f.outside_s:.1f} | {f.pick_s:.1f} | {f.rule_s:.1f} | {f.gap_s:.2f} | "
                     f"{f.floor_s:.1f} | {f.above_s:+.1f} |")
    if not found:
        return "\n".join(lines + ["", "no tune with a pick apart from the rule's config"])
    lines.append("")
    lines.append("Per workload, over the tunes above (median, min-max):")
    lines.append("")
    for workload in dict.fromkeys(f.workload for f in found):
        mine = [f for f in found if f.workload == workload]
        fl, wall = [f.floor_s for f in mine], [f.wall_s for f in mine]
        under = sum(1 for f in mine if f.floor_s <= target_s)
        lines.append(f"- {workload} ({len(mine)} tunes): floor {statistics.median(fl):.1f} s "
                     f"({min(fl):.1f}-{max(fl):.1f}), wall {statistics.median(wall):.1f} s "
                     f"({min(wall):.1f}-{max(wall):.1f}); floor at or under {target_s:g} s in {under} of {len(mine)}")
    runs = {}
    for f in found:
        runs.setdefault(f.run, []).append(f)
    medians = [statistics.median(f.floor_s for f in r) for r in runs.values() if len(r) >= 3]
    if medians:
        under = sum(1 for m in medians if m <= target_s)
        lines += ["", f"The median of a run's floors (runs with three tunes or more): at or under {target_s:g} s in "
                      f"{under} of {len(medians)} runs: " + ", ".join(f"{m:.1f}" for m in medians) + " s"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return report_main(argv, "floor", floors, report)
