"""Streams in the trial process: how many shards an IterableDataset says it has, and what each
worker of a burst delivered (what that means for the pick: search/shards.py).

# NOTE [ Counting what each worker delivered ]
# An IterableDataset decides itself what each worker reads: each worker runs its own __iter__. A
# stream that shards by get_worker_info() (or by its files: Hugging Face datasets, webdataset,
# litdata) gives each worker its part; one that does not gives every worker the whole stream, at a
# rate that counts the copies; fewer shards than workers leave the rest idle. The loop cannot tell:
# its batches come whole. So a trial of an iterable dataset with workers wraps the collate_fn
# (``Counted``): in a worker it adds the samples it is handed to that worker's slot of a table in
# shared memory and digests the first DIGESTS of them, then returns the user's collate_fn's (or
# default_collate's) batch untouched. The table is a RawArray made before the workers start
# (inherited under fork, handed to spawn and forkserver workers); each worker writes only its own
# slot, so no lock is needed. After the burst the trial process reads the samples each worker made
# (none: idle) and the share of the digested samples another worker made too. A digest is of
# content (blake2b over each tensor's shape, dtype and up to DIGEST_ELEMENTS of its values), so a
# stream whose samples repeat within one worker cannot tell copies from repeats: no share.
"""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
import time
from typing import Any, Callable

from ..search.shards import LIBRARIES

# Samples digested a worker (the first it makes), and the values of a tensor a digest reads.
DIGESTS = 32
DIGEST_ELEMENTS = 4096
# A worker's slot: its samples, its digests so far, then DIGESTS digests.
_SLOT = 2 + DIGESTS
# The profile's stream stage: two workers, this many batches taken at most, this long at most.
STAGE_WORKERS = 2
STAGE_BATCHES = 6
STAGE_SECONDS = 3.0


def shard_count(dataset: Any) -> tuple[int, str] | None:
    """(the shards an iterable dataset says it has, where it says so), or None: ``num_shards`` or
    ``n_shards`` (Hugging Face datasets', any stream's), or a webdataset pipeline's shard list
    (not a resampled one's). Where, under the library when the advice knows it
    ("datasets.IterableDataset.n_shards"), so that it names that library's own fix."""
    root = (type(dataset).__module__ or "").split(".", 1)[0]
    where = f"{root}." if root in LIBRARIES else ""
    for name in ("num_shards", "n_shards"):
        try:
            value = getattr(dataset, name, None)
        except Exception:  # noqa: BLE001 - a property of the user's that raised says nothing
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"{where}{type(dataset).__name__}.{name}"
    stages = getattr(dataset, "pipeline", None)
    if isinstance(stages, list) and stages:
        first = stages[0]
        urls = getattr(first, "urls", None)
        if isinstance(urls, (list, tuple)) and urls and "Resampled" not in type(first).__name__:
            return len(urls), f"{where}{type(dataset).__name__}'s {type(first).__name__}"
    return None


def shard_fields(dataset: Any, iterable: bool) -> dict:
    found = shard_count(dataset) if iterable else None
    return {"shards": found[0], "shards_from": found[1]} if found else {}


