"""The public entry points: ``tune()``, ``best_loader()`` and ``stored_result()``.

A thin face over the mechanics: each builds one ``Problem`` (every input checked up front), then
either runs a tuning ``Run`` (tuning/run.py) or looks the problem's result up in the store.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, Sequence

from .errors import NotSaved, NotStored, usage
from .events import NotInRun, Progress, ResultNotReused, ResultReused, SettingsApplied, WaitingForLock
from .inputs.code_digest import callable_identity
from .inputs.content import dataset_class, dataset_fingerprint
from .inputs.home import resolve_out, writable
from .inputs.options import DEFAULT_BUDGET_S, DEFAULT_TRIAL_TIMEOUT_S, Options, budget_start, default_thresholds
from .inputs.problem import Problem
from .inrun import check_epochs
from .node.group import Node, joined
from .node.runner import on_node
from .probe.driver import refuse_reimport
from .search.choice import handed_out, rate_here
from .search.config import TunedConfig
from .store.paths import held, result_path
from .store.door import load_result
from .store.result import TuneResult
from .tuning.progress import api_progress
from .tuning.run import Run

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_TRIAL_TIMEOUT_S", "TuneResult", "best_loader", "stored_result", "tune"]


def tune(dataset: Any, *, step: Any = None, batch_size: int | None = None,
         batch_sizes: Sequence[int] | None = None, budget: float = DEFAULT_BUDGET_S,
         max_memory: int | str | None = None, device: str | None = None, out: str | None = None,
         storage: str | None = None, progress: Progress | bool | None = None,
         trial_timeout: float = DEFAULT_TRIAL_TIMEOUT_S,
         allow_reorder: bool = False, version: str | None = None, search_start_method: bool = False,
         **fixed_loader_kwargs) -> TuneResult:
    """Measure DataLoader configs for ``dataset`` and return the fastest (ties to the cheapest).

    Called by every rank of a torchrun launch (WORLD_SIZE > 1), it tunes the node's ranks together:
    the pick is per rank, its rate the node's, and every rank returns the same result (NOTE
    [ Tuning a node's ranks ] in node/__init__.py).

    Args:
        dataset: a Dataset, a zero-argument callable returning one, or a ``"MODULE:ATTR"`` spec.
        step: optional ``step(batch)`` (or a zero-argument factory of one, or a spec) timed with
            each batch; without it each batch is moved to the device.
        batch_size: the batch size (default 128), or ``batch_sizes``: several, the tuner picks one.
        budget: seconds the whole tune may take (default 60).
        max_memory: the host memory a config may use, in bytes or as text (``"16G"``; default
            0.6 of the RAM available when the tune starts).
        device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"`` (default: CUDA when present).
        out: where results are written (default: ``$AUTOLOADER_HOME`` or ``~/.cache/autoloader``).
        storage: an Optuna storage URL for the study (default: a SQLite file under ``out``).
        progress: None (the default) logs each step (logger ``"autoloader"``, INFO; to stderr
            unless the application configured logging); False says nothing; a callable gets every
            event (``autoloader.events``), and the log gets them too. A callable of the old
            ``(event, data)`` form still works, with a DeprecationWarning.
        trial_timeout: seconds a trial may go without progress before it is ended as a hang
            (default 60).
        allow_reorder: the pick may deliver batches out of order when that is faster; off, the
            result says what it would gain.
        version: your own label for this data, part of its key beside the content fingerprint.
        search_start_method: measure the worker start methods and let the pick set
            ``multiprocessing_context``; one passed in ``fixed_loader_kwargs`` is honoured.
        **fixed_loader_kwargs: passed to every DataLoader as they are (``collate_fn``, ...).

    Returns:
        The run's ``TuneResult``: ``.tuned`` (a ``TunedConfig``: the settings, their rate,
        ``loader_kwargs()``), every trial, the final, and the paths of the result and snippet.

    Raises:
        UsageError: an input breaks a rule (the message states it, the value and the fix).
        NoFeasibleConfig: every config tried failed or broke a limit.
        Inconclusive: a NoFeasibleConfig (exit 5) when nothing could be measured for the clock's
            or the machine's reason; its message says the cause, the load and the budget needed.
        NotSaved: the run chose a config but could not store it (``exc.result`` holds the pick).
        AutoloaderError: the trial process could not build the dataset or step, or a rank of a
            node's tune was lost.
    """
    started, kept = budget_start()     # NOTE [ The budget is a wall bound ] in search/budget.py
    refuse_reimport("tune()")   # NOTE [ A script re-imported by spawn ] in probe/driver.py
    problem = Problem.build(dataset, step=step, batch_size=batch_size, batch_sizes=batch_sizes, device=device,
                            fixed_kwargs=fixed_loader_kwargs, allow_reorder=allow_reorder, version=version,
                            search_start_method=search_start_method)
    options = Options.build(budget, trial_timeout, max_memory, out, storage, started=started, kept_s=kept)
    writable(options.out)   # before the trial process starts, not after its set-up
    node = joined()
    progress = api_progress(progress)
    result = _tune(as_rank(problem, node), options, progress, node)
    if progress is not None and (node is None or node.rank == 0):
        progress(SettingsApplied(result.tuned, reused=False, path=result.path))
    return result


# NOTE [ The closing line ]
# Every call that tunes or applies settings ends with one SettingsApplied event (its line, and an
# INFO record on the "autoloader" logger): the settings, tuned now or reused, where the result is.
# A framework helper calls best_loader, and says what it applies the settings to by wrapping that
# call in ``applying(...)``, so that the call still closes with one line, the helper's words in it.
# The outermost helper's words stand (TunedDataModule calls tuned_dataloader, which calls best_loader).
_APPLIED_TO: ContextVar[str | None] = ContextVar("applied_to", default=None)
RETURNED = "the DataLoader returned"


@contextmanager
def applying(to: str) -> Iterator[None]:
    """``best_loader``'s closing line inside this block says the settings went to ``to`` (unless
    an outer ``applying`` named its own)."""
    token = _APPLIED_TO.set(_APPLIED_TO.get() or to)
    try:
        yield
    finally:
        _APPLIED_TO.reset(token)


def as_rank(problem: Problem, node: Node | None) -> Problem:
    """The problem as one rank of ``node`` sees it (its share of the CPUs, the rank count)."""
    return problem if node is None else dataclasses.replace(problem, hardware=node.hardware(problem.hardware))


def _tune(problem: Problem, options: Options, progress: Progress | None, node: Node | None = None) -> TuneResult:
    if node is None:
        return Run(problem, options, progress).run()
    return on_node(node, lambda: Run(problem, options, progress, node=node).run())


def stored_result(dataset: Any, *, step: Any = None, batch_size: int | None = None,
                  batch_sizes: Sequence[int] | None = None, device: str | None = None, out: str | None = None,
                  allow_reorder: bool = False, version: str | None = None, search_start_method: bool = False,
                  **fixed_loader_kwargs) -> TunedConfig | None:
    """The stored tuned config for this dataset on this machine, if one exists that this
    autoloader measures alike. Nothing is tuned; a few samples are read for the content fingerprint.

    Args:
        dataset: what was given to ``tune()``: a Dataset, a factory, or a ``MODULE:ATTR`` spec.
        step, batch_size, batch_sizes, device, out, allow_reorder, version, **fixed_loader_kwargs:
            as given to ``tune()``; together they are the problem's key.

    Returns:
        The stored ``TunedConfig``, or None when there is none (or one measured differently); for
        a provisional result, the config ``best_loader`` hands out from it (its ``provisional``
        says why: NOTE [ A provisional pick ] in search/choice.py). A stored file that fails its
        checks is ignored, with a ``StoredStateWarning`` naming it.

    Raises:
        UsageError: an input breaks a rule.
    """
    problem = built_problem(_dataset_object(dataset), dataset, step=step, batch_size=batch_size,
                            batch_sizes=batch_sizes, device=device, fixed_kwargs=fixed_loader_kwargs,
                            allow_reorder=allow_reorder, version=version,
                            search_start_method=search_start_method)
    stored = _stored_result(problem, resolve_out(out))[0]
    return _handed(stored) if stored is not None else None


def built_problem(dataset_obj: Any, dataset: Any, **build) -> Problem:
    """The problem of a dataset built in this process: its length and content fingerprint are read
    here, from the object (NOTE [ Content fingerprint ] in inputs/content.py)."""
    return Problem.build(dataset, length=_length(dataset_obj), length_known=True,
                         content=dataset_fingerprint(dataset_obj), dataset_class=dataset_class(dataset_obj),
                         step_identity=_step_identity(build.get("step")), **build)


def _step_identity(step: Any) -> str | None:
    """The step's identity as the trial process reads it (NOTE [ A step keyed by what it is ])."""
    from .inputs.source import Source, load_spec

    if step is None:
        return None
    if isinstance(step, str):
        step = load_spec(step)
    elif isinstance(step, Source):
        step = step.load()
    return callable_identity(step)


