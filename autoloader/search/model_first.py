"""The search: predict every config from the profile, spend bursts only to confirm. Choosing the
next config is kept apart from running it (``Strategy``: the run measures what is chosen).

NOTE [ Model first ]
A burst's rate moves by more than the differences the search must find, so the model ranks
configs (NOTE [ The pipeline model ] in model.py) and bursts check it: each corrects the model's
efficiency terms, and the model is asked again. In order, each the first not yet measured:

1. no workers: the baseline and the cleanest reading of a batch's cost (when the model's pick
   over all configs does not fit in memory, it comes first, recorded unrun: what the limit costs);
2. the rule (``heuristic_config``), so the final can compare against it; before the model's pick,
   since it is measured whatever the pick is and its burst corrects the terms of the stages
   workers add (the pin thread beside busy workers can run several times slower than profiled);
3. the model's pick: the cheapest config (``LoaderConfig.cost``) predicted within PREDICTED_TIE
   of the best among those whose memory fits, and where it has more workers than usable CPUs,
   the pick at num_workers = CPUs (NOTE [ Past the cores ] in choice.py);
4. the pick at each other batch size asked for, and the pick again once later bursts moved it;
5. the cheapest config predicted near the best that could still beat the pick over the terms no
   burst corrected yet (``Model.rate_range``);
6. once the pick is measured, the settings what-if the model rates highest (``settings_probe``),
   so the report's what-if has a measured gain beside its predicted one.

When the corrected model's pick is measured and no prediction near the best is in doubt, the
search ends. The final (choice.py) re-measures the pick and the rule interleaved; beside them only
the pick at num_workers = CPUs where the pick has more, the headroom probe (NOTE [ Headroom ]),
and a config whose burst read past SINGLE_ROUND_MARGIN above the pick's or is loose (NOTE
[ Loose readings ] in results.py): each finalist costs every round. The rule is always a
finalist unless it could not run.

NOTE [ Headroom ]
Where the step sets the pace the predicted curve is flat from few workers on, and the cheapest
config within PREDICTED_TIE just keeps up on the mean; a slow batch or a descheduled worker then
empties the short queue. The simulation draws the step's jitter from its timed calls; what it
cannot see is left to headroom: a pick bound by the consumer is the cheapest within the tie whose
workers are busy at most HEADROOM_BUSY of the time. The search also measures the pick with twice
its workers (``headroom_probe``, at most one per CPU) and the final holds both. A cheaper
finalist short of headroom ties only within FINAL_TIE (``short_of_headroom``).

The warm start: a re-tune measures the last pick first, and stops early when it still holds.

NOTE [ Warm start ]
A nightly re-tune mostly finds what it found the night before, and a full search to say so
costs the whole budget. So a ``WarmStart`` measures first the stored pick, the strategy's rule,
then the pick's ``neighbours`` (one step along each setting but the worker count). From this
hardware's own last result, when the pick re-measures within its tie of the stored rate
(``hold_tie``) and nothing measured reads clearly ahead of it, the search ends there and the
final re-measures the strategy's finalists as usual; once the pick reads otherwise, the search
takes over at once from these measurements. From other hardware's result there is no early
stop: its pick, its workers scaled to this machine's CPUs, is only a first guess. Every warm
config is measured here (NOTE [ Runs in a study ] in store/runs.py).
"""

from __future__ import annotations

import abc
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from .codec import Stored, stored
from .model import Calibration, Model, Prediction, calibrate
from .policy import (
    HEADROOM_BUSY,
    HOLD_TIE,
    MAX_DOUBTS,
    MAX_FINALISTS,
    MAX_SEARCH_TRIALS,
    PREDICTED_TIE,
    RATE_SHIFT,
    UNCERTAIN_NEAR,
)
from .results import OK, TrialResult, best_burst, challenges
from .settings import SETTINGS
from .space import LoaderConfig, SearchSpace


