"""What a run knows about its pipeline, for the explanation: ``Evidence`` and ``Stages``. Pure.
The stage figures are the profile's, scaled by the efficiency terms the bursts fitted (NOTE [ The
pipeline model ] in search/model.py); the rates, the model's.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from dataclasses import dataclass
from functools import cached_property

from ..errors import usage
from ..events.lines import rate, size  # noqa: F401
from ..search.choice import Finalist
from ..search.config import Knee
from ..search.model import Calibration, Model, Prediction
from ..search.policy import MAX_WORKERS_PER_CPU
from ..search.profile import Profile
from ..search.results import CONSTRAINT, OK, TrialResult
from ..search.settings import ORDER, SETTINGS, WORKERS
from ..search.shards import Stream
from ..search.space import LoaderConfig
from .thresholds import CORES_FULL

MEASURED, PROFILED, PREDICTED = "measured", "profiled", "predicted"


@dataclass(frozen=True)
class Evidence:
    """One run's pick, profile, fitted terms and measurements. ``samples_per_s``: the run's own
    figure for the pick, per rank. None where the result does not record a figure."""

    profile: Profile
    calibration: Calibration
    device: str
    pick: LoaderConfig
    samples_per_s: float
    trials: tuple[TrialResult, ...] = ()
    finals: tuple[Finalist, ...] = ()
    rule: LoaderConfig | None = None
    step_given: bool | None = None
    allow_reorder: bool | None = None
    max_memory: int | None = None
    shm_free: int | None = None
    ranks: int = 1
    cpus: int | None = None          # the machine's usable CPUs as the search counted them
    knee: Knee | None = None
    tune_seconds: float | None = None
    # When each part of the run ran: (what, start s, end s, config key), what one of set-up,
    # profile, burst, final.
    timeline: tuple[tuple[str, float, float, str | None], ...] = ()
    stream: Stream | None = None

    @cached_property
    def model(self) -> Model:
        return Model(self.profile, self.device)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def search_cpus(self) -> int:
        return max(1, self.cpus if self.cpus else math.ceil(self.profile.cpus))

    @property
    def shard_cap(self) -> int | None:
        """The workers a sharded stream's shards keep busy (search/shards.py), None without them."""
        return self.stream.max_workers if self.stream is not None and self.stream.shards else None

    @property
    def max_workers(self) -> int:
        """The most workers the search would try: a sharded stream's shards cap them."""
        return min(MAX_WORKERS_PER_CPU * self.search_cpus, self.shard_cap or MAX_WORKERS_PER_CPU * self.search_cpus)

    @property
    def predicted(self) -> Prediction:
        return self.model.predict(self.pick, self.calibration)

    def _burst(self, config: LoaderConfig) -> float | None:
        return max((t.samples_per_s for t in self.ok_trials if t.config == config), default=None)

    def measured_rate(self, config: LoaderConfig) -> tuple[float | None, str]:
        """``config``'s rate in this run and where it is from: its final median, else its best burst."""
        final = next((f for f in self.finals if f.config == config and f.rates), None)
        if final is not None:
            return final.median, "final"
        burst = self._burst(config)
        return (burst, "burst") if burst is not None else (None, "")

    def measured_gain(self, config: LoaderConfig) -> float | None:
        """``config``'s measured rate over the pick's, both in the final, else both as bursts."""
        mine, theirs = self.measured_rate(self.pick), self.measured_rate(config)
        if mine[1] == theirs[1] == "final":
            return theirs[0] / mine[0] - 1.0
        pick, other = self._burst(self.pick), self._burst(config)
        return other / pick - 1.0 if pick is not None and other is not None else None

    def measured_nearby(self, config: LoaderConfig) -> tuple[LoaderConfig, float] | None:
        """The measured config nearest ``config``'s worker count at the pick's other settings, its
        workers on the same side of the pick's, and its measured gain; None when there is none."""
        def same(c):
            return all(c[k] == config[k] for k in SETTINGS if k is not WORKERS)

        more = config.num_workers > self.pick.num_workers
        seen = {t.config for t in self.ok_trials} | {f.config for f in self.finals if f.rates}
        near = [c for c in seen if same(c) and c != self.pick
                and (c.num_workers > self.pick.num_workers) == more and self.measured_gain(c) is not None]
        if not near:
            return None
        chosen = min(near, key=lambda c: (abs(c.num_workers - config.num_workers), self.measured_rate(c)[1] != "final"))
        return chosen, self.measured_gain(chosen)

    @property
    def profiled(self) -> bool:
        """Whether the run measured its profile (not the stand-in from one batch)."""
        return getattr(self.profile, "measured", True)

    def measured_best(self) -> float:
        """The highest rate this run measured, per rank; no ceiling is below it (whatif.py)."""
        rates = [self.samples_per_s, *(t.samples_per_s for t in self.ok_trials),
                 *(f.median for f in self.finals if f.rates)]
        return max((r for r in rates if r), default=0.0)

    @cached_property   # read by every what-if: once per record, not once per question
    def ok_trials(self) -> tuple[TrialResult, ...]:
        return tuple(t for t in self.trials if t.status == OK and t.samples_per_s and not t.pruned)

    @cached_property
    def pruned_trials(self) -> tuple[TrialResult, ...]:
        """Bursts stopped early: their rates are rough."""
        return tuple(t for t in self.trials if t.status == OK and t.samples_per_s and t.pruned)

    def measured_wait(self) -> tuple[float | None, str]:
        """The pick's measured wait share and where it is from (the final's median, else its burst)."""
        final = next((f for f in self.finals if f.config == self.pick and f.waits), None)
        if final is not None:
            return statistics.median(final.waits), "final"
        trial = next((t for t in self.ok_trials if t.config == self.pick and t.wait_fraction is not None), None)
        return (trial.wait_fraction, "burst") if trial is not None else (None, "")

    def kept_out(self) -> list[TrialResult]:
        """Trials a memory limit kept out (host, /dev/shm or CUDA memory)."""
        memory = ("predicted_memory", "host_memory", "shm_exhausted", "cuda_oom", "worker_killed")
        return [t for t in self.trials if t.status != OK and t.cause in memory]

    @classmethod
    def from_result(cls, result) -> "Evidence":
        """The evidence of a ``TuneResult``, read by its attributes alone (this module needs no store)."""
        if getattr(result, "profile", None) is None:
            raise usage("an explanation needs the run's profile, which every result of the model-first search "
                        "stores", "a result without 'profile'",
                        "tune again with this autoloader (autoloader tune ...), then report that result")
        trials, inputs, node = tuple(result.trials), result.inputs, result.node
        allow = inputs.allow_reorder if inputs is not None else None
        if allow is None:
            # Older results do not say; a config past the gate (out of order) was tried only when
            # allowed, and the run names the proposal's gain only when it was not.
            if any(ORDER.past_gate(t.config) for t in trials):
                allow = True
            elif result.reorder_gain is not None:
                allow = False
        max_memory = ((inputs.max_memory if inputs is not None else None)
                      or (node.max_memory_per_rank if node is not None else None) or _ceiling_from(trials))
        return cls(profile=result.profile, calibration=result.calibration or Calibration(),
                   device=result.device or "cpu", pick=result.config,
                   samples_per_s=float(result.samples_per_s) / result.ranks, trials=trials,
                   finals=tuple(result.finals), rule=result.rule,
                   step_given=(inputs.step is not None) if inputs is not None else None, allow_reorder=allow,
                   max_memory=max_memory, shm_free=inputs.shm_free if inputs is not None else None,
                   ranks=result.ranks, cpus=result.hardware.cpus, knee=result.knee, tune_seconds=result.tune_seconds,
                   timeline=tuple((str(m[0]), float(m[1]), float(m[2]), m[3])
                                  for m in (inputs.timeline if inputs is not None else ())),
                   stream=result.stream)


