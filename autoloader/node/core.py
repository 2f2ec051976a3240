"""Tuning every rank of a node together: one study, one result, for N ranks sharing one machine.

``joined()`` says whether this process is one rank of a multi-rank launch (torchrun, or the
ranks ``autoloader tune --nproc-per-node N`` starts: ``launched``) and joins torch.distributed;
``on_node`` runs the tune on rank 0 and has every other rank ``serve`` it; ``NodeRunner`` is
rank 0's TrialRunner for the whole node. What they say to each other: NOTE [ Tuning a node's
ranks ].

# NOTE [ Tuning a node's ranks ]
# On a node of N ranks every rank runs its own DataLoader, and all of them share the node's
# CPUs, memory and /dev/shm: a config tuned for one rank alone oversubscribes the node when N
# use it. So the ranks are tuned together, each trial run by all of them at once:
# * The view. Each rank may use the node's usable CPUs (the union of the ranks' affinity, capped
#   by a cgroup quota) // N, or its own affinity when that is narrower, at least 1: that is the
#   ``cpus`` of the problem's hardware, so the search space (workers up to
#   MAX_WORKERS_PER_CPU per CPU) and the model are one rank's. The hardware's ``ranks`` enters
#   its fingerprint (``-Nrank``), so single-rank and N-rank studies and results never mix. Each
#   rank's memory guard gets the node's --max-memory // N, and a config's predicted /dev/shm is
#   counted N times: the limits hold for the node, every rank's workers included.
# * The control is the rule a user applies today on every rank: ``num_workers = node CPUs - 1``
#   per rank (the common rule is stated per node; nothing in it divides by the ranks), clipped to
#   the space. That is the rule the tuner replaces, so the final measures it; the per-rank
#   ``rank CPUs - 1`` is one of the configs the model may pick.
# * The protocol, over a gloo group (so it works beside NCCL training): rank 0 runs the Run
#   (search, store, choice) and its NodeRunner ``broadcast_object_list``s each command to the
#   other ranks, which ``serve`` it: _Start(setup, limits) starts every rank's own TrialRunner,
#   its trial process reading its shard (DistributedSampler(num_replicas=N, rank=r), set_epoch
#   each epoch) on its own device (cuda:LOCAL_RANK, or cpu); _Measure(config, settings, timeout)
#   runs one burst on every rank at once (the broadcast starts them together, so the bursts
#   contend as training's loaders do); every rank ``gather_object``s its _Reply back to rank 0;
#   _Stop ends ``serve``. The profile is rank 0's alone (the others idle meanwhile): it measures
#   one rank's pipeline costs, which the bursts, run by all ranks, then correct. After the run
#   rank 0 broadcasts its outcome (the TuneResult, or the error), so every rank returns the same.
# * The rate. Synchronous training steps at the pace of its slowest rank, so a node trial's
#   ``samples_per_s`` is the slowest rank's own rate (what the model predicts: one rank's loop,
#   under the node's contention) and ``rank_samples_per_s`` lists every rank's; the node's rate
#   is N x that, and the result's top-level figures (the pick's rate, the baseline, the control)
#   are the node's. Within a study N is fixed, so the search ranks configs alike either way.
#   Memory figures are the largest rank's (each compared with its --max-memory // N), /dev/shm
#   growth the largest seen (it is the node's), waits the longest.
# * A failure on any rank is the node trial's failure, about its config, with that rank's cause
#   and the rank named; a rank that cannot start is a SetupError naming it. Ranks' bursts end by
#   their own stop rules, so the last few batches of the longest one run with less contention.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import math
import os
import pickle
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import AutoloaderError, usage
from ..inputs import hardware
from ..probe.burst import BurstSettings
from ..probe.driver import DatasetInfo, RunnerSetup, SetupError, TrialRunner
from ..search.results import FAILED, OK, TrialResult
from ..search.space import LoaderConfig

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
            self.broadcast(_Stop())


class RankLost(AutoloaderError):
    """A rank of the node's tune died or stopped answering: the tune cannot go on."""


def rank_ceiling(max_memory: int, ranks: int) -> int:
    """One rank's share of the node's memory ceiling."""
    return max_memory // max(1, ranks)


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


# --- the commands rank 0 broadcasts, and the ranks' replies ------------------------------------

@dataclass(frozen=True)
class _Start:
    """Start this rank's TrialRunner for ``setup`` (made this rank's: its shard and device)."""

    setup: RunnerSetup
    max_memory: int       # the node's ceiling; a rank's guard gets its share
    hang_timeout_s: float


