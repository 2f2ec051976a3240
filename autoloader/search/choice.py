"""Who wins the interleaved final.

The final re-measures the few configs the search put forward (model_first.py), the rule among
them, in one process, interleaved (A B C A B C ...), so drift hits them alike; the pick is the
cheapest config that ties the best median over the paired rounds. Pure functions over measured
records.

The pick against the rule is judged on their paired rounds (NOTE [ Paired rounds ] in
paired.py): where the interval cannot tell them apart, the cheaper of the two is kept.

NOTE [ Rounds that disagree ]
Interleaving makes each round a paired comparison: the finalists of one round ran seconds apart,
under the same drift. A costlier best is clearly better than a cheaper finalist only when it read
ahead of it in every round it has with it; when some round put the cheaper one level or ahead,
their median gap is the rounds' noise, and up to DISAGREE_TIE of it is a tie, which the cheaper
config wins. Only between configs of one kind (``same_kind``): pinning and kept workers change
costs a short window may not show (the epoch restarts), so those still need the narrow tie.

NOTE [ Past the cores ]
More workers than usable CPUs pays only where the workers wait (on a disk, a network, a lock):
for CPU-bound samples they share the cores and add their start and their copies. A pick past the
cores therefore stands only where num_workers = CPUs ran in the final beside it and the paired
rounds show the pick faster beyond the noise band (one round: more than SINGLE_ROUND_MARGIN
above it); the search measures that config whenever its pick is past the cores
(model_first.py). Otherwise num_workers = CPUs is the pick (the pick's own settings where those
ran); where it never ran (it failed, or no time was left), the choice is made again among the
configs within the cores that ran, the same rule on them. A pick past the cores is never handed
back beside a count of workers the run did not measure.
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
    MIN_TOLERANCE,
    SINGLE_ROUND_MARGIN,
    keeps_up_at,
    same_kind,
)
from .codec import Stored, stored
from .opening import OPENING_ROUND
from .paired import EQUIVALENT_WITHIN, Ratio, by_rounds, compared
from .results import OK, TrialResult
from .space import LoaderConfig


@dataclass(frozen=True)
class Finalist(Stored):
    """A config in the final: its rates and the consumer's waits in each round, and the search
    trial that brought it there (None only when built from stored figures alone). ``rounds``:
    the round each rate is from, when a failed burst left a round out (else rates are rounds
    0, 1, 2, ...)."""

    config: LoaderConfig
    rates: tuple[float, ...] = stored((), then=("median",))
    # The consumer's wait fraction in each round. Stored with the rounds, the final's own, one a
    # rate (0, 1, 2... where none was left out).
    waits: tuple[float, ...] = stored((), then=(("rounds", lambda f: list(f.rounds or range(len(f.rates)))),))
    trial: TrialResult | None = stored(None, read=False, write=False)   # the result's, of its config
    rounds: tuple[int, ...] = stored((), write=False)
    # Its search burst's rate when that burst is part of the final's opening round (NOTE [ The
    # opening round ] in opening.py): a round of the pairs and of the choice's ranking
    # (``round_median``), not of ``median``.
    opening: float | None = stored(None, positive=True, sparse=True)

    def by_round(self) -> dict[int, float]:
        """Each paired round's rate, the opening round (OPENING_ROUND) first where there is one."""
        final = dict(zip(self.rounds or range(len(self.rates)), self.rates))
        return {OPENING_ROUND: self.opening, **final} if self.opening else final

    @property
    def median(self) -> float:
        """The median of the final's own rounds: what the report shows, and what the model's
        predictions are checked against (readings the bursts did not fit it to)."""
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def round_median(self) -> float:
        """The median over every paired round, the opening's too: what the choice ranks by
        (NOTE [ The opening round ] in opening.py)."""
        rounds = list(self.by_round().values())
        return statistics.median(rounds) if rounds else 0.0

    @property
    def rate(self) -> float | None:
        """The best figure this run has for the config: its final median, else its burst."""
        if self.rates:
            return self.median
        return self.trial.samples_per_s if self.trial is not None else None

    @property
    def keeps_up(self) -> bool:
        """The consumer's median wait in the rounds is at most KEEPS_UP_WAIT: NOTE [ Keeping up ]."""
        return bool(self.waits) and keeps_up_at(statistics.median(self.waits))

    @property
    def spread(self) -> float:
        return (max(self.rates) - min(self.rates)) / self.median if len(self.rates) > 1 and self.median else 0.0

    def _read_back(self) -> "Finalist":
        """Rounds stored as 0, 1, 2... are the default, read as such."""
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
    """``_choose``'s pick, held within ``cpus`` usable CPUs (None: not held) unless it beat
    num_workers = CPUs past the noise (NOTE [ Past the cores ])."""
    chosen = _choose(finals, history, rule, widen, narrow)
    if cpus is None or chosen.config.num_workers <= cpus or beats_the_cores(chosen, finals, history, cpus):
        return chosen
    # num_workers = CPUs, where it ran: the pick's own settings first, then the best-read.
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
    """Whether ``chosen`` (past the cores) read faster than num_workers = CPUs beyond the noise:
    on their paired rounds, the interval above 1 and not inside the band; on one round or the
    bursts alone, past SINGLE_ROUND_MARGIN (NOTE [ Past the cores ])."""
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
    return bool(bursts) and rate is not None and rate > max(bursts) * (1.0 + SINGLE_ROUND_MARGIN)


