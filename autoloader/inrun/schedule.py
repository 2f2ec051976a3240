"""The in-run schedule: which config reads which segment of the epoch, and when to stop.

Pure: readings in, decisions out (no torch, no processes, no files).

# NOTE [ Segments of the epoch ]
# The loop itself is the benchmark: each segment is a run of consecutive batches under one config,
# read at the loop (``Reading``: the time spent in ``next()`` and between the calls, which is the
# real step). In order:
#   1. warm: the start config (the model's guess from the quick profile, or the rule) reads the
#      first batches; the loop's step is read off it, and the model is asked again with it for the
#      finalists (its pick, the rule, and the pick with more workers where the step sets the pace);
#   2. rounds: each finalist reads one segment per round, the order turned each round, and the
#      rounds pair them as the final pairs its readings (NOTE [ Paired rounds ] in search/paired.py);
#   3. settled: the pick reads the rest of the epoch, and later epochs.
# A segment's rate is its steady part: the batches after its lead (the first wave of workers,
# which a start makes all at once) and before its tail (served from queues filled meanwhile). What
# a segment took past its steady pace is its switch: a worker start and a ramp.
#
# NOTE [ When exploring stops ]
# After each round from the second: the best median leads, and the pick is the cheapest finalist
# not measured slower than it (a tie, or a gap the rounds cannot yet tell, goes to the cheaper:
# nothing measured supports paying more). Exploring stops when every comparison is settled (a gap
# either way, or a tie within EQUIVALENT_WITHIN), when MAX_ROUNDS are read, or when another round
# cannot repay itself in the rest of the epoch: the gain it expects (the pick's time over the
# batches left, at the best ratio a challenger reads over the pick so far: none where all read
# slower) is less than what it costs (each finalist's switch, and the slower finalists' extra time
# over their segments). The expected ratio, not its interval's edge: on a loaded machine the edge
# stays wide for many rounds, and rounds that cannot tell two configs apart keep the cheaper. Exploring never
# takes more than EXPLORE_SHARE of an epoch; what does not fit goes on in the next epoch.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..search.paired import Ratio, by_rounds
from ..search.space import LoaderConfig

MAX_ROUNDS = 6
EXPLORE_SHARE = 0.5
# A segment lasts at least this long, and long enough that its switch is at most SWITCH_SHARE of it.
MIN_SEGMENT_S = 1.0
SWITCH_SHARE = 0.1
MIN_SEGMENT_BATCHES = 12
MAX_SEGMENT_BATCHES = 400
WARM_BATCHES = (8, 64)
WARM_SHARE = 0.04

WARM, ROUNDS, SETTLED = "warm", "rounds", "settled"


def lead(config: LoaderConfig, batches: int) -> int:
    """Batches at a segment's start (and end) left out of its steady rate: the first wave of
    workers and what their queues hold; one without workers (its first batch's own start)."""
    if not config.num_workers:
        return min(1, max(0, batches - 2))
    depth = config.num_workers * (config.prefetch_factor or 2)
    return max(1, min(depth, batches // 4))


@dataclass
class Reading:
    """One segment read at the loop. Times are the loop's clock, seconds from the segment's
    ``iter()``: ``calls[i]`` when the loop asked for batch i, ``got[i]`` when it had it;
    ``end`` when it asked again after the last one."""

    config: LoaderConfig
    round: int | None
    samples: Sequence[int]
    calls: Sequence[float]
    got: Sequence[float]
    end: float
    shutdown_s: float = 0.0       # ending its workers, after ``end``

    @property
    def batches(self) -> int:
        return len(self.got)

    def _window(self) -> tuple[int, int]:
        n = self.batches
        k = lead(self.config, n)
        tail = k if self.config.num_workers else 0
        return k, max(k + 1, n - tail)

    @property
    def steady_s(self) -> float:
        """Seconds from the loop's call for the first steady batch to its call after the last."""
        a, b = self._window()
        stop = self.calls[b] if b < self.batches else self.end
        return max(1e-9, stop - self.calls[a])

    @property
    def steady_samples(self) -> int:
        a, b = self._window()
        return sum(self.samples[a:b])

    @property
    def rate(self) -> float:
        """Samples per second over the steady part."""
        return self.steady_samples / self.steady_s

    @property
    def cycle_s(self) -> float:
        """Seconds per batch over the steady part."""
        a, b = self._window()
        return self.steady_s / max(1, b - a)

    @property
    def wait_share(self) -> float:
        """The share of the steady part the loop spent waiting in ``next()``."""
        a, b = self._window()
        return min(1.0, sum(self.got[i] - self.calls[i] for i in range(a, b)) / self.steady_s)

    @property
    def step_s(self) -> float:
        """The loop's median time from having a batch to asking for the next: the real step."""
        nexts = list(self.calls[1:]) + [self.end]
        return statistics.median(n - g for n, g in zip(nexts, self.got)) if self.got else 0.0

    @property
    def wall_s(self) -> float:
        return self.end

    @property
    def switch_s(self) -> float:
        """What the segment took past its steady pace: its start, its ramp and its workers' end."""
        return max(0.0, self.end - self.batches * self.cycle_s) + self.shutdown_s

    def to_dict(self) -> dict:
        return {"config": self.config.loader_kwargs(), "round": self.round, "batches": self.batches,
                "samples_per_s": self.rate, "wait_share": self.wait_share, "step_s": self.step_s,
                "wall_s": self.wall_s, "switch_s": self.switch_s}


@dataclass
class Plan:
    """The schedule of one in-run tune (NOTE [ Segments of the epoch ]). ``propose(warm)``: the
    finalists once the warm reading says what the step takes (the rule among them)."""

    start: LoaderConfig
    rule: LoaderConfig
    propose: Callable[[Reading], Sequence[LoaderConfig]]
    max_rounds: int = MAX_ROUNDS
    state: str = WARM
    finalists: list[LoaderConfig] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    segment: int = 0              # batches a round's segment reads
    rounds_done: int = 0
    pick: LoaderConfig | None = None
    why: str = ""
    _turn: int = 0                # the finalist whose segment is next in the current round

    # --- what runs next --------------------------------------------------------------------
    def next(self, left: int, total: int) -> tuple[LoaderConfig, int, int | None]:
        """The next segment: its config, its batches (at most ``left``) and its round (None
        outside the rounds)."""
        if self.state == WARM:
            low, high = WARM_BATCHES
            return self.start, min(left, max(low, min(high, math.ceil(total * WARM_SHARE)))), None
        if self.state == SETTLED:
            return self.pick, left, None
        order = self._order(self.rounds_done)
        if left < self.segment or not self._fits_epoch(left, total):
            # The round does not fit what is left of this epoch: the leader reads the rest
            # unpaired, and the rounds go on next epoch.
            return self.leader(), left, None
        return order[self._turn], self.segment, self.rounds_done

    def _fits_epoch(self, left: int, total: int) -> bool:
        """Explore no further than EXPLORE_SHARE of an epoch, the warm segment counted
        (NOTE [ When exploring stops ])."""
        return (total - left) + self.segment <= max(self.segment, EXPLORE_SHARE * total)

    def _order(self, r: int) -> list[LoaderConfig]:
        n = len(self.finalists)
        return [self.finalists[(i + r) % n] for i in range(n)]

    # --- what a reading changes -------------------------------------------------------------
    def done(self, reading: Reading, left: int, total: int) -> None:
        """Take ``reading`` (``left``: the epoch's batches after it)."""
        self.readings.append(reading)
        if self.state == WARM:
            self.finalists = list(dict.fromkeys(self.propose(reading)))
            if len(self.finalists) < 2:
                self._settle(self.finalists[0] if self.finalists else self.start, "one config fits")
                return
            self.segment = segment_batches(reading, total, len(self.finalists))
            self.state = ROUNDS
            return
        if self.state != ROUNDS or reading.round is None:
            return
        self._turn += 1
        if self._turn < len(self.finalists):
            return
        self._turn = 0
        self.rounds_done += 1
        if self.rounds_done < 2:
            return
        pick, ratios = self.judge()
        if all(r is not None and r.settled() for r in ratios.values()):
            self._settle(pick, "settled")
        elif self.rounds_done >= self.max_rounds:
            self._settle(pick, f"{self.max_rounds} rounds read")
        elif not self.repays(pick, left):
            self._settle(pick, "another round cannot repay its cost in the rest of the epoch")

    def _settle(self, pick: LoaderConfig, why: str) -> None:
        self.pick, self.why, self.state = pick, why, SETTLED

    def rates(self, config: LoaderConfig) -> dict[int, float]:
        return {r.round: r.rate for r in self.readings if r.config == config and r.round is not None}

    def median(self, config: LoaderConfig) -> float:
        rates = list(self.rates(config).values())
        return statistics.median(rates) if rates else 0.0

    def leader(self) -> LoaderConfig:
        """The best median so far (the start before any round)."""
        measured = [f for f in self.finalists if self.rates(f)]
        return max(measured, key=self.median) if measured else self.start

    def judge(self) -> tuple[LoaderConfig, dict[LoaderConfig, Ratio | None]]:
        """The pick and each other finalist's ratio over it (NOTE [ When exploring stops ])."""
        best = self.leader()
        vs_best = {f: by_rounds(self.rates(f), self.rates(best)) for f in self.finalists if f != best}
        tied = [best] + [f for f, r in vs_best.items() if r is not None and not r.slower]
        pick = min(tied, key=lambda c: c.cost())
        return pick, {f: by_rounds(self.rates(f), self.rates(pick)) for f in self.finalists if f != pick}

    def repays(self, pick: LoaderConfig, left: int) -> bool:
        """Whether another round could gain more than it costs (NOTE [ When exploring stops ])."""
        rate = self.median(pick)
        if rate <= 0:
            return True
        per_batch = statistics.fmean(r.samples[0] for r in self.readings if r.samples)
        cost = 0.0
        for f in self.finalists:
            own = [r for r in self.readings if r.config == f and r.round is not None]
            cost += statistics.median(r.switch_s for r in own) if own else 0.0
            if f != pick and self.median(f) > 0:
                cost += self.segment * per_batch * max(0.0, 1 / self.median(f) - 1 / rate)
        ratios = [r.ratio for f in self.finalists if f != pick
                  for r in [by_rounds(self.rates(f), self.rates(pick))] if r is not None]
        best = max(ratios, default=1.0)
        after = max(0, left - len(self.finalists) * self.segment)
        gain = after * per_batch / rate * (1.0 - 1.0 / best) if best > 1.0 else 0.0
        return gain > cost


def segment_batches(warm: Reading, total: int, finalists: int) -> int:
    """A round's segment: MIN_SEGMENT_S and 1/SWITCH_SHARE switches long at the warm cycle where
    two rounds of them fit EXPLORE_SHARE of the epoch; shorter to fit, but never under
    MIN_SEGMENT_BATCHES, half a MIN_SEGMENT_S, or four switches (the rounds then span epochs), and
    never past the epoch (a segment that long is an epoch of its own)."""
    cycle = max(warm.cycle_s, 1e-6)
    wanted = max(MIN_SEGMENT_S, warm.switch_s / SWITCH_SHARE) / cycle
    floor = max(MIN_SEGMENT_BATCHES, 0.5 * MIN_SEGMENT_S / cycle, 4 * warm.switch_s / cycle)
    fit = EXPLORE_SHARE * total / (2 * finalists)
    return int(min(MAX_SEGMENT_BATCHES, total, math.ceil(max(floor, min(wanted, fit)))))
