"""Where results live: the per-user results home, each result's files, the study's name.

# NOTE [ Results home ]
# A stored result is only useful if the next call finds it, and ``best_loader`` is called from
# wherever the training script runs: a ``results/`` folder under the working directory was a
# new, empty store for every directory. So results live in one per-user cache folder unless
# ``out=``/``--out`` names another: ``$AUTOLOADER_HOME`` when set, else the platform's cache
# convention (``$XDG_CACHE_HOME/autoloader``, ``~/.cache/autoloader`` on Linux,
# ``~/Library/Caches/autoloader`` on macOS, ``%LOCALAPPDATA%\\autoloader`` on Windows). It is a
# cache: deleting it costs a re-tune, nothing else.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys

HOME_ENV = "AUTOLOADER_HOME"


def default_out() -> str:
    """The results home (NOTE [ Results home ])."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    elif os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autoloader")


def resolve_out(out: str | None) -> str:
    """``out`` as given, or the results home when it is None."""
    return default_out() if out is None else out


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
def held(path: str):
    """An exclusive lock on ``path`` (made if missing) for the block: processes on this machine
    that tune the same problem into the same folder take turns, so the second finds the first's
    result instead of measuring beside it on the same cores. Released by the kernel however the
    holder ends. Where file locks are not offered (Windows) it does nothing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
