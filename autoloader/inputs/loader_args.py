"""The DataLoader arguments a user fixes (``tune(..., drop_last=True)``, a registry's ``options``),
checked before any process starts.

# NOTE [ Fixed DataLoader arguments ]
# Every trial builds its DataLoader with the user's fixed arguments, so one DataLoader refuses
# (an unknown name, ``drop_last='yes'``, ``timeout=-1``) is a usage error naming it, never a
# crash of the trial process: the names are checked against DataLoader's own signature, and the
# common arguments' types and ranges, here in the driver; what only DataLoader itself knows is
# met when the trial process builds its first loader at set-up (``probe/trial.py``), and ends
# the run as the same usage error. DataLoader's signature is read from torch's source when torch
# is not imported yet (importing it costs seconds the CLI would spend before every run).
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import inspect
import math
import multiprocessing
import os
import sys
from typing import Sequence

from ..errors import usage
from ..search.settings import SETTINGS
from ..search.space import TUNED_SETTINGS

FIX_NAMES = "pass only arguments of torch.utils.data.DataLoader (they go to every trial's loader unchanged)"


def check_loader_kwargs(fixed: dict, batch_sizes: Sequence[int], where: str = "DataLoader argument") -> None:
    """Raise a UsageError naming the first fixed DataLoader argument that DataLoader would refuse,
    or that cannot go with what autoloader tunes."""
    for key in TUNED_SETTINGS:
        if key in fixed and not SETTINGS[key].fixable:   # a fixable one is honoured, not searched
            raise usage(f"{key} is what autoloader tunes, so it cannot be fixed", key,
                        "drop it (use batch_size=/--batch-size for the batch size)")
    names = dataloader_parameters()
    if "dataset" in fixed:
        raise usage(f"the dataset is tune()'s first argument, not a {where}", "dataset",
                    "pass it as the first argument (--dataset MODULE:ATTR)")
    if names is not None:
        names = tuple(n for n in names if n != "dataset" and (n not in TUNED_SETTINGS or SETTINGS[n].fixable))
        unknown = sorted(k for k in fixed if k not in names)
        if unknown:
            close = [m for k in unknown for m in difflib.get_close_matches(k, names, n=1)]
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise usage(f"each {where} must be one torch's DataLoader takes", unknown,
                        f"{hint}{FIX_NAMES}; it takes {', '.join(names)}")
    for name, value in fixed.items():
        _check(name, value, where)
    if fixed.get("sampler") is not None and fixed.get("shuffle"):
        raise usage(f"a sampler decides the order, so the {where} shuffle must not be True beside it",
                    {"sampler": type(fixed["sampler"]).__name__, "shuffle": fixed["shuffle"]},
                    "drop shuffle (the sampler's order is used), or drop the sampler")
    if fixed.get("batch_sampler") is not None:
        clash = sorted(k for k in ("sampler", "shuffle", "drop_last") if fixed.get(k))
        if clash or tuple(batch_sizes) != (1,):
            raise usage("a batch_sampler makes the batches itself, so DataLoader takes it only with batch_size=1 "
                        "and no sampler, shuffle or drop_last", {"batch_sizes": list(batch_sizes), "also": clash},
                        "pass batch_size=1 (--batch-size 1) with it, or give its sampler as sampler= and let "
                        "autoloader tune the batch size")


def _check(name: str, value: object, where: str) -> None:
    def refuse(rule: str, fix: str) -> None:
        raise usage(f"the {where} {name} {rule}", value, fix)

    if name == "drop_last" and not isinstance(value, bool):
        refuse("is True or False", "pass drop_last=True or drop_last=False")
    if name == "shuffle" and value is not None and not isinstance(value, bool):
        refuse("is True, False or None", "pass shuffle=True or shuffle=False")
    if name == "timeout" and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value < 0):
        refuse("is a number of seconds, 0 or more (0 waits for ever)", "pass e.g. timeout=120, or leave it out")
    if name in ("collate_fn", "worker_init_fn") and value is not None and not callable(value):
        refuse("is a function", f"pass the function itself, e.g. {name}=my_{name.split('_')[0]}")
    if name in ("sampler", "batch_sampler") and value is not None and not hasattr(type(value), "__iter__"):
        refuse("is a Sampler (or any iterable of indices)", f"pass a torch.utils.data Sampler, or leave {name} out")
    if name == "multiprocessing_context" and value is not None:
        methods = multiprocessing.get_all_start_methods()
        if isinstance(value, str) and value not in methods:
            refuse(f"is a start method of this platform: {', '.join(methods)}", "pass e.g. multiprocessing_context='spawn'")
        if not isinstance(value, (str, multiprocessing.context.BaseContext)):
            refuse("is a start method's name or a multiprocessing context", "pass e.g. multiprocessing_context='spawn'")
    if name == "pin_memory_device" and not isinstance(value, str):
        refuse("is a device name", "pass e.g. pin_memory_device='cuda', or leave it out")
    if name == "generator" and value is not None:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(value, torch.Generator):
            refuse("is a torch.Generator", "pass e.g. generator=torch.Generator().manual_seed(0), or leave it out")


@functools.lru_cache(maxsize=1)
def dataloader_parameters() -> tuple[str, ...] | None:
    """DataLoader's parameter names, from its signature or torch's source (NOTE [ Fixed DataLoader
    arguments ]); None when neither works (the trial process's set-up then meets a wrong name)."""
    if "torch.utils.data" in sys.modules:
        return tuple(inspect.signature(sys.modules["torch.utils.data"].DataLoader).parameters)
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return None
        source = os.path.join(os.path.dirname(spec.origin), "utils", "data", "dataloader.py")
        with open(source) as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError, ImportError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "DataLoader":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs][1:])
    return None
