"""uint8 batches in place of float32, as the profile timed the change: NOTE [ A quarter of the bytes ].

# NOTE [ A quarter of the bytes ]
# uint8 pixels hold a quarter of float32's bytes, but not every cost that moves bytes is its
# bytes: what a batch costs per sample and per call (the loop's threaded collate, a copy to the
# device) does not shrink, and the step gets new work: converting every element back to float32
# (``x.float().div_(255)``). So where a batch is large enough (BYTES_MATTER) and holds float32
# tensors, the profile times the change on the run's own samples (probe/uint8.py): each tensor
# seen as uint8 of the same shape (a view, no copy), collated with the loop's threads and with
# one (a worker's), pinned and copied pinned and pageable, each side warm beside the other in
# alternating pairs, and the conversion where the step runs. The what-if (explain/whatif.py)
# scales each cost by the ratio measured and adds the conversion to the step; unmeasured, the
# bytes' share stands in. A share is floored at the bytes' share: a cost cannot shrink faster
# than its bytes (a pair that reads so timed a warm cache). The samples' own work is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from .codec import Stored

__all__ = ["BYTES_MATTER", "UINT8_BYTES", "Uint8Cost", "share"]

# Below this a batch's costs are fixed overheads (descriptors, Python) fewer bytes do not shrink:
# neither scaled by the bytes nor timed as uint8.
BYTES_MATTER = 4 * 2**20
# uint8's bytes over float32's, where the profile did not time the change.
UINT8_BYTES = 0.25


def share(pair: tuple[float, float] | None, fallback: float = UINT8_BYTES) -> float:
    """uint8's cost over float32's from a (float32, uint8) pair, within [``fallback``, 1] (NOTE
    [ A quarter of the bytes ]); ``fallback`` (the bytes' share) where unmeasured."""
    if pair is None or pair[0] <= 0:
        return fallback
    return min(1.0, max(fallback, pair[1] / pair[0]))


@dataclass(frozen=True)
class Uint8Cost(Stored):
    """The change to uint8 timed on the run's samples (NOTE [ A quarter of the bytes ]): each a
    (float32, uint8) pair of seconds per batch of the profile's batch size, None where not timed
    (off CUDA: no pin or copy)."""

    byte_share: float                                   # the uint8 batch's bytes over the float32 one's
    loop_collate_s: tuple[float, float]                 # collated with the loop's intra-op threads
    worker_collate_s: tuple[float, float] | None        # with one thread, as a worker collates
    pin_s: tuple[float, float] | None = None            # the collated batch pinned
    h2d_pinned_s: tuple[float, float] | None = None     # a pinned batch copied to the device
    h2d_pageable_s: tuple[float, float] | None = None   # a pageable one
    convert_s: float = 0.0                              # the uint8 batch to float32 / 255 where the step runs
    rounds: int = 0                                     # collate pairs timed
    seconds: float = 0.0                                # the stage's own wall time

    def shares(self) -> tuple[float, float, float, float, float]:
        """uint8's cost over float32's (``share``) for the loop's collate, a worker's, the pin, the
        pinned copy and the pageable one, in that order."""
        return tuple(share(pair, self.byte_share) for pair in (self.loop_collate_s, self.worker_collate_s,
                                                                self.pin_s, self.h2d_pinned_s, self.h2d_pageable_s))
