"""A burst's stop rule, and the time it takes: the probe's burst (probe/burst.py) measures under
these settings and the run's clock (budget.py) plans by them (NOTE [ Honest burst ] in
probe/burst.py explains the rule).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BurstSettings:
    """The stop rule of one burst."""

    min_window_s: float = 1.0
    max_window_s: float = 5.0
    min_cycles: float = 2.0
    """Worker cycles (num_workers batches each) a window holds before the time cap may end it:
    below 2, a window yields fewer lagged differences than workers."""
    target_rel_interval: float = 0.03
    chunk_s: float = 0.2
    extra_skip: int = 2
    prune_below: float | None = None
    """Stop early once the rate reads below this (policy.prune_line): the search only needs to
    know a config loses. None measures in full."""


def expected_window_s(settings: BurstSettings, num_workers: int, batch_interval_s: float) -> float:
    """The longest window ``settings`` give a config that delivers a batch every
    ``batch_interval_s``: the time cap, or min_cycles worker cycles when those take longer,
    within the hard cap of three time caps."""
    cycles = settings.min_cycles * num_workers * batch_interval_s
    return min(max(settings.max_window_s, cycles), 3 * settings.max_window_s)
