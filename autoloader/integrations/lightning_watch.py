"""``WatchCallback``: ``autoloader.watch``'s reports for a Lightning fit, timed at the hooks.

Lightning builds and iterates the train loader itself, so the callback times the loop at the
hooks every fit calls rather than at ``next()``: a batch's wait runs from the last
``on_train_batch_end`` to its ``on_train_batch_start`` (the fit loop fetching it, moving it to the
device, its bookkeeping), its step from there to its ``on_train_batch_end``. The epoch's first
batch (its wait holds the workers' start) is left out, as ``watch`` leaves it out. The figures,
verdict and words are ``watch``'s (NOTE [ What the loop waits for ] in autoloader/watching.py),
but the queues are not read (the callback never holds the iterator), so a wait with workers
counts as the workers', and the copy to the device is in the wait, where ``watch`` counts it in
the step. Importing this module imports Lightning.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import lightning.pytorch as lightning

from ..watching import Epoch, Reporting, WatchReport, check, samples_of, workers_of

__all__ = ["WatchCallback"]


class WatchCallback(Reporting, lightning.Callback):
    """A Lightning callback saying, every ``every`` steps and at each train epoch's end, what the
    fit's loop waits for (``autoloader.watch``'s reports, timed at the hooks).

    Args:
        every: training batches between reports, a positive int; the epoch's end reports too.
        progress: as ``autoloader.watch``'s: None logs each line (logger ``"autoloader"``), False
            says nothing, a callable of one event is given a ``Watched`` event as well.

    ``report()`` is the latest ``WatchReport``, ``reports`` all of them.
    """

    def __init__(self, every: int = 100, progress: Callable | bool | None = None):
        super().__init__()
        self._every = every
        self._progress = check(every, progress)
        self._reports: list[WatchReport] = []
        self._epoch: Epoch | None = None
        self._mark = 0.0          # when the epoch started, or the last batch ended
        self._started = 0.0       # when this batch's step started

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        loader = getattr(trainer, "train_dataloader", None)
        self._epoch = Epoch(trainer.current_epoch + 1, self._every, workers_of(loader), self._emit)
        self._mark = time.perf_counter()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        now = time.perf_counter()
        if self._epoch is None:
            return
        if self._epoch.step == 0:
            self._epoch.first(now - self._mark)
        else:
            self._epoch.batch(now - self._mark, samples_of(batch, trainer.train_dataloader), None)
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._epoch is None:
            return
        if self._epoch.step >= 2:
            self._epoch.stepped(time.perf_counter() - self._started)
        self._mark = time.perf_counter()   # a report's own time, above, is no batch's

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self._epoch is not None:
            self._epoch.end()
            self._epoch = None
