"""Rank 0's handle on every rank's trial process (``NodeRunner``), the other ranks' loop (``serve``,
``on_node``), and what they say to each other: rank 0 broadcasts a command, every rank gathers
back a Reply (NOTE [ Tuning a node's ranks ] in node/__init__.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import AutoloaderError
from ..events import Event
from ..probe.driver import DatasetInfo, RunnerSetup, SetupError, TrialRunner
from ..search.policy import BurstSettings
from ..search.results import FAILED, OK, TrialResult
from ..search.space import LoaderConfig
from .group import GAP_S, Node, RankLost


@dataclass(frozen=True)
class Start:   # this rank's TrialRunner for ``setup``, made this rank's: its shard and device
    setup: RunnerSetup
    max_memory: int       # the node's ceiling; a rank's guard gets its share
    hang_timeout_s: float
    budget_left_s: float | None = None   # of rank 0's run, as it sent this: bounds each rank's start-up


@dataclass(frozen=True)
class Measure:
    config: LoaderConfig
    settings: BurstSettings
    timeout: float | None


@dataclass(frozen=True)
class Stop:   # no more commands: ``serve`` returns
    pass


@dataclass(frozen=True)
class Reply:   # to Start or Measure, with the runner's leftover counts so far
    info: DatasetInfo | None = None
    result: TrialResult | None = None
    setup_error: tuple[str, bool] | None = None   # (message, usage)
    orphans: int = 0
    shm_leaks: int = 0


@dataclass(frozen=True)
class Outcome:   # what rank 0's run ended with, for every rank to return or raise
    result: Any = None
    error: BaseException | None = None


def rank_runner(node: Node, setup: RunnerSetup, max_memory: int, hang_timeout_s: float,
                budget_left: Callable[[], float] | None = None,
                notice: Callable[[Event], None] | None = None) -> TrialRunner:
    """This rank's TrialRunner: its shard, its device, its share of the memory ceiling."""
    mine = dataclasses.replace(setup, shard=(node.rank, node.world), device=node.device(setup.device))
    return TrialRunner(mine, max_memory=node.ranks.memory(max_memory), hang_timeout_s=hang_timeout_s,
                       budget_left=budget_left, notice=notice)


def _budget_left(left_s: float | None) -> Callable[[], float] | None:
    if left_s is None:
        return None
    deadline = time.monotonic() + left_s
    return lambda: deadline - time.monotonic()


def _started(runner: TrialRunner) -> Reply:
    try:
        return Reply(info=runner.start())
    except SetupError as exc:
        return Reply(setup_error=(str(exc), exc.usage))
    except Exception as exc:  # noqa: BLE001 - a rank that cannot start says so, never hangs rank 0
        return Reply(setup_error=(f"{type(exc).__name__}: {exc}", False))


def _measured(runner: TrialRunner | None, command: Measure) -> Reply:
    if runner is None:
        return Reply(result=TrialResult(command.config, FAILED, cause="runner_killed",
                                         error="this rank's trial process was never started"))
    try:
        result = runner.measure(command.config, command.settings, command.timeout)
    except Exception as exc:  # noqa: BLE001 - TrialRunner turns trials into results; this is its own bug
        result = TrialResult(command.config, FAILED, cause="error",
                             error=f"this rank's driver raised {type(exc).__name__}: {exc}")
    return Reply(result=result, orphans=runner.orphans, shm_leaks=runner.shm_leaks)


# A node trial's figures that are the largest rank's: NOTE [ Tuning a node's ranks ].
_LARGEST = ("wait_fraction", "startup_s", "epoch_restart_s", "peak_host_bytes", "peak_pss_bytes", "peak_shm_bytes",
            "gpu_peak_bytes")


def node_result(config: LoaderConfig, results: list[TrialResult]) -> TrialResult:
    """One node trial from every rank's, rank 0 first (NOTE [ Tuning a node's ranks ])."""
    world = len(results)
    failed = [rank for rank, r in enumerate(results) if r.status != OK]
    if failed:
        first = results[failed[0]]
        also = f" (ranks {', '.join(map(str, failed[1:]))} failed too)" if failed[1:] else ""
        return dataclasses.replace(first, config=config, rank_samples_per_s=None,
                                   error=f"rank {failed[0]} of {world}{also}: {first.error or first.describe_failure()}")
    rates = [r.samples_per_s or 0.0 for r in results]
    slow = results[min(range(world), key=rates.__getitem__)]

    # Each rank's meter counts the other ranks among the machine's others (probe/load.py): rank 0's,
    # less what the other ranks' own trees took, is what the rest of the machine took.
    others = results[0].others_cpus
    if others is not None:
        others = max(0.0, others - sum(r.tree_cpus or 0.0 for r in results[1:]))
    return dataclasses.replace(
        slow, config=config, others_cpus=others, steal_cpus=results[0].steal_cpus,
        tree_cpus=sum(r.tree_cpus or 0.0 for r in results) if results[0].tree_cpus is not None else None,
        seconds=max(r.seconds for r in results), pruned=any(r.pruned for r in results),
        rank_samples_per_s=tuple(rates), **{name: max((v for r in results if (v := getattr(r, name)) is not None),
                                                      default=None) for name in _LARGEST})


