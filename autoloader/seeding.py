"""Seeding DataLoader workers: distinct, reproducible random streams per worker, epoch and rank.

This module imports only the standard library, numpy and (in the worker) torch: the snippet
writer (store/snippet.py) copies its source into the emitted snippet, so a tuned loader needs no
autoloader at run time; and the tuned config (search/config.py) names ``seed_worker`` without
importing torch.

# NOTE [ Worker seeds ]
# DataLoader draws a base seed from ``loader.generator`` each time an iterator is created and
# gives worker ``i`` the seed ``base + i``. It already seeds ``random`` and torch with it, and
# numpy's global state from a hash of it, so workers differ within one process. Two gaps stay:
#   * ranks: every rank of a distributed job that seeds torch alike draws the same base seed, so
#     all ranks augment identically; the rank must enter the seed;
#   * numpy Generators: code that wants ``np.random.default_rng`` needs one derived from the
#     worker's seed, not a fresh OS-entropy one, or reruns differ.
# Epochs: without persistent workers a new iterator (a new base seed) starts each epoch. With
# persistent workers the base seed is drawn once and the worker processes live on, so their
# streams simply continue into the next epoch: distinct from the last epoch, and identical on a
# rerun with the same generator seed because batches go to workers round-robin in order.
"""

from __future__ import annotations

import os
import random

import numpy as np

_worker_generator: np.random.Generator | None = None


def _distributed_rank() -> int:
    """This process's rank: from torch.distributed when it is up, else from the launcher's env."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except (ImportError, RuntimeError):
        pass
    return int(os.environ.get("RANK", "0"))


def worker_seed_sequence(base_seed: int, worker_id: int, rank: int) -> np.random.SeedSequence:
    """The SeedSequence of one worker: entropy from the loader's base seed, keyed by rank and
    worker so no two (rank, worker) pairs share a stream.

    Args:
        base_seed: the loader's base seed for this iterator (a worker's seed less its id).
        worker_id: the worker's index.
        rank: the process's rank in a distributed job (0 alone).

    Returns:
        The ``numpy.random.SeedSequence`` the worker's streams are drawn from.
    """
    return np.random.SeedSequence(entropy=int(base_seed) & ((1 << 64) - 1),
                                  spawn_key=(int(rank), int(worker_id)))


def seed_worker(worker_id: int) -> None:
    """``worker_init_fn`` that seeds numpy (global and a Generator), ``random`` and torch.

    See NOTE [ Worker seeds ]. Pass ``generator=torch.Generator().manual_seed(s)`` to the
    DataLoader for runs that repeat exactly.

    Args:
        worker_id: the worker's index, as DataLoader passes it.

    Returns:
        None; the worker's global streams are seeded and ``worker_generator()`` set.
    """
    global _worker_generator
    import torch

    info = torch.utils.data.get_worker_info()
    base_seed = (info.seed - info.id) if info is not None else torch.initial_seed()
    sequence = worker_seed_sequence(base_seed, worker_id, _distributed_rank())
    words = sequence.generate_state(4, dtype=np.uint32)
    np.random.seed(words[:2])
    random.seed(int(words[2]) << 32 | int(words[3]))
    torch.manual_seed(int(words[0]) << 32 | int(words[1]))
    _worker_generator = np.random.default_rng(sequence.spawn(1)[0])


def worker_generator() -> np.random.Generator:
    """The numpy Generator ``seed_worker`` made for this worker (use it inside ``__getitem__``).

    Returns:
        This worker's ``numpy.random.Generator``.

    Raises:
        RuntimeError: called outside a worker started with ``worker_init_fn=seed_worker``.
    """
    if _worker_generator is None:
        raise RuntimeError("worker_generator() is only set inside a DataLoader worker started with "
                           "worker_init_fn=seed_worker; pass that to the DataLoader")
    return _worker_generator
