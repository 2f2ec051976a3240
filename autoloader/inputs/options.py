"""How much a run may spend and where it writes: the budget, the limits and the folders, checked
before anything starts; and limits a run meets that the user may not have thought of: the
machine's RAM and the cgroup's memory limit under a memory ceiling, a dataset shorter than one
batch."""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

from ..errors import AutoloaderWarning, usage
from ..search.policy import MIN_CLIPPED_TIMEOUT_S, Thresholds
from . import cgroup as cgroup_
from . import hardware
from .home import elsewhere, resolve_out

DEFAULT_BUDGET_S = 60.0
DEFAULT_TRIAL_TIMEOUT_S = 60.0
MIN_BUDGET_S = 10.0
DEFAULT_MEMORY_SHARE = 0.6   # of the RAM available, for the loader's processes, without --max-memory
# Below this no trial fits (the trial process alone is 0.4-0.6 GB); "16" meant as 16G is 16 bytes.
MIN_MAX_MEMORY = 256 * 2**20
# The share of the CPUs others may take before a run is busy (NOTE [ Others on the machine ]);
# a registry's [thresholds] busy wins.
BUSY_ENV = "AUTOLOADER_BUSY_SHARE"


# When the command that called tune() started, and the seconds it keeps for itself after the run:
# the budget counts from there (NOTE [ The budget is a wall bound ]).
_COMMAND: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("autoloader_command",
                                                                                     default=None)


@contextlib.contextmanager
def counted_from(started: float, kept_s: float = 0.0):
    """Within the block, a tune's budget counts from ``started`` (the command's start), less
    ``kept_s`` for what the command does after the run."""
    token = _COMMAND.set((started, kept_s))
    try:
        yield
    finally:
        _COMMAND.reset(token)


def budget_start() -> tuple[float, float]:
    """(when a tune called now started spending its budget, the seconds kept back after it)."""
    command = _COMMAND.get()
    return (time.monotonic(), 0.0) if command is None else command


def default_thresholds() -> Thresholds:
    """The default thresholds, with the busy share from $AUTOLOADER_BUSY_SHARE where it is set."""
    text = os.environ.get(BUSY_ENV, "").strip()
    if not text:
        return Thresholds()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise usage(f"${BUSY_ENV} is a share of the CPUs, above 0 and below 1", text,
                    f"set e.g. {BUSY_ENV}=0.8, or unset it for the default")
    return Thresholds(busy=value)


@dataclass(frozen=True)
class Limits:
    """The limits a trial ran under: the host-memory ceiling (bytes) and the watchdog's timeout (s)."""
    max_memory: int
    trial_timeout: float

    def to_dict(self) -> dict:
        return {"max_memory": self.max_memory, "trial_timeout": self.trial_timeout}


@dataclass(frozen=True)
class Options:
    """How much a run may spend and where it writes, checked before anything starts."""

    budget: float
    limits: Limits
    out: str
    storage: str | None
    thresholds: Thresholds = Thresholds()   # what counts as a change since the previous result
    # When the budget started (time.monotonic()), the command's or the call's start (None: the
    # run's), and the seconds of it kept for what the command does after the run (a report page).
    started: float | None = None
    kept_s: float = 0.0
    ceiling: Ceiling | None = None

    @classmethod
    def build(cls, budget: float, trial_timeout: float, max_memory: int | str | None, out: str | None,
              storage: str | None, thresholds: Thresholds | None = None,
              started: float | None = None, kept_s: float = 0.0) -> "Options":
        out = resolve_out(out)
        thresholds = thresholds if thresholds is not None else default_thresholds()
        if isinstance(trial_timeout, bool) or not isinstance(trial_timeout, (int, float)) or not trial_timeout > 0:
            raise usage("the trial timeout must be a positive number of seconds", trial_timeout,
                        "pass e.g. trial_timeout=60 (--trial-timeout 60)")
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) \
                or not math.isfinite(budget) or budget < MIN_BUDGET_S:
            raise usage(f"the budget must leave time for at least one trial ({MIN_BUDGET_S:.0f} s or more)",
                        budget, f"pass --budget 60 or more (the default is {DEFAULT_BUDGET_S:.0f})")
        if max_memory is not None:
            ceiling = hardware.parse_size(max_memory)
            if ceiling < MIN_MAX_MEMORY:
                raise usage(f"the memory ceiling must hold the trial process and its batches, so "
                            f"{MIN_MAX_MEMORY // 2**20} MiB or more (a number without a unit counts bytes)",
                            max_memory, "write the unit, e.g. --max-memory 16G (max_memory='16G')")
            bound = check_ceiling_fits_ram(ceiling, max_memory, DEFAULT_MEMORY_SHARE)
        else:
            bound = default_ceiling(DEFAULT_MEMORY_SHARE)
            ceiling = bound.bytes
            if ceiling < MIN_MAX_MEMORY:
                what = (f"{DEFAULT_MEMORY_SHARE:.0%} of the RAM available now" if bound.by == "ram" else
                        f"{CGROUP_SHARE:.0%} of what the cgroup's memory limit leaves ({bound.cgroup.path})")
                raise usage(f"the default memory ceiling, {what}, must be "
                            f"{MIN_MAX_MEMORY // 2**20} MiB or more to hold the trial process and its batches",
                            f"{ceiling / 2**20:.0f} MiB", "free memory, or pass --max-memory (e.g. 2G)")
        if os.path.exists(out) and not os.path.isdir(out):
            raise usage("--out is the folder results are written to", out,
                        f"move the file away, or {elsewhere(out, 'naming a folder (it is made if missing), not a file')}")
        return cls(float(budget), Limits(ceiling, float(trial_timeout)), out, storage, thresholds, started, kept_s,
                   bound)


