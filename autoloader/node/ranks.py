"""One rank's share of a node, and the node's figures from one rank's: the arithmetic of a
node's tune in one place (NOTE [ Tuning a node's ranks ] in node/__init__.py). A single rank is
``Ranks()``: every share is the whole, every node figure the rank's own. Pure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..search.profile import Profile


@dataclass(frozen=True)
class Ranks:
    """``ranks`` ranks on a node of ``node_cpus`` usable CPUs, ``rank_cpus`` for each."""

    ranks: int = 1
    node_cpus: int | None = None
    rank_cpus: int | None = None

    @property
    def node(self) -> bool:
        return self.ranks > 1

    def rate(self, rank_rate: float | None) -> float | None:
        """The node's rate from the slowest rank's: synchronous training goes at its pace."""
        return rank_rate * self.ranks if rank_rate is not None else None

    def memory(self, max_memory: int) -> int:
        return max_memory // max(1, self.ranks)

    def shm(self, one_rank_bytes: int) -> int:
        """/dev/shm the node's ranks fill together, from one rank's."""
        return one_rank_bytes * self.ranks

    def profile(self, profile: Profile, rank_cpus: int) -> Profile:
        """The profile as one rank's model sees it: the rank's CPUs, the rank's shard of an epoch."""
        if not self.node:
            return profile
        epoch = profile.epoch_batches
        return dataclasses.replace(profile, cpus=rank_cpus,
                                   epoch_batches=-(-epoch // self.ranks) if epoch else epoch)
