"""What a dataset's memory is held in, read before the growth stage: large buffers, which forked
workers read without copying, or objects, which they copy (NOTE [ Copy on read ] in search/growth.py).

# NOTE [ A heap of buffers copies nothing ]
# The growth stage (probe/growth.py) runs two workers for seconds to see whether reading rows
# copies pages. Reading a row writes the reference count of each object it touches; a row of a
# numpy array, a tensor or one bytes buffer touches one header for the whole array, never the
# buffer's pages. So where the heap the dataset added (``dataset_bytes``) is, but for less than
# GROWTH_MIN_DATASET, in such buffers, the stage has nothing to find and is not run.
# ``held_in`` walks the objects reachable from the dataset, never into classes, modules or
# functions (they reach the whole interpreter), and counts each buffer once by its owner. It gives
# up (the stage then runs) past WALK_LIMIT objects, on a numpy array of objects, and on a mapped
# file (np.memmap, mmap: NOTE [ Memory by kind ] in pages.py).
"""

from __future__ import annotations

import gc
import mmap
import sys
import types
from dataclasses import dataclass

# Objects the walk visits before it gives up: a dataset of rows held as objects has more.
WALK_LIMIT = 100_000
# A bytes-like object this large is a buffer (its header is one page of many); smaller ones count
# as objects.
BUFFER_MIN = 64 * 1024

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, types.FrameType)


@dataclass(frozen=True)
class Held:   # bytes in large anonymous buffers reachable from the dataset, and the objects besides
    buffer_bytes: int
    objects: int


def held_in(root: object, limit: int = WALK_LIMIT) -> Held | None:
    """What ``root`` holds in large buffers (NOTE [ A heap of buffers copies nothing ]); None where
    the walk cannot tell: past ``limit`` objects, an array of objects, or a mapped file."""
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    owners: dict[int, int] = {}     # a buffer's owner -> its bytes
    seen: set[int] = set()
    stack = [root]
    objects = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        if isinstance(obj, mmap.mmap):
            return None
        if np is not None and isinstance(obj, np.ndarray):
            if obj.dtype.hasobject or isinstance(obj, np.memmap):
                return None
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if isinstance(base.base, mmap.mmap) or isinstance(base, np.memmap):
                return None
            if base.base is not None:   # a view of another object's buffer: that object is walked
                stack.append(base.base)
            else:
                owners[id(base)] = base.nbytes
            continue
        if torch is not None and isinstance(obj, torch.Tensor):
            if obj.device.type == "cpu" and not obj.is_sparse:
                storage = obj.untyped_storage()
                owners[storage.data_ptr()] = storage.nbytes()
            continue
        if isinstance(obj, (bytes, bytearray, memoryview, str)):
            size = obj.nbytes if isinstance(obj, memoryview) else len(obj)
            if size >= BUFFER_MIN:
                owners[id(obj)] = size
                continue
        objects += 1
        if objects > limit:
            return None
        stack.extend(gc.get_referents(obj))
    return Held(sum(owners.values()), objects)


def copies_nothing(dataset: object, dataset_bytes: int | None, floor: int) -> bool:
    """Whether the dataset's heap is, but for less than ``floor``, in large buffers: the growth
    stage has nothing to find (NOTE [ A heap of buffers copies nothing ])."""
    if dataset_bytes is None:
        return False
    held = held_in(dataset)
    return held is not None and dataset_bytes - held.buffer_bytes < floor
