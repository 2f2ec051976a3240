"""What holds the run: the step, the loader, or both, decided once (NOTE [ One bound ]), so that the
verdict (verdict.py) and the ceiling's sentence (ceiling.py) cannot name different limits. Pure.

# NOTE [ One bound ]
# The measured wait share comes first: it is what the run saw (the stage rates are figures).
# 1. The loop waits HIGHLY_INPUT_BOUND or more, or MODERATELY_INPUT_BOUND or more with the
#    limiting supply part clearly slower than the step (past BALANCED_WITHIN): the loader holds it.
# 2. The loop is fed, but spends more of its time on its own receive or copy than in the step:
#    the loader holds it, in that part (the main process's receive, or the copy).
# 3. The loop waits MODERATELY_INPUT_BOUND or more and the supply part and the step are within
#    BALANCED_WITHIN of each other: both hold it (balanced), and speeding either alone gains little.
# 4. Otherwise the loop is fed (it waits under MODERATELY_INPUT_BOUND) and the step is most of its
#    time: the step holds it, however close the loader's predicted supply is (that a faster step
#    would soon meet the loader is the what-ifs' to say).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .evidence import MEASURED, PREDICTED, Evidence, Stages, stages
from .thresholds import BALANCED_WITHIN, HIGHLY_INPUT_BOUND, MODERATELY_INPUT_BOUND, PARTS_TIE

STEP, LOADER, BOTH = "step", "loader", "both"


@dataclass(frozen=True)
class Bound:
    """What holds the run and the figures it was decided from. ``part``: the part that holds it when
    the loader does (the supply part, or the loop's own receive or copy when it does not wait)."""

    holds: str
    part: str
    supply_part: str
    wait: float
    wait_source: str          # measured or predicted
    where: str                # "final", "burst", or "" where predicted
    supply_rate: float
    step_rate: float
    stages: Stages

    @property
    def kind(self) -> str:
        """The verdict's class, memory aside (verdict.py's to say)."""
        return {STEP: "compute", BOTH: "balanced"}.get(self.holds, f"input/{self.part}")


def bound(ev: Evidence) -> Bound:
    """What holds ``ev``'s pick (NOTE [ One bound ])."""
    st = stages(ev)
    measured, where = ev.measured_wait()
    wait, source = (measured, MEASURED) if measured is not None else (ev.predicted.wait_share, PREDICTED)
    capping = supply_part(st)
    part, supply = capping, supply_rate(st, capping)
    close = (math.isfinite(st.step_rate) and supply > 0
             and abs(math.log(supply / st.step_rate)) <= math.log(1.0 + BALANCED_WITHIN))
    if wait >= HIGHLY_INPUT_BOUND or (wait >= MODERATELY_INPUT_BOUND and not close):
        holds = LOADER
    elif st.loop_host_s > st.step_s:
        # Fed, but the loop spends more of its time on its own receive or copy than in the step.
        holds, part = LOADER, "copy" if st.copy_s >= st.loop_host_s - st.copy_s else "main"
    elif wait >= MODERATELY_INPUT_BOUND:
        holds = BOTH
    else:
        holds = STEP
    return Bound(holds, part, capping, wait, source, where, supply, st.step_rate, st)


def supply_part(st: Stages) -> str:
    """Which part of supply caps the pick (NOTE [ The verdict ], 2): the slowest of the workers, the
    main process's receive and pin (without a pin thread, the loop) and the copy to the device."""
    if st.workers == 0:
        return "main"
    caps = {"workers": st.supply_rate, "main": st.main_rate if st.pin_thread else st.loop_rate}
    if st.pin_thread:
        caps["copy"] = st.copy_rate
    part = min(caps, key=caps.get)
    if part != "workers" and st.cores_full and caps["workers"] <= caps[part] * (1.0 + PARTS_TIE):
        part = "workers"   # level with the cores full: the cores hold both (PARTS_TIE)
    if part == "main" and not st.pin_thread and st.copy_s > st.receive_s:
        part = "copy"
    return "cores" if part == "workers" and st.cores_full else part


def supply_rate(st: Stages, part: str) -> float:
    """The rate the limiting supply part alone allows."""
    if st.workers == 0:
        per_batch = st.worker_s + st.pin_s + st.copy_s
        return st.batch_size / per_batch if per_batch > 0 else math.inf
    if part in ("cores", "workers"):
        return st.supply_rate
    if st.pin_thread:
        return st.main_rate if part == "main" else st.copy_rate
    return st.loop_rate
