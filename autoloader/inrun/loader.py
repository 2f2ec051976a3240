"""``InRunLoader``: a DataLoader stand-in that tunes its own settings over the first epoch(s).

NOTE [ Tuning inside the run ] in inrun/__init__.py says what it promises; order.py how the
epoch's order is kept, schedule.py which config reads which segment, samples.py the seeding per
sample, record.py what is stored and said.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

from ..probe.load import cpu_mark, cpus_since
from ..probe.timing import timed_batches
from ..search.settings import PIN, PREFETCH
from ..search.space import LoaderConfig
from .made import MadeTimes, StampedSamples
from .order import Feed, draw_epoch, finish
from .ranks import Alone
from .schedule import SETTLED, Plan, Reading, queue_depth
from .samples import SeededSamples

# A worker's memory until one is measured (a forked worker's own pages, before copy on read).
WORKER_GUESS_BYTES = 256 << 20

# NOTE [ The next config begins during the drain ]
# A switch stops the reading config's feed; its loader then serves what it already pulled, in
# order (its drain), while its workers finish their last batches one by one and the CPUs they
# leave go idle; and the next config's loader, begun only after the drain, waits out its first
# wave (a batch each worker makes whole, served in order) before the loop gets a batch. So the
# next config's loader is begun (its workers started or resumed, its feed opened on the batches
# after all those the stopped feed pulled) as soon as the switch is decided, and the drain is
# served while it fills. The order holds: the stopped feed pulls nothing more, the next one pulls
# the epoch's following batches, and the loop is handed every drained batch before any of the
# next loader's. The next config is the plan's answer at the switch (asked with the batches it can
# read: those after all the stopped feed pulled), held to: its loader has pulled batches that only
# it can serve. Its reading starts when the loop first asks it, and the batches its loader pulled
# by then (``prefilled``) are left out of its steady part, as the first wave is: they were made
# while the loop read the drain. ``OVERLAP`` off: the next loader is begun after the drain.
OVERLAP = True


def _ended(loader: Any) -> None:
    """End a config's loader now, its kept workers joined (a plain DataLoader's iterator does the
    same when it is collected; a switch cannot wait for that)."""
    iterator = getattr(loader, "_iterator", None)
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    if iterator is not None:
        loader._iterator = None


def _worker_pids(iterator: Any) -> list[int]:
    return [w.pid for w in getattr(iterator, "_workers", ()) if w.pid]


class InRunLoader:
    """An iterable over ``dataset`` in the batches a plain ``DataLoader`` with the same arguments
    gives, which reads its first epoch(s) in segments under different settings, keeps the fastest
    within the noise, and stores it (NOTE [ Tuning inside the run ]).

    Built by ``best_loader(..., tune="run")`` or ``autoloader.tuned(loader)``; not meant to be
    built directly. ``plain``: the reference DataLoader (no workers) whose sampler, batch sampler,
    collate and length this loader uses; ``proposer`` (quick.py) the start, the rule and the space;
    ``epochs``: the run's epochs, where known (the stop rule weighs a step over them);
    ``report``: record.py's ``Reporter``, told of each reading, of the pick settled, of its
    epoch's end and of the first epoch that ended still exploring (None: nobody); ``ranks``:
    the torchrun ranks reading one schedule with this one (NOTE [ Ranks in the run ] in
    ranks.py; default: this process alone)."""

    def __init__(self, plain: Any, proposer: Any, *, sample_seed: int | None = None,
                 worker_init_fn: Callable | None = None, multiprocessing_context: Any = None, timeout: float = 0,
                 max_memory: int | None = None, epochs: int | None = None,
                 report: Any = None, ranks: Alone | None = None):
        self.plain = plain
        self.dataset = plain.dataset
        self.batch_size = plain.batch_size
        self.drop_last = plain.drop_last
        self.sampler = plain.sampler
        self.batch_sampler = plain.batch_sampler
        self.collate_fn = plain.collate_fn
        self.generator = plain.generator
        self.sample_seed = sample_seed
        self._samples = SeededSamples(self.dataset, sample_seed) if sample_seed is not None else self.dataset
        self._worker_init_fn = worker_init_fn
        self._context = multiprocessing_context
        self._timeout = timeout
        self._proposer = proposer
        self._max_memory = max_memory
        self._worker_bytes: int | None = None      # the largest worker measured (by any rank)
        self._measured: int | None = None          # this process's own worker, once measured
        self._ranks = ranks or Alone()
        self.refused: list[LoaderConfig] = []      # configs the memory forecast kept from starting
        self.plan: Plan | None = None
        proposer.fits = self.fits
        start = proposer.start()
        if not self.fits(start):
            start = start.replace(num_workers=0)
        self.plan = Plan(start, proposer.rule, proposer.space.max_workers, fits=self.fits,
                         neighbour=getattr(proposer, "neighbour", None), aim=getattr(proposer, "aim", None),
                         cpus=getattr(proposer, "cpus", None),
                         pins=tuple(proposer.space.values(PIN)), prefetch=tuple(proposer.space.values(PREFETCH)))
        # NOTE [ One tune of a problem at a time ] in record.py: another process tunes it.
        self.following = report is not None and self._ranks.shared(report.following)
        if self.following:
            self.plan.stop("another process tunes this problem")
        self.run_epochs = epochs
        self.epochs = 0
        self.epoch_s: list[float] = []             # each whole epoch's wall time, from iter() to its end
        self.tuned_epochs = 0                       # epochs in which configs other than the pick's ran
        self.final: Reading | None = None           # the pick's reading over the rest of its epoch
        self._alive: dict[LoaderConfig, Any] = {}  # each config's loader whose workers are kept
        # Held here: an epoch's generator closed at the interpreter's exit outlives module globals.
        self._ended = _ended
        self._kept = None
        self._report = report
        self.reported = self.following   # nothing tuned, nothing to say at an epoch's end

    def __len__(self) -> int:
        return len(self.plain)

    def close(self) -> None:
        """End every worker this loader keeps (the pick's too, as a plain DataLoader's kept workers
        end when it is collected): call it where the loop is done with the loader but the loader
        lives on. A later ``iter()`` starts the workers it needs afresh. A tune not yet stored
        lets the problem's lock go (NOTE [ One tune of a problem at a time ] in record.py)."""
        self._end(set())
        if self._kept is not None:
            self._ended(self._kept)
            self._kept = None
        if self._report is not None:
            self._report.release()

    def expect(self, epochs: int | None) -> None:
        """Say how many epochs the run will read (None: unknown); the stop rule weighs a step's
        gain over them (NOTE [ When exploring stops ] in schedule.py)."""
        self.run_epochs = epochs

    # --- memory --------------------------------------------------------------------------------
    def forecast(self, config: LoaderConfig) -> int:
        """The bytes ``config`` is forecast to add to the loop's process: its workers (as one
        measured, or WORKER_GUESS_BYTES) and the batches in flight."""
        profile = self._proposer.profile
        batch = profile.batch_bytes if profile is not None else 0
        workers = config.num_workers
        in_flight = queue_depth(config) * batch * (2 if config.pin_memory else 1)
        return workers * (self._worker_bytes or WORKER_GUESS_BYTES) + in_flight + batch

    def fits(self, config: LoaderConfig) -> bool:
        """Within the memory limit, beside the best's kept workers; one that is not never starts
        (it is listed in ``refused``). Without workers a config starts no process and holds one
        batch: it always fits."""
        if not config.num_workers or self._max_memory is None:
            return True
        best = self.plan.best if self.plan is not None else None
        beside = self.forecast(best) if best is not None and best != config and best.num_workers else 0
        if self.forecast(config) + beside <= self._max_memory:
            return True
        if config not in self.refused:
            self.refused.append(config)
        return False

    def _measure_workers(self, loader: Any) -> None:
        from ..probe.pages import private_pages

        sizes = [p.uss for p in (private_pages(pid) for pid in _worker_pids(getattr(loader, "_iterator", None)))
                 if p is not None]
        if sizes:
            self._measured = max(sizes)

    # --- loaders -------------------------------------------------------------------------------
    def _kwargs(self, config: LoaderConfig, kept: bool) -> dict:
        kwargs = config.loader_kwargs()
        kwargs.pop("batch_size", None)
        if config.num_workers:
            kwargs["worker_init_fn"] = self._worker_init_fn or _seed_worker()
            if self._context is not None:
                kwargs["multiprocessing_context"] = self._context
            if not kept:
                kwargs["persistent_workers"] = True   # kept while tuning: a switch back costs no start
        else:
            for name in ("prefetch_factor", "persistent_workers", "multiprocessing_context", "in_order"):
                kwargs.pop(name, None)
        return kwargs

    def _loader(self, config: LoaderConfig, seed: int, kept: bool = False):
        """A DataLoader with ``config`` over a ``Feed`` of the epochs; while tuning (not ``kept``),
        its batches write when they were made (NOTE [ When a batch was made ] in made.py)."""
        import torch
        from torch.utils.data import DataLoader

        made = None if kept else MadeTimes(len(self))
        samples = self._samples if made is None else StampedSamples(self._samples, made)
        return DataLoader(samples, batch_sampler=Feed(len(self), keyed=self.sample_seed is not None, made=made),
                          collate_fn=self.collate_fn, timeout=self._timeout,
                          generator=torch.Generator().manual_seed(seed), **self._kwargs(config, kept))

    def _end(self, keep: set) -> None:
        """End the loaders of configs not in ``keep``, their workers joined."""
        for config in [c for c in self._alive if c not in keep]:
            self._ended(self._alive.pop(config))

    def _kept_loader(self, seed: int):
        """The pick's own DataLoader for the epochs after tuning: the one it read with, where it
        keeps its workers (or has none); else a fresh one, its workers made afresh each epoch."""
        if self._kept is None:
            pick = self.plan.pick
            alive = self._alive.pop(pick, None)
            self._end(set())
            if alive is not None and (not pick.num_workers or pick.persistent_workers):
                self._kept = alive
                alive.batch_sampler.made = None   # no more readings: its batches stop marking
            else:
                if alive is not None:
                    self._ended(alive)
                self._kept = self._loader(pick, seed, kept=True)
        return self._kept

    def _run_left(self, left: int) -> int | None:
        """Batches the run reads after this point, where its epochs are known."""
        if self.run_epochs is None:
            return None
        return left + max(0, self.run_epochs - self.epochs) * len(self)

    # --- iteration -----------------------------------------------------------------------------
    def __iter__(self):
        drawn, base_seed = draw_epoch(self.plain._index_sampler, self.generator)
        epoch = self.epochs
        self.epochs += 1
        if self.following:
            self._follow(epoch)
        if self.plan.state == SETTLED and self.reported:
            loader = self._kept_loader(base_seed)
            loader.batch_sampler.open(drawn, epoch)
            return iter(loader)
        return self._epoch(drawn, base_seed, epoch)

    def _follow(self, epoch: int) -> None:
        """From ``epoch`` on, the pick another process's tune stored, once it is (NOTE [ One tune
        of a problem at a time ] in record.py)."""
        stored = self._ranks.shared(self._report.stored())
        if stored is None:
            return
        pick, path = stored
        self.following = False
        if pick != self.plan.pick:
            # The start's workers end before the pick's begin: its forecast stands alone.
            forecast = self.forecast(pick)
            if pick.num_workers and self._max_memory is not None and forecast > self._max_memory:
                self.refused.append(pick)
                self._report.not_adopted(epoch, pick, path, forecast, self._max_memory, self.plan.pick)
                return
            if self._kept is not None:
                self._ended(self._kept)
                self._kept = None
            self.plan.adopt(pick, "another process's tune stored it")
        self._report.adopted(epoch, pick, path)

    def _begin(self, config: LoaderConfig, drawn: Any, epoch: int, limit: int, seed: int) -> tuple[Any, bool, Any]:
        """``config``'s loader opened on the epoch's next ``limit`` batches, and its iterator begun
        (a start, or a resume of kept workers): (the loader, whether its workers were started, the
        iterator)."""
        loader = self._alive.get(config)
        started = loader is None or getattr(loader, "_iterator", None) is None
        if loader is None:
            loader = self._alive[config] = self._loader(config, seed)
        loader.batch_sampler.open(drawn, epoch, limit=limit)
        with warnings.catch_warnings():   # the worker count's warning, once per loader otherwise
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            iterator = iter(loader)
        return loader, started, iterator

    def _epoch(self, drawn: Any, base_seed: int, epoch: int):
        plan, total, pos, opened = self.plan, len(self), 0, 0
        began = time.perf_counter()
        tuned_here = plan.state != SETTLED
        normal = False
        ahead = None   # the next config's (config, loader, started, iterator), begun during the drain
        # The last switch: when its reading was cut, the batches served since (its drain), and the
        # seconds it spent ending workers and beginning the next config's before that one's reading.
        cut_at, drained, ended_s, begun_s = None, 0, 0.0, 0.0
        try:
            while pos < total:
                if ahead is None:
                    config = self._ask(total - pos)
                    t_end = time.perf_counter()
                    self._end(plan.alive() | {config})
                    t_begin = time.perf_counter()
                    ended_s += t_begin - t_end
                    loader, started, iterator = self._begin(config, drawn, epoch, total - pos, base_seed + opened)
                    prefilled = 0
                else:   # NOTE [ The next config begins during the drain ]
                    (config, loader, started, iterator), ahead = ahead, None
                    t_end = time.perf_counter()
                    self._end(plan.alive() | {config})
                    t_begin = time.perf_counter()
                    ended_s += t_begin - t_end
                    prefilled = len(loader.batch_sampler.sizes)
                opened += 1
                feed = loader.batch_sampler
                switch = {} if cut_at is None else \
                    {"drained": drained, "drain_s": t_begin - cut_at, "begin_s": begun_s, "end_s": ended_s}
                reading = _Open(config, t_begin, 0, lead=None, started=started, prefilled=prefilled, **switch)
                cut_at, drained, ended_s, begun_s = None, 0, 0.0, 0.0
                served = 0
                for batch, called, returned in timed_batches(iterator):
                    if reading is not None and plan.state != SETTLED and reading.due():
                        partial = reading.close(called, feed.sizes, cut=True, made=feed.made)
                        if self._ranks.cut(plan.cut(partial)):
                            partial.own_cpus = reading.own_cpus()
                            self._take(partial, was=plan.state)
                            # The next config reads the batches after all those this loader pulled.
                            rest = total - pos - len(feed.sizes)
                            following = self._ask(rest)
                            if following == config:
                                reading = _Open(config, called, served, lead=0, started=False)
                            else:
                                feed.stop()   # what the loader holds is served, in order: its drain
                                reading, cut_at = None, called
                                if OVERLAP and rest > 0:
                                    t_end = time.perf_counter()
                                    self._end(plan.alive() | {config, following})
                                    t_begun = time.perf_counter()
                                    ahead = (following, *self._begin(following, drawn, epoch, rest, base_seed + opened))
                                    ended_s, begun_s = ended_s + t_begun - t_end, time.perf_counter() - t_begun
                    if reading is not None:
                        reading.add(called, returned, dry=feed.dry)
                        if config.num_workers and self._measured is None and served == 2 * config.num_workers:
                            self._measure_workers(loader)
                    elif cut_at is not None:
                        drained += 1
                    served += 1
                    if pos + served == total:
                        # The epoch's last batch: its books are closed before it is handed over,
                        # as a loop that knows the length (Lightning's) asks for no batch after it.
                        if reading is not None and reading.calls:
                            self._take(reading.close(returned, feed.sizes, made=feed.made), was=plan.state)
                        reading = None
                        normal = True
                        self._epoch_ended(drawn, began, epoch, tuned_here)
                    yield batch
                end = time.perf_counter()
                if reading is not None and reading.calls:
                    self._take(reading.close(end, feed.sizes, made=feed.made), was=plan.state)
                pos += served
                if not served or (feed.dry and pos < total):   # the sampler gave fewer batches than its length said
                    break
            if not normal:
                normal = True
                self._epoch_ended(drawn, began, epoch, tuned_here)
        finally:
            if not normal:   # a break or an exception in the loop: no workers outlive it
                self._end(set())

    def _epoch_ended(self, drawn: Any, began: float, epoch: int, tuned_here: bool) -> None:
        finish(drawn)
        if tuned_here:
            self.tuned_epochs += 1
        self.epoch_s.append(time.perf_counter() - began)
        if self.run_epochs is not None and self.epochs >= self.run_epochs:
            self.plan.stop("the run's epochs are read")
        if self.plan.state == SETTLED and not self.reported:
            self.reported = True
            if self._report is not None:
                self._report.done(self)
        elif self.plan.state != SETTLED and self._report is not None and self.tuned_epochs == 1:
            self._report.exploring(self, epoch)   # said once, nothing stored

    def _ask(self, left: int) -> LoaderConfig:
        """The config that reads next (the plan may settle in answering)."""
        was = self.plan.state
        config, _ = self.plan.next(left, len(self), self._run_left(left))
        self._settled(was)
        return config

    def _take(self, reading: Reading, was: str) -> None:
        """Hand ``reading`` to the plan (the node's, under torchrun: every rank hands its own at
        the same batch); the pick's reading after it settled is ``final``."""
        reading, worker_bytes = self._ranks.reading(reading, self._measured)
        if worker_bytes is not None:
            self._worker_bytes = worker_bytes
        self.plan.done(reading)
        if was == SETTLED:
            self.final = reading
        if self._report is not None:
            self._report.read(self, reading)
        self._settled(was)

    def _settled(self, was: str) -> None:
        if was != SETTLED and self.plan.state == SETTLED and self._report is not None:
            self._report.settled(self)   # stored as soon as settled: a loop that stops early keeps it


