"""``best_loader``'s way into in-run tuning: whether its arguments allow it, and the loader."""

from __future__ import annotations

from typing import Any

from ..search.settings import SETTINGS

# DataLoader arguments the in-run loader keeps as given; a tuned knob fixed by the caller (its
# workers, pinning...) leaves nothing to tune in the run, and any other argument is one it does
# not pass on to its segments' loaders.
KEPT = frozenset({"collate_fn", "drop_last", "shuffle", "sampler", "batch_sampler", "worker_init_fn", "timeout",
                  "multiprocessing_context"})


def why_not_in_run(dataset: Any, batch_sizes: Any, fixed: dict) -> str | None:
    """Why ``best_loader`` with these arguments tunes before the run, or None (it tunes in it)."""
    from . import refusal

    why = refusal(dataset)
    if why is not None:
        return why
    if batch_sizes is not None and len(batch_sizes) > 1:
        return "several batch sizes: a run keeps one"
    tuned = sorted(k for k in fixed if k in SETTINGS and k not in KEPT)
    if tuned:
        return f"{', '.join(tuned)} fixed by the caller"
    other = sorted(k for k in fixed if k not in KEPT and k not in SETTINGS)
    if other:
        return f"DataLoader arguments the in-run loader does not pass on: {', '.join(other)}"
    return None


def from_arguments(dataset: Any, problem: Any, out: str, *, batch_size: int, generator: Any, fixed: dict,
                   progress: Any, sample_seed: int | None, max_memory: Any, node: Any = None,
                   epochs: int | None = None):
    """The in-run loader ``best_loader`` returns: its reference DataLoader as ``best_loader``
    would build it (shuffled unless a sampler or ``shuffle`` says otherwise; under torchrun,
    ``node``, this rank's DistributedSampler shard). ``progress``: best_loader's subscriber,
    already resolved (None says nothing)."""
    from torch.utils.data import DataLoader

    from ..inputs.hardware import parse_size
    from . import in_run_loader

    kwargs = {k: fixed[k] for k in ("collate_fn", "drop_last", "shuffle", "sampler", "batch_sampler") if k in fixed}
    if not {"sampler", "batch_sampler"} & kwargs.keys():
        kwargs.setdefault("shuffle", True)
        if node is not None:   # this rank's shard, as best_loader's loader tuned before the run reads it
            from torch.utils.data.distributed import DistributedSampler

            kwargs["sampler"] = DistributedSampler(dataset, num_replicas=node.world, rank=node.rank,
                                                   shuffle=bool(kwargs.pop("shuffle")))
    if "batch_sampler" in kwargs:
        plain = DataLoader(dataset, generator=generator, **kwargs)
    else:
        plain = DataLoader(dataset, batch_size=batch_size, generator=generator, **kwargs)
    return in_run_loader(plain, problem, out, progress=progress,
                         sample_seed=sample_seed, worker_init_fn=fixed.get("worker_init_fn"),
                         multiprocessing_context=fixed.get("multiprocessing_context"),
                         timeout=fixed.get("timeout", 0),
                         max_memory=parse_size(max_memory) if max_memory is not None else None, node=node,
                         epochs=epochs)
