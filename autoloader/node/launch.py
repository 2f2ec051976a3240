"""``autoloader tune --nproc-per-node N``: this process as rank 0, the others started here as
``python -m autoloader.node`` (NOTE [ Tuning a node's ranks ] in node/__init__.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

from ..errors import AutoloaderError
from . import group
from .group import RankLost
from .runner import on_node
from .wire import settle

INTERRUPTED = 128 + signal.SIGINT   # the shell's exit code for Ctrl-C, as the CLI's


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def launched(nproc: int):
    """This process as rank 0 of ``nproc`` ranks, the others started here (each serves, then exits).
    They die with this process, are waited for on the way out and killed if they linger; one that
    exited with an error is an AutoloaderError naming it, unless one is already on its way."""
    import torch.distributed as dist

    from ..probe.workers import die_with_parent

    port = _free_port()
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc)}
    procs: list[subprocess.Popen] = []
    failed = True
    try:
        for rank in range(1, nproc):
            procs.append(subprocess.Popen([sys.executable, "-m", "autoloader.node"],
                                          env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                          stdin=subprocess.DEVNULL, preexec_fn=die_with_parent))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=nproc,
                                timeout=group.JOIN_TIMEOUT)
        yield
        failed = False
    finally:
        group.forget()
        # The ranks first: a wait left blocked on one ends when it exits (NOTE [ Bounded waits
        # between ranks ] in wire.py), and only then may the group go.
        codes = [_reaped(proc, 30.0 if not failed else 15.0) for proc in procs]
        settle()
        if dist.is_initialized():
            dist.destroy_process_group()
        if failed and INTERRUPTED in codes:
            # Ctrl-C reached every rank; the one that went first broke this rank's wait: it is
            # an interruption here too, whatever this rank was raising.
            raise KeyboardInterrupt
        bad = [(rank, code) for rank, code in enumerate(codes, start=1) if code != 0]
        if bad and not failed:
            raise AutoloaderError("; ".join(f"rank {rank} exited with code {code}" for rank, code in bad)
                                  + " (its error is on stderr above)")


def _reaped(proc: subprocess.Popen, timeout_s: float) -> int:
    """The rank's exit code; killed past ``timeout_s``, or at once when stopped (it would never exit)."""
    from .wire import Peer

    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        if Peer(0, 1, proc.pid).state() == "stopped":
            break
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    return proc.wait()


def rank_main() -> int:
    """A rank ``launched`` started: join, serve rank 0, exit as rank 0 does (0, or 130 when
    interrupted); a lost rank 0 is said on stderr (rank 0 prints its own errors)."""
    import torch.distributed as dist

    node = None
    try:
        try:
            node = group.joined()
            if node is None:
                return 2   # not a rank of a launch: WORLD_SIZE is 1
            on_node(node, None)
            return 0
        except RankLost as exc:
            print(f"autoloader: {exc}", file=sys.stderr, flush=True)
            return exc.exit_code
        except AutoloaderError as exc:
            return getattr(exc, "exit_code", 1)
        finally:
            settle()
            if dist.is_initialized():
                dist.destroy_process_group()
    except KeyboardInterrupt:
        where = f"rank {node.rank} of {node.world}" if node is not None else "a rank"
        print(f"autoloader: {where} interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
