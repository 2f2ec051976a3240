"""Stored state under faults: a storage URL's password, a study that cannot be read, a full disk.

# NOTE [ Stored state a user can trust ]
# - A storage URL is shown and stored with its password masked (``mask_url``), and a driver's
#   error text that quotes the URL has the password taken out (``scrub``).
# - A SQLite study that cannot be read (not a database, truncated, pages that fail SQLite's
#   quick_check, records Optuna cannot decode) is moved aside, kept under a name that says so
#   (``X.db.corrupt-<time>``), and the run starts a fresh study: the user is told where the old
#   one is, and no later run trips over it again.
# - A write that fails (a full disk, a storage gone read-only) does not end the run: the study
#   stops taking writes, the search goes on in memory, and the run ends with its pick reported
#   and ``NotSaved`` naming what failed, where, and how much was free. What SQLite committed
#   before stays as it was (a failed transaction is rolled back), and so does a result file
#   that could not be replaced (``store.atomic_write``).
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import shutil
import sqlite3
import warnings

from .errors import AutoloaderWarning


class StudyMovedAside(AutoloaderWarning):
    """A study that could not be read was moved aside and a fresh one started."""


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (SQLAlchemy's own rendering); a string
    SQLAlchemy cannot parse has anything between ``://user:`` and ``@`` masked instead."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        if parsed.password is None:
            return url
        return parsed.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask by pattern
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def scrub(text: str, url: str) -> str:
    """``text`` with the URL shown masked and its password (raw or URL-decoded) removed."""
    text = text.replace(url, mask_url(url))
    try:
        from sqlalchemy.engine import make_url

        password = make_url(url).password
    except Exception:  # noqa: BLE001
        match = re.search(r"://[^:/@]*:([^@]*)@", url)
        password = match.group(1) if match else None
    for secret in {password, _quoted(password)} - {None, ""}:
        text = text.replace(secret, "***")
    return text


def _quoted(password: str | None) -> str | None:
    if password is None:
        return None
    from urllib.parse import quote

    return quote(password, safe="")


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite:///PATH`` URL names, or None (another database, or in memory)."""
    match = re.match(r"sqlite(\+\w+)?:///(.+)$", url)
    if not match or match.group(2).startswith(":memory:"):
        return None
    return os.path.abspath(match.group(2).split("?", 1)[0])


def free_bytes(path: str) -> int | None:
    """Free bytes on the file system that holds ``path`` (or its nearest existing folder)."""
    path = os.path.abspath(path)
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    try:
        return int(shutil.disk_usage(path).free)
    except OSError:
        return None


def _size(n: int | None) -> str:
    if n is None:
        return "an unknown amount"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def is_disk_full(exc: BaseException) -> bool:
    """Whether an exception (or one in its chain) says the disk or the database is full."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if "disk is full" in text or "no space left" in text or "disk quota" in text:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def write_failure(what: str, where: str, exc: BaseException, url: str | None = None) -> str:
    """What could not be written, where, why (the innermost error: Optuna's own wrapper says
    little) and, on a local disk, how much was free there."""
    root = _innermost(exc)
    reason = f"{type(root).__name__}: {str(root).splitlines()[0][:200] if str(root) else ''}".rstrip(": ")
    if url is not None:
        reason = scrub(reason, url)
    local = url is None or sqlite_file(url) is not None
    free = f"; {_size(free_bytes(where))} free there" if local else ""
    return f"could not write {what} to {where} ({reason}{free})"


def write_fix(errors: list[BaseException], url: str | None = None) -> str:
    """The fix for failed writes: room on the disk, a writable folder, or a storage that takes writes."""
    if url is not None and sqlite_file(url) is None:
        return "check that the storage takes writes, and run the same command again (it resumes)"
    if any(is_disk_full(e) for e in errors):
        return "free space there (or pass --out on a disk with room), and run the same command again (it resumes)"
    return "make the folder writable (or pass --out elsewhere), and run the same command again (it resumes)"


def _innermost(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen and (exc.__cause__ or exc.__context__) is not None:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


def is_corrupt(exc: BaseException) -> bool:
    """Whether opening or reading a study failed because the file's content is bad, not because
    of access (a lock, permissions, a full disk: those are not repaired by moving it aside).
    Optuna wraps what SQLite or its own decoding raised, so the whole chain is read."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    texts = [str(e).lower() for e in chain]
    if any(s in t for t in texts for s in ("locked", "readonly", "read-only", "permission", "unable to open")) \
            or any(is_disk_full(e) for e in chain):
        return False
    if any(isinstance(e, (ValueError, TypeError, KeyError, AttributeError)) for e in chain):
        return True  # a record Optuna or SQLite could not decode (JSON, text, a distribution)
    return any(s in t for t in texts for s in ("not a database", "malformed", "corrupt", "could not decode",
                                              "no such table", "no such column", "file is encrypted"))


def quick_check(path: str) -> str | None:
    """SQLite's own structural check of the file at ``path``: None when sound, else what it found."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = connection.execute("PRAGMA quick_check").fetchall()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    found = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(found)[:300] if found else None


def move_aside(path: str, why: str) -> str:
    """Rename a study that cannot be read (and its journal files) to ``PATH.corrupt-<time>``,
    warn with the new name, and return it."""
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    target = f"{path}.corrupt-{stamp}"
    n = 1
    while os.path.exists(target):
        n += 1
        target = f"{path}.corrupt-{stamp}-{n}"
    os.replace(path, target)
    for suffix in ("-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, target + suffix)
    warnings.warn(f"the study {path} could not be read ({why}); it was moved aside to {target}, kept as it "
                  "was, and this run starts a fresh study", StudyMovedAside, stacklevel=3)
    return target
