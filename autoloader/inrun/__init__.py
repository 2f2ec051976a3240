"""Tuning inside the run: the training loop is the benchmark (issue 54).

# NOTE [ Tuning inside the run ]
# ``best_loader(ds, batch_size=..., tune="run")`` with no stored result, and ``tuned(loader)``,
# return at once an ``InRunLoader`` (loader.py), after a quick profile (quick.py: at most a second
# of samples in the caller's process). Its invariants:
#   * order: each epoch is every batch a plain DataLoader with the same sampler and generator
#     gives, each sample once, in that order (NOTE [ One order, many loaders ] in order.py);
#     ``len()``, ``drop_last``, ``DistributedSampler.set_epoch``, a ``break``, an exception in the
#     loop and a second ``iter()`` behave as with a plain DataLoader (each ``iter()`` is an epoch);
#   * readings: the epoch is read in segments, one config each, timed at the loop: the time in
#     ``next()`` and between the calls (the real step); a hill-climb over the workers (and the
#     prefetch) from the start reads the best so far and one step from it in pairs, and exploring
#     stops when no step pays or none can repay its cost in the rest of the run (NOTE [ Segments
#     of the epoch ], NOTE [ The climb ], NOTE [ When exploring stops ] in schedule.py);
#   * workers: the best's and the candidate's workers are kept between their segments; any
#     other config's are ended and joined before the next segment starts, and all of them on a
#     ``break`` or an exception; a config whose memory forecast (beside the best's kept workers)
#     is past the limit never starts;
#   * seeds: with ``sample_seed``, each sample is made under a seed of (seed, epoch, index) alone,
#     and the batches are bit for bit those of any fixed config (NOTE [ Seeding per sample ]);
#   * the result: stored under the problem's key as a CLI tune stores its own, with what the run
#     measured, and said in one closing line (NOTE [ What an in-run tune stores ] in record.py).
#     After the pick's epoch the loader is the pick's own DataLoader (its workers kept if it says);
#   * ranks: under torchrun the node's ranks read one schedule and pick one config (NOTE [ Ranks
#     in the run ] in ranks.py).
# An IterableDataset, or a loader without automatic batching, has no order to slice: those are
# refused here (best_loader tunes them before the run).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SeededSamples", "in_run_loader", "tuned"]


def __getattr__(name: str):
    if name == "SeededSamples":
        from .samples import SeededSamples

        return SeededSamples
    raise AttributeError(name)


def refusal(dataset: Any) -> str | None:
    """Why ``dataset`` cannot be tuned in the run, or None."""
    from torch.utils.data import IterableDataset

    if isinstance(dataset, IterableDataset):
        return "an IterableDataset has no order to read in segments"
    try:
        len(dataset)
    except TypeError:
        return "a dataset without a length has no order to read in segments"
    return None


def check_epochs(epochs: Any, where: str) -> None:
    """A run's epochs: None or a whole number of 1 or more."""
    from ..errors import usage

    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise usage(f"{where} is the run's epochs: a whole number of 1 or more, or None when not known", epochs,
                    "pass the epochs your loop reads, e.g. epochs=10, or leave it out")


