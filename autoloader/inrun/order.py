"""An epoch's order, drawn once, and the slices of it each segment's DataLoader reads.

# NOTE [ One order, many loaders ]
# In-run tuning reads an epoch in segments, each under its own DataLoader (its own workers). For
# training to stay what it was, the epoch's batches must be those a plain DataLoader over the same
# sampler and generator gives, each sample once, in that order. So the order is drawn once per
# ``iter()``, as a plain DataLoader's iterator draws it: the batch sampler's iterator is made, the
# base seed drawn from the loader's generator (one draw, as ``_BaseDataLoaderIter`` does), then the
# batch sampler is read to its end (a RandomSampler's permutation comes after the base seed on a
# shared generator, as in a plain DataLoader). Each segment's DataLoader gets a batch sampler over
# the next slice of that list (``Batches``) and a private generator seeded from the drawn base seed,
# so the user's generator advances exactly as a plain DataLoader's and the next epoch's order is
# the same too. ``DistributedSampler.set_epoch`` acts as usual: the sampler is read at each iter().
# The reference is a DataLoader whose iterator is made afresh each epoch (no kept workers): one
# with kept workers draws its base seed once, not each epoch.
"""

from __future__ import annotations

from typing import Any, Sequence


def draw_epoch(index_sampler: Any, generator: Any) -> tuple[Any, int]:
    """The epoch's batch sampler iterator and its base seed, drawn as a plain DataLoader's
    iterator draws them at ``iter()``: NOTE [ One order, many loaders ]. The batches are read
    from the iterator at the epoch's first batch, as a loop without workers reads them (a
    RandomSampler draws its permutation then)."""
    import torch

    batches = iter(index_sampler)
    base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
    return batches, base_seed


class Batches:
    """A batch sampler over the next ``count`` batches of an epoch's batch sampler iterator
    ``source``, pulled as the segment's loader asks (never ahead of a plain loader's own pulls);
    each index paired with ``epoch`` when ``keyed`` (NOTE [ Seeding per sample ] in samples.py).
    ``sizes``: each batch's samples, as pulled."""

    def __init__(self, source: Any, count: int, epoch: int = 0, keyed: bool = False):
        self.source, self.count = source, count
        self.epoch = epoch
        self.keyed = keyed
        self.sizes: list[int] = []

    def __iter__(self):
        for _ in range(self.count):
            batch = next(self.source, None)
            if batch is None:
                return
            batch = list(batch)
            self.sizes.append(len(batch))
            yield [(self.epoch, i) for i in batch] if self.keyed else batch

    def __len__(self) -> int:
        return self.count


def finish(source: Any) -> None:
    """Read an epoch's batch sampler iterator past its end, as a plain loader's last ``next()``
    does (a RandomSampler draws from the generator there too)."""
    for _ in source:
        pass


class CurrentEpoch:
    """The batch sampler of a kept loader (the pick, after tuning): the epoch its owner drew last
    (a batch sampler's iterator, read as the loader reads it), taken afresh at each iter() so a
    loader with kept workers follows the epochs."""

    def __init__(self, length: int, keyed: bool = False):
        self.source, self.epoch, self.keyed, self.length = iter(()), 0, keyed, length

    def set(self, source: Any, epoch: int) -> None:
        self.source, self.epoch = source, epoch

    def __iter__(self):
        for batch in self.source:
            yield [(self.epoch, i) for i in batch] if self.keyed else list(batch)

    def __len__(self) -> int:
        return self.length