def _stored_result(problem: Problem, out: str, set_aside: bool = False) -> tuple[TuneResult | None, str | None]:
    """The stored result for ``problem`` under ``out``, or None and why it is not used. A file that
    fails its checks is ignored with a warning naming it, and with ``set_aside`` (best_loader's,
    which tunes the key next) set aside too (NOTE [ A bad result file ])."""
    path = result_path(out, problem.hardware.fingerprint, problem.key)
    stored = load_result(path, problem.hardware.cpus, problem.batch_sizes, set_aside=set_aside)
    if stored is None:
        return None, None
    why = stored.measured_differently()
    if why is not None:
        return None, f"{path}: {why}"
    return stored, None


# How long best_loader reads the machine's load before it reuses a provisional result.
QUIET_PROBE_S = 1.0


def _reusable(problem: Problem, out: str) -> tuple[TunedConfig | None, str | None]:
    """The stored config ``best_loader`` reuses, or None and why not. A provisional result
    (NOTE [ A provisional pick ] in search/choice.py) measured on a busy machine is not reused
    once the machine is no longer busy; where one is reused, the config handed out is the
    better-measured of its pick and the rule (``_handed``). One provisional for want of a final
    alone is reused so: a machine no quieter than it was would give the same."""
    stored, why = _stored_result(problem, out, set_aside=True)   # best_loader tunes the key next
    if stored is None or not stored.tuned.provisional:
        return (stored.tuned if stored is not None else None), why
    others, busy = _load_now() if stored.busy else (None, True)
    if not busy:
        now = f"other processes use {others:.1f} of {problem.hardware.cpus:g} CPUs now" if others is not None else \
            "the load could not be read"
        return None, f"{stored.where}: provisional ({stored.tuned.provisional}); {now}, so it is measured again"
    return _handed(stored), None


