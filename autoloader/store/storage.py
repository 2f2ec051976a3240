"""Opening an Optuna RDB storage: SQLite embedded by default, PostgreSQL for a fleet.

# NOTE [ One storage for a fleet ]
# ``--storage postgresql://user:pass@host/db`` lets many machines write to one Optuna storage:
# each machine's trials land in the study of its hardware fingerprint and problem
# (``paths.study_name``), so machines of one kind share a study and machines of another never
# mix with them. SQLAlchemy 2 reads a bare ``postgresql://`` as the psycopg2 driver; autoloader
# installs psycopg 3 (the ``postgres`` extra), so such a URL is read as ``postgresql+psycopg://``
# when psycopg2 is absent. Heartbeats are on for every storage (NOTE [ Runs in a study ] in
# runs.py). Two processes opening a new database at once race on creating its tables; the loser
# tries again.
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
    """``url`` with its password shown as ``***`` (SQLAlchemy's rendering, else by pattern)."""
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
    """Import Optuna's storage in a thread (NOTE [ The study's imports while the trial process starts ])."""
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
# The run opens its study once the trial process has said what the dataset is (its name is the
# problem's key); opening it imports Optuna, SQLAlchemy and Alembic, on the run's clock. The
# driver only waits while the trial process starts, so the run starts these imports in a thread
# (``warm_up``, opening an in-memory storage it throws away) before it starts the trial process.
# The thread writes nothing and warns of nothing: a failure is left for the real open to say.
# Nothing is measured while it runs: the profile starts only after the study is open.


def open_storage(url: str, heartbeat_s: int | None, grace_s: int | None, read_only: bool = False):
    """An ``optuna.storages.RDBStorage`` for ``url``, with heartbeats every ``heartbeat_s`` (None:
    off, for readers); ``read_only``: NOTE [ A reader opens a study read-only ] in durable.py.
    Raises what Optuna and SQLAlchemy raise after OPEN_ATTEMPTS tries."""
    import optuna

    url = driver_url(url)
    if read_only:   # SQLite's read-only URI; another database: no table made (its reader checked they are there)
        url = read_only_url(url)
    engine_kwargs = ({"connect_args": {"timeout": 30}} if url.startswith("sqlite") else
                     {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}} if url.startswith("postgresql")
                     else None)

    def make():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_s,
                                              grace_period=grace_s, skip_table_creation=read_only)
    return _tried(make, 0.5)


def _tried(make, pause_s: float):
    """``make()``, tried OPEN_ATTEMPTS times: two processes creating one database's tables (or one
    study) at once race, and the loser finds them made the next time."""
    for attempt in range(1, OPEN_ATTEMPTS):
        try:
            return make()
        except Exception:  # noqa: BLE001 - a creation race looks like any database error
            time.sleep(pause_s * attempt)
    return make()


def read_only_url(url: str) -> str:
    """A ``sqlite:///PATH`` URL as SQLite's read-only URI (``file:PATH?mode=ro``); another as it is."""
    from urllib.parse import quote

    match = re.match(r"(sqlite(?:\+\w+)?):///([^?]+)", url)
    if not match or match.group(2).startswith(":memory:"):
        return url
    return f"{match.group(1)}:///file:{quote(os.path.abspath(match.group(2)))}?mode=ro&uri=true"


def open_study(storage, name: str, sampler):
    """The study ``name`` in ``storage``, made if missing (by this process or a racing one)."""
    import optuna

    return _tried(lambda: optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                              load_if_exists=True, sampler=sampler), 0.2)


def name_metric(study) -> None:
    """Name the study's objective "samples/s" (what optuna-dashboard shows), where it has no name."""
    import optuna

    if study.metric_names is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["samples/s"])
