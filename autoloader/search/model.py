"""Predicting any config's rate, wait and restart cost from the profile: NOTE [ The pipeline model ].

Pure functions over a ``Profile`` (profile.py) and measured ``TrialResult``s: nothing here runs a
loader. The search asks the model which configs are worth a burst; the bursts then correct the
model's efficiency terms (``Calibration``, fitted in calibration.py), and the model is asked again.

# NOTE [ The pipeline model ]
# A DataLoader with workers is a three-stage pipeline, simulated here batch by batch:
#   workers    batch k goes to worker k mod n (DataLoader's round-robin); a worker makes its
#              batches one after another, each taking a batch time drawn from the profile's
#              per-sample costs (batch_size draws, summed, plus collate), slowed by the share of
#              a core it gets: when the threads that want a CPU outnumber the CPUs, each gets
#              its share, the loop's and the pin thread's too;
#   pin thread with pin_memory, one thread receives each batch and copies it to page-locked
#              memory, in arrival order;
#   main       the training loop takes the batches (in index order, or as they come with
#              in_order=False), copies each to the device (from pageable memory this blocks) and
#              runs the step.
# At most prefetch_factor x n batches are out at once: batch k + prefetch x n is handed to a
# worker only when the main loop has taken batch k. So a slow batch at the head of the in-order
# queue stalls the loop while the other workers' finished batches wait behind it, and a deeper
# prefetch or out-of-order delivery lets the other workers run on: the simulation shows this
# head-of-line blocking from the sampled tail without a rule for it. Without workers the main
# process does every stage in turn. The rate the run sees charges each epoch one restart: the
# refill of the drained pipeline, and without persistent workers their start-up before it.
# Two efficiency terms are fitted to the bursts as they come in: ``worker`` scales the workers'
# batch time (a worker's sample cost differs from the profile's, which ran in the trial process)
# and ``main`` the main process's per-batch costs. Each is fitted only from bursts the model says
# that stage bounds, so a burst limited by the step teaches nothing about the workers.

# NOTE [ A busy worker's receive ]
# A worker sends a batch's tensors as shared-memory file descriptors, and the receiving process
# fetches each descriptor from a thread in that worker (multiprocessing's resource sharer). That
# thread needs the worker's interpreter lock, which the worker's own Python code (a __getitem__
# in Python) holds: the take can wait until that code lets go (a sleep, I/O, a switch, or the end
# of the batch it is making). So a batch taken while its worker makes the next one costs the
# receiver milliseconds more than one taken from an idle worker, whatever the batch's size. The profile times both (recv_s from idle workers,
# recv_busy_s while the worker is busy); the model charges the extra by how busy the workers
# are. It lands on whoever receives: the pin thread with pin_memory, where it overlaps the loop,
# or the loop itself without, where the measured wait includes it (``_term`` in calibration.py).
# Its size depends on how the worker's threads get scheduled (it can vanish on a loaded machine),
# so it is measured where the trials run, never assumed.

# NOTE [ The receive's two parts ]
# Receiving a batch costs a part that grows with its bytes (the pages mapped and touched) and a
# part that does not (a message, and a descriptor fetched for each tensor). The profile times the
# receive at two sizes, its batch and one of a quarter of its samples, and the line through them
# gives the fixed part (``Profile.recv_fixed_s``); the rest scales with the bytes. So a change
# that shrinks the bytes (uint8 batches: explain/whatif.py) or the batch moves only the part that
# moves, where scaling the whole receive promised a quarter of it for a quarter of the bytes.

# NOTE [ Others' demand ]
# Other processes' threads want CPUs too. The driver measures what they took during the profile
# (``Profile.others_cpus``, O of the C usable CPUs) while the profile's one thread wanted one.
# Where O + 1 <= C nobody waited: they wanted O. Past that the CPUs were shared, each runnable
# thread its even share, so the profile's thread got C - O and theirs, wanting D, got O:
# D = O / (C - O). The processor sharing below counts D beside the pipeline's own demand, so a
# config that wants more CPUs than the others leave is predicted slower, as it runs (the
# profile's own costs are read without its waits for a CPU: NOTE [ A profile read under load ]
# in probe/profiler.py).

# NOTE [ An epoch boundary of kept workers ]
# With persistent_workers the iterator is reset at each epoch's end: the main process tells every
# worker to resume and waits for each one's answer, then hands out the first prefetch x n indices
# and waits for the next epoch's first batch. So the boundary costs more than one batch's work,
# and more with every worker (one answer each, taken like a batch). A burst that crossed a
# boundary measured it (NOTE [ Honest burst ] in probe/burst.py); once bursts did, their
# boundaries, fitted as a base plus a cost per worker (calibration.py), stand for the model's
# refill. On short epochs it decides how many workers pay: each one adds to every boundary.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from .codec import Stored, stored
from .methods import method_cost
from .policy import UNFITTED_STEP
from .profile import Profile
from .results import OK, BurstError, TrialResult
from .settings import ORDER
from .simulate import _bound, _simulate
from .space import LoaderConfig

# The others' demand read off the profile is at most this many times the CPUs (NOTE [ Others'
# demand ]): past it the profile's thread got too little for the share to say more.
OTHERS_DEMAND_CAP = 4.0


@dataclass(frozen=True)
class Calibration(Stored):
    """Efficiency terms fitted to the bursts: multipliers of the workers' batch time and the main
    process's per-batch costs, and the fitted start-up of ``workers`` fresh workers
    (``startup_base + startup_per_worker x workers``)."""

    worker: float = stored(1.0, positive=True)
    main: float = stored(1.0, positive=True)
    pin: float = stored(1.0, positive=True)
    cpus: float | None = stored(None, positive=True)   # effective CPUs, when the bursts pinned them down
    local: float = stored(1.0, positive=True)          # the whole per-batch time without workers (its own bursts)
    startup_base: float | None = stored(None, signed=True)
    startup_per_worker: float = stored(0.0, signed=True)
    # An epoch boundary of kept workers, as the bursts that crossed one measured it
    # (``restart_base + restart_per_worker x workers``; NOTE [ An epoch boundary of kept workers ]).
    restart_base: float | None = stored(None, signed=True)
    restart_per_worker: float = stored(0.0, signed=True)
    worker_fits: int = 0          # bursts the worker term was fitted from
    main_fits: int = 0            # the loop's
    pin_fits: int = 0             # the pin thread's



@dataclass(frozen=True)
class Prediction(Stored):
    """What the model expects of one config."""

    config: LoaderConfig
    samples_per_s: float          # over a whole run: epoch restarts charged
    steady_samples_per_s: float
    wait_share: float             # share of the loop spent in next(): waiting for data, and receiving it
    bound: str                    # the stage that caps the rate: workers, pin, main or consumer
    restart_s: float              # one epoch boundary
    receive_share: float = 0.0    # of that, the loop's own receive (workers, no pin thread)
    workers_busy: float | None = None   # the share of the time the workers are making batches (None: none)



def _step_factors(profile: Profile, count: int = 512) -> list[float]:
    """Each simulated step's time over the mean step's, drawn from the profile's timed calls
    (seeded, like the batch pool); all 1 where the step's calls were not timed."""
    calls = [c for c in profile.step_samples if c > 0]
    if len(calls) < 2:
        return [1.0]
    mean = statistics.fmean(calls)
    rng = random.Random(1)
    return [rng.choice(calls) / mean for _ in range(count)]


