"""The decision rules and their constants, in one place, a line each on why.

Everything that turns measurements into a decision (when two rates tie, when a consumer is fed,
when a trial is clearly behind, when a nightly run flags a change) reads its threshold here, so a
reader can see every judgement the tuner makes without walking the search. The evidence behind
the values is in results/benchmarks/README.md; this module holds the mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass

from .burst_rule import BurstSettings
from .settings import SETTINGS

# --- noise: when two rates are a tie ---------------------------------------------------------

# Two rates closer than this are a tie even when their bursts' intervals are tighter: the same
# config drifts a few percent between measurements in one process.
MIN_TOLERANCE = 0.03

# --- keeping up: NOTE [ Keeping up ] in results.py -------------------------------------------

# A consumer that waited for data at most this share of a window was fed: more loader capacity
# can speed the loop up by at most that share.
KEEPS_UP_WAIT = 0.02

# --- the search: NOTE [ Model first ] in model_first.py --------------------------------------

# The model's pick is the cheapest config predicted within this share of the best prediction: a
# smaller predicted gain is not worth more workers or memory, and no burst could confirm it.
PREDICTED_TIE = 0.02
# The least certain prediction worth a burst is looked for among configs predicted within this
# share of the best.
UNCERTAIN_NEAR = 0.05
# Bursts the search spends at most: the profile, not the bursts, ranks configs.
MAX_SEARCH_TRIALS = 8
# Bursts on a prediction in doubt (one resting on a stage no burst has measured), at most.
MAX_DOUBTS = 1

# Workers beyond this many per usable CPU never paid, and each one costs a process, its
# copy-on-read memory and a share of /dev/shm.
MAX_WORKERS_PER_CPU = 4
# A search trial whose rate falls clearly below this share of the best so far stops early: the
# search needs to know it loses, not by how much.
PRUNE_SHARE = 0.75
# "Clearly below" the prune line: the burst's own rate under this share of it, so a noisy early
# reading is not cut (together with PRUNE_SHARE, a trial stops under 60% of the best).
PRUNE_MARGIN = 0.8
# What one trial is assumed to take before any has been measured (the clock's first estimate).
FIRST_TRIAL_S = 6.0
# A trial whose timeout is clipped to the budget still gets this long to show progress: a
# healthy trial's first batch (worker start-up included) must fit in it.
MIN_CLIPPED_TIMEOUT_S = 5.0

# Search windows hold at least 3 worker cycles, final ones 4: NOTE [ Honest burst ] in probe/burst.py
# (a window of fewer cycles miscounts clumped arrivals). Their time caps are short beside what a
# measurement costs around its window (workers' start, a skipped cycle, the teardown): a burst
# corrects the model, which a 2 s window does as well as a 3 s one, and a final round's readings
# are paired, so what they share cancels and a 1.5 s window serves them as it serves the bench's
# own paired rounds (results/benchmarks/README.md).
SEARCH_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=2.0, min_cycles=3.0)
FINAL_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=1.5, min_cycles=4.0)

# --- the model and its calibration: NOTE [ The pipeline model ] in model.py -------------------

# How far off an efficiency term no burst has corrected yet may be: a prediction's uncertainty is
# its spread over that range.
UNFITTED_STEP = 1.5
# Each efficiency term stays within this factor of 1. A noisy burst is off by tens of percent, not
# by a factor: a term far from 1 stands for a stage the model misjudges (the busy receive's charge
# to the pin thread can be several times too high), which the bursts then correct; past this
# factor a burst is more likely broken than the model.
MAX_CORRECTION = 8.0
# A burst whose loop waited for data more than this share of its window was held by the loader:
# it corrects the workers' (or the pin thread's) term, otherwise the loop's.
LOADER_BOUND_WAIT = 0.1
# A CPU cap is fitted only when it cuts the bursts' squared log error to this share or less: a
# clear improvement, not noise.
CPU_FIT_GAIN = 0.8
# Which stage a simulated pipeline names as its cap: the workers (or the pin thread, when it takes
# at least PIN_BOUND_SHARE of each batch's interval) once the loop waits more than BOUND_WAIT; else
# the consumer when the step is at least CONSUMER_BOUND_SHARE of the loop's time, else the loop.
BOUND_WAIT = 0.05
PIN_BOUND_SHARE = 0.9
CONSUMER_BOUND_SHARE = 0.5

# --- memory over a run: NOTE [ Copy on read ] in growth.py -----------------------------------

# The profile's reader worker gaining less than this over its control (NOTE [ Copy on read ]
# in growth.py) is the noise between two like processes (a page of code one of them faulted in,
# their allocators settling apart), not copies of the dataset's pages. On a loaded 2-core machine
# two like workers reading a mapped file (nothing copied) have read 1.6 MiB apart; rows of Python
# objects rise tens of MiB in the same stage (tests/test_memory_kinds.py).
GROWTH_MIN_RISE = 4 * 2**20
# A dataset that added less than this to the trial process's memory holds too little for its
# copies to matter beside a worker's own (tens of MiB): the growth stage is not run for it.
GROWTH_MIN_DATASET = 16 * 2**20

# --- the final: re-measuring the few best, interleaved ---------------------------------------

# The rounds the search keeps time back for (budget.py's reserve): the final stops sooner when
# its rounds settle the pick against the rule, and goes on to FINAL_MAX_ROUNDS while the budget
# holds them when they do not (NOTE [ Sure enough ] in paired.py). Two rounds at least: one
# round has no spread, so it settles nothing.
FINAL_ROUNDS = 3
FINAL_MIN_ROUNDS = 2
# Past this many rounds a gap still inside its interval is too small to matter beside the cost
# of measuring it: the cheaper config is kept. Each look at the interval is also a chance for a
# false "settled"; a handful of looks keeps that near the 5% of one.
FINAL_MAX_ROUNDS = 6
MAX_FINALISTS = 3
# Up to this share of the budget is kept back for the final: slow finalists need whole rounds.
FINAL_RESERVE_SHARE = 0.5
# In the final, a config within this share of the best median ties it, and the cheaper one wins
# (fewer workers, shallower prefetch, no pinning).
FINAL_TIE = 0.02
# A final of one round (a small budget, slow finalists) shows no spread: another finalist must read
# this much above the rule to be handed back instead, since one burst's rate moves by more.
SINGLE_ROUND_MARGIN = 0.10
# A config that keeps up ties a best that keeps up too and reads up to this share more, when both
# are of one kind (same_kind): their gap is the consumer's noise, not loader capacity.
KEEPS_UP_TIE = 0.05
# A cheaper finalist of one kind that some round put level with the best or ahead ties a best up to
# this share ahead in median: NOTE [ Rounds that disagree ] in choice.py.
DISAGREE_TIE = 0.05

# --- the machine's load: NOTE [ Others on the machine ] in search/load.py ---------------------

# Other processes taking more than this share of the usable CPUs make a measurement busy: past
# half the machine, the loader got less than half of what it would have alone whenever it wanted
# all of it, so its figures say what the machine gives beside those processes, not what it gives.
BUSY_SHARE = 0.5
# On a busy machine a rate moves with what the others do from one burst to the next: every tie
# widens by this much per share of the CPUs others took (at 0.8 of the CPUs, by 8 points).
LOAD_TIE = 0.10
# Extra interleaved rounds, at most, for the configs that decide the pick when the run was busy
# (paired rounds are what separates a real gap from the neighbours' load).
BUSY_ROUNDS = 2

# --- threads: NOTE [ The main process's threads ] in search/threads.py ------------------------

# The main process's share (its collate and the step) with one intra-op thread reading this much
# faster than with torch's default count is worth saying: a smaller gap is the timer's noise.
THREADS_SLOWER = 0.2

# --- headroom: NOTE [ Headroom ] in model_first.py --------------------------------------------

# Where the step sets the pace, the pick's workers are busy at most this share of the time (their
# capacity twice what the step takes): a batch that takes longer, a worker descheduled beside the
# step, then empties no queue. The mean rate does not see either, so it is no reason for fewer.
HEADROOM_BUSY = 0.5

# --- stored verdicts -------------------------------------------------------------------------

# A limit's verdict (memory ceiling, watchdog) is retried once that limit is raised by this factor
# or more; a smaller rise is drift (the default ceiling follows the RAM free at the moment).
RAISED = 1.25

# --- nightly re-tunes: what counts as a change -----------------------------------------------

# A rate that moves by more than this between two runs is flagged: the same config read in two
# processes minutes apart moves by up to about a fifth.
RATE_SHIFT = 0.25
# A changed pick is no change when this run measured the previous pick within this share of the
# new one: a tie that noise decided.
SETTINGS_TIE = 0.05
# Extra paired rounds, at most, of the previous pick and the best other finalist while a nightly
# comparison's interval straddles its threshold (NOTE [ Drift ] in tuning/compare.py): past a
# dozen readings a ratio's interval narrows by little, and what is left is the noise between runs.
SETTLE_ROUNDS = 6
# A change of the memory per worker smaller than this is the allocator's noise, whatever its share.
MEMORY_FLOOR = 64 * 2**20


@dataclass(frozen=True)
class Thresholds:
    """Past any of these a dataset drifted (NOTE [ Drift ] in tuning/compare.py); a registry's [thresholds] sets them."""
    rate: float = RATE_SHIFT
    # The knee is the strategy's worker curve's (the corrected model's), which moves with what a
    # run measured: reported always, judged only when the registry sets a threshold.
    knee: int | None = None
    memory_per_worker: float = 0.5
    pick: bool = True
    # Others past this share of the usable CPUs make a run busy: inconclusive, and no baseline. A
    # fleet on machines others always share may raise it (NOTE [ Others on the machine ] in load.py).
    busy: float = BUSY_SHARE

    def to_dict(self) -> dict:
        return {"rate": self.rate, "knee": self.knee, "memory_per_worker": self.memory_per_worker, "pick": self.pick,
                "busy": self.busy}


