"""Who wins the interleaved final: the cheapest config that ties the best median over the
paired rounds (NOTE [ Paired rounds ] in paired.py); against the rule, where the interval cannot
tell them apart, the cheaper of the two is kept. Pure functions over measured records.

NOTE [ Rounds that disagree ]
A costlier best is clearly better than a cheaper finalist only when it read ahead of it in every
round both ran in; when some round put the cheaper one level or ahead, their median gap is the
rounds' noise, and up to DISAGREE_TIE of it is a tie, which the cheaper config wins. Only between
configs of one kind (``same_kind``): pinning and kept workers change costs a short window may
not show (the epoch restarts), so those still need the narrow tie.

NOTE [ Past the cores ]
More workers than usable CPUs pays only where the workers wait (a disk, a network, a lock). A
pick past the cores stands only where num_workers = CPUs ran in the final beside it and the
paired rounds show the pick faster beyond the noise band (one round: by SINGLE_ROUND_MARGIN);
the search measures that config whenever its pick is past the cores. Otherwise num_workers =
CPUs is the pick (the pick's own settings where those ran). Where it never ran, what it could
read is bounded: k workers' output grows at most in proportion to k, so num_workers = CPUs reads
at most CPUs/k times the best config of k (1 <= k < CPUs) that ran; a pick that read past that
bound by SINGLE_ROUND_MARGIN stands (its workers wait, and more of them pay). Otherwise the choice
is made again among the configs within the cores. A pick past the cores is never handed back
beside a count of workers the run did not measure unless it beat that count's bound.

The final's opening round: the search's own bursts of the finalists, when they were measured
as a final round measures them (``opening_round``).

NOTE [ The opening round ]
A round of the final (NOTE [ Paired rounds ] in paired.py) is the finalists measured one after
the other in one process, seconds apart. The search measures the baseline, the model's pick and
the rule the same way, one after another in the same trial process; where the finalists' bursts
lie that close together they are a round of the final already, the opening one, and the final's
paired comparisons count it (two final rounds then give three pairs). The bursts count only:

* this run's own, measured in full (not a resumed run's stored trials, a pruned or failed burst);
* with no trial between them that ran and did not end well (a crash or a hang restarts the trial
  process, a breach kills its tree);
* within OPENING_SPAN consecutive trials, so the round spans no longer than a final's own;
* two configs at least.

The rule's search burst is never pruned (tuning/run.py). The choice ranks the finalists over
every round, the opening's too (``Finalist.round_median``), so one disturbed final reading does
not decide; a finalist's ``median`` stays its final rounds', which the model was not fitted to.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Sequence

from .policy import (
    DISAGREE_TIE,
    FINAL_TIE,
    KEEPS_UP_TIE,
    MAX_FINALISTS,
    MIN_TOLERANCE,
    SINGLE_ROUND_MARGIN,
    keeps_up_at,
    same_kind,
)
from .codec import Stored, stored
from .paired import EQUIVALENT_WITHIN, Ratio, by_rounds, compared
from .results import CONSTRAINT, OK, TrialResult
from .space import LoaderConfig

# The opening round's key among a finalist's rounds (``Finalist.by_round``).
OPENING_ROUND = -1
# The most consecutive trials an opening round may span: the longest final round's.
OPENING_SPAN = MAX_FINALISTS


@dataclass(frozen=True)
class Finalist(Stored):
    """A config in the final: its rates and the consumer's waits in each round, and the search
    trial that brought it there (None when built from stored figures). ``rounds``: the round of
    each rate, when a failed burst left one out (else 0, 1, 2, ...)."""

    config: LoaderConfig
    rates: tuple[float, ...] = stored((), then=("median",))
    waits: tuple[float, ...] = stored((), then=(("rounds", lambda f: list(f.rounds or range(len(f.rates)))),))
    trial: TrialResult | None = stored(None, read=False, write=False)   # the result's, of its config
    rounds: tuple[int, ...] = stored((), write=False)
    # Its search burst's rate where it opens the final (NOTE [ The opening round ]).
    opening: float | None = stored(None, positive=True, sparse=True)

    def by_round(self) -> dict[int, float]:
        """Each paired round's rate, the opening round (OPENING_ROUND) first."""
        final = dict(zip(self.rounds or range(len(self.rates)), self.rates))
        return {OPENING_ROUND: self.opening, **final} if self.opening else final

    @property
    def median(self) -> float:
        """The median of the final's own rounds (what the report shows)."""
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def round_median(self) -> float:
        """The median over every paired round, the opening's too: what the choice ranks by."""
        rounds = list(self.by_round().values())
        return statistics.median(rounds) if rounds else 0.0

    @property
    def rate(self) -> float | None:
        """Its final median, else its burst."""
        if self.rates:
            return self.median
        return self.trial.samples_per_s if self.trial is not None else None

    @property
    def keeps_up(self) -> bool:
        """NOTE [ Keeping up ] over the rounds' median wait."""
        return bool(self.waits) and keeps_up_at(statistics.median(self.waits))

    @property
    def spread(self) -> float:
        return (max(self.rates) - min(self.rates)) / self.median if len(self.rates) > 1 and self.median else 0.0

    def _read_back(self) -> "Finalist":
        if self.rounds and len(self.rounds) != len(self.rates):
            raise ValueError(f"rounds has {len(self.rounds)} rounds for {len(self.rates)} rates")
        return dataclasses.replace(self, rounds=()) if self.rounds == tuple(range(len(self.rates))) else self


