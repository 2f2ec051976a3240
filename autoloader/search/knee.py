"""Worker-count inflection points: where adding workers stops paying, and where it hurts."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable

from .codec import Stored
from .policy import MIN_TOLERANCE


@dataclass(frozen=True)
class Knee(Stored):
    """The shape of throughput against ``num_workers``."""

    stops_paying: int               # the fewest workers within ``tolerance`` of the best rate
    peak: int                       # the workers of the best rate
    starts_hurting: int | None      # the fewest past the peak below the best by more (None: never)
    tolerance: float
    curve: tuple[tuple[int, float], ...]


def find_knee(points: Iterable[tuple[int, float]], tolerance: float = MIN_TOLERANCE) -> Knee:
    """The knee of a (workers, samples/s) curve, repeated counts merged by their median;
    ``tolerance`` (floored at MIN_TOLERANCE): the relative noise under which rates are equal."""
    by_workers: dict[int, list[float]] = {}
    for workers, rate in points:
        by_workers.setdefault(int(workers), []).append(float(rate))
    if not by_workers:
        raise ValueError("find_knee needs at least one (workers, rate) point")
    curve = tuple((w, statistics.median(r)) for w, r in sorted(by_workers.items()))
    tolerance = max(tolerance, MIN_TOLERANCE)
    best_rate = max(rate for _, rate in curve)
    peak = min(w for w, rate in curve if rate == best_rate)
    floor = best_rate * (1.0 - tolerance)
    stops_paying = min(w for w, rate in curve if rate >= floor)
    starts_hurting = next((w for w, rate in curve if w > peak and rate < floor), None)
    return Knee(stops_paying, peak, starts_hurting, tolerance, curve)
