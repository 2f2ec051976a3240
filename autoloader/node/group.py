"""This process's place in a node's tune: ``Node`` and ``joined`` (NOTE [ Tuning a node's ranks ]
in node/__init__.py)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import math
import os
from typing import Any

from ..errors import AutoloaderError, usage
from ..inputs import hardware
from .ranks import Ranks

# How long one collective may wait: a command waits on rank 0's search, store and profile, and
# a reply on the slowest rank's trial (its cap, NOTE [ The watchdog times stalls ]).
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)
# How long the ranks ``launched`` starts may take to join (an import error shows well before).
JOIN_TIMEOUT = datetime.timedelta(seconds=120)


class Node:
    """This process's place in a node's tune: its rank, the node's size, the CPUs each rank may
    use, and the gloo group the ranks talk through (NOTE [ Tuning a node's ranks ])."""

    def __init__(self, rank: int, world: int, local_rank: int, node_cpus: int, rank_cpus: int, group: Any):
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.node_cpus, self.rank_cpus = node_cpus, rank_cpus
        self.group = group
        self.stopped = False   # rank 0: the serving ranks were sent _Stop
        self.lost: str | None = None   # a collective failed: a rank is gone, no more are tried

    @property
    def ranks(self) -> Ranks:
        """The node's arithmetic (node/ranks.py)."""
        return Ranks(self.world, self.node_cpus, self.rank_cpus)

    def device(self, device: str) -> str:
        """This rank's device: its own GPU, cuda:LOCAL_RANK, on CUDA."""
        return f"cuda:{self.local_rank}" if device.startswith("cuda") else device

    def hardware(self, hw: hardware.Hardware) -> hardware.Hardware:
        """The hardware one rank of this node sees: its share of the CPUs, and the rank count."""
        return dataclasses.replace(hw, cpus=self.rank_cpus, ranks=self.world)

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0's ``obj`` on every rank."""
        import torch.distributed as dist

        box = [obj]
        with self._collective():
            dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, obj: Any) -> list | None:
        """Every rank's ``obj``, rank 0 first, on rank 0; None elsewhere."""
        import torch.distributed as dist

        out = [None] * self.world if self.rank == 0 else None
        with self._collective():
            dist.gather_object(obj, out, dst=0, group=self.group)
        return out

    @contextlib.contextmanager
    def _collective(self):
        """A collective, or RankLost when a rank is gone (gloo's error: the peer closed, a timeout)."""
        if self.lost is not None:
            raise RankLost(self.lost)
        try:
            yield
        except RuntimeError as exc:
            self.lost = (f"rank {self.rank} of {self.world} lost touch with the other ranks of the node's tune "
                         f"({str(exc).splitlines()[0][:300]}); a rank's process died or stopped answering, "
                         "and its own error, if any, is on stderr above")
            raise RankLost(self.lost) from None

    def stop(self) -> None:
        """Rank 0: end the other ranks' ``serve`` (once)."""
        if self.rank == 0 and not self.stopped and self.lost is None:
            self.stopped = True
            from .protocol import Stop

            self.broadcast(Stop())


class RankLost(AutoloaderError):
    """A rank of the node's tune died or stopped answering: the tune cannot go on."""


def check_nproc(nproc: object, device: str, gpus: int, cpus: int) -> int:
    """``--nproc-per-node`` checked: a whole number from 1 to the CPUs, and to the GPUs on CUDA."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise usage("--nproc-per-node is how many ranks share this node, a whole number of 1 or more", nproc,
                    "pass e.g. --nproc-per-node 8 (one rank per GPU), or leave it out for one rank")
    if device.startswith("cuda") and nproc > gpus:
        raise usage(f"each rank tunes on a GPU of its own, and {gpus} GPU(s) are visible", nproc,
                    f"pass --nproc-per-node {gpus} or fewer (check CUDA_VISIBLE_DEVICES), or --device cpu")
    if nproc > cpus:
        raise usage(f"each rank needs at least one CPU, and this process may use {cpus}", nproc,
                    f"pass --nproc-per-node {cpus} or fewer")
    if nproc > 1 and _env_world() > 1:
        raise usage("--nproc-per-node starts the ranks itself, and this process is already one rank of "
                    f"{_env_world()} (WORLD_SIZE)", nproc,
                    "under torchrun, call tune() in every rank (or run autoloader tune without --nproc-per-node)")
    return nproc


def _env_world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


_joined: Node | None = None


def joined() -> Node | None:
    """The node this process is one rank of, once torch.distributed is up (it is initialised
    here, with gloo, when the launcher's environment says WORLD_SIZE > 1 and nobody has yet);
    None outside a multi-rank launch. Every rank must call it: it joins a group and gathers the
    ranks' CPUs."""
    global _joined
    import torch.distributed as dist

    if _joined is not None and dist.is_initialized():
        return _joined
    if not dist.is_available():
        return None
    if not dist.is_initialized():
        if _env_world() <= 1:
            return None
        dist.init_process_group("gloo", timeout=COLLECTIVE_TIMEOUT)
        # Ours, so ours to end: a gloo group still up when the interpreter exits aborts the
        # process (its threads are torn down running), and the rank's exit code reads -6.
        atexit.register(_end_process_group)
    world = dist.get_world_size()
    if world <= 1:
        return None
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if local_world != world:
        raise usage("autoloader tunes the ranks of one node together, and this job spans several nodes",
                    f"WORLD_SIZE={world}, LOCAL_WORLD_SIZE={local_world}",
                    "tune once per node type with torchrun --nnodes 1 (or autoloader tune --nproc-per-node N); "
                    "the result then serves every node of that type")
    group = dist.new_group(backend="gloo", timeout=COLLECTIVE_TIMEOUT)
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    views = [None] * world
    dist.all_gather_object(views, (_affinity(), hardware.usable_cpus()), group=group)
    node_cpus, rank_cpus = node_share([v[0] for v in views], [v[1] for v in views], hardware.cpu_quota())
    _joined = Node(rank, world, local_rank, node_cpus, rank_cpus, group)
    return _joined


def forget() -> None:
    """Drop the node this process joined (its group was destroyed: ``launch.launched``)."""
    global _joined
    _joined = None


def _end_process_group() -> None:
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - at exit, a group already gone is fine
        pass


def _affinity() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call: every CPU
        return frozenset(range(os.cpu_count() or 1))


def node_share(affinities: list[frozenset[int]], own: list[int], quota: float | None) -> tuple[int, int]:
    """(the node's usable CPUs, one rank's): the union of the ranks' affinity capped by the
    quota, and that // ranks, or the narrowest rank's own usable CPUs if fewer; at least 1."""
    node = len(frozenset().union(*affinities)) or 1
    if quota:
        node = max(1, min(node, math.ceil(quota)))
    return node, max(1, min(node // len(affinities), min(own)))


