"""The decision rules and their constants, in one place, a line each on why.

Everything that turns measurements into a decision (when two rates tie, when a consumer is fed,
when a trial is clearly behind, when a nightly run flags a change) reads its threshold here, so a
reader can see every judgement the tuner makes without walking the search. The evidence behind
the values is in results/benchmarks/README.md; this module holds the mechanism.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .settings import SETTINGS

# --- noise: when two rates are a tie ---------------------------------------------------------

# The same config drifts a few percent between measurements in one process: closer rates tie.
MIN_TOLERANCE = 0.03

# --- keeping up: NOTE [ Keeping up ] in results.py -------------------------------------------

# A consumer that waited at most this share of a window was fed: more capacity gains at most that.
KEEPS_UP_WAIT = 0.02

# --- the search: NOTE [ Model first ] in model_first.py --------------------------------------

# A smaller predicted gain is not worth more workers or memory, and no burst could confirm it.
PREDICTED_TIE = 0.02
# The prediction in doubt worth a burst is looked for within this share of the best.
UNCERTAIN_NEAR = 0.05
# The profile, not the bursts, ranks configs: bursts the search spends at most.
MAX_SEARCH_TRIALS = 8
# Bursts on a prediction in doubt, at most: a second would rest on the same unknown.
MAX_DOUBTS = 1
# Past this many workers per usable CPU none paid, and each costs a process, memory and /dev/shm.
MAX_WORKERS_PER_CPU = 4
# A search trial clearly below this share of the best so far stops: it loses, by however much.
PRUNE_SHARE = 0.75
# "Clearly": its own rate under this share of that line, so a noisy early reading is not cut.
PRUNE_MARGIN = 0.8
# What one trial is assumed to take before any was measured (the clock's first estimate).
FIRST_TRIAL_S = 6.0
# A healthy trial's first batch (worker start-up included) fits in this, however clipped.
MIN_CLIPPED_TIMEOUT_S = 5.0


# A burst's stop rule, and the time it takes: the probe's burst (probe/burst.py) measures under
# these settings and the run's clock (budget.py) plans by them (NOTE [ Honest burst ] in
# probe/burst.py explains the rule).
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


# Windows hold at least 3 worker cycles in the search, 4 in the final (NOTE [ Honest burst ] in
# probe/burst.py); their caps are short beside a burst's cost around its window: a burst corrects
# the model, and a final round's readings are paired, so what they share cancels.
SEARCH_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=2.0, min_cycles=3.0)
FINAL_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=1.5, min_cycles=4.0)

# --- the model and its calibration: NOTE [ The pipeline model ] in model.py -------------------

# How far off an efficiency term no burst has corrected may be (``Model.rate_range``).
UNFITTED_STEP = 1.5
# Each efficiency term stays within this factor of 1: past it a burst is likelier broken than the model.
MAX_CORRECTION = 8.0
# A burst whose loop waited more than this share was held by the loader: it corrects the workers'
# (or the pin thread's) term, otherwise the loop's.
LOADER_BOUND_WAIT = 0.1
# A CPU cap is fitted only when it cuts the squared log error to this share: not noise.
CPU_FIT_GAIN = 0.8
# The stage a simulated pipeline names as its cap: the workers (the pin thread when it takes
# PIN_BOUND_SHARE of the interval) once the loop waits more than BOUND_WAIT; else the consumer
# when the step is CONSUMER_BOUND_SHARE of the loop's time, else the loop.
BOUND_WAIT = 0.05
PIN_BOUND_SHARE = 0.9
CONSUMER_BOUND_SHARE = 0.5

# --- memory over a run: NOTE [ Copy on read ] in growth.py -----------------------------------

# Less is the noise between two like processes (their allocators settling apart), not copies.
GROWTH_MIN_RISE = 4 * 2**20
# A dataset that added less to the trial process holds too little for its copies to matter.
GROWTH_MIN_DATASET = 16 * 2**20

# --- the final: re-measuring the few best, interleaved ---------------------------------------

# The rounds the search keeps time for; the final stops sooner once settled (NOTE [ Sure enough ]
# in paired.py) and goes on to FINAL_MAX_ROUNDS while unsettled; one round settles nothing.
FINAL_ROUNDS = 3
FINAL_MIN_ROUNDS = 2
# Past this a gap still inside its interval is too small to matter, and each look is a chance of
# a false "settled": the cheaper config is kept.
FINAL_MAX_ROUNDS = 6
MAX_FINALISTS = 3
# Kept back for the final, at most, of the budget: slow finalists need whole rounds.
FINAL_RESERVE_SHARE = 0.5
# Within this of the best median a config ties it, and the cheaper wins.
FINAL_TIE = 0.02
# One round shows no spread: another must read this much above the rule to win over it.
SINGLE_ROUND_MARGIN = 0.10
# Both keeping up and of one kind (same_kind), a gap up to this is the consumer's noise.
KEEPS_UP_TIE = 0.05
# NOTE [ Rounds that disagree ] in choice.py.
DISAGREE_TIE = 0.05

# --- the machine's load: NOTE [ Others on the machine ] in search/results.py ---------------------

# Others taking more than this share of the usable CPUs make a measurement busy: the loader got
# less than half of what it would alone, so its figures are the machine's beside them.
BUSY_SHARE = 0.5
# On a busy machine every tie widens by this much per share of the CPUs others took.
LOAD_TIE = 0.10
# Extra interleaved rounds, at most, for the configs that decide a busy run's pick.
BUSY_ROUNDS = 2

# --- threads: NOTE [ The main process's threads ] in search/profile.py ------------------------

# One intra-op thread reading less than this much faster is the timer's noise.
THREADS_SLOWER = 0.2

# --- headroom: NOTE [ Headroom ] in model_first.py --------------------------------------------

# The pick's workers busy at most this share of the time: capacity twice what the step takes.
HEADROOM_BUSY = 0.5

# --- stored verdicts -------------------------------------------------------------------------

# A limit's verdict is retried once the limit rose by this factor; less is drift.
RAISED = 1.25

# --- nightly re-tunes: what counts as a change -----------------------------------------------

# The same config read in two processes minutes apart moves by up to about a fifth.
RATE_SHIFT = 0.25
# A changed pick is no change when this run read the previous pick within this share of the new.
SETTINGS_TIE = 0.05
# Extra paired rounds, at most, while a nightly comparison straddles its threshold (NOTE [ Drift ]
# in tuning/compare.py): past a dozen readings an interval narrows by little.
SETTLE_ROUNDS = 6
# A change of the memory per worker smaller than this is the allocator's noise.
MEMORY_FLOOR = 64 * 2**20


@dataclass(frozen=True)
class Thresholds:
    """Past any of these a dataset drifted (NOTE [ Drift ] in tuning/compare.py); a registry's [thresholds] sets them."""
    rate: float = RATE_SHIFT
    # The knee moves with what a run measured: judged only when the registry sets a threshold.
    knee: int | None = None
    memory_per_worker: float = 0.5
    pick: bool = True
    # Others past this share of the CPUs make a run busy (NOTE [ Others on the machine ]).
    busy: float = BUSY_SHARE

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_widening(share: float | None, busy: float = BUSY_SHARE) -> float:
    """How much every tie widens where others took ``share`` of the usable CPUs."""
    return LOAD_TIE * share if busy_at(share, busy) else 0.0


def busy_at(share: float | None, busy: float = BUSY_SHARE) -> bool:
    """Whether others taking ``share`` of the usable CPUs make a measurement busy (past ``busy``)."""
    return share is not None and share > busy


def prune_line(best_rate: float | None) -> float | None:
    """The rate under which a search burst stops early; None (in full) before any."""
    return best_rate * PRUNE_SHARE * PRUNE_MARGIN if best_rate else None


def keeps_up_at(wait_fraction: float | None) -> bool:
    """Whether a consumer that waited this share of a window was kept fed (NOTE [ Keeping up ])."""
    return wait_fraction is not None and wait_fraction <= KEEPS_UP_WAIT


def same_kind(a, b) -> bool:
    """Two LoaderConfigs equal but for loader capacity (the ``capacity`` knobs): NOTE [ Keeping up ]."""
    return all(a[k] == b[k] for k in SETTINGS if not k.capacity)


# --- warm starts: NOTE [ Warm start ] in model_first.py ---------------------------------------

# A re-tune's stored pick holds within this share of its stored rate (widened: ``warm.hold_tie``).
HOLD_TIE = 0.05
