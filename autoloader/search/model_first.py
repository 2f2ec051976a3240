"""The search: predict every config from the profile, spend bursts only to confirm.

NOTE [ Model first ]
A burst's rate moves by more than the differences the search must find, so bursts do not rank
configs here; the model does (NOTE [ The pipeline model ] in model.py). Bursts check it: each
one corrects the model's efficiency terms, and the model is asked again. In order, each the first
not yet measured:

1. no workers: the baseline, and the cleanest reading of one batch's cost, with no other
   process competing (when the model's pick over all configs does not fit in memory, it comes
   first, and the run records it unrun: that tells the user what the limit costs);
2. the rule: the config the tuner replaces (``heuristic_config``), so the final can compare
   against it and the tuner never hands back less than the rule without knowing it. It comes
   before the model's pick because it is measured whatever the pick is, and its burst corrects
   the terms of the stages a pipeline with workers adds (the pin thread, the workers) before
   the pick is asked for: the profile times the pin thread alone, and with a dozen workers busy
   beside it it can run several times slower, so a pick resting on it, measured first, spends a
   long burst of many workers on a config the rule's burst alone would have ruled out;
3. the model's pick: the cheapest config predicted within PREDICTED_TIE of the best prediction
   (cheapest over a whole run: ``LoaderConfig.cost``) among those whose memory fits, under the
   terms the bursts so far corrected, and where it has more workers than usable CPUs, the pick
   at num_workers = CPUs (NOTE [ Past the cores ] in choice.py);
4. the pick at each other batch size asked for (the step's work per batch changes with it,
   which only a burst shows), and the pick again once later bursts have corrected the model;
5. a config predicted near the best that could still beat the pick over the terms no burst has
   corrected yet (``Model.rate_range``: one that rests on a stage no burst has measured), the
   cheapest such;
6. once the pick is measured and nothing above is left, the settings what-if the model rates
   highest (``settings_probe``: the pick with pinning off, or out of order where allowed), so
   the report's what-if has a measured gain beside its predicted one; only while the budget
   leaves the final its time, as every burst.

When the corrected model's pick is measured and no prediction near the best is in doubt, the
search ends: the profile left no doubt. The final (choice.py) then re-measures the pick and the
rule interleaved, and the cheapest that ties the best median over the paired rounds (the
opening's too) wins. Beside them only the pick at num_workers = CPUs where the pick has more,
the headroom probe (NOTE [ Headroom ]) and a config whose burst read past SINGLE_ROUND_MARGIN
above the pick's (the best burst, the fastest prediction), or read level or ahead with an
interval reaching past that margin (NOTE [ Loose readings ] in results.py): a closer, tight
reading is within what one burst's rate moves, and each finalist costs every round its start,
its lead and its window (a third finalist of many workers, its burst a percent from the pick's,
adds its whole reading to every round). The rule is always among the finalists unless it could
not run: a burst of it stopped early is no reason to leave the rule out.

NOTE [ Headroom ]
Where the step sets the pace the predicted curve is flat from few workers on, and the cheapest
config within PREDICTED_TIE is the fewest workers that just keep up on the mean. But a batch that
takes longer than the mean, a step that comes back sooner, a worker descheduled beside the step's
own thread, each empties a short queue, and the loop waits. The simulation draws the step's time
from its timed calls (the profile's ``step_samples``) as it draws batch times from the samples',
which shows what the jitter costs; what it cannot see (a worker's share of a CPU beside the step
moving from moment to moment) is left to headroom: when the pick is bound by the consumer, it is
the cheapest config within the tie whose workers are busy at most HEADROOM_BUSY of the time (they
could make twice what the step takes). And since the model's flat curve is what is in doubt, the
search measures the pick with twice its workers too (``headroom_probe``, at most one per CPU) and
the final holds both, so a measured gain decides. A cheaper finalist short of headroom ties only
within FINAL_TIE (``short_of_headroom``), since its gap is a loader that runs dry, not the
consumer's noise.
"""

from __future__ import annotations

import itertools
from typing import Callable, Sequence

