"""The default strategy: locate the worker knee with few trials, then search around it.

Phases, each driven only by the measured history (so a resumed run picks up where it was):
1. bracket: the default config (prefetch 2, kept workers, pinning where offered) at the usable
   CPU count, then at 0 workers. High worker counts are fast to measure, and 0 is the baseline;
2. bisect: between the largest count clearly below the best rate and the fewest workers within
   noise of it, until the gap is at most a quarter of the CPUs (when 0 and the CPU count tie, the
   middle is looked at once, since a curve can peak between them). Throughput against workers rises
   and then flattens (or falls), so halving the gap finds the knee in two or three trials;
3. extend: once past the CPU count when the best rate may be there (within the bursts' noise),
   and further while throughput still clearly rises (workers that wait on I/O, page faults or
   slow samples can pay beyond one per core), unless the consumer already never waits there.
   Once some worker count keeps up (NOTE [ Keeping up ] in results.py), the gap below the fewest
   that does is halved down to the same resolution, ahead of 2's bisection by rate and of 3;
4. local: one-move neighbours of the best config in prefetch, pinning, persistence and batch
   size, until no neighbour is untried.
"""

from __future__ import annotations

from typing import Sequence

from .knee import could_be_faster, find_knee, rising_at_end
from .policy import MIN_TOLERANCE
from .choice import best_of
from .results import OK, TrialResult
from .space import LoaderConfig, SearchSpace, extend_ladder, neighbours
from .strategy import Strategy


# NOTE [ One look past the CPUs ]
# A climb into the CPU count is often smaller than one burst can resolve (a few percent, under the
# noise floor), so a rule that extends the sweep only while the rate clearly climbs never looks
# past the CPUs. Yet more workers than CPUs often pay: workers blocked on page faults, the pin
# thread or slow samples leave cores idle. So whenever the CPU count may hold the best rate, one
# trial measures the next rung, and the final decides. "May" is judged by the bursts' own
# intervals (knee.could_be_faster), not by which read higher: a best held by a margin deep in
# the noise would otherwise stop the look.


class KneeFirst(Strategy):
    def __init__(self, space: SearchSpace, cpus: int):
        self.space = space
        self.cpus = max(1, cpus)
        self.top = min(self.cpus, space.max_workers)
        # A quarter of the CPUs: a budget buys about fifteen trials of slow workloads, and worker
        # counts closer than this read within the noise of one burst; the final's repeats are
        # worth more than a finer sweep.
        self.resolution = max(1, self.cpus // 4)

    def expected_trials(self) -> int:
        bisections = max(1, (self.top // self.resolution).bit_length())
        return 2 + bisections + 1 + 4 + len(self.space.batch_sizes) - 1  # + 1: the look past the CPUs

    def base(self, workers: int) -> LoaderConfig:
        return self.space.default_config(workers)

    def _curve_trials(self, history: Sequence[TrialResult]) -> list[TrialResult]:
        """The trials of the default config that ran, one per worker count measured."""
        return [t for t in history
                if t.status == OK and t.samples_per_s and t.config == self.base(t.config.num_workers)]

    def curve(self, history: Sequence[TrialResult]) -> list[tuple[int, float]]:
        """(workers, rate) of the default config at each worker count measured."""
        return [(t.config.num_workers, t.samples_per_s) for t in self._curve_trials(history)]

    def _may_be_best(self, history: Sequence[TrialResult], workers: int) -> bool:
        """Whether the default config at ``workers`` may be faster than the best one measured."""
        base = self._curve_trials(history)
        here = next((t for t in base if t.config.num_workers == workers), None)
        best = max(base, key=lambda t: t.samples_per_s, default=None)
        return here is not None and could_be_faster(here.samples_per_s, here.rel_interval,
                                                    best.samples_per_s, best.rel_interval)

    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        tried = {t.config for t in history}
        broken = [t.config.num_workers for t in history
                  if t.status != OK and t.cause != "cuda_oom" and t.config == self.base(t.config.num_workers)]
        # Worker counts at or past a count whose default config broke (crashed, hung, or broke a
        # memory limit, measured or predicted) are off limits; the knee is sought below them.
        ceiling = min(broken) if broken else None
        # CUDA running out of memory is about the batch size, whatever the loader does.
        oom = min((t.config.batch_size for t in history if t.cause == "cuda_oom"), default=None)

        def fresh(config: LoaderConfig) -> bool:
            return (config not in tried and (ceiling is None or config.num_workers < ceiling)
                    and (oom is None or config.batch_size < oom))

        for workers in (self.top, 0):
            if fresh(self.base(workers)):
                return self.base(workers)
        curve = self.curve(history)
        knee = find_knee(curve) if curve else None
        top_ok = max((w for w, _ in curve), default=0)
        peak_at_top = knee is None or knee.peak == top_ok
        if peak_at_top and ceiling is not None and ceiling - top_ok > self.resolution:
            # Best at the largest count that ran: look halfway to the count that broke.
            middle = (top_ok + ceiling) // 2
            if fresh(self.base(middle)):
                return self.base(middle)
        if knee is not None and knee.stops_paying == 0 and len(curve) == 2 and self.top > 1:
            # No workers tie with the CPU count: the curve may still peak in between (the main
            # process's copies compete with many workers), so look once at the middle.
            middle = self.top // 2
            if fresh(self.base(middle)):
                return self.base(middle)
        # The fewest workers that keep up: halve the gap below the fewest that did, down to the
        # resolution (NOTE [ Keeping up ]; a flat curve's rate knee is only noise).
        keeping = [t.config.num_workers for t in self._curve_trials(history) if t.keeps_up]
        if keeping:
            fewest = min(keeping)
            below = [w for w, _ in curve if w < fewest]
            if below and fewest - max(below) > self.resolution:
                middle = (max(below) + fewest) // 2
                if fresh(self.base(middle)):
                    return self.base(middle)
        if knee is not None:
            worse = [w for w, _ in curve if w < knee.stops_paying]
            if worse and knee.stops_paying - max(worse) > self.resolution:
                middle = (max(worse) + knee.stops_paying) // 2
                if fresh(self.base(middle)):
                    return self.base(middle)
        # Past the CPU count: one look whenever the CPU count may hold the best rate, even by a
        # hair or within its burst's noise (NOTE [ One look past the CPUs ]); further up only
        # while the rate clearly climbs.
        at_cpus = top_ok == self.top and (peak_at_top or self._may_be_best(history, top_ok))
        # Not when the largest count already keeps up: more workers cannot feed it faster.
        top_keeps_up = top_ok in keeping
        if ceiling is None and top_ok >= self.top and not top_keeps_up \
                and (at_cpus or (peak_at_top and rising_at_end(curve))):
            nxt = extend_ladder(self.cpus, top_ok, self.space.max_workers)
            if nxt is not None and fresh(self.base(nxt)):
                return self.base(nxt)
        # Local moves: neighbours of the best worker-curve config; the anchor moves only to a
        # neighbour that is clearly faster, so a plateau of tied configs is not walked.
        anchor = best_of([t for t in history if t.config == self.base(t.config.num_workers)])
        while anchor is not None:
            for candidate in neighbours(anchor.config, self.space):
                if fresh(candidate):
                    return candidate
            moves = {c for c in neighbours(anchor.config, self.space)}
            better = [t for t in history if t.config in moves and t.status == OK and t.samples_per_s
                      and t.samples_per_s > anchor.samples_per_s * (1.0 + MIN_TOLERANCE)]
            anchor = max(better, key=lambda t: t.samples_per_s, default=None)
        return None
