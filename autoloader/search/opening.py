"""The final's opening round: the search's own bursts of the finalists, when they were measured
as a final round measures them.

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

from typing import Sequence

from .policy import MAX_FINALISTS
from .results import CONSTRAINT, OK, TrialResult
from .space import LoaderConfig

# The opening round's key among a finalist's rounds (``Finalist.by_round``).
OPENING_ROUND = -1
# The most consecutive trials an opening round may span: the longest final round's.
OPENING_SPAN = MAX_FINALISTS


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
