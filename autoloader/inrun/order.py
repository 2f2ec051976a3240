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


def draw_epoch(index_sampler: Any, generator: Any) -> tuple[list[list[Any]], int]:
    """The epoch's batches (lists of indices) and its base seed, drawn as a plain DataLoader's
    iterator draws them: NOTE [ One order, many loaders ]."""
    import torch

    batches = iter(index_sampler)
    base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
    return [list(b) for b in batches], base_seed


class Batches:
    """A batch sampler over ``batches`` (a slice of an epoch's order), each index paired with
    ``epoch`` when ``keyed`` (NOTE [ Seeding per sample ] in samples.py)."""

    def __init__(self, batches: Sequence[Sequence[Any]], epoch: int = 0, keyed: bool = False):
        self.batches = batches
        self.epoch = epoch
        self.keyed = keyed

    def __iter__(self):
        for batch in self.batches:
            yield [(self.epoch, i) for i in batch] if self.keyed else list(batch)

    def __len__(self) -> int:
        return len(self.batches)


class CurrentEpoch(Batches):
    """The batch sampler of a kept loader (the pick, after tuning): whatever epoch its owner drew
    last, read afresh at each iter() so a loader with kept workers follows the epochs."""

    def __init__(self, keyed: bool = False):
        super().__init__([], 0, keyed)

    def set(self, batches: Sequence[Sequence[Any]], epoch: int) -> None:
        self.batches, self.epoch = batches, epoch
