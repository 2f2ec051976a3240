"""Opening an Optuna RDB storage: SQLite embedded by default, PostgreSQL for a fleet.

# NOTE [ One storage for a fleet ]
# ``--storage postgresql://user:pass@host/db`` lets many machines write to one Optuna storage:
# each machine's trials land in the study of its hardware fingerprint and problem
# (``paths.study_name``), so machines of one kind share a study and machines of another never
# mix with them. SQLAlchemy 2 reads a bare ``postgresql://`` as the psycopg2 driver; autoloader
# installs psycopg 3 (the ``postgres`` extra), so such a URL is read as ``postgresql+psycopg://``
# when psycopg2 is absent. Heartbeats are on for every storage (NOTE [ Runs in a study ] in
# runs.py). Two processes opening a new database at once can race on creating its tables; the
# loser tries again.
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings

from ..errors import usage

OPEN_ATTEMPTS = 3


def driver_url(url: str) -> str:
    """``url`` with the PostgreSQL driver autoloader installs named, when it names none."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        if not _importable("psycopg2"):
            if not _importable("psycopg"):
                raise usage("a PostgreSQL storage needs the psycopg driver", masked(url),
                            "pip install 'torch-autoloader[postgres]' (psycopg 3), or name another driver "
                            "in the URL (postgresql+DRIVER://...)")
            return f"postgresql+psycopg://{rest}"
        return f"postgresql://{rest}"
    return url


def masked(url: str) -> str:
    """``url`` with its password shown as ``***``, for messages, reports and stored results:
    SQLAlchemy's own rendering, and for a string SQLAlchemy cannot parse, anything between
    ``://user:`` and ``@`` masked."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        return url if parsed.password is None else parsed.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask by pattern
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def warm_up() -> threading.Thread:
    """Import Optuna's storage and SQLAlchemy's SQLite dialect in a thread of their own, by
    opening an in-memory storage that is thrown away: NOTE [ The study's imports while the trial
    process starts ]. Returns the thread (a daemon: nothing waits for it)."""
    def imports() -> None:
        try:
            import optuna.storages

            optuna.storages.RDBStorage("sqlite:///:memory:").engine.dispose()
        except Exception:  # noqa: BLE001 - only time is at stake: the real open says what is wrong
            pass

    thread = threading.Thread(target=imports, name="autoloader-study-imports", daemon=True)
    thread.start()
    return thread


# NOTE [ The study's imports while the trial process starts ]
# The run opens its study once the trial process has said what the dataset is (the study's name
# is the problem's key). Opening it first imports Optuna, SQLAlchemy and Alembic and creates the
# tables: a second or more, all of it on the run's clock. The trial process's start takes far
# longer (importing torch and the user's modules, building the dataset and step), and the driver
# only waits for it meanwhile; so the run starts these imports in a thread
# (``warm_up``) before it starts the trial process, and the open that follows finds them done.
# The thread writes nothing (the storage is in memory and thrown away) and warns of nothing: a
# failure there is left for the real open to meet and say. Nothing is measured while it runs: the
# profile starts only after the study is open.


def open_storage(url: str, heartbeat_s: int | None, grace_s: int | None, read_only: bool = False):
    """An ``optuna.storages.RDBStorage`` for ``url``, with heartbeats every ``heartbeat_s`` (None:
    off, for readers). ``read_only``: a SQLite file opened by a reader (NOTE [ A reader opens a
    study read-only ] in durable.py): SQLite's ``mode=ro``, no table made; any other URL as
    without. Raises what Optuna and SQLAlchemy raise (the caller turns it into a usage error)
    after OPEN_ATTEMPTS tries."""
    import optuna

    url = driver_url(url)
    read_only = read_only and url.startswith("sqlite")   # another database: opened as before (its tables made)
    if read_only:
        url = read_only_url(url)
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 30}}
    elif url.startswith("postgresql"):
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}}
    else:
        engine_kwargs = None
    for attempt in range(1, OPEN_ATTEMPTS + 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_s,
                                                  grace_period=grace_s, skip_table_creation=read_only)
        except Exception:  # noqa: BLE001 - a table-creation race looks like any database error
            if attempt == OPEN_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def read_only_url(url: str) -> str:
    """A ``sqlite:///PATH`` URL as SQLite's read-only URI (``file:PATH?mode=ro``): nothing opened
    through it can write the file (no table, no journal rolled back). Any other URL as it is."""
    from urllib.parse import quote

    match = re.match(r"(sqlite(?:\+\w+)?):///([^?]+)", url)
    if not match or match.group(2).startswith(":memory:"):
        return url
    return f"{match.group(1)}:///file:{quote(os.path.abspath(match.group(2)))}?mode=ro&uri=true"


def open_study(storage, name: str, sampler):
    """The study ``name`` in ``storage``, made if missing (by this process or a racing one)."""
    import optuna

    for attempt in range(1, OPEN_ATTEMPTS + 1):
        try:
            return optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                       load_if_exists=True, sampler=sampler)
        except Exception:  # noqa: BLE001 - two creators at once: one loses, and loads it next time
            if attempt == OPEN_ATTEMPTS:
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")
