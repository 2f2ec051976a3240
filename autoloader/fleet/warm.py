"""Where a re-tune starts from: a stored result turned into the warm start the run measures first
(NOTE [ Warm start ] in search/warm.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..search.warm import WarmStart, scaled
from ..store.result import TuneResult
from ..events.lines import rate


@dataclass(frozen=True)
class WarmPlan:
    """Where a re-tune starts from and why, in words for its report."""
    start: WarmStart | None
    source: str | None = None
    why_not: str | None = None

    def describe(self) -> str:
        if self.start is None:
            return f"none: {self.why_not}"
        kind = "this hardware's last result" if self.start.may_stop else "the nearest other hardware's result"
        return f"{kind} ({self.source}): {self.start.pick.key} at {rate(self.start.rate)}"


def plan(base: TuneResult | None, problem) -> WarmPlan:
    """The warm start from ``base`` (the previous result, by ``store.history.previous``'s rule),
    for ``problem``."""
    if base is None:
        return WarmPlan(None, why_not="no earlier result for this dataset")
    differently = base.measured_differently()
    if differently is not None:
        return WarmPlan(None, base.where, why_not=differently)
    pick, hw = base.config, base.hardware
    same = hw.fingerprint == problem.hardware.fingerprint
    if not same:
        pick = scaled(pick, int(hw.cpus or problem.hardware.cpus), problem.hardware.cpus)
    if pick.batch_size not in problem.batch_sizes:
        pick = pick.replace(batch_size=problem.batch_sizes[0])
    return WarmPlan(WarmStart(pick, base.samples_per_s, base.tuned.rel_interval, may_stop=same,
                              neighbours=same), base.where)