class NodeRunner:
    """TrialRunner's interface, each call run by all ranks at once; ``max_memory`` is the node's."""

    def __init__(self, node: Node, setup: RunnerSetup, max_memory: int, hang_timeout_s: float,
                 budget_left: Callable[[], float] | None = None, notice: Callable[[Event], None] | None = None):
        self.node = node
        self.notice = notice   # told what a long wait for a rank waits for (wire.py)
        self._start = Start(setup, max_memory, hang_timeout_s)
        self.local = rank_runner(node, setup, max_memory, hang_timeout_s, budget_left, notice)
        self.info: DatasetInfo | None = None
        self._counts: dict[int, tuple[int, int]] = {}   # rank > 0 -> (orphans, shm_leaks)

    @property
    def orphans(self) -> int:
        return self.local.orphans + sum(o for o, _ in self._counts.values())

    @property
    def shm_leaks(self) -> int:
        return self.local.shm_leaks + sum(s for _, s in self._counts.values())

    def start(self) -> DatasetInfo:
        """Every rank's trial process started at once; rank 0 then profiles while the others wait."""
        local = self.local
        setup = local.setup_limit()
        sent = time.monotonic()
        left = local.budget_left() if local.budget_left is not None else None
        self.node.broadcast(dataclasses.replace(self._start, budget_left_s=left),
                            then_s=setup + local.longest_profile() + GAP_S, notice=self.notice)
        replies = self.node.gather(_started(local), until=sent + setup, task="start", notice=self.notice)
        for rank, reply in enumerate(replies):
            if reply.setup_error is not None:
                message, is_usage = reply.setup_error
                raise SetupError(f"rank {rank} of {self.node.world} could not start its trial process: {message}",
                                 usage=is_usage)
        self.info = replies[0].info
        return self.info

    def profile(self, batch_size: int, hang_timeout_s: float | None = None, limit_s: float | None = None):
        return self.local.profile(batch_size, hang_timeout_s, limit_s)

    def measure(self, config: LoaderConfig, settings: BurstSettings,
                hang_timeout_s: float | None = None) -> TrialResult:
        command = Measure(config, settings, hang_timeout_s)
        longest = self.local.longest_measure(settings, hang_timeout_s)
        sent = time.monotonic()
        self.node.broadcast(command, then_s=longest + GAP_S, notice=self.notice)
        replies = self.node.gather(_measured(self.local, command), until=sent + longest, task="trial",
                                   notice=self.notice)
        for rank, reply in enumerate(replies[1:], start=1):
            self._counts[rank] = (reply.orphans, reply.shm_leaks)
        return node_result(config, [reply.result for reply in replies])

    def close(self) -> None:
        """This rank's trial process closed, then the others' ``serve`` ended. A lost node is not
        raised here: the run's outcome is on its way (a success meets the loss at its Outcome)."""
        try:
            self.local.close()
        finally:
            with contextlib.suppress(RankLost):
                self.node.stop()


def serve(node: Node) -> None:
    """Ranks > 0: rank 0's commands run on this rank's own TrialRunner until Stop."""
    runner: TrialRunner | None = None
    try:
        while True:
            command = node.broadcast()
            if isinstance(command, Stop):
                return
            if isinstance(command, Start):
                if runner is not None:
                    runner.close()
                runner = rank_runner(node, command.setup, command.max_memory, command.hang_timeout_s,
                                     _budget_left(command.budget_left_s))
                reply = _started(runner)
            else:
                reply = _measured(runner, command)
            node.gather(reply)
    finally:
        if runner is not None:
            runner.close()


def on_node(node: Node, work: Callable[[], Any] | None) -> Any:
    """Rank 0 runs ``work`` (the tune) while the others ``serve`` it; then every rank returns rank
    0's result, or raises its error."""
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
                node.broadcast(Outcome(error=_portable(exc)))
        raise
    node.stop()
    node.broadcast(Outcome(result=result))
    return result


def _portable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        failure = AutoloaderError(str(exc))
        failure.exit_code = getattr(exc, "exit_code", 1)
        return failure


