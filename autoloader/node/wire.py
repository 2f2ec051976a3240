"""Bounded waits between a node's ranks.

# NOTE [ Bounded waits between ranks ]
# Rank 0 sends each command to every rank and waits for each reply; the others wait for rank 0's
# next command (NOTE [ Tuning a node's ranks ] in node/__init__.py). A gloo collective waits for
# the group's timeout (the join's), so a rank that stopped answering would hold the others silent
# for half an hour, and one blocked in C++ lets no Ctrl-C through. So every message is a
# point-to-point send or receive of one pickled object (its length, then its bytes), in a helper
# thread, while the caller's thread watches:
# * the bound: what the peer was asked to do, from the run's limits clipped to the budget (a
#   start-up: the set-up's limit; a trial: the most one may take, a restart included; the next
#   command: the most rank 0 may spend before it, sent with each command), plus MARGIN_S. Past it,
#   the node is lost (RankLost, naming the rank);
# * the peer's process: every rank is on this machine, so its pid tells at once when it is gone,
#   or stopped (SIGSTOP, a debugger) for STOPPED_S;
# * the time: past probe/driver.py's FIRST_S, rank 0 reports the wait through ``notice``, naming
#   the rank and its task (the others wait for rank 0's own work, which its progress lines say);
# * Ctrl-C: the caller's thread sleeps in Python, so KeyboardInterrupt arrives at once.
# gloo closes the pair after a timed-out wait, so the helper waits once, for the whole bound. A
# wait that ends early leaves its helper blocked; the node is lost and nothing is sent or received
# on it again. A helper still blocked in gloo when the group is destroyed or the interpreter exits
# aborts the process, so ``settle`` gives such helpers SETTLE_S to end (a peer that exits ends
# them) before the group goes, at exit and where the group is destroyed.
"""

from __future__ import annotations

import atexit
import datetime
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..events import Event, WaitingForRank
from ..probe.driver import Notices

MARGIN_S = 30.0    # beyond the peer's own bound: pickling, scheduling on a loaded machine, the reply
STOPPED_S = 10.0   # a peer stopped this long is taken as lost
_POLL_S = 0.05
_WATCH_S = 0.5
_OWN_STOP_S = 2.0  # a gap this long between two polls means this process was stopped itself
SETTLE_S = 15.0    # how long helpers left blocked may take to end before the group is destroyed
_abandoned: list[threading.Thread] = []
# What a peer is waited for, by key (the progress line's words for them are events/lines.py's).
TASKS = {"start": "start its trial process", "trial": "finish the trial", "command": "take rank 0's command",
         "reply": "take this rank's reply", "next": "send its next command", "lookup": "send its lookup"}


class Lost(Exception):
    """A wait ended without its message: the peer is gone, stopped, failed, or past its bound."""


@dataclass(frozen=True)
class Peer:

    rank: int
    world: int
    pid: int | None = None
    started: float | None = None

    def state(self) -> str | None:
        """"gone", "stopped", or None (running, or not known)."""
        if self.pid is None:
            return None
        import psutil

        try:
            process = psutil.Process(self.pid)
            if self.started is not None and abs(process.create_time() - self.started) > 1.0:
                return "gone"   # the pid was taken by another process
            status = process.status()
        except psutil.NoSuchProcess:
            return "gone"
        except psutil.Error:
            return None
        if status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return "gone"
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            return "stopped"
        return None


def send(obj: Any, dst: int, group, timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    data = pickle.dumps(obj)
    size = torch.tensor([len(data)], dtype=torch.int64)
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    timeout = datetime.timedelta(seconds=timeout_s)
    dist.isend(size, dst, group=group).wait(timeout)
    dist.isend(payload, dst, group=group).wait(timeout)


def recv(src: int, group, timeout_s: float) -> Any:
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    size = torch.empty(1, dtype=torch.int64)
    dist.irecv(size, src, group=group).wait(timeout)
    payload = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.irecv(payload, src, group=group).wait(timeout)
    return pickle.loads(payload.numpy().tobytes())


def waited(exchange: Callable[[float], Any], peer: Peer, bound_s: float, task: str,
           notice: Callable[[Event], None] | None = None) -> Any:
    """``exchange(timeout_s)`` (a ``send`` or ``recv``) in a helper thread, watched here: its
    result, or Lost; ``task``: a key of TASKS, what the peer is waited for."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = exchange(bound_s + 5.0)   # gloo's own bound comes after ours
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    helper = threading.Thread(target=run, name="autoloader-rank-wait", daemon=True)
    helper.start()
    try:
        _watched(helper, peer, bound_s, task, notice)
    except BaseException:
        if helper.is_alive():
            if not _abandoned:
                atexit.register(settle)
            _abandoned.append(helper)
        raise
    if "error" in box:
        error = box["error"]
        raise Lost(f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}")
    return box.get("value")


def settle(timeout_s: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while _abandoned:
        _abandoned[0].join(max(0.0, deadline - time.monotonic()))
        if _abandoned[0].is_alive():
            return
        _abandoned.pop(0)


def _watched(helper: threading.Thread, peer: Peer, bound_s: float, task: str,
             notice: Callable[[Event], None] | None) -> None:
    """Until ``helper`` ends; Lost when the peer is gone, stopped past STOPPED_S, or ``bound_s`` passed."""
    t0 = last = time.monotonic()
    deadline, watch_at, stopped_since = t0 + bound_s, t0 + _WATCH_S, None
    notices = Notices()
    while True:
        helper.join(_POLL_S)
        if not helper.is_alive():
            break
        now = time.monotonic()
        if now - last > _OWN_STOP_S:   # this process was stopped (Ctrl-Z): that time is not the peer's
            deadline += now - last
            stopped_since = None
        last = now
        state = None
        if now >= watch_at:
            watch_at = now + _WATCH_S
            state = peer.state()
            if state == "gone":
                raise Lost(f"its process (pid {peer.pid}) is gone")
            stopped_since = (stopped_since or now) if state == "stopped" else None
            if stopped_since is not None and now - stopped_since > STOPPED_S:
                raise Lost(f"its process (pid {peer.pid}) has been stopped (SIGSTOP, or a debugger) for "
                           f"{now - stopped_since:.0f} s")
        if now > deadline:
            raise Lost(f"it did not {TASKS[task]} within {bound_s:.0f} s (the most that may take under the run's "
                       f"limits, which are clipped to the budget, and {MARGIN_S:.0f} s more)")
        if notice is not None and notices.due(now - t0):
            notice(WaitingForRank(peer.rank, peer.world, task, now - t0, bound_s,
                                  state="stopped" if stopped_since is not None else None))