def _load_now() -> tuple[float | None, bool]:
    """What other processes take of the CPUs over QUIET_PROBE_S, and whether that is busy (NOTE
    [ Others on the machine ] in search/results.py)."""
    from .inputs.hardware import usable_cpus
    from .probe.load import LoadMeter

    meter = LoadMeter(None)   # this process alone is ours: its children (a previous loader's workers) compete
    time.sleep(QUIET_PROBE_S)
    span = meter.stop()
    if span is None:
        return None, False
    return span.others_cpus, span.others_cpus > default_thresholds().busy * usable_cpus()


def _handed(result: TuneResult) -> TunedConfig:
    """The config a result hands out: its pick, or, for a provisional one, the rule's where the
    pick was not measured ahead of it (``search.choice.handed_out``)."""
    tuned = result.tuned
    if not tuned.provisional or result.partial:
        return tuned
    config = handed_out(tuned.config, result.rule, result.finals, result.trials)
    if config == tuned.config:
        return tuned
    return dataclasses.replace(tuned, config=config, knee=None, rel_interval=None,
                               samples_per_s=(rate_here(config, result.finals, result.trials) or 0.0) * result.ranks,
                               provisional=f"{tuned.provisional}; the rule's config handed out, since the pick "
                                           f"{tuned.config.key} was not measured ahead of it")


