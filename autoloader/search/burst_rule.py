"""A burst's stop rule, and the time it takes: what a window must hold before it may end.

The probe's burst (probe/burst.py) measures under these settings; the run's clock
(search/budget.py) plans its final by the same rule, so both are here, in the pure part, beside
the policy that chooses them (NOTE [ Honest burst ] in probe/burst.py explains the rule).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BurstSettings:
    """The stop rule of one burst."""

    min_window_s: float = 1.0
    max_window_s: float = 5.0
    target_rel_interval: float = 0.03
    chunk_s: float = 0.2
    extra_skip: int = 2
    # Worker cycles (num_workers batches each) a window must hold before the time cap may end it;
    # see NOTE [ Honest burst ]. Below 2, a window yields fewer lagged differences than workers.
    min_cycles: float = 2.0
    # Stop early, once the rate reads below this (samples/s): the search only needs to know a
    # config loses, not by how much (the run sets it clearly under the best so far:
    # policy.prune_line). None measures in full (finals, benchmarks).
    prune_below: float | None = None


def expected_window_s(settings: BurstSettings, num_workers: int, batch_interval_s: float) -> float:
    """The longest window ``settings`` give a config that delivers a batch every
    ``batch_interval_s``: the time cap, or min_cycles worker cycles when those take longer,
    within the hard cap of three time caps. For budgeting; see NOTE [ Honest burst ]."""
    cycles = settings.min_cycles * num_workers * batch_interval_s
    return min(max(settings.max_window_s, cycles), 3 * settings.max_window_s)
