"""What a run measures and how long it should take: the grid profiles (full, lean, quick), their
windows, and the time estimates the deadline and the summary use.

# NOTE [ The grid ]
# Why the full grid is enough to find the best config: num_workers is the dimension that moves the
# rate by integer factors; the sweep 0, 2, 4, 8, 12, 16, 24 (on 16 cores) runs from no workers to
# 1.5x the cores, so it brackets the knee of every workload: the rate rises, then flattens or
# falls once the cores or the consumer are the limit. Prefetch depth, pinning and persistence
# change the rate by percents, and only where the loader and the consumer are close, i.e. near the
# knee; far from it they cannot change the ranking. So they are varied, one at a time, at the two
# best worker counts of the sweep only. The interleaved final round then re-measures the grid's
# top 3 together with the tuner's pick, so a pick between two grid points (say 10 workers) competes
# on equal terms and a grid point that won the sweep by noise is re-judged.
# The lean grid keeps the brackets and drops the rest: workers 0, cpus/4, cpus/2, cpus-1, cpus and
# 1.5x cpus (prefetch 2, pinned on CUDA, kept workers), prefetch 8 at the sweep's best, the top 2
# into the final, and shorter windows (grid 2-3 s, final 1-1.5 s; the final still has at least 4
# worker cycles a window and as many rounds). It is what lets eight workloads and a stability check
# share one device session; the full grid is for a workload measured alone.
"""

from __future__ import annotations

import dataclasses

from autoloader.search.policy import BurstSettings

GRIDS = ("full", "lean")
FULL_SWEEP = (0, 2, 4, 8, 12, 16, 24)
QUICK_SWEEP = (0, 1, 2)
ROUNDS = 5                       # runs of each config in the final, interleaved
QUICK_ROUNDS = 1
QUICK_TUNER_BUDGET = 20.0
MEMORY_SHARE = 0.6               # of available RAM, for the runner's memory guard
HANG_TIMEOUT_S = 120.0

# At least 4 worker cycles a window, as the tuner's final: NOTE [ Honest burst ] in autoloader/probe/burst.py.
SETTINGS = {
    "full": (BurstSettings(min_window_s=3.0, max_window_s=5.0, target_rel_interval=0.02, min_cycles=4.0),
             BurstSettings(min_window_s=2.0, max_window_s=3.0, target_rel_interval=0.02, min_cycles=4.0)),
    "lean": (BurstSettings(min_window_s=2.0, max_window_s=3.0, target_rel_interval=0.02, min_cycles=4.0),
             BurstSettings(min_window_s=1.0, max_window_s=1.5, target_rel_interval=0.02, min_cycles=4.0)),
    "quick": (BurstSettings(min_window_s=0.6, max_window_s=1.0, target_rel_interval=0.05),
              BurstSettings(min_window_s=0.4, max_window_s=0.8, target_rel_interval=0.05)),
}
CEILING = {
    "full": {"replay_batches": 8, "consumer_window_s": 3.0, "loader_window_s": 3.0, "loader_warmup_s": 0.5,
             "main_window_s": 1.0},
    "lean": {"replay_batches": 8, "consumer_window_s": 2.0, "loader_window_s": 2.0, "loader_warmup_s": 0.5,
             "main_window_s": 0.7},
    "quick": {"replay_batches": 4, "consumer_window_s": 0.7, "loader_window_s": 0.7, "loader_warmup_s": 0.2,
              "main_window_s": 0.3},
}
CEILING_ESTIMATE_S = {"full": 14.0, "lean": 10.0, "quick": 6.0}
WORKLOAD_SECONDS = {"full": 210.0, "lean": 300.0, "quick": 90.0}
TOP_FROM_GRID = {"full": 3, "lean": 2}
# The least a workload needs beyond its tuner to give a result: preparation, set-up, the sweep,
# one final round and the ceiling (jpeg on the H200 at the full grid: 16 + 55 + 41 + 8 s, run-2363961).
FLOOR_EXTRA_S = {"full": 140.0, "lean": 90.0, "quick": 30.0}
# Guesses for a plan made before anything is measured (the H200's 16 cores, run-20261129): a fresh
# loader costs about a second plus 0.12 s a worker (start-up, the skipped first batches) beyond its
# window; the tuner's process about 8 s beyond its budget; set-up (runner and ceiling child) 15 s.
TRIAL_OVERHEAD_S = 1.0
PER_WORKER_S = 0.12
TUNER_OVERHEAD_S = 8.0
SETUP_S = 15.0


