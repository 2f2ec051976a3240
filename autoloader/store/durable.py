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
#   and ``NotSaved`` naming what failed, where, and how much was free (study.save). What SQLite
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
from ..errors import StudyMovedAside, UsageError, clip, one_line, usage
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
    from urllib.parse import quote

    for secret in {password, password and quote(password, safe="")} - {None, ""}:
        text = text.replace(secret, "***")
    return text


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite:///PATH`` URL names, or None (another database, or in memory)."""
    match = re.match(r"sqlite(\+\w+)?:///(.+)$", url)
    if not match or match.group(2).startswith(":memory:"):
        return None
    return os.path.abspath(match.group(2).split("?", 1)[0])


def free_bytes(path: str) -> int | None:
    """Free bytes on the file system that holds ``path`` (or its nearest existing folder)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return int(shutil.disk_usage(path).free)
    except OSError:
        return None


def _chain(exc: BaseException | None):
    """``exc`` and the exceptions under it, outermost first (Optuna wraps what SQLite or the OS said)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _full(exc: BaseException) -> bool:
    text = str(exc).lower()
    return (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
            or any(s in text for s in ("disk is full", "no space left", "disk quota")))


def is_disk_full(exc: BaseException) -> bool:
    """Whether an exception (or one in its chain) says the disk or the database is full."""
    return any(_full(e) for e in _chain(exc))


def innermost(exc: BaseException) -> BaseException:
    """The deepest exception in ``exc``'s chain: what SQLite or the OS said, under Optuna's wrapper."""
    *_, root = _chain(exc)
    return root


def _why(exc: BaseException, url: str | None = None) -> str:
    """The innermost error, its type and first line (cut at a word), the URL's password masked."""
    root = innermost(exc)
    why = f"{type(root).__name__}: {clip(one_line((str(root).splitlines() or [''])[0]), 300)}".rstrip(": ")
    return why if url is None else scrub(why, url)


def write_failure(what: str, where: str, exc: BaseException, url: str | None = None) -> str:
    """What could not be written, where, why and, on a local disk, how much was free there."""
    reason = _why(exc, url)
    local = url is None or sqlite_file(url) is not None
    left = free_bytes(where) if local else None
    free = f"; {'an unknown amount' if left is None else size(left)} free there" if local else ""
    return f"could not write {what} to {where} ({reason}{free})"


def write_fix(errors: list[BaseException], url: str | None = None, study_under_out: bool = True,
              where: str = "", kept: bool = True) -> str:
    """The fix for failed writes: room on the disk, a writable folder, or a storage that takes writes;
    then the same command, which resumes (NOTE [ Runs in a study ] in runs.py). ``study_under_out``:
    the study is the default SQLite file under --out, so another --out would start afresh. ``kept``:
    whether the study took any of this run's trials; where it took none, nothing resumes, and the
    fix says so."""
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


def is_corrupt(exc: BaseException) -> bool:
    """Whether opening or reading a study failed because the file's content is bad, not because
    of access (a lock, permissions, a full disk: moving it aside repairs none of those)."""
    chain = list(_chain(exc))
    texts = [str(e).lower() for e in chain]
    if any(s in t for t in texts for s in ("locked", "readonly", "read-only", "permission", "unable to open")) \
            or any(_full(e) for e in chain):
        return False
    if any(isinstance(e, (ValueError, TypeError, KeyError, AttributeError)) for e in chain):
        return True  # a record Optuna or SQLite could not decode (JSON, text, a distribution)
    return any(s in t for t in texts for s in ("not a database", "malformed", "corrupt", "could not decode",
                                              "no such table", "no such column", "file is encrypted"))