def _choose(finals: Sequence[Finalist], history: Sequence[TrialResult], rule: LoaderConfig | None = None,
            widen: float = 0.0, narrow: frozenset = frozenset()) -> Finalist:
    """The cheapest finalist that ties the best median over the paired rounds (the opening's
    too: ``Finalist.round_median``): within FINAL_TIE, within KEEPS_UP_TIE
    when both keep up and are of one kind (NOTE [ Keeping up ]), or within DISAGREE_TIE when a
    round put it level with the best or ahead (NOTE [ Rounds that disagree ]). Without a final,
    the cheapest config within noise of the best burst, or, when the rule was measured, the
    bursts taken as a final of one round.

    ``rule``: the config the tuner replaces, when the final measured it. A final of a single
    round shows no spread, so nothing in it can be told from noise: the rule stands unless
    another finalist reads more than SINGLE_ROUND_MARGIN above it.

    ``widen``: how much the ties widen on a busy machine (``MachineLoad.widen``, LOAD_TIE a share
    of the CPUs others took: NOTE [ Others on the machine ] in load.py), for a gap that some round
    did not show: one that every round shows is no noise, however busy the machine.
    ``narrow``: configs that tie only within FINAL_TIE (NOTE [ Headroom ] in model_first.py)."""
    if not finals:
        ok = [t for t in history if t.status == OK and t.samples_per_s and not t.pruned]
        if rule is None or not any(t.config == rule for t in ok):
            best = best_of(history)
            return Finalist(best.config, trial=best)
        # No time was left for a final: the bursts are one round, the rule among them.
        finals = [Finalist(t.config, (t.samples_per_s,), (t.wait_fraction,) if t.wait_fraction is not None else (), t)
                  for t in ok]
    reference = next((f for f in finals if f.config == rule), None)
    # One paired round shows no spread (the opening round counts: NOTE [ The opening round ]).
    if reference is not None and min(len(f.by_round()) for f in finals) < 2:
        clear = [f for f in finals if f.median > reference.median * (1.0 + SINGLE_ROUND_MARGIN)]
        chosen = max(clear, key=lambda f: f.median) if clear else reference
        return _with_trial(chosen, history)
    # Ranked over every paired round, the opening's too: with two final rounds a median of the
    # final alone is their mean, which one disturbed reading decides (NOTE [ The opening round ]).
    median = {f.config: f.round_median for f in finals}
    best = max(finals, key=lambda f: median[f.config])

    def ties(final: Finalist) -> bool:
        mine, top = median[final.config], median[best.config]
        if mine >= top * (1.0 - FINAL_TIE):
            return True
        # A busy machine's noise ties only a gap the rounds do not all show.
        disagree = not ahead_every_round(best, final)
        if disagree and mine >= top * (1.0 - (FINAL_TIE + widen)):
            return True
        if final.config in narrow or not same_kind(final.config, best.config):
            return False
        # Both keep up: only then is the gap the consumer's noise, not a loader that lags.
        if final.keeps_up and best.keeps_up and mine >= top * (1.0 - KEEPS_UP_TIE):
            return True
        return disagree and mine >= top * (1.0 - (DISAGREE_TIE + widen))

    chosen = min((f for f in finals if ties(f)), key=lambda f: f.config.cost())
    return _with_trial(cheaper_if_unsure(chosen, reference), history)


