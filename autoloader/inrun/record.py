"""What an in-run tune stores and says: the result under the problem's key, and one closing line.

# NOTE [ What an in-run tune stores ]
# The result is a ``TuneResult`` as a CLI tune writes it, under the same key (the dataset, its
# batch size, the device, the fixed arguments; no step), so the next ``best_loader`` call, and
# ``autoloader show``, find it: the pick, its rate, the rule, and each config the climb read with
# its rates by pair, as the final's by round (the verdict against the rule is computed from them
# as for any result, where the climb read the rule). Its rate is the loop's: samples per second of the real training loop, step included,
# not the loader's alone. Beside it, ``in_run`` holds what the run measured: every segment read,
# the pick's rate and wait share over the rest of its epoch, the tuned epochs' wall time and the
# cost of tuning (that time less what the pick's measured pace takes for the same batches and one
# start: an estimate, below zero where the load moved more than tuning cost; ``tune_seconds``
# holds it from zero up, as a tune's time is). It is written when the pick is settled (a loop stopped early keeps it) and again when
# the pick's epoch ends, with the pick's own reading. The closing line states the pick against the
# config it names with the interval the climb judged its steps by (``Plan.versus``: over fewer
# than OWN_SPREAD pairs each reading's own spread counts, NOTE [ The climb ] in schedule.py).

# NOTE [ One tune of a problem at a time ]
# Tunes of one problem into one results folder take turns (the problem's lock, store/paths.py),
# so that none measures on cores another is using and none overwrites another's result. A tune
# in the run cannot wait its turn: the loop is already running. So its loader takes the lock
# without waiting when it is made (``Claim``) and holds it until the result is stored at the end
# of the pick's epoch (or the loader is closed, or the process ends). Where another process holds
# it (a tune before its run, or another run tuning in its loop), the loader tunes nothing and
# stores nothing: it trains with its start config, and at each epoch's start reads whether the
# other tune stored its result; from the first epoch after, it reads with the config that result
# hands out (as ``best_loader`` would), where the memory forecast lets it start. A tune before the
# run that finds the lock held by a tune in a run waits for it (``WaitingForLock``), as for any.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from ..errors import NotStored
from ..node.ranks import Ranks
from ..search.choice import Finalist
from ..search.config import TunedConfig
from ..events import InRunAdopted, InRunDone, InRunExploring, InRunFollowing, InRunNotAdopted, InRunSettled, InRunStarted, SegmentRead
from ..events.lines import loader_args
from ..search.paired import by_rounds
from ..store.durable import atomic_write_all
from ..store.paths import Claim, lock_path, result_path
from ..store.records import NodeRecord, Provenance
from ..store.snippet import snippet
from ..store.versions import provenance
from ..tuning.measured import dataset_record
from ..store.result import TuneResult
from . import schedule


def tune_cost(loader: Any) -> tuple[float, float, float] | None:
    """(the tuned epochs' wall time, what the pick's measured pace takes for their batches and
    one start, their difference: the cost of tuning); None before the pick's own reading."""
    final = loader.final
    if final is None or not loader.tuned_epochs:
        return None
    wall = sum(loader.epoch_s[:loader.tuned_epochs])
    plain = loader.tuned_epochs * (len(loader) * final.cycle_s + final.switch_s)
    return wall, plain, wall - plain


def in_run_record(loader: Any) -> dict:
    plan, final = loader.plan, loader.final
    cost = tune_cost(loader)
    return {"segments": [r.to_dict() for r in plan.readings],
            "finalists": [c.loader_kwargs() for c in plan.finalists], "segment_s": schedule.SEGMENT_S,
            "rounds": plan.rounds_done, "steps": plan.steps, "why": plan.why, "start": plan.start.loader_kwargs(),
            "run_epochs": loader.run_epochs,
            "refused_by_memory": [c.loader_kwargs() for c in loader.refused],
            "pick_samples_per_s": final.rate if final is not None else plan.median(plan.pick),
            "pick_wait_share": final.wait_share if final is not None else None,
            "step_s": final.step_s if final is not None else None,
            "epochs_tuned": loader.tuned_epochs, "epoch_s": cost[0] if cost else None,
            "pick_from_start_s": cost[1] if cost else None, "tuning_cost_s": cost[2] if cost else None,
            "profile_seconds": loader._proposer.profile.seconds if loader._proposer.profile is not None else None}


def result_of(loader: Any, problem: Any, out: str, node: Any = None) -> tuple[TuneResult, dict]:
    """The stored record of ``loader``'s tune (NOTE [ What an in-run tune stores ]); under
    torchrun (``node``: node/group.py's ``Node``) the node's, its rates the ranks' together as a
    node's tune before the run stores them (the slowest rank's times the ranks)."""
    plan, final = loader.plan, loader.final
    finals = []
    for config in plan.finalists:
        rates = plan.rates(config)
        waits = {r.round: r.wait_share for r in plan.readings if r.config == config and r.round is not None}
        if rates:
            rounds = sorted(rates)
            finals.append(Finalist(config, tuple(rates[r] for r in rounds), tuple(waits[r] for r in rounds),
                                   rounds=tuple(rounds)))
    baseline = next((plan.median(c) for c in plan.finalists if c.num_workers == 0 and plan.rates(c)), None)
    rate = final.rate if final is not None else plan.median(plan.pick)
    ranks = node.ranks if node is not None else Ranks()
    tuned = TunedConfig(config=plan.pick, samples_per_s=ranks.rate(rate), rel_interval=None,
                        baseline_samples_per_s=ranks.rate(baseline),
                        knee=None, hardware=problem.hardware.to_dict(), dataset_key=problem.key,
                        device=problem.device)
    fingerprint = problem.hardware.fingerprint
    cost = tune_cost(loader)
    result = TuneResult(tuned, (), tuple(finals), result_path(out, fingerprint, problem.key),
                        result_path(out, fingerprint, problem.key, ".py"), "", max(0.0, cost[2]) if cost else 0.0, 0, 0,
                        rule=plan.rule, dataset=dataset_record(problem), provenance=Provenance(**provenance()),
                        node=NodeRecord(ranks.ranks, ranks.node_cpus, ranks.rank_cpus, loader._max_memory)
                        if ranks.node else None)
    return result, in_run_record(loader)


