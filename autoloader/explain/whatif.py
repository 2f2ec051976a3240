"""What would help, and by how much: the model asked about changes beyond the run's configs. Pure.

Each what-if changes the profile (fewer bytes, more CPUs, a faster step, a smaller batch) or the
pick's settings and asks the model (NOTE [ The pipeline model ] in search/model.py) for the rate,
under the efficiency terms the bursts fitted. A change to the data or the machine may move the
best worker count, so those are asked along the worker ladder, and their gain is taken over the
better of the pick and the model's best along the same ladder unchanged: no what-if claims the
worker count's own gain. A change the run measured says "measured", beside the prediction.

# NOTE [ What the run measured stands ]
# Where the model's worker terms are unfitted (the bursts with workers were stopped early), it can
# read a worker count several times faster than a burst of it measured, and a what-if along the
# ladder would take its gain over a base the run measured false (results/benchmarks/README.md,
# "Evidence behind mechanisms in the code", has the case). So at a count the run measured slower
# than the model says (there, or at the nearest count it measured on the same side of the pick's:
# ``_measured``), the model's figure is scaled down to the measured standing (``standing``): the
# unchanged ladder's best and every change's rate at that count alike, since a change to the
# bytes, the CPUs or the step leaves the stage the model misread there. A count the run measured
# faster than the model says raises nothing: the model's figure stands.

The ceiling and the gap: how far the tuned rate is from what the step and the cores allow.
``ceiling = min(step rate on resident batches, cpus x one worker's rate)``, both terms as the
profile measured them: the step cannot beat its own time on a resident batch, nor the workers
every usable core making batches. A ceiling is never below a rate the run measured: where the
terms read lower, the profile under-timed one, and the ceiling is the highest measured rate
(``raised``). The gap, tuned / ceiling, is the room any change has before one of the two stops it.
What holds the run is ``bound(ev)``'s (NOTE [ One bound ]), which the sentence says.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..events.lines import cpus
from ..search.choice import finalist_of, paired
from ..search.model import Calibration, Model
from ..search.model_first import worker_ladder
from ..search.paired import BURSTS, PAIRED, signed_span
from ..search.policy import MAX_WORKERS_PER_CPU, PREDICTED_TIE
from ..search.profile import BYTES_MATTER, UINT8_BYTES, Profile
from ..search.settings import ORDER, PIN, SETTINGS, Context, Knob
from ..search.space import LoaderConfig
from .evidence import MEASURED, PREDICTED, Evidence, pct, rate, size
from .thresholds import FASTER_STEP, MORE_CPUS, SMALLER_BATCHES, WORTH_CHANGING
from .verdict import BOTH, LOADER, STEP, bound


@dataclass(frozen=True)
class WhatIf:
    name: str             # uint8, smaller_batch, more_cpus, faster_step, workers_past_cores, workers, or
                          # a knob's proposal's (settings.py)
    title: str
    change: str           # what to change, exactly (the code, where it needs the user's)
    config: LoaderConfig  # the config the predicted rate is for
    base_rate: float      # the model's rate the gain is over
    rate: float           # the model's rate with the change
    needs_code: bool
    measured_gain: float | None = None
    measured_config: LoaderConfig | None = None   # where the measured gain is from, when not ``config``
    # Where the model cannot predict the change, what to say instead of the gain (``rate`` then
    # counts for nothing).
    unpredicted: str | None = None
    # The config ``base_rate`` is the model's rate of, where not the pick (the ladder's best).
    base_config: LoaderConfig | None = None

    @property
    def gain(self) -> float:
        return self.rate / self.base_rate - 1.0 if self.base_rate > 0 else 0.0

    @property
    def predicted(self) -> bool:
        return self.unpredicted is None

    def gain_text(self) -> str:
        text = f"{self.gain * 100:+.0f}%" if self.predicted else self.unpredicted
        return text + (f" (measured {self.measured_gain * 100:+.0f}%)" if self.measured_gain is not None else "")

    @property
    def source(self) -> str:
        return MEASURED if self.measured_gain is not None else PREDICTED

    @property
    def best_gain(self) -> float:
        if self.measured_gain is not None:
            return self.measured_gain
        return self.gain if self.predicted else 0.0

    @property
    def helps(self) -> bool:
        return self.best_gain >= WORTH_CHANGING



def ladder(config: LoaderConfig, cpus: int, max_workers: int, batch_size: int | None = None) -> list[LoaderConfig]:
    """``config`` at every worker count the search asks about (model_first.worker_ladder)."""
    return [ladder_config(config, n, batch_size) for n in worker_ladder(cpus, max_workers)]


def best(model: Model, calib: Calibration, configs: Iterable[LoaderConfig],
         standing: Callable[[LoaderConfig], float] = lambda c: 1.0) -> tuple[LoaderConfig, float]:
    """The cheapest config predicted within PREDICTED_TIE of the best, as the search picks, and its
    rate; each rate times its worker count's ``standing``."""
    rated = [(c, model.predict(c, calib).samples_per_s * standing(c)) for c in configs]
    top = max(r for _, r in rated)
    return min(((c, r) for c, r in rated if r >= top * (1.0 - PREDICTED_TIE)), key=lambda cr: cr[0].cost())


