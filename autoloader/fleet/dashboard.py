"""``autoloader dashboard``: optuna-dashboard over an autoloader storage.

Every trial has its measured figures as user attributes (``store.measured_figures``: rate,
interval, wait, memory), so optuna-dashboard's trial table shows them as they are. With
``--storage URL`` it serves that storage, live. With ``--out DIR`` (or the results home) it
serves the one SQLite study there live; when there are several (one per hardware and dataset),
a snapshot of them all copied into memory, since optuna-dashboard serves one storage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import AutoloaderError, usage
from ..store.paths import study_files
from ..store.storage import masked, open_storage

EXTRA = "pip install 'torch-autoloader[dashboard]'"


@dataclass(frozen=True)
class Served:
    """What the dashboard serves: the storage object and a line saying what it holds."""
    storage: object
    description: str


def require_dashboard():
    """optuna-dashboard's module, or an error naming the extra that installs it."""
    try:
        import optuna_dashboard
    except ImportError:
        raise AutoloaderError("autoloader dashboard needs optuna-dashboard, which is not installed. "
                              f"Fix: {EXTRA}") from None
    return optuna_dashboard


def storage_to_serve(out: str, storage: str | None) -> Served:
    if storage is not None:
        return Served(_open(storage), f"the storage {masked(storage)} (live)")
    files = study_files(out)
    if not files:
        raise usage("the dashboard needs a stored study", f"no <hardware>/<key>.db under {out}",
                    "tune first, or pass --out DIR or --storage URL where the studies are")
    if len(files) == 1:
        return Served(_open(f"sqlite:///{os.path.abspath(files[0])}"), f"{files[0]} (live)")
    return Served(_snapshot(files), f"a snapshot of the {len(files)} studies under {out} (restart to refresh)")


def _open(url: str):
    return open_storage(url, heartbeat_s=None, grace_s=None)


def _snapshot(files: list[str]):
    """Every study of every file, copied into one in-memory storage."""
    import optuna

    memory = optuna.storages.InMemoryStorage()
    for path in files:
        source = _open(f"sqlite:///{os.path.abspath(path)}")
        for name in optuna.study.get_all_study_names(storage=source):
            optuna.copy_study(from_study_name=name, from_storage=source, to_storage=memory, to_study_name=name)
    return memory


def serve(served: Served, host: str, port: int) -> None:
    """Serve until interrupted (blocks)."""
    require_dashboard().run_server(served.storage, host=host, port=port)