def in_run_loader(plain: Any, problem: Any, out: str | None, *, progress: Any = None, sample_seed: int | None = None,
                  worker_init_fn: Any = None, multiprocessing_context: Any = None, timeout: float = 0,
                  max_memory: int | None = None, profile_seconds: float | None = None, epochs: int | None = None,
                  node: Any = None):
    """The in-run tuning loader over the reference DataLoader ``plain`` (its dataset, sampler,
    batch sampler, collate, generator): NOTE [ Tuning inside the run ]. ``problem``: the key it
    stores under, in ``out`` (None: nothing is stored); ``progress``: the subscriber its events go
    to (``tuning.progress.api_progress``'s; None says nothing); ``epochs``: the run's, where known; ``node``:
    the torchrun node this process is a rank of (node/group.py's ``joined()``), or None;
    ``max_memory``: the node's, shared by its ranks."""
    from ..errors import usage
    from ..inputs.hardware import available_memory
    from ..inputs.options import DEFAULT_MEMORY_SHARE
    from .loader import InRunLoader
    from .quick import QUICK_SECONDS, Proposer, quick_profile, space_for
    from .ranks import Alone, Together
    from .record import Reporter

    ranks = Together(node) if node is not None else Alone()
    lengths = ranks.every(len(plain))
    if len(set(lengths)) > 1:
        raise usage("the ranks tune in the run together, switching configs at the same batch, so their epochs "
                    "must be as long", f"epochs of {', '.join(str(n) for n in lengths)} batches on ranks "
                    f"0-{len(lengths) - 1}", "give every rank's loader a DistributedSampler (as torchrun "
                    "training does), or tune before the run: best_loader(..., tune='before')")
    cpus = problem.hardware.cpus
    batch_size = plain.batch_size or len(next(iter(plain.batch_sampler)))
    profile = quick_profile(plain.dataset, batch_size, plain.collate_fn, cpus,
                            QUICK_SECONDS if profile_seconds is None else profile_seconds) \
        if profile_seconds != 0 and ranks.rank == 0 else None
    profile = ranks.shared(profile)   # rank 0's: one start, one forecast (NOTE [ Ranks in the run ])
    proposer = Proposer(profile, space_for(batch_size, cpus, problem.device), cpus, problem.device,
                        fits=lambda config: True)
    reporter = Reporter(problem, out, progress, ranks.rank, node)
    limit = max_memory if max_memory is not None else int(DEFAULT_MEMORY_SHARE * available_memory())
    limit = ranks.least(limit // ranks.world)
    loader = InRunLoader(plain, proposer, sample_seed=sample_seed, worker_init_fn=worker_init_fn,
                         multiprocessing_context=multiprocessing_context, timeout=timeout, max_memory=limit,
                         epochs=epochs, report=reporter, ranks=ranks)
    reporter.started(loader)
    return loader


def tuned(loader: Any, *, sample_seed: int | None = None, device: str | None = None, out: str | None = None,
          max_memory: int | str | None = None, progress: Any = None, version: str | None = None,
          epochs: int | None = None):
    """An existing DataLoader's in-run tuning loader: the same dataset, batch size, sampler (or
    batch sampler), collate, ``drop_last`` and generator, its worker settings tuned over the first
    epoch(s) of the loop and stored (NOTE [ Tuning inside the run ]).

    Args:
        loader: a ``torch.utils.data.DataLoader`` over a map-style dataset.
        sample_seed: seed each sample from (seed, epoch, index), so its random transforms do not
            depend on the worker or the config (NOTE [ Seeding per sample ]).
        device: the device the loop feeds (default: CUDA when present; a loader that pins on a machine
            without one is tuned on the CPU, as PyTorch ignores its pinning there).
        out: the results home (default: ``$AUTOLOADER_HOME`` or ``~/.cache/autoloader``).
        max_memory: the memory the configs may add (bytes or text such as ``"8G"``; default 0.6
            of the RAM available now); under torchrun the node's, each rank taking its share.
        progress: as for ``best_loader``: None (the default) logs the tune's lines (logger
            ``"autoloader"``: its start, an epoch that ended still exploring, and the closing line,
            each a ``InRunStarted``, ``InRunExploring`` or ``InRunDone`` event; each segment's
            ``SegmentRead`` and the ``InRunSettled`` at DEBUG); False says nothing; a callable of one
            event gets every event, and the log gets them too.
        version: your label for this data, part of its key.
        epochs: the epochs the run will read, where known: a step of the tune is weighed against
            what it may gain over them (default: the current epoch's rest).

    Returns:
        An ``InRunLoader``: iterate it as the loader (``len()``, ``sampler``, ``batch_size``,
        ``dataset`` as it had them). Under torchrun (every rank calls ``tuned``, each with its
        DistributedSampler) the ranks read one schedule and pick one config together (NOTE [ Ranks
        in the run ] in inrun/ranks.py).

    Raises:
        UsageError: ``loader`` is not a DataLoader, reads an IterableDataset, or has no batching,
            or ``epochs`` is not a positive whole number, or (under torchrun) the ranks' epochs are not
            as long.
    """
    from torch.utils.data import DataLoader
    from torch.utils.data._utils.collate import default_collate

    from ..api import as_rank, built_problem
    from ..errors import usage
    from ..inputs.hardware import parse_size
    from ..inputs.home import resolve_out, writable
    from ..node.group import joined

    if not isinstance(loader, DataLoader):
        raise usage("tuned() takes a torch.utils.data.DataLoader", type(loader).__name__,
                    "pass the DataLoader your script builds: loader = autoloader.tuned(loader)")
    check_epochs(epochs, "tuned(epochs=)")
    why = refusal(loader.dataset)
    if why is not None:
        raise usage(f"tuned() reads a map-style dataset in segments: {why}", type(loader.dataset).__name__,
                    "tune it before the run instead: autoloader.best_loader(dataset, batch_size=..., tune='before')")
    if loader.batch_size is None and loader.batch_sampler is None:
        raise usage("tuned() needs batches (automatic batching)", "batch_size=None",
                    "give the DataLoader a batch_size or a batch_sampler")
    if loader.batch_size is not None:
        plain = DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=loader.sampler,
                           collate_fn=loader.collate_fn, drop_last=loader.drop_last, generator=loader.generator)
    else:
        plain = DataLoader(loader.dataset, batch_sampler=loader.batch_sampler, collate_fn=loader.collate_fn,
                           generator=loader.generator)
    fixed = {}
    if loader.collate_fn is not default_collate:
        fixed["collate_fn"] = loader.collate_fn
    if loader.drop_last:
        fixed["drop_last"] = True
    size = plain.batch_size or len(next(iter(plain.batch_sampler)))
    problem = built_problem(loader.dataset, loader.dataset, batch_size=size, device=device, fixed_kwargs=fixed,
                            version=version)
    node = joined()
    problem = as_rank(problem, node)   # one rank's view: its share of the CPUs, the node's key
    home = writable(resolve_out(out))
    limit = parse_size(max_memory) if max_memory is not None else None
    from ..tuning.progress import api_progress

    return in_run_loader(plain, problem, home, progress=api_progress(progress), sample_seed=sample_seed,
                         worker_init_fn=loader.worker_init_fn, multiprocessing_context=loader.multiprocessing_context,
                         timeout=loader.timeout, max_memory=limit, epochs=epochs, node=node)