def store(loader: Any, problem: Any, out: str, node: Any = None) -> str | None:
    """Write the result and its snippet; None, with a NotStored warning, when they cannot be."""
    result, extra = result_of(loader, problem, out, node)
    data = {**result.to_dict(), "in_run": extra}
    try:
        atomic_write_all({result.snippet_path: snippet(result.tuned),
                          result.path: json.dumps(data, indent=2, default=str) + "\n"})
    except OSError as exc:
        warnings.warn(f"the in-run tune's pick {result.config.key} could not be stored ({exc}); the next "
                      "call tunes again", NotStored, stacklevel=3)
        return None
    return result.path


class Reporter:
    """What an in-run tune says and stores as its loader reports (NOTE [ What an in-run tune
    stores ]): ``progress`` (a resolved subscriber; None says nothing) gets the run's events, on
    rank 0 alone under torchrun; the result goes to ``out`` (None: nothing stored), from rank 0."""

    def __init__(self, problem: Any, out: str | None, progress: Any, rank: int = 0, node: Any = None):
        self.problem, self.out, self.node = problem, out, node
        self.progress = progress if rank == 0 else None
        self.stores = out is not None and rank == 0
        # NOTE [ One tune of a problem at a time ]
        self.claim = Claim(lock_path(out, problem.hardware.fingerprint, problem.key)) if self.stores else None

    @property
    def following(self) -> bool:
        """Another process holds the problem's lock: this run trains without tuning."""
        return self.claim is not None and not self.claim.held

    def release(self) -> None:
        """Let the problem's lock go (the result stored, or the loader closed)."""
        if self.claim is not None:
            self.claim.release()

    def stored(self) -> tuple[Any, str] | None:
        """(the config the stored result hands out, its path), once the other process stored it."""
        from ..api import _handed, _stored_result

        if not self.stores:
            return None
        result, _ = _stored_result(self.problem, self.out)
        if result is None:
            return None
        return _handed(result).config, result_path(self.out, self.problem.hardware.fingerprint, self.problem.key)

    def _say(self, event: Any) -> None:
        if self.progress is not None:
            self.progress(event)

    def _store(self, loader: Any) -> str | None:
        return store(loader, self.problem, self.out, self.node) if self.stores else None

    def started(self, loader: Any) -> None:
        if loader.following:
            self._say(InRunFollowing(self.problem.key, self.claim.holder if self.claim else None, self.out,
                                     loader.plan.start))
            return
        profile = loader._proposer.profile
        self._say(InRunStarted(self.problem.key, loader.plan.start, profile.seconds if profile is not None else None))

    def read(self, loader: Any, reading: Any) -> None:
        plan = loader.plan
        self._say(SegmentRead(max(0, loader.epochs - 1), reading.config, reading.rate, reading.wait_share,
                              reading.round, plan.best, plan.state == schedule.SETTLED))

    def settled(self, loader: Any) -> None:
        """The pick settled: stored at once (a loop that stops early keeps it)."""
        path = self._store(loader)
        self._say(InRunSettled(loader.plan.pick, loader.plan.why, path))

    def exploring(self, loader: Any, epoch: int) -> None:
        """An epoch ended still exploring: said once, nothing stored (a loop that stops before it
        settles stores nothing unless it said its epochs, and the next run tunes in its loop again)."""
        plan = loader.plan
        self._say(InRunExploring(epoch, plan.rounds_done, len(plan.finalists), plan.leader()))

    def done(self, loader: Any) -> None:
        """The pick's epoch ended: stored again, with its own reading, and said in one line; the
        problem's lock let go."""
        path = self._store(loader)
        self.release()
        self._say(done_event(loader, path))

    def adopted(self, epoch: int, pick: Any, path: str) -> None:
        self._say(InRunAdopted(epoch, pick, path))

    def not_adopted(self, epoch: int, pick: Any, path: str, forecast: int, limit: int, kept: Any) -> None:
        self._say(InRunNotAdopted(epoch, pick, path, forecast, limit, kept))


def done_event(loader: Any, path: str | None) -> InRunDone:
    """What was tried, what was picked, what it cost."""
    plan, final = loader.plan, loader.final
    paired = [c for c in plan.finalists if c != plan.pick and by_rounds(plan.rates(plan.pick), plan.rates(c))]
    against = plan.rule if plan.rule in paired else plan.start if plan.start in paired else \
        (paired[-1] if paired else None)
    cost = tune_cost(loader)
    return InRunDone(loader.tuned_epochs, tuple(plan.finalists), plan.start, plan.rule, plan.rounds_done,
                     schedule.SEGMENT_S, plan.why, plan.pick,
                     versus=plan.versus(plan.pick, against) if against is not None else None,
                     versus_name=None if against is None else "the rule" if against == plan.rule else
                     loader_args(against),
                     samples_per_s=final.rate if final is not None else None,
                     wait_share=final.wait_share if final is not None else None,
                     epoch_s=cost[0] if cost else None, tuning_cost_s=cost[2] if cost else None,
                     refused=tuple(loader.refused), path=path)
