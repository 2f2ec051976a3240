"""Stored state under faults: a storage URL's password, a study that cannot be read, a full disk.

# NOTE [ Stored state a user can trust ]
# - A storage URL is shown and stored with its password masked (``storage.masked``), and a
#   driver's error text that quotes the URL has the password taken out (``scrub``).
# - A SQLite study that cannot be read (not a database, truncated, pages that fail SQLite's
#   quick_check, records Optuna cannot decode) is moved aside, kept under a name that says so
#   (``X.db.corrupt-<time>``), and the run starts a fresh study: the user is told where the old
#   one is, and no later run trips over it again. A study a killed writer left mid-transaction
#   (a hot journal) is not damaged: SQLite rolls the journal back when it is next opened for
#   writing, and the run resumes it (``quick_check``).
# - A write that fails (a full disk, a storage gone read-only) does not end the run: the study
#   stops taking writes, the search goes on in memory, and the run ends with its pick reported
#   and ``NotSaved`` naming what failed, where, and how much was free (``save``, in saving.py). What SQLite
#   committed before stays as it was (a failed transaction is rolled back), and so does a result
#   file that could not be replaced (``atomic_write_all``).
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import shutil
import sqlite3
import tempfile
import warnings
from dataclasses import dataclass

from ..events.lines import size
from ..errors import AutoloaderWarning, NotSaved, StudyMovedAside, UsageError, clip, one_line, usage
from ..inputs.home import elsewhere
from .storage import masked, open_storage, open_study


def scrub(text: str, url: str) -> str:
    """``text`` with the URL shown masked and its password (raw or URL-decoded) removed."""
    text = text.replace(url, masked(url))
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
    root = innermost(exc)
    reason = f"{type(root).__name__}: {_first_line(root)}".rstrip(": ")
    if url is not None:
        reason = scrub(reason, url)
    local = url is None or sqlite_file(url) is not None
    left = free_bytes(where) if local else None
    free = f"; {'an unknown amount' if left is None else size(left)} free there" if local else ""
    return f"could not write {what} to {where} ({reason}{free})"


def write_fix(errors: list[BaseException], url: str | None = None, study_under_out: bool = True,
              where: str = "", kept: bool = True) -> str:
    """The fix for failed writes: room on the disk, a writable folder, or a storage that takes writes.
    Each says the same command resumes, which it does: a run that could not store its result is
    left as interrupted (``NotSaved.resumable``), and the next run of the problem on this host
    resumes it from its study (NOTE [ Runs in a study ] in runs.py). ``study_under_out``: the study
    is the default SQLite file under --out, so another --out would start afresh. ``where``, the
    folder, names the variable that chose it (inputs/home.py). ``kept``: whether the study took any
    of this run's trials; where it took none, there is nothing to resume and the fix says so."""
    if url is not None and sqlite_file(url) is None:
        return "check that the storage takes writes, and run the same command again (it resumes)"
    room = "free space there" if any(is_disk_full(e) for e in errors) else "make the folder writable"
    if not kept:
        return (f"{room}, and run the same command again (it measures afresh: the study took none of this run's "
                "trials)")
    if not study_under_out:
        return (f"{room} (or {elsewhere(where, 'elsewhere')}: the study is in the storage, not under --out), and "
                "run the same command again (it resumes)")
    return (f"{room}, and run the same command again (it resumes; the study is kept under --out, so with another "
            "--out it would start afresh)")


def _first_line(exc: BaseException) -> str:
    """An error's first line, on one line (a decoding error quotes the bytes it met) and cut at a
    word when it runs on."""
    return clip(one_line((str(exc).splitlines() or [""])[0]), 300)


def innermost(exc: BaseException) -> BaseException:
    """The deepest exception in ``exc``'s chain: what SQLite or the OS said, under Optuna's wrapper."""
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
    """SQLite's own structural check of the file at ``path``: None when sound, else what it found.
    Opened for writing, as SQLite recovers: a writer killed mid-transaction (kill -9) leaves a hot
    journal, which the next connection that may write rolls back first, and which a read-only one
    cannot read past ("attempt to write a readonly database"). A lock or the file's permissions
    are no damage: None, and opening the study then says what is wrong."""
    try:
        connection = sqlite3.connect(path, timeout=30)
        try:
            rows = connection.execute("PRAGMA quick_check").fetchall()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        return str(exc) if is_corrupt(exc) else None
    found = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return clip(one_line("; ".join(found)), 300) if found else None


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


# --- opening a study that can be trusted ---------------------------------------------------------

class Unreadable(Exception):
    """SQLite's quick_check found damage in a study file."""


@dataclass(frozen=True)
class Opened:
    """A study opened by ``open_sound``: its storage, the study, where a damaged file was moved
    (None when none was), and the error that left it in memory (None when it is stored)."""
    storage: object
    study: object
    moved_aside: str | None = None
    write_error: BaseException | None = None