def best_loader(dataset: Any, *, batch_size: int | None = None, step: Any = None,
                budget: float = DEFAULT_BUDGET_S, batch_sizes: Sequence[int] | None = None,
                device: str | None = None, out: str | None = None, max_memory: int | str | None = None,
                storage: str | None = None, trial_timeout: float = DEFAULT_TRIAL_TIMEOUT_S,
                progress: Progress | bool | None = None, generator=None, allow_reorder: bool = False,
                version: str | None = None, search_start_method: bool = False,
                tune: str | None = None, sample_seed: int | None = None, epochs: int | None = None,
                **fixed_loader_kwargs):
    """A ready DataLoader for ``dataset`` with the tuned settings, tuning first unless a stored
    result for this hardware and dataset exists; without one and without a ``step``, the loader
    returned at once tunes itself in the run (NOTE [ Tuning inside the run ]). Trials shuffle
    unless told otherwise, and so does the returned loader.

    A stored result is found under ``out`` by the dataset's name, its length and content
    fingerprint (a few samples read here), ``version``, the step, the batch sizes, the device and
    ``fixed_loader_kwargs``. Processes asking for the same problem at once take turns: one tunes,
    the others then find its result. The ranks of a torchrun job instead tune together (in the
    run, or before it as ``tune()`` does), and each gets a loader of the per-rank config on its
    DistributedSampler shard (call ``loader.sampler.set_epoch(epoch)`` each epoch).

    Args:
        dataset: a Dataset, a factory of one, or a ``MODULE:ATTR`` spec; built once, here.
        batch_size, step, budget, batch_sizes, device, out, max_memory, storage, trial_timeout,
            allow_reorder, version, search_start_method: as for ``tune()``.
        progress: as for ``tune()``; a lookup reports ``ResultReused`` or ``ResultNotReused``,
            and a wait for another process's tune of the same problem ``WaitingForLock``.
        generator: the returned DataLoader's ``generator`` (seed it for runs that repeat).
        tune: with no stored result, ``"run"`` returns a loader that tunes itself over the first
            epoch(s) of the loop and stores its pick; ``"before"`` tunes first, apart, as
            ``tune()`` does. Default: ``"run"`` without a ``step``, ``"before"`` with one. The run
            falls back to before (saying why) for an IterableDataset, several batch sizes, or a
            tuned knob fixed in ``fixed_loader_kwargs``. Under torchrun the ranks tune in the run
            together (NOTE [ Ranks in the run ] in inrun/ranks.py).
        sample_seed: in the run, seed each sample from (seed, epoch, index), so its random
            transforms do not depend on the worker or the config (NOTE [ Seeding per sample ]).
        epochs: in the run, the epochs the loop will read, where known: a step of the tune is
            weighed against what it may gain over them (default: the current epoch's rest).
        **fixed_loader_kwargs: go to the returned DataLoader (and to every trial) unchanged.

    Returns:
        A ``torch.utils.data.DataLoader`` over ``dataset`` with the tuned settings (an
        ``InRunLoader`` when tuning in the run). One whose result could not be stored is returned
        all the same, with a ``NotStored`` warning.

    Raises:
        UsageError, NoFeasibleConfig (Inconclusive among them), AutoloaderError: as for ``tune()``.
    """
    from torch.utils.data import DataLoader, IterableDataset

    started, _ = budget_start()   # the dataset's build and its key are the call's too (NOTE [ The budget is a wall bound ])
    refuse_reimport("best_loader()")   # before the key's lock: NOTE [ A script re-imported by spawn ]
    check_epochs(epochs, "best_loader(epochs=)")
    progress = api_progress(progress)
    dataset_obj = _dataset_object(dataset)  # built once: its length and content key the lookup and the tune
    problem = built_problem(dataset_obj, dataset, step=step, batch_size=batch_size, batch_sizes=batch_sizes,
                            device=device, fixed_kwargs=fixed_loader_kwargs, allow_reorder=allow_reorder,
                            version=version, search_start_method=search_start_method)
    node = joined()
    problem = as_rank(problem, node)
    out = resolve_out(out)
    path = result_path(out, problem.hardware.fingerprint, problem.key)
    tuned, why = _reusable(problem, out)
    stored_at = path   # where the result is: None when this call tuned and could not store it
    reused = tuned is not None
    said = progress if node is None or node.rank == 0 else None   # a node's lines are rank 0's
    if node is not None:
        tuned = node.broadcast(tuned)   # rank 0's lookup decides: all ranks tune together, or none does
        reused = tuned is not None
    if tuned is None and _tunes_in_run(tune, step, dataset_obj, batch_sizes, fixed_loader_kwargs, said):
        from .inrun.build import from_arguments

        if why is not None and said is not None:
            said(ResultNotReused(why))
        return from_arguments(dataset_obj, problem, writable(out), batch_size=problem.batch_sizes[0],
                              generator=generator, fixed=fixed_loader_kwargs, progress=said,
                              sample_seed=sample_seed, max_memory=max_memory, node=node, epochs=epochs)
    if node is not None:
        if tuned is None:
            options = Options.build(budget, trial_timeout, max_memory, writable(out), storage, started=started)
            if why is not None and said is not None:
                said(ResultNotReused(why))
            tuned, stored_at = _picked(problem, options, progress, node)
    elif tuned is None:
        # A stored result is read from a folder this run cannot write (a shared read-only cache),
        # but a tune must write its lock, study and result there.
        options = Options.build(budget, trial_timeout, max_memory, writable(out), storage, started=started)
        busy = (lambda holder: progress(WaitingForLock(holder, out))) if progress is not None else None
        waiting = time.monotonic()
        with held(path[:-len(".json")] + ".lock", busy):
            # Another's turn is not this call's budget (as Run._start counts its own lock).
            options = dataclasses.replace(options, started=started + time.monotonic() - waiting)
            tuned, why = _reusable(problem, out)   # another process may have tuned it meanwhile
            reused = tuned is not None
            if tuned is None:
                if why is not None and progress is not None:
                    progress(ResultNotReused(why))
                tuned, stored_at = _picked(problem, options, progress)
            elif progress is not None:
                progress(ResultReused(path, tuned))
    elif progress is not None:
        progress(ResultReused(path, tuned))
    if said is not None:   # NOTE [ The closing line ]
        said(SettingsApplied(tuned, reused=reused, path=stored_at, to=_APPLIED_TO.get() or RETURNED))
    kwargs = {**tuned.loader_kwargs(), **fixed_loader_kwargs}
    if not tuned.config.num_workers:
        kwargs.pop("multiprocessing_context", None)   # DataLoader refuses one without workers
    if not isinstance(dataset_obj, IterableDataset) and not {"sampler", "batch_sampler"} & kwargs.keys():
        kwargs.setdefault("shuffle", True)
        if node is not None:   # this rank's shard, as its trials read it
            from torch.utils.data.distributed import DistributedSampler

            kwargs["sampler"] = DistributedSampler(dataset_obj, num_replicas=node.world, rank=node.rank,
                                                   shuffle=bool(kwargs.pop("shuffle")))
    return DataLoader(dataset_obj, generator=generator, **kwargs)