def cheaper_if_unsure(chosen: Finalist, rule: Finalist | None) -> Finalist:
    """The rule's config in place of a costlier ``chosen`` whose paired rounds with it do not
    show it faster beyond the noise band (its interval reaches 1, or lies inside the band):
    nothing measured supports paying more (NOTE [ Sure enough ] in paired.py). One round is not
    judged: SINGLE_ROUND_MARGIN decides."""
    if rule is None or chosen.config == rule.config or rule.config.cost() >= chosen.config.cost():
        return chosen
    return rule if _unsure(paired(chosen, rule)) else chosen


def paired(a: Finalist | None, b: Finalist | None) -> Ratio | None:
    """``a``'s rate over ``b``'s on the final's rounds both were measured in, with its interval
    (NOTE [ Paired rounds ] in paired.py); None when they share no round."""
    if a is None or b is None or not a.rates or not b.rates:
        return None
    return by_rounds(a.by_round(), b.by_round())


def finalist_of(config: LoaderConfig | None, finals: Sequence[Finalist]) -> Finalist | None:
    return next((f for f in finals if f.config == config and f.rates), None) if config is not None else None


def challenger(finals: Sequence[Finalist], rule: LoaderConfig | None) -> Finalist | None:
    """The finalist that decides a pick equal to the rule: the best of the others over the
    paired rounds (``Finalist.round_median``, as the choice ranks them)."""
    others = [f for f in finals if f.config != rule and f.rates]
    return max(others, key=lambda f: f.round_median) if others else None


def rule_settled(finals: Sequence[Finalist], pick: LoaderConfig, rule: LoaderConfig | None,
                 band: float = EQUIVALENT_WITHIN) -> bool:
    """Whether the final's rounds settle the pick against the rule (NOTE [ Sure enough ]): the
    pick's interval over the rule excludes 1 or lies inside the band; for a pick that is the
    rule, the challenger's interval lies below 1 or inside the band (no gap in its favour left)."""
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
    of the two was kept when they could not be told apart. ``history``: the search's bursts, for
    a run with no final where both were burst (NOTE [ A final that can settle ] in tuning/final.py)."""
    if rule is None:
        return "not measured against the rule: this search holds no rule"
    rule_final = finalist_of(rule, finals)
    if pick == rule:
        best = challenger(finals, rule)
        if rule_final is None or best is None:
            return "the pick is the rule's config: no final between a pick and itself"
        ratio = paired(best, rule_final)
        if ratio is None or not ratio.judged:
            # The one round's figure said, so that "not judged" never hides a challenger far behind.
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
    """Whether ``a`` read above ``b`` in every round both were measured in: NOTE [ Rounds that
    disagree ]."""
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
# alone. A pick measured beside a busy machine's others, or one that never reached a final (its
# rate one burst's, the rule maybe never measured), is not: reused as if tuned, it stood for
# good (a burst of ±54% picked a config that read 0.85x the rule by hand). So such a result is
# stored provisional, saying why (``provisional_reason``), and every place that hands it out says
# so in one line; the loader handed out is the better-measured of the pick and the rule
# (``handed_out``): a pick that costs more than the rule only where its rounds with the rule, or
# its burst's interval against the rule's, put it ahead past the noise (a cheaper one, as the
# tie rule has it). A later call on a machine no longer busy tunes again.


def provisional_reason(pick: LoaderConfig, finals: Sequence[Finalist], busy: bool, others_cpus: float | None,
                       cpus: float, hint: str | None = None) -> str | None:
    """Why the pick is not judged (NOTE [ A provisional pick ]), in words, or None when it is:
    measured on a busy machine (``busy``: others past the busy share, ``others_cpus`` of
    ``cpus``), or never in a final. ``hint``: what would judge it (a budget), added when given."""
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
    """The config a provisional result hands out (NOTE [ A provisional pick ]): the pick where it
    is the rule, costs no more than the rule (the cheaper wins where nothing is judged), the rule
    was never measured, or the pick is ahead of it past the noise (its paired rounds' interval
    above 1, else its burst's interval wholly above the rule's); else the rule."""
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