def open_sound(url: str, name: str, sampler, given: bool, heartbeat_s: int, grace_s: int) -> Opened:
    """The study ``name`` in ``url`` (NOTE [ Stored state a user can trust ]): a SQLite file that
    cannot be read is moved aside and a fresh study started; one that cannot be created on a full
    disk leaves an in-memory study; any other failure is a usage error (``open_error``)."""
    import optuna

    path = sqlite_file(url)
    moved = None
    for attempt in (1, 2):
        storage = None
        try:
            if path is not None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                damage = quick_check(path) if os.path.isfile(path) and os.path.getsize(path) else None
                if damage is not None:
                    raise Unreadable(damage)
            storage = open_storage(url, heartbeat_s, grace_s)
            study = open_study(storage, name, sampler)
            # Every record decodes, the study's own (its runs' marks) too, or it cannot be read.
            study.get_trials(deepcopy=False)
            study.user_attrs
            return Opened(storage, study, moved)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy/Optuna raise many kinds
            engine = getattr(storage, "engine", None)
            if engine is not None:
                engine.dispose()    # its connections hold the file a retry may move aside
            if path is not None and attempt == 1 and os.path.isfile(path) \
                    and (isinstance(exc, Unreadable) or is_corrupt(exc)):
                root = innermost(exc)
                why = (f"SQLite's quick_check: {exc}" if isinstance(exc, Unreadable) else
                       scrub(f"{type(root).__name__}: {_first_line(root)}", url))
                moved = move_aside(path, why)
                continue
            if is_disk_full(exc):
                study = optuna.create_study(study_name=name, direction="maximize", sampler=sampler)
                return Opened(study._storage, study, moved, exc)
            raise open_error(url, given, exc) from None
    raise AssertionError("unreachable: the second attempt returns or raises")


# What a database server's refusal says (psycopg's and PostgreSQL's words), the cause it is
# named by, and its fix: a storage that cannot be reached is no bad URL, and the URL's fix (a
# SQLite path) would not help.
_CONNECT_FAILURES = (
    (("password authentication failed", "no password supplied", "authentication failed"), "password rejected",
     "check the user name and password in the URL (a password holding @ : / or % percent-encoded), or the "
     "server's pg_hba.conf for this host"),
    (("connection refused", "is the server running"), "connection refused",
     "start the database server, or check the host and port in the URL (PostgreSQL listens on 5432 by default)"),
    (("could not translate host name", "name or service not known", "nodename nor servname", "name resolution"),
     "host not found", "check the host name in the URL"),
    (("timeout expired", "timed out"), "no answer",
     "check that the server is up and that this machine may reach it (a firewall, a VPN)"),
    (("does not exist",), "no such database or role",
     "create it (createdb NAME), or name one that exists in the URL"),
)


def connect_failure(url: str, exc: BaseException) -> UsageError | None:
    """An InputError saying why a database server could not be connected to (a password rejected,
    a connection refused...) with the fix for that cause, password masked; None for a SQLite URL,
    or a failure that is not one of these."""
    if sqlite_file(url) is not None or url.startswith("sqlite"):
        return None
    from ..errors import InputError

    root = innermost(exc)
    text = str(root).lower()
    for needles, cause, fix in _CONNECT_FAILURES:
        if any(n in text for n in needles):
            why = scrub(f"{type(root).__name__}: {_first_line(root)}", url)
            return InputError(str(usage(f"the storage must accept this run's connection; could not connect: {cause}",
                                        masked(url), f"{fix}; then run the same command again ({why})")))
    return None


def open_error(url: str, given: bool, exc: BaseException) -> UsageError:
    """The usage error for a storage Optuna cannot open, password masked; the fix depends on
    whether the user named it (--storage) or it is the default SQLite file under --out. A server
    that could not be connected to is an InputError naming the cause (``connect_failure``)."""
    unreachable = connect_failure(url, exc)
    if unreachable is not None:
        return unreachable
    root = innermost(exc)
    why = scrub(f"{type(root).__name__}: {_first_line(root)}", url)
    if given:
        return usage("the study's storage must be a database URL Optuna can open (--storage)", masked(url),
                     f"use e.g. sqlite:///results/study.db (the directory must be writable), or leave --storage "
                     f"out for the default SQLite file under --out ({why})")
    path = sqlite_file(url) or masked(url)
    return usage("the study's default SQLite file under --out must be one this run can open and write", path,
                 f"make that folder writable, or {elsewhere(path)} (or pass --storage) ({why})")