def load_widening(share: float | None, busy: float = BUSY_SHARE) -> float:
    """How much every tie widens where others took ``share`` of the usable CPUs: LOAD_TIE a share
    once that is busy (past ``busy``), else nothing."""
    return LOAD_TIE * share if busy_at(share, busy) else 0.0


def busy_at(share: float | None, busy: float = BUSY_SHARE) -> bool:
    """Whether others taking ``share`` of the usable CPUs make a measurement busy (past ``busy``)."""
    return share is not None and share > busy


def prune_line(best_rate: float | None) -> float | None:
    """The rate under which a search burst stops early: clearly (PRUNE_MARGIN) under PRUNE_SHARE of
    the best so far; None (measure in full) before any."""
    return best_rate * PRUNE_SHARE * PRUNE_MARGIN if best_rate else None


def keeps_up_at(wait_fraction: float | None) -> bool:
    """Whether a consumer that waited this share of a window was kept fed (NOTE [ Keeping up ])."""
    return wait_fraction is not None and wait_fraction <= KEEPS_UP_WAIT


def same_kind(a, b) -> bool:
    """Two LoaderConfigs equal in what changes the step's work or the epoch restarts (batch size,
    pinning, kept workers: every knob but the ``capacity`` ones of settings.py), so that only
    loader capacity (workers, prefetch depth) tells them apart: NOTE [ Keeping up ]."""
    return all(a[k] == b[k] for k in SETTINGS if not k.capacity)


# --- warm starts: NOTE [ Warm start ] in warm.py ----------------------------------------------

# A re-tune's stored pick holds when it re-measures within this share of its stored rate (widened
# by the two readings' own intervals, up to RATE_SHIFT) and no neighbour reads further ahead.
HOLD_TIE = 0.05
