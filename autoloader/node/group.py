"""This process's place in a node's tune: ``Node`` and ``joined`` (NOTE [ Tuning a node's ranks ]
in node/__init__.py)."""

from __future__ import annotations

import atexit
import dataclasses
import datetime
import math
import os
import sys
import time
from typing import Any, Callable

import psutil

from ..errors import AutoloaderError, usage
from ..events import Event
from ..inputs import hardware
from ..probe.load import affinity
from . import wire
from .ranks import Ranks

# How long the join may wait for every rank to reach tune() (each may build its dataset first);
# every wait of the tune itself is bounded by the run's limits: NOTE [ Bounded waits between ranks ]
# in wire.py.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)
# How long the ranks ``launched`` starts may take to join (an import error shows well before).
JOIN_TIMEOUT = datetime.timedelta(seconds=120)
# The most rank 0 spends on its own between two commands (a step of the search, the study's
# writes, the result's record): what the other ranks wait for beyond what the last command asked.
GAP_S = 60.0


class Node:
    """This process's place in a node's tune; ``pids``: every rank's (pid, start time), rank 0 first."""

    def __init__(self, rank: int, world: int, local_rank: int, node_cpus: int, rank_cpus: int, group: Any,
                 pids: list | None = None):
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.node_cpus, self.rank_cpus = node_cpus, rank_cpus
        self.group = group
        self.pids = pids or [(None, None)] * world
        self.stopped = False   # rank 0: the serving ranks were sent _Stop
        self.lost: str | None = None   # a wait failed: a rank is gone, no more are tried
        # Ranks > 0: how long rank 0's next command may take (each command sets the next's).
        self.patience = GAP_S + wire.MARGIN_S

    @property
    def ranks(self) -> Ranks:
        return Ranks(self.world, self.node_cpus, self.rank_cpus)

    def device(self, device: str) -> str:
        return f"cuda:{self.local_rank}" if device.startswith("cuda") else device

    def hardware(self, hw: hardware.Hardware) -> hardware.Hardware:
        return dataclasses.replace(hw, cpus=self.rank_cpus, ranks=self.world)

    def broadcast(self, obj: Any = None, then_s: float | None = None,
                  notice: Callable[[Event], None] | None = None) -> Any:
        """Rank 0's ``obj`` on every rank, with how long its next one may take (``then_s``, from when
        a rank starts waiting; GAP_S when not said). A gloo send completes once its receiver waits."""
        if self.rank == 0:
            for rank in range(1, self.world):
                self._waited(lambda t, r=rank: wire.send((obj, then_s), r, self.group, t), rank,
                             GAP_S + wire.MARGIN_S, "command", notice)
            return obj
        obj, then = self._waited(lambda t: wire.recv(0, self.group, t), 0, self.patience, "next")
        self.patience = (then if then is not None else GAP_S) + wire.MARGIN_S
        return obj

    def gather(self, obj: Any, until: float | None = None, task: str = "trial",
               notice: Callable[[Event], None] | None = None) -> list | None:
        """Every rank's ``obj``, rank 0 first, on rank 0 (None elsewhere), which waits for each until
        ``until`` and MARGIN_S more; the others may wait that long to send, as the command said."""
        if self.rank != 0:
            self._waited(lambda t: wire.send(obj, 0, self.group, t), 0, self.patience, "reply")
            return None
        until = time.monotonic() + GAP_S if until is None else until
        out = [obj]
        for rank in range(1, self.world):
            bound = max(0.0, until - time.monotonic()) + wire.MARGIN_S
            out.append(self._waited(lambda t, r=rank: wire.recv(r, self.group, t), rank, bound, task, notice))
        return out

    def _waited(self, exchange, peer: int, bound_s: float, task: str, notice=None):
        if self.lost is not None:
            raise RankLost(self.lost)
        pid, started = self.pids[peer]
        try:
            return wire.waited(exchange, wire.Peer(peer, self.world, pid, started), bound_s, task, notice)
        except wire.Lost as exc:
            self.lost = (f"rank {self.rank} of {self.world} lost touch with rank {peer}: {exc}. The node's tune "
                         "cannot go on without every rank; the trials finished so far are stored, and the same "
                         "command resumes from them")
            raise RankLost(self.lost) from None

    def stop(self) -> None:
        """Rank 0: end the other ranks' ``serve`` (once)."""
        if self.rank == 0 and not self.stopped and self.lost is None:
            self.stopped = True
            from .runner import Stop

            self.broadcast(Stop())


class RankLost(AutoloaderError):
    """A rank died or stopped answering: the tune cannot go on; left as interrupted, it resumes."""

    resumable = True


def check_nproc(nproc: object, device: str, gpus: int, cpus: int) -> int:
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
    """The node this process is one rank of (torch.distributed initialised here, with gloo, when
    WORLD_SIZE > 1 says so and nobody has yet); None outside a multi-rank launch. Every rank must
    call it: it joins a group and gathers the ranks' CPUs."""
    global _joined
    if "torch.distributed" not in sys.modules and _env_world() <= 1:
        # No group can be up without torch.distributed imported, and no launcher says this is a
        # rank: importing torch to find out would cost the CLI seconds of its budget.
        return None
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
    me = psutil.Process()
    dist.all_gather_object(views, (frozenset(affinity()), hardware.usable_cpus(), (me.pid, me.create_time())),
                           group=group)
    node_cpus, rank_cpus = node_share([v[0] for v in views], [v[1] for v in views], hardware.cpu_quota())
    _joined = Node(rank, world, local_rank, node_cpus, rank_cpus, group, [v[2] for v in views])
    return _joined


def forget() -> None:
    global _joined
    _joined = None


def _end_process_group() -> None:
    import torch.distributed as dist

    try:
        wire.settle()
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - at exit, a group already gone is fine
        pass


def node_share(affinities: list[frozenset[int]], own: list[int], quota: float | None) -> tuple[int, int]:
    """(the node's usable CPUs: the ranks' affinities capped by the quota, one rank's: that // ranks,
    or the narrowest rank's own if fewer; at least 1)."""
    node = len(frozenset().union(*affinities)) or 1
    if quota:
        node = max(1, min(node, math.ceil(quota)))
    return node, max(1, min(node // len(affinities), min(own)))


