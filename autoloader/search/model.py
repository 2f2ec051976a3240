"""Predicting any config's rate, wait and restart cost from the profile: NOTE [ The pipeline model ].

Pure functions over a ``Profile`` and measured ``TrialResult``s: the search asks the model which
configs are worth a burst; the bursts correct its efficiency terms (``Calibration``, fitted by
``calibrate``), and the model is asked again.

# NOTE [ The pipeline model ]
# A DataLoader with workers is a three-stage pipeline, simulated batch by batch (``_simulate``):
#   workers    batch k goes to worker k mod n; each batch's time is drawn from the profile's
#              per-sample costs (batch_size draws plus collate), slowed by the share of a core
#              its worker gets when the threads that want a CPU outnumber the CPUs;
#   pin thread with pin_memory, copies each batch to page-locked memory, in arrival order;
#   main       the loop takes the batches (in index order, or as they come with in_order=False),
#              copies each to the device and runs the step.
# At most prefetch_factor x n batches are out: batch k + prefetch x n is handed out only when the
# loop took batch k, so a slow batch at the head of the in-order queue stalls the loop, and a
# deeper prefetch or out-of-order delivery lets the other workers run on (head-of-line blocking,
# from the sampled tail, without a rule for it). Without workers the loop does every stage. Each
# epoch is charged one restart: the refill of the drained pipeline, and without persistent
# workers their start-up. Efficiency terms (``worker``, ``main``, ``pin``, ``local``) are fitted
# to the bursts, each only from bursts the model says that stage bounds.

# NOTE [ A busy worker's receive ]
# A worker sends a batch's tensors as shared-memory descriptors, which the receiver fetches from
# a thread in that worker; that thread needs the worker's interpreter lock, which the worker's
# own Python code holds while it makes the next batch. So a batch taken from a busy worker costs
# the receiver more than one from an idle worker, whatever its size. The profile times both
# (recv_s idle, recv_busy_s busy) where the trials run, and the model charges the extra by how
# busy the workers are, to whoever receives: the pin thread, or the loop without one.

# NOTE [ The receive's two parts ]
# Receiving a batch costs a part that grows with its bytes and one that does not (a message, a
# descriptor a tensor). The profile times the receive at two batch sizes; the line through them
# gives the fixed part (``Profile.recv_fixed_s``), so a change that shrinks the bytes or the
# batch moves only the part that moves.

# NOTE [ Others' demand ]
# The driver measures what other processes took during the profile (O of the C usable CPUs)
# while its one thread wanted one. Where O + 1 <= C nobody waited: they wanted O. Past that each
# runnable thread got an even share, so the profile's got C - O and theirs, wanting D, got O:
# D = O / (C - O). The processor sharing counts D beside the pipeline's own demand, so a config
# wanting more CPUs than the others leave is predicted slower, as it runs.

# NOTE [ An epoch boundary of kept workers ]
# With persistent_workers the main process tells every worker to resume at an epoch's end, waits
# for each one's answer, hands out the first prefetch x n indices and waits for the next epoch's
# first batch: a boundary costs more than one batch's work, and more with every worker. Once
# bursts crossed one (NOTE [ Honest burst ] in probe/burst.py), their boundaries, fitted as a
# base plus a cost per worker (``calibrate``), stand for the model's refill.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from .codec import Stored, stored
from .methods import method_cost
from .policy import (
    BOUND_WAIT,
    CONSUMER_BOUND_SHARE,
    CPU_FIT_GAIN,
    LOADER_BOUND_WAIT,
    MAX_CORRECTION,
    PIN_BOUND_SHARE,
    UNFITTED_STEP,
)
from .profile import Profile
from .results import OK, BurstError, TrialResult
from .settings import ORDER
from .space import LoaderConfig

# The others' demand is at most this many times the CPUs (NOTE [ Others' demand ]): past it the
# profile's thread got too little for the share to say more.
OTHERS_DEMAND_CAP = 4.0


@dataclass(frozen=True)
class Calibration(Stored):
    """Efficiency terms fitted to the bursts (multipliers of each stage's time), and the fitted
    start-up and epoch boundary (``base + per_worker x workers``)."""

    worker: float = stored(1.0, positive=True)
    main: float = stored(1.0, positive=True)
    pin: float = stored(1.0, positive=True)
    cpus: float | None = stored(None, positive=True)   # effective CPUs, when the bursts pinned them down
    local: float = stored(1.0, positive=True)          # the whole per-batch time without workers (its own bursts)
    startup_base: float | None = stored(None, signed=True)
    startup_per_worker: float = stored(0.0, signed=True)
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


# Batches simulated past the pipeline's warm-up; enough that a 1-in-100 slow batch shows.
SIMULATED_BATCHES = 600


def _simulate(n: int, prefetch: int, in_order: bool, batch_times: list[float], pin_s: float,
              main_times: list[float]) -> tuple[float, float, float]:
    """(seconds per batch, the loop's wait share, the workers' busy share) in steady state;
    ``main_times``: the loop's seconds for each batch in turn (cycled: the step's jitter).

    The search asks this of hundreds of configs after each burst, so the loop is written for speed
    (locals, the dispatch inlined, ``a if a >= b else b`` for ``max(a, b)``: the same float), and
    gives exactly what the plain loop gave (tests/test_simulate.py).
    """
    outstanding = max(1, prefetch * n)
    warm = outstanding + 2 * n + 2
    total = warm + max(SIMULATED_BATCHES, 4 * outstanding)
    pool, mains = len(batch_times), len(main_times)
    worker_free = [0.0] * n
    finish: list[float] = []                # when batch k is made; batches are dispatched in order
    ready: list[tuple[float, int]] = []     # (finish time, batch) of batches made, not yet taken
    push, pop = heapq.heappush, heapq.heappop
    for k in range(outstanding):            # the first tasks, all handed out at time 0
        w = k % n
        start = worker_free[w] if worker_free[w] > 0.0 else 0.0
        worker_free[w] = done = start + batch_times[k % pool]
        finish.append(done)
        if not in_order:
            push(ready, (done, k))
    dispatched = outstanding
    pin_free = main_free = 0.0
    window_start = waited = busy = 0.0
    for taken in range(total):
        if in_order:
            k = taken
            made = finish[k]
        else:
            made, k = pop(ready)
        pinned = (made if made >= pin_free else pin_free) + pin_s
        pin_free = pinned
        start = pinned if pinned >= main_free else main_free
        if taken >= warm:
            if taken == warm:
                window_start, waited, busy = main_free, 0.0, 0.0
            gap = pinned - main_free
            waited += gap if gap > 0.0 else 0.0
            busy += batch_times[k % pool]
        main_free = start + main_times[taken % mains]
        # The loop hands the next task to its worker as it takes a batch (round robin).
        w = dispatched % n
        free = worker_free[w]
        worker_free[w] = done = (start if start >= free else free) + batch_times[dispatched % pool]
        finish.append(done)
        if not in_order:
            push(ready, (done, dispatched))
        dispatched += 1
    span = max(main_free - window_start, 1e-12)
    batches = total - warm
    return span / batches, min(1.0, waited / span), min(1.0, busy / (n * span))


def _bound(wait: float, pin_s: float, main_s: float, interval: float, step_s: float) -> str:
    """The stage that caps a simulated pipeline: the workers when the loop waits, else the
    slower of the pin thread and the loop (the consumer when the step is most of the loop)."""
    if wait > BOUND_WAIT:
        return "pin" if pin_s >= PIN_BOUND_SHARE * interval else "workers"
    if pin_s > main_s:
        return "pin"
    return "consumer" if step_s >= CONSUMER_BOUND_SHARE * main_s else "main"


def _step_factors(profile: Profile, count: int = 512) -> list[float]:
    """Each simulated step's time over the mean, drawn (seeded) from the profile's timed calls."""
    calls = [c for c in profile.step_samples if c > 0]
    if len(calls) < 2:
        return [1.0]
    mean = statistics.fmean(calls)
    rng = random.Random(1)
    return [rng.choice(calls) / mean for _ in range(count)]


def _batch_pool(profile: Profile, batch_size: int, count: int = 512) -> list[float]:
    """One worker's batch times at ``batch_size``, seeded: every config is simulated on the same
    batches, so their differences are not noise."""
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
        """Receiving one batch from a worker busy ``busy`` of the time (NOTE [ A busy worker's
        receive ], NOTE [ The receive's two parts ])."""
        p = self.profile
        extra = max(0.0, p.recv_busy_s - p.recv_s) if p.recv_busy_s is not None else 0.0
        fixed = min(p.recv_s, p.recv_fixed_s) if p.recv_fixed_s is not None else 0.0
        return fixed + (p.recv_s - fixed) * batch_size / p.batch_size + min(1.0, max(0.0, busy)) * extra

    @property
    def others_demand(self) -> float:
        """The CPUs other processes' threads want (NOTE [ Others' demand ]); 0 where not measured."""
        p = self.profile
        taken = p.others_cpus or 0.0
        if taken <= 0:
            return 0.0
        if taken + 1.0 <= p.cpus:
            return taken
        return min(OTHERS_DEMAND_CAP * p.cpus, taken / max(p.cpus - taken, p.cpus / OTHERS_DEMAND_CAP))

    def _shared(self, demand: float, calib: Calibration) -> float:
        """How much slower CPU work runs when ``demand`` threads and the others' share the CPUs."""
        return max(1.0, (demand + self.others_demand) / self.cpus(calib))

    def _stages(self, config: LoaderConfig, calib: Calibration, busy: float = 1.0) -> tuple[float, float]:
        """(pin thread, main loop) seconds per batch, the workers busy ``busy`` of the time."""
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

    def cpus(self, calib: Calibration) -> float:
        """The CPUs the pipeline gets: the profile's, or fewer where the bursts fitted a cap."""
        return calib.cpus if calib.cpus is not None else self.profile.cpus

    def startup_s(self, workers: int, calib: Calibration, method: str | None = None) -> float:
        """Fresh workers' start (iter() to the first batch, less its work), ``method``'s extra
        over the default's included (NOTE [ What a start method costs ] in methods.py)."""
        if workers == 0:
            return 0.0
        if calib.startup_base is not None:
            base = max(0.0, calib.startup_base + calib.startup_per_worker * workers)
        else:
            base = self.profile.startup_s
        return base + self.method_startup_s(workers, method)

    def method_startup_s(self, workers: int, method: str | None) -> float:
        if method is None:
            return 0.0
        own, default = method_cost(self.profile.methods, method), method_cost(self.profile.methods, None)
        if own is None or default is None:
            return 0.0
        return max(0.0, own.startup_s(workers) - default.startup_s(workers))

    def refill_s(self, workers: int, busy: float, worker_s: float, calib: Calibration) -> float:
        """An epoch boundary of kept workers: as bursts measured it (NOTE [ An epoch boundary of
        kept workers ]), else the next epoch's first batch (``worker_s``) on shared CPUs."""
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
            collate = p.collate_main_s if p.collate_main_s is not None else p.collate_s
            produce = (worker_s - p.collate_s * config.batch_size / p.batch_size * calib.worker
                       + collate * config.batch_size / p.batch_size * calib.worker)
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
        """(seconds per batch, the loop's wait share, workers' busy share, bound, the loop's own
        receive share) of a config with workers, memoised."""
        key = ("steady", config, calib)
        if key in self._memo:
            return self._memo[key]
        p = self.profile
        pool = self._pool(config.batch_size)
        n = config.num_workers
        # Processor sharing: every thread that wants a CPU gets cpus / demand of one when they
        # outnumber the CPUs; a sample's waits (I/O, a sleep) are not slowed, which is why such
        # workers pay past one per core. Three passes: how busy each stage is depends on the rate.
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
        """The share of the time ``config``'s workers are busy in the steady state."""
        if not config.num_workers:
            return 0.0
        return self._steady(config.replace(persistent_workers=True), calib)[2]

    def rate_range(self, config: LoaderConfig, calib: Calibration) -> tuple[float, float]:
        """``config``'s lowest and highest rate while the terms no burst corrected are off by up to
        UNFITTED_STEP: wide for a config resting on a stage no burst measured."""
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


# --- the efficiency terms, fitted to the bursts ------------------------------------------------

def calibrate(model: Model, history: Sequence[TrialResult]) -> Calibration:
    """Fit the efficiency terms to the measured bursts, each to the stage the burst speaks for
    (``_term``); bursts without workers fit their own. With worker-bound bursts at two or more
    counts, the CPUs the workers really get are fitted too."""
    measured = [t for t in history if t.status == OK and t.samples_per_s and not t.pruned]
    if not measured:
        return Calibration()
    calib = _fit_terms(model, measured, Calibration())
    bound = [t for t in measured if t.config.num_workers and _term(t, model.predict(t.config, calib)) == "worker"]
    counts = sorted({t.config.num_workers for t in bound})
    if len(counts) >= 2:
        best, best_error = calib, _error(model, bound, calib)
        top = model.profile.cpus
        # A cap shows only between the counts measured; one below them all fits their noise.
        for eff in [top * f / 16 for f in range(4, 16) if counts[0] <= top * f / 16 < counts[-1]]:
            trial_calib = _fit_terms(model, measured, replace(Calibration(), cpus=eff))
            error = _error(model, bound, trial_calib)
            if error < best_error * CPU_FIT_GAIN:   # a clear improvement, not noise
                best, best_error = trial_calib, error
        calib = best
    # The default start method's start-ups (another's adds Model.method_startup_s), each less one
    # batch's own work.
    batch = model.profile.worker_batch_s() * calib.worker
    starts = [(t.config.num_workers, max(0.0, t.startup_s - batch)) for t in measured
              if t.config.num_workers and t.startup_s and t.config.multiprocessing_context is None]
    base, per_worker = _line(starts) if starts else (None, 0.0)
    # NOTE [ An epoch boundary of kept workers ] in model.py.
    boundaries = [(t.config.num_workers, t.epoch_restart_s) for t in measured
                  if t.config.num_workers and t.config.persistent_workers and t.epochs_crossed
                  and t.epoch_restart_s is not None]
    restart_base, restart_per_worker = _line(boundaries) if boundaries else (None, 0.0)
    return replace(calib, startup_base=base, startup_per_worker=per_worker,
                   restart_base=restart_base, restart_per_worker=restart_per_worker)


def _fit_terms(model: Model, measured: Sequence[TrialResult], calib: Calibration) -> Calibration:
    for _ in range(3):
        ratios: dict[str, list[float]] = {"worker": [], "main": [], "pin": [], "local": []}
        for trial in measured:
            predicted = model.predict(trial.config, calib)
            ratio = predicted.steady_samples_per_s / (trial.steady_samples_per_s or trial.samples_per_s)
            if not math.isfinite(ratio) or ratio <= 0:
                continue
            term = "local" if not trial.config.num_workers else _term(trial, predicted)
            ratios[term].append(ratio)
        # A term a burst corrected stays fitted when, so corrected, it speaks for another stage.
        calib = replace(calib, **{t: _clamp(getattr(calib, t) * _geomean(r)) for t, r in ratios.items()},
                        **{f"{t}_fits": max(getattr(calib, f"{t}_fits"), len(ratios[t]))
                           for t in ("worker", "main", "pin")})
    return calib


def _error(model: Model, trials: Sequence[TrialResult], calib: Calibration) -> float:
    return sum(math.log(model.predict(t.config, calib).steady_samples_per_s
                        / (t.steady_samples_per_s or t.samples_per_s)) ** 2 for t in trials)


def _term(trial: TrialResult, predicted: Prediction) -> str:
    """The term a burst corrects: a loop that waited for data was held by the workers (or the pin
    thread, where the model says it holds), one that did not by the loop."""
    if trial.wait_fraction is None:
        waited = predicted.bound in ("workers", "pin")
    else:
        # Less the loop's own receive, which is inside next() but is the loop's work.
        waited = trial.wait_fraction - predicted.receive_share > LOADER_BOUND_WAIT
    if not waited:
        # Fed where the model said the pin thread holds it: the pin thread was faster than modelled.
        measured = trial.steady_samples_per_s or trial.samples_per_s or 0.0
        return "pin" if predicted.bound == "pin" and measured > predicted.steady_samples_per_s else "main"
    return "pin" if predicted.bound == "pin" else "worker"


def _geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.median(math.log(v) for v in values)) if values else 1.0


def _clamp(value: float) -> float:
    return min(MAX_CORRECTION, max(1.0 / MAX_CORRECTION, value))


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(base, cost per worker) of seconds against workers, least squares with neither below 0;
    the mean alone until two worker counts are measured."""
    counts = {n for n, _ in points}
    mean_n = statistics.fmean(n for n, _ in points)
    mean_s = statistics.fmean(s for _, s in points)
    if len(counts) < 2:
        return mean_s, 0.0
    var = sum((n - mean_n) ** 2 for n, _ in points)
    slope = max(0.0, sum((n - mean_n) * (s - mean_s) for n, s in points) / var)
    if mean_s - slope * mean_n >= 0:
        return mean_s - slope * mean_n, slope
    # The base at its bound: the least-squares line through the origin.
    return 0.0, sum(n * s for n, s in points) / sum(n * n for n, _ in points)
