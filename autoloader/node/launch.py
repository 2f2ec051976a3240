"""``autoloader tune --nproc-per-node N``: this process as rank 0, the others started here as
``python -m autoloader.node`` (NOTE [ Tuning a node's ranks ] in node/__init__.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys

from ..errors import AutoloaderError
from . import group
from .runner import on_node


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    from ..probe.workers import die_with_parent as die

    die()


@contextlib.contextmanager
def launched(nproc: int):
    """This process as rank 0 of ``nproc`` ranks on this machine, the others started here as
    ``python -m autoloader.node`` (each serves, then exits). The ranks die with this process
    (PR_SET_PDEATHSIG), are waited for on the way out and killed if they linger; a rank that
    exited with an error is an AutoloaderError naming it, unless one is already on its way."""
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
                                timeout=group.JOIN_TIMEOUT)
        yield
        failed = False
    finally:
        group.forget()
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
        node = group.joined()
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

