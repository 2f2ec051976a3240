"""Limits a run meets that the user may not have thought of: the machine's RAM and the cgroup's
memory limit under a memory ceiling, a dataset shorter than one batch."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

from ..errors import AutoloaderWarning, usage
from ..search.policy import MIN_CLIPPED_TIMEOUT_S
from . import cgroup as cgroup_


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
