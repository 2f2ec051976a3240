"""The trial process's set-up, timed and looked at: its parts (``Parts``), whether a dataset was
built at its module's import (``module_holds``), which packages have no bytecode (``uncompiled``)."""

from __future__ import annotations

import os
import time

# NOTE [ Imports compiled every start ]
# Python caches each module's bytecode beside its source the first time it imports it. Where no
# cache can be written (PYTHONDONTWRITEBYTECODE=1, common in container images, with packages a tool
# installed uncompiled, uv's default; or a read-only install), every fresh interpreter compiles
# torch's thousands of modules again, seconds of every start. The trial process is one, started by
# every tune, so after its imports it looks for the bytecode of the costliest packages, and the tune
# says which it compiled and how to compile them once, beside their sources (PYTHONPYCACHEPREFIX is
# no fix: it moves every cache, the standard library's too).
UNCOMPILED_CHECKED = ("torch", "torchvision", "numpy")


def uncompiled(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The packages among UNCOMPILED_CHECKED and ``extra`` imported here with no bytecode cached
    where this interpreter looks (NOTE [ Imports compiled every start ])."""
    import importlib.util
    import sys

    found = []
    for name in dict.fromkeys(UNCOMPILED_CHECKED + extra):
        path = getattr(sys.modules.get(name), "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        try:
            cached = importlib.util.cache_from_source(path)
        except (NotImplementedError, ValueError):
            continue
        if not os.path.exists(cached):
            found.append(name)
    return tuple(found)


def module_holds(factory, dataset) -> bool:
    """Whether ``dataset`` is one of the names of ``factory``'s module (built at its import)."""
    import sys

    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    return module is not None and any(value is dataset for value in vars(module).values())


class Parts:
    """The set-up's parts as they end, each (what, start, end) in ``time.monotonic()`` seconds (the
    host's one clock), the first from ``began`` (when the driver started this process) or now."""

    def __init__(self, began: float | None = None):
        self.marks: list[tuple[str, float, float]] = []
        self.last = began if began is not None else time.monotonic()

    def mark(self, what: str) -> None:
        now = time.monotonic()
        self.marks.append((what, self.last, now))
        self.last = now
