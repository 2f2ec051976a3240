"""The final's opening round: the search's own bursts of the finalists, when they were measured
as a final round measures them.

NOTE [ The opening round ]
A round of the final (NOTE [ Paired rounds ] in paired.py) is the finalists measured one after
the other in one process, seconds apart, so that the drift they share cancels in their ratio.
The search measures the same configs the same way: the baseline, the model's pick and the rule
come one after another (NOTE [ Model first ] in model_first.py), each a fresh DataLoader in the
same trial process, as the final's are. Where the finalists' bursts lie that close together they
are a round of the final already, the opening one, and the final's paired comparisons count it:
two final rounds then give three pairs, not two (t95 4.30 instead of 12.7: an interval a third as
wide), which on a workload whose rounds scatter is the difference between a final that settles the
pick against the rule and one that never does.

The bursts count only where a final round could have measured them so:

* this run's own, measured in full: a resumed run's stored trials ran in another process at
  another time, and a burst stopped early (pruned) or a failed one is no reading;
* no trial that ran and did not end well between them (a crash or a hang restarts the trial
  process, a memory breach kills its tree): their conditions were not one round's;
* within OPENING_SPAN consecutive trials (the longest final round, MAX_FINALISTS configs one
  after another), so the round spans no longer than a final's own round;
* two configs at least: one reading pairs with nothing.

A search burst's window is the search's (up to 3 s, 3 worker cycles) rather than the final's (up
to 3 s, 4 cycles): a rate read over either window is the same rate, and both readings of a pair
have the same window, so the ratio is like for like. The rule's search burst is never stopped
early for being behind (tuning/run.py): its full reading is the opening's other half. The
opening serves the pairs and the choice: the final's pick ranks the finalists by their median
over every round, the opening's too (``Finalist.round_median``). With two final rounds the
final's own median is their mean, and one disturbed reading decides it (a pick read once far
below its other readings hands back the rule); the median over the three rounds, the opening's
too, outvotes that one reading. A finalist's ``median`` (what the report shows)
stays that of its final rounds, so the model's predictions, which the bursts corrected, are
still checked against readings it was not fitted to.
"""

from __future__ import annotations

from typing import Sequence

from .policy import MAX_FINALISTS
from .results import CONSTRAINT, OK, TrialResult
from .space import LoaderConfig

# The opening round's key among a finalist's rounds (``Finalist.by_round``): before the final's 0.
OPENING_ROUND = -1
# The most consecutive trials an opening round may span: the longest final round's.
OPENING_SPAN = MAX_FINALISTS


def _reading(trial: TrialResult) -> bool:
    return trial.status == OK and bool(trial.samples_per_s) and trial.samples_per_s > 0 and not trial.pruned


def _ran_badly(trial: TrialResult) -> bool:
    """A trial that ran and did not end well (a memory limit predicted, never run, did not run)."""
    return trial.status != OK and not (trial.status == CONSTRAINT and trial.cause == "predicted_memory")


def opening_round(history: Sequence[TrialResult], configs: Sequence[LoaderConfig],
                  own_from: int = 0) -> dict[LoaderConfig, TrialResult]:
    """The bursts of ``configs`` in ``history[own_from:]`` (this run's own trials) that make the
    final's opening round (NOTE [ The opening round ]): the largest such set, the latest of
    equals; {} when fewer than two configs' bursts qualify."""
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
