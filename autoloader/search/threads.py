"""The main process's torch threads: what they cost its share of the loop, from the profile.

# NOTE [ The main process's threads ]
# torch runs the main process's intra-op work (its collate without workers, a step on the CPU) on
# one thread per CPU by default; beside workers or other processes a pool whose threads are
# descheduled waits for the slowest, and the share can take several times longer than with one
# thread. The profile times that share both ways, in pairs with the order alternating (a step's
# jitter would otherwise read as a difference); when one thread reads more than THREADS_SLOWER
# faster in the pairs' median and in all pairs but one, the result says so, and what to set. The
# tuner's own figures are measured with the default count.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .codec import MAX_CPUS, Stored, stored
from .policy import THREADS_SLOWER
from .profile import Profile


@dataclass(frozen=True)
class Threads(Stored):
    """The main process's intra-op threads and, where measured, its share of a batch both ways."""
    threads: int = stored(least=1, most=MAX_CPUS)
    batch_size: int
    default_s: float | None = None      # collate and step, seconds a batch, with ``threads`` (the pairs' median)
    one_thread_s: float | None = None   # the same with one thread
    # Each pair's default over one-thread time; stored with what they say (``advise``: its line).
    ratios: tuple[float, ...] = stored((), positive=True, then=(
        "slower", "advise", ("set", lambda t: "torch.set_num_threads(1)" if t.advise else None)))

    @property
    def slower(self) -> float | None:
        if self.default_s is None or not self.one_thread_s:
            return None
        return self.default_s / self.one_thread_s

    @property
    def advise(self) -> bool:
        ratios = self.ratios
        return (self.threads > 1 and len(ratios) >= 2 and statistics.median(ratios) > 1.0 + THREADS_SLOWER
                and sum(r > 1.0 for r in ratios) >= len(ratios) - 1)


def threads_of(profile: Profile | None, threads: int | None) -> Threads | None:
    """The trial process's count (``threads``, as DatasetInfo has it) with the profile's timings."""
    count = threads or (profile.main_threads if profile is not None else None)
    if not count:
        return None
    if profile is None:
        return Threads(count, 0)
    return Threads(count, profile.batch_size, profile.main_default_s, profile.main_one_thread_s,
                   profile.main_thread_ratios)
