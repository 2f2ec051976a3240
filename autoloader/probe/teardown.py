"""Ending a trial's DataLoader workers when ``iter(loader)`` itself raised, in the trial process.

# NOTE [ An iterator that raised while starting ]
# With workers, ``iter(loader)`` starts the workers, registers their pids with DataLoader's
# SIGCHLD handler, and only then asks the sampler for the first indices to hand out. When that
# raises (a sampler's __iter__, or shuffling a dataset whose __len__ is too large to permute),
# the half-built iterator is never returned, so the trial cannot shut it down as it does every
# other, and its workers stay registered: once they were reaped, the SIGCHLD handler raised
# "DataLoader worker ... is killed by signal" wherever the trial process happened to be, the
# process died with that traceback on the user's terminal, and the trial was blamed on "the trial
# process died" (and on __getitem__ without workers, where the same fault surfaces at the first
# batch). So the half-built iterator is found in the exception's frames and shut down like any
# other (``half_built_iterator``), the cause is named from the frames (``failures.classify_
# failure``: "sampler_error"), and a late SIGCHLD report while the trial's leftovers are reaped
# is absorbed (``reap_absorbing_reports``): that trial has its result, and the process lives on.
"""

from __future__ import annotations

from typing import Callable

# How many late SIGCHLD reports one reap may absorb: one per worker of the largest trial is
# plenty; past it something keeps killing workers, and the trial process is let die.
MAX_REPORTS = 256


def half_built_iterator(exc: BaseException):
    """The DataLoader iterator whose construction raised ``exc`` (found as ``self`` in the
    frames of its ``__init__``), or None."""
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    tb = exc.__traceback__
    found = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, _BaseDataLoaderIter):
            found = candidate
        tb = tb.tb_next
    return found


def reap_absorbing_reports(reap: Callable[[], int]) -> int:
    """``reap()``, run again when DataLoader's SIGCHLD handler interrupts it with a report about
    a worker of the trial just ended (NOTE [ An iterator that raised while starting ])."""
    for _ in range(MAX_REPORTS):
        try:
            return reap()
        except RuntimeError as exc:
            if "DataLoader worker" not in str(exc):
                raise
    return reap()
