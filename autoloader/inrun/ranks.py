"""The ranks of a torchrun launch tuning in the run together: one schedule, read by every rank.

# NOTE [ Ranks in the run ]
# Under torchrun every rank runs its own in-run loader over its shard, all sharing the node's
# CPUs, memory and /dev/shm, and synchronous training steps at the slowest rank's pace. So the
# ranks read one schedule: every rank switches to the same config at the same batch, and the
# pick is one config for all (the per-rank config, as a node's tune before the run picks it:
# NOTE [ Tuning a node's ranks ] in node/__init__.py). Its invariants:
#   * one plan: ``Plan`` is pure, so ranks that hand it the same readings in the same order make
#     the same decisions. Every reading a rank takes is exchanged at once (all ranks reach the
#     same batch: their epochs are as long, checked when the loader is built), and each rank's
#     plan takes the slowest rank's reading of it (the node's pace), its worker memory the
#     largest any rank measured;
#   * one cut: whether a reading has read enough (or a candidate is behind) is asked at the same
#     batches on every rank (``due`` counts batches), and it ends only where every rank's plan says
#     so: one all-reduce of a vote;
#   * one start and one limit: rank 0's quick profile (the others take it, and so the same start
#     and memory forecasts); the memory each rank may add is the smallest any rank may (the
#     node's max_memory, or its RAM share, over the ranks);
#   * one record: rank 0 stores the result and says the closing line; its key is the node's
#     (``-Nrank``), as a node's tune before the run stores it.
# The exchanges use the node's gloo group (node/group.py), beside whatever backend training
# uses; they block as training's own collectives do, so a rank that dies leaves the others
# waiting until torchrun ends the job (or the group's timeout).
"""

from __future__ import annotations

from typing import Any

from .schedule import Reading


class Alone:
    """One process: every agreement is its own."""

    rank, world = 0, 1

    def shared(self, obj: Any) -> Any:
        """Rank 0's ``obj``."""
        return obj

    def least(self, mine: int) -> int:
        """The smallest of the ranks' ``mine``."""
        return mine

    def every(self, mine: Any) -> list:
        """Every rank's ``mine``, rank 0 first."""
        return [mine]

    def cut(self, vote: bool) -> bool:
        """Whether every rank votes to end the reading."""
        return vote

    def reading(self, mine: Reading, worker_bytes: int | None) -> tuple[Reading, int | None]:
        """The node's reading (the slowest rank's) and the largest worker any rank measured."""
        return mine, worker_bytes


class Together(Alone):
    """The ranks of ``node`` (node/group.py's ``Node``) agreeing over its gloo group."""

    def __init__(self, node: Any):
        self.node, self.rank, self.world = node, node.rank, node.world

    def every(self, mine: Any) -> list:
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, mine, group=self.node.group)
        return out

    def shared(self, obj: Any) -> Any:
        return self.every(obj)[0]

    def least(self, mine: int) -> int:
        return min(self.every(mine))

    def cut(self, vote: bool) -> bool:
        import torch
        import torch.distributed as dist

        votes = torch.tensor([1 if vote else 0], dtype=torch.int32)
        dist.all_reduce(votes, op=dist.ReduceOp.MIN, group=self.node.group)
        return bool(votes.item())

    def reading(self, mine: Reading, worker_bytes: int | None) -> tuple[Reading, int | None]:
        every = self.every((mine, worker_bytes))
        slowest = min(range(self.world), key=lambda r: (every[r][0].rate, r))
        sizes = [b for _, b in every if b is not None]
        return every[slowest][0], max(sizes) if sizes else None
