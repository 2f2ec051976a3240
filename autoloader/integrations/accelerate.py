"""accelerate: which loader to hand ``accelerator.prepare()``.

``prepare()`` re-creates the loader as a ``DataLoaderShard``, copying every DataLoader argument
it knows (``_PYTORCH_DATALOADER_KWARGS`` in accelerate/data_loader.py: each tuned setting,
``worker_init_fn``, ``collate_fn``, ...), so the tuned settings carry over. With several
processes it shards the batches itself and never asks whether the sampler is already a
DistributedSampler: ``best_loader``'s loader of a torchrun rank (one shard) would be sharded
twice, each rank reading 1/ranks² of the data. ``tuned_loader`` is ``best_loader`` handing back
the whole dataset, shuffled, for ``prepare()`` to shard. The tune measures ``batch_size`` per
rank, as accelerate's default ``split_batches=False`` loads it.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..api import applying, best_loader
from . import check_dataset
from .formats import dataloader_kwargs

__all__ = ["tuned_loader"]

# best_loader's own arguments; every other keyword is a DataLoader argument.
_TUNE_ARGS = frozenset(inspect.signature(best_loader).parameters) - {"dataset", "fixed_loader_kwargs"}


def tuned_loader(dataset: Any, **options):
    """``best_loader(dataset, **options)`` unsharded, for ``accelerator.prepare()`` to shard
    (module docstring): shuffled unless ``sampler=``/``shuffle=`` say otherwise.

    Args:
        dataset: a Dataset, a factory of one, or a ``MODULE:ATTR`` spec.
        **options: ``best_loader()``'s arguments (``batch_size``, ``budget``, ``progress``, ...)
            and DataLoader arguments, used in every trial.

    Returns:
        A ``torch.utils.data.DataLoader`` with the tuned settings, not yet prepared.

    Raises:
        UsageError, NoFeasibleConfig, AutoloaderError: as ``best_loader()`` does.
    """
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    check_dataset(dataset, "tuned_loader(dataset)")
    # accelerator.prepare() rebuilds the loader it is given: an in-run loader would not survive
    # it, so the tune is made before the run (NOTE [ Tuning inside the run ] in inrun/__init__.py).
    options.setdefault("tune", "before")
    with applying("the loader for accelerator.prepare()"):   # NOTE [ The closing line ] in api.py
        loader = best_loader(dataset, **options)
    # Only best_loader's node path puts a DistributedSampler there unless the user passed a sampler
    # (kept as given: a DistributedSampler there is the user's explicit choice).
    if not isinstance(loader.sampler, DistributedSampler) or "sampler" in options or "batch_sampler" in options:
        return loader
    kwargs = {**dataloader_kwargs(loader), **{k: v for k, v in options.items() if k not in _TUNE_ARGS}}
    if loader.num_workers:
        kwargs["worker_init_fn"] = loader.worker_init_fn
    kwargs.setdefault("shuffle", loader.sampler.shuffle)
    return DataLoader(loader.dataset, generator=options.get("generator"), **kwargs)