@dataclass(frozen=True)
class _Measure:
    config: LoaderConfig
    settings: BurstSettings
    timeout: float | None


@dataclass(frozen=True)
class _Stop:
    """No more commands: ``serve`` returns."""


@dataclass(frozen=True)
class _Reply:
    """A rank's answer: its DatasetInfo (to _Start) or trial (to _Measure), or why it could not
    start, and its runner's leftover counts so far."""

    info: DatasetInfo | None = None
    result: TrialResult | None = None
    setup_error: tuple[str, bool] | None = None   # (message, usage)
    orphans: int = 0
    shm_leaks: int = 0


@dataclass(frozen=True)
class _Outcome:
    """What rank 0's run ended with, for every rank to return or raise."""

    result: Any = None
    error: BaseException | None = None


def rank_runner(node: Node, setup: RunnerSetup, max_memory: int, hang_timeout_s: float) -> TrialRunner:
    """This rank's TrialRunner: its shard, its device, its share of the memory ceiling."""
    mine = dataclasses.replace(setup, shard=(node.rank, node.world), device=node.device(setup.device))
    return TrialRunner(mine, max_memory=rank_ceiling(max_memory, node.world), hang_timeout_s=hang_timeout_s)


def _started(runner: TrialRunner) -> _Reply:
    try:
        return _Reply(info=runner.start())
    except SetupError as exc:
        return _Reply(setup_error=(str(exc), exc.usage))
    except Exception as exc:  # noqa: BLE001 - a rank that cannot start says so, never hangs rank 0
        return _Reply(setup_error=(f"{type(exc).__name__}: {exc}", False))


def _measured(runner: TrialRunner | None, command: _Measure) -> _Reply:
    if runner is None:
        return _Reply(result=TrialResult(command.config, FAILED, cause="runner_killed",
                                         error="this rank's trial process was never started"))
    try:
        result = runner.measure(command.config, command.settings, command.timeout)
    except Exception as exc:  # noqa: BLE001 - TrialRunner turns trials into results; this is its own bug
        result = TrialResult(command.config, FAILED, cause="error",
                             error=f"this rank's driver raised {type(exc).__name__}: {exc}")
    return _Reply(result=result, orphans=runner.orphans, shm_leaks=runner.shm_leaks)


def node_result(config: LoaderConfig, results: list[TrialResult]) -> TrialResult:
    """One node trial from every rank's, rank 0 first (NOTE [ Tuning a node's ranks ]): the
    first failing rank's failure, naming it; else the slowest rank's rate, with every rank's."""
    world = len(results)
    failed = [rank for rank, r in enumerate(results) if r.status != OK]
    if failed:
        first = results[failed[0]]
        also = f" (ranks {', '.join(map(str, failed[1:]))} failed too)" if failed[1:] else ""
        return dataclasses.replace(first, config=config, rank_samples_per_s=None,
                                   error=f"rank {failed[0]} of {world}{also}: {first.error or first.describe_failure()}")
    rates = [r.samples_per_s or 0.0 for r in results]
    slow = results[min(range(world), key=rates.__getitem__)]

    def largest(name: str):
        values = [getattr(r, name) for r in results if getattr(r, name) is not None]
        return max(values) if values else None

    return dataclasses.replace(
        slow, config=config, wait_fraction=largest("wait_fraction"), startup_s=largest("startup_s"),
        epoch_restart_s=largest("epoch_restart_s"), peak_host_bytes=largest("peak_host_bytes"),
        peak_pss_bytes=largest("peak_pss_bytes"), peak_shm_bytes=largest("peak_shm_bytes"),
        gpu_peak_bytes=largest("gpu_peak_bytes"), seconds=max(r.seconds for r in results),
        pruned=any(r.pruned for r in results), rank_samples_per_s=tuple(rates))


