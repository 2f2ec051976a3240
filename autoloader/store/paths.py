"""Where results live under the results folder (inputs/home.py's): each result's files, the
study's name, the globs that find them, and the lock that makes processes take turns."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import threading
from typing import Callable


def result_path(out: str, fingerprint: str, key: str, suffix: str = ".json") -> str:
    """``<out>/<hardware-fingerprint>/<dataset-key><suffix>``: the result, its snippet, its study."""
    return os.path.join(out, fingerprint, key + suffix)


def result_files(out: str, key: str | None = None) -> list[str]:
    """Every stored result file under ``out``, of ``key`` alone when given (the one glob for them)."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "*", glob.escape(key) + ".json" if key else "*.json")))


def study_files(out: str) -> list[str]:
    """Every default SQLite study under ``out`` (``<fingerprint>/<key>.db``)."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "*", "*.db")))


def default_storage(out: str, fingerprint: str, key: str) -> str:
    """The embedded default: one SQLite file beside the result."""
    return f"sqlite:///{os.path.abspath(result_path(out, fingerprint, key, '.db'))}"


def study_name(fingerprint: str, key: str) -> str:
    """One study per hardware and problem, so a fleet's storage never mixes machines' measurements."""
    return f"{fingerprint}/{key}"


def split_study_name(name: str) -> tuple[str, str] | None:
    """(fingerprint, key) of an autoloader study name, None for any other study."""
    fingerprint, sep, key = name.partition("/")
    return (fingerprint, key) if sep and fingerprint and key and "/" not in key else None


# The locks this process holds, by (thread, path): ``held`` is re-entrant within a thread, so
# best_loader and retune, which hold a problem's lock around the run they start, and the run,
# which takes it itself once it knows the key (tuning/run.py), do not wait on each other; nor does
# a tune in this thread wait on the ``Claim`` of a tune in the run it made.
_HELD: set[tuple[int, str]] = set()


def lock_path(out: str, fingerprint: str, key: str) -> str:
    return result_path(out, fingerprint, key, ".lock")


@contextlib.contextmanager
def held(path: str, on_wait: Callable[[int | None], None] | None = None):
    """An exclusive lock on ``path`` for the block: processes tuning one problem into one folder
    take turns, so the second finds the first's result instead of measuring beside it on the same
    cores. The operating system releases it however the holder ends (filelock). ``on_wait(pid)``
    is called once, with the holder's pid (or None), before waiting. On a full disk it does
    nothing: the run goes on (and says what it could not store)."""
    mine = (threading.get_ident(), os.path.abspath(path))
    if mine in _HELD:
        yield
        return
    lock = _lock(path)
    if lock is None:
        yield
        return
    if not _acquire(lock, 0):
        if on_wait is not None:
            on_wait(holder(path))
        _acquire(lock, -1)
    _hold(lock, mine)
    try:
        yield
    finally:
        _let_go(lock, mine)


class Claim:
    """A problem's lock taken without waiting and held beyond one block: a tune in the run holds
    it from the loader's making until its result is stored (the loop is already running: it
    cannot wait its turn). ``held``: this process has it (also where a full disk leaves no lock to
    take: the run goes on); else ``holder`` is the other process's pid (or None). The operating
    system releases it however the process ends; ``release()`` lets it go sooner."""

    def __init__(self, path: str):
        self.path = path
        self.holder: int | None = None
        self._mine = (threading.get_ident(), os.path.abspath(path))
        self._lock = None
        if self._mine in _HELD:   # this thread holds it already (a tune around this call)
            self.held = True
            return
        try:
            lock = _lock(path)
            self.held = lock is None or _acquire(lock, 0)
        except OSError:   # a folder it cannot write: nothing to take turns over (the store says so)
            lock, self.held = None, True
        if lock is None:
            return
        if self.held:
            self._lock = lock
            _hold(lock, self._mine)
        else:
            self.holder = holder(path)

    def release(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            _let_go(lock, self._mine)

    def __del__(self):   # a loader dropped before its tune stored: its lock goes with it
        with contextlib.suppress(Exception):
            self.release()


def _lock(path: str):
    """The FileLock for ``path``, its folder made; None on a full disk (no lock to take)."""
    from filelock import FileLock

    _refuse_link(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return None
    return FileLock(path, mode=0o666, thread_local=False)   # a Claim may be let go from another thread


def _acquire(lock, timeout: float) -> bool:
    """Whether ``lock`` was taken within ``timeout`` (-1: however long); a full disk counts as taken."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        return False
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return True   # never held: _hold and _let_go find it unlocked
    return True


def _hold(lock, mine: tuple[int, str]) -> None:
    _HELD.add(mine)
    with contextlib.suppress(OSError):   # beside the lock: filelock truncates the lock file itself
        with open(lock.lock_file + ".pid", "w") as fh:
            fh.write(f"{os.getpid()}\n")


def _let_go(lock, mine: tuple[int, str]) -> None:
    _HELD.discard(mine)
    if lock.is_locked:
        with contextlib.suppress(OSError):   # before the release: the next holder writes its own
            os.unlink(lock.lock_file + ".pid")
        lock.release()


def _refuse_link(path: str) -> None:
    """An InputError for a lock file that is a link or a folder: the lock would make a file elsewhere."""
    from ..errors import InputError, usage

    if os.path.islink(path) or os.path.isdir(path):
        what = f"a symbolic link to {os.readlink(path)}" if os.path.islink(path) else "a folder"
        raise InputError(str(usage("a result's lock file must be a plain file autoloader makes beside the result",
                                   f"{path}: {what}", f"remove it (rm {'-r ' if what == 'a folder' else ''}"
                                   f"'{path}'); the next run makes the lock file itself")))


def holder(path: str) -> int | None:
    """The pid of the process holding the lock on ``path``, where it wrote one."""
    try:
        with open(path + ".pid") as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
