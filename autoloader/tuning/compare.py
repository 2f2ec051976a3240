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

import math
import statistics

from ..search.choice import Finalist
from ..search.policy import MEMORY_FLOOR, SETTINGS_TIE, SINGLE_ROUND_MARGIN, Thresholds
from ..search.results import OK
from ..search.space import TUNED_SETTINGS, LoaderConfig
from ..store.comparison import BASELINE, DRIFTED, INCONCLUSIVE, NEW_HARDWARE, UNCHANGED, Change, Comparison
from ..store.result import TuneResult

__all__ = ["BASELINE", "DRIFTED", "INCONCLUSIVE", "NEW_HARDWARE", "UNCHANGED", "Change", "Comparison", "compare"]
HARDWARE_FIELDS = ("cpus", "cpu_model", "memory_gib", "gpus")


def compare(previous: TuneResult | None, current: TuneResult, thresholds: Thresholds = Thresholds()) -> Comparison:
    """Tonight's result ``current`` against ``previous`` (a stored result, or a run's mark):
    NOTE [ Drift ]."""
    load, busy = current.load, current.busy
    if previous is None:
        return Comparison(INCONCLUSIVE if busy else BASELINE, load=load)
    old_config, new_config = previous.config, current.config
    before, after = old_config.loader_kwargs(), new_config.loader_kwargs()
    changes = tuple(Change(s, before.get(s), after.get(s)) for s in TUNED_SETTINGS if before.get(s) != after.get(s))
    old_hw, new_hw = previous.hardware, current.hardware
    same = old_hw.fingerprint == new_hw.fingerprint
    old_now = rate_of(current, old_config)
    paired = paired_ratios(current, new_config, old_config) if changes else ()
    if not same:   # the old pick was not in tonight's final: the rates stand in, as a burst would
        tie = bool(changes) and old_now is not None and old_now >= (1 - SETTINGS_TIE) * current.samples_per_s
    else:
        tie = bool(changes) and not _failed(current, old_config) and not separated(paired)
    found = Comparison(
        UNCHANGED, previous_path=previous.where, previous_hardware=old_hw.fingerprint,
        previous_finished_at=previous.finished_at, same_hardware=same, changes=changes, settings_tie=tie,
        old_pick_now=old_now, pick_rate_before=previous.samples_per_s, pick_rate_after=current.samples_per_s,
        knee_before=_knee(previous), knee_after=_knee(current), memory_per_worker_before=memory_per_worker(previous),
        memory_per_worker_after=memory_per_worker(current),
        hardware_changes=tuple((f, getattr(old_hw, f), getattr(new_hw, f)) for f in HARDWARE_FIELDS
                               if getattr(old_hw, f) != getattr(new_hw, f)),
        not_comparable=previous.measured_differently(), paired=paired, load=load,
        rate_noise=_noise(current, old_config if old_now is not None else new_config) + _noise(previous, old_config))
    reasons = _reasons(found, thresholds)
    if busy:
        return Comparison(**{**found.__dict__, "status": INCONCLUSIVE, "set_aside": reasons})
    status = (DRIFTED if reasons else UNCHANGED) if same else NEW_HARDWARE
    return Comparison(**{**found.__dict__, "status": status, "reasons": reasons})


def _final_of(result: TuneResult, config: LoaderConfig) -> Finalist | None:
    """``config``'s finalist in ``result`` with its rates, if it had one."""
    return next((f for f in result.finals if f.config == config and f.rates), None)


def paired_ratios(result: TuneResult, new: LoaderConfig, old: LoaderConfig) -> tuple[float, ...]:
    """``new``'s final rate over ``old``'s in each round of ``result``'s final that measured both."""
    def rounds(config: LoaderConfig) -> dict[int, float]:
        final = _final_of(result, config)
        return final.by_round() if final is not None else {}

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


def _failed(result: TuneResult, config: LoaderConfig) -> bool:
    """``config`` ran here and failed or broke a limit, and never measured."""
    trials = [t for t in result.trials if t.config == config]
    return bool(trials) and all(t.status != OK for t in trials) and rate_of(result, config) is None


def _noise(result: TuneResult, config: LoaderConfig) -> float:
    """How far one reading of ``config`` in ``result`` may be off: the spread of its final rounds
    ((max - min) / median), else its best burst's interval, else nothing known (0). An interval
    that could not be estimated (a pruned burst's, infinite) says nothing."""
    for final in result.finals:
        if final.config == config and len(final.rates) > 1:
            median = statistics.median(final.rates)
            return (max(final.rates) - min(final.rates)) / median if median else 0.0
    intervals = [t.rel_interval for t in result.trials if t.status == OK and t.config == config
                 and t.rel_interval is not None and math.isfinite(t.rel_interval)]
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


def _knee(result: TuneResult) -> int | None:
    return result.knee.stops_paying if result.knee is not None else None


def rate_of(result: TuneResult, config: LoaderConfig) -> float | None:
    """``config``'s rate in a result: its final median, else its best burst; the node's rate on a
    node (its trials and finals list the slowest rank's: NOTE [ Tuning a node's ranks ])."""
    final = _final_of(result, config)
    if final is not None:
        return final.median * result.ranks
    bursts = [t.samples_per_s for t in result.trials if t.status == OK and t.samples_per_s and t.config == config]
    return max(bursts) * result.ranks if bursts else None


def memory_per_worker(result: TuneResult) -> float | None:
    """Bytes of peak memory one more worker costs, by least squares over the measured trials'
    worker counts (the largest peak per count); None (unmeasured) with fewer than two counts or
    a slope that does not rise."""
    peaks: dict[int, float] = {}
    for trial in result.trials:
        if trial.status == OK and trial.peak_pss_bytes:
            workers = trial.config.num_workers
            peaks[workers] = max(peaks.get(workers, 0.0), float(trial.peak_pss_bytes))
    if len(peaks) < 2:
        return None
    xs, ys = list(peaks), list(peaks.values())
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    # A worker costs memory: a slope that does not rise is the allocator's noise, not a figure.
    return slope if slope > 0 else None