def _tunes_in_run(tune: str | None, step: Any, dataset_obj: Any, batch_sizes: Any, fixed: dict,
                  progress: Progress | None) -> bool:
    """Whether ``best_loader`` tunes in the run (``tune=``'s rule); an asked-for run that cannot
    be says why it tunes before instead."""
    from .inrun.build import why_not_in_run

    if tune not in (None, "run", "before"):
        raise usage('best_loader(tune=) is "run" (in the training loop) or "before" (a tune apart, first)', tune,
                    'pass tune="run" or tune="before", or leave it out')
    if tune == "before" or (tune is None and step is not None):
        return False
    why = why_not_in_run(dataset_obj, batch_sizes, fixed)
    if why is not None and tune == "run" and progress is not None:
        progress(NotInRun(why))
    return why is None


def _picked(problem: Problem, options: Options, progress: Progress | None,
            node: Node | None = None) -> tuple[TunedConfig, str | None]:
    """The tuned config of a run for ``best_loader``, and where it was stored (None: it could not
    be, and the pick is handed out all the same, with a warning)."""
    try:
        result = _tune(problem, options, progress, node)
        return _handed(result), result.path
    except NotSaved as exc:
        if exc.result is None:
            raise
        warnings.warn(f"the loader returned uses the run's pick, which was not stored: {exc}. The next call "
                      "tunes again unless it is stored by then", NotStored, stacklevel=3)
        return _handed(exc.result), None


def _dataset_object(dataset: Any) -> Any:
    """The Dataset a ``best_loader`` argument stands for: itself, a factory's result, or a spec's."""
    from .inputs.source import load_spec, resolve_dataset

    if isinstance(dataset, str):
        return resolve_dataset(load_spec(dataset), dataset)
    return resolve_dataset(dataset, getattr(dataset, "__name__", type(dataset).__name__))


def _length(dataset_obj: Any) -> int | None:
    try:
        return len(dataset_obj)
    except TypeError:  # an IterableDataset has no length to key on
        return None