def best_of(history: Sequence[TrialResult], tolerance: float = MIN_TOLERANCE) -> TrialResult | None:
    """The cheapest measured config whose rate is within ``tolerance`` of the best rate."""
    ok = [t for t in history if t.status == OK and t.samples_per_s]
    if not ok:
        return None
    top = max(t.samples_per_s for t in ok)
    within = [t for t in ok if t.samples_per_s >= top * (1.0 - tolerance)]
    return min(within, key=lambda t: t.config.cost())


def choose(finals: Sequence[Finalist], history: Sequence[TrialResult], rule: LoaderConfig | None = None,
           widen: float = 0.0, narrow: frozenset = frozenset(), cpus: int | None = None) -> Finalist:
    """``_choose``'s pick, held within ``cpus`` usable CPUs (None: not held): NOTE [ Past the cores ]."""
    chosen = _choose(finals, history, rule, widen, narrow)
    if cpus is None or chosen.config.num_workers <= cpus or beats_the_cores(chosen, finals, history, cpus):
        return chosen
    cores = chosen.config.replace(num_workers=cpus)
    ran = [f for f in finals if f.config.num_workers == cpus and f.rates]
    if ran:
        return _with_trial(next((f for f in ran if f.config == cores), max(ran, key=lambda f: f.round_median)),
                           history)
    bursts = [t for t in history if t.config.num_workers == cpus and t.status == OK and t.samples_per_s]
    if bursts:
        best = next((t for t in bursts if t.config == cores), max(bursts, key=lambda t: t.samples_per_s))
        return Finalist(best.config, trial=best)
    inside = [f for f in finals if f.config.num_workers <= cpus]
    within = [t for t in history if t.config.num_workers <= cpus]
    if not inside and not any(t.status == OK and t.samples_per_s for t in within):
        return chosen   # nothing within the cores ran: the only measured answer stands
    inside_rule = rule if rule is not None and rule.num_workers <= cpus else None
    return _choose(inside, within, inside_rule, widen, narrow)


def beats_the_cores(chosen: Finalist, finals: Sequence[Finalist], history: Sequence[TrialResult],
                    cpus: int) -> bool:
    """Whether ``chosen`` read faster than num_workers = CPUs beyond the noise (NOTE [ Past the cores ])."""
    rivals = [f for f in finals if f.config.num_workers == cpus and f.rates]
    mine = finalist_of(chosen.config, finals)
    if rivals and mine is not None:
        rival = max(rivals, key=lambda f: f.round_median)
        ratio = paired(mine, rival)
        if ratio is not None and ratio.judged:
            return ratio.faster and not ratio.within()
        return ratio is not None and ratio.ratio > 1.0 + SINGLE_ROUND_MARGIN
    bursts = [t.samples_per_s for t in history
              if t.config.num_workers == cpus and t.status == OK and not t.pruned and t.samples_per_s]
    rate = chosen.rate
    if not bursts:
        bursts = [cores_bound(history, finals, cpus)]   # never ran: what it could read at most
    return bursts[0] is not None and rate is not None and rate > max(bursts) * (1.0 + SINGLE_ROUND_MARGIN)