def _batch_pool(profile: Profile, batch_size: int, count: int = 512) -> list[float]:
    """Batch times of one worker at ``batch_size``: sums of sampled per-sample costs plus collate.
    Seeded, so every config is simulated on the same batches (their differences are not noise)."""
    rng = random.Random(batch_size)
    costs = profile.sample_s or (0.0,)
    collate = profile.collate_s * batch_size / profile.batch_size
    return [sum(rng.choice(costs) for _ in range(batch_size)) + collate for _ in range(count)]


class Model:
    """Predictions for one profile; batch-time pools are built once per batch size."""

    def __init__(self, profile: Profile, device: str):
        self.profile = profile
        self.cuda = device.startswith("cuda")
        self._pools: dict[int, list[float]] = {}
        self._memo: dict[tuple, Prediction] = {}
        self._step_factors = _step_factors(profile)

    def _pool(self, batch_size: int) -> list[float]:
        if batch_size not in self._pools:
            self._pools[batch_size] = _batch_pool(self.profile, batch_size)
        return self._pools[batch_size]

    def recv_s(self, batch_size: int, busy: float) -> float:
        """Receiving one batch from a worker that is busy ``busy`` of the time (NOTE [ A busy
        worker's receive ]): a fixed part and one that grows with the batch (NOTE [ The
        receive's two parts ])."""
        p = self.profile
        extra = max(0.0, p.recv_busy_s - p.recv_s) if p.recv_busy_s is not None else 0.0
        fixed = min(p.recv_s, p.recv_fixed_s) if p.recv_fixed_s is not None else 0.0
        # The wait for the worker's interpreter does not grow with the batch; the copy does.
        return fixed + (p.recv_s - fixed) * batch_size / p.batch_size + min(1.0, max(0.0, busy)) * extra

    @property
    def others_demand(self) -> float:
        """The CPUs other processes' threads want, from what they took during the profile
        (NOTE [ Others' demand ]); 0 where not measured."""
        p = self.profile
        taken = p.others_cpus or 0.0
        if taken <= 0:
            return 0.0
        if taken + 1.0 <= p.cpus:
            return taken
        return min(OTHERS_DEMAND_CAP * p.cpus, taken / max(p.cpus - taken, p.cpus / OTHERS_DEMAND_CAP))

    def _shared(self, demand: float, calib: Calibration) -> float:
        """How much slower a thread's CPU work runs when ``demand`` threads of the pipeline and
        the others' (NOTE [ Others' demand ]) share the CPUs: 1 while they fit."""
        return max(1.0, (demand + self.others_demand) / self.cpus(calib))

    def _stages(self, config: LoaderConfig, calib: Calibration, busy: float = 1.0) -> tuple[float, float]:
        """(pin thread, main loop) seconds per batch at ``config``'s batch size, its workers busy
        ``busy`` of the time. Without workers there is no pin thread: the loop pins the batch it
        collated itself."""
        p = self.profile
        scale = config.batch_size / p.batch_size
        step = p.step_s * scale
        if not config.num_workers:
            pin = ((p.pin_local_s if p.pin_local_s is not None else p.pin_s) or 0.0) * scale
            copy = ((p.h2d_pinned_s if config.pin_memory else p.h2d_pageable_s) or 0.0) * scale
            loop = (pin if config.pin_memory else 0.0) + copy if self.cuda else 0.0
            return 0.0, calib.main * (loop + step)
        recv = self.recv_s(config.batch_size, busy)
        if not self.cuda:
            return 0.0, calib.main * (recv + step)
        if config.pin_memory:
            return (calib.pin * (recv + (p.pin_s or 0.0) * scale),
                    calib.main * ((p.h2d_pinned_s or 0.0) * scale + step))
        return 0.0, calib.main * (recv + (p.h2d_pageable_s or 0.0) * scale + step)

    def _loop_collate_s(self, batch_size: int) -> float:
        """Collating one batch in the loop itself (no workers)."""
        p = self.profile
        collate = p.collate_main_s if p.collate_main_s is not None else p.collate_s
        return collate * batch_size / p.batch_size

    def cpus(self, calib: Calibration) -> float:
        """The CPUs the pipeline really gets: the profile's usable count, or fewer where the
        bursts showed workers stop adding throughput sooner (other threads, memory bandwidth)."""
        return calib.cpus if calib.cpus is not None else self.profile.cpus

    def startup_s(self, workers: int, calib: Calibration, method: str | None = None) -> float:
        """Fresh workers' start: iter() to the first batch, less that batch's own work; a start
        method other than the default's (``method``) adds what the profile measured it to cost
        over the default's (NOTE [ What a start method costs ] in methods.py)."""
        if workers == 0:
            return 0.0
        if calib.startup_base is not None:
            base = max(0.0, calib.startup_base + calib.startup_per_worker * workers)
        else:
            base = self.profile.startup_s
        return base + self.method_startup_s(workers, method)

    def method_startup_s(self, workers: int, method: str | None) -> float:
        """What ``method``'s workers take to start over the default's, as the profile measured."""
        if method is None:
            return 0.0
        own, default = method_cost(self.profile.methods, method), method_cost(self.profile.methods, None)
        if own is None or default is None:
            return 0.0
        return max(0.0, own.startup_s(workers) - default.startup_s(workers))

    def refill_s(self, workers: int, busy: float, worker_s: float, calib: Calibration) -> float:
        """An epoch boundary of kept workers: as the bursts that crossed one measured it, where
        they did (NOTE [ An epoch boundary of kept workers ]), else the next epoch's first batch
        (``worker_s``), made while ``workers`` busy ``busy`` of the time share the CPUs."""
        if calib.restart_base is not None:
            return max(0.0, calib.restart_base + calib.restart_per_worker * workers)
        return worker_s * self._shared(workers * busy * self.profile.sample_cpu_share + 1.0, calib)

    def predict(self, config: LoaderConfig, calib: Calibration = Calibration()) -> Prediction:
        key = (config, calib)
        if key not in self._memo:
            self._memo[key] = self._predict(config, calib)
        return self._memo[key]

    def _predict(self, config: LoaderConfig, calib: Calibration) -> Prediction:
        p = self.profile
        pool = self._pool(config.batch_size)
        pin_s, main_s = self._stages(config, calib)
        worker_s = statistics.fmean(pool) * calib.worker
        n = config.num_workers
        if n == 0:
            # The loop makes the batch itself: its samples, and its own (threaded) collate.
            produce = (worker_s - p.collate_s * config.batch_size / p.batch_size * calib.worker
                       + self._loop_collate_s(config.batch_size) * calib.worker)
            # Its samples' CPU part shares the CPUs with the others' (NOTE [ Others' demand ]).
            cpu = p.sample_cpu_share
            produce *= cpu * self._shared(1.0, calib) + 1.0 - cpu
            # Its own bursts correct all of it but the step, which the bursts with workers know.
            step = calib.main * p.step_s * config.batch_size / p.batch_size
            per_batch = (produce + main_s - step) * calib.local + step
            steady = config.batch_size / per_batch if per_batch > 0 else math.inf
            wait = produce * calib.local / per_batch if per_batch > 0 else 0.0
            bound = "workers" if produce >= main_s else "consumer"
            restart = receive = 0.0
            busy_workers = None
        else:
            interval, wait, busy_workers, bound, receive = self._steady(
                config if config.persistent_workers else config.replace(persistent_workers=True), calib)
            steady = config.batch_size / interval
            # Every epoch boundary drains the pipeline and waits for the next epoch's first
            # batch; fresh workers (no persistent_workers) first start up again as well.
            restart = (self.refill_s(n, busy_workers, worker_s, calib)
                       + (0.0 if config.persistent_workers else
                          self.startup_s(n, calib, config.multiprocessing_context)))
        rate = steady
        if p.epoch_batches and math.isfinite(steady):
            epoch_batches = p.epoch_batches * p.batch_size / config.batch_size
            epoch_s = epoch_batches * config.batch_size / steady
            rate = epoch_batches * config.batch_size / (epoch_s + restart)
        return Prediction(config, rate, steady, wait, bound, restart, receive, busy_workers)

    def _steady(self, config: LoaderConfig, calib: Calibration) -> tuple[float, float, float, str, float]:
        """(seconds per batch, share of the loop in next(), workers' busy share, bound, the
        loop's own receive share) of a config with workers; memoised apart from persistence,
        which changes only the restarts."""
        key = ("steady", config, calib)
        if key in self._memo:
            return self._memo[key]
        p = self.profile
        pool = self._pool(config.batch_size)
        n = config.num_workers
        # Processor sharing: every thread that wants a CPU (the workers' CPU part, the pin
        # thread, the loop's own host work) gets cpus / demand of one when they outnumber the
        # CPUs, so oversubscribed workers slow each other and the loop alike. Time a sample
        # spends waiting (I/O, a sleep, a lock) is not slowed, which is why such workers pay past
        # one per core.
        # The receive depends on how busy the workers are (NOTE [ A busy worker's receive ]).
        # Three passes, since how busy each stage is depends on the rate.
        cpu = p.sample_cpu_share
        step_s = p.step_s * config.batch_size / p.batch_size * calib.main
        busy_main = busy_pin = busy_workers = busy_recv = 1.0
        for _ in range(3):
            pin_s, main_s = self._stages(config, calib, busy_recv)
            host_s = max(0.0, main_s - step_s)   # the loop's receive and copies; the step's GPU time is not the CPU's
            demand = n * busy_workers * cpu + min(1.0, busy_main) + (min(1.0, busy_pin) if pin_s else 0.0)
            share = self._shared(demand, calib)
            factor = calib.worker * (cpu * share + 1.0 - cpu)
            pin_eff, main_eff = pin_s * share, host_s * share + step_s
            # The step's own jitter rides on the loop's time (NOTE [ Headroom ] in model_first.py).
            main_times = [main_eff + step_s * (f - 1.0) for f in self._step_factors]
            interval, wait, busy_workers = _simulate(n, config.prefetch_factor, config[ORDER],
                                                     [t * factor for t in pool], pin_eff, main_times)
            busy_main, busy_pin = main_eff / interval, pin_eff / interval
            busy_recv = (busy_recv + busy_workers) / 2   # damped: a slower receive idles the workers
        # Without a pin thread the loop receives each batch inside next(), where a burst's
        # measured wait includes it.
        receive = 0.0
        if not pin_s and config.num_workers:
            receive = min(1.0, calib.main * self.recv_s(config.batch_size, busy_recv) * share / interval)
        out = (interval, min(1.0, wait + receive), busy_workers, _bound(wait, pin_eff, main_eff, interval, step_s),
               receive)
        self._memo[key] = out
        return out

    def busy_share(self, config: LoaderConfig, calib: Calibration) -> float:
        """The share of the time ``config``'s workers are busy in the steady state, as the
        simulation finds it (persistence aside: it changes only the restarts); 0 without workers."""
        if not config.num_workers:
            return 0.0
        return self._steady(config.replace(persistent_workers=True), calib)[2]

    def rate_range(self, config: LoaderConfig, calib: Calibration) -> tuple[float, float]:
        """The lowest and highest rate ``config`` may have while the efficiency terms no burst has
        corrected yet are off by up to UNFITTED_STEP."""
        rates = [self.predict(config, calib).samples_per_s]
        for term, fits in (("worker", calib.worker_fits), ("main", calib.main_fits), ("pin", calib.pin_fits)):
            if not fits:
                rates += [self.predict(config, replace(calib, **{term: getattr(calib, term) * f})).samples_per_s
                          for f in (UNFITTED_STEP, 1 / UNFITTED_STEP)]
        return min(rates), max(rates)

    def model_error(self, history: Sequence[TrialResult], calib: Calibration) -> list[BurstError]:
        """Predicted against measured for each burst: how well the model did."""
        return [BurstError(t.config.key, self.predict(t.config, calib).samples_per_s, t.samples_per_s)
                for t in history if t.status == OK and t.samples_per_s]
