"""Limits a run meets that the user may not have thought of: the machine's RAM under a
memory ceiling, a dataset shorter than one batch."""

from __future__ import annotations

import warnings
from typing import Sequence

from ..errors import AutoloaderWarning, usage
from ..search.policy import MIN_CLIPPED_TIMEOUT_S


def check_ceiling_fits_ram(ceiling: int, given: int | str, default_share: float) -> None:
    """A ceiling above the machine's RAM guards nothing: the OOM killer acts first."""
    import psutil

    total = int(psutil.virtual_memory().total)
    if ceiling > total:
        raise usage(f"the memory ceiling must fit in this machine's RAM, {total / 2**30:.1f} GiB (past it, the "
                    "kernel's OOM killer stops trials before the guard can)", given,
                    f"pass --max-memory {max(1, int(0.8 * total / 2**30))}G or less, or leave it out for "
                    f"{default_share:.0%} of the RAM available")


def warn_batch_past_length(batch_sizes: Sequence[int], length: int | None) -> None:
    """Warn when a batch size is larger than the dataset: each epoch is one partial batch (none
    with drop_last), which measures start-up more than loading."""
    past = [size for size in batch_sizes if length is not None and size > length]
    if past:
        warnings.warn(f"batch size {', '.join(map(str, past))} is larger than the dataset ({length} samples): every "
                      f"epoch is one batch of {length} (none with drop_last=True), so trials measure the "
                      "loader's start-up more than its loading. Pass a batch size of at most the dataset's "
                      "length", AutoloaderWarning, stacklevel=4)




def clipped_timeout(trial_timeout: float, left_s: float, floor_s: float = MIN_CLIPPED_TIMEOUT_S) -> float:
    """The watchdog's timeout for the next trial: the user's, or what is left of the budget when
    that is less (down to ``floor_s``), so that a hang cannot carry the run far past its budget.
    A verdict under a clipped timeout records it (store.Limits), so a run with more budget
    measures that config again (store.stopped_by_a_raised_limit). The trial process's start-up
    is clipped the same way, with a floor of its own (probe/driver.py)."""
    return min(trial_timeout, max(left_s, floor_s))