def _ceiling_from(trials) -> int | None:
    """The host ceiling a trial kept out by it quotes (older results record no limits)."""
    for t in trials:
        match = re.search(r"> ([0-9.]+) GiB ceiling", t.error or "") if t.status == CONSTRAINT else None
        if match:
            return int(float(match.group(1)) * 2**30)
    return None


@dataclass(frozen=True)
class Stages:
    """Each part of the pipeline at the pick: seconds per batch and the rate it alone would allow."""

    batch_size: int
    batch_bytes: int
    workers: int
    worker_s: float          # one worker's batch: its samples and collate (without workers, the loop's)
    receive_s: float         # the main process's take of a worker's batch, at the workers' busy share
    receive_idle_s: float    # the same from an idle worker
    pin_s: float             # pinning one batch (0 unpinned or off CUDA)
    copy_s: float            # host to device (0 off CUDA)
    step_s: float            # the step on a resident batch
    pin_thread: bool         # receive and pin run on DataLoader's pin thread, beside the loop
    cpus: float              # the CPUs the pipeline gets (the profile's, or the bursts' fit)
    cpu_demand: float        # the workers' CPU demand: workers x a sample's CPU share
    share: float             # threads wanting a CPU per CPU, at least 1: how much host work is slowed
    supply_rate: float       # the model's rate with every stage past the workers free: making batches
    main_rate: float         # the main process's receive and pin alone
    copy_rate: float
    step_rate: float
    loop_rate: float         # the training loop's own serial work: its host part (copy, and the receive
                             # without a pin thread) and the step

    @property
    def loop_host_s(self) -> float:
        return self.copy_s + (0.0 if self.pin_thread or not self.workers else self.receive_s)

    @property
    def cores_full(self) -> bool:
        return self.workers > 0 and self.cpu_demand >= CORES_FULL * self.cpus


