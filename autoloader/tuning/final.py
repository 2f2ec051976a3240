"""The interleaved final: who it measures, how many rounds, and the busy machine's extra rounds.

The final re-measures the strategy's finalists, the rule (always last) and, when this hardware
has a previous result, its pick (NOTE [ Drift ] in compare.py), in paired rounds until they
settle the pick against the rule (NOTE [ Sure enough ] in search/paired.py), FINAL_MIN_ROUNDS to
FINAL_MAX_ROUNDS while the budget holds a round. A busy machine (NOTE [ Others on the machine ])
adds up to BUSY_ROUNDS of the configs that decide the pick; an undecided nightly comparison up to
SETTLE_ROUNDS of the previous pick and the best other finalist.

NOTE [ A final that can settle ]
Where the search's bursts of the pick and the rule make the opening round (NOTE [ The opening
round ] in search/choice.py), a final of one more round ends at two pairs: t95 with one degree
of freedom is 12.7, so its interval settles only a gap about nine times the pairs' noise, one the
opening alone already shows (choice.choose hands it back over the bursts as one round). So where
the budget holds fewer rounds than bring the pairs to FINAL_ROUNDS (three: t95 4.30), the final
is not begun: the bursts decide, and the verdict says the rule was not paired. Only the unsure
case changes: a cheaper pick within the margin of the rule gives way to the rule. With no
opening the final runs the rounds the budget holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..events import BusyRecheck, FinalRound, Progress
from ..search.budget import Clock, round_seconds
from ..search.choice import Finalist, choose, rule_settled
from ..search.results import OK, MachineLoad, TrialResult, best_burst, challenges
from ..search.policy import (BUSY_ROUNDS, FINAL_MAX_ROUNDS, FINAL_MIN_ROUNDS, FINAL_ROUNDS, FINAL_SETTINGS,
                             SETTLE_ROUNDS)
from ..search.space import LoaderConfig


def final_configs(finalists: Sequence[LoaderConfig], rule: LoaderConfig | None, previous: LoaderConfig | None,
                  history: Sequence[TrialResult], fits: Callable[[LoaderConfig], bool] = lambda c: True,
                  pick: LoaderConfig | None = None) -> list[LoaderConfig]:
    """Who the final measures, in order: the strategy's finalists, the previous pick (unless it
    failed here), the rule (when the strategy kept it) last; none whose memory forecast is past a
    limit (``fits``): a config the final measures can win.

    ``pick``: the strategy's own pick. When it is the rule, only a finalist whose burst read more
    than SINGLE_ROUND_MARGIN above the rule's, or whose loose burst reaches past it (NOTE [ Loose
    readings ] in search/results.py), challenges it; without one there is no final."""
    if not finalists:
        return []
    failed = {t.config for t in history if t.status != OK}
    chosen = [c for c in finalists if c not in (rule, previous)]
    if pick is not None and pick == rule and rule in finalists:
        rule_rate = best_burst(history, rule)
        chosen = [c for c in chosen if rule_rate and challenges(history, c, rule_rate)]
        if not chosen and previous is None:
            return []
    if previous is not None and previous not in failed:
        chosen.append(previous)
    if rule is not None and rule in finalists:
        chosen.append(rule)
    return [c for c in dict.fromkeys(chosen) if fits(c)]


def trimmed(chosen: list[LoaderConfig], rule: LoaderConfig | None, previous: LoaderConfig | None) -> list[LoaderConfig]:
    """When a round of all does not fit: the first, the previous pick and the rule."""
    return list(dict.fromkeys([chosen[0]] + [c for c in (previous, rule) if c is not None and c in chosen]))


@dataclass
class Final:
    """One run's final. ``measure(config)`` takes one final measurement."""
    clock: Clock
    measure: Callable[[LoaderConfig], TrialResult]
    progress: Progress
    rates: dict = field(default_factory=dict)       # config -> [TrialResult] measured OK
    taken: dict = field(default_factory=dict)       # config -> [round index]
    results: list = field(default_factory=list)     # every measurement, for the machine's load
    rounds: int = 0
    opening: dict = field(default_factory=dict)     # config -> its search burst in the opening round

    def run(self, chosen: list[LoaderConfig], history: Sequence[TrialResult], rule: LoaderConfig | None,
            previous: LoaderConfig | None, decide: Callable[[list[Finalist]], Finalist] | None = None,
            opening: dict | None = None) -> list[Finalist]:
        """``chosen`` re-measured interleaved, round after round while the budget has one left,
        until the rounds settle the pick (``decide``: the run's choice) against the rule,
        the opening round counted (``opening``: config -> its search burst; NOTE [ The opening
        round ]); FINAL_ROUNDS where there is no rule to settle against, or a previous pick to
        compare. When a round of all does not fit, ``trimmed``; when not even that fits, or the
        final would end at two pairs (NOTE [ A final that can settle ]), no final."""
        # No final between a pick and itself, except the previous pick alone: a nightly
        # comparison needs its readings (NOTE [ Drift ]), and no other config is in the running.
        if len(chosen) < 2 and not (chosen and chosen == [previous]):
            return []
        if round_seconds(chosen, history) > self.clock.left() and len(chosen) > 2:
            chosen = trimmed(chosen, rule, previous)
        seconds = round_seconds(chosen, history)
        settles = rule in chosen and previous not in chosen
        opening = {c: t for c, t in (opening or {}).items() if c in chosen}
        self.opening = opening if rule in opening and len(opening) >= 2 else {}
        opened = 1 if self.opening else 0
        most = min(FINAL_MAX_ROUNDS - opened, int(self.clock.left() / seconds))
        if settles and opened and most + opened < FINAL_ROUNDS:
            self.opening = {}
            return []
        decide = decide or (lambda finals: choose(finals, history, rule))
        for config in chosen:
            self.rates.setdefault(config, [])
            self.taken.setdefault(config, [])
        while self.rounds < (most if settles else min(most, FINAL_ROUNDS)) and seconds <= self.clock.left():
            self._round(chosen, most if settles else min(most, FINAL_ROUNDS))
            if settles and self.rounds + opened >= FINAL_MIN_ROUNDS and self.settled(history, rule, decide):
                break
        return self.finalists(history)

    def settled(self, history: Sequence[TrialResult], rule: LoaderConfig | None,
                decide: Callable[[list[Finalist]], Finalist]) -> bool:
        """Whether the rounds so far settle the pick they give against the rule."""
        finals = self.finalists(history)
        return bool(finals) and rule_settled(finals, decide(finals).config, rule)

    def _round(self, configs: Sequence[LoaderConfig], of: int) -> None:
        index = self.rounds
        for config in configs:
            result = self.measure(config)
            self.results.append(result)
            if result.status == OK:
                # A busy recheck may take a config the final never ran: num_workers = CPUs from its
                # burst alone (NOTE [ Past the cores ] in search/choice.py).
                self.rates.setdefault(config, []).append(result)
                self.taken.setdefault(config, []).append(index)
        self.rounds += 1
        self.progress(FinalRound(index + 1, of, tuple((c.key, tuple(r.samples_per_s for r in m))
                                                      for c, m in self.rates.items())))

    def finalists(self, history: Sequence[TrialResult]) -> list[Finalist]:
        trials = {t.config: t for t in history if t.status == OK}
        opening = {c: t.samples_per_s for c, t in self.opening.items()}
        return [Finalist(c, tuple(r.samples_per_s for r in m),
                         tuple(r.wait_fraction for r in m if r.wait_fraction is not None), trials.get(c),
                         tuple(self.taken[c]), opening.get(c)) for c, m in self.rates.items() if m]

    def recheck(self, finals: list[Finalist], history: Sequence[TrialResult], load: MachineLoad,
                rule: LoaderConfig | None, narrow: frozenset, cpus: int | None = None) -> list[Finalist]:
        """On a busy machine, up to BUSY_ROUNDS more rounds of the configs that decide the pick
        (the pick, the best median, or the runner-up when they are one)."""
        if not load.busy or len(finals) < 2 or min(len(f.rates) for f in finals) < 1:
            return finals
        pick = choose(finals, history, rule, widen=load.widen, narrow=narrow, cpus=cpus).config
        ranked = sorted(finals, key=lambda f: -f.round_median)   # as the choice ranks them
        deciders = list(dict.fromkeys([pick] + [f.config for f in ranked]))[:2]
        for extra in range(BUSY_ROUNDS):
            if round_seconds(deciders, history) > self.clock.left():
                break
            if extra == 0:
                self.progress(BusyRecheck(tuple(c.key for c in deciders), load))
            self._round(deciders, self.rounds + 1)
        return self.finalists(history)

    def settle(self, finals: list[Finalist], history: Sequence[TrialResult], previous: LoaderConfig,
               settled: Callable[[list[Finalist]], bool]) -> list[Finalist]:
        """While ``settled(finals)`` is False, up to SETTLE_ROUNDS more rounds of ``previous``,
        paired with the best other finalist where that reads ahead of it (NOTE [ Drift ])."""
        if previous not in self.rates or not finals:
            return finals
        for _ in range(SETTLE_ROUNDS):
            if settled(finals):
                break
            others = sorted((f for f in finals if f.config != previous), key=lambda f: -f.round_median)
            mine = next((f for f in finals if f.config == previous), None)
            ahead = bool(others) and (mine is None or others[0].round_median > mine.round_median)
            pair = [previous, others[0].config] if ahead else [previous]
            if round_seconds(pair, history) > self.clock.left():
                break
            self._round(pair, self.rounds + 1)
            finals = self.finalists(history)
        return finals


def final_measurement(runner, limits_now: Callable[[], object]) -> Callable[[LoaderConfig], TrialResult]:
    """One final measurement with ``runner`` under the limits of the moment."""
    return lambda config: runner.measure(config, FINAL_SETTINGS, limits_now().trial_timeout)