class _Open:
    """A reading in progress: the loop's times from ``t0``, its batches from ``first`` of its
    feed's opening; ``steady_end`` set where its feed ran dry; ``prefilled``: as ``Reading``'s."""

    def __init__(self, config: LoaderConfig, t0: float, first: int, lead: int | None, started: bool,
                 prefilled: int = 0, drained: int = 0, drain_s: float = 0.0, begin_s: float = 0.0,
                 end_s: float = 0.0):
        self.config, self.t0, self.first, self.lead, self.started = config, t0, first, lead, started
        self.prefilled, self.drained, self.drain_s = prefilled, drained, drain_s
        self.begin_s, self.end_s = begin_s, end_s
        self.calls: list[float] = []
        self.got: list[float] = []
        self.steady_end: int | None = None
        self.mark = cpu_mark()

    def add(self, called: float, returned: float, dry: bool) -> None:
        if dry and self.steady_end is None:
            self.steady_end = len(self.got)
        self.calls.append(called - self.t0)
        self.got.append(returned - self.t0)

    def due(self) -> bool:
        """Whether to ask if it has read enough: each batch at first, then at a thirty-second of
        its length (the check reads the whole reading)."""
        n = len(self.got)
        return n > 0 and (n < 64 or n % (n // 32) == 0)

    def own_cpus(self) -> float | None:
        """The CPUs' worth this process and its workers took since the reading opened."""
        return cpus_since(self.mark)[1]

    def close(self, end: float, sizes: list[int], cut: bool = False, made: MadeTimes | None = None) -> Reading:
        """The reading up to ``end`` (a cut one: all of it before its drain; its CPUs are read
        where it is taken, not at each check); ``sizes``: its feed's opening's batches, and
        ``made``, when they were made (NOTE [ When a batch was made ] in made.py)."""
        n = len(self.got)
        steady_end = self.steady_end if self.steady_end is not None else n if cut or self.lead == 0 else None
        if made is not None:
            made = tuple(sorted((t - self.t0, size) for t, size in zip(made.read(len(sizes)), sizes) if t > 0))
        return Reading(self.config, None, sizes[self.first:self.first + n], self.calls[:], self.got[:],
                       end - self.t0, lead=self.lead, steady_end=steady_end, started=self.started,
                       own_cpus=None if cut else self.own_cpus(), prefilled=self.prefilled,
                       drained=self.drained, drain_s=self.drain_s, begin_s=self.begin_s, end_s=self.end_s,
                       made=made or ())


def _seed_worker():
    from ..seeding import seed_worker

    return seed_worker