def stages(ev: Evidence) -> Stages:
    """The stage figures of ``ev``'s pick. Host work (receive, pin, copy) is slowed as the model slows
    it when threads outnumber the CPUs (NOTE [ The pipeline model ]); the step is not."""
    p, c, config = ev.profile, ev.calibration, ev.pick
    model = ev.model
    bs, n = config.batch_size, config.num_workers
    scale = bs / p.batch_size
    pinned = ev.cuda and config.pin_memory
    worker_s = p.worker_batch_s(bs) * c.worker
    if n == 0:
        collate = (p.collate_main_s if p.collate_main_s is not None else p.collate_s) * scale
        worker_s = (p.worker_batch_s(bs) - p.collate_s * scale + collate) * c.worker * c.local
    predicted = model.predict(config, c)
    interval = bs / predicted.steady_samples_per_s if predicted.steady_samples_per_s > 0 else math.inf
    pin_cost = (p.pin_s if n else (p.pin_local_s if p.pin_local_s is not None else p.pin_s)) or 0.0
    pin = pin_cost * scale if pinned else 0.0
    copy = ((p.h2d_pinned_s if config.pin_memory else p.h2d_pageable_s) or 0.0) * scale if ev.cuda else 0.0
    term = c.pin if (pinned and n) else c.main
    cpus = model.cpus(c)
    cpu = p.sample_cpu_share
    share, busy = 1.0, 0.0
    if n and math.isfinite(interval) and interval > 0:
        # The processor sharing the workers' busy share implies, as the model computes it: every
        # thread that wants a CPU gets cpus / demand of one when they outnumber the CPUs.
        busy = model.busy_share(config, c)
        receive = model.recv_s(bs, busy)
        pin_thread = term * (receive + pin) if pinned else 0.0
        loop = c.main * (copy + (0.0 if pinned else receive))
        share = max(1.0, (n * busy * cpu + 2.0) / cpus)
        for _ in range(50):
            demand = n * busy * cpu + min(1.0, loop * share / interval) + min(1.0, pin_thread * share / interval)
            share = max(1.0, demand / cpus)
    receive = model.recv_s(bs, busy) if n else 0.0
    receive_idle = model.recv_s(bs, 0.0) if n else 0.0
    zeroed = {k: None if getattr(p, k) is None else 0.0
              for k in ("pin_s", "pin_local_s", "h2d_pinned_s", "h2d_pageable_s")}
    free = dataclasses.replace(p, recv_s=0.0, recv_busy_s=None, step_s=0.0, **zeroed)
    supply = Model(free, ev.device).predict(config, c).steady_samples_per_s
    step = c.main * p.step_s * scale
    receive_s, pin_s, copy_s = term * receive * share, term * pin * share, c.main * copy * share
    return Stages(batch_size=bs, batch_bytes=p.sample_bytes * bs, workers=n, worker_s=worker_s,
                  receive_s=receive_s, receive_idle_s=term * receive_idle * share, pin_s=pin_s, copy_s=copy_s,
                  step_s=step, pin_thread=bool(n and pinned), cpus=cpus, cpu_demand=n * p.sample_cpu_share,
                  share=share, supply_rate=supply, main_rate=_rate(bs, receive_s + pin_s),
                  copy_rate=_rate(bs, copy_s), step_rate=_rate(bs, step),
                  loop_rate=_rate(bs, copy_s + (0.0 if (pinned or not n) else receive_s) + step))


def _rate(batch_size: int, seconds: float) -> float:
    return batch_size / seconds if seconds > 0 else math.inf


def ms(seconds: float) -> str:
    """A duration: 0.42 ms, 36.1 ms, 1.90 s, 12.3 s."""
    if seconds >= 1:
        return f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1e-3 else f"{seconds * 1e3:.1f} ms"


def pct(share: float) -> str:
    return f"{share * 100:.0f}%"
