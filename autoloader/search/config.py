"""The tuned config: what the tuner hands back and stores (store/snippet.py writes its snippet), and
its worker-count inflection points (``Knee``): where adding workers stops paying, and where it hurts."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Iterable

from .. import seeding
from .codec import Stored, stored
from .policy import MIN_TOLERANCE
from .space import LoaderConfig

# The problem's key of an IterableDataset (inputs/problem.py names its length "iter").
_ITERABLE_KEY = re.compile(r"-niter-[0-9a-f]+$")


def iterable_key(key: object) -> bool:
    """Whether a problem's key is an IterableDataset's (which DataLoader refuses ``shuffle`` for)."""
    return isinstance(key, str) and _ITERABLE_KEY.search(key) is not None


@dataclass(frozen=True)
class TunedConfig(Stored):
    """The chosen DataLoader settings with the figures that chose them."""

    config: LoaderConfig
    samples_per_s: float = stored(positive=True)   # median of the interleaved final re-measurement
    rel_interval: float | None                     # 95% half-width of the pick's rate, relative
    baseline_samples_per_s: float | None = stored(positive=True)  # num_workers=0, same protocol
    knee: Knee | None
    hardware: dict = stored(absent={})   # inputs/hardware.Hardware's fields (read by store/records.StoredHardware)
    dataset_key: str = stored(nonempty=True)
    device: str = "cpu"
    # Why the pick is not judged (NOTE [ A provisional pick ] in choice.py), None when it is:
    # written only when set, so a judged result's file is as before.
    provisional: str | None = stored(None, sparse=True)

    def loader_kwargs(self) -> dict:
        """Keyword arguments for ``DataLoader``, the seeded ``worker_init_fn`` included."""
        kwargs = self.config.loader_kwargs()
        if self.config.num_workers:
            kwargs["worker_init_fn"] = seeding.seed_worker
        return kwargs


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
