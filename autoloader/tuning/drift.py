"""Drift: how one dataset's re-tune compares with its last result, judged against thresholds.

# NOTE [ Drift ]
# A nightly re-tune asks whether the loader the training jobs use is still the right one. From
# the last good result (this hardware's; else the nearest other hardware's, which is reported
# but never judged) and tonight's, both as stored:
#  * the pick: which settings changed, and whether tonight measured the old pick within
#    SETTINGS_TIE of the new one (a tie that noise decided is no change);
#  * the old pick's rate now against then: the warm start measures it first, so this is one
#    config read twice, the most direct test of the data or the machine getting slower;
#  * the knee (the fewest workers within noise of the best) and the memory one more worker
#    costs (the slope of the trials' peak memory over their worker counts, where at least two
#    counts were measured; a change under MEMORY_FLOOR is noise);
#  * the hardware fields that differ, when the last result came from other hardware.
# Past a threshold (registry [thresholds]) the dataset drifted; the knee, a point of the
# strategy's own (modelled) worker curve, is judged only when the registry asks. Figures measured in another
# measurement format (NOTE [ Measurement format ]) cannot be compared: that is said, and counts
# as drift, since nothing can be said to be unchanged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..fleet.registry import Thresholds
from ..search.policy import SETTINGS_TIE
from ..search.space import TUNED_SETTINGS, LoaderConfig
from ..store.versions import reuse_problem

BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED = "baseline", "new hardware", "unchanged", "drifted"
HARDWARE_FIELDS = ("cpus", "cpu_model", "memory_gib", "gpus")
# A change of the memory per worker smaller than this is the allocator's noise, whatever its share.
MEMORY_FLOOR = 64 * 2**20


@dataclass(frozen=True)
class Drift:
    status: str
    reasons: tuple[str, ...] = ()                  # what went past a threshold
    previous_path: str | None = None
    previous_hardware: str | None = None
    previous_finished_at: str | None = None
    changes: tuple[tuple[str, object, object], ...] = ()
    settings_tie: bool = False
    old_pick_then: float | None = None             # the old pick's rate when it was picked
    old_pick_now: float | None = None              # ... and tonight
    pick_rate_before: float | None = None
    pick_rate_after: float | None = None
    knee_before: int | None = None
    knee_after: int | None = None
    memory_per_worker_before: float | None = None  # bytes
    memory_per_worker_after: float | None = None
    hardware_changes: tuple[tuple[str, object, object], ...] = ()
    not_comparable: str | None = None

    @property
    def drifted(self) -> bool:
        return self.status == DRIFTED

    @property
    def old_pick_ratio(self) -> float | None:
        if self.old_pick_now is None or not self.old_pick_then:
            return None
        return self.old_pick_now / self.old_pick_then

    @property
    def memory_ratio(self) -> float | None:
        if self.memory_per_worker_before is None or self.memory_per_worker_after is None \
                or self.memory_per_worker_before <= 0:
            return None
        return self.memory_per_worker_after / self.memory_per_worker_before

    def to_dict(self) -> dict:
        return {"status": self.status, "reasons": list(self.reasons), "previous_path": self.previous_path,
                "previous_hardware": self.previous_hardware, "previous_finished_at": self.previous_finished_at,
                "pick_changed": bool(self.changes),
                "changes": [{"setting": s, "before": b, "after": a} for s, b, a in self.changes],
                "settings_tie": self.settings_tie, "old_pick_then": self.old_pick_then,
                "old_pick_now": self.old_pick_now, "old_pick_ratio": self.old_pick_ratio,
                "pick_rate_before": self.pick_rate_before, "pick_rate_after": self.pick_rate_after,
                "knee_before": self.knee_before, "knee_after": self.knee_after,
                "memory_per_worker_before": self.memory_per_worker_before,
                "memory_per_worker_after": self.memory_per_worker_after, "memory_ratio": self.memory_ratio,
                "hardware_changes": [{"field": f, "before": b, "after": a} for f, b, a in self.hardware_changes],
                "not_comparable": self.not_comparable}


def judge(previous: dict | None, previous_path: str | None, current: dict, thresholds: Thresholds) -> Drift:
    """Tonight's result ``current`` against ``previous`` (stored result dicts): NOTE [ Drift ]."""
    if previous is None:
        return Drift(BASELINE)
    old_config, new_config = _config(previous), _config(current)
    before, after = old_config.loader_kwargs(), new_config.loader_kwargs()
    changes = tuple((s, before.get(s), after.get(s)) for s in TUNED_SETTINGS if before.get(s) != after.get(s))
    old_now = rate_of(current, old_config)
    tie = bool(changes) and old_now is not None and old_now >= (1 - SETTINGS_TIE) * current["samples_per_s"]
    old_hw, new_hw = previous.get("hardware") or {}, current.get("hardware") or {}
    same = old_hw.get("fingerprint") == new_hw.get("fingerprint")
    figures = dict(previous_path=previous_path, previous_hardware=old_hw.get("fingerprint"),
                   previous_finished_at=previous.get("finished_at"), changes=changes, settings_tie=tie,
                   old_pick_then=previous.get("samples_per_s"), old_pick_now=old_now,
                   pick_rate_before=previous.get("samples_per_s"), pick_rate_after=current.get("samples_per_s"),
                   knee_before=_knee(previous), knee_after=_knee(current),
                   memory_per_worker_before=memory_per_worker(previous),
                   memory_per_worker_after=memory_per_worker(current),
                   hardware_changes=tuple((f, old_hw.get(f), new_hw.get(f)) for f in HARDWARE_FIELDS
                                          if old_hw.get(f) != new_hw.get(f)))
    if not same:
        return Drift(NEW_HARDWARE, **figures)
    differently = reuse_problem(previous)
    if differently is not None:
        return Drift(DRIFTED, (f"not comparable: {differently}",), not_comparable=differently, **figures)
    probe = Drift(UNCHANGED, **figures)
    reasons = []
    if thresholds.pick and changes and not tie:
        reasons.append("pick changed: " + ", ".join(f"{s} {b} -> {a}" for s, b, a in changes))
    ratio = probe.old_pick_ratio
    if ratio is None and probe.pick_rate_before and probe.pick_rate_after:
        ratio = probe.pick_rate_after / probe.pick_rate_before   # the old pick was not measured tonight
    if ratio is not None and abs(ratio - 1) > thresholds.rate:
        reasons.append(f"rate {ratio - 1:+.0%} (threshold {thresholds.rate:.0%})")
    if thresholds.knee is not None and probe.knee_before is not None and probe.knee_after is not None \
            and abs(probe.knee_after - probe.knee_before) >= thresholds.knee:
        reasons.append(f"knee {probe.knee_before} -> {probe.knee_after} workers (threshold {thresholds.knee})")
    memory = probe.memory_ratio
    if memory is not None and abs(memory - 1) > thresholds.memory_per_worker \
            and abs(probe.memory_per_worker_after - probe.memory_per_worker_before) > MEMORY_FLOOR:
        reasons.append(f"memory per worker {memory - 1:+.0%} (threshold {thresholds.memory_per_worker:.0%})")
    return Drift(DRIFTED if reasons else UNCHANGED, tuple(reasons), **figures)