class NodeRunner:
    """Rank 0's handle on every rank's trial process: TrialRunner's interface, each call run by
    all ranks at once (NOTE [ Tuning a node's ranks ]). ``max_memory`` is the node's."""

    def __init__(self, node: Node, setup: RunnerSetup, max_memory: int, hang_timeout_s: float):
        self.node = node
        self._start = _Start(setup, max_memory, hang_timeout_s)
        self.local = rank_runner(node, setup, max_memory, hang_timeout_s)
        self.info: DatasetInfo | None = None
        self._counts: dict[int, tuple[int, int]] = {}   # rank > 0 -> (orphans, shm_leaks)

    @property
    def orphans(self) -> int:
        return self.local.orphans + sum(o for o, _ in self._counts.values())

    @property
    def shm_leaks(self) -> int:
        return self.local.shm_leaks + sum(s for _, s in self._counts.values())

    def start(self) -> DatasetInfo:
        self.node.broadcast(self._start)
        replies = self.node.gather(_started(self.local))
        for rank, reply in enumerate(replies):
            if reply.setup_error is not None:
                message, is_usage = reply.setup_error
                raise SetupError(f"rank {rank} of {self.node.world} could not start its trial process: {message}",
                                 usage=is_usage)
        self.info = replies[0].info
        return self.info

    def profile(self, batch_size: int, hang_timeout_s: float | None = None):
        """Rank 0's profile alone; the other ranks idle meanwhile (the bursts then correct it)."""
        return self.local.profile(batch_size, hang_timeout_s)

    def measure(self, config: LoaderConfig, settings: BurstSettings,
                hang_timeout_s: float | None = None) -> TrialResult:
        command = _Measure(config, settings, hang_timeout_s)
        self.node.broadcast(command)
        replies = self.node.gather(_measured(self.local, command))
        for rank, reply in enumerate(replies[1:], start=1):
            self._counts[rank] = (reply.orphans, reply.shm_leaks)
        return node_result(config, [reply.result for reply in replies])

    def close(self) -> None:
        try:
            self.node.stop()
        finally:
            self.local.close()


def serve(node: Node) -> None:
    """Ranks > 0: run rank 0's commands on this rank's own TrialRunner until _Stop."""
    runner: TrialRunner | None = None
    try:
        while True:
            command = node.broadcast()
            if isinstance(command, _Stop):
                return
            if isinstance(command, _Start):
                if runner is not None:
                    runner.close()
                runner = rank_runner(node, command.setup, command.max_memory, command.hang_timeout_s)
                reply = _started(runner)
            else:
                reply = _measured(runner, command)
            node.gather(reply)
    finally:
        if runner is not None:
            runner.close()


def on_node(node: Node, work: Callable[[], Any] | None) -> Any:
    """Rank 0 runs ``work`` (the tune, driving the others through a NodeRunner); the other
    ranks ``serve`` it; then every rank returns rank 0's result, or raises its error."""
    if node.rank != 0:
        serve(node)
        outcome = node.broadcast()
        if outcome.error is not None:
            raise outcome.error
        return outcome.result
    try:
        result = work()
    except BaseException as exc:
        if node.lost is None:
            with contextlib.suppress(RankLost):
                node.stop()
                node.broadcast(_Outcome(error=_portable(exc)))
        raise
    node.stop()
    node.broadcast(_Outcome(result=result))
    return result


def _portable(exc: BaseException) -> BaseException:
    """``exc`` as the other ranks can unpickle it; an AutoloaderError with its text otherwise."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        failure = AutoloaderError(str(exc))
        failure.exit_code = getattr(exc, "exit_code", 1)
        return failure


# --- starting the ranks: autoloader tune --nproc-per-node N --------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    from ..probe.trial import _die_with_parent as die

    die()


@contextlib.contextmanager
def launched(nproc: int):
    """This process as rank 0 of ``nproc`` ranks on this machine, the others started here as
    ``python -m autoloader.node`` (each serves, then exits). The ranks die with this process
    (PR_SET_PDEATHSIG), are waited for on the way out and killed if they linger; a rank that
    exited with an error is an AutoloaderError naming it, unless one is already on its way."""
    global _joined
    import torch.distributed as dist

    port = _free_port()
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc)}
    procs: list[subprocess.Popen] = []
    failed = True
    try:
        for rank in range(1, nproc):
            procs.append(subprocess.Popen([sys.executable, "-m", "autoloader.node"],
                                          env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                          stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=nproc,
                                timeout=JOIN_TIMEOUT)
        yield
        failed = False
    finally:
        _joined = None
        if dist.is_initialized():
            dist.destroy_process_group()
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=30.0 if not failed else 5.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
        bad = [(rank, code) for rank, code in enumerate(codes, start=1) if code != 0]
        if bad and not failed:
            raise AutoloaderError("; ".join(f"rank {rank} exited with code {code}" for rank, code in bad)
                                  + " (its error is on stderr above)")


def rank_main() -> int:
    """A rank ``launched`` started: join, serve rank 0, exit 0 when its run succeeded."""
    import torch.distributed as dist

    try:
        node = joined()
        if node is None:
            return 2   # not a rank of a launch: WORLD_SIZE is 1
        try:
            on_node(node, None)
        except AutoloaderError as exc:
            return getattr(exc, "exit_code", 1)
        return 0
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

