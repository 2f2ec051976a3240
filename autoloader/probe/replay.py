"""The profile's replay dataset: one collated batch handed out again and again, so that timing
a worker's batch times only its copy, send and receive (probe/profiler.py, stage 2)."""

from __future__ import annotations

from typing import Any

from ..batches import map_tensors


class Replay:
    """A dataset whose every item is a fresh copy of one collated batch (``batch_size=None``):
    the workers then only copy and send, so the main process's receive is what is timed. Items
    from ``other_from`` on are copies of ``other`` instead, where given."""

    def __init__(self, batch: Any, length: int, other: Any = None, other_from: int | None = None):
        self.batch = batch
        self.length = length
        # From item ``other_from`` on, ``other`` (a smaller batch: the receive's second size).
        self.other = other
        self.other_from = other_from

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        if self.other is not None and self.other_from is not None and index >= self.other_from:
            return map_tensors(self.other, lambda t: t.clone())
        return map_tensors(self.batch, lambda t: t.clone())
