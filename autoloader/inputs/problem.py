"""The tuning problem: what is loaded, how it is consumed, on which device, checked once before
any process starts; its key (which names its stored study and result) is computed here alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import usage
from ..search.space import check_batch_size
from . import hardware
from .loader_args import check_loader_kwargs
from .source import Source

DEFAULT_BATCH_SIZE = 128


def _start_methods(value: Any) -> bool | tuple[str, ...]:
    """``search_start_method`` checked: True or False, or start methods of this platform by name."""
    import sys

    from ..search.settings import platform_methods

    if isinstance(value, bool):
        return value
    methods = platform_methods(sys.platform)
    fix = f"pass search_start_method=True (--search-start-method), or some of {', '.join(methods)}"
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise usage("search_start_method is True, False or a list of start methods", value, fix)
    unknown = [m for m in value if m not in methods]
    if unknown:
        raise usage(f"search_start_method names start methods of this platform ({', '.join(methods)})", unknown, fix)
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class Problem:
    """One tuning problem. ``length``: None for an IterableDataset; not known yet when only a spec
    was given (the trial process reports it: ``with_length``), nor ``content``, ``dataset_class``
    and ``step_identity``, the key's names of the data, its class and the step (NOTE [ Content
    fingerprint ], NOTE [ A step keyed by what it is ])."""

    dataset: Source
    step: Source | None
    batch_sizes: tuple[int, ...]
    device: str
    fixed_kwargs: dict
    hardware: hardware.Hardware
    length: int | None = None
    length_known: bool = False
    allow_reorder: bool = False   # the ORDER gate: it changes what the run sees, so only the user opens it
    content: str | None = None
    version: str | None = None   # the user's own label for the data (``version=``, --dataset-version)
    dataset_class: str | None = None
    step_identity: str | None = None
    # The START gate (NOTE [ The start method as a knob ]): True for every start method of the
    # platform, or the methods to measure, by name.
    search_start_method: bool | tuple[str, ...] = False

    @classmethod
    def build(cls, dataset: Any, *, step: Any = None, batch_size: int | None = None,
              batch_sizes: Sequence[int] | None = None, device: str | None = None,
              fixed_kwargs: dict | None = None, length: int | None = None, length_known: bool = False,
              allow_reorder: bool = False, hw: hardware.Hardware | None = None, content: str | None = None,
              version: str | None = None, dataset_class: str | None = None,
              step_identity: str | None = None,
              search_start_method: bool | Sequence[str] = False) -> "Problem":
        """Check every input and build the problem."""
        sizes = batch_sizes_of(batch_size, batch_sizes)
        hw = hw or hardware.detect()
        fixed = dict(fixed_kwargs or {})
        check_loader_kwargs(fixed, sizes)   # NOTE [ Fixed DataLoader arguments ] in loader_args.py
        dataset_source = _source(dataset, "dataset")
        step_source = _source(step, "step") if step is not None else None
        Source.from_object(fixed, "DataLoader arguments")  # picklable, or a clear error
        if not isinstance(allow_reorder, bool):
            raise usage("allow_reorder is True or False", allow_reorder, "pass allow_reorder=True (--allow-reorder)")
        search_start_method = _start_methods(search_start_method)
        return cls(dataset_source, step_source, sizes, resolve_device(device, hw.gpus), fixed, hw,
                   length, length_known, allow_reorder, content, _version(version), dataset_class,
                   step_identity if step_source is not None else None, search_start_method)

    def with_length(self, length: int | None, content: str | None = None,
                    dataset_class: str | None = None, step_identity: str | None = None) -> "Problem":
        """The problem once the dataset's length and content are known; what is known already is
        kept, so the key never changes under a problem."""
        if self.length_known:
            return self
        return dataclasses.replace(self, length=length, length_known=True, content=content,
                                   dataset_class=dataset_class,
                                   step_identity=step_identity if self.step is not None else None)

    @property
    def key(self) -> str:
        """The problem's name: what is loaded (its name, length, content fingerprint and the
        user's version), how it is consumed, which batch sizes, which device. A readable prefix
        and a hashed rest, so two problems never share a file."""
        if not self.length_known:
            raise RuntimeError("Problem.key needs the dataset's length: call with_length() first")
        name = self.dataset_class or self.dataset.name
        readable = re.sub(r"[^A-Za-z0-9]+", "-", re.split(r"[/.]", name)[-1]).strip("-")[:40] or "dataset"
        # A default repr carries a memory address (a collate_fn is "<function f at 0x7f...>"), which
        # would give every run a new key and never find a stored result again.
        step = (self.step_identity or self.step.name) if self.step else None
        parts = (name, self.length, self.batch_sizes, step, self.device,
                 sorted((k, re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))) for k, v in self.fixed_kwargs.items()))
        # Only when allowed, so that every other problem keeps the key it always had.
        identity = repr(parts + (("allow_reorder", True),) if self.allow_reorder else parts)
        if self.search_start_method and "multiprocessing_context" not in self.fixed_kwargs:
            identity += repr(("search_start_method", True))
        identity += _data_identity(self.content, self.version)
        length = self.length if self.length is not None else "iter"
        return f"{readable}-n{length}-{hashlib.sha1(identity.encode()).hexdigest()[:10]}"


def batch_sizes_of(batch_size: int | None, batch_sizes: Sequence[int] | None) -> tuple[int, ...]:
    """The batch sizes to search: ``batch_size`` alone (default DEFAULT_BATCH_SIZE), or
    ``batch_sizes``, sorted and without repeats."""
    if batch_size is not None and batch_sizes:
        raise usage("give --batch-size or --batch-sizes, not both", (batch_size, batch_sizes),
                    "drop one of them")
    sizes = tuple(batch_sizes) if batch_sizes else (DEFAULT_BATCH_SIZE if batch_size is None else batch_size,)
    return tuple(sorted({check_batch_size(size) for size in sizes}))


def resolve_device(device: str | None, gpus: Sequence[str]) -> str:
    """``device`` checked against the GPUs NVML sees; None: cuda when there is one."""
    if device is None:
        return "cuda" if gpus else "cpu"
    if device not in ("cuda", "cpu") and not device.startswith("cuda:"):
        raise usage("--device is cuda or cpu", device, "pass --device cuda or --device cpu")
    if device.startswith("cuda") and not gpus:
        raise usage("--device cuda needs an NVIDIA GPU with its driver", "no GPU found by NVML",
                    "pass --device cpu, or run where a GPU is visible (check nvidia-smi)")
    if device.startswith("cuda:"):
        index = device[len("cuda:"):]
        if not index.isdigit() or int(index) >= len(gpus):
            raise usage(f"device cuda:N names one of this machine's {len(gpus)} GPU(s), N from 0 to {len(gpus) - 1}",
                        device, "pass device='cuda' (the first GPU) or a cuda:N that exists (see nvidia-smi)")
    return device


def _data_identity(content: str | None, version: str | None) -> str:
    return f"|content={content}" + (f"|version={version}" if version is not None else "")


def _version(version: object) -> str | None:
    if version is None:
        return None
    if not isinstance(version, str) or not version.strip() or len(version) > 200:
        raise usage("the dataset version is a short non-empty string naming this data", version,
                    "pass e.g. version='2026-11-30' (--dataset-version 2026-11-30), or leave it out")
    return version


def _source(obj: Any, what: str) -> Source:
    if isinstance(obj, Source):   # already a recipe (the retune registry names its own)
        return obj
    if isinstance(obj, str):
        return Source.from_spec(obj)
    return Source.from_object(obj, what)
