"""What changed since the previous result of the same problem: the question a nightly re-tune asks.

Both ``autoloader tune --fail-if-changed`` and ``autoloader retune`` ask it, the same way: the run
finds the previous result by one rule (``store.history.previous``: this hardware's last good
result, else the nearest other hardware's) before its own replaces it, and ``compare`` sets the
two side by side under ``Thresholds``.

# NOTE [ Drift ]
# A nightly re-tune asks whether the loader the training jobs use is still the right one. From
# the previous result and tonight's, both as stored:
#  * the pick: which settings changed, and whether tonight's rounds separate the new pick from
#    the old. On this hardware the final measures the old pick beside the new one (tuning/final.py),
#    so each round is a paired comparison; the new pick is a change only when it read ahead in
#    every round and its median ratio clears both SETTINGS_TIE and the paired ratios' own spread
#    (one round shows no spread: SINGLE_ROUND_MARGIN stands in). A change the rounds cannot
#    separate is a tie, reported as unchanged; an old pick that failed here is a change;
#  * the old pick's rate now against then: the warm start measures it first, so this is one
#    config read twice, the most direct test of the data or the machine getting slower (when
#    tonight did not measure it, the two picks' rates stand in). It is a change only past both
#    the threshold and the noise of the two readings (the spread of each run's rounds, or a
#    burst's interval where a run had no rounds of it);
#  * the knee (the fewest workers within noise of the best) and the memory one more worker
#    costs (the slope of the trials' peak memory over their worker counts, where at least two
#    counts were measured and it is positive: a falling slope is the allocator's noise, so it is
#    unmeasured; a change under MEMORY_FLOOR is noise);
#  * the hardware fields that differ, when the previous result came from other hardware.
# Past a threshold is a reason. On this hardware any reason means the dataset drifted; from
# other hardware the reasons are reported (``changed``, which --fail-if-changed exits on) but
# the status is "new hardware", never "drifted" (retune's exit 3 is for this machine's own
# drift). The knee, a point of the strategy's own (modelled) worker curve, is judged only when
# the thresholds ask. Figures measured in another measurement format (NOTE [ Measurement format ]
# in store/versions.py) cannot be compared: that is said, and is a reason, since nothing can be
# said to be unchanged.
# Tonight's run measured on a busy machine (NOTE [ Others on the machine ] in search/load.py) is
# inconclusive, whatever it found: its figures are what the machine gave beside the others. What
# went past a threshold is kept as ``set_aside`` for the report, and the result is marked so that
# no later run compares with it (store/history.previous).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..search.policy import MEMORY_FLOOR, SETTINGS_TIE, SINGLE_ROUND_MARGIN, Thresholds
from ..search.space import TUNED_SETTINGS, LoaderConfig
from ..store.validate import StoredResult

BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED = "baseline", "new hardware", "unchanged", "drifted"
INCONCLUSIVE = "inconclusive"
HARDWARE_FIELDS = ("cpus", "cpu_model", "memory_gib", "gpus")


@dataclass(frozen=True)
class Change:
    """One DataLoader setting that differs from the previous pick."""
    setting: str
    before: object
    after: object


@dataclass(frozen=True)
class Comparison:
    """This run's result against the previous one of the same problem (NOTE [ Drift ])."""
    status: str
    reasons: tuple[str, ...] = ()                  # what went past a threshold
    previous_path: str | None = None
    previous_hardware: str | None = None
    previous_finished_at: str | None = None
    same_hardware: bool = True
    changes: tuple[Change, ...] = ()
    settings_tie: bool = False
    old_pick_now: float | None = None              # the old pick's rate tonight, when measured
    pick_rate_before: float | None = None          # the old pick's rate when it was picked
    pick_rate_after: float | None = None
    knee_before: int | None = None
    knee_after: int | None = None
    memory_per_worker_before: float | None = None  # bytes
    memory_per_worker_after: float | None = None
    hardware_changes: tuple[tuple[str, object, object], ...] = ()
    not_comparable: str | None = None
    paired: tuple[float, ...] = ()                 # the new pick over the old, round by round tonight
    rate_noise: float | None = None                # the two readings' spread the rate had to clear
    load: dict | None = None                       # tonight's machine load (search/load.py's record)
    set_aside: tuple[str, ...] = ()                # past a threshold on a busy machine: not judged

    @property
    def changed(self) -> bool:
        """Something went past a threshold, on this hardware or from another's."""
        return bool(self.reasons)

    @property
    def drifted(self) -> bool:
        return self.status == DRIFTED

    @property
    def inconclusive(self) -> bool:
        return self.status == INCONCLUSIVE

    @property
    def rate_ratio(self) -> float | None:
        """The old pick's rate now against then, or (not measured tonight) the new pick's against the old's."""
        if self.old_pick_now is not None and self.pick_rate_before:
            return self.old_pick_now / self.pick_rate_before
        if self.pick_rate_before and self.pick_rate_after:
            return self.pick_rate_after / self.pick_rate_before
        return None

    def rate_past(self, threshold: float) -> bool:
        """Past both ``threshold`` and the two readings' noise (NOTE [ Drift ])."""
        return self.rate_ratio is not None and abs(self.rate_ratio - 1) > max(threshold, self.rate_noise or 0.0)

    @property
    def rate_shifted(self) -> bool:
        return any(r.startswith("rate ") for r in self.reasons)

    @property
    def memory_ratio(self) -> float | None:
        if self.memory_per_worker_before is None or self.memory_per_worker_after is None \
                or self.memory_per_worker_before <= 0:
            return None
        return self.memory_per_worker_after / self.memory_per_worker_before

    def to_dict(self) -> dict:
        return {"status": self.status, "changed": self.changed, "reasons": list(self.reasons),
                "previous_path": self.previous_path, "previous_hardware": self.previous_hardware,
                "previous_finished_at": self.previous_finished_at, "same_hardware": self.same_hardware,
                "pick_changed": bool(self.changes),
                "changes": [{"setting": c.setting, "before": c.before, "after": c.after} for c in self.changes],
                "settings_tie": self.settings_tie, "old_pick_now": self.old_pick_now,
                "samples_per_s_before": self.pick_rate_before, "samples_per_s_after": self.pick_rate_after,
                "rate_ratio": self.rate_ratio, "rate_shifted": self.rate_shifted,
                "knee_before": self.knee_before, "knee_after": self.knee_after,
                "memory_per_worker_before": self.memory_per_worker_before,
                "memory_per_worker_after": self.memory_per_worker_after, "memory_ratio": self.memory_ratio,
                "hardware_changes": [{"field": f, "before": b, "after": a} for f, b, a in self.hardware_changes],
                "not_comparable": self.not_comparable, "paired": list(self.paired), "rate_noise": self.rate_noise,
                "inconclusive": self.inconclusive, "load": self.load, "set_aside": list(self.set_aside)}


