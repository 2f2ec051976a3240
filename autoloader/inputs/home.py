"""The results home: where results are written and looked up unless ``out=``/``--out`` names a folder.

# NOTE [ Results home ]
# A stored result is only useful if the next call finds it, from whichever directory the training
# script runs in: results live in one per-user cache folder unless ``out=``/``--out`` names
# another: ``$AUTOLOADER_HOME`` when set, else the platform's per-user cache folder as platformdirs
# knows it (``~/.cache/autoloader`` on Linux). It is a cache: deleting it costs a re-tune, nothing
# else. A message about a folder that came from one of those variables names the variable
# (``elsewhere``): "pass --out" would not say why that folder was used.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile

from ..errors import usage

HOME_ENV = "AUTOLOADER_HOME"
XDG_ENV = "XDG_CACHE_HOME"


def default_out() -> str:
    """The results home (NOTE [ Results home ])."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    import platformdirs

    return platformdirs.user_cache_dir("autoloader", appauthor=False)


def resolve_out(out: str | None) -> str:
    """``out`` as given, or the results home when it is None; an empty string is refused."""
    if out is None:
        return default_out()
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise usage("--out (out=) names the folder results are written to", out,
                    "pass --out DIR, or leave it out for the results home ($AUTOLOADER_HOME, else ~/.cache/autoloader)")
    return os.fspath(out)


def chosen_by(path: str) -> str | None:
    """The environment variable that chose the results home, when ``path`` lies in it and one did."""
    home, path = default_out(), os.path.abspath(path)
    if path != home and not path.startswith(home + os.sep):
        return None
    if os.environ.get(HOME_ENV):
        return HOME_ENV
    if os.name != "nt" and sys.platform != "darwin" and os.environ.get(XDG_ENV):
        return XDG_ENV
    return None


def elsewhere(path: str, where: str = "somewhere that is") -> str:
    """The fix's words for writing results to another folder than the one holding ``path``:
    "pass --out WHERE", and first the variable to change when one chose that folder."""
    variable = chosen_by(path)
    if variable is None:
        return f"pass --out {where}"
    if variable == XDG_ENV:   # the cache of every program: point autoloader's own variable instead
        return (f"set ${HOME_ENV} {where} (the results folder {default_out()} came from ${XDG_ENV}), "
                f"or pass --out {where}")
    return f"point ${HOME_ENV} (which chose {default_out()}) {where}, or pass --out {where}"


def writable(folder: str, what: str = "the results folder", flag: str = "--out") -> str:
    """``folder``, made if missing, once a file could be made and removed in it; else a UsageError
    whose fix names ``flag``. A full disk is let through: the run ends saying what it could not
    store (NOTE [ Stored state a user can trust ])."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".autoloader-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return folder
        why, fix = _why_not(folder, exc)
        other = elsewhere(folder) if flag == "--out" else f"pass {flag} DIR somewhere that is"
        raise usage(f"{what} must be a folder this run can make and write", f"{folder}: {why}",
                    f"{fix}, or {other}") from None
    return folder


def _why_not(folder: str, exc: OSError) -> tuple[str, str]:
    """Why ``folder`` cannot be written, and what would fix that folder."""
    if os.path.islink(folder) and not os.path.exists(folder):
        return f"it is a symbolic link to {os.readlink(folder)}, which does not exist", "point the link at a folder"
    if os.path.exists(folder) and not os.path.isdir(folder):
        return "it is a file, not a folder", "move the file away"
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        return f"a part of the path is not a folder ({exc.strerror})", "fix the path"
    if exc.errno == errno.EROFS:
        return "it is on a read-only file system", "mount it writable"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "this user may not write there", "make it writable"
    return f"{type(exc).__name__}: {exc.strerror or exc}", "fix the folder"