def cores_bound(history: Sequence[TrialResult], finals: Sequence[Finalist], cpus: int) -> float | None:
    """The most num_workers = CPUs could read, from the best config of 1 <= k < CPUs workers that
    ran, scaled by CPUs/k (NOTE [ Past the cores ]); None where none ran."""
    rates = [(t.config.num_workers, t.samples_per_s) for t in history
             if 1 <= t.config.num_workers < cpus and t.status == OK and not t.pruned and t.samples_per_s]
    rates += [(f.config.num_workers, f.round_median) for f in finals if 1 <= f.config.num_workers < cpus and f.rates]
    return max((rate * cpus / k for k, rate in rates), default=None)


def _choose(finals: Sequence[Finalist], history: Sequence[TrialResult], rule: LoaderConfig | None = None,
            widen: float = 0.0, narrow: frozenset = frozenset()) -> Finalist:
    """The cheapest finalist that ties the best ``round_median``: within FINAL_TIE, KEEPS_UP_TIE
    when both keep up and are of one kind (NOTE [ Keeping up ]), or DISAGREE_TIE when a round put
    it level or ahead (NOTE [ Rounds that disagree ]). Without a final, the cheapest within noise
    of the best burst, or, when the rule was measured, the bursts as a final of one round. One
    round shows no spread: the ``rule`` stands unless another reads SINGLE_ROUND_MARGIN above it.
    ``widen``: how much the ties widen on a busy machine (``MachineLoad.widen``) for a gap some
    round did not show; ``narrow``: configs that tie only within FINAL_TIE (NOTE [ Headroom ])."""
    if not finals:
        ok = [t for t in history if t.status == OK and t.samples_per_s and not t.pruned]
        if rule is None or not any(t.config == rule for t in ok):
            best = best_of(history)
            return Finalist(best.config, trial=best)
        finals = [Finalist(t.config, (t.samples_per_s,), (t.wait_fraction,) if t.wait_fraction is not None else (), t)
                  for t in ok]
    reference = next((f for f in finals if f.config == rule), None)
    if reference is not None and min(len(f.by_round()) for f in finals) < 2:
        clear = [f for f in finals if f.median > reference.median * (1.0 + SINGLE_ROUND_MARGIN)]
        chosen = max(clear, key=lambda f: f.median) if clear else reference
        return _with_trial(chosen, history)
    median = {f.config: f.round_median for f in finals}
    best = max(finals, key=lambda f: median[f.config])

    def ties(final: Finalist) -> bool:
        mine, top = median[final.config], median[best.config]
        if mine >= top * (1.0 - FINAL_TIE):
            return True
        disagree = not ahead_every_round(best, final)
        if disagree and mine >= top * (1.0 - (FINAL_TIE + widen)):
            return True
        if final.config in narrow or not same_kind(final.config, best.config):
            return False
        if final.keeps_up and best.keeps_up and mine >= top * (1.0 - KEEPS_UP_TIE):
            return True
        return disagree and mine >= top * (1.0 - (DISAGREE_TIE + widen))

    chosen = min((f for f in finals if ties(f)), key=lambda f: f.config.cost())
    return _with_trial(cheaper_if_unsure(chosen, reference), history)


def cheaper_if_unsure(chosen: Finalist, rule: Finalist | None) -> Finalist:
    """The rule's config in place of a costlier ``chosen`` not shown faster beyond the noise band
    (NOTE [ Sure enough ] in paired.py)."""
    if rule is None or chosen.config == rule.config or rule.config.cost() >= chosen.config.cost():
        return chosen
    return rule if _unsure(paired(chosen, rule)) else chosen