def compare(previous: StoredResult | None, current: dict, thresholds: Thresholds = Thresholds()) -> Comparison:
    """Tonight's result ``current`` (its stored record: config, rate, trials, finals, hardware,
    load) against ``previous``: NOTE [ Drift ]."""
    load = current.get("load") if isinstance(current.get("load"), dict) else None
    busy = bool(load and load.get("busy"))
    if previous is None:
        return Comparison(INCONCLUSIVE if busy else BASELINE, load=load)
    data = previous.data
    old_config, new_config = previous.tuned.config, LoaderConfig.from_dict(current["config"])
    before, after = old_config.loader_kwargs(), new_config.loader_kwargs()
    changes = tuple(Change(s, before.get(s), after.get(s)) for s in TUNED_SETTINGS if before.get(s) != after.get(s))
    old_hw, new_hw = previous.hardware, current.get("hardware") or {}
    same = old_hw.get("fingerprint") == new_hw.get("fingerprint")
    old_now = rate_of(current, old_config)
    paired = paired_ratios(current, new_config, old_config) if changes else ()
    if not same:   # the old pick was not in tonight's final: the rates stand in, as a burst would
        tie = bool(changes) and old_now is not None and old_now >= (1 - SETTINGS_TIE) * current["samples_per_s"]
    else:
        tie = bool(changes) and not _failed(current, old_config) and not separated(paired)
    differently = previous.measured_differently()
    found = Comparison(
        UNCHANGED, previous_path=previous.where, previous_hardware=old_hw.get("fingerprint"),
        previous_finished_at=previous.finished_at, same_hardware=same, changes=changes, settings_tie=tie,
        old_pick_now=old_now, pick_rate_before=previous.tuned.samples_per_s, pick_rate_after=current.get("samples_per_s"),
        knee_before=_knee(data), knee_after=_knee(current), memory_per_worker_before=memory_per_worker(data),
        memory_per_worker_after=memory_per_worker(current),
        hardware_changes=tuple((f, old_hw.get(f), new_hw.get(f)) for f in HARDWARE_FIELDS
                               if old_hw.get(f) != new_hw.get(f)),
        not_comparable=differently, paired=paired, load=load,
        rate_noise=_noise(current, old_config if old_now is not None else new_config) + _noise(data, old_config))
    reasons = _reasons(found, thresholds)
    if busy:
        return Comparison(**{**found.__dict__, "status": INCONCLUSIVE, "set_aside": reasons})
    status = (DRIFTED if reasons else UNCHANGED) if same else NEW_HARDWARE
    return Comparison(**{**found.__dict__, "status": status, "reasons": reasons})


def paired_ratios(result: dict, new: LoaderConfig, old: LoaderConfig) -> tuple[float, ...]:
    """``new``'s final rate over ``old``'s in each round of ``result``'s final that measured both."""
    def rounds(config: LoaderConfig) -> dict[int, float]:
        for final in result.get("finals") or ():
            if _same(final.get("config"), config) and final.get("rates"):
                rates = final["rates"]
                return dict(zip(final.get("rounds") or range(len(rates)), rates))
        return {}

    mine, theirs = rounds(new), rounds(old)
    return tuple(mine[r] / theirs[r] for r in sorted(mine.keys() & theirs.keys()) if theirs[r] > 0)