def lean_sweep(cpus: int) -> tuple[int, ...]:
    counts = {0, max(1, cpus // 4), max(1, cpus // 2), max(1, cpus - 1), cpus, (3 * cpus) // 2}
    return tuple(sorted(counts))


def sweep_for(grid: str, cpus: int, quick: bool) -> tuple[int, ...]:
    if quick:
        return QUICK_SWEEP
    return lean_sweep(cpus) if grid == "lean" else FULL_SWEEP


def trial_guess_s(settings: BurstSettings, workers: int) -> float:
    return TRIAL_OVERHEAD_S + PER_WORKER_S * workers + settings.max_window_s


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Seconds a workload should take by phase, from the plan alone."""
    tuner: float
    setup: float
    grid: float
    final: float
    ceiling: float

    @property
    def total(self) -> float:
        return self.tuner + self.setup + self.grid + self.final + self.ceiling

    def text(self) -> str:
        return (f"about {self.total:.0f} s (tuner {self.tuner:.0f}, set-up {self.setup:.0f}, grid {self.grid:.0f}, "
                f"final {self.final:.0f}, ceiling {self.ceiling:.0f})")


def estimate(mode, cpus: int, tunes: int = 1, grid: bool = True) -> Estimate:
    """A workload's time by the plan: ``tunes`` tuner runs, the sweep and its variants, a final of
    the usual finalists at the CPU count (pick(s), heuristic, num_workers=0, the grid's top), the
    ceiling. ``grid=False``: a stability check alone (tunes and a final of the picks)."""
    tuner = tunes * (mode.budget_s + TUNER_OVERHEAD_S)
    if not grid:
        final = mode.rounds * tunes * trial_guess_s(mode.final, cpus)
        return Estimate(tuner, SETUP_S, 0.0, final, 0.0)
    sweep = sum(trial_guess_s(mode.grid, w) for w in mode.sweep)
    variants = len(variant_options(mode, cpus, cuda=True)) * trial_guess_s(mode.grid, cpus)
    # nw0, the heuristic, the picks and the grid's top, one of which is usually another's config
    # (run-20261129's finals held 5 configs for these 6 roles, the heuristic among the grid's top).
    finalists = 1 + tunes + mode.top_from_grid
    final = mode.rounds * (trial_guess_s(mode.final, 0) + (finalists - 1) * trial_guess_s(mode.final, cpus))
    return Estimate(tuner, SETUP_S, sweep + variants, final, mode.ceiling_estimate_s)


def variant_options(mode, workers: int, cuda: bool, base=None) -> list:
    """The grid's variants at one of the sweep's best worker counts, in priority order; with
    ``base`` (the sweep's config there), the configs, else placeholders to count."""
    if mode.variants == "lean":
        kinds = ["pf8"]
    else:
        kinds = ["pf4"] + (["pin0"] if cuda else []) + ["pf8", "pw0"]
    if base is None:
        return kinds * (1 if mode.variants == "lean" else 2)
    made = {"pf4": lambda: base.replace(prefetch_factor=4), "pf8": lambda: base.replace(prefetch_factor=8),
            "pin0": lambda: base.replace(pin_memory=False), "pw0": lambda: base.replace(persistent_workers=False)}
    return [made[k]() for k in kinds]
