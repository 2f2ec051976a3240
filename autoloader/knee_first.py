"""The default strategy: locate the worker knee with few trials, then search around it.

Phases, each driven only by the measured history (so a resumed run picks up where it was):
1. ladder: the default config (prefetch 2, kept workers, pinning where offered) at roughly
   geometric worker counts up to the usable CPUs, stopping early once more workers stop paying
   and the consumer no longer waits for data;
2. extend: past the CPU count while throughput still rises (I/O or slow samples);
3. refine: the untried worker counts halfway to the knee's neighbours;
4. local: one-move neighbours of the best config in prefetch, pinning, persistence and batch
   size, greedily, until no neighbour is untried.
"""

from __future__ import annotations

from typing import Sequence

from .knee import MIN_TOLERANCE, find_knee, rising_at_end
from .results import OK, TrialResult
from .space import LoaderConfig, SearchSpace, extend_ladder, neighbours, refine_workers, worker_ladder
from .strategy import Strategy

# The consumer waited for data less than this share of the time: the loader is not the limit,
# so more workers cannot help.
NOT_WAITING = 0.05


def best_of(history: Sequence[TrialResult], tolerance: float = MIN_TOLERANCE) -> TrialResult | None:
    """The cheapest measured config whose rate is within ``tolerance`` of the best rate."""
    ok = [t for t in history if t.status == OK and t.samples_per_s]
    if not ok:
        return None
    top = max(t.samples_per_s for t in ok)
    within = [t for t in ok if t.samples_per_s >= top * (1.0 - tolerance)]
    return min(within, key=lambda t: t.config.cost())


class KneeFirst(Strategy):
    def __init__(self, space: SearchSpace, cpus: int, predict_infeasible=None):
        self.space = space
        self.cpus = cpus
        self.ladder = tuple(w for w in worker_ladder(cpus) if w <= space.max_workers)
        # Called with a config; True when it is predicted to break a memory limit. The tuner
        # records such configs without running them, so proposing one is still progress.
        self.predict_infeasible = predict_infeasible or (lambda config: False)

    def _base(self, workers: int) -> LoaderConfig:
        return self.space.default_config(workers)

    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, rate) of the default config at each worker count measured."""
        base_keys = {self._base(t.config.num_workers).key for t in history}
        return [(t.config.num_workers, t.samples_per_s) for t in history
                if t.status == OK and t.samples_per_s and t.config.key in base_keys
                and t.config == self._base(t.config.num_workers)]

    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        tried = {t.config for t in history}
        failed_workers = [t.config.num_workers for t in history
                          if t.status != OK and t.config == self._base(t.config.num_workers)]
        ceiling = min(failed_workers) if failed_workers else None

        def fresh(config: LoaderConfig) -> bool:
            return config not in tried and (ceiling is None or config.num_workers < ceiling
                                            or config.num_workers == 0)

        # 1. ladder
        for workers in self.ladder:
            candidate = self._base(workers)
            if not fresh(candidate):
                continue
            if self._climb_is_over(history, workers):
                break
            return candidate
        curve = self.curve(history)
        if not curve:
            return None
        # 2. extend past the CPUs while still rising
        top_tried = max(w for w, _ in curve)
        if top_tried >= self.ladder[-1] and rising_at_end(curve) and ceiling is None:
            nxt = extend_ladder(self.cpus, top_tried, self.space.max_workers)
            if nxt is not None and fresh(self._base(nxt)):
                return self._base(nxt)
        # 3. refine around the knee
        knee = find_knee(curve)
        for workers in refine_workers(knee.stops_paying, [w for w, _ in curve], self.space.max_workers):
            candidate = self._base(workers)
            if fresh(candidate):
                return candidate
        # 4. local moves around the best so far (ties to the cheaper), then around the peak
        anchors = []
        best = best_of(history)
        if best is not None:
            anchors.append(best.config)
        fastest = max((t for t in history if t.status == OK and t.samples_per_s),
                      key=lambda t: t.samples_per_s, default=None)
        if fastest is not None and fastest.config not in anchors:
            anchors.append(fastest.config)
        for anchor in anchors:
            for candidate in neighbours(anchor, self.space):
                if fresh(candidate) and not self.predict_infeasible(candidate):
                    return candidate
        return None

    def _climb_is_over(self, history: Sequence[TrialResult], workers: int) -> bool:
        """Stop the ladder once two successive steps bought nothing and the consumer no longer
        waits for data, or once throughput fell clearly below the best."""
        base = sorted((t for t in history if t.status == OK and t.samples_per_s
                       and t.config == self._base(t.config.num_workers)),
                      key=lambda t: t.config.num_workers)
        below = [t for t in base if t.config.num_workers < workers]
        if len(below) < 3:
            return False
        best_rate = max(t.samples_per_s for t in below)
        last, prev, prev2 = below[-1], below[-2], below[-3]
        flat = (last.samples_per_s <= prev2.samples_per_s * (1 + MIN_TOLERANCE)
                and prev.samples_per_s <= prev2.samples_per_s * (1 + MIN_TOLERANCE))
        not_waiting = (last.wait_fraction or 0.0) < NOT_WAITING and prev2.config.num_workers > 0
        falling = (last.samples_per_s < best_rate * (1 - 2 * MIN_TOLERANCE)
                   and prev.samples_per_s < best_rate * (1 - 2 * MIN_TOLERANCE))
        return (flat and not_waiting) or falling