def separated(paired: tuple[float, ...], tie: float = SETTINGS_TIE) -> bool:
    """Whether paired rounds show a new pick ahead of the old past the noise: ahead in every round,
    by a median ratio past ``tie`` and past the ratios' own half-range (SINGLE_ROUND_MARGIN for one
    round, which shows no spread). No rounds of both: nothing is shown."""
    if not paired:
        return False
    gap = statistics.median(paired) - 1.0
    spread = (max(paired) - min(paired)) / 2 if len(paired) > 1 else SINGLE_ROUND_MARGIN
    return min(paired) > 1.0 and gap > tie and gap > spread


def _failed(result: dict, config: LoaderConfig) -> bool:
    """``config`` ran here and failed or broke a limit, and never measured."""
    trials = [t for t in result.get("trials") or () if _same(t.get("config"), config)]
    return bool(trials) and all(t.get("status") != "ok" for t in trials) and rate_of(result, config) is None


def _noise(result: dict, config: LoaderConfig) -> float:
    """How far one reading of ``config`` in ``result`` may be off: the spread of its final rounds
    ((max - min) / median), else its best burst's interval, else nothing known (0)."""
    for final in result.get("finals") or ():
        rates = final.get("rates") or []
        if _same(final.get("config"), config) and len(rates) > 1:
            median = statistics.median(rates)
            return (max(rates) - min(rates)) / median if median else 0.0
    intervals = [t.get("rel_interval") for t in result.get("trials") or ()
                 if t.get("status") == "ok" and _same(t.get("config"), config)
                 and isinstance(t.get("rel_interval"), (int, float))]
    return min(intervals) if intervals else 0.0


def _reasons(c: Comparison, thresholds: Thresholds) -> tuple[str, ...]:
    """What in ``c`` went past ``thresholds`` (NOTE [ Drift ])."""
    if c.not_comparable is not None:
        return (f"not comparable: {c.not_comparable}",)
    reasons = []
    if thresholds.pick and c.changes and not c.settings_tie:
        reasons.append("pick changed: " + ", ".join(f"{x.setting} {x.before} -> {x.after}" for x in c.changes))
    if c.rate_past(thresholds.rate):
        reasons.append(f"rate {c.rate_ratio - 1:+.0%} (threshold {thresholds.rate:.0%})")
    if thresholds.knee is not None and c.knee_before is not None and c.knee_after is not None \
            and abs(c.knee_after - c.knee_before) >= thresholds.knee:
        reasons.append(f"knee {c.knee_before} -> {c.knee_after} workers (threshold {thresholds.knee})")
    memory = c.memory_ratio
    if memory is not None and abs(memory - 1) > thresholds.memory_per_worker \
            and abs(c.memory_per_worker_after - c.memory_per_worker_before) > MEMORY_FLOOR:
        reasons.append(f"memory per worker {memory - 1:+.0%} (threshold {thresholds.memory_per_worker:.0%})")
    return tuple(reasons)


def _knee(result: dict) -> int | None:
    knee = result.get("knee")
    return knee.get("stops_paying") if isinstance(knee, dict) else None


def rate_of(result: dict, config: LoaderConfig) -> float | None:
    """``config``'s rate in a stored result: its final median, else its best burst; the node's
    rate on a node (its trials and finals list the slowest rank's: NOTE [ Tuning a node's ranks ])."""
    ranks = (result.get("node") or {}).get("ranks", 1)
    for final in result.get("finals") or ():
        if _same(final.get("config"), config) and final.get("rates"):
            return statistics.median(final["rates"]) * ranks
    bursts = [t.get("samples_per_s") for t in result.get("trials") or ()
              if t.get("status") == "ok" and t.get("samples_per_s") and _same(t.get("config"), config)]
    return max(bursts) * ranks if bursts else None


def _same(data: dict | None, config: LoaderConfig) -> bool:
    try:
        return data is not None and LoaderConfig.from_dict(data) == config
    except (KeyError, TypeError, ValueError):
        return False


def memory_per_worker(result: dict) -> float | None:
    """Bytes of peak memory one more worker costs, by least squares over the measured trials'
    worker counts (the largest peak per count); None (unmeasured) with fewer than two counts or
    a slope that does not rise."""
    peaks: dict[int, float] = {}
    for trial in result.get("trials") or ():
        peak = trial.get("peak_pss_bytes") if isinstance(trial, dict) else None
        if trial.get("status") == "ok" and peak:
            workers = int(trial["config"]["num_workers"])
            peaks[workers] = max(peaks.get(workers, 0.0), float(peak))
    if len(peaks) < 2:
        return None
    xs, ys = list(peaks), list(peaks.values())
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    # A worker costs memory: a slope that does not rise is the allocator's noise, not a figure.
    return slope if slope > 0 else None