# Of the cgroup's room, the share the default ceiling takes: the guard compares the trial tree's
# PSS, sampled, while the kernel charges the cgroup more than that (its page tables, socket
# buffers, the page cache its reads bring in) and acts at once.
CGROUP_SHARE = 0.9


@dataclass(frozen=True)
class Ceiling:
    """The host-memory ceiling and what set it (``by``: "given" by --max-memory, "ram": a share
    of the RAM available, "cgroup": the cgroup's room); ``cgroup``: the cgroup's limit, if any."""
    bytes: int
    by: str
    cgroup: cgroup_.MemoryRoom | None = None


def default_ceiling(share: float) -> Ceiling:
    """The tighter of ``share`` of the RAM available and CGROUP_SHARE of the cgroup's room."""
    from . import hardware

    ram = int(share * hardware.available_memory())
    memory = cgroup_.read().memory
    if memory is not None and int(CGROUP_SHARE * memory.room) < ram:
        return Ceiling(int(CGROUP_SHARE * memory.room), "cgroup", memory)
    return Ceiling(ram, "ram", memory)


def check_ceiling_fits_ram(ceiling: int, given: int | str, default_share: float) -> Ceiling:
    """The ceiling given, refused above the machine's RAM or the cgroup's memory limit, where
    the OOM killer acts first."""
    import psutil

    total = int(psutil.virtual_memory().total)
    if ceiling > total:
        raise usage(f"the memory ceiling must fit in this machine's RAM, {total / 2**30:.1f} GiB (past it, the "
                    "kernel's OOM killer stops trials before the guard can)", given,
                    f"pass --max-memory {max(1, int(0.8 * total / 2**30))}G or less, or leave it out for "
                    f"{default_share:.0%} of the RAM available")
    limits = cgroup_.read()
    memory = limits.memory_limit
    if memory is not None and ceiling > memory.limit:
        raise usage(f"the memory ceiling must fit in the cgroup's memory limit, {memory.limit / 2**30:.2f} GiB at "
                    f"{memory.path} (a container's or a job's: past it, the kernel's OOM killer stops trials "
                    "before the guard can)", given,
                    f"pass --max-memory {max(1, int(limits.memory.room / 2**20))}M or less (what the cgroup has "
                    "left), or leave it out for the cgroup's room")
    return Ceiling(ceiling, "given", limits.memory)


def warn_batch_past_length(batch_sizes: Sequence[int], length: int | None) -> None:
    """Warn when a batch size is larger than the dataset."""
    past = [size for size in batch_sizes if length is not None and size > length]
    if past:
        warnings.warn(f"batch size {', '.join(map(str, past))} is larger than the dataset ({length} samples): every "
                      f"epoch is one batch of {length} (none with drop_last=True), so trials measure the "
                      "loader's start-up more than its loading. Pass a batch size of at most the dataset's "
                      "length", AutoloaderWarning, stacklevel=4)


def clipped_timeout(trial_timeout: float, left_s: float, floor_s: float = MIN_CLIPPED_TIMEOUT_S) -> float:
    """The user's timeout, or what is left of the budget when that is less (down to ``floor_s``),
    so that a hang cannot carry the run far past its budget."""
    return min(trial_timeout, max(left_s, floor_s))
