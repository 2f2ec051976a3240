"""uint8 batches in place of float32, as the profile timed the change: NOTE [ A quarter of the bytes ].

# NOTE [ A quarter of the bytes ]
# uint8 pixels hold a quarter of float32's bytes, and the what-if (explain/whatif.py) once scaled
# every cost that moves bytes (collate, receive, pin, copy) to a quarter. Not every such cost is
# its bytes: what a batch costs per sample and per call rather than per byte does not shrink (the
# loop collates with all its intra-op threads, a parallel copy per sample, each with its start
# and join; a copy to the device is a call), and the step gets new work: converting every element
# back to float32 on the device (``x.float().div_(255)``: 4 bytes written per element). A
# worker's collate, on one thread, is closer to its bytes. (``python -m scripts.bench
# whatif-replay`` reads each side's shares off a run's records; the measurements are in
# results/benchmarks/README.md, "Evidence behind mechanisms in the code".)
# So where a batch is large enough for the what-if (BYTES_MATTER) and holds float32 tensors, the
# profile times the change itself on the run's own samples (probe/uint8.py): each float32 tensor
# seen as a uint8 tensor of the same shape (a view of its first quarter of bytes: no copy, the
# same memory), collated with the loop's threads and with one (a worker's), against the float32
# samples in alternating pairs (a lone collate reads far above its steady cost, so each side is
# timed warm beside the other, its least time kept); the uint8 batch pinned and copied to the device,
# pinned and pageable, each warm as the float32 batch's were; and its conversion to float32 where
# the step runs (the device, or the loop's CPU threads off CUDA). The what-if scales each cost by
# the ratio measured and adds the conversion to the step; where the profile did not time the
# change (an older record, a batch without float32 tensors) the bytes' share stands in.
# A pair can read a cost shrinking faster than its bytes, which moving fewer bytes cannot do:
# most likely the smaller batch, timed alone, stayed in a cache the larger one overflowed, as the
# pipeline's fresh batches do not. So a share is floored at the bytes' share (unfloored, the
# what-if at many workers read a uint8 batch faster than the pipeline made it).
# The samples' own work is kept as it was: a dataset that converted its pixels to float in
# __getitem__ sheds that conversion too, but the profile cannot tell it from the rest of the sample.

Pure: no torch, no processes, no files.
"""

from __future__ import annotations

from dataclasses import dataclass

from .codec import Stored

__all__ = ["BYTES_MATTER", "UINT8_BYTES", "Uint8Cost", "share"]

# Byte-proportional costs (receive, pin, copy, collate) are scaled by the bytes only when a batch
# holds at least this much: below it the per-batch costs are fixed overheads (descriptors,
# Python), which fewer bytes do not shrink; and the profile times the uint8 change only past it.
BYTES_MATTER = 4 * 2**20
# uint8 pixels in place of float32: a quarter of the bytes (the share used where the profile did
# not time the change).
UINT8_BYTES = 0.25


def share(pair: tuple[float, float] | None, fallback: float = UINT8_BYTES) -> float:
    """uint8's cost over float32's from a measured (float32, uint8) pair, within [``fallback``, 1]:
    fewer bytes never cost more (a pair that read so is noise), nor less than their share (a pair
    that read so timed a warm cache: NOTE [ A quarter of the bytes ]); ``fallback`` (the bytes'
    share) where unmeasured."""
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

    @property
    def loop(self) -> float:
        return share(self.loop_collate_s, self.byte_share)

    @property
    def worker(self) -> float:
        return share(self.worker_collate_s, self.byte_share)

    @property
    def pin(self) -> float:
        return share(self.pin_s, self.byte_share)

    @property
    def pinned_copy(self) -> float:
        return share(self.h2d_pinned_s, self.byte_share)

    @property
    def pageable_copy(self) -> float:
        return share(self.h2d_pageable_s, self.byte_share)

