"""One tuning run: start the trial process, profile, search, run the final, choose, record.

The run owns the trial process, the study and the clock, and releases the trial process however
it ends; the decisions are search/'s and the record record.py's: this module only sequences them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from ..errors import AutoloaderError, Inconclusive, InputError, NoFeasibleConfig, usage
from ..events import (FleetPushed, Profiled, Progress, RuleRetried, TrialDone, TrialsUnstored, TuneStarted,
                      WaitingForLock)
from ..inputs import hardware
from ..inputs.options import Options, clipped_timeout, warn_batch_past_length
from ..inputs.problem import Problem
from ..node.group import Node
from ..node.ranks import Ranks
from ..node.runner import NodeRunner
from ..probe.driver import TrialRunner
from ..probe.load import LoadMeter
from ..probe.protocol import DatasetInfo, RunnerSetup, SetupError
from ..search.budget import Clock, budget_words, burst_seconds, overhead_seconds, profile_limit, rounds_kept
from ..search.choice import Finalist, best_of, choose, opening_round
from ..search.memory import MemoryLimits, batch_samples
from ..search.model import Model
from ..search.results import (BUDGET_ENDED, CONSTRAINT, HANG, LOADER_ARGUMENTS, OK, MachineLoad, TrialResult,
                              machine_load)
from ..search.model_first import ModelFirst, Strategy, WarmStart, warmed
from ..search.policy import SEARCH_SETTINGS, prune_line
from ..search.profile import Profile
from ..search.settings import NODES, open_gates
from ..search.shards import worker_cap
from ..search.nodes import graph_rule, graph_space
from ..search.space import LoaderConfig, search_space
from ..store.history import previous
from ..store.paths import default_storage, held, lock_path, study_name
from ..store.result import TuneResult
from ..store.study import OnceMore, StudyStore, rule_again
from ..store.storage import warm_up
from .compare import settled
from .measured import fallback_profile, profile_parts, setup_parts
from .final import Final, final_configs, final_measurement
from .record import Ran, record
from .start import default_method, measured_space, start_plan, warn_uncompiled


# The most the run waits for the study's import thread once the study is open (it has finished
# by then, unless the open failed over to another storage): it must not run beside the profile.
IMPORTS_JOIN_S = 5.0


@dataclass(frozen=True)
class Started:
    """What a run starts from: the problem, keyed; what the trial process learnt; the stored trials."""
    problem: Problem
    info: DatasetInfo
    history: tuple[TrialResult, ...]
    crashed_once: tuple[LoaderConfig, ...]


class Run:
    """One tuning run of ``problem`` under ``options``. ``run()`` once. ``node``: rank 0 of a
    node's ranks, tuned together (NOTE [ Tuning a node's ranks ] in node/__init__.py); the
    problem's hardware is then one rank's (``Node.hardware``)."""

    def __init__(self, problem: Problem, options: Options, progress: Progress | None = None,
                 warm_start: WarmStart | None = None, node: Node | None = None):
        self.problem, self.options = problem, options
        self.ranks = node.ranks if node is not None else Ranks()
        self.warm_start = warm_start    # NOTE [ Warm start ] in search/model_first.py
        self.clock = Clock(options.budget, options.started, options.kept_s)   # NOTE [ The budget is a wall bound ]
        unlocked, methods = start_plan(problem)   # NOTE [ The start method as a knob ] in search/settings.py
        self.space = search_space(problem.batch_sizes, problem.hardware.cpus, problem.device, unlocked,
                                  start_method=default_method())
        self.progress: Progress = progress or (lambda event: None)
        self.store: StudyStore | None = None
        self._timeline: list[tuple[str, float, float, str | None]] = []   # (what, start s, end s, config)
        self._parts: list[tuple[str, float, float]] = []   # the set-up's and the profile's parts (Inputs.parts)
        self.turn = contextlib.ExitStack()   # this problem's lock, once its key is known (_start)
        limits = options.limits
        setup = RunnerSetup(problem.dataset, problem.step, problem.device, problem.fixed_kwargs,
                            problem.batch_sizes[0], start_methods=methods)
        self.before = None   # the previous result of the problem, once the run knows its key
        self.measured_profile: Profile | None = None   # for a run that ends empty
        self.setup_s = 0.0   # the seconds before the profile: the trial process's start
        self._run_meter: LoadMeter | None = None
        self.load_cpus = hardware.usable_cpus()   # the CPUs the machine's load is a share of
        self.runner = (NodeRunner(node, setup, limits.max_memory, limits.trial_timeout, self.clock.bound_left,
                                  self.progress)
                       if node is not None else
                       TrialRunner(setup, max_memory=limits.max_memory, hang_timeout_s=limits.trial_timeout,
                                   budget_left=self.clock.bound_left, notice=self.progress))

    def run(self) -> TuneResult:
        try:
            started = self._start()
            profile, model = self._profile(started.info)
            strategy = self._strategy(model, profile, started.info)
            history = self._search(strategy, started)
            finals, load = self._final(strategy, profile, history)
            narrow = strategy.short_of_headroom([f.config for f in finals], history)
            # Without a final the bursts choose: only those whose forecast fits (final_configs).
            fitting = [t for t in history if t.status != OK or self.memory.fits(t.config, history)]
            fitting = fitting if any(t.status == OK for t in fitting) else history
            pick = choose(finals, fitting, rule=strategy.rule, widen=load.widen, narrow=narrow,
                          cpus=strategy.cpus)
            ran = Ran(self.options, self.ranks, self.clock, self.runner.orphans, self.runner.shm_leaks,
                      self.warm_start, self.uncapped, self.memory, tuple(self._timeline), tuple(self._parts),
                      self.before)
            return record(ran, started, profile, model, strategy, history, finals, pick, load, self.store,
                          self.progress)
        except AutoloaderError as exc:
            if self.store is not None and not exc.resumable:
                self.store.failed()   # ended, not interrupted: the next run starts afresh
            raise
        finally:
            if self.store is not None:
                self.store.close()
            self.runner.close()
            self.turn.close()   # last: the next in turn starts on cores this run no longer uses

    def _start(self) -> Started:
        """Start the trial process, open the study (resuming an interrupted run of the problem) and
        say what the run starts from (NOTE [ The study's imports while the trial process starts ])."""
        imports = warm_up()
        meter = self._run_meter = LoadMeter(None)   # the load, for a run that measures nothing (Inconclusive says it)
        try:
            info = self.runner.start()
            self._timeline.append(("set-up", 0.0, self.clock.elapsed(), None))
            self._parts += setup_parts(info, time.monotonic() - self.clock.elapsed())
        except SetupError as exc:
            if exc.budget and not exc.usage:
                span = meter.stop()
                load = (f"other processes used {span.others_cpus:.1f} of {self.load_cpus:g} CPUs meanwhile"
                        if span is not None else "the machine's load was not read")
                raise Inconclusive(f"nothing measured: {exc} ({load})") from None
            raise (InputError(str(exc)) if exc.usage else AutoloaderError(str(exc))) from None
        warn_batch_past_length(self.space.batch_sizes, info.length)
        warn_uncompiled(info)
        self._check_shm(info)
        # A sharded stream gives a worker past its shards nothing to read: the search stops there.
        self.uncapped = self.space.max_workers
        self.space = self.space.capped(worker_cap(info.shards, self.uncapped))
        self.nodes_rule = None
        if info.nodes is not None:   # NOTE [ Tuning a torchdata.nodes graph ] in probe/nodes.py
            problem = self.problem
            self.nodes_rule = graph_rule(info.nodes, self.space.batch_sizes[0], problem.device.startswith("cuda"))
            nodes_space = search_space(self.space.batch_sizes, problem.hardware.cpus, problem.device,
                                       open_gates(problem), loader=NODES)
            self.space = graph_space(nodes_space, info.nodes, self.nodes_rule)
            self.uncapped = self.space.max_workers
        problem = self.problem.with_length(info.length, info.fingerprint, info.dataset_class, info.step_identity)
        key, fingerprint = problem.key, problem.hardware.fingerprint
        # Two tunes of one problem take turns; the wait for the other's is not this run's budget.
        waiting = time.monotonic()
        self.turn.enter_context(held(lock_path(self.options.out, fingerprint, key),
                                     on_wait=lambda holder: self.progress(WaitingForLock(
                                         holder, self.options.out, then="measuring on its own"))))
        self.clock.t0 += time.monotonic() - waiting
        # NOTE [ Local first ] in store/study.py: the study beside the result, pushed to --storage.
        store = self.store = StudyStore(default_storage(self.options.out, fingerprint, key), study_name(fingerprint, key),
                                        self.space, given=False, fleet=self.options.storage,
                                        notice=lambda line: self.progress(FleetPushed(line)))
        loaded = store.reread(self.options.limits, info.code)
        ceiling = self.options.ceiling
        # The previous result, read before this run replaces it: its pick joins the final.
        self.before = previous(self.options.out, problem.hardware, key, self.options.storage, set_aside=True)
        self.progress(TuneStarted(key, info, resumed=len(loaded.trials), retried=loaded.limit_raised,
                                  code_changed=loaded.code_changed, crashed_once=len(loaded.crashed_once),
                                  invalid=loaded.invalid, environment=loaded.environment,
                                  moved_aside=store.moved_aside, stale=store.stale_repaired, device=problem.device,
                                  cpus=problem.hardware.cpus, ranks=self.ranks.ranks, budget=self.clock.budget,
                                  max_memory=self.options.limits.max_memory, storage=store.shown_url,
                                  ceiling_by=ceiling.by if ceiling else None,
                                  cgroup_limit=ceiling.cgroup.limit if ceiling and ceiling.cgroup else None,
                                  max_workers=self.space.max_workers, uncapped=self.uncapped))
        if store.write_failed:
            self.progress(TrialsUnstored(store.write_failed))
        imports.join(IMPORTS_JOIN_S)   # done by now (the open needed them): nothing of it runs beside the profile
        return Started(problem, info, loaded.trials, loaded.crashed_once)

    def _check_shm(self, info: DatasetInfo) -> None:
        free = hardware.shm_free()
        need = self.ranks.shm(info.sample_bytes * batch_samples(min(self.space.batch_sizes), info.length))
        if free is not None and free < need:
            raise InputError(str(usage(
                "/dev/shm must hold at least one batch, since DataLoader workers pass batches through it",
                f"{free / 2**20:.1f} MiB free, one batch is {need / 2**20:.1f} MiB",
                "raise the shared-memory size (docker run --shm-size=8g, or a larger /dev/shm "
                "mount), or use a smaller --batch-size")))

    def _profile(self, info: DatasetInfo) -> tuple[Profile, Model]:
        """The pipeline's profile and the model on it (one rank's on a node); when the profile could
        not be measured, one built from the set-up's single batch, which the bursts correct."""
        batch_size = self.problem.batch_sizes[0]
        start = self.clock.elapsed()
        # A profile that stalls may wait out half of what is left, no more: the one trial a run
        # must measure still has the other half (NOTE [ The budget is a wall bound ]).
        stall = clipped_timeout(self.options.limits.trial_timeout, self.clock.left() / 2)
        # Its share of the budget, no more: NOTE [ A profile within its share ] in probe/profiler.py.
        self.setup_s = start
        profile, error = self.runner.profile(batch_size, stall, profile_limit(self.clock.budget, self.clock.left()))
        self.measured_profile = profile
        self._timeline.append(("profile", start, self.clock.elapsed(), None))
        self._parts += profile_parts(profile, start)
        if profile is None:
            profile = fallback_profile(info, batch_size, self.problem.hardware.cpus)
        profile = self.ranks.profile(profile, self.problem.hardware.cpus)
        self.progress(Profiled(profile, error, cpus=self.load_cpus, busy=self.options.thresholds.busy))
        return profile, Model(profile, self.problem.device)

    def _strategy(self, model: Model, profile: Profile, info: DatasetInfo) -> Strategy:
        """The search (NOTE [ Model first ]), its memory limits fixed for the run, warm-started."""
        fixed = self.problem.fixed_kwargs
        epoch = min(info.length, profile.epoch_batches * profile.batch_size) if info.length and profile.epoch_batches \
            else info.length
        self.memory = MemoryLimits(ceiling=self.ranks.memory(self.options.limits.max_memory),
                                   shm_free=hardware.shm_free(), runner_uss=info.runner_uss,
                                   runner_pss=info.runner_pss, sample_bytes=info.sample_bytes, length=info.length,
                                   worker_prior=profile.worker_pss or 0, ranks=self.ranks.ranks,
                                   growth=profile.growth, epoch_samples=epoch, methods=profile.methods,
                                   shuffled=fixed.get("shuffle", True) is not False or "sampler" in fixed
                                   or "batch_sampler" in fixed)
        self.space = measured_space(self.space, profile)
        search = ModelFirst(self.space, model, self.problem.hardware.cpus, self.memory.fits,
                            rule_cpus=self.ranks.node_cpus, rule=self.nodes_rule)
        return warmed(search, self.warm_start, self.space)

    def _search(self, strategy: Strategy, started: Started) -> list[TrialResult]:
        """Measure what the strategy proposes until it stops or the time left is the final's."""
        history, again = rule_again(started.history, strategy.rule)   # NOTE [ Fixed outside the code ]
        if again is not None:
            self.progress(RuleRetried(again))
        # A resumed run measures the rule first, however little time is left: the final holds
        # the pick against it (NOTE [ Fixed outside the code ] in store/study.py).
        due = [strategy.rule] if started.history and strategy.rule is not None and not any(
            t.config == strategy.rule for t in history) else []
        once = OnceMore(set(started.crashed_once))   # NOTE [ A crash counts twice ] in store/study.py
        measured = lambda: any(t.status == OK for t in history)  # noqa: E731
        self._own_from = len(history)   # this run's own bursts from here: NOTE [ The opening round ]
        rounds = lambda: rounds_kept(history, strategy.rule, strategy.pick_unmeasured(history))  # noqa: E731
        while True:
            if self.clock.bound_left() <= 0:
                break   # the set-up and the profile took it all: NOTE [ The budget is a wall bound ]
            owed = bool(due)
            config = due.pop() if due else strategy.propose(history)
            if config is None:
                break
            # The burst proposed must fit beside the final's reserve (NOTE [ The next burst's cost ]
            # in search/budget.py); an owed one runs whatever is left, and so does a run's first.
            if not owed and measured() and self.clock.search_left(history, strategy.finalists(history), rounds()) \
                    < burst_seconds(config, history, SEARCH_SETTINGS):
                break
            # The rule's burst is measured in full, however far behind: beside the pick's it makes
            # the final's opening round (NOTE [ The opening round ] in search/choice.py), and a
            # pruned one leaves the final a pair short: the seconds a stopped burst saves cost a
            # whole final round more, whose interval is still wider than the opening's would be.
            result = self._trial(config, started.info, history, prune=config != strategy.rule)
            stands = once.stands(result)
            if stands:
                history.append(result)
            self.progress(TrialDone(len(history) + (not stands), max(len(history), strategy.expected_trials()),
                                    result, best_of(history), self.clock.elapsed(), again=not stands,
                                    cpus=self.load_cpus, busy=self.options.thresholds.busy))
            if (self.clock.over() and measured()) or self.clock.bound_left() <= 0:
                break   # the wall bound ends even a run that measured nothing (NOTE [ The budget is a wall bound ])
        if not measured():
            self._nothing_measured(history)
        return history

    def _nothing_measured(self, history: Sequence[TrialResult]) -> None:
        """Raise why no config was measured: Inconclusive when the clock or the machine stopped it,
        else NoFeasibleConfig, naming what broke."""
        load = self._load_words(history)
        need = self._budget_needed()
        if not history and self.clock.bound_left() <= 0:
            raise Inconclusive(f"nothing measured: the trial process's start-up and the profile took the whole budget "
                               f"({self.clock.elapsed():.0f} s of {self.clock.budget:.0f} s); {load}. Fix: {need}")
        cut = [t for t in history if t.cause == BUDGET_ENDED]
        stalled_busy = all(t.status == HANG for t in history) and self._busy(history)
        if cut or stalled_busy:
            what = (f"the budget ended while {', '.join(t.config.key for t in cut)} still ran" if cut else
                    f"{len(history)} trial(s) stalled while other processes took the CPUs")
            raise Inconclusive(f"nothing measured: {what} ({self.clock.elapsed():.0f} s of "
                               f"{self.clock.budget:.0f} s); {load}. Fix: {need}")
        causes = Counter(t.describe_failure() for t in history)
        listing = "; ".join(f"{n}x {c}" for c, n in causes.most_common(5))
        raise NoFeasibleConfig(f"no config ran: every trial failed or broke a limit ({listing or 'none ran'}). "
                               "Fix: what broke is named above; fix the dataset or step if they raised, "
                               "or raise --max-memory, --trial-timeout or --budget if a limit stopped them")

    def _others(self, history: Sequence[TrialResult]) -> float | None:
        """The most CPUs others took while the run measured (its profile, its trials), if read."""
        seen = [t.others_cpus for t in history if t.others_cpus is not None]
        if self.measured_profile is not None and self.measured_profile.others_cpus is not None:
            seen.append(self.measured_profile.others_cpus)
        if not seen and self._run_meter is not None:   # over the whole run, when nothing else read it
            span = self._run_meter.stop()
            seen += [span.others_cpus] if span is not None else []
        return max(seen) if seen else None

    def _busy(self, history: Sequence[TrialResult]) -> bool:
        others = self._others(history)
        return others is not None and others > self.options.thresholds.busy * self.load_cpus

    def _load_words(self, history: Sequence[TrialResult]) -> str:
        others = self._others(history)
        if others is None:
            return "the machine's load was not read"
        busy = " (a busy machine)" if self._busy(history) else ""
        return f"other processes used up to {others:.1f} of {self.load_cpus:g} CPUs meanwhile{busy}"

    def _budget_needed(self) -> str:
        """The fix's words: the budget a judged tune needs when the profile found a slow step."""
        profile = self.measured_profile
        said = budget_words(profile.step_s, profile.worker_batch_s(), self.setup_s) if profile is not None else None
        return said or ("raise --budget (a machine others load starts processes several times slower), or run "
                        "when the machine is quieter")

    def _trial(self, config: LoaderConfig, info: DatasetInfo, history: Sequence[TrialResult],
               prune: bool = True) -> TrialResult:
        """One search trial, recorded in the study: not run when its memory is predicted past a
        limit; stopped early when clearly behind the best so far (``prune``)."""
        # The watchdog's timeout is the user's, never clipped to the budget: one the wall bound
        # ends while it still steps is a cut (BUDGET_ENDED), not a hang.
        limits = self.options.limits
        unstored = self.store.write_failed
        trial = self.store.begin(config, limits, info.code)
        start = self.clock.elapsed()
        breach = self.memory.breach(config, history)
        if breach is not None:
            result = TrialResult(config, CONSTRAINT, cause="predicted_memory", error=breach)
        else:
            best = best_of(history, tolerance=0.0) if prune else None
            settings = self.clock.window_for(dataclasses.replace(
                SEARCH_SETTINGS, prune_below=prune_line(best.samples_per_s if best else None)), overhead_seconds(history))
            result = self.runner.measure(config, settings, limits.trial_timeout)
        self._timeline.append(("burst", start, self.clock.elapsed(), config.key))
        self.store.finish(trial, result)
        if self.store.write_failed and not unstored:
            self.progress(TrialsUnstored(self.store.write_failed))
        if result.cause == LOADER_ARGUMENTS:   # bad input, not this config's failure
            raise InputError(result.error)
        return result

    def _final(self, strategy: Strategy, profile: Profile,
               history: Sequence[TrialResult]) -> tuple[list[Finalist], MachineLoad]:
        """The interleaved final, with the previous pick in it, and the machine's load over the run."""
        final = Final(self.clock, self._timed(final_measurement(self.runner, lambda: self.options.limits)),
                      self.progress)
        previous_pick = self._previous_pick()
        chosen = final_configs(strategy.finalists(history), strategy.rule, previous_pick, history,
                               lambda config: self.memory.fits(config, history), strategy.model_pick(history))
        decide = lambda finals: choose(finals, history, strategy.rule,  # noqa: E731
                                       narrow=strategy.short_of_headroom([f.config for f in finals], history),
                                       cpus=strategy.cpus)
        finals = final.run(chosen, history, strategy.rule, previous_pick, decide,
                           opening_round(history, chosen, self._own_from))
        load = machine_load(self.load_cpus, profile, history, final.results, self.options.thresholds.busy)
        narrow = strategy.short_of_headroom([f.config for f in finals], history)
        finals = final.recheck(finals, history, load, strategy.rule, narrow, strategy.cpus)
        if self.before is not None and previous_pick is not None and not load.busy:   # NOTE [ Drift ]
            finals = final.settle(finals, history, previous_pick, lambda now: settled(
                self.before, now, previous_pick, self.ranks.ranks, self.options.thresholds))
        return finals, machine_load(self.load_cpus, profile, history, final.results, self.options.thresholds.busy)

    def _previous_pick(self) -> LoaderConfig | None:
        """The previous result's pick when it is this hardware's, comparable, and in the space."""
        before = self.before
        if before is None or before.measured_differently() is not None \
                or before.hardware.fingerprint != self.problem.hardware.fingerprint:
            return None
        pick = before.tuned.config
        return pick if self.space.contains(pick) else None

    def _timed(self, measure):
        """``measure`` with each final measurement put on the run's timeline."""
        def timed(config: LoaderConfig) -> TrialResult:
            start = self.clock.elapsed()
            result = measure(config)
            self._timeline.append(("final", start, self.clock.elapsed(), config.key))
            return result
        return timed