def paired(a: Finalist | None, b: Finalist | None) -> Ratio | None:
    """``a``'s rate over ``b``'s on the rounds both ran in (NOTE [ Paired rounds ]); None if none."""
    if a is None or b is None or not a.rates or not b.rates:
        return None
    return by_rounds(a.by_round(), b.by_round())


def finalist_of(config: LoaderConfig | None, finals: Sequence[Finalist]) -> Finalist | None:
    return next((f for f in finals if f.config == config and f.rates), None) if config is not None else None


def challenger(finals: Sequence[Finalist], rule: LoaderConfig | None) -> Finalist | None:
    """The finalist that decides a pick equal to the rule: the best of the others."""
    others = [f for f in finals if f.config != rule and f.rates]
    return max(others, key=lambda f: f.round_median) if others else None


def rule_settled(finals: Sequence[Finalist], pick: LoaderConfig, rule: LoaderConfig | None,
                 band: float = EQUIVALENT_WITHIN) -> bool:
    """Whether the final's rounds settle the pick against the rule (NOTE [ Sure enough ]); for a
    pick that is the rule, no gap in the challenger's favour is left."""
    rule_final = finalist_of(rule, finals)
    if rule_final is None:
        return False
    if pick == rule:
        best = challenger(finals, rule)
        ratio = paired(best, rule_final)
        return best is None or (ratio is not None and (ratio.slower or ratio.within(band)))
    ratio = paired(finalist_of(pick, finals), rule_final)
    return ratio is not None and ratio.settled(band)


def rule_verdict(pick: LoaderConfig, rule: LoaderConfig | None, finals: Sequence[Finalist],
                 history: Sequence[TrialResult] = ()) -> str:
    """The sentence the pick's paired rounds with the rule support (paired.compared), and which
    was kept when they could not be told apart; ``history``: the bursts, for a run with no final."""
    if rule is None:
        return "not measured against the rule: this search holds no rule"
    rule_final = finalist_of(rule, finals)
    if pick == rule:
        best = challenger(finals, rule)
        if rule_final is None or best is None:
            return "the pick is the rule's config: no final between a pick and itself"
        ratio = paired(best, rule_final)
        if ratio is None or not ratio.judged:
            read = f" and read {ratio.ratio:.2f}x of it" if ratio is not None else ""
            return f"the pick is the rule's config; {best.config.key} met it in one round{read}: not judged"
        tie = ratio.within() or not (ratio.faster or ratio.slower)
        kept = ": the cheaper of the two kept" if tie and rule.cost() <= best.config.cost() else ""
        return f"the pick is the rule's config; {best.config.key} was {compared(ratio, 'it')}{kept}"
    ratio = paired(finalist_of(pick, finals), rule_final)
    if ratio is None:
        burst = lambda c: any(t.config == c and t.status == OK and not t.pruned for t in history)  # noqa: E731
        if not finals and burst(pick) and burst(rule):
            return "one round against the rule (the search's bursts; no final): not judged"
        return "not paired with the rule: no round of the final measured both"
    kept = ": the cheaper of the two kept" if _unsure(ratio) and pick.cost() <= rule.cost() else ""
    return compared(ratio, "the rule") + kept


def _unsure(ratio: Ratio | None) -> bool:
    """Judged, and no gap beyond the noise band in the pick's favour."""
    return ratio is not None and ratio.judged and (not ratio.faster or ratio.within())


def ahead_every_round(a: Finalist, b: Finalist) -> bool:
    """Whether ``a`` read above ``b`` in every round both ran in (NOTE [ Rounds that disagree ])."""
    mine, theirs = a.by_round(), b.by_round()
    shared = mine.keys() & theirs.keys()
    return bool(shared) and all(mine[r] > theirs[r] for r in shared)


def _with_trial(chosen: Finalist, history: Sequence[TrialResult]) -> Finalist:
    if chosen.trial is None:
        trial = next((t for t in history if t.config == chosen.config and t.status == OK), None)
        chosen = dataclasses.replace(chosen, trial=trial)
    return chosen


