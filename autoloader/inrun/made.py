"""When each batch was made, written by the process that made it (a worker, or the loop's own).

# NOTE [ When a batch was made ]
# The loop is served a config's batches from a queue its loader fills ahead. A reading that
# begins with that queue full (its loader began during the drain: NOTE [ The next config begins
# during the drain ] in loader.py) is served its stock at the step's pace while the workers refill
# it, so the rate at the loop runs ahead of what the workers sustain until the stock is gone; where
# the workers are only a little slower than the step, that takes many times the queue's depth in
# batches, longer than a reading. What the workers sustain is what they make. So each config's
# loader reads a dataset that, as a batch's samples are made, writes the time into a table in
# shared memory (``MadeTimes``: one slot per batch its feed pulled this opening, the slot its
# place in the opening, carried with the batch's indices as ``Pulled.at``), and a reading's rate
# is the samples made within its steady part over that part's length (schedule.py's ``Reading``).
# Made is not served: a worker is handed a batch only as the loop takes one, so a loader that makes
# faster than the loop takes is made at the loop's pace, and one that makes slower cannot serve
# faster for long; over a long reading the two rates agree, over a short one only the made rate
# leaves the stock out. Invariants: a slot is written once an opening, by the process that made
# its batch, after its samples and before its collate (the time is ``time.perf_counter``, the
# system's monotonic clock on Linux, the loop's clock too); the loop reads only the slots of
# batches its feed pulled this opening; an opening clears the table first (a kept loader's workers
# made every batch of its last opening before it reopens: the loop was served them all).
"""

from __future__ import annotations

import time
from typing import Any


class Pulled(list):
    """A batch's indices as a ``Feed`` pulls them, with ``at``, its place in the feed's opening."""

    def __init__(self, indices: Any, at: int):
        super().__init__(indices)
        self.at = at


class MadeTimes:
    """The time each batch of a loader's opening was made, 0 where not yet (NOTE [ When a batch was
    made ]); shared with the loader's workers, as their dataset holds it."""

    def __init__(self, length: int):
        import torch

        self.times = torch.zeros(max(1, length), dtype=torch.float64).share_memory_()

    def clear(self) -> None:
        self.times.zero_()

    def mark(self, at: int) -> None:
        if 0 <= at < len(self.times):
            self.times[at] = time.perf_counter()

    def read(self, count: int) -> list[float]:
        """The first ``count`` slots (0: not made yet)."""
        return self.times[:max(0, min(count, len(self.times)))].tolist()


class StampedSamples:
    """``dataset`` whose batches write the time they were made into ``made`` (NOTE [ When a batch
    was made ]): a DataLoader fetches a batch through ``__getitems__``, which makes its samples as
    the dataset's own would (its ``__getitems__``, else one ``__getitem__`` each) and then marks
    the batch's slot."""

    def __init__(self, dataset: Any, made: MadeTimes):
        self.dataset = dataset
        self.made = made

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        return self.dataset[key]

    def __getitems__(self, keys):
        many = getattr(self.dataset, "__getitems__", None)
        samples = many(list(keys)) if many else [self.dataset[k] for k in keys]
        at = getattr(keys, "at", None)
        if at is not None:
            self.made.mark(at)
        return samples