def uint8_profile(profile: Profile) -> Profile:
    """The profile with uint8 batches in place of float32 (NOTE [ A quarter of the bytes ]): each
    cost that moves the batch's bytes scaled by what the profile measured the change to cost (else
    the bytes' share), the receive's per-byte part alone (NOTE [ The receive's two parts ]), and
    the conversion back to float32 added to the step."""
    u = profile.uint8
    f = u.byte_share if u is not None else UINT8_BYTES
    by = lambda x, ratio: None if x is None else x * ratio  # noqa: E731
    fixed = min(profile.recv_s, profile.recv_fixed_s) if profile.recv_fixed_s is not None else 0.0
    recv = fixed + (profile.recv_s - fixed) * f
    busy = None if profile.recv_busy_s is None else recv + max(0.0, profile.recv_busy_s - profile.recv_s)
    loop, worker, pin, pinned, pageable = u.shares() if u is not None else (f,) * 5
    return dataclasses.replace(profile, sample_bytes=max(1, int(profile.sample_bytes * f)), recv_s=recv,
                               recv_busy_s=busy, pin_s=by(profile.pin_s, pin), pin_local_s=by(profile.pin_local_s, pin),
                               h2d_pinned_s=by(profile.h2d_pinned_s, pinned),
                               h2d_pageable_s=by(profile.h2d_pageable_s, pageable),
                               collate_s=profile.collate_s * worker, collate_main_s=by(profile.collate_main_s, loop),
                               step_s=profile.step_s + (u.convert_s if u is not None else 0.0))


