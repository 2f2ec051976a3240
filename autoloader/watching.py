"""``watch``: what a running training loop waits for, said every N steps, changing nothing.

The module is named ``watching`` so that ``autoloader.watch`` stays the function: importing a
submodule binds its name on the package.

# NOTE [ What the loop waits for ]
# 1. A batch's wait is the time inside the loader iterator's ``next()`` that returns it; its step
#    is the time from that return to the next call (the training step, the copy to the device,
#    logging: all of the loop that is not the loader). The wait share is wait / (wait + step)
#    over the batches of a report, each with its own wait and step, the epoch's first batch left
#    out (its wait is the workers' start, said apart as ``first_batch_s``): the steady loop's
#    share, as a burst reads it. Where the loader has a length, the epoch's last batch is left out
#    too and the epoch's report made when it arrives: a loop may stop there without another call
#    (``zip``, Lightning), so its step would never be timed. A report is made at the call after
#    its last batch's step, before that call's timing starts: the watch's own work is in no
#    batch's wait or step.
# 2. The verdict reads explain/'s thresholds (thresholds.py) and words (verdict.py), on what the
#    loop measured rather than on a profile:
#    * the level: ``level_of(wait share)`` (HIGHLY_INPUT_BOUND, MODERATELY_INPUT_BOUND);
#    * input-bound (HIGHLY, or MODERATELY with the step more than BALANCED_WITHIN faster than the
#      loop: the loop's rate, which the supply at least matches, and the step's rate are not
#      within BALANCED_WITHIN, i.e. wait/(1 - wait) past it); balanced (MODERATELY and within
#      it); compute-bound otherwise;
#    * which part, where input-bound: with num_workers=0 the main process makes every batch
#      ("main"). With workers, just before each ``next()`` the iterator's queues are looked at,
#      read-only: a batch already there (or results waiting for the pin thread) means the time in
#      that ``next()`` is the main process's receive and pin, none means it waits for the
#      workers. The larger of the two is the part: "main", or the workers, named "cores" when the
#      CPUs this process may use were CORES_FULL busy (by anyone) over the report's steps,
#      "workers" otherwise. An iterator whose queues cannot be read (not a torch DataLoader's)
#      has its wait counted as the workers'.
#    * The copy to the device is inside the step, where the loop makes it: it is never named.
# 3. The gain a tune is predicted to bring is a bound, not a measurement: were the wait 0, the
#    loop would run at the step's rate, wait/(1 - wait) faster. A tune can gain no more (it
#    changes the loader, not the step), and may gain less (workers that take CPUs from the step).
#    Under WORTH_CHANGING it is said not to be worth a tune.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterable, Iterator


from .batches import samples_in
from .errors import usage
from .events import Event
from .events.lines import rate
from .explain.thresholds import BALANCED_WITHIN, CORES_FULL, HIGHLY_INPUT_BOUND, MODERATELY_INPUT_BOUND, WORTH_CHANGING
from .explain.verdict import PART_WORDS, level_of
from .inputs.hardware import usable_cpus
from .probe.load import cpu_mark, cpus_since

__all__ = ["Epoch", "Reporting", "Watch", "WatchReport", "Watched", "check", "samples_of", "watch", "workers_of"]

# The verdict classes a watch can name: explain/verdict.KINDS less what it cannot see (memory
# limits, the copy: NOTE [ What the loop waits for ]).
WATCH_KINDS = ("input/cores", "input/workers", "input/main", "compute", "balanced")
PREDICTED = "predicted"


@dataclass(frozen=True)
class WatchReport:
    """What one report measured and what it says (NOTE [ What the loop waits for ]).

    Attributes:
        epoch: the epoch, counted from 1 (each ``iter()`` of the watched loader that gives a batch).
        first_step, last_step: the steps (batches, counted from 1 in the epoch) the figures cover.
        at_end: True for the report at the epoch's end, which covers the whole epoch.
        steps: batches the figures cover (the epoch's first batch left out).
        wait_s, step_s: seconds in ``next()`` and between ``next()`` calls over those steps.
        wait_share: wait_s / (wait_s + step_s), measured.
        first_batch_s: the epoch's first ``next()`` (the workers' start), where covered, else None.
        samples_per_s: the loop's rate over those steps (samples counted from each batch's first
            tensor; batches where none was found count as ``batch_size``).
        step_samples_per_s: the rate were the wait 0: the step's alone.
        level: explain's level ("highly input-bound", "moderately input-bound", "not input-bound").
        kind: the verdict's class, one of WATCH_KINDS.
        main_share: of the wait, the share spent with a batch already made (the main process's
            receive and pin); None where the iterator's queues could not be read or there are no workers.
        num_workers: the loader's.
        busy_cpus, own_cpus: the CPUs' worth busy over the steps, on the CPUs this process may
            use (anyone's), and of them this process and its workers'; None where not read.
        usable_cpus: the CPUs this process may use.
        gain_bound: the most a tune is predicted to gain, as a share (0.72: +72%): the loop at
            the step's rate. Predicted, never measured.
        headline: the verdict in one sentence.
        line: the whole report in one line, as logged.
    """

    epoch: int
    first_step: int
    last_step: int
    at_end: bool
    steps: int
    wait_s: float
    step_s: float
    wait_share: float
    first_batch_s: float | None
    samples_per_s: float
    step_samples_per_s: float
    level: str
    kind: str
    main_share: float | None
    num_workers: int | None
    busy_cpus: float | None
    own_cpus: float | None
    usable_cpus: int
    gain_bound: float
    headline: str
    line: str = field(repr=False)
    gain_source: ClassVar[str] = PREDICTED
    wait_source: ClassVar[str] = "measured"

    def to_dict(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "wait_source": self.wait_source,
                "gain_source": self.gain_source}


@dataclass(frozen=True)
class Watched(Event, kind="watch"):
    """A watched loop's report (``autoloader.watch``), after every N steps and at each epoch's end.

    Attributes:
        report: the ``WatchReport``; the event's ``line`` is its line.
    """
    report: WatchReport

    @property
    def line(self) -> str:
        return self.report.line


class _Window:
    """The running sums of one span of steps, and the CPU counters at its start."""

    def __init__(self, first_step: int, cpu: tuple[float, float, float] | None):
        self.first_step = first_step
        self.wait_s = self.step_s = self.main_wait_s = 0.0
        self.read = 0              # steps whose queues were read
        self.steps = self.samples = 0
        self.first_batch_s: float | None = None
        self.cpu0 = cpu

    def add_wait(self, wait: float, samples: int, ready: bool | None) -> None:
        self.wait_s += wait
        self.steps += 1
        self.samples += samples
        if ready is not None:
            self.read += 1
            if ready:
                self.main_wait_s += wait


class Reporting:
    """What a watcher (``Watch``, Lightning's ``WatchCallback``) keeps of its reports."""

    _reports: list
    _progress: Callable | None

    def report(self) -> WatchReport | None:
        """The latest report (None before the first).

        Returns:
            The ``WatchReport`` last logged: after ``every`` steps, or the epoch's end.
        """
        return self._reports[-1] if self._reports else None

    @property
    def reports(self) -> tuple[WatchReport, ...]:
        """Every report so far, in order."""
        return tuple(self._reports)

    def _emit(self, report: WatchReport) -> None:
        self._reports.append(report)
        if self._progress is not None:
            self._progress(Watched(report))


class Watch(Reporting):
    """A DataLoader, watched: iterate it as the loader (``watch``'s docstring)."""

    def __init__(self, loader: Iterable, every: int, progress: Callable | None):
        # Set past __setattr__, which sets the loader's attributes.
        self.__dict__.update(_loader=loader, _every=every, _progress=progress, _reports=[], _epoch=0)

    def __iter__(self) -> Iterator:
        return _WatchedIterator(self, iter(self._loader))

    def _next_epoch(self) -> int:
        """An epoch is counted at its first batch: an ``iter()`` that takes none (Lightning's
        check that a loader iterates) is none."""
        self.__dict__["_epoch"] += 1
        return self._epoch

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and name in ("_loader", "_every", "_progress", "_reports", "_epoch"):
            raise AttributeError(name)
        return getattr(self._loader, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._loader, name, value)

    def __repr__(self) -> str:
        return f"watch({self._loader!r}, every={self._every})"

    @property
    def loader(self) -> Iterable:
        """The loader watched, itself."""
        return self._loader


class Epoch:
    """One epoch's timings, fed by whatever times the loop (the watched iterator, a framework's
    hooks), and its reports: ``first`` the first batch's wait, ``batch`` each later one's,
    ``stepped`` the step after it (a report falls due every ``every`` batches), ``end``."""

    def __init__(self, epoch: int, every: int, workers: int | None, emit: Callable[[WatchReport], None],
                 length: int | None = None):
        self.epoch, self.every, self.workers, self.emit, self.length = epoch, every, workers, emit, length
        self.step = 0
        self.ended = False
        self.window: _Window | None = None
        self.whole: _Window | None = None

    def first(self, seconds: float) -> None:
        self.step = 1
        cpu = cpu_mark()
        self.window, self.whole = _Window(2, cpu), _Window(2, cpu)
        self.whole.first_batch_s = self.window.first_batch_s = seconds

    def batch(self, wait: float, samples: int, ready: bool | None) -> None:
        self.step += 1
        if self.ended:
            return
        if self.length is not None and self.step >= self.length:
            self.end()   # the last batch: no next call will time its step (NOTE [ What the loop waits for ], 1)
            return
        for w in (self.window, self.whole):
            w.add_wait(wait, samples, ready)

    def stepped(self, seconds: float) -> None:
        if self.ended:
            return
        for w in (self.window, self.whole):
            w.step_s += seconds
        if self.step % self.every == 0:
            self._say(self.window, at_end=False)
            self.window = _Window(self.step + 1, cpu_mark())

    def end(self) -> None:
        if self.whole is not None and not self.ended:
            self._say(self.whole, at_end=True)
        self.ended = True

    def _say(self, window: _Window, at_end: bool) -> None:
        if window.steps:
            last = window.first_step + window.steps - 1
            self.emit(_report(window, self.epoch, last, self.step, at_end, self.workers))


class _WatchedIterator:
    """One epoch of the watched loader: each ``next()`` timed (NOTE [ What the loop waits for ])."""

    def __init__(self, watch: Watch, it: Iterator):
        self.watch, self.it = watch, it
        self.workers = workers_of(watch._loader)
        self.epoch = Epoch(0, watch._every, self.workers, watch._emit, length_of(watch._loader))
        self.returned: float | None = None   # when the last next() returned

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.it)

    def __getattr__(self, name: str):
        return getattr(self.it, name)

    def __next__(self):
        if self.returned is not None and self.epoch.step >= 2:
            # The step on the last batch ran until this call (NOTE [ What the loop waits for ], 1).
            self.epoch.stepped(time.perf_counter() - self.returned)
        ready = _ready(self.it) if self.workers else None
        start = time.perf_counter()   # a report's own time, above, is no batch's
        try:
            batch = next(self.it)
        except StopIteration:
            self.epoch.end()
            raise
        end = time.perf_counter()
        if self.epoch.step == 0:
            self.epoch.epoch = self.watch._next_epoch()
            self.epoch.first(end - start)
        else:
            self.epoch.batch(end - start, samples_of(batch, self.watch._loader), ready)
        self.returned = time.perf_counter()
        return batch


def _report(w: _Window, epoch: int, last: int, batches: int, at_end: bool, workers: int | None) -> WatchReport:
    total = w.wait_s + w.step_s
    wait = w.wait_s / total if total > 0 else 0.0
    busy, own = cpus_since(w.cpu0)
    cpus = usable_cpus()
    main_share = w.main_wait_s / w.wait_s if workers and w.read and w.wait_s > 0 else None
    kind = _kind(wait, workers, main_share, busy, cpus)
    gain = wait / (1.0 - wait) if wait < 1.0 else math.inf
    rate_loop = w.samples / total if total > 0 else 0.0
    rate_step = w.samples / w.step_s if w.step_s > 0 else math.inf
    level = level_of(wait)
    headline = _headline(kind, level, wait, workers, rate_loop, rate_step)
    span = f"steps {w.first_step}-{last}"
    if at_end:
        span = f"the epoch's {batches} steps ({span})"
    first = f"; first batch {_secs(w.first_batch_s)}, not counted" if w.first_batch_s is not None else ""
    cpu_words = (f"; CPUs {busy:.1f} of {cpus} busy, {own:.1f} of them this run's" if busy is not None else "")
    if gain < WORTH_CHANGING:
        tune = f"a tune is predicted to gain under {WORTH_CHANGING:.0%}: not worth one"
    else:
        tune = f"a tune is predicted to gain at most {gain * 100:+.0f}% (the loop at the step's rate, were the wait 0)"
    line = (f"autoloader: watch, epoch {epoch}, {span}{first}: {headline} {_avg(w)}; {tune}{cpu_words}.")
    return WatchReport(epoch=epoch, first_step=w.first_step, last_step=last, at_end=at_end, steps=w.steps,
                       wait_s=w.wait_s, step_s=w.step_s, wait_share=wait, first_batch_s=w.first_batch_s,
                       samples_per_s=rate_loop, step_samples_per_s=rate_step, level=level, kind=kind,
                       main_share=main_share, num_workers=workers, busy_cpus=busy, own_cpus=own,
                       usable_cpus=cpus, gain_bound=gain, headline=headline, line=line)


def _kind(wait: float, workers: int | None, main_share: float | None, busy: float | None, cpus: int) -> str:
    """The verdict's class (NOTE [ What the loop waits for ], 2)."""
    close = wait / (1.0 - wait) <= BALANCED_WITHIN if wait < 1.0 else False
    if wait >= HIGHLY_INPUT_BOUND or (wait >= MODERATELY_INPUT_BOUND and not close):
        if not workers or (main_share is not None and main_share > 0.5):
            return "input/main"
        return "input/cores" if busy is not None and busy >= CORES_FULL * cpus else "input/workers"
    return "balanced" if wait >= MODERATELY_INPUT_BOUND else "compute"


def _headline(kind: str, level: str, wait: float, workers: int | None, loop: float, step: float) -> str:
    """explain/verdict.py's headline words, on the loop's own figures."""
    waits = f"{wait * 100:.0f}% waiting, measured"
    if kind.startswith("input/"):
        part = kind.split("/", 1)[1]
        if not workers:
            return (f"{level.capitalize()} in the main process: with num_workers=0 it makes every batch itself, "
                    f"between steps ({waits}).")
        return f"{level.capitalize()} {PART_WORDS[part]}, holding the loop at {rate(loop)} ({waits})."
    if kind == "balanced":
        return (f"Balanced: the loader supplies at least {rate(loop)} and the step could take {rate(step)}; "
                f"neither alone limits ({waits}).")
    return f"Compute-bound: the step is the limit and the loader keeps up ({waits})."


def _avg(w: _Window) -> str:
    return f"A batch: {_secs(w.wait_s / w.steps)} in next(), {_secs(w.step_s / w.steps)} between"


def _secs(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def length_of(loader: Any) -> int | None:
    """The batches an epoch holds, where the loader knows (NOTE [ What the loop waits for ], 1);
    None for an iterable dataset, whose length is a guess."""
    if getattr(loader, "_dataset_kind", 0) == 1:   # torch's _DatasetKind.Iterable
        return None
    try:
        return len(loader)
    except TypeError:
        return None


def workers_of(loader: Any) -> int | None:
    n = getattr(loader, "num_workers", None)
    return n if isinstance(n, int) else None


def _ready(it: Any) -> bool | None:
    """Whether the batch the next ``next()`` returns is already made (in the reorder buffer, the
    data queue, or waiting for the pin thread); None where the queues cannot be read."""
    try:
        info = it._task_info.get(it._rcvd_idx)
        if info is not None and len(info) == 2:
            return True
        if not it._data_queue.empty():
            return True
        results = getattr(it, "_worker_result_queue", None)
        return results is not it._data_queue and results is not None and not results.empty()
    except (AttributeError, NotImplementedError, OSError, ValueError):
        return None


def samples_of(batch: Any, loader: Any) -> int:
    """The samples of a batch (batches.samples_in), else the loader's batch size."""
    samples, size = samples_in(batch, None), getattr(loader, "batch_size", None)
    if samples is not None:
        return samples
    return size if isinstance(size, int) and size > 0 else 1


def watch(loader: Iterable, every: int = 100, progress: Callable | bool | None = None) -> Watch:
    """Wrap a DataLoader to say what the training loop waits for, changing nothing.

    Iterate what it returns as the loader (``for batch in watch(loader)``): the batches, their
    order, ``len()`` and every attribute are the loader's. After every ``every`` steps and at the
    end of each epoch it reports, in one line, the share of the loop spent waiting in ``next()``
    (measured), the verdict in ``autoloader report``'s words and thresholds, and the most a tune
    is predicted to gain (NOTE [ What the loop waits for ]).

    Args:
        loader: a ``torch.utils.data.DataLoader`` (or any iterable of batches: its wait is then
            counted as the workers' where it has ``num_workers``).
        every: steps between reports, a positive int; the epoch's end reports too.
        progress: None (the default) logs each report's line (logger ``"autoloader"``, INFO);
            False says nothing (read ``report()``); a callable of one event is given a
            ``Watched`` event, and the log gets it too.

    A ``Watch`` is not a ``DataLoader`` instance: code that asks ``isinstance`` (Lightning under
    DDP, accelerate's ``prepare``) sees another iterable. Watch what such code returns, or, in
    Lightning, use ``WatchCallback``, timed at the hooks.

    Returns:
        A ``Watch``: the loader, watched. ``.report()`` is the latest ``WatchReport``,
        ``.reports`` all of them, ``.loader`` the loader itself.

    Raises:
        UsageError: ``loader`` is not iterable, ``every`` is not a positive int, or ``progress``
            is neither None, a bool nor a callable of one argument.
    """
    if isinstance(loader, Watch):
        raise usage("watch() takes a loader that is not watched already", loader,
                    "pass the loader itself (watched.loader), or keep the watch you have")
    if not hasattr(loader, "__iter__"):
        raise usage("watch() takes a DataLoader or another iterable of batches", type(loader).__name__,
                    "pass the loader the training loop iterates, e.g. watch(train_loader)")
    return Watch(loader, every, check(every, progress))


def check(every: Any, progress: Any) -> Callable | None:
    """``every`` and ``progress`` checked, and ``progress`` as the callable the reports go to."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise usage("every must be a positive int: the steps between reports", every,
                    "pass e.g. every=100 (the epoch's end reports as well)")
    if progress is True:
        progress = None
    if progress is not None and progress is not False and not callable(progress):
        raise usage("progress must be None, False or a callable of one event", progress,
                    "for example progress=lambda event: print(event.line)")
    from .tuning.progress import api_progress

    return api_progress(progress, stacklevel=4)