from .calibration import calibrate
from .model import Calibration, Model, Prediction
from .policy import (
    HEADROOM_BUSY,
    MAX_DOUBTS,
    MAX_FINALISTS,
    MAX_SEARCH_TRIALS,
    PREDICTED_TIE,
    UNCERTAIN_NEAR,
)
from .results import OK, TrialResult, best_burst, challenges
from .settings import SETTINGS
from .space import LoaderConfig, SearchSpace
from .strategy import Strategy


def heuristic_config(space: SearchSpace, cpus: int, batch_size: int | None = None) -> LoaderConfig:
    """The common rule: ``num_workers=cpus-1`` and every other knob at its start where the space
    offers it (pinning where offered, kept workers, prefetch at DataLoader's default)."""
    return space.default_config(min(max(0, cpus - 1), space.max_workers), batch_size)


def worker_ladder(cpus: int, max_workers: int) -> list[int]:
    """Worker counts the model is asked about: every count up to the CPUs, then steps of half the
    CPUs (workers that wait on I/O or slow samples can pay past one per core)."""
    counts = list(range(0, min(cpus, max_workers) + 1))
    step = max(1, cpus // 2)
    n = cpus + step
    while n <= max_workers:
        counts.append(n)
        n += step
    return counts


def candidates(space: SearchSpace, cpus: int) -> list[LoaderConfig]:
    """Every config the model predicts: for each batch size, the product of what the space offers
    of the knobs that always apply (pinning), then the worker ladder across the product of those
    that need workers (prefetch depth, persistence, out-of-order delivery where its gate is open)."""
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
    """Proposes from the model; ``fits(config)`` says whether a config's memory is predicted to fit.
    ``rule_cpus``: the CPUs the rule counts, when not ``cpus`` (one rank of a node
    counts the node's: NOTE [ Tuning a node's ranks ] in node/__init__.py)."""

    def __init__(self, space: SearchSpace, model: Model, cpus: int,
                 fits: Callable[[LoaderConfig, Sequence[TrialResult]], bool] | None = None,
                 rule_cpus: int | None = None, rule: LoaderConfig | None = None):
        self.space = space
        self.model = model
        self.cpus = max(1, cpus)
        self.configs = candidates(space, self.cpus)
        # ``rule``: the config the final weighs the pick against, when not the cpus-1 rule (a
        # torchdata.nodes graph's own settings: search/nodes.py).
        self.rule = rule or heuristic_config(space, max(1, rule_cpus or self.cpus))
        self.fits = fits or (lambda config, history: True)

    def expected_trials(self) -> int:
        return 5

    def calibration(self, history: Sequence[TrialResult]) -> Calibration:
        return calibrate(self.model, history)

    def _usable(self, config: LoaderConfig, history: Sequence[TrialResult]) -> bool:
        """Whether ``config`` is still worth predicting: not at a batch size whose step raised,
        and below any batch size CUDA ran out of memory at (that is about the batch, whatever the
        loader does)."""
        failed_sizes = {t.config.batch_size for t in history if t.cause in _SIZE_FAULTS}
        oom = min((t.config.batch_size for t in history if t.cause == "cuda_oom"), default=None)
        return config.batch_size not in failed_sizes and (oom is None or config.batch_size < oom)

    def predictions(self, history: Sequence[TrialResult], calib: Calibration | None = None,
                    feasible: bool = True) -> list[Prediction]:
        """Every usable candidate's prediction under the calibration ``history`` gives; with
        ``feasible``, only those whose memory is predicted to fit."""
        calib = calib or self.calibration(history)
        return [self.model.predict(c, calib) for c in self.configs
                if self._usable(c, history) and (not feasible or self.fits(c, history))]

    def pick(self, predictions: Sequence[Prediction]) -> Prediction:
        """The cheapest config predicted within PREDICTED_TIE of the best prediction; where the
        step sets the pace, the cheapest of those with headroom (NOTE [ Headroom ])."""
        top = max(p.samples_per_s for p in predictions)
        within = [p for p in predictions if p.samples_per_s >= top * (1.0 - PREDICTED_TIE)]
        cheapest = min(within, key=lambda p: p.config.cost())
        if not lacks_headroom(cheapest):
            return cheapest
        roomy = [p for p in within if p.workers_busy is not None and p.workers_busy <= HEADROOM_BUSY]
        return min(roomy, key=lambda p: p.config.cost()) if roomy else cheapest

    def at_cores(self, config: LoaderConfig) -> LoaderConfig | None:
        """``config`` with one worker a usable CPU, where it has more (NOTE [ Past the cores ] in
        choice.py); None where it has no more, or the space does not hold that many."""
        if config.num_workers <= self.cpus:
            return None
        cores = config.replace(num_workers=self.cpus)
        return cores if self.space.contains(cores) else None

    def headroom_probe(self, pick: Prediction) -> LoaderConfig | None:
        """Where the step sets the pace, the pick with twice its workers (at most one per CPU): a
        burst of it checks the model's flat curve, and the final weighs it (NOTE [ Headroom ])."""
        n = pick.config.num_workers
        if not n or pick.bound != "consumer" or min(2 * n, self.cpus) <= n:
            return None
        return pick.config.replace(num_workers=min(2 * n, self.cpus))

    def short_of_headroom(self, configs: Sequence[LoaderConfig], history: Sequence[TrialResult]) -> frozenset:
        """Of ``configs``, those bound by the step with workers busy past HEADROOM_BUSY under the
        corrected model: in the final they tie only narrowly (NOTE [ Headroom ])."""
        calib = self.calibration(history)
        return frozenset(c for c in configs if lacks_headroom(self.model.predict(c, calib)))

    def pick_unmeasured(self, history: Sequence[TrialResult]) -> bool:
        """The corrected model's pick has no burst yet and is predicted past PREDICTED_TIE above
        the best measured rate."""
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
        # The best config whatever its memory comes first when it does not fit: the run records it
        # as predicted past the limit (never run), which tells the user what the limit costs. One
        # that fits is no such record: the cheapest within the tie of a top that does not fit can
        # itself fit and differ from the pick of those that do, and run first a long burst that
        # can end the run before the baseline and the rule are measured.
        best_any = self.pick(everything).config
        plan = [] if self.fits(best_any, history) else [best_any]
        plan.append(self.space.default_config(0))
        # The rule before the model's pick: measured in any case, its burst corrects the terms
        # the pick rests on first (NOTE [ Model first ], 2).
        plan.append(self.rule)
        if now:
            plan.append(self.pick(now).config)
            # A pick past the cores is held against num_workers = CPUs: NOTE [ Past the cores ] in choice.py.
            cores = self.at_cores(self.pick(now).config)
            plan += [cores] if cores is not None else []
        if now:
            # The step's work per batch changes with the batch size, which only a burst shows.
            pick = self.pick(now).config
            plan += [pick.replace(batch_size=size) for size in self.space.batch_sizes if size != pick.batch_size]
            probe = self.headroom_probe(self.pick(now))
            plan += [probe] if probe is not None else []
        for config in plan:
            if config not in tried and self.space.contains(config) and self._usable(config, history):
                return config
        if not now:
            return None
        doubt = self._doubt(history, now, calib, tried, plan)
        return doubt if doubt is not None else self.settings_probe(history, now)

    def settings_probe(self, history: Sequence[TrialResult], now: Sequence[Prediction]) -> LoaderConfig | None:
        """The settings what-if the model rates highest, once the pick is measured and nothing else
        is left to measure: the pick with one knob at its proposal's value (pinning off; delivery
        out of order where the user let the space hold it), a change that needs no code, so that
        the report sets its measured gain beside the predicted one (NOTE [ Model first ], 6)."""
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
        """Whether the search may try ``config``: every knob at a value the space offers (a closed
        gate offers only its start)."""
        return all(config[k] in self.space.offered(k) for k in SETTINGS
                   if k.domain is not None and config.applies(k))

    def _doubt(self, history, now, calib, tried, plan) -> LoaderConfig | None:
        """One burst for a prediction in doubt, at most: a second would rest on the same unknown."""
        if len(tried - set(plan)) >= MAX_DOUBTS:
            return None
        # A prediction in doubt is worth a burst only when it could beat the pick: its highest
        # rate, over the efficiency terms no burst has corrected yet, clears the pick's by the tie.
        # Of those, the cheapest: its own range clears the pick, so its burst corrects a term
        # that range rests on (the workers', the main process's or the pin thread's, which the
        # configs near the best mostly share), and a burst of fewer workers costs less (their
        # start, the cycles its window must hold): the most workers of many tied predictions
        # costs the longest burst, and can leave the final no time to begin.
        pick = self.pick(now)
        best = max(now, key=lambda p: p.samples_per_s)
        near = sorted((p for p in now if p.samples_per_s >= best.samples_per_s * (1.0 - UNCERTAIN_NEAR)
                       and p.config not in tried), key=lambda p: p.config.cost())[:24]
        for p in near:
            if self.model.rate_range(p.config, calib)[1] > pick.samples_per_s * (1.0 + PREDICTED_TIE):
                return p.config
        return None

    def finalists(self, history: Sequence[TrialResult]) -> list[LoaderConfig]:
        """Who the final re-measures: of the configs measured in full, the corrected model's pick,
        the pick at num_workers = CPUs where the pick has more (NOTE [ Past the cores ] in
        choice.py), its headroom probe where the step sets the pace, and its fastest prediction
        among them and the best burst where their burst challenges the pick's (past
        SINGLE_ROUND_MARGIN above it, or loose: NOTE [ Loose readings ] in results.py); and the
        rule (last), unless it failed or broke a limit."""
        # A config measured while it fitted stays out once the memory predicted for a run no
        # longer fits (the bursts since taught the per-worker overhead).
        ok = self._measured(history)
        if not ok:
            return []
        calib = self.calibration(history)
        predicted = [self.model.predict(t.config, calib) for t in ok]
        pick = self.pick(predicted)
        # Where the step sets the pace, the headroom probe right after the pick, when measured.
        probe = self.headroom_probe(pick)
        probed = [probe] if probe is not None and any(t.config == probe for t in ok) else []
        # The best burst and the fastest prediction challenge the pick only from past
        # SINGLE_ROUND_MARGIN above its burst: the model ranks, and one burst's rate moves by more
        # than that margin's gaps, so a closer reading is no evidence against the pick, and a
        # third finalist costs every round (NOTE [ Model first ], the final).
        # A challenger whose burst is loose joins as well (NOTE [ Loose readings ] in results.py).
        mine = best_burst(ok, pick.config)
        others = [max(ok, key=lambda t: t.samples_per_s).config, max(predicted, key=lambda p: p.samples_per_s).config]
        challengers = [c for c in others if challenges(ok, c, mine)]
        # A pick past the cores meets num_workers = CPUs, when measured (NOTE [ Past the cores ] in choice.py).
        cores = self.at_cores(pick.config)
        cored = [cores] if cores is not None and any(t.config == cores for t in ok) else []
        chosen = [pick.config, *cored, *probed, *challengers]
        unique = [c for c in dict.fromkeys(chosen) if c != self.rule][:MAX_FINALISTS - 1]
        # The rule always, last (where the run keeps it when time is short), unless it could
        # not run: stopped early or not yet measured, the final measures it in full.
        if not any(t.config == self.rule and t.status != OK for t in history):
            unique.append(self.rule)
        return unique

    def _measured(self, history: Sequence[TrialResult]) -> list[TrialResult]:
        return [t for t in history if t.status == OK and t.samples_per_s and not t.pruned and self.fits(t.config, history)]

    def model_pick(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        """The corrected model's pick among the configs measured in full (the finalists' first)."""
        ok = self._measured(history)
        if not ok:
            return None
        calib = self.calibration(history)
        return self.pick([self.model.predict(t.config, calib) for t in ok]).config

    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, predicted rate) along the worker ladder at the calibrated pick's other
        settings: the model's worker curve, for the knee."""
        calib = self.calibration(history)
        now = self.predictions(history, calib)
        if not now:
            return []
        pick = self.pick(now).config
        points = []
        for n in worker_ladder(self.cpus, self.space.max_workers):
            config = pick.replace(num_workers=n)
            points.append((n, self.model.predict(config, calib).samples_per_s))
        return points
