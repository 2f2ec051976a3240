"""Where results live under the results folder: each result's files, the study's name, the
globs that find them, and the lock that makes processes take turns (the folder itself, the
results home, is inputs/home.py's).
"""

from __future__ import annotations

import contextlib
import glob
import os
from typing import Callable


def result_path(out: str, fingerprint: str, key: str, suffix: str = ".json") -> str:
    """``<out>/<hardware-fingerprint>/<dataset-key><suffix>``: the result, its snippet, its study."""
    return os.path.join(out, fingerprint, key + suffix)


def result_files(out: str, key: str | None = None) -> list[str]:
    """Every stored result file under ``out`` (``<fingerprint>/<key>.json``), of ``key`` alone when
    given: the one place results are globbed for."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "*", glob.escape(key) + ".json" if key else "*.json")))


def study_files(out: str) -> list[str]:
    """Every default SQLite study under ``out`` (``<fingerprint>/<key>.db``)."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "*", "*.db")))


def default_storage(out: str, fingerprint: str, key: str) -> str:
    """The embedded default: one SQLite file beside the result."""
    return f"sqlite:///{os.path.abspath(result_path(out, fingerprint, key, '.db'))}"


def study_name(fingerprint: str, key: str) -> str:
    """One study per hardware and problem, so a storage shared by a fleet never mixes machines'
    measurements: ``<hardware-fingerprint>/<dataset-key>``."""
    return f"{fingerprint}/{key}"


def split_study_name(name: str) -> tuple[str, str] | None:
    """(fingerprint, key) of an autoloader study name, None for any other study."""
    fingerprint, sep, key = name.partition("/")
    return (fingerprint, key) if sep and fingerprint and key and "/" not in key else None


@contextlib.contextmanager
def held(path: str, busy: Callable[[int | None], None] | None = None):
    """An exclusive lock on ``path`` (made if missing) for the block: processes on this machine
    that tune the same problem into the same folder take turns, so the second finds the first's
    result instead of measuring beside it on the same cores. ``busy(pid)`` is called once when
    another process holds it (its pid, which the holder writes into the file, or None), before
    waiting for it. Released by the kernel however the holder ends. Where file locks are not
    offered (Windows) it does nothing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if busy is not None:
                busy(_holder(fd))
            fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
