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
# the pick's epoch ends, with the pick's own reading.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

from ..errors import NotStored
from ..node.ranks import Ranks
from ..search.choice import Finalist
from ..search.config import TunedConfig
from ..search.paired import by_rounds, compared
from ..store.durable import atomic_write_all
from ..store.paths import result_path
from ..store.records import NodeRecord, Provenance
from ..store.snippet import snippet
from ..store.versions import provenance
from ..tuning.measured import dataset_record
from ..store.result import TuneResult
from . import schedule

LOGGER = logging.getLogger("autoloader")


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


def _short(config) -> str:
    kw = config.loader_kwargs()
    kw.pop("batch_size", None)
    return ", ".join(f"{k}={v}" for k, v in kw.items() if k != "persistent_workers")


def unsettled_line(loader: Any, epoch: int) -> str:
    """The first epoch that ended with the tune still exploring: how far it got, who leads, that it
    goes on (said once; a loop that stops before it settles stores nothing unless it said its epochs,
    and the next run tunes in its loop again)."""
    plan = loader.plan
    return (f"autoloader: epoch {epoch} ended with the tune in the run still exploring ({plan.rounds_done} paired "
            f"round(s) of {len(plan.finalists) or 1} config(s) read, {_short(plan.leader())} leading); it goes on in the next "
            "epoch(s) and says what it picked once settled")


def closing_line(loader: Any, path: str | None) -> str:
    """What was tried, what was picked, what it cost: one line."""
    plan, final = loader.plan, loader.final
    tried = "; ".join(f"{_short(c)}{' (start)' if c == plan.start else ''}{' (the rule)' if c == plan.rule else ''}"
                      for c in plan.finalists)
    paired = [c for c in plan.finalists if c != plan.pick and by_rounds(plan.rates(plan.pick), plan.rates(c))]
    against = plan.rule if plan.rule in paired else plan.start if plan.start in paired else \
        (paired[-1] if paired else None)
    words = ""
    if against is not None:
        name = "the rule" if against == plan.rule else _short(against)
        words = "; " + compared(by_rounds(plan.rates(plan.pick), plan.rates(against)), name)
    line = (f"autoloader: tuned in the run over {loader.tuned_epochs} epoch(s): tried {tried}, climbing from the "
            f"start ({plan.rounds_done} paired readings of {schedule.SEGMENT_S:g} s or more; {plan.why}); "
            f"picked {_short(plan.pick)}{words}")
    if final is not None:
        line += (f"; the pick in the loop: {final.rate:,.0f} samples/s, waiting {final.wait_share * 100:.0f}% "
                 f"of the time")
    cost = tune_cost(loader)
    if cost is not None:
        wall, _, extra = cost
        if extra >= 0:
            line += f"; tuning cost {extra:+.1f} s of {wall:.1f} s ({extra / wall * 100:+.0f}%)"
        else:   # the configs read beside the pick were faster than it in those epochs
            line += f"; no tuning cost: the {wall:.1f} s took {-extra:.1f} s less than the pick's pace would"
    if loader.refused:
        refused = list(dict.fromkeys(loader.refused))   # a config asked for again is refused again
        named = ", ".join(_short(c) for c in refused[:2]) + (f" and {len(refused) - 2} more" if len(refused) > 2 else "")
        line += f"; not started, past the memory forecast: {named}"
    return line + (f"; stored {path}" if path else "; not stored")
