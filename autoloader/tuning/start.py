"""The worker start method in a run: whether the search offers it, which methods the profile
measures, and the result's words on the pick's method (NOTE [ The start method as a knob ])."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import warnings
from typing import Sequence

from ..errors import AutoloaderWarning
from ..search.methods import MethodRow, StartChoice
from ..search.settings import START, open_gates, platform_methods
from ..search.space import LoaderConfig, SearchSpace

__all__ = ["default_method", "given_method", "measured_space", "start_choice", "start_plan", "warn_uncompiled"]


def default_method() -> str:
    """The start method this process's DataLoader workers get when not told one."""
    return mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]


def given_method(problem) -> str | None:
    """The start method the user passed (a name, or a context's), honoured and never searched."""
    context = problem.fixed_kwargs.get("multiprocessing_context")
    if context is None:
        return None
    return context if isinstance(context, str) else getattr(context, "_name", None) or str(context)


def start_plan(problem) -> tuple[frozenset[str], tuple[str, ...]]:
    """(the gates the search opens, the start methods the profile measures)."""
    unlocked = open_gates(problem)
    if given_method(problem) is not None:
        return unlocked - {START.gate.option}, ()
    if START.gate.option not in unlocked:
        return unlocked, ()
    asked = problem.search_start_method
    return unlocked, tuple(asked) if isinstance(asked, tuple) else platform_methods(sys.platform)


def measured_space(space: SearchSpace, profile) -> SearchSpace:
    """``space`` offering only the start methods the profile measured (the default always)."""
    offered = space.values(START)
    if len(offered) <= 1:
        return space
    measured = {c.method for c in getattr(profile, "methods", ()) or () if not c.default}
    kept = tuple(v for v in offered if v is None or v in measured)
    if kept == tuple(offered):
        return space
    return SearchSpace(space.batch_sizes, space.max_workers, unlocked=space.unlocked,
                       **{**dict(space.choices), START.name: kept})


def start_choice(problem, profile, config: LoaderConfig, memory, model, calib,
                 history: Sequence, rule: LoaderConfig | None = None) -> StartChoice | None:
    """What the result says about the pick's start method: the user's, honoured; or each measured
    method's worker memory, start-up and fit for the pick's other settings; None: nothing to say."""
    default = default_method()
    given = given_method(problem)
    if given is not None:
        return StartChoice(given, default, True, config.num_workers, bool(config.persistent_workers))
    costs = getattr(profile, "methods", ()) or ()
    at = ""
    if not config.num_workers and rule is not None and rule.num_workers:
        # The pick reads in the loop: the methods are said for the cpus-1 rule's workers.
        config, at = rule, "the cpus-1 rule"
    if not costs or not config.num_workers:
        return None
    rows = []
    for cost in costs:
        value = None if cost.default else cost.method
        candidate = config.replace(**{START.name: value})
        forecast = memory.forecast(candidate, history)
        rows.append(MethodRow(cost.method, forecast.worker_bytes, forecast.host_bytes,
                              model.startup_s(candidate.num_workers, calib, value), memory.fits(candidate, history),
                              forecast.epoch_copied_bytes))
    growth = getattr(profile, "growth", None)
    return StartChoice(config.multiprocessing_context or default, default, False, config.num_workers,
                       bool(config.persistent_workers), tuple(rows),
                       python_rows=growth is not None and growth.found and not growth.maps_file, at=at)


def warn_uncompiled(info) -> None:
    """Warn of the packages the trial process compiled from source (NOTE [ Imports compiled every start ])."""
    names = tuple(getattr(info, "uncompiled", ()) or ())
    if not names:
        return
    parts = getattr(info, "setup_parts", ()) or ()
    imports = sum(end - start for what, start, end in parts if "import" in what)
    why = ("PYTHONDONTWRITEBYTECODE is set" if os.environ.get("PYTHONDONTWRITEBYTECODE")
           else "their folders are not writable")
    first = names[0]
    warnings.warn(AutoloaderWarning(
        f"the trial process imported {', '.join(names)} from source, no bytecode cached ({why}): every fresh "
        f"interpreter compiles them again, and its imports took {imports:.1f} s of this tune's start. Fix: compile "
        f"them once where they are installed, `python -m compileall -q -j 0 \"$(python -c 'import {first}; "
        f"print({first}.__path__[0])')\"` for each (Python reads that bytecode whatever PYTHONDONTWRITEBYTECODE "
        f"says; a read-only install: build it into the image the same way)"), stacklevel=2)