def quick_check(path: str) -> str | None:
    """SQLite's own structural check of the file at ``path``: None when sound, else what it found.
    Opened for writing, so that a hot journal a killed writer left is rolled back first (a
    read-only connection cannot read past it). A lock or the file's permissions are no damage."""
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
    """Rename a study that cannot be read (and its journals) to ``PATH.corrupt-<time>``, and warn."""
    target = aside_name(path, datetime.datetime.now().strftime("%Y%m%dT%H%M%S"))
    os.replace(path, target)
    for suffix in ("-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, target + suffix)
    warnings.warn(f"the study {path} could not be read ({why}); it was moved aside to {target}, kept as it "
                  "was, and this run starts a fresh study", StudyMovedAside, stacklevel=3)
    return target


def aside_name(path: str, stamp: str) -> str:
    """``<path>.corrupt-<stamp>``, or with ``-2``, ``-3``... where that is taken."""
    target, n = f"{path}.corrupt-{stamp}", 1
    while os.path.lexists(target):
        n += 1
        target = f"{path}.corrupt-{stamp}-{n}"
    return target


def dispose(storage) -> None:
    """Close a storage's database connections (a pooled one keeps a SQLite file open)."""
    engine = getattr(storage, "engine", None)
    if engine is not None:
        engine.dispose()


# --- opening a study that can be trusted ---------------------------------------------------------

class Unreadable(Exception):
    """SQLite's quick_check found damage in a study file."""


@dataclass(frozen=True)
class Opened:
    """A study opened by ``open_sound``: where a damaged file was moved, and the error that left
    it in memory (None when it is stored)."""
    storage: object
    study: object
    moved_aside: str | None = None
    write_error: BaseException | None = None


def open_sound(url: str, name: str, sampler, given: bool, heartbeat_s: int, grace_s: int) -> Opened:
    """The study ``name`` in ``url`` (NOTE [ Stored state a user can trust ]); a study that cannot
    be created on a full disk is in memory; any other failure is a usage error (``open_error``)."""
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
            dispose(storage)    # its connections hold the file a retry may move aside
            if path is not None and attempt == 1 and os.path.isfile(path) \
                    and (isinstance(exc, Unreadable) or is_corrupt(exc)):
                why = f"SQLite's quick_check: {exc}" if isinstance(exc, Unreadable) else _why(exc, url)
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
    """An InputError saying why a database server refused the connection, with the fix for that
    cause; None for a SQLite URL, or a failure that is not one of these."""
    if url.startswith("sqlite"):
        return None
    from ..errors import InputError

    text = str(innermost(exc)).lower()
    for needles, cause, fix in _CONNECT_FAILURES:
        if any(n in text for n in needles):
            return InputError(str(usage(f"the storage must accept this run's connection; could not connect: {cause}",
                                        masked(url), f"{fix}; then run the same command again ({_why(exc, url)})")))
    return None


def open_error(url: str, given: bool, exc: BaseException) -> UsageError:
    """The usage error for a storage Optuna cannot open, password masked; the fix depends on
    whether the user named it (--storage) or it is the default SQLite file under --out."""
    unreachable = connect_failure(url, exc)
    if unreachable is not None:
        return unreachable
    why = _why(exc, url)
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
# connection cannot, and says so). Another database (PostgreSQL, MySQL) is asked for its table
# names first, and one without Optuna's is "not a study" alike: Optuna opening it would make
# its tables. A tune's own check of its --storage (``read_only=False``) opens it as the tune will.
OPTUNA_TABLES = ("studies", "trials", "version_info")


def not_a_study(path: str) -> str | None:
    """Why the SQLite file at ``path`` holds no Optuna study (read read-only), or None."""
    from urllib.parse import quote

    try:
        connection = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=30)
        try:
            tables = sorted(r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        finally:
            connection.close()
    except sqlite3.Error:
        return None
    return _not_optuna(tables)


def not_a_study_database(url: str) -> str | None:
    """Why the database at ``url`` (not SQLite) holds no Optuna study, or None (one that cannot be
    reached is left for Optuna's open to say). Reads its table names; makes nothing."""
    import sqlalchemy

    from .storage import driver_url

    url = driver_url(url)
    connect = {"connect_timeout": 10} if url.startswith("postgresql") else {}
    try:
        engine = sqlalchemy.create_engine(url, connect_args=connect)
        try:
            tables = sorted(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 - unreachable, refused, a driver missing: Optuna's open says which
        return None
    return _not_optuna(tables)


def _not_optuna(tables: list[str]) -> str | None:
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if not missing:
        return None
    held = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "") if tables else "no table"
    return f"not a study: it has no Optuna tables ({', '.join(missing)} missing; it holds {held})"


def open_reader(url: str, must_exist: bool, read_only: bool = True):
    """A storage opened to read what it holds (``show``, ``dashboard``, the fleet's picks): a
    usage error when Optuna cannot open or read it, or (``must_exist``) a SQLite file is not there.
    ``read_only``: NOTE [ A reader opens a study read-only ]; False: a tune's check of its storage."""
    import optuna

    path = sqlite_file(url)
    if (must_exist or read_only) and path is not None and not os.path.isfile(path):
        raise usage("--storage must name a storage that exists, to read what it holds", masked(url),
                    "pass the sqlite:///PATH of a study file that exists (autoloader tune writes them beside "
                    "its results), or a database URL of the fleet's storage")
    if read_only and (why := not_a_study(path) if path is not None else not_a_study_database(url)) is not None:
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
        dispose(storage)
        raise open_error(url, True, exc) from None


def storage_errors() -> tuple[type[BaseException], ...]:
    """What a failed write to a study raises."""
    import optuna
    import sqlalchemy.exc

    return (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError, sqlite3.Error, OSError)


# --- writing the result -------------------------------------------------------------------------

def _synced(folder: str, content: str | bytes) -> str:
    """A synced temporary copy of ``content`` in ``folder``, as readable as a file the user writes."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def atomic_write_all(files: dict[str, str | bytes]) -> None:
    """Write each ``path: content`` so that a reader never sees half of one, even if we are killed
    mid-write: every copy is written and synced before any is put in place (a link at a path is
    replaced, not written through), so a write that fails leaves every file as it was."""
    done: list[tuple[str, str]] = []
    try:
        for path, content in files.items():
            folder = os.path.dirname(path) or "."
            os.makedirs(folder, exist_ok=True)
            done.append((_synced(folder, content), path))
        for tmp, path in done:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in done:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise


def write_new(folder: str, stem: str, suffixes: tuple[str, ...], texts) -> dict[str, str]:
    """Write files ``<stem><suffix>`` under ``folder`` under a stem no other writer has (``stem``,
    else ``stem-2``...); ``texts(paths)`` gives each suffix's text once the names are known. The
    first suffix claims the stem by a hard link of its finished copy, which fails when the name is
    taken, so two writers never replace each other's file. The paths, by suffix."""
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
    tmp = _synced(os.path.dirname(path) or ".", text)
    try:
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
