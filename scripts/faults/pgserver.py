"""A throwaway PostgreSQL server for the fleet tests and the fault suite: initdb into a temporary
folder, started on a free loopback port (and a socket in that folder), trust authentication,
stopped and removed after. ``pause`` stops it as an outage would (its data kept) and ``resume``
starts it again on the same port: a fleet's database going away mid-run, and coming back.

PostgreSQL refuses to run as root; as root the server runs as the ``postgres`` user the Debian
package creates (``runuser``). ``start()`` returns None and a reason where no server can be had:
no PostgreSQL binaries, no psycopg driver, or root without a ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass


@dataclass
class Server:
    url: str
    folder: str
    bindir: str
    user: str | None
    port: int = 0

    def stop(self) -> None:
        self.pause(check=False)
        shutil.rmtree(self.folder, ignore_errors=True)

    def pause(self, check: bool = True) -> None:
        """Stop the server at once (as a crash or an outage would), its data kept."""
        _run(self, [os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.folder, "data"), "-m", "immediate",
                    "-w", "stop"], check=check)

    def resume(self) -> None:
        """Start the server again, on the same port, with its data."""
        _start(self)


def _start(server: Server) -> None:
    _run(server, [os.path.join(server.bindir, "pg_ctl"), "-D", os.path.join(server.folder, "data"), "-l",
                  os.path.join(server.folder, "log"), "-w", "-t", "30", "-o",
                  f"-p {server.port} -k {server.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                  "-c max_connections=100", "start"])


def _bindir() -> str | None:
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return os.path.dirname(candidates[0]) if candidates else None


def _run(server: Server, command: list[str], check: bool = True) -> subprocess.CompletedProcess:
    if server.user is not None:
        command = ["runuser", "-u", server.user, "--"] + command
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=check)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start() -> tuple[Server | None, str]:
    import importlib.util

    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is None:
        return None, "no PostgreSQL driver: pip install 'torch-autoloader[postgres]'"
    bindir = _bindir()
    if bindir is None:
        return None, "no PostgreSQL server binaries (initdb): apt-get install postgresql"
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no 'postgres' user to run the server as"
        user = "postgres"
    folder = tempfile.mkdtemp(prefix="autoloader-pg-")
    if user is not None:
        shutil.chown(folder, user=user)
    port = _free_port()
    server = Server(f"postgresql://postgres@127.0.0.1:{port}/postgres", folder, bindir, user, port)
    try:
        _run(server, [os.path.join(bindir, "initdb"), "-D", os.path.join(folder, "data"), "--auth=trust",
                      "-U", "postgres", "--no-sync", "-E", "UTF8"])
        _start(server)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"the PostgreSQL server did not start: {detail.strip()[-500:]}"
    return server, ""