def whatifs(ev: Evidence) -> list[WhatIf]:
    """Every change the evidence lets the model answer, most helpful first."""
    model, calib, pick = ev.model, ev.calibration, ev.pick
    cpus, top = ev.search_cpus, ev.max_workers
    base = model.predict(pick, calib).samples_per_s
    here = ladder(pick, cpus, top)
    stand = standing(ev, base)
    unchanged, unchanged_rate = best(model, calib, here, stand)
    ladder_base, base_config = (base, None) if base >= unchanged_rate else (unchanged_rate, unchanged)
    out: list[WhatIf] = []

    def along(name, title, change, profile: Profile, needs_code, cal=calib, on_cpus=cpus, bs=None):
        """The change asked along the worker ladder (at ``on_cpus``, batch size ``bs``)."""
        changed = Model(profile, ev.device)
        # More CPUs add no shards: a sharded stream's cap holds whatever the CPUs.
        widest = top if on_cpus == cpus else min(MAX_WORKERS_PER_CPU * on_cpus, ev.shard_cap or on_cpus * top)
        config, rated = best(changed, cal, ladder(pick, on_cpus, widest, bs), stand)
        return WhatIf(name, title, change, config, ladder_base, rated, needs_code, base_config=base_config)

    p = ev.profile
    if p.batch_bytes >= BYTES_MATTER:
        out.append(along("uint8", "Batches in uint8, normalised on the device",
              f"Return uint8 from the dataset (a {size(pick.batch_size * p.sample_bytes)} float32 batch becomes "
              f"{size(pick.batch_size * p.sample_bytes * UINT8_BYTES)}): in __getitem__ drop the conversion to float "
              "and the normalisation (torchvision: leave out ToTensor/ToDtype(float32, scale=True) and Normalize), "
              "then on the device: x = x.to(device, non_blocking=True).float().div_(255); "
              "x = (x - mean) / std. Only for data that is 8-bit to begin with (pixels).", uint8_profile(p), True))
    sizes = sorted({max(1, int(pick.batch_size * f)) for f in SMALLER_BATCHES} - {pick.batch_size})
    smaller = [along("smaller_batch", f"A smaller batch ({bs})",
                     f"batch_size={bs} (it changes the optimisation: scale the learning rate with it). The model "
                     "scales every per-batch cost with the batch, so it sees only the fixed costs shrink.", p, True,
                     bs=bs)
               for bs in sizes if bs < pick.batch_size]
    if smaller:
        out.append(max(smaller, key=lambda w: w.gain))
    out += _proposal(ev, ORDER, base)
    more = cpus * MORE_CPUS
    wider = dataclasses.replace(calib, cpus=calib.cpus * MORE_CPUS) if calib.cpus is not None else calib
    out.append(along("more_cpus", f"More CPUs ({cpus:g} -> {more:g})",
          f"Run with {more:g} usable CPUs: a larger instance, or a wider CPU quota or affinity for this job "
          "(docker --cpus, Kubernetes resources.limits.cpu, taskset); then tune again.",
          dataclasses.replace(p, cpus=p.cpus * MORE_CPUS), False, cal=wider, on_cpus=int(more)))
    if ev.step_given is not False and p.step_s > 0:
        out.append(along("faster_step", f"A step {FASTER_STEP:g}x as fast",
              "Your training step, faster: mixed precision (torch.autocast), torch.compile, channels_last, "
              "a lighter model or fewer synchronisations (.item(), printing) per step.",
              dataclasses.replace(p, step_s=p.step_s / FASTER_STEP), True))
    if p.sample_cpu_share < 1.0:
        past = [c for c in here if c.num_workers > cpus]
        if past and pick.num_workers <= cpus:
            config, rated = best(model, calib, past)
            measured, where = _measured(ev, config)
            out.append(WhatIf("workers_past_cores", f"num_workers past the cores ({config.num_workers})",
                              f"num_workers={config.num_workers}: a sample spends {1 - p.sample_cpu_share:.0%} of its "
                              f"time off the CPU (I/O, sleeps, locks), so workers past the {cpus} cores keep them "
                              "busy." + _nearby(config, where), config, base, rated, False, measured, where))
    out += _proposal(ev, PIN, base)
    config, rated = best(model, calib, here)
    if config.num_workers != pick.num_workers and not any(w.name == "workers_past_cores" and w.config == config
                                                          for w in out):
        measured, where = _measured(ev, config)
        out.append(WhatIf("workers", f"num_workers={config.num_workers} (the model's best at your settings)",
                          f"num_workers={config.num_workers}" + _nearby(config, where), config, base, rated, False,
                          measured, where))
    return sorted(out, key=lambda w: -w.best_gain)


def standing(ev: Evidence, base: float) -> Callable[[LoaderConfig], float]:
    """Each worker count's measured standing (NOTE [ What the run measured stands ]): its measured
    rate against the model's figure, at most 1; 1 where the run measured nothing, and at the pick's."""
    memo: dict[int, float] = {}

    def factor(config: LoaderConfig) -> float:
        n = config.num_workers
        if n == ev.pick.num_workers:
            return 1.0
        if n not in memo:
            unchanged = ladder_config(ev.pick, n)
            gain, _ = _measured(ev, unchanged)
            model_rate = ev.model.predict(unchanged, ev.calibration).samples_per_s
            memo[n] = 1.0 if gain is None or model_rate <= 0 else min(1.0, base * (1.0 + gain) / model_rate)
        return memo[n]

    return factor


