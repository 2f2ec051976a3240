"""The ceiling and the gap: how far the tuned rate is from what the step and the cores allow.

Pure. ``ceiling = min(step rate on resident batches, cpus x one worker's rate)``, both terms from
the profile as it measured them (no efficiency term fitted by the bursts): the step cannot go
faster than its own time on a batch already where it runs, and the workers together cannot make
batches faster than every usable core making them. A ceiling is never below a rate the run
measured: where the terms read lower, the profile under-timed one, and the ceiling is the highest
measured rate, which the sentence says (``raised``). The gap, tuned / ceiling, says how much room
any change to the loader, the data or the machine has before one of the two stops it. Which of
the two terms is lower is arithmetic (``binding``); what holds the run is ``bound(ev)``'s
(NOTE [ One bound ] in bound.py), the verdict's own decision, which the sentence says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..events.lines import cpus
from .bound import BOTH, LOADER, STEP, bound
from .evidence import Evidence, pct, rate


_OWNER = {"step": "step's", "cores": "cores'"}


@dataclass(frozen=True)
class Ceiling:
    step_rate: float          # batch_size / step_s: the step on resident batches (inf without a step's cost)
    one_worker_rate: float    # batch_size / one worker's batch time
    cpus: float
    tuned: float              # the run's measured rate for the pick (per rank)
    step_given: bool | None = None
    holds: str | None = None  # what holds the run: bound()'s "step", "loader" or "both"
    wait: float | None = None  # the loop's wait share that decided it
    measured: float = 0.0     # the highest rate the run measured (per rank): no ceiling is below it
    profiled: bool = True     # False where the profile was not measured: no terms, no ceiling
    step_corrected: float | None = None   # the step's rate as the bursts corrected it (the verdict's figure)

    @property
    def workers_rate(self) -> float:
        return self.cpus * self.one_worker_rate

    @property
    def terms(self) -> float:
        """The lower of the profile's two terms."""
        return min(self.step_rate, self.workers_rate)

    @property
    def raised(self) -> bool:
        """The profile's terms read below a rate the run measured: they under-timed something, and
        the ceiling is that rate instead."""
        return self.measured > self.terms

    @property
    def value(self) -> float:
        """The ceiling: the profile's lower term, never below a rate the run measured."""
        return max(self.terms, self.measured)

    @property
    def binding(self) -> str:
        """Which term is the ceiling: "step" or "cores"."""
        return "step" if self.step_rate <= self.workers_rate else "cores"

    @property
    def gap(self) -> float | None:
        """tuned / ceiling (None when the ceiling is unbounded)."""
        return self.tuned / self.value if math.isfinite(self.value) and self.value > 0 else None

    def to_dict(self) -> dict:
        finite = lambda x: x if math.isfinite(x) else None  # noqa: E731
        if not self.profiled:
            return {"ceiling": None, "step_rate": None, "one_worker_rate": None, "cpus": self.cpus,
                    "workers_rate": None, "binding": None, "tuned": self.tuned, "gap": None, "holds": self.holds,
                    "raised_to_measured": False, "profiled": False}
        return {"ceiling": finite(self.value), "step_rate": finite(self.step_rate),
                "one_worker_rate": finite(self.one_worker_rate), "cpus": self.cpus,
                "workers_rate": finite(self.workers_rate), "binding": self.binding, "tuned": self.tuned,
                "gap": self.gap, "holds": self.holds, "raised_to_measured": self.raised, "profiled": True,
                "step_rate_corrected": finite(self.step_corrected) if self.step_corrected is not None else None}

    def sentence(self) -> str:
        if not self.profiled:
            return ("No ceiling: the profile was not measured, so neither the step nor a worker's batch was timed "
                    f"(the tuned {rate(self.tuned)} is measured).")
        if self.gap is None:
            return "No ceiling: the profile timed neither a step nor a worker's batch."
        if self.step_given is False:
            step = "the step (none: without --step it only moves each batch, so this is the loader's ceiling)"
        elif math.isfinite(self.step_rate) and self.step_corrected is not None and math.isfinite(
                self.step_corrected) and abs(self.step_corrected / self.step_rate - 1.0) > 0.005:
            # The verdict's step is the corrected one: both figures said, so the two never disagree.
            step = (f"the step on resident batches ({rate(self.step_rate)} as profiled; "
                    f"{rate(self.step_corrected)} as the bursts corrected it)")
        elif math.isfinite(self.step_rate):
            step = f"the step on resident batches ({rate(self.step_rate)})"
        else:
            step = "the step on resident batches (unbounded: it took no measurable time)"
        terms = (f"the lower of {step} and {cpus(self.cpus)} x one worker's {rate(self.one_worker_rate)} "
                 f"({rate(self.workers_rate)}): the {_OWNER[self.binding]} term is the lower")
        if self.raised:
            # A ceiling below what the run measured would be no ceiling: the profile under-timed a term.
            return (f"The tuned {rate(self.tuned)} is {self.gap:.2f} of the ceiling, {rate(self.value)}: the highest "
                    f"rate this run measured, since the profile's terms read lower ({terms}, {rate(self.terms)}): "
                    f"the profile under-timed them.{self._holds()}")
        return (f"The tuned {rate(self.tuned)} is {self.gap:.2f} of the ceiling, {rate(self.value)}: "
                f"{terms}.{self._holds()}")

    def _holds(self) -> str:
        """What holds the run, as the verdict decided it (bound.py), so the two never disagree."""
        if self.holds is None:
            return ""
        waited = f" (the loop waited {pct(self.wait)} for data)" if self.wait is not None else ""
        if self.holds == STEP:
            return f" The step holds the run: the loader keeps up{waited}."
        if self.holds == LOADER:
            return f" The loader holds the run{waited}: the verdict names the part."
        if self.holds == BOTH:
            return f" The step and the loader hold it together{waited}: neither alone limits."
        return ""


def ceiling(ev: Evidence) -> Ceiling:
    p = ev.profile
    if not ev.profiled:
        return Ceiling(math.inf, math.inf, p.cpus, ev.samples_per_s, ev.step_given, measured=ev.measured_best(),
                       profiled=False)
    step_rate = p.batch_size / p.step_s if p.step_s > 0 else math.inf
    worker_s = p.worker_batch_s()
    one = p.batch_size / worker_s if worker_s > 0 else math.inf
    b = bound(ev)
    return Ceiling(step_rate, one, p.cpus, ev.samples_per_s, ev.step_given, b.holds, b.wait, ev.measured_best(),
                   step_corrected=b.step_rate)
