"""A cheap fingerprint of a dataset's content, so its key changes when the data does.

# NOTE [ Content fingerprint ]
# A dataset's key holds a fingerprint of its content, so a new transform, another split of the
# same size or re-encoded files are new data. It reads a few fixed samples (the first, the middle,
# the last; the first few of an IterableDataset) and hashes their structure, shapes, dtypes and
# values, where the dataset is built: in the caller's process for ``best_loader`` and
# ``stored_result``, in the trial process for a spec-only ``tune``; the two must agree, so:
#  * random draws are made repeatable: the global random sources (``random``, numpy, torch) are
#    seeded for the reads and restored after, so a random crop reads the same in every process;
#  * floating-point values are summarised (count, mean, spread, range) to FLOAT_DIGITS
#    significant digits, not hashed bit for bit, so another CPU's last-bit rounding in a
#    transform does not change the key and a fleet's machines share it;
#  * a sample that raises is hashed as its exception's type, the same everywhere.
# Reading a few samples is the cost: it is paid once per key computation, never per trial.
# A dataset that draws its content at random when built, unseeded, is other data at each build,
# and gets another key each time: seed what it draws (as autoloader.demo does).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import random
from typing import Any

FLOAT_DIGITS = 4
SAMPLES = 3
_SEED = 0


def dataset_class(dataset: Any) -> str:
    """The dataset's class as ``module.qualname``, the name its key carries (a script's classes
    named by its file: NOTE [ A step keyed by what it is ])."""
    from .code_digest import module_name

    kind = type(dataset)
    return f"{module_name(getattr(kind, '__module__', None))}.{getattr(kind, '__qualname__', kind.__name__)}"


def dataset_fingerprint(dataset: Any) -> str:
    """A short hex digest of ``dataset``'s content (NOTE [ Content fingerprint ])."""
    digest = hashlib.blake2b(digest_size=8)
    with _repeatable_draws():
        for sample in _samples(dataset):
            digest.update(_describe(sample).encode())
            digest.update(b"\x00")
    return digest.hexdigest()


def _samples(dataset: Any):
    from torch.utils.data import IterableDataset

    if isinstance(dataset, IterableDataset):
        try:
            yield from itertools.islice(iter(dataset), SAMPLES)
        except Exception as exc:  # noqa: BLE001 - the dataset's own failure, hashed as such
            yield _Raised(type(exc).__name__)
        return
    length = len(dataset)
    for index in sorted({0, length // 2, length - 1}):
        try:
            yield dataset[index]
        except Exception as exc:  # noqa: BLE001
            yield _Raised(type(exc).__name__)


class _Raised:
    def __init__(self, kind: str):
        self.kind = kind


@contextlib.contextmanager
def _repeatable_draws():
    """Seed the global random sources for the block, and put their states back after."""
    import numpy as np
    import torch

    saved = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
    random.seed(_SEED)
    np.random.seed(_SEED)
    torch.manual_seed(_SEED)
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.random.set_rng_state(saved[2])


def _float(value: float) -> str:
    if not math.isfinite(value):
        return repr(value)
    return f"{value:.{FLOAT_DIGITS}g}"


def _array(kind: str, dtype: str, shape: tuple, floating: bool, values) -> str:
    """An array's description: exact bytes for integers and booleans, a rounded summary for floats."""
    head = f"{kind}[{dtype}]{tuple(shape)}"
    if values is None or not getattr(values, "size", 0):
        return head
    if floating:
        import numpy as np

        flat = values.astype(np.float64).ravel()
        finite = flat[np.isfinite(flat)]
        stats = ([float(finite.mean()), float(finite.std()), float(finite.min()), float(finite.max())]
                 if finite.size else [])
        return f"{head}~{finite.size}:" + ",".join(_float(s) for s in stats)
    return f"{head}#{hashlib.blake2b(values.tobytes(), digest_size=8).hexdigest()}"


def _describe(obj: Any) -> str:
    """A stable text for one sample: structure, shapes, dtypes and values."""
    import numpy as np

    if isinstance(obj, _Raised):
        return f"raised:{obj.kind}"
    import torch

    if isinstance(obj, torch.Tensor):
        tensor = obj.detach()
        head = f"tensor[{tensor.dtype}]"
        if tensor.layout != torch.strided:
            return f"{head}{tuple(tensor.shape)}"
        tensor = tensor.cpu()
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor)
        floating = tensor.is_floating_point()
        if not tensor.numel():
            values = None
        elif floating:
            values = tensor.double().numpy()
        else:   # the raw bytes: reshape(-1) makes even a 0-d tensor viewable as bytes
            values = tensor.reshape(-1).contiguous().view(torch.uint8).numpy()
        return _array("tensor", str(obj.dtype), tuple(obj.shape), floating, values)
    if isinstance(obj, np.ndarray):
        floating = np.issubdtype(obj.dtype, np.floating) or np.issubdtype(obj.dtype, np.complexfloating)
        if obj.dtype == object:
            return "ndarray[object]" + repr(obj.shape) + "[" + ",".join(_describe(x) for x in obj.ravel()[:64]) + "]"
        values = obj.real if np.iscomplexobj(obj) else obj
        return _array("ndarray", str(obj.dtype), obj.shape, floating, np.ascontiguousarray(values))
    if isinstance(obj, np.generic):
        return _describe(obj.item())
    if isinstance(obj, bool) or obj is None:
        return repr(obj)
    if isinstance(obj, int):
        return f"int:{obj}"
    if isinstance(obj, float):
        return f"float:{_float(obj)}"
    if isinstance(obj, (str, bytes)):
        raw = obj if isinstance(obj, bytes) else obj.encode()
        return f"{type(obj).__name__}:{hashlib.blake2b(raw, digest_size=8).hexdigest()}"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{k!r}:{_describe(v)}" for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(obj, (list, tuple)):
        return f"{type(obj).__name__}(" + ",".join(_describe(v) for v in obj) + ")"
    if hasattr(obj, "mode") and hasattr(obj, "size") and hasattr(obj, "tobytes"):    # a PIL image
        return f"image:{obj.mode}{tuple(obj.size)}#{hashlib.blake2b(obj.tobytes(), digest_size=8).hexdigest()}"
    kind = type(obj)
    return f"object:{kind.__module__}.{kind.__qualname__}"
