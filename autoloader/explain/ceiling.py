"""The ceiling and the gap: how far the tuned rate is from what the step and the cores allow.

Pure. ``ceiling = min(step rate on resident batches, cpus x one worker's rate)``, both terms as the
profile measured them: the step cannot beat its own time on a resident batch, nor the workers
every usable core making batches. A ceiling is never below a rate the run measured: where the
terms read lower, the profile under-timed one, and the ceiling is the highest measured rate
(``raised``). The gap, tuned / ceiling, is the room any change has before one of the two stops it.
What holds the run is ``bound(ev)``'s (NOTE [ One bound ]), which the sentence says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..events.lines import cpus
from .evidence import Evidence, pct, rate
from .verdict import BOTH, LOADER, STEP, bound


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
        return min(self.step_rate, self.workers_rate)

    @property
    def raised(self) -> bool:
        return self.measured > self.terms

    @property
    def value(self) -> float:
        return max(self.terms, self.measured)

    @property
    def binding(self) -> str:
        return "step" if self.step_rate <= self.workers_rate else "cores"

    @property
    def gap(self) -> float | None:
        """tuned / ceiling (None when the ceiling is unbounded)."""
        return self.tuned / self.value if math.isfinite(self.value) and self.value > 0 else None

    def to_dict(self) -> dict:
        p = self.profiled
        finite = lambda x: x if p and x is not None and math.isfinite(x) else None  # noqa: E731
        out = {"ceiling": finite(self.value), "step_rate": finite(self.step_rate),
               "one_worker_rate": finite(self.one_worker_rate), "cpus": self.cpus,
               "workers_rate": finite(self.workers_rate), "binding": self.binding if p else None,
               "tuned": self.tuned, "gap": self.gap if p else None, "holds": self.holds,
               "raised_to_measured": p and self.raised, "profiled": p}
        return {**out, "step_rate_corrected": finite(self.step_corrected)} if p else out

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
        # A ceiling below what the run measured would be no ceiling: the profile under-timed a term.
        why = (f"the highest rate this run measured, since the profile's terms read lower ({terms}, "
               f"{rate(self.terms)}): the profile under-timed them" if self.raised else terms)
        return (f"The tuned {rate(self.tuned)} is {self.gap:.2f} of the ceiling, {rate(self.value)}: "
                f"{why}.{self._holds()}")

    def _holds(self) -> str:
        """What holds the run, as the verdict decided it, so the two never disagree."""
        waited = f" (the loop waited {pct(self.wait)} for data)" if self.wait is not None else ""
        return {STEP: f" The step holds the run: the loader keeps up{waited}.",
                LOADER: f" The loader holds the run{waited}: the verdict names the part.",
                BOTH: f" The step and the loader hold it together{waited}: neither alone limits."}.get(self.holds, "")


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