def rate_here(config: LoaderConfig, finals: Sequence[Finalist], history: Sequence[TrialResult]) -> float | None:
    """``config``'s rate in this run: its final median, else its best burst; None if not measured."""
    final = next((f.median for f in finals if f.config == config and f.rates), None)
    if final:
        return final
    bursts = [t.samples_per_s for t in history if t.config == config and t.status == OK and t.samples_per_s]
    return max(bursts) if bursts else None


# NOTE [ A provisional pick ]
# A pick is judged when it met the rule in an interleaved final on a machine the others left
# alone. One measured on a busy machine, or that never reached a final, is not: it is stored
# provisional, saying why (``provisional_reason``), every place that hands it out says so in one
# line, and the loader handed out is the better-measured of the pick and the rule (``handed_out``):
# a costlier pick only where its rounds with the rule, or its burst's interval against the
# rule's, put it ahead past the noise. A later call on a machine no longer busy tunes again.


def provisional_reason(pick: LoaderConfig, finals: Sequence[Finalist], busy: bool, others_cpus: float | None,
                       cpus: float, hint: str | None = None) -> str | None:
    """Why the pick is not judged (NOTE [ A provisional pick ]), or None when it is; ``hint``:
    what would judge it (a budget)."""
    why = []
    if busy:
        used = f": other processes used {others_cpus:.1f} of {cpus:g} CPUs" if others_cpus is not None else ""
        why.append(f"measured on a busy machine{used}")
    if finalist_of(pick, finals) is None:
        why.append("no final: its rate is one burst's")
    if not why:
        return None
    return "; ".join(why) + (f"; {hint}" if hint else "")


def handed_out(pick: LoaderConfig, rule: LoaderConfig | None, finals: Sequence[Finalist],
               history: Sequence[TrialResult]) -> LoaderConfig:
    """The config a provisional result hands out (NOTE [ A provisional pick ])."""
    if rule is None or pick == rule or pick.cost() <= rule.cost() or rate_here(rule, finals, history) is None:
        return pick
    ratio = paired(finalist_of(pick, finals), finalist_of(rule, finals))
    if ratio is not None and ratio.judged:
        return pick if ratio.faster else rule
    mine, theirs = _best_burst(pick, history), _best_burst(rule, history)
    if mine is None or theirs is None or mine.rel_interval is None or theirs.rel_interval is None:
        return rule
    lo = mine.samples_per_s * (1 - mine.rel_interval)
    return pick if lo > theirs.samples_per_s * (1 + theirs.rel_interval) else rule


def _best_burst(config: LoaderConfig, history: Sequence[TrialResult]) -> TrialResult | None:
    bursts = [t for t in history if t.config == config and t.status == OK and t.samples_per_s and not t.pruned]
    return max(bursts, key=lambda t: t.samples_per_s) if bursts else None


def _reading(trial: TrialResult) -> bool:
    return trial.status == OK and bool(trial.samples_per_s) and trial.samples_per_s > 0 and not trial.pruned


def _ran_badly(trial: TrialResult) -> bool:
    """A trial that ran and did not end well (one predicted past memory did not run)."""
    return trial.status != OK and not (trial.status == CONSTRAINT and trial.cause == "predicted_memory")


def opening_round(history: Sequence[TrialResult], configs: Sequence[LoaderConfig],
                  own_from: int = 0) -> dict[LoaderConfig, TrialResult]:
    """The bursts of ``configs`` in ``history[own_from:]`` (this run's) that make the opening round:
    the largest such set, the latest of equals; {} when fewer than two qualify."""
    wanted = set(configs)
    own = list(history[own_from:])
    best: dict[LoaderConfig, TrialResult] = {}
    for first in range(len(own)):
        found: dict[LoaderConfig, TrialResult] = {}
        for trial in own[first:first + OPENING_SPAN]:
            if _ran_badly(trial):
                break
            if trial.config in wanted and _reading(trial):
                found[trial.config] = trial
        if len(found) >= 2 and len(found) >= len(best):
            best = found
    return best
