"""The in-run schedule: which config reads the loop next, for how long, and when to stop.

Pure: readings in, decisions out (no torch, no processes, no files).

# NOTE [ Segments of the epoch ]
# The loop itself is the benchmark: a reading is a run of consecutive batches under one config,
# read at the loop (``Reading``: the time spent in ``next()`` and between the calls, which is the
# real step). Its rate is its steady part's: after its lead (the first wave of workers a start or a
# resume makes at once, and the batches its loader made while the config before it drained: NOTE
# [ The next config begins during the drain ] in loader.py) and before its drain (batches served
# from the queues after its feed stopped or ran dry), the samples its workers made in that time
# (NOTE [ When a batch was made ] in made.py: the loop is served from a stock made before, which
# a short reading would count as the config's pace). A reading lasts until its steady part holds
# SEGMENT_S seconds, READ_CYCLES worker cycles (each worker delivering that many batches) and its
# queue's depth (workers x prefetch): sized by time, not batches, so that every config's rate is
# read over as many of its own cycles, and past the batches its queue held when the steady part
# began (made before it: they are served at the step's pace, not the loader's, and a reading
# shorter than its queue reads the step). So a tune in the run reads prefetch no deeper than
# quick.py's MAX_PREFETCH: a deeper queue would need readings too long to pay in an epoch. Its
# noise is read from inside it: the steady part cut into blocks of a worker cycle or more, the
# spread of their log rates. A config that reads on after its reading ends (the best, or the
# pick) keeps its loader and workers: only a switch to another config stops the feed and drains.
#
# NOTE [ The climb ]
# From the start config (the quick profile's guess, or the rule), a hill-climb as tf.data's
# autotune climbs: the best so far and one candidate one step from it read in pairs, a pair's two
# readings one after the other so that they share the machine's drift; the first pair the best
# then the candidate, and each next pair begins with the config that read last (best, candidate,
# candidate, best, ...): a drift that runs one way through the pairs cancels over two of them, and
# a switch (its drain serves the old config's queue in order) comes once a pair, not twice. The
# steps, in order:
#   * up: STEP times the workers (at least one more), or as many as the model's guess with the
#     step the best's reading read (``aim``, quick.py's) where that reaches farther: the model
#     sees the in-order stalls and a busy worker's receive that a doubling climbs through step by
#     step; within the space's maximum and the memory forecast (a config past it never starts;
#     the step shrinks to one that fits);
#   * down, only where no step up paid: no workers first (the loop making its own batches frees
#     every CPU a worker takes from the step), then, where that lost, half the workers; down comes
#     before up where the CPUs the loop's processes (it and its workers) left in the start's
#     reading bound a step up's gain below a step down's prior (NOTE [ When exploring stops ]):
#     more workers would find little CPU to take;
#   * deeper prefetch, where the loop still waits on a config with workers;
#   * the other pinning, where the device offers it (a CUDA device): pinned memory makes the step's
#     copy faster at the cost of a pin thread and twice the batches in flight, which the start's
#     guess cannot weigh before the step is read. Pinning is judged as a step up, unpinning as a
#     step down.
# After each pair the candidate is judged on its pairs (``compare``: the mean log ratio of the
# steady rates; over one or two pairs its error the larger of the blocks' spread and the pairs'
# spread, from OWN_SPREAD pairs on the pairs' own as a Student interval, as the final's
# NOTE [ Paired rounds ]: a reading's blocks see the noise inside it, the pairs also the machine's
# between readings; and blocks of the batches served, where no times made are told, trade one wave
# of arrivals (or an in-order stall) for the next, so that their spread overstates; never under
# DRIFT): a step up (or deeper) wins past the noise and by more than MIN_GAIN, over two pairs at
# least (one pair cannot see the drift between its readings), or in one where it reads FAR_AHEAD
# of the best's rate past Z errors (farther than a rate drifts between two readings: a start
# far from the pick then costs one pair of it, not two), and the climb steps on from it; one
# whose interval stays under MIN_GAIN (under 1 after one pair) ends its direction; between,
# another pair, at most PAIRS_PER_STEP, then the direction ends and the cheaper is kept, except
# where the mean read a gain past MIN_GAIN: a step up so left undecided is followed, once, by the
# halfway step (the workers between the best's and the candidate's), since a doubling can
# overshoot where the gain levels off (or where more workers start to cost), and the point between
# may win clearly; any other reads on, up to PAIRS_FOR_A_GAIN pairs, before the cheaper is kept. A
# step down wins where it is not measured slower by more than MIN_GAIN (fewer workers for the same
# rate), or where the pairs still cannot tell and its mean is within MIN_GAIN: the cheaper again.
# While a candidate reads, its reading ends early once it is behind the best past EARLY_Z errors
# (a sequential check on its blocks so far) or far behind (under FAR_BEHIND of the best's rate;
# one without workers, which has no start or ramp to wait out, from its first batch on), and a
# candidate that read far behind in any pair loses; one that reads FAR_AHEAD in its first pair but
# not yet past Z errors (a reading of few blocks, as one of many workers is) reads on until it
# is, or for CANDIDATE_SEGMENTS: reading on at the faster rate costs nothing, where a second pair
# reads the slower best again and switches twice. The best's workers stay alive while a
# candidate reads, so going back costs no start.
#
# NOTE [ When exploring stops ]
# Before each step, the gain it may bring is weighed against its cost over the rest of the run (the
# epochs the caller said, else the current epoch's rest): the gain is the best's time over those
# batches times (1 - 1/g), g the ratio the step may bring: for more workers, deeper prefetch or
# unpinning at most 1/(1 - the best's wait share) (more batches at once can only take back the time
# the loop waits; unpinning moves the copy into the step, and can only take back the time the loop
# waits for the pin thread), for the first two at most the CPUs the loop may use over those its
# processes took in the best's reading (more batches need CPU time no process of the loop takes
# yet), and no more than the last step's measured ratio in that direction (STEP_PRIOR before one),
# and none where the wait bounds it under LEAST_GAIN (a gain the pairs could not tell from the noise
# past MIN_GAIN: reading it costs switches and finds nothing); for a step down, and for pinning (its
# gain is in the step's copy), that ratio whatever the wait (workers that take the CPUs the step
# needs, or batches that cost the loop more to receive than to make, slow it while it waits). Its
# cost: a worker start where it has workers (the slowest measured, or START_GUESS_S), LOSS_SHARE of
# a reading, and SWITCHES_A_STEP switches at what the switches read so far cost past their batches
# (a switch serves the old config's queue in order while the next one begins: NOTE [ The next config
# begins during the drain ] in loader.py). A step that does not repay is not taken, nor any step
# after MAX_STEPS; then the best is the pick and reads on. A candidate does not start where the
# epoch's rest cannot hold its reading: the best reads the rest, and the candidate comes next epoch
# (at its start, even where a whole epoch is shorter: its reading then ends with it); in the run's
# last epoch, where the caller said how many, the best is the pick then, and at the end of that
# epoch in any case, so that a run that ends exploring still stores its best.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..search.paired import Ratio, t95
from ..search.settings import PREFETCH_CHOICES
from ..search.space import LoaderConfig

SEGMENT_S = 1.5
READ_CYCLES = 4
MIN_STEADY_BATCHES = 8
BLOCKS = 8
Z = 2.0
EARLY_Z = 3.0
FAR_BEHIND = 0.5
# A candidate this many times the best's rate, past Z errors, wins on one pair: farther than
# a rate drifts between two readings (NOTE [ The climb ]).
FAR_AHEAD = 1.5
DRIFT = 0.02
OWN_SPREAD = 3
MIN_GAIN = 0.03
STEP = 2.0
PAIRS_PER_STEP = 3
PAIRS_FOR_A_GAIN = 5
MAX_STEPS = 8
STEP_PRIOR = 1.3
# A step that may bring less than this is not read: its pairs could not show a gain past MIN_GAIN
# and the noise (NOTE [ When exploring stops ]).
LEAST_GAIN = 2 * MIN_GAIN
LOSS_SHARE = 0.3
START_GUESS_S = 0.5
# Switches a step costs at least: to the candidate, and back to the best (two pairs in turn).
SWITCHES_A_STEP = 2
# A candidate's reading, its start and lead included, lasts at most this many SEGMENT_S.
CANDIDATE_SEGMENTS = 4

CLIMB, SETTLED = "climb", "settled"
UP, DOWN, DEEPER, PIN = "up", "down", "deeper", "pin"
BEST, CANDIDATE = "best", "candidate"


def queue_depth(config: LoaderConfig) -> int:
    """The batches a config's loader holds made ahead of the loop: each worker's prefetch."""
    return config.num_workers * (config.prefetch_factor or 2) if config.num_workers else 0


def lead(config: LoaderConfig, batches: int) -> int:
    """Batches at a reading's start left out of its steady rate: the first wave of workers and
    what their queues hold; one without workers (its first batch's own start)."""
    if not config.num_workers:
        return min(1, max(0, batches - 2))
    return max(1, min(queue_depth(config), batches // 4))


@dataclass
class Reading:
    """One reading at the loop. Times are the loop's clock, seconds from the reading's start:
    ``calls[i]`` when the loop asked for batch i, ``got[i]`` when it had it; ``end`` when it asked
    again after the last one. ``lead``: batches left out at its start (None: ``lead()``, as after
    a start); ``steady_end``: the batch its drain starts at (None: a drain as deep as its queues
    at its end); ``started``: its workers were started for it (its switch is a start);
    ``own_cpus``: the CPUs' worth the loop's process and its workers took over it (None: unread);
    ``prefilled``: batches its loader pulled before the loop asked for its first (begun while the
    config before it drained: NOTE [ The next config begins during the drain ] in loader.py), left
    out of its steady part as its lead is; ``made``: (when, samples) of each batch its loader's
    opening made by its end, in time order (NOTE [ When a batch was made ] in made.py; empty where
    not told: its rate is then the rate it was served at). The switch before it, outside any
    reading: ``drained``, the batches the config before served after its reading was cut (its
    drain); ``drain_s``, the seconds from that cut to this reading's start (the drain, the loop's
    steps on it, and these two:) ``end_s``, ending the workers of configs no longer read, and
    ``begin_s``, beginning this config's loader before its reading (its workers' start where
    ``started``)."""

    config: LoaderConfig
    round: int | None
    samples: Sequence[int]
    calls: Sequence[float]
    got: Sequence[float]
    end: float
    lead: int | None = None
    steady_end: int | None = None
    started: bool = True
    own_cpus: float | None = None
    prefilled: int = 0
    drained: int = 0
    drain_s: float = 0.0
    begin_s: float = 0.0
    end_s: float = 0.0
    made: Sequence[tuple[float, int]] = ()

    @property
    def batches(self) -> int:
        return len(self.got)

    def _window(self) -> tuple[int, int]:
        n = self.batches
        k = min(max(lead(self.config, n) if self.lead is None else self.lead, self.prefilled), max(0, n - 1))
        if self.steady_end is not None:
            return k, max(k + 1, min(n, self.steady_end))
        tail = lead(self.config, n) if self.config.num_workers else 0
        return k, max(k + 1, n - tail)

    def _at(self, i: int) -> float:
        return self.calls[i] if i < self.batches else self.end

    @property
    def steady_s(self) -> float:
        """Seconds from the loop's call for the first steady batch to its call after the last."""
        a, b = self._window()
        return max(1e-9, self._at(b) - self.calls[a]) if self.batches else 1e-9

    @property
    def steady_batches(self) -> int:
        a, b = self._window()
        return max(0, min(b, self.batches) - a)

    @property
    def steady_samples(self) -> int:
        a, b = self._window()
        return sum(self.samples[a:b])

    @property
    def served_rate(self) -> float:
        """Samples per second the loop was served over the steady part."""
        return self.steady_samples / self.steady_s if self.batches else 0.0

    def _made_within(self) -> list[tuple[float, int]]:
        """The batches made within the steady part, where the reading has workers and was told
        when its batches were made; else none."""
        if not self.made or not self.config.num_workers or not self.batches:
            return []
        a, b = self._window()
        lo, hi = self.calls[a], self._at(b)
        return [m for m in self.made if lo <= m[0] < hi]

    @property
    def rate(self) -> float:
        """Samples per second over the steady part: made (NOTE [ When a batch was made ] in
        made.py) where told, else served."""
        within = self._made_within()
        if within:
            return sum(size for _, size in within) / self.steady_s
        return self.served_rate

    @property
    def cycle_s(self) -> float:
        """Seconds per batch over the steady part."""
        return self.steady_s / max(1, self.steady_batches)

    @property
    def wait_share(self) -> float:
        """The share of the steady part the loop spent waiting in ``next()``."""
        a, b = self._window()
        return min(1.0, sum(self.got[i] - self.calls[i] for i in range(a, min(b, self.batches))) / self.steady_s)

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
        """What the reading took past its steady pace: its start (begun before it, during the
        drain, or within it) and its ramp."""
        return max(0.0, self.end - self.batches * self.cycle_s) + self.begin_s

    def blocks(self) -> list[float]:
        """The log rates of the steady part's blocks (NOTE [ Segments of the epoch ]): at most
        BLOCKS, each a worker cycle or more, of the batches made where told (from one made to the
        one a block later), else of those served; none where fewer than two fit."""
        within = self._made_within()
        if within:
            times, sizes = [t for t, _ in within], [size for _, size in within]
            a, b = 0, len(within) - 1   # intervals between consecutive made batches
            at, samples = (lambda i: times[i]), (lambda lo, hi: sum(sizes[lo + 1:hi + 1]))
        else:
            a, b = self._window()
            b = min(b, self.batches)
            at, samples = self._at, (lambda lo, hi: sum(self.samples[lo:hi]))
        size = max(1, self.config.num_workers, math.ceil((b - a) / BLOCKS))
        count = (b - a) // size
        if count < 2:
            return []
        out = []
        for j in range(count):
            lo, hi = a + j * size, a + (j + 1) * size
            seconds = at(hi) - at(lo)
            if seconds <= 0:
                return []
            out.append(math.log(samples(lo, hi) / seconds))
        return out

    def variance(self) -> float | None:
        """The variance of the reading's log rate (its blocks' spread over their count), or None."""
        logs = self.blocks()
        return statistics.variance(logs) / len(logs) if len(logs) >= 2 else None

    def to_dict(self) -> dict:
        """The reading as stored; ``rate_log_se``: its own error of the log rate (its blocks'), from
        which ``compare`` judges a pair of fewer than OWN_SPREAD (None: too few blocks)."""
        variance = self.variance()
        return {"config": self.config.loader_kwargs(), "round": self.round, "batches": self.batches,
                "samples_per_s": self.rate, "rate_log_se": None if variance is None else math.sqrt(variance),
                "served_per_s": self.served_rate, "wait_share": self.wait_share,
                "step_s": self.step_s, "wall_s": self.wall_s, "switch_s": self.switch_s, "started": self.started,
                "own_cpus": self.own_cpus, "prefilled": self.prefilled, "drained": self.drained, "drain_s": self.drain_s,
                "begin_s": self.begin_s, "end_s": self.end_s}


def compare(pairs: Sequence[tuple[Reading, Reading]]) -> tuple[float, float] | None:
    """(the mean log ratio of each pair's second over its first, its standard error): over fewer
    than OWN_SPREAD pairs the larger of the readings' own (their blocks) and the pairs' spread, an
    infinite error where a reading is too short to have one; from OWN_SPREAD pairs on the pairs'
    spread alone, scaled so that Z errors are Student's 95% half-width (NOTE [ The climb ]); at
    least DRIFT over the pairs' root."""
    ds, vs = [], []
    for first, second in pairs:
        if first.rate <= 0 or second.rate <= 0:
            continue
        ds.append(math.log(second.rate / first.rate))
        v1, v2 = first.variance(), second.variance()
        vs.append(math.inf if v1 is None or v2 is None else v1 + v2)
    n = len(ds)
    if not n:
        return None
    between = statistics.variance(ds) / n if n >= 2 else 0.0
    if n >= OWN_SPREAD:
        return statistics.fmean(ds), max(math.sqrt(between) * t95(n - 1) / Z, DRIFT / math.sqrt(n))
    within = statistics.fmean(vs) / n
    return statistics.fmean(ds), math.sqrt(max(within, between, DRIFT ** 2 / n))


def step(best: LoaderConfig, direction: str, max_workers: int, prefetch: Sequence[int],
         fits: Callable[[LoaderConfig], bool], pins: Sequence[bool] = (False,)) -> LoaderConfig | None:
    """The config one step from ``best`` in ``direction`` (NOTE [ The climb ]), or None.
    ``pins``: the pinning the device offers."""
    n = best.num_workers
    if direction == UP:
        m = min(max_workers, max(n + 1, math.ceil(n * STEP)))
        while m > n:
            config = best.replace(num_workers=m) if n else best.replace(num_workers=m, persistent_workers=True)
            if fits(config):
                return config
            m = n + (m - n) // 2
        return None
    if direction == DOWN:
        return best.replace(num_workers=n // 2) if n else None
    if direction == DEEPER and n:
        choices = sorted(prefetch)
        now = best.prefetch_factor or 2
        deeper = [p for p in choices if p > now]
        if deeper:
            config = best.replace(prefetch_factor=deeper[min(1, len(deeper) - 1)])
            return config if fits(config) else None
    if direction == PIN and (not best.pin_memory) in pins:
        config = best.replace(pin_memory=not best.pin_memory)
        return config if fits(config) else None
    return None


@dataclass
class Plan:
    """The schedule of one in-run tune (NOTE [ The climb ]). ``fits(config)``: within the memory
    forecast; ``neighbour(best, direction)``: the next step (default ``step`` within
    ``max_workers`` and ``prefetch``); ``aim(reading)``: the model's guess with the step that
    reading read, the farthest a step up may reach (NOTE [ The climb ]; None: no guess)."""

    start: LoaderConfig
    rule: LoaderConfig
    max_workers: int
    fits: Callable[[LoaderConfig], bool] = lambda config: True
    neighbour: Callable[[LoaderConfig, str], LoaderConfig | None] | None = None
    aim: Callable[[Reading], LoaderConfig | None] | None = None
    prefetch: Sequence[int] = PREFETCH_CHOICES
    pins: Sequence[bool] = (False,)   # the pinning the device offers
    max_steps: int | None = None   # None: MAX_STEPS
    cpus: float | None = None      # the CPUs the loop may use (None: unknown)
    state: str = CLIMB
    readings: list[Reading] = field(default_factory=list)
    rounds_done: int = 0          # pairs read
    steps: int = 0                # candidates judged
    pick: LoaderConfig | None = None
    why: str = ""
    direction: str | None = UP
    candidate: LoaderConfig | None = None
    best: LoaderConfig | None = None
    _due: str = BEST
    _best_last: Reading | None = None
    _open: Reading | None = None   # the open pair's first reading
    _pairs: list = field(default_factory=list)
    _gains: dict = field(default_factory=dict)
    _won: set = field(default_factory=set)
    _halved: set = field(default_factory=set)
    _down_first: bool = False

    def __post_init__(self):
        self.best = self.best or self.start

    # --- what runs next --------------------------------------------------------------------
    def next(self, left: int, total: int, run_left: int | None = None) -> tuple[LoaderConfig, int | None]:
        """The config that reads next, and its round (None outside the pairs). ``left``: the
        epoch's batches to come; ``run_left``: the run's (None: the epoch's). Asked again
        before anything is read, it answers the same."""
        if self.state == SETTLED:
            return self.pick, None
        if self._due == BEST or self._best_last is None:
            return self.best, self.rounds_done
        if self.candidate is None:
            self.candidate = self._choose(left if run_left is None else run_left)
            if self.candidate is None:
                self._settle(self.best, self.why or "no step left")
                return self.best, None
        if left < total and not self._room(left):
            if run_left is not None and run_left <= left:   # no next epoch
                self._settle(self.best, "the run's last epoch cannot hold another reading")
            return self.best, None   # the rest of the epoch: the candidate reads next epoch (a whole one: now)
        return self.candidate, self.rounds_done

    def alive(self) -> set[LoaderConfig]:
        """The configs whose workers are worth keeping now: the best and the candidate."""
        if self.state == SETTLED:
            return {self.pick}
        return {c for c in (self.best, self.candidate) if c is not None}

    def _room(self, left: int) -> bool:
        cycle = self._best_last.cycle_s if self._best_last is not None else 0.0
        return left * cycle >= 2 * SEGMENT_S + self.start_s()

    def _choose(self, run_left: int) -> LoaderConfig | None:
        if not self.steps and self.direction == UP and self.up_bound(self._best_last) < STEP_PRIOR:
            self.direction, self._down_first = DOWN, True
        while self.direction is not None:
            most = MAX_STEPS if self.max_steps is None else self.max_steps
            if self.steps >= most:
                self.why = f"{most} steps read"
                return None
            tried = {r.config for r in self.readings}
            config = (self.neighbour or self._step)(self.best, self.direction)
            none = self.best.replace(num_workers=0)
            if self.direction == DOWN and self.neighbour is None and self.best.num_workers and none not in tried:
                config = none   # the loop making its own batches first: it frees every CPU a worker takes
            if config is not None and config not in tried:
                if self.worth(config, self.direction, run_left):
                    return config
                self.why = "no further step can repay its cost in the rest of the run"
            self._advance()
        self.why = self.why or "no further step to read"
        return None

    def _step(self, best: LoaderConfig, direction: str) -> LoaderConfig | None:
        config = step(best, direction, self.max_workers, self.prefetch, self.fits, self.pins)
        if direction != UP or config is None or self.aim is None or self._best_last is None:
            return config
        aimed = self.aim(self._best_last)
        n = min(self.max_workers, aimed.num_workers) if aimed is not None else 0
        if n > config.num_workers:   # the model's guess reaches past one step: up to it, where it fits
            farther = config.replace(num_workers=n)
            if self.fits(farther):
                return farther
        return config

    def _advance(self) -> None:
        if self.direction == UP:
            self.direction = DEEPER if UP in self._won or self._down_first else DOWN
        elif self.direction == DOWN:
            self.direction = UP if self._down_first and DOWN not in self._won else DEEPER
        elif self.direction == DEEPER:
            self.direction = PIN
        else:
            self.direction = None

    def up_bound(self, reading: Reading | None) -> float:
        """The most a config that makes more batches at once may gain over ``reading``'s, by the
        CPUs the loop's processes left (NOTE [ When exploring stops ]); inf where unread."""
        if reading is None or not reading.own_cpus or not self.cpus:
            return math.inf
        return self.cpus / reading.own_cpus

    def start_s(self) -> float:
        """A worker start: the slowest measured, START_GUESS_S before one."""
        started = [r.switch_s for r in self.readings if r.started and r.config.num_workers]
        return max(started) if started else START_GUESS_S

    def worth(self, config: LoaderConfig, direction: str, run_left: int) -> bool:
        """Whether a step to ``config`` may repay its cost over ``run_left`` batches (NOTE [ When
        exploring stops ])."""
        best = self._best_last
        if best is None:
            return True
        g = self._gains.get(direction, STEP_PRIOR)
        if direction == DOWN or (direction == PIN and config.pin_memory):
            pass   # fewer workers, or pinning: a gain in the step, whatever the wait
        else:   # more batches at once, or unpinning: only the time the loop waits is to take back
            most = 1.0 / max(1e-9, 1.0 - best.wait_share)
            g = 1.0 if most < 1.0 + LEAST_GAIN else min(g, most)
            if direction != PIN:
                g = min(g, self.up_bound(best))
        gain = run_left * best.cycle_s * (1.0 - 1.0 / g) if g > 1.0 else 0.0
        cost = (self.start_s() if config.num_workers else 0.0) + LOSS_SHARE * SEGMENT_S
        return gain > cost + SWITCHES_A_STEP * self.switch_loss_s()

    def switch_loss_s(self) -> float:
        """What a switch has cost the loop past its batches, a start aside (NOTE [ When exploring
        stops ]): over the switches read so far, the mean of the seconds from a cut to the next
        reading's start less the drained batches at the best's pace and the start begun in it; 0
        before one."""
        pace = self._best_last.cycle_s if self._best_last is not None else 0.0
        losses = [max(0.0, r.drain_s - r.drained * pace - (r.begin_s if r.started else 0.0))
                  for r in self.readings if r.drain_s > 0]
        return statistics.fmean(losses) if losses else 0.0

    # --- when a reading ends ----------------------------------------------------------------
    def cut(self, reading: Reading) -> bool:
        """Whether ``reading``, in progress, has read enough (NOTE [ Segments of the epoch ]), or
        is a candidate clearly behind (NOTE [ The climb ])."""
        if self.state == SETTLED:
            return False
        workers = reading.config.num_workers
        enough = (reading.steady_s >= SEGMENT_S
                  and reading.steady_batches >= max(MIN_STEADY_BATCHES, READ_CYCLES * workers, queue_depth(reading.config)))
        if reading.config != self.candidate or self._best_last is None:
            return enough
        if reading.wall_s >= CANDIDATE_SEGMENTS * SEGMENT_S and reading.steady_batches >= 2:
            return True
        if enough:
            return not self.ahead(reading)
        return self.behind(reading)

    def ahead(self, reading: Reading) -> bool:
        """A candidate in its step's first pair, read after the best, FAR_AHEAD of the best's rate
        but not yet past Z errors: it reads on (NOTE [ The climb ])."""
        opened = self._open
        if self._pairs or opened is None or opened.config != self.best or self.direction == DOWN:
            return False
        if self.direction == PIN and not reading.config.pin_memory:   # judged as a step down
            return False
        if reading.rate < FAR_AHEAD * opened.rate:
            return False
        return self.judge([(opened, reading)], self.direction) != "win"

    def behind(self, reading: Reading) -> bool:
        """The sequential check: the candidate's reading so far behind the best's last past
        EARLY_Z errors, or under FAR_BEHIND of its rate; one without workers (no start, no ramp)
        as soon as its batches so far, and one more, took longer than the best's at that rate."""
        if self._best_last is None:
            return False
        if not reading.config.num_workers and reading.batches and \
                reading.wall_s > (reading.batches + 1) * self._best_last.cycle_s / FAR_BEHIND:
            return True
        if len(reading.blocks()) < 2:
            return False
        if reading.rate < FAR_BEHIND * self._best_last.rate:
            return True
        read = compare([(self._best_last, reading)])
        return read is not None and math.isfinite(read[1]) and read[0] + EARLY_Z * read[1] < 0.0

    # --- what a reading changes -------------------------------------------------------------
    def done(self, reading: Reading) -> None:
        """Take ``reading`` (its round set here where it pairs)."""
        self.readings.append(reading)
        if self.state == SETTLED:
            return
        if reading.config == self.best:
            self._best_last = reading
        if reading.config not in (self.best, self.candidate):
            return
        opened = self._open
        if opened is None or opened.config == reading.config:
            # A pair's first reading (one that reads on replaces its own earlier one).
            self._open, self._due = reading, CANDIDATE if reading.config == self.best else BEST
            return
        self._open = None
        best, candidate = (opened, reading) if opened.config == self.best else (reading, opened)
        best.round = candidate.round = self.rounds_done
        self.rounds_done += 1
        self._pairs.append((best, candidate))
        # The next pair begins with the config that read last: no switch between the pairs.
        self._due = CANDIDATE if reading is candidate else BEST
        # Unpinning is judged as a step down: the cheaper (no pin thread, half the memory in flight).
        cheaper = self.direction == DOWN or (self.direction == PIN and not self.candidate.pin_memory)
        verdict = self.judge(self._pairs, DOWN if cheaper else self.direction)
        if verdict is None and len(self._pairs) < PAIRS_PER_STEP:
            return
        if verdict is None and not cheaper and len(self._pairs) < PAIRS_FOR_A_GAIN \
                and compare(self._pairs)[0] > math.log(1.0 + MIN_GAIN) and self._halfway() is None:
            return   # a gain the noise still hides, and no halfway step to read instead: more pairs
        if verdict is None and cheaper and compare(self._pairs)[0] > math.log(1.0 - MIN_GAIN):
            verdict = "win"   # still within the noise: the cheaper
        self.steps += 1
        half = self._halfway() if verdict is None else None
        if verdict == "win":
            d = compare(self._pairs)[0]
            self._gains[self.direction] = max(math.exp(d), 1.0 + MIN_GAIN)
            self._won.add(self.direction)
            self.best, self._best_last = self.candidate, candidate
        elif half is not None:
            self._halved.add(self.direction)
            self.candidate, self._pairs, self._due = half, [], BEST   # read next, against the best (NOTE [ The climb ])
            return
        elif not (self.direction == DOWN and not self.candidate.num_workers and self.best.num_workers > 1):
            self._advance()   # (no workers lost: the step down halves the workers next)
        self.candidate, self._pairs, self._due = None, [], BEST

    def _halfway(self) -> LoaderConfig | None:
        """After an undecided step up that read a gain past MIN_GAIN: the workers halfway between
        the best's and the candidate's, once a direction (NOTE [ The climb ]); else None."""
        if self.direction != UP or UP in self._halved or compare(self._pairs)[0] <= math.log(1.0 + MIN_GAIN):
            return None
        n = (self.best.num_workers + self.candidate.num_workers) // 2
        if n <= self.best.num_workers or n >= self.candidate.num_workers:
            return None
        config = self.candidate.replace(num_workers=n)
        return config if config not in {r.config for r in self.readings} and self.fits(config) else None

    @staticmethod
    def judge(pairs: Sequence[tuple[Reading, Reading]], direction: str | None) -> str | None:
        """"win", "lose", or None (undecided) for a candidate read in ``pairs`` against the best
        (NOTE [ The climb ])."""
        read = compare(pairs)
        if read is None or any(second.rate < FAR_BEHIND * first.rate for first, second in pairs):
            return "lose"   # (a reading cut far behind may be too short to have an error)
        d, se = read
        if not math.isfinite(se):
            return None
        lo, hi = d - Z * se, d + Z * se
        # One pair cannot see the drift between two readings: a win waits for a second, unless
        # the first reads it far ahead (FAR_AHEAD, past Z errors).
        paired = len(pairs) >= 2
        if direction == DOWN:
            if paired and lo > math.log(1.0 - MIN_GAIN):
                return "win"
            return "lose" if hi < 0.0 else None
        far = d - Z * se > math.log(FAR_AHEAD)
        if (paired and lo > 0.0 or far) and d > math.log(1.0 + MIN_GAIN):
            return "win"
        return "lose" if hi < math.log(1.0 + MIN_GAIN) and (paired or hi < 0.0) else None

    def stop(self, why: str) -> None:
        """Settle on the best so far (the run's epochs are read)."""
        if self.state != SETTLED:
            self._settle(self.best, why)

    def adopt(self, pick: LoaderConfig, why: str) -> None:
        """Settle on a pick made elsewhere (another process's tune of this problem)."""
        self._settle(pick, why)

    def _settle(self, pick: LoaderConfig, why: str) -> None:
        self.pick, self.why, self.state, self.candidate = pick, why, SETTLED, None

    # --- what was read ------------------------------------------------------------------------
    @property
    def finalists(self) -> list[LoaderConfig]:
        """Every config read, in the order first read."""
        return list(dict.fromkeys(r.config for r in self.readings))

    def versus(self, a: LoaderConfig, b: LoaderConfig) -> Ratio | None:
        """``a``'s rate over ``b``'s on the pairs that read both, its interval Z errors of ``compare``
        (the climb's judgement, NOTE [ The climb ]); None where no pair read both."""
        of = lambda config: {r.round: r for r in self.readings if r.config == config and r.round is not None}
        x, y = of(a), of(b)
        read = compare([(y[i], x[i]) for i in sorted(x.keys() & y.keys())])
        if read is None:
            return None
        d, se = read
        rounds = len(x.keys() & y.keys())
        if not math.isfinite(se):
            return Ratio(math.exp(d), rounds=rounds)
        return Ratio(math.exp(d), math.exp(d - Z * se), math.exp(d + Z * se), rounds)

    def rates(self, config: LoaderConfig) -> dict[int, float]:
        return {r.round: r.rate for r in self.readings if r.config == config and r.round is not None}

    def median(self, config: LoaderConfig) -> float:
        rates = list(self.rates(config).values()) or [r.rate for r in self.readings if r.config == config]
        return statistics.median(rates) if rates else 0.0

    def leader(self) -> LoaderConfig:
        """The best so far."""
        return self.best
