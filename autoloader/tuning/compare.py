"""What changed since the previous result of the same problem: the question a nightly re-tune asks.

``tune --fail-if-changed`` and ``retune`` ask it alike: the previous result is
``store.history.previous``'s, read before this run's replaces it.

# NOTE [ Drift ]
# A nightly re-tune asks whether the loader the training jobs use is still the right one. From
# the previous result and tonight's, both as stored, each question answered by a 95% interval
# (search/paired.py), never by a point reading against its own noise:
#  * the old pick's rate now against then: the warm start measures it first and the final
#    re-measures it beside the new pick (tuning/final.py), so this is one config read in two runs
#    (when tonight did not measure it, the new pick's readings stand in). The interval of now over
#    then (``runs_ratio``: the two runs' readings, one spread pooled from both) decides: wholly
#    outside the band 1 +- Thresholds.rate, a change; wholly inside it, unchanged; across an edge,
#    the final adds paired rounds of the old pick and the best other finalist while the budget
#    holds them (Final.settle, at most SETTLE_ROUNDS), and a run that still straddles is
#    INCONCLUSIVE, its interval said (``undecided``). A dataset twice as slow reads ~x0.5, far
#    outside the band, however noisy one round is: a few rounds bound it;
#  * the pick: which settings changed, and whether tonight's paired rounds separate the new pick
#    from the old: the interval of new over old (``paired_bounds``) wholly above 1 + SETTINGS_TIE
#    is a change; any other is a tie, reported as unchanged (the old pick is within the noise of
#    the new, so the loader in use is still as good); an old pick that failed here is a change;
#  * the knee (the fewest workers within noise of the best) and the memory one more worker
#    costs (the slope of the trials' peak memory over their worker counts, where at least two
#    counts were measured and it is positive: a falling slope is the allocator's noise, so it is
#    unmeasured; a change under MEMORY_FLOOR is noise);
#  * the hardware fields that differ, when the previous result came from other hardware.
# Past a threshold is a reason. On this hardware any reason means the dataset drifted (a reason
# wins over a rate that straddles); from other hardware the reasons are reported (``changed``,
# which --fail-if-changed exits on) but the status is "new hardware", never "drifted" (retune's
# exit 3 is for this machine's own drift). The knee, a point of the strategy's own (modelled)
# worker curve, is judged only when the thresholds ask. Figures measured in another measurement
# format (NOTE [ Measurement format ] in store/versions.py) cannot be compared: that is said, and
# is a reason, since nothing can be said to be unchanged.
# Tonight's run measured on a busy machine (NOTE [ Others on the machine ] in search/results.py) is
# inconclusive, whatever it found: its figures are what the machine gave beside the others. What
# went past a threshold is kept as ``set_aside`` for the report. An inconclusive result, busy or
# undecided, is marked so that no later run compares with it (TuneResult.conclusive,
# store/history.previous): the next run compares with the last conclusive one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ..search.choice import Finalist
from ..search.paired import STRADDLES, against_band, paired_bounds, runs_ratio
from ..search.policy import MEMORY_FLOOR, SETTINGS_TIE, Thresholds
from ..search.results import OK
from ..search.space import TUNED_SETTINGS, LoaderConfig
from ..store.records import BASELINE, DRIFTED, INCONCLUSIVE, NEW_HARDWARE, UNCHANGED, Change, Comparison
from ..store.result import TuneResult

__all__ = ["BASELINE", "DRIFTED", "INCONCLUSIVE", "NEW_HARDWARE", "UNCHANGED", "Change", "Comparison", "compare",
           "settled"]
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
    pick_interval = _finite(paired_bounds(paired, (1.0,) * len(paired))[1:]) if paired else None
    if not same:   # the old pick was not in tonight's final: the rates stand in, as a burst would
        tie = bool(changes) and old_now is not None and old_now >= (1 - SETTINGS_TIE) * current.samples_per_s
    else:
        tie = bool(changes) and not _failed(current, old_config) and not separated(pick_interval)
    now = readings(current, old_config if old_now is not None else new_config)
    then = readings(previous, old_config)
    interval = _finite(runs_ratio(now, then)[1:]) if now and then else None
    found = Comparison(
        UNCHANGED, previous_path=previous.where, previous_hardware=old_hw.fingerprint,
        previous_finished_at=previous.finished_at, same_hardware=same, changes=changes, settings_tie=tie,
        old_pick_now=old_now, pick_rate_before=previous.samples_per_s, pick_rate_after=current.samples_per_s,
        knee_before=_knee(previous), knee_after=_knee(current), memory_per_worker_before=memory_per_worker(previous),
        memory_per_worker_after=memory_per_worker(current),
        hardware_changes=tuple((f, getattr(old_hw, f), getattr(new_hw, f)) for f in HARDWARE_FIELDS
                               if getattr(old_hw, f) != getattr(new_hw, f)),
        not_comparable=previous.measured_differently(), paired=paired, load=load,
        rate_noise=_half_width(interval), rate_interval=interval, pick_interval=pick_interval,
        rounds=len(now))
    reasons = _reasons(found, thresholds)
    if busy:
        return Comparison(**{**found.__dict__, "status": INCONCLUSIVE, "set_aside": reasons,
                             "undecided": "measured on a busy machine"})
    if same and not reasons and found.rate_against(thresholds.rate) == STRADDLES:
        return Comparison(**{**found.__dict__, "status": INCONCLUSIVE, "undecided": _straddles(found, thresholds)})
    status = (DRIFTED if reasons else UNCHANGED) if same else NEW_HARDWARE
    return Comparison(**{**found.__dict__, "status": status, "reasons": reasons})


def readings(result: TuneResult, config: LoaderConfig) -> tuple[float, ...]:
    """``config``'s readings in ``result`` at the node's rate: its final rounds and its bursts (one
    protocol of windows), else, for the result's pick, its stored rate; else none."""
    final = _final_of(result, config)
    rates = (list(final.rates) if final is not None else []) + _bursts(result, config)
    if not rates and config == result.config and result.samples_per_s:
        return (result.samples_per_s,)
    return tuple(r * result.ranks for r in rates if r > 0)


