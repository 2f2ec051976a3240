"""One tuning run: start the trial process, search, run the final, choose, save.

``tuner.tune()`` checks the inputs (``Problem``, ``Options``) and hands them to ``Run``; the run
owns the trial process, the study and the clock, and releases the trial process however it ends.
First the profile (probe/profiler.py) and the model built on it (model.py); the strategy
(model_first.py) chooses what to measure, ``choice`` the pick, ``budget`` the time: this module
only sequences them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import AutoloaderError, NoFeasibleConfig, UsageError, usage
from ..inputs import hardware
from ..inputs.limits import (
    batch_samples,
    check_ceiling_fits_ram,
    clipped_timeout,
    warn_batch_past_length,
)
from ..inputs.problem import Problem
from ..node.core import Node, NodeRunner, rank_ceiling
from ..probe.driver import TrialRunner
from ..probe.guard import predict_peak
from ..probe.protocol import RunnerSetup, SetupError
from ..search.budget import Clock, round_seconds, trial_seconds
from ..search.choice import Finalist, best_of, choose, rate_here
from ..search.config import TunedConfig
from ..search.knee import Knee, find_knee
from ..search.model import Calibration, Model, Prediction
from ..search.model_first import ModelFirst
from ..search.policy import (
    FINAL_ROUNDS,
    FINAL_SETTINGS,
    MAX_WORKERS_PER_CPU,
    PRUNE_SHARE,
    SEARCH_SETTINGS,
)
from ..search.profile import Profile
from ..search.results import CONSTRAINT, OK, TrialResult
from ..search.space import LoaderConfig, SearchSpace
from ..search.strategy import Strategy
from ..search.warm import WarmStart, warm_record, warmed
from ..store.durable import save
from ..store.paths import default_storage, resolve_out, result_path, study_name
from ..store.retry import OnceMore
from ..store.study import Limits, StudyStore
from ..store.validate import FORMAT as RESULT_FORMAT
from ..store.versions import provenance
from .compare import Comparison, compare, format_note, previous_result

DEFAULT_BUDGET_S = 60.0
DEFAULT_TRIAL_TIMEOUT_S = 60.0
MIN_BUDGET_S = 10.0
# Share of available RAM the loader's processes may use when --max-memory is not given.
DEFAULT_MEMORY_SHARE = 0.6
# Below this no trial fits (the trial process alone is 0.4-0.6 GB); "16" meant as 16G is 16 bytes.
MIN_MAX_MEMORY = 256 * 2**20

Progress = Callable[[str, dict], None]


@dataclass(frozen=True)
class Options:
    """How much a run may spend and where it writes, checked before anything starts."""

    budget: float
    limits: Limits
    out: str
    storage: str | None

    @classmethod
    def build(cls, budget: float, trial_timeout: float, max_memory: int | str | None, out: str | None,
              storage: str | None) -> "Options":
        out = resolve_out(out)
        if isinstance(trial_timeout, bool) or not isinstance(trial_timeout, (int, float)) or not trial_timeout > 0:
            raise usage("the trial timeout must be a positive number of seconds", trial_timeout,
                        "pass e.g. trial_timeout=60 (--trial-timeout 60)")
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) \
                or not math.isfinite(budget) or budget < MIN_BUDGET_S:
            raise usage(f"the budget must leave time for at least one trial ({MIN_BUDGET_S:.0f} s or more)",
                        budget, f"pass --budget 60 or more (the default is {DEFAULT_BUDGET_S:.0f})")
        if max_memory is not None:
            ceiling = hardware.parse_size(max_memory)
            if ceiling < MIN_MAX_MEMORY:
                raise usage(f"the memory ceiling must hold the trial process and its batches, so "
                            f"{MIN_MAX_MEMORY // 2**20} MiB or more (a number without a unit counts bytes)",
                            max_memory, "write the unit, e.g. --max-memory 16G (max_memory='16G')")
            check_ceiling_fits_ram(ceiling, max_memory, DEFAULT_MEMORY_SHARE)
        else:
            ceiling = int(DEFAULT_MEMORY_SHARE * hardware.available_memory())
            if ceiling < MIN_MAX_MEMORY:
                raise usage(f"the default memory ceiling, {DEFAULT_MEMORY_SHARE:.0%} of the RAM available now, must be "
                            f"{MIN_MAX_MEMORY // 2**20} MiB or more to hold the trial process and its batches",
                            f"{ceiling / 2**20:.0f} MiB", "free memory, or pass --max-memory (e.g. 2G)")
        if os.path.exists(out) and not os.path.isdir(out):
            raise usage("--out is the folder results are written to", out,
                        "pass a folder (it is made if missing), not a file")
        return cls(float(budget), Limits(ceiling, float(trial_timeout)), out, storage)


@dataclass(frozen=True)
class TuneResult:
    """What ``tune()`` returns: the pick, every trial, the final round and where it was saved."""

    tuned: TunedConfig
    trials: tuple[TrialResult, ...]
    finals: tuple[Finalist, ...]
    path: str
    snippet_path: str
    storage: str
    tune_seconds: float
    resumed_trials: int
    orphans: int
    shm_leaks: int = 0
    since: Comparison | None = None   # against the previous result for this problem, if any
    profile: Profile | None = None
    calibration: Calibration | None = None
    predicted: Prediction | None = None   # the model's figures for the pick, corrected by the bursts
    control: LoaderConfig | None = None   # the rule the tuner replaces, measured in the final
    reorder_gain: float | None = None     # predicted gain of in_order=False, when not allowed
    model_error: tuple[dict, ...] = ()    # each burst: predicted against measured
    study: str = ""                       # the study's name in its storage, and this run's id in it
    run_id: str = ""
    priors: int = 0                       # earlier complete runs' configs this run could start from
    dataset: dict | None = None           # what was tuned: name, length, content fingerprint, version
    provenance: dict | None = None        # measurement format, autoloader version, when
    warm_start: WarmStart | None = None
    early_stop: bool = False              # the warm start's pick held and the search ended there
    node: dict | None = None              # a node's tune: NOTE [ Tuning a node's ranks ] in node.py

    @property
    def config(self) -> LoaderConfig:
        return self.tuned.config

    @property
    def samples_per_s(self) -> float:
        return self.tuned.samples_per_s

    @property
    def knee(self) -> Knee | None:
        return self.tuned.knee

    @property
    def curve(self) -> tuple[tuple[int, float], ...]:
        return self.tuned.knee.curve if self.tuned.knee else ()

    @property
    def control_samples_per_s(self) -> float | None:
        """The control's final median: what the rule the tuner replaces reads in this run (on a
        node, the node's rate: its ranks x the slowest rank's)."""
        median = next((f.median for f in self.finals if f.config == self.control), None)
        return median * self.ranks if median is not None else None

    @property
    def ranks(self) -> int:
        return self.node["ranks"] if self.node else 1

    def faults(self) -> dict[str, int]:
        """Failed or infeasible trials by cause."""
        return dict(Counter(t.cause for t in self.trials if t.status != OK))

    def to_dict(self) -> dict:
        return {"format": RESULT_FORMAT, **self.tuned.to_dict(), "path": self.path, "snippet_path": self.snippet_path,
                "storage": self.storage, "tune_seconds": self.tune_seconds,
                "resumed_trials": self.resumed_trials, "orphans": self.orphans, "shm_leaks": self.shm_leaks,
                "faults": self.faults(), "since": self.since.to_dict() if self.since else None,
                "trials": [t.to_dict() for t in self.trials], "finals": [f.to_dict() for f in self.finals],
                "profile": self.profile.to_dict() if self.profile else None,
                "profile_seconds": self.profile.seconds if self.profile else None,
                "calibration": self.calibration.to_dict() if self.calibration else None,
                "predicted": self.predicted.to_dict() if self.predicted else None,
                "predicted_samples_per_s": self.predicted.samples_per_s if self.predicted else None,
                "bound": self.predicted.bound if self.predicted else None,
                "control": self.control.loader_kwargs() if self.control else None,
                "control_samples_per_s": self.control_samples_per_s,
                "reorder_gain": self.reorder_gain, "model_error": list(self.model_error),
                "study": self.study, "run_id": self.run_id, "priors": self.priors, "dataset": self.dataset,
                "warm_start": warm_record(self.warm_start), "early_stop": self.early_stop,
                **({"node": self.node} if self.node else {}), **(self.provenance or {})}


def search_space(batch_sizes: Sequence[int], cpus: int, device: str) -> SearchSpace:
    """What a tuning run may vary on this machine: workers up to MAX_WORKERS_PER_CPU per CPU, and
    pinning both ways on CUDA (it only matters there)."""
    return SearchSpace(batch_sizes=tuple(batch_sizes), max_workers=MAX_WORKERS_PER_CPU * cpus,
                       pin_choices=(True, False) if device.startswith("cuda") else (False,))


class Run:
    """One tuning run of ``problem`` under ``options``. ``run()`` once. ``node``: rank 0 of a
    node's ranks, tuned together (NOTE [ Tuning a node's ranks ] in node.py); the problem's
    hardware is then one rank's (``Node.hardware``)."""

    def __init__(self, problem: Problem, options: Options, progress: Progress | None = None,
                 warm_start: WarmStart | None = None, node: Node | None = None):
        self.problem = problem
        self.node = node
        self.ranks = node.world if node is not None else 1
        self.options = options
        self.warm_start = warm_start    # NOTE [ Warm start ] in warm.py
        self.clock = Clock(options.budget)
        self.space = search_space(problem.batch_sizes, problem.hardware.cpus, problem.device)
        self.progress = progress or (lambda event, data: None)
        self._worker_prior = 0
        self.store: StudyStore | None = None
        setup = RunnerSetup(problem.dataset, problem.step, problem.device, problem.fixed_kwargs,
                            problem.batch_sizes[0])
        self.runner = (NodeRunner(node, setup, options.limits.max_memory, options.limits.trial_timeout)
                       if node is not None else
                       TrialRunner(setup, max_memory=options.limits.max_memory,
                                   hang_timeout_s=options.limits.trial_timeout))

    def run(self) -> TuneResult:
        try:
            try:
                info = self.runner.start()
            except SetupError as exc:
                raise (UsageError(str(exc)) if exc.usage else AutoloaderError(str(exc))) from None
            warn_batch_past_length(self.space.batch_sizes, info.length)
            self._check_shm(info)
            problem = self.problem.with_length(info.length, info.fingerprint)
            key, fingerprint = problem.key, problem.hardware.fingerprint
            url = self.options.storage or default_storage(self.options.out, fingerprint, key)
            store = self.store = StudyStore(url, study_name(fingerprint, key), self.space,
                                            given=self.options.storage is not None)
            loaded = store.reread(self.options.limits, info.code)
            history = list(loaded.trials)
            resumed = len(history)
            priors = store.priors()
            self.progress("start", {"key": key, "info": info, "resumed": resumed, "retried": loaded.limit_raised,
                                    "code_changed": loaded.code_changed, "crashed_once": len(loaded.crashed_once),
                                    "invalid": loaded.invalid, "moved_aside": store.moved_aside,
                                    "stale": store.stale_repaired, "device": problem.device,
                                    "cpus": problem.hardware.cpus, "ranks": self.ranks, "budget": self.clock.budget,
                                    "max_memory": self.options.limits.max_memory, "storage": store.shown_url,
                                    "priors": len(priors)})
            if store.write_failed:
                self.progress("unstored", {"message": store.write_failed})
            profile = self._profile(info)
            model = Model(profile, problem.device)
            fits = lambda config, history: self._predicted_breach(config, info, history) is None  # noqa: E731
            strategy = warmed(ModelFirst(self.space, model, problem.hardware.cpus, problem.allow_reorder, fits,
                                         control_cpus=self.node.node_cpus if self.node else None),
                              self.warm_start, self.space)
            self.clock.finalists = strategy.finalists
            self._search(strategy, store, history, info, OnceMore.after(loaded.crashed_once))
            finals = self._final(strategy.finalists(history), history)
            pick = choose(finals, history, control=strategy.control)
            calib = strategy.calibration(history)
            predicted = model.predict(pick.config, calib)
            baseline = _baseline(finals, history)
            tuned = TunedConfig(config=pick.config, samples_per_s=pick.rate * self.ranks,
                                rel_interval=pick.trial.rel_interval,
                                baseline_samples_per_s=baseline * self.ranks if baseline else baseline,
                                knee=_knee(strategy, history), hardware=problem.hardware.to_dict(),
                                dataset_key=key, device=problem.device)
            path = result_path(self.options.out, fingerprint, key)
            snippet_path = result_path(self.options.out, fingerprint, key, ".py")
            previous = previous_result(self.options.out, fingerprint, key)  # before it is replaced
            since = (compare(previous[1], tuned, previous[0], _times(rate_here(previous[1].config, finals, history),
                                                                      self.ranks),
                             format_note(previous[0])) if previous else None)
            result = TuneResult(tuned, tuple(history), tuple(finals), path, snippet_path, store.shown_url,
                                self.clock.elapsed(), resumed, self.runner.orphans, self.runner.shm_leaks,
                                since=since, profile=profile, calibration=calib, predicted=predicted,
                                control=strategy.control, reorder_gain=_reorder_gain(model, pick.config, calib,
                                                                                     problem.allow_reorder),
                                model_error=tuple(model.model_error(history, calib)), study=store.study.study_name,
                                run_id=store.run.run_id, priors=len(priors), dataset=_dataset_record(problem),
                                provenance=provenance(), warm_start=self.warm_start,
                                early_stop=getattr(strategy, "stopped_early", False), node=self._node_record())
            save(result, {snippet_path: tuned.snippet(),
                          path: json.dumps(result.to_dict(), indent=2, default=str) + "\n"}, store)
            store.complete(_summary(result))
            self.progress("done", {"result": result})
            return result
        except AutoloaderError:
            if self.store is not None:
                self.store.failed()   # ended, not interrupted: the next run starts afresh
            raise
        finally:
            if self.store is not None:
                self.store.close()
            self.runner.close()

    def _node_record(self) -> dict | None:
        """What a node's result says of the node: how its figures were made."""
        if self.node is None:
            return None
        return {"ranks": self.ranks, "node_cpus": self.node.node_cpus, "cpus_per_rank": self.node.rank_cpus,
                "max_memory_per_rank": rank_ceiling(self.options.limits.max_memory, self.ranks),
                "config": "per rank: every rank runs this DataLoader on its DistributedSampler shard",
                "samples_per_s": "the node's: ranks x the slowest rank's; trials and finals list the slowest "
                                 "rank's (rank_samples_per_s: every rank's)",
                "profile": "rank 0's alone"}

    def _profile(self, info) -> Profile:
        """The pipeline's profile from the trial process; when it could not be measured, one
        built from the set-up's single batch, which the bursts then correct."""
        profile, error = self.runner.profile(self.problem.batch_sizes[0], self._limits_now().trial_timeout)
        if profile is None:
            profile = fallback_profile(info, self.problem.batch_sizes[0], self.problem.hardware.cpus)
        if self.node is not None:
            # The model is one rank's: its CPUs are the rank's share, its epoch the rank's shard.
            epoch = profile.epoch_batches
            profile = dataclasses.replace(profile, cpus=self.problem.hardware.cpus,
                                          epoch_batches=-(-epoch // self.ranks) if epoch else epoch)
        self._worker_prior = profile.worker_pss or 0
        self.progress("profile", {"profile": profile, "error": error})
        return profile

    def _check_shm(self, info) -> None:
        free = hardware.shm_free()
        need = info.sample_bytes * batch_samples(min(self.space.batch_sizes), info.length) * self.ranks
        if free is not None and free < need:
            raise usage("/dev/shm must hold at least one batch, since DataLoader workers pass batches through it",
                        f"{free / 2**20:.1f} MiB free, one batch is {need / 2**20:.1f} MiB",
                        "raise the shared-memory size (docker run --shm-size=8g, or a larger /dev/shm "
                        "mount), or use a smaller --batch-size")

    def _predicted_breach(self, config: LoaderConfig, info, history) -> str | None:
        host, shm = predict_peak(config, info.runner_uss, info.runner_pss, info.sample_bytes, history,
                                 worker_prior=self._worker_prior, length=info.length)
        ceiling = rank_ceiling(self.options.limits.max_memory, self.ranks)
        if host > ceiling:
            per = f" (one rank's share of {self.ranks})" if self.ranks > 1 else ""
            return f"predicted {host / 2**30:.2f} GiB host memory > {ceiling / 2**30:.2f} GiB ceiling{per}"
        free = hardware.shm_free()
        shm *= self.ranks   # every rank's workers fill the one /dev/shm
        if free is not None and config.num_workers and shm > free:
            return f"predicted {shm / 2**30:.2f} GiB in /dev/shm > {free / 2**30:.2f} GiB free"
        return None

    def _limits_now(self) -> Limits:
        """The limits the next trial runs under: the watchdog's timeout clipped to the budget left."""
        limits = self.options.limits
        return dataclasses.replace(limits, trial_timeout=clipped_timeout(limits.trial_timeout, self.clock.left()))

    def _trial(self, config: LoaderConfig, info, history: Sequence[TrialResult], limits: Limits) -> TrialResult:
        """One search trial: not run when its memory is predicted past a limit; stopped early when
        clearly behind the best so far."""
        breach = self._predicted_breach(config, info, history)
        if breach is not None:
            return TrialResult(config, CONSTRAINT, cause="predicted_memory", error=breach)
        best = best_of(history, tolerance=0.0)
        settings = dataclasses.replace(SEARCH_SETTINGS, prune_below=best.samples_per_s * PRUNE_SHARE if best else None)
        return self.runner.measure(config, settings, limits.trial_timeout)

    def _search(self, strategy: Strategy, store: StudyStore, history: list[TrialResult], info,
                once: OnceMore) -> None:
        measured = lambda: any(t.status == OK for t in history)  # noqa: E731
        while True:
            if self.clock.search_left(history) < trial_seconds(history) and measured():
                break
            config = strategy.propose(history)
            if config is None:
                break
            unstored = store.write_failed
            limits = self._limits_now()
            trial = store.begin(config, limits, info.code)
            result = self._trial(config, info, history, limits)
            store.finish(trial, result)
            stands = once.stands(result)   # NOTE [ A crash counts twice ] in retry.py
            if stands:
                history.append(result)
            self.progress("trial", {"n": len(history) + (not stands), "again": not stands,
                                    "expected": max(len(history), strategy.expected_trials()),
                                    "result": result, "best": best_of(history), "elapsed": self.clock.elapsed()})
            if store.write_failed and not unstored:
                self.progress("unstored", {"message": store.write_failed})
            if self.clock.over() and measured():
                break
        if not measured():
            causes = Counter(t.describe_failure() for t in history)
            listing = "; ".join(f"{n}x {c}" for c, n in causes.most_common(5))
            raise NoFeasibleConfig(f"no config ran: every trial failed or broke a limit ({listing or 'none ran'}). "
                                   "Fix: what broke is named above; fix the dataset or step if they raised, "
                                   "or raise --max-memory, --trial-timeout or --budget if a limit stopped them")

    def _final(self, chosen: list[LoaderConfig], history: Sequence[TrialResult]) -> list[Finalist]:
        """``chosen`` re-measured interleaved, as many rounds as the budget has left, up to
        FINAL_ROUNDS. When a round of all does not fit, the first and the control (last); when
        not even that fits, no final: the budget is a cap, and the choice then weighs the bursts
        as one round (choice.choose)."""
        if len(chosen) < 2:
            return []
        left = self.clock.left()
        per_round = round_seconds(chosen, history)
        if per_round > left and len(chosen) > 2:
            # Two, the control one of them: the pick is never handed back unchecked against it.
            chosen = [chosen[0], chosen[-1]]
            per_round = round_seconds(chosen, history)
        rounds = min(FINAL_ROUNDS, int(left / per_round))
        if rounds < 1:
            return []
        rates: dict[LoaderConfig, list[float]] = {c: [] for c in chosen}
        waits: dict[LoaderConfig, list[float]] = {c: [] for c in chosen}
        taken: dict[LoaderConfig, list[int]] = {c: [] for c in chosen}
        for round_index in range(rounds):
            for config in chosen:
                measured = self.runner.measure(config, FINAL_SETTINGS, self._limits_now().trial_timeout)
                if measured.status == OK:
                    rates[config].append(measured.samples_per_s)
                    taken[config].append(round_index)
                    if measured.wait_fraction is not None:
                        waits[config].append(measured.wait_fraction)
            self.progress("final", {"round": round_index + 1, "rounds": rounds,
                                    "rates": {c.key: list(r) for c, r in rates.items()}})
        trials = {t.config: t for t in history if t.status == OK}
        return [Finalist(c, tuple(r), tuple(waits[c]), trials.get(c), tuple(taken[c])) for c, r in rates.items() if r]


def _times(rate: float | None, ranks: int) -> float | None:
    return rate * ranks if rate is not None else None


def _knee(strategy: Strategy, history: Sequence[TrialResult]) -> Knee | None:
    """The knee of the worker curve the strategy reports (the corrected model's, for the pick's
    other settings)."""
    curve = strategy.curve(history)
    return find_knee(curve) if curve else None


def _reorder_gain(model: Model, config: LoaderConfig, calib: Calibration, allowed: bool) -> float | None:
    """What in_order=False is predicted to gain over the pick, when the user did not allow it
    (it changes the order of batches, so it is never chosen silently)."""
    if allowed or not config.num_workers:
        return None
    base = model.predict(config, calib).samples_per_s
    return model.predict(config.replace(in_order=False), calib).samples_per_s / base - 1.0 if base else None


def fallback_profile(info, batch_size: int, cpus: int) -> Profile:
    """A profile from the set-up's one batch alone (its per-sample time and bytes), for when the
    profile could not be measured: every other cost starts at zero, for the bursts to correct."""
    return Profile(batch_size=batch_size, sample_s=(info.sample_seconds,), collate_s=0.0,
                   sample_bytes=info.sample_bytes, recv_s=0.0, pin_s=0.0, h2d_pinned_s=0.0, h2d_pageable_s=0.0,
                   step_s=0.0, startup_s=0.0, worker_pss=None, cpus=cpus,
                   epoch_batches=-(-info.length // batch_size) if info.length else None)


def _dataset_record(problem: Problem) -> dict:
    return {"name": problem.dataset.name, "length": problem.length, "content": problem.content,
            "version": problem.version}


def _summary(result: TuneResult) -> dict:
    """A complete run's pick, as its mark in the study keeps it (NOTE [ Runs in a study ]): what
    ``autoloader show`` and a warm start read from a shared storage without the result file."""
    data = result.to_dict()
    return {k: data.get(k) for k in ("config", "samples_per_s", "rel_interval", "baseline_samples_per_s", "knee",
                                     "hardware", "dataset_key", "device", "dataset", "measurement_format",
                                     "autoloader_version", "finished_at", "path")}


def _baseline(finals: Sequence[Finalist], history: Sequence[TrialResult]) -> float | None:
    """num_workers=0's rate in the same protocol as the pick: the final's when it was there."""
    return next((f.median for f in finals if f.config.num_workers == 0), None) or next(
        (t.samples_per_s for t in history if t.status == OK and t.config.num_workers == 0), None)