def _digest(sample: Any, h) -> None:
    if hasattr(sample, "detach") and hasattr(sample, "numpy"):   # a tensor
        sample = sample.detach().cpu().numpy()
    if hasattr(sample, "dtype") and hasattr(sample, "reshape"):  # an array
        flat = sample.reshape(-1)
        step = max(1, flat.shape[0] // DIGEST_ELEMENTS)
        h.update(f"{sample.shape}{sample.dtype}".encode())
        h.update(flat[::step][:DIGEST_ELEMENTS].tobytes())
    elif isinstance(sample, dict):
        for key in sorted(sample, key=str):
            h.update(str(key).encode())
            _digest(sample[key], h)
    elif isinstance(sample, (list, tuple)):
        for item in sample:
            _digest(item, h)
    elif isinstance(sample, (bytes, bytearray, memoryview)):
        data = bytes(sample)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data[::max(1, len(data) // DIGEST_ELEMENTS)][:DIGEST_ELEMENTS])
    else:
        h.update(repr(sample).encode())


def digest(sample: Any) -> int:
    """A sample's content digest, a signed 64-bit integer (NOTE [ Counting what each worker delivered ])."""
    h = hashlib.blake2b(digest_size=8)
    _digest(sample, h)
    return int.from_bytes(h.digest(), "little", signed=True)


class Counted:
    """A collate_fn that counts and digests, per worker, the samples it collates, then collates
    them as ``collate`` does."""

    def __init__(self, collate: Callable | None, workers: int):
        from torch.utils.data import default_collate

        self.collate = collate or default_collate
        self.workers = workers
        self.table = multiprocessing.RawArray("q", workers * _SLOT)

    @classmethod
    def for_trial(cls, iterable: bool, collate: Callable | None, workers: int) -> "Counted | None":
        return cls(collate, workers) if iterable and workers else None

    def __call__(self, samples):
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is not None and info.id < self.workers and isinstance(samples, list):
            base = info.id * _SLOT
            self.table[base] += len(samples)
            filled = self.table[base + 1]
            for sample in samples[:max(0, DIGESTS - filled)]:
                self.table[base + 2 + filled] = digest(sample)
                filled += 1
            self.table[base + 1] = filled
        return self.collate(samples)

    def read(self) -> dict:
        """TrialResult's ``worker_delivered`` and ``duplicate_share``."""
        counts, digests = [], []
        for w in range(self.workers):
            base = w * _SLOT
            counts.append(int(self.table[base]))
            digests.append(list(self.table[base + 2:base + 2 + self.table[base + 1]]))
        return {"worker_delivered": tuple(counts), "duplicate_share": duplicate_share(digests)}


def duplicate_share(digests: list[list[int]]) -> float | None:
    """The share of the workers' digests another worker made too; None with fewer than two workers
    that made samples, or where one's own repeat (half or more alike: they cannot tell copies)."""
    made = [d for d in digests if d]
    if len(made) < 2 or any(len(set(d)) < len(d) / 2 for d in made):
        return None
    shared = total = 0
    for i, own in enumerate(made):
        others = set().union(*(set(d) for j, d in enumerate(made) if j != i))
        shared += sum(1 for x in own if x in others)
        total += len(own)
    return shared / total if total else None


def with_stream(profile, dataset, fixed_kwargs: dict, batch_size: int, beat: Callable[[], None]):
    """The profile with its stream stage: an iterable dataset read by two workers through
    ``Counted``, a few batches, so that a stream every worker reads whole, or too few shards, is
    seen whatever configs the search measures; as it was for a map-style dataset, or a raise."""
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(dataset, IterableDataset):
        return profile
    workers = min(STAGE_WORKERS, (shard_count(dataset) or (STAGE_WORKERS,))[0])
    if workers < 2:   # one shard: one worker has it all, and the cap says so
        return profile
    counted = Counted(fixed_kwargs.get("collate_fn"), workers)
    passed = {k: v for k, v in fixed_kwargs.items() if k in ("worker_init_fn", "multiprocessing_context")}
    t0 = time.perf_counter()
    try:
        it = iter(DataLoader(dataset, batch_size=batch_size, num_workers=workers, prefetch_factor=1,
                             collate_fn=counted, **passed))
        try:
            for _ in range(STAGE_BATCHES):
                next(it)
                beat()
                if time.perf_counter() - t0 > STAGE_SECONDS:
                    break
        except StopIteration:
            pass
        finally:
            it._shutdown_workers()
            del it
    except Exception:  # noqa: BLE001 - the profile stands without it
        return profile
    found = counted.read()
    return dataclasses.replace(profile, stream_delivered=found["worker_delivered"],
                               stream_duplicates=found["duplicate_share"],
                               seconds=profile.seconds + time.perf_counter() - t0)
