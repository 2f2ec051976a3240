"""A run's result record: assembled from what the run measured and chose, compared with the
previous result of the problem, written, and the run marked complete; with its what-ifs.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass
from typing import Sequence

from ..errors import AutoloaderWarning
from ..events import Progress, TuneDone
from ..inputs import hardware
from ..inputs.options import Options
from ..inputs.problem import Problem
from ..node.ranks import Ranks
from ..search.budget import Clock, budget_words
from ..search.choice import Finalist, provisional_reason
from ..search.config import TunedConfig
from ..search.results import MachineLoad, TrialResult
from ..search.memory import MemoryLimits
from ..search.model import Model
from ..search.model_first import Strategy, WarmStart
from ..search.profile import Profile, threads_of
from ..search.shards import stream_record
from ..store.durable import write_failure
from ..store.history import keep
from ..store.paths import result_path
from ..store.records import Inputs, NodeRecord, Provenance, WhatIfClaim
from ..store.result import TuneResult
from ..store.snippet import snippet
from ..store.study import StudyStore, save
from ..store.versions import provenance
from .compare import Comparison, compare
from .measured import baseline_rate, dataset_record, knee_of, reorder_gain
from .start import start_choice


@dataclass(frozen=True)
class Ran:
    """What the record reads of the run beside the search (``before``: the previous result of the
    problem, read before this one replaces it)."""
    options: Options
    ranks: Ranks
    clock: Clock
    orphans: int
    shm_leaks: int
    warm_start: WarmStart | None
    uncapped: int
    memory: MemoryLimits
    timeline: tuple
    parts: tuple
    before: TuneResult | None


def record(ran: Ran, started, profile: Profile, model: Model, strategy: Strategy, history: Sequence[TrialResult],
           finals: Sequence[Finalist], pick: Finalist, load: MachineLoad, store: StudyStore,
           progress: Progress) -> TuneResult:
    """The result: the pick with its figures, compared, written, and the run marked complete."""
    problem, out, ranks, memory = started.problem, ran.options.out, ran.ranks, ran.memory
    key, fingerprint = problem.key, problem.hardware.fingerprint
    calib = strategy.calibration(history)
    tuned = TunedConfig(config=pick.config, samples_per_s=ranks.rate(pick.rate),
                        rel_interval=pick.trial.rel_interval if pick.trial is not None else None,
                        baseline_samples_per_s=ranks.rate(baseline_rate(finals, history)),
                        knee=knee_of(strategy, history) if profile.measured else None,
                        hardware=problem.hardware.to_dict(),
                        dataset_key=key, device=problem.device,
                        provisional=provisional_reason(pick.config, finals, load.busy, load.others_cpus,
                                                       load.usable_cpus, budget_hint(ran, profile)))
    info = started.info
    node = NodeRecord(ranks.ranks, ranks.node_cpus, ranks.rank_cpus,
                      ranks.memory(ran.options.limits.max_memory)) if ranks.node else None
    result = TuneResult(
        tuned, tuple(history), tuple(finals), result_path(out, fingerprint, key),
        result_path(out, fingerprint, key, ".py"), store.shown_url, ran.clock.elapsed(), len(started.history),
        ran.orphans, ran.shm_leaks, profile=profile, calibration=calib,
        # Without a measured profile the model has nothing to draw a curve from: no figure is
        # predicted (the table says "not predicted"), no knee found.
        predicted=model.predict(pick.config, calib) if profile.measured else None, rule=strategy.rule,
        reorder_gain=reorder_gain(model, pick.config, calib, problem.allow_reorder) if profile.measured else None,
        model_error=tuple(model.model_error(history, calib)), study=store.study.study_name,
        run_id=store.run.run_id, dataset=dataset_record(problem), provenance=Provenance(**provenance()),
        warm_start=ran.warm_start, early_stop=strategy.stopped_early, node=node,
        inputs=inputs_of(ran, problem),
        memory=memory.forecast(pick.config, history),
        rule_memory=memory.forecast(strategy.rule, history) if strategy.rule else None,
        load=load, threads=threads_of(profile, info.threads),
        stream=stream_record(info.shards, info.shards_from, ran.uncapped, history, profile,
                             problem.hardware.cpus)
        if info.length is None and info.nodes is None else None, nodes=info.nodes,
        start=start_choice(problem, profile, pick.config, memory, model, calib, history, strategy.rule))
    result = dataclasses.replace(result, what_ifs=what_if_claims(result))
    before = ran.before
    if before is not None:
        result = dataclasses.replace(result, since=since(before, result, ran.options))
    if not result.conclusive and before is not None and before.where == result.path:
        try:
            keep(out, fingerprint, key, before)   # the baseline this result replaces stays findable
        except OSError as exc:
            warnings.warn(AutoloaderWarning(f"{write_failure('the previous result', before.where, exc)}; "
                                            "this run's result replaces it all the same"), stacklevel=2)
    save(result, {result.snippet_path: snippet(tuned, result.nodes),
                  result.path: json.dumps(result.to_dict(), indent=2, default=str) + "\n"}, store)
    store.complete(result)
    progress(TuneDone(result))
    return result


def budget_hint(ran: Ran, profile: Profile) -> str | None:
    """What would judge a provisional pick of a slow pipeline: the budget it needs (search/budget.py)."""
    setup = next((end for what, _, end, _ in ran.timeline if what == "set-up"), 0.0)
    said = budget_words(profile.step_s, profile.worker_batch_s(), setup)
    return f"{said} for a judged tune" if said else None


def since(before: TuneResult, result: TuneResult, options: Options) -> Comparison | None:
    """``result`` against the previous one; one that fails is said, and the result saved without it."""
    try:
        return compare(before, result, options.thresholds)
    except Exception as exc:  # noqa: BLE001 - the search is done; its pick must not be lost to the comparison
        warnings.warn(AutoloaderWarning(f"the comparison with the previous result {before.where} failed "
                                        f"({type(exc).__name__}: {exc}); the result is saved without it"),
                      stacklevel=2)
        return None


def inputs_of(ran: Ran, problem: Problem) -> Inputs:
    """What the explanation (explain/) needs beside the figures (``problem``: as started)."""
    ceiling = ran.options.ceiling
    return Inputs(problem.step.name if problem.step else None, problem.allow_reorder,
                  ran.ranks.memory(ran.options.limits.max_memory), hardware.shm_free(),
                  tuple(tuple(mark) for mark in ran.timeline),
                  problem.step_identity if problem.step else None, tuple(ran.parts),
                  ceiling.by if ceiling else None, ceiling.cgroup.limit if ceiling and ceiling.cgroup else None)


def what_if_claims(result) -> tuple[WhatIfClaim, ...]:
    """Every what-if of ``result``, predicted beside measured and how sure (``whatif.how_sure``);
    none without a measured profile. One that fails is said, and the result saved without it."""
    if getattr(result, "profile", None) is None or result.partial or not getattr(result.profile, "measured", True):
        return ()
    from ..explain import Evidence, how_sure, whatifs

    try:
        ev = Evidence.from_result(result)
        return tuple(WhatIfClaim(w.name, w.title, w.rate * ev.ranks, w.gain, **how_sure(ev, w)) for w in whatifs(ev))
    except Exception as exc:  # noqa: BLE001 - the search is done; its pick must not be lost to the what-ifs
        warnings.warn(AutoloaderWarning(f"the what-ifs could not be worked out ({type(exc).__name__}: {exc}); "
                                        "the result is saved without them"), stacklevel=2)
        return ()
