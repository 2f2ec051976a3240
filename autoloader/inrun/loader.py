"""``InRunLoader``: a DataLoader stand-in that tunes its own settings over the first epoch(s).

NOTE [ Tuning inside the run ] in inrun/__init__.py says what it promises; order.py how the
epoch's order is kept, schedule.py which config reads which segment, samples.py the seeding per
sample, record.py what is stored and said.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

from ..probe.timing import timed_batches
from ..search.space import LoaderConfig
from .order import Batches, CurrentEpoch, draw_epoch, finish
from .schedule import SETTLED, Plan, Reading
from .samples import SeededSamples

# A worker's memory until one is measured (a forked worker's own pages, before copy on read).
WORKER_GUESS_BYTES = 256 << 20


def _ended(iterator: Any) -> None:
    """End a segment's iterator now, its workers joined (a plain DataLoader's iterator does the
    same when it is collected; a switch cannot wait for that)."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


def _worker_pids(iterator: Any) -> list[int]:
    return [w.pid for w in getattr(iterator, "_workers", ()) if w.pid]


class InRunLoader:
    """An iterable over ``dataset`` in the batches a plain ``DataLoader`` with the same arguments
    gives, which reads its first epoch(s) in segments under different settings, keeps the fastest
    within the noise, and stores it (NOTE [ Tuning inside the run ]).

    Built by ``best_loader(..., tune="run")`` or ``autoloader.tuned(loader)``; not meant to be
    built directly. ``plain``: the reference DataLoader (no workers) whose sampler, batch sampler,
    collate and length this loader uses; ``proposer`` (quick.py) the model's configs;
    ``report(tune, final)``: called when the pick is settled and again when its epoch ends;
    ``report(tune, None, epoch)`` at the end of an epoch that ended still exploring."""

    def __init__(self, plain: Any, proposer: Any, *, sample_seed: int | None = None,
                 worker_init_fn: Callable | None = None, multiprocessing_context: Any = None, timeout: float = 0,
                 max_memory: int | None = None, report: Callable[["InRunLoader", bool], None] | None = None):
        self.plain = plain
        self.dataset = plain.dataset
        self.batch_size = plain.batch_size
        self.drop_last = plain.drop_last
        self.sampler = plain.sampler
        self.batch_sampler = plain.batch_sampler
        self.collate_fn = plain.collate_fn
        self.generator = plain.generator
        self.sample_seed = sample_seed
        self._made = SeededSamples(self.dataset, sample_seed) if sample_seed is not None else self.dataset
        self._worker_init_fn = worker_init_fn
        self._context = multiprocessing_context
        self._timeout = timeout
        self._proposer = proposer
        self._max_memory = max_memory
        self._worker_bytes: int | None = None
        self.refused: list[LoaderConfig] = []      # configs the memory forecast kept from starting
        proposer.fits = self.fits
        start = proposer.start()
        if not self.fits(start):
            start = start.replace(num_workers=0)
        self.plan = Plan(start, proposer.rule,
                         lambda warm: proposer.finalists(warm.step_s, self.plan.start))
        self.epochs = 0
        self.epoch_s: list[float] = []             # each whole epoch's wall time, from iter() to its end
        self.tuned_epochs = 0                       # epochs in which segments other than the pick's ran
        self.final: Reading | None = None           # the pick's reading over the rest of its epoch
        self._kept = None
        self._current = CurrentEpoch(len(plain), keyed=sample_seed is not None)
        self._report = report
        self.reported = False

    def __len__(self) -> int:
        return len(self.plain)

    # --- memory --------------------------------------------------------------------------------
    def forecast(self, config: LoaderConfig) -> int:
        """The bytes ``config`` is forecast to add to the loop's process: its workers (as one
        measured, or WORKER_GUESS_BYTES) and the batches in flight."""
        profile = self._proposer.profile
        batch = profile.batch_bytes if profile is not None else 0
        workers = config.num_workers
        in_flight = workers * (config.prefetch_factor or 2) * batch * (2 if config.pin_memory else 1)
        return workers * (self._worker_bytes or WORKER_GUESS_BYTES) + in_flight + batch

    def fits(self, config: LoaderConfig) -> bool:
        """Within the memory limit; one that is not never starts (it is listed in ``refused``).
        Without workers a config starts no process and holds one batch: it always fits."""
        if not config.num_workers or self._max_memory is None or self.forecast(config) <= self._max_memory:
            return True
        if config not in self.refused:
            self.refused.append(config)
        return False

    def _measure_workers(self, iterator: Any) -> None:
        from ..probe.pages import private_pages

        sizes = [p.uss for p in (private_pages(pid) for pid in _worker_pids(iterator)) if p is not None]
        if sizes:
            self._worker_bytes = max(sizes)

    # --- loaders -------------------------------------------------------------------------------
    def _kwargs(self, config: LoaderConfig, kept: bool) -> dict:
        kwargs = config.loader_kwargs()
        kwargs.pop("batch_size", None)
        if config.num_workers:
            kwargs["worker_init_fn"] = self._worker_init_fn or _seed_worker()
            if self._context is not None:
                kwargs["multiprocessing_context"] = self._context
            if not kept:
                kwargs["persistent_workers"] = False   # a segment's workers end with it
        else:
            for name in ("prefetch_factor", "persistent_workers", "multiprocessing_context", "in_order"):
                kwargs.pop(name, None)
        return kwargs

    def _segment(self, config: LoaderConfig, batches: Batches, seed: int):
        import torch
        from torch.utils.data import DataLoader

        return DataLoader(self._made, batch_sampler=batches, collate_fn=self.collate_fn, timeout=self._timeout,
                          generator=torch.Generator().manual_seed(seed), **self._kwargs(config, kept=False))

    def _kept_loader(self, seed: int):
        """The pick's own DataLoader for the epochs after tuning, its workers kept where it says."""
        import torch
        from torch.utils.data import DataLoader

        if self._kept is None:
            self._kept = DataLoader(self._made, batch_sampler=self._current, collate_fn=self.collate_fn,
                                    timeout=self._timeout, generator=torch.Generator().manual_seed(seed),
                                    **self._kwargs(self.plan.pick, kept=True))
        return self._kept

    # --- iteration -----------------------------------------------------------------------------
    def __iter__(self):
        drawn, base_seed = draw_epoch(self.plain._index_sampler, self.generator)
        epoch = self.epochs
        self.epochs += 1
        if self.plan.state == SETTLED and self.reported:
            self._current.set(drawn, epoch)
            return iter(self._kept_loader(base_seed))
        return self._epoch(drawn, base_seed, epoch)

    def _epoch(self, drawn: Any, base_seed: int, epoch: int):
        ended = _ended   # held here: a generator closed at the interpreter's exit outlives module globals
        total, pos, segment = len(self), 0, 0
        began = time.perf_counter()
        tuned_here = self.plan.state != SETTLED
        while pos < total:
            config, count, round_ = self.plan.next(total - pos, total)
            count = max(1, min(count, total - pos))
            batches = Batches(drawn, count, epoch, self.sample_seed is not None)
            t_begin = time.perf_counter()
            with warnings.catch_warnings():   # the worker count's warning, once per segment otherwise
                warnings.filterwarnings("ignore", message="This DataLoader will create")
                iterator = iter(self._segment(config, batches, base_seed + segment))
            calls, got = [], []
            try:
                for batch, called, returned in timed_batches(iterator):
                    calls.append(called - t_begin)
                    got.append(returned - t_begin)
                    if len(got) == count and config.num_workers and self._worker_bytes is None:
                        self._measure_workers(iterator)
                    yield batch
                end = time.perf_counter() - t_begin
            finally:
                ended(iterator)
            if not got:   # the sampler gave fewer batches than its length said
                break
            reading = Reading(config, round_, batches.sizes[:len(got)], calls, got, end,
                              shutdown_s=time.perf_counter() - t_begin - end)
            pos += len(got)
            segment += 1
            was = self.plan.state
            self.plan.done(reading, total - pos, total)
            if was == SETTLED:
                self.final = reading
            elif self.plan.state == SETTLED and self._report is not None:
                self._report(self, False)   # stored as soon as settled: a loop that stops early keeps it
            if len(got) < count:
                break
        finish(drawn)
        if tuned_here:
            self.tuned_epochs += 1
        self.epoch_s.append(time.perf_counter() - began)
        if self.plan.state == SETTLED and not self.reported:
            self.reported = True
            if self._report is not None:
                self._report(self, True)
        elif self.plan.state != SETTLED and self._report is not None:
            self._report(self, None, epoch)   # still exploring: said, nothing stored




def _seed_worker():
    from ..seeding import seed_worker

    return seed_worker

