"""A batch walked: the tensors (and arrays) in the mappings, lists, tuples and named tuples a
collate builds, the one walker every part that reads a batch's structure uses.

Pure: no torch and nothing of autoloader's. A tensor is known by what it does (it pins and moves),
an array by its bytes, so the trial process, the in-run loader and ``watch()`` share it without
importing torch here. Containers are walked as DataLoader's own pinning walks them: a mapping
(a dict, or one such as Hugging Face's ``BatchEncoding``) comes back a dict, a list, tuple or named
tuple its own type; anything else is a leaf.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

# How deep samples_in follows a batch's first item: far past any collate's nesting, and a bound
# so a batch that holds itself ends the walk rather than the loop that reads it.
MAX_DEPTH = 32


def is_tensor(obj: Any) -> bool:
    return hasattr(obj, "pin_memory") and hasattr(obj, "to")


def map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """``batch`` with ``fn`` applied to every tensor in it, its structure kept."""
    if is_tensor(batch):
        return fn(batch)
    if isinstance(batch, Mapping):
        return {k: map_tensors(v, fn) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        items = [map_tensors(v, fn) for v in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
    return batch


def tensors_in(batch: Any) -> list:
    """The tensors in ``batch``, in the order map_tensors walks them."""
    out: list = []
    map_tensors(batch, lambda t: out.append(t) or t)
    return out


def bytes_in(batch: Any) -> int:
    """Bytes of the tensors and arrays in ``batch``."""
    if isinstance(batch, Mapping):
        return sum(bytes_in(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(bytes_in(v) for v in batch)
    size = getattr(batch, "nbytes", None)
    return size if isinstance(size, int) else 0


def samples_in(batch: Any, unknown: int | None = 1) -> int | None:
    """Samples in a collated batch: the leading dimension of its first tensor or array (a
    mapping's first value, a list's first item), or the items of a list of plain values (strings,
    numbers); ``unknown`` where nothing in it says."""
    seen = batch
    for _ in range(MAX_DEPTH):
        shape = getattr(seen, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(seen, Mapping) and seen:
            seen = next(iter(seen.values()))
        elif isinstance(seen, (list, tuple)) and seen:
            if not (hasattr(seen[0], "shape") or isinstance(seen[0], (Mapping, list, tuple))):
                return len(seen)
            seen = seen[0]
        else:
            break
    return unknown