# NOTE [ A reader opens a study read-only ]
# ``show --storage``, ``report --storage``, ``dashboard`` and the fleet's picks read a SQLite
# study through SQLite's read-only URI (``mode=ro``), with no table made: a command that reads
# never writes, and the file it is pointed at may be an application's database. A file without
# Optuna's tables is "not a study" and is left as it is, byte for byte; so is a study a killed
# writer left mid-transaction (its hot journal is for the next tune to roll back: a read-only
# connection cannot, and says so). A tune's own check of its --storage (``read_only=False``)
# opens it as the tune will.
OPTUNA_TABLES = ("studies", "trials", "version_info")


def not_a_study(path: str) -> str | None:
    """Why the SQLite file at ``path`` holds no Optuna study (its tables, read read-only), or
    None when it has Optuna's tables (or is no SQLite database: opening it says what it is)."""
    from urllib.parse import quote

    try:
        connection = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=30)
        try:
            tables = sorted(r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        finally:
            connection.close()
    except sqlite3.Error:
        return None
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if not missing:
        return None
    held = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "") if tables else "no table"
    return f"not a study: it has no Optuna tables ({', '.join(missing)} missing; it holds {held})"


def open_reader(url: str, must_exist: bool, read_only: bool = True):
    """A storage opened to read what it holds (``show``, ``dashboard``, the fleet's picks): a
    usage error when Optuna cannot open or read it, and with ``must_exist`` when it is a SQLite
    file that is not there (opening it would make an empty one, which holds nothing to show).
    ``read_only``: a SQLite file is opened read-only, and one without Optuna's tables is refused
    as not a study, untouched (NOTE [ A reader opens a study read-only ]); False: a tune's check
    of the storage it is about to write."""
    import optuna

    path = sqlite_file(url)
    if (must_exist or read_only) and path is not None and not os.path.isfile(path):
        raise usage("--storage must name a storage that exists, to read what it holds", masked(url),
                    "pass the sqlite:///PATH of a study file that exists (autoloader tune writes them beside "
                    "its results), or a database URL of the fleet's storage")
    if read_only and path is not None and (why := not_a_study(path)) is not None:
        raise usage("--storage must name an Optuna study, to read what it holds", f"{masked(url)}: {why}; it is "
                    "left as it is", "pass the sqlite:///PATH of a study file autoloader tune wrote (a <key>.db "
                    "beside its result), or a database URL of the fleet's storage")
    storage = None
    try:
        storage = open_storage(url, heartbeat_s=None, grace_s=None, read_only=read_only)
        optuna.study.get_all_study_names(storage=storage)
        return storage
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy/Optuna raise many kinds
        if getattr(storage, "engine", None) is not None:
            storage.engine.dispose()
        raise open_error(url, True, exc) from None


def storage_errors() -> tuple[type[BaseException], ...]:
    """What a failed write to a study raises: a full disk, a storage gone, a database error."""
    import optuna
    import sqlalchemy.exc

    return (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError, sqlite3.Error, OSError)


# --- writing the result -------------------------------------------------------------------------

def atomic_write_all(files: dict[str, str]) -> None:
    """Write each ``path: text`` so that a reader never sees half of one, even if we are killed
    mid-write: every temporary copy is written and synced before any is put in place, so a write
    that fails (a full disk) leaves every file as it was."""
    done: list[tuple[str, str]] = []
    try:
        for path, text in files.items():
            folder = os.path.dirname(path) or "."
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            done.append((tmp, path))
            # mkstemp makes the file 0600; a result file is as readable as any other the user writes.
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, path in done:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in done:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise


def write_new(folder: str, stem: str, suffixes: tuple[str, ...], texts) -> dict[str, str]:
    """Write files ``<stem><suffix>`` under ``folder`` under a stem no other writer has: ``stem``,
    else ``stem-2``, ``stem-3``... ``texts(paths)`` gives each suffix's text once the names are
    known (a text may say where it is); the first suffix claims the stem by a hard link of its
    finished copy, which fails when the name is taken, so two writers at once never replace each
    other's file and a reader never sees half of one. The paths, by suffix."""
    os.makedirs(folder, exist_ok=True)
    for n in range(1, 10_000):
        name = stem if n == 1 else f"{stem}-{n}"
        paths = {suffix: os.path.join(folder, name + suffix) for suffix in suffixes}
        if any(os.path.lexists(p) for p in paths.values()):
            continue
        content = texts(paths)
        first, *rest = paths
        if _claim(paths[first], content[first]):
            atomic_write_all({paths[suffix]: content[suffix] for suffix in rest})
            return paths
    raise FileExistsError(errno.EEXIST, "no free name", os.path.join(folder, stem))


def _claim(path: str, text: str) -> bool:
    """Put ``text`` at ``path`` unless something is there already; whether it was put."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            try:   # a file system without hard links: claim the name empty, then fill it
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            except FileExistsError:
                return False
            os.replace(tmp, path)
        return True
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