class Strategy(abc.ABC):
    """Answers everything the run asks of the search. It holds no state between calls but its
    construction: a resumed run hands it the stored history and it picks up where it was."""

    rule: LoaderConfig | None = None   # the config the tuner replaces, measured beside the pick
    stopped_early: bool = False        # what it measured settled the answer before its plan ended
    cpus: int | None = None            # NOTE [ Past the cores ] in choice.py; None: not held

    @abc.abstractmethod
    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The next config to try, or None when the strategy has nothing more worth measuring.
        Must never return a config already in ``history``."""

    @abc.abstractmethod
    def expected_trials(self) -> int:
        """About how many trials a run takes, for progress lines."""

    @abc.abstractmethod
    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, rate) points of the worker curve in ``history``, for the knee."""

    @abc.abstractmethod
    def finalists(self, history: Sequence[TrialResult]) -> list[LoaderConfig]:
        """Who the interleaved final re-measures, the rule last when it is among them."""

    @abc.abstractmethod
    def calibration(self, history: Sequence[TrialResult]) -> Calibration:
        """The model's efficiency terms as the bursts in ``history`` fitted them."""

    def pick_unmeasured(self, history: Sequence[TrialResult]) -> bool:
        """Whether its pick has no burst yet and is expected to beat every measured one (the search
        may then spend the final's reserve down to one round: budget.rounds_kept)."""
        return False

    def model_pick(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """Its own pick from ``history`` before the final (None when it does not say)."""
        return None

    def short_of_headroom(self, configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> frozenset:
        """Of ``configs``, those the final ties only narrowly (NOTE [ Headroom ])."""
        return frozenset()


def heuristic_config(space: SearchSpace, cpus: int, batch_size: int | None = None) -> LoaderConfig:
    """The common rule: ``num_workers=cpus-1``, every other knob at its start where offered."""
    return space.default_config(min(max(0, cpus - 1), space.max_workers), batch_size)


def worker_ladder(cpus: int, max_workers: int) -> list[int]:
    """Every count up to the CPUs, then steps of half the CPUs (workers that wait can pay past
    one per core)."""
    counts = list(range(0, min(cpus, max_workers) + 1))
    step = max(1, cpus // 2)
    n = cpus + step
    while n <= max_workers:
        counts.append(n)
        n += step
    return counts


def candidates(space: SearchSpace, cpus: int) -> list[LoaderConfig]:
    """Every config the model predicts: each batch size, the knobs that always apply, the worker
    ladder, and the knobs that need workers, over what the space offers."""
    varying = [k for k in SETTINGS if k.domain is not None]
    always = [k for k in varying if k.when is None]
    rest = [k for k in varying if k.when is not None]
    out = []
    for batch_size in space.batch_sizes:
        for base in itertools.product(*(space.offered(k) for k in always)):
            fixed = dict(zip((k.name for k in always), base))
            for n in worker_ladder(cpus, space.max_workers):
                for more in itertools.product(*(space.offered(k) for k in rest)):
                    out.append(LoaderConfig.make(batch_size=batch_size, num_workers=n, **fixed,
                                                 **dict(zip((k.name for k in rest), more))))
    return list(dict.fromkeys(out))   # without workers the rest collapse into one config


# Failures that belong to a batch size, not to the loader: no other config of that size is tried.
_SIZE_FAULTS = ("step_error", "cuda_oom")


def lacks_headroom(prediction: Prediction) -> bool:
    """Bound by the consumer with workers busy past HEADROOM_BUSY (NOTE [ Headroom ])."""
    return (prediction.config.num_workers > 0 and prediction.bound == "consumer"
            and prediction.workers_busy is not None and prediction.workers_busy > HEADROOM_BUSY)


class ModelFirst(Strategy):
    """Proposes from the model; ``fits(config)``: its memory is predicted to fit; ``rule_cpus``:
    the CPUs the rule counts, when not ``cpus`` (NOTE [ Tuning a node's ranks ]); ``rule``: the
    config the final weighs the pick against, when not the cpus-1 rule (search/nodes.py)."""

    def __init__(self, space: SearchSpace, model: Model, cpus: int,
                 fits: Callable[[LoaderConfig, Sequence[TrialResult]], bool] | None = None,
                 rule_cpus: int | None = None, rule: LoaderConfig | None = None):
        self.space = space
        self.model = model
        self.cpus = max(1, cpus)
        self.configs = candidates(space, self.cpus)
        self.rule = rule or heuristic_config(space, max(1, rule_cpus or self.cpus))
        self.fits = fits or (lambda config, history: True)

    def expected_trials(self) -> int:
        return 5

    def calibration(self, history: Sequence[TrialResult]) -> Calibration:
        return calibrate(self.model, history)

    def _usable(self, config: LoaderConfig, history: Sequence[TrialResult]) -> bool:
        """Not at a batch size whose step raised, and below any CUDA ran out of memory at."""
        failed_sizes = {t.config.batch_size for t in history if t.cause in _SIZE_FAULTS}
        oom = min((t.config.batch_size for t in history if t.cause == "cuda_oom"), default=None)
        return config.batch_size not in failed_sizes and (oom is None or config.batch_size < oom)

    def predictions(self, history: Sequence[TrialResult], calib: Calibration | None = None,
                    feasible: bool = True) -> list[Prediction]:
        """Every usable candidate's prediction; with ``feasible``, only those that fit."""
        calib = calib or self.calibration(history)
        return [self.model.predict(c, calib) for c in self.configs
                if self._usable(c, history) and (not feasible or self.fits(c, history))]

    def pick(self, predictions: Sequence[Prediction]) -> Prediction:
        """NOTE [ Model first ], 3, and NOTE [ Headroom ]."""
        top = max(p.samples_per_s for p in predictions)
        within = [p for p in predictions if p.samples_per_s >= top * (1.0 - PREDICTED_TIE)]
        cheapest = min(within, key=lambda p: p.config.cost())
        if not lacks_headroom(cheapest):
            return cheapest
        roomy = [p for p in within if p.workers_busy is not None and p.workers_busy <= HEADROOM_BUSY]
        return min(roomy, key=lambda p: p.config.cost()) if roomy else cheapest

    def at_cores(self, config: LoaderConfig) -> LoaderConfig | None:
        """``config`` at num_workers = CPUs where it has more and the space holds it."""
        if config.num_workers <= self.cpus:
            return None
        cores = config.replace(num_workers=self.cpus)
        return cores if self.space.contains(cores) else None

    def headroom_probe(self, pick: Prediction) -> LoaderConfig | None:
        """The pick with twice its workers, at most one per CPU (NOTE [ Headroom ])."""
        n = pick.config.num_workers
        if not n or pick.bound != "consumer" or min(2 * n, self.cpus) <= n:
            return None
        return pick.config.replace(num_workers=min(2 * n, self.cpus))

    def short_of_headroom(self, configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> frozenset:
        """Of ``configs``, those short of headroom under the corrected model (NOTE [ Headroom ])."""
        calib = self.calibration(history)
        return frozenset(c for c in configs if lacks_headroom(self.model.predict(c, calib)))

    def pick_unmeasured(self, history: Sequence[TrialResult]) -> bool:
        """The pick has no burst and is predicted past PREDICTED_TIE above the best measured."""
        now = self.predictions(history, self.calibration(history))
        if not now:
            return False
        pick = self.pick(now)
        measured = [t.samples_per_s for t in history if t.status == OK and t.samples_per_s]
        return (all(t.config != pick.config for t in history)
                and pick.samples_per_s > max(measured, default=0.0) * (1.0 + PREDICTED_TIE))

    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        tried = {t.config for t in history}
        if len(history) >= MAX_SEARCH_TRIALS:
            return None
        calib = self.calibration(history)
        now = self.predictions(history, calib)
        everything = self.predictions(history, calib, feasible=False)
        if not everything:
            return None
        # The best config whatever its memory comes first only when it does not fit (recorded
        # unrun); one that fits could run a long burst before the baseline and the rule.
        best_any = self.pick(everything).config
        plan = [] if self.fits(best_any, history) else [best_any]
        plan += [self.space.default_config(0), self.rule]
        if now:
            pick = self.pick(now)
            sizes = [pick.config.replace(batch_size=size) for size in self.space.batch_sizes
                     if size != pick.config.batch_size]
            plan += [pick.config, self.at_cores(pick.config), *sizes, self.headroom_probe(pick)]
        for config in plan:
            if config is not None and config not in tried and self.space.contains(config) \
                    and self._usable(config, history):
                return config
        if not now:
            return None
        doubt = self._doubt(history, now, calib, tried, plan)
        return doubt if doubt is not None else self.settings_probe(history, now)

    def settings_probe(self, history: Sequence[TrialResult], now: Sequence[Prediction]) -> LoaderConfig | None:
        """The pick with one knob at its proposal's value, the one the model rates highest, once
        the pick is measured (NOTE [ Model first ], 6); one a run."""
        pick = self.pick(now).config
        if not any(t.config == pick and t.status == OK for t in history):
            return None
        changed = [k.proposed(pick) for k in SETTINGS
                   if k.proposal is not None and pick.applies(k) and pick[k] != k.proposal.value]
        tried = {t.config for t in history}
        if any(c in tried for c in changed):
            return None   # one settings what-if a run
        open_ = [c for c in changed if self.space.contains(c) and self._offers(c)
                 and self._usable(c, history) and self.fits(c, history)]
        if not open_:
            return None
        calib = self.calibration(history)
        return max(open_, key=lambda c: self.model.predict(c, calib).samples_per_s)

    def _offers(self, config: LoaderConfig) -> bool:
        """Every knob at a value the space offers (a closed gate offers only its start)."""
        return all(config[k] in self.space.offered(k) for k in SETTINGS
                   if k.domain is not None and config.applies(k))

    def _doubt(self, history, now, calib, tried, plan) -> LoaderConfig | None:
        """One burst for a prediction in doubt, at most: a second would rest on the same unknown."""
        if len(tried - set(plan)) >= MAX_DOUBTS:
            return None
        # Worth a burst only when its highest rate clears the pick's by the tie; the cheapest such,
        # since its burst corrects the term its range rests on and costs the shortest burst.
        pick = self.pick(now)
        best = max(now, key=lambda p: p.samples_per_s)
        near = sorted((p for p in now if p.samples_per_s >= best.samples_per_s * (1.0 - UNCERTAIN_NEAR)
                       and p.config not in tried), key=lambda p: p.config.cost())[:24]
        for p in near:
            if self.model.rate_range(p.config, calib)[1] > pick.samples_per_s * (1.0 + PREDICTED_TIE):
                return p.config
        return None

    def finalists(self, history: Sequence[TrialResult]) -> list[LoaderConfig]:
        """Who the final re-measures (NOTE [ Model first ]), of the configs measured in full that
        still fit; the rule last, unless it failed or broke a limit."""
        ok = self._measured(history)
        if not ok:
            return []
        calib = self.calibration(history)
        predicted = [self.model.predict(t.config, calib) for t in ok]
        pick = self.pick(predicted)
        mine = best_burst(ok, pick.config)
        others = [max(ok, key=lambda t: t.samples_per_s).config, max(predicted, key=lambda p: p.samples_per_s).config]
        measured = {t.config for t in ok}
        chosen = [pick.config, *(c for c in (self.at_cores(pick.config), self.headroom_probe(pick)) if c in measured),
                  *(c for c in others if challenges(ok, c, mine))]
        unique = [c for c in dict.fromkeys(chosen) if c != self.rule][:MAX_FINALISTS - 1]
        if not any(t.config == self.rule and t.status != OK for t in history):
            unique.append(self.rule)
        return unique

    def _measured(self, history: Sequence[TrialResult]) -> list[TrialResult]:
        return [t for t in history if t.status == OK and t.samples_per_s and not t.pruned and self.fits(t.config, history)]

    def model_pick(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The corrected model's pick among the configs measured in full."""
        ok = self._measured(history)
        if not ok:
            return None
        calib = self.calibration(history)
        return self.pick([self.model.predict(t.config, calib) for t in ok]).config

    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, predicted rate) along the worker ladder at the pick's other settings."""
        calib = self.calibration(history)
        now = self.predictions(history, calib)
        if not now:
            return []
        pick = self.pick(now).config
        return [(n, self.model.predict(pick.replace(num_workers=n), calib).samples_per_s)
                for n in worker_ladder(self.cpus, self.space.max_workers)]


@dataclass(frozen=True)
class WarmStart(Stored):
    """What a run measures first (NOTE [ Warm start ])."""
    pick: LoaderConfig               # the stored pick (scaled to this machine when from another)
    rate: float = stored(key="samples_per_s", positive=True)   # its stored rate
    rel_interval: float | None = None
    may_stop: bool = False           # this hardware's own result: an early stop is allowed
    neighbours: bool = stored(True, read=False, write=False)   # measure the pick's neighbours too


def neighbours(config: LoaderConfig, space: SearchSpace) -> list[LoaderConfig]:
    """Configs one step from ``config`` along each knob's ``step``, in their ranks' order."""
    out = []
    stepped = sorted((k for k in SETTINGS if k.step is not None and config.applies(k)), key=lambda k: k.step.rank)
    for knob in stepped:
        value, offered = config[knob], space.offered(knob)
        if knob.step.adjacent:
            ordered = sorted(offered)
            if value in ordered:
                at = ordered.index(value)
                out += [config.replace(**{knob.name: ordered[i]})
                        for i in (at - 1, at + 1) if 0 <= i < len(ordered)]
        else:
            out += [config.replace(**{knob.name: v}) for v in offered if v != value]
    return [c for c in out if space.contains(c) and c != config]


def scaled(config: LoaderConfig, their_cpus: int, my_cpus: int) -> LoaderConfig:
    """Another machine's pick with its worker count in proportion to this machine's CPUs."""
    if not config.num_workers:
        return config
    return config.replace(num_workers=max(1, round(config.num_workers * my_cpus / max(1, their_cpus))))


def hold_tie(warm: WarmStart, now: TrialResult) -> float:
    """HOLD_TIE, widened by the two readings' intervals (a burst is noisier than a final), up to RATE_SHIFT."""
    spread = sum(x for x in (warm.rel_interval, now.rel_interval) if x is not None and math.isfinite(x))
    return min(RATE_SHIFT, max(HOLD_TIE, spread))


def holds(warm: WarmStart, history: Sequence[TrialResult]) -> bool:
    """The stored pick reads within its tie of the stored rate, and nothing clearly ahead of it."""
    now = next((t for t in history if t.config == warm.pick), None)
    if now is None or now.status != OK or not now.samples_per_s or now.pruned:
        return False
    tie = hold_tie(warm, now)
    if abs(now.samples_per_s / warm.rate - 1) > tie:
        return False
    return not any(t.status == OK and t.samples_per_s and t.samples_per_s > now.samples_per_s * (1 + tie)
                   for t in history)


class Warmed:
    """``inner`` (a Strategy) with the warm start's configs first; everything else is its own."""

    def __init__(self, inner: Strategy, warm: WarmStart, space: SearchSpace):
        self.inner, self.warm = inner, warm
        # The rule second, so that the final holds it however soon the clock ends the search; a
        # pick past the cores beside num_workers = CPUs (NOTE [ Past the cores ] in choice.py).
        first = [warm.pick] + ([inner.rule] if warm.may_stop and inner.rule is not None else [])
        if inner.cpus is not None and warm.pick.num_workers > inner.cpus:
            first.append(warm.pick.replace(num_workers=inner.cpus))
        first += list(neighbours(warm.pick, space)) if warm.neighbours else []
        self.first = list(dict.fromkeys(c for c in first if space.contains(c)))
        self.stopped_early = False

    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        if self.first and self.first[0] == self.warm.pick:
            done = {t.config for t in history}
            if self.warm.pick not in done:
                return self.warm.pick
            if holds(self.warm, history):
                # The pick still reads as it did: its neighbours, then (this hardware) the end.
                for config in self.first[1:]:
                    if config not in done:
                        return config
                if self.warm.may_stop:
                    self.stopped_early = True
                    return None
        return self.inner.propose(history)   # a pick that moved hands over to the search at once

    def __getattr__(self, name: str):
        return getattr(self.__dict__["inner"], name)   # all but the warm start's own is the inner's


def warmed(strategy: Strategy, warm: WarmStart | None, space: SearchSpace) -> Strategy:
    return strategy if warm is None else Warmed(strategy, warm, space)