def _config(result: dict) -> LoaderConfig:
    return LoaderConfig.from_dict(result["config"])


def _knee(result: dict) -> int | None:
    knee = result.get("knee")
    return knee.get("stops_paying") if isinstance(knee, dict) else None


def rate_of(result: dict, config: LoaderConfig) -> float | None:
    """``config``'s rate in a stored result: its final median, else its best burst."""
    for final in result.get("finals") or ():
        if _same(final.get("config"), config) and final.get("rates"):
            return statistics.median(final["rates"])
    bursts = [t.get("samples_per_s") for t in result.get("trials") or ()
              if t.get("status") == "ok" and t.get("samples_per_s") and _same(t.get("config"), config)]
    return max(bursts) if bursts else None


def _same(data: dict | None, config: LoaderConfig) -> bool:
    try:
        return data is not None and LoaderConfig.from_dict(data) == config
    except (KeyError, TypeError, ValueError):
        return False


def memory_per_worker(result: dict) -> float | None:
    """Bytes of peak memory one more worker costs, by least squares over the measured trials'
    worker counts (the largest peak per count); None with fewer than two counts."""
    peaks: dict[int, float] = {}
    for trial in result.get("trials") or ():
        peak = trial.get("peak_pss_bytes")
        if trial.get("status") == "ok" and peak:
            workers = int(trial["config"]["num_workers"])
            peaks[workers] = max(peaks.get(workers, 0.0), float(peak))
    if len(peaks) < 2:
        return None
    xs, ys = list(peaks), list(peaks.values())
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