def settled(previous: TuneResult, finals: Sequence[Finalist], old: LoaderConfig, ranks: int,
            thresholds: Thresholds) -> bool:
    """Whether tonight's final so far decides the comparison with ``previous`` (NOTE [ Drift ]):
    ``old``'s rate now over then is wholly inside or outside the band, and, where the best other
    finalist reads ahead of ``old``, their paired interval is clear of the tie's edge."""
    mine = next((f for f in finals if f.config == old and f.rates), None)
    then = readings(previous, old)
    if mine is None or not then:
        return True
    bursts = [mine.trial.samples_per_s] if mine.trial is not None and mine.trial.samples_per_s else []
    _, lo, hi = runs_ratio([r * ranks for r in list(mine.rates) + bursts], then)
    if against_band(lo, hi, thresholds.rate) == STRADDLES:
        return False
    # Ranked as the choice ranks them: over every paired round (Finalist.round_median).
    others = sorted((f for f in finals if f.config != old and f.rates), key=lambda f: -f.round_median)
    if not thresholds.pick or not others or others[0].round_median <= mine.round_median:
        return True
    theirs, ours = others[0].by_round(), mine.by_round()
    common = sorted(theirs.keys() & ours.keys())
    if not common:
        return True
    _, lo, hi = paired_bounds([theirs[r] for r in common], [ours[r] for r in common])
    return against_band(lo, hi, SETTINGS_TIE) != STRADDLES


def _finite(pair: tuple[float, float]) -> tuple[float, float] | None:
    return pair if all(0 < x < math.inf for x in pair) else None


def _half_width(interval: tuple[float, float] | None) -> float | None:
    """An interval's half-width as a share of its centre (the geometric mean of its ends)."""
    if interval is None:
        return None
    lo, hi = interval
    return (hi - lo) / 2 / math.sqrt(lo * hi)


def _straddles(c: Comparison, thresholds: Thresholds) -> str:
    band = f"{1 - thresholds.rate:.2f}-{1 + thresholds.rate:.2f}"
    if c.rate_interval is None:
        return (f"the old pick's rate now over then reads x{c.rate_ratio:.2f} from {c.rounds} reading(s) tonight, "
                f"too few to bound it against the threshold band {band}")
    lo, hi = c.rate_interval
    return (f"the old pick's rate now over then reads x{c.rate_ratio:.2f}, 95% interval {lo:.2f}-{hi:.2f} "
            f"(noise +-{c.rate_noise:.0%}, {c.rounds} readings tonight), across the threshold band {band}: "
            "neither changed nor unchanged; a longer --budget gives the final more rounds")


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


def separated(interval: tuple[float, float] | None, tie: float = SETTINGS_TIE) -> bool:
    """Whether the 95% interval of new over old lies wholly above 1 + ``tie`` (None: too few rounds)."""
    return interval is not None and interval[0] > 1.0 + tie


def _failed(result: TuneResult, config: LoaderConfig) -> bool:
    """``config`` ran here and failed or broke a limit, and never measured."""
    trials = [t for t in result.trials if t.config == config]
    return bool(trials) and all(t.status != OK for t in trials) and rate_of(result, config) is None


def _reasons(c: Comparison, thresholds: Thresholds) -> tuple[str, ...]:
    """What in ``c`` went past ``thresholds`` (NOTE [ Drift ])."""
    if c.not_comparable is not None:
        return (f"not comparable: {c.not_comparable}",)
    reasons = []
    if thresholds.pick and c.changes and not c.settings_tie:
        reasons.append("pick changed: " + ", ".join(f"{x.setting} {x.before} -> {x.after}" for x in c.changes))
    # From other hardware the rates are one reading each more often than not (the old pick was in
    # no final here): the point reading against the threshold is reported, as information.
    elsewhere = not c.same_hardware and c.rate_interval is None and c.rate_ratio is not None \
        and abs(c.rate_ratio - 1) > thresholds.rate
    if c.rate_past(thresholds.rate) or elsewhere:
        interval = f", 95% interval {c.rate_interval[0] - 1:+.0%}...{c.rate_interval[1] - 1:+.0%}" if c.rate_interval else ""
        reasons.append(f"rate {c.rate_ratio - 1:+.0%}{interval} (threshold {thresholds.rate:.0%})")
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
    bursts = _bursts(result, config)
    return max(bursts) * result.ranks if bursts else None


def _bursts(result: TuneResult, config: LoaderConfig) -> list[float]:
    return [t.samples_per_s for t in result.trials if t.status == OK and t.samples_per_s and t.config == config]


def memory_per_worker(result: TuneResult) -> float | None:
    """Bytes of peak memory one more worker costs, by least squares over the measured trials'
    worker counts (the largest peak per count); None with fewer than two counts."""
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