def ladder_config(config: LoaderConfig, workers: int, batch_size: int | None = None) -> LoaderConfig:
    """``config`` at ``workers``, a knob it holds only for want of workers where make() starts it."""
    kept = {k.name: config[k] if config.applies(k) else k.first for k in SETTINGS}
    return LoaderConfig.make(**{**kept, "batch_size": batch_size or config.batch_size, "num_workers": workers})


def _proposal(ev: Evidence, knob: Knob, base: float) -> list[WhatIf]:
    """The knob's proposal for the pick, where the knob applies, can take another value on this device
    and the pick holds another; measured only where the knob's gate, if any, was open."""
    p, pick = knob.proposal, ev.pick
    if not pick.applies(knob) or pick[knob] == p.value or len(knob.domain(Context(ev.device))) < 2:
        return []
    config = knob.proposed(pick)
    allowed = knob.gate is None or getattr(ev, knob.gate.option)
    measured = ev.measured_gain(config) if allowed else None
    return [WhatIf(p.name, p.title, p.change, config, base, ev.model.predict(config, ev.calibration).samples_per_s,
                   False, measured, unpredicted=p.unpredicted)]


def _measured(ev: Evidence, config: LoaderConfig) -> tuple[float | None, LoaderConfig | None]:
    """A worker count's measured gain: there, else at the nearest count measured on the same side of
    the pick's (a measured loss there outweighs a predicted gain here)."""
    exact = ev.measured_gain(config)
    if exact is not None:
        return exact, None
    nearby = ev.measured_nearby(config)
    return (nearby[1], nearby[0]) if nearby else (None, None)


def _nearby(config: LoaderConfig, where: LoaderConfig | None) -> str:
    if where is None:
        return ""
    return (f" (measured at num_workers={where.num_workers}, the nearest count this run measured, not at "
            f"{config.num_workers})")


def top(items: Sequence[WhatIf]) -> WhatIf | None:
    """The most helpful what-if, or None when none is worth changing."""
    helping = [w for w in items if w.helps]
    return max(helping, key=lambda w: w.best_gain) if helping else None


def how_sure(ev: Evidence, w: WhatIf) -> dict:
    """How sure ``w`` is, as the result stores it (WhatIfClaim's fields past the prediction): a gain
    measured in the final's paired rounds (NOTE [ Paired rounds ]), else in separate bursts, else
    predicted only, with the model's range; ``sure``: that in words."""
    where = w.measured_config or w.config
    ratio = paired(finalist_of(where, ev.finals), finalist_of(ev.pick, ev.finals)) if where != ev.pick else None
    nearby = f" at num_workers={where.num_workers}" if w.measured_config is not None else ""
    if ratio is not None and ratio.judged:
        lo, hi = ratio.lo - 1.0, ratio.hi - 1.0
        return dict(measured_gain=ratio.ratio - 1.0, measured_from=PAIRED, measured_interval=(lo, hi),
                    rounds=ratio.rounds,
                    sure=f"measured{nearby} in {ratio.rounds} paired rounds: {signed_span(lo, hi)}")
    if ratio is not None:
        return dict(measured_gain=ratio.ratio - 1.0, measured_from=PAIRED, rounds=1,
                    sure=f"measured{nearby} in one paired round: not judged")
    if w.measured_gain is not None:
        return dict(measured_gain=w.measured_gain, measured_from=BURSTS,
                    sure=f"measured{nearby} in separate bursts, which share no round: no interval")
    # The model's range is this run's model's: it holds for a change of settings, not for one to
    # the data or the machine (uint8, more CPUs, a faster step), asked of a changed profile.
    same = w.base_rate > 0 and math.isclose(ev.model.predict(w.config, ev.calibration).samples_per_s, w.rate,
                                            rel_tol=1e-9)
    if not same:
        return dict(sure="predicted, not measured (a change to the data or the machine: the model's figure alone)")
    low, high = ev.model.rate_range(w.config, ev.calibration)
    span = signed_span(low / w.base_rate - 1.0, high / w.base_rate - 1.0)
    return dict(sure=f"predicted, not measured (the model's range {span})")


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
