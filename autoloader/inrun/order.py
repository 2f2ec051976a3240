"""An epoch's order, drawn once, and the stretches of it each config's DataLoader reads.

# NOTE [ One order, many loaders ]
# In-run tuning reads an epoch in segments, each under its own DataLoader (its own workers). For
# training to stay what it was, the epoch's batches must be those a plain DataLoader over the same
# sampler and generator gives, each sample once, in that order. So the order is drawn once per
# ``iter()``, as a plain DataLoader's iterator draws it: the batch sampler's iterator is made, the
# base seed drawn from the loader's generator (one draw, as ``_BaseDataLoaderIter`` does), then the
# batch sampler is read to its end (a RandomSampler's permutation comes after the base seed on a
# shared generator, as in a plain DataLoader). Each config's DataLoader gets a batch sampler that
# pulls the next batches of that iterator as the loader asks (``Feed``), and a private generator
# seeded from the drawn base seed, so the user's generator advances exactly as a plain
# DataLoader's and the next epoch's order is the same too. A reading ends by stopping its feed:
# the loader serves the batches it already pulled, in order, before the next config pulls on, so
# no batch is skipped or read twice whenever a reading ends. ``DistributedSampler.set_epoch`` acts as usual: the sampler is read at each iter().
# The reference is a DataLoader whose iterator is made afresh each epoch (no kept workers): one
# with kept workers draws its base seed once, not each epoch.
"""

from __future__ import annotations

from typing import Any

from .made import MadeTimes, Pulled


def draw_epoch(index_sampler: Any, generator: Any) -> tuple[Any, int]:
    """The epoch's batch sampler iterator and its base seed, drawn as a plain DataLoader's
    iterator draws them at ``iter()``: NOTE [ One order, many loaders ]. The batches are read
    from the iterator at the epoch's first batch, as a loop without workers reads them (a
    RandomSampler draws its permutation then)."""
    import torch

    batches = iter(index_sampler)
    base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
    return batches, base_seed


class Feed:
    """The batch sampler of one config's DataLoader: the next batches of an epoch's batch sampler
    iterator (``open``), pulled as the loader asks (never ahead of a plain loader's own pulls),
    until ``limit`` batches, the source's end (``dry``) or ``stop()``; each index paired with the
    epoch when ``keyed`` (NOTE [ Seeding per sample ] in samples.py), and, where it has ``made``,
    each batch its place in the opening (``Pulled.at``: the slot its loader's dataset marks in
    ``made``, NOTE [ When a batch was made ] in made.py). A loader with kept workers reads a new
    opening at each ``iter()``; ``sizes``: each batch's samples this opening, as pulled."""

    def __init__(self, length: int, keyed: bool = False, made: MadeTimes | None = None):
        self.length, self.keyed, self.made = length, keyed, made
        self.open(iter(()), 0)

    def open(self, source: Any, epoch: int, limit: int | None = None) -> None:
        self.source, self.epoch, self.limit = source, epoch, limit
        self.stopped = self.dry = False
        self.sizes: list[int] = []
        if self.made is not None:
            self.made.clear()

    def stop(self) -> None:
        """Pull nothing more: the loader serves what it holds, then ends its epoch."""
        self.stopped = True

    def __iter__(self):
        while not self.stopped:
            if self.limit is not None and len(self.sizes) >= self.limit:
                self.dry = True
                return
            batch = next(self.source, None)
            if batch is None:
                self.dry = True
                return
            batch = list(batch)
            self.sizes.append(len(batch))
            if self.keyed:
                batch = [(self.epoch, i) for i in batch]
            # Without a table (the pick's loader after tuning) nothing marks a batch: no slot to carry.
            yield batch if self.made is None else Pulled(batch, len(self.sizes) - 1)

    def __len__(self) -> int:
        return self.length if self.limit is None else self.limit


def finish(source: Any) -> None:
    """Read an epoch's batch sampler iterator past its end, as a plain loader's last ``next()``
    does (a RandomSampler draws from the generator there too)."""
    for _ in source:
        pass
