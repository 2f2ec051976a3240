"""``autoloader dashboard``: optuna-dashboard over an autoloader storage.

Every trial's measured figures are its user attributes (``store.measured_figures``), so the trial
table shows them. ``--storage URL`` is served live; otherwise a snapshot of the SQLite studies
under ``--out``, copied into memory (optuna-dashboard serves one storage; there is one file per
hardware and dataset), each opened read-only (NOTE [ A reader opens a study read-only ] in
store/durable.py). A file that cannot be read is left out, and as it is, with a warning naming it.

# NOTE [ What the dashboard shows ]
# optuna-dashboard reads any Optuna study; autoloader's need a word to read right. The objective
# is named samples/s (store/study.py names it in every study autoloader makes). A snapshot is
# ours to write, so each of its studies gets a note (``annotate``): that its edits are thrown away
# on exit; each run by its id, with its state and stored pick; that "Best Trial" is the fastest
# burst, not the stored pick (the final chose it; the pick's own burst gets a note); that the
# hyperparameter importance reads the search, not the space. Optuna's log lines are silenced.
"""

from __future__ import annotations

import errno
import os
import socket
import warnings
from dataclasses import dataclass

from ..errors import AutoloaderError, StudySkipped, UsageError, clip, one_line, usage
from ..store.durable import open_reader
from ..store.paths import study_files
from ..events.lines import rate

EXTRA = "pip install 'torch-autoloader[dashboard]'"
HOST_FIX = "pass --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface)"


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


def check_address(host: str, port: int) -> None:
    """That the server can listen on ``host``:``port``, bound as bottle's wsgiref server binds
    (IPv6 when the host has a colon, the address reusable), or a usage error."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise usage("--port is a TCP port from 1 to 65535", port, "pass e.g. --port 8080")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4]
    except (socket.gaierror, UnicodeError) as exc:
        raise usage("--host must be a name or address this machine can listen on", f"{host}: {exc}", HOST_FIX) from None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise _bind_error(host, port, exc) from None


def _bind_error(host: str, port: int, exc: OSError) -> UsageError:
    if exc.errno == errno.EADDRINUSE:
        return usage(f"--port must be one no other program listens on at {host}", port,
                     f"pass another, e.g. --port {port + 1 if port < 65535 else 8080}, or stop what holds it "
                     f"(ss -ltnp 'sport = :{port}' names it)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return usage("--port below 1024 needs root privileges", port, "pass --port 1024 or more, e.g. --port 8080")
    if exc.errno == errno.EADDRNOTAVAIL:
        return usage("--host must be an address of this machine", host, HOST_FIX)
    return usage(f"the dashboard must be able to listen on {host}:{port}", f"{type(exc).__name__}: {exc}", HOST_FIX)


def storage_to_serve(out: str, storage: str | None) -> Served:
    if storage is not None:
        from ..store.storage import masked

        return Served(open_reader(storage, must_exist=True), f"the storage {masked(storage)} (live)")
    files = study_files(out)
    if not files:
        raise usage("the dashboard needs a stored study", f"no <hardware>/<key>.db under {out}",
                    "tune first, or pass --out DIR or --storage URL where the studies are")
    memory, served = _snapshot(files)
    if not served:
        raise usage("the dashboard needs a study it can read", f"none of the {len(files)} under {out}",
                    "the warnings above say what is wrong with each; tune again, or pass --storage URL")
    annotate(memory)
    return Served(memory, f"a snapshot of the {served} stud{'y' if served == 1 else 'ies'} under {out} (restart to "
                          "refresh; edits made in the page are not saved)")


def _why(exc: BaseException, width: int) -> str:
    """What the innermost error of ``exc`` says, on one line."""
    from ..store.durable import innermost

    root = innermost(exc)
    return f"{type(root).__name__}: {clip(one_line((str(root).splitlines() or [''])[0]), width)}"


def _snapshot(files: list[str]) -> tuple[object, int]:
    """Every study of every file that can be read, copied into one in-memory storage, and how
    many were copied."""
    import optuna

    from ..store.durable import not_a_study
    from ..store.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)   # "A new study created in memory", once a study
    memory, served = optuna.storages.InMemoryStorage(), 0
    for path in files:
        copied = []
        why = not_a_study(path)   # read-only: NOTE [ A reader opens a study read-only ] in store/durable.py
        if why is not None:
            warnings.warn(f"the dashboard leaves out {path}: {why}. It is left as it is; the other studies are "
                          "served", StudySkipped, stacklevel=2)
            continue
        try:
            source = open_storage(f"sqlite:///{os.path.abspath(path)}", heartbeat_s=None, grace_s=None,
                                  read_only=True)
            for name in optuna.study.get_all_study_names(storage=source):
                if name in copied or name in optuna.study.get_all_study_names(storage=memory):
                    warnings.warn(f"the dashboard serves the study {name} once: {path} holds it too",
                                  StudySkipped, stacklevel=2)
                    continue
                optuna.copy_study(from_study_name=name, from_storage=source, to_storage=memory, to_study_name=name)
                copied.append(name)
            source.engine.dispose()
            served += len(copied)
        except Exception as exc:  # noqa: BLE001 - a damaged file: SQLite, SQLAlchemy and Optuna raise many kinds
            for name in copied:   # none of a file that could not be read whole
                optuna.delete_study(study_name=name, storage=memory)
            warnings.warn(f"the dashboard leaves out the study {path}: it cannot be read ({_why(exc, 300)}). The "
                          "other studies are served", StudySkipped, stacklevel=2)
    return memory, served


def annotate(storage) -> None:
    """NOTE [ What the dashboard shows ]: the objective named and a note on every study of a
    snapshot ``storage``, and on each run's pick's burst."""
    import optuna
    from optuna_dashboard import save_note

    from ..store import runs

    for name in optuna.study.get_all_study_names(storage=storage):
        study = optuna.load_study(study_name=name, storage=storage)
        if study.metric_names is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names(["samples/s"])
        trials = study.get_trials(deepcopy=False)
        lines = [f"## {name}", "",
                 "A snapshot made when `autoloader dashboard` started: edits here (notes, creating or deleting "
                 "studies) are not saved. The objective is samples/s; each trial's `autoloader_run` attribute "
                 "names the run that measured it.", "", "| run | state | finished | stored pick | its burst |",
                 "|---|---|---|---|---|"]
        for mark in sorted(runs.runs_of(study).values(), key=lambda m: m.started_at):
            said, burst = "-", None
            if mark.summary is not None:
                pick = mark.summary.config
                settings = pick.loader_kwargs()
                said = (", ".join(f"{k}={v}" for k, v in settings.items())
                        + f" at {rate(mark.summary.samples_per_s, ' samples/s')}")
                # Its burst: the run's measured trial of the pick.
                burst = next((t for t in trials if t.state == optuna.trial.TrialState.COMPLETE
                              and t.user_attrs.get(runs.RUN_ATTR) == mark.run_id
                              and all(t.params.get(k, v) == v for k, v in settings.items())
                              and t.params.get("num_workers") == pick.num_workers), None)
            lines.append(f"| `{mark.run_id}` | {mark.state} | {mark.finished_at or '-'} | {said} | "
                         f"{'#' + str(burst.number) if burst else '-'} |")
            if burst is not None:
                save_note(optuna.Trial(study, burst._trial_id),
                          f"The stored pick of run `{mark.run_id}` ({said}): this is its search burst; the "
                          "interleaved final that chose it is not stored as trials.")
        lines += ["", "\"Best Trial\" is the fastest single burst, which need not be the stored pick: the pick is "
                  "the cheapest config that tied the best in an interleaved final. The hyperparameter importance "
                  "is computed over the configs the model chose to measure, not a random sample: it describes the "
                  "search, not the space."]
        save_note(study, "\n".join(lines))


def serve(served: Served, host: str, port: int, say=None) -> None:
    """Serve until interrupted; an address taken since ``check_address`` is the same usage error.
    ``say(line)`` says a storage stopped answering, and came back (NOTE [ A storage that stops
    answering ])."""
    import bottle

    app = require_dashboard().wsgi(served.storage)
    guarded = Guarded(app, served.storage, served.description, say or (lambda line: None))
    try:
        bottle.run(app=guarded, host=host, port=port)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EPERM, errno.EADDRNOTAVAIL):
            raise
        raise _bind_error(host, port, exc) from None


# NOTE [ A storage that stops answering ]
# ``--storage URL`` is served live, so its server may stop while the page is open; optuna-dashboard
# would then log a traceback and answer 500 for every request. ``Guarded`` answers each request:
# while the storage does not answer a ``SELECT 1`` (checked first, and again after a 500), with a
# 503 of one line; the outage is said once, as one line, and so is its end, after which requests
# are served as usual (the engine's pool checks a connection before use: no restart needed).
# optuna-dashboard's own error log is kept to that line while the storage is down.

class Guarded:
    """A WSGI app in front of optuna-dashboard's (NOTE [ A storage that stops answering ])."""

    def __init__(self, app, storage, description: str, say):
        import logging
        import threading

        self.app, self.storage, self.description, self.say = app, storage, description, say
        self.down: str | None = None
        self.lock = threading.Lock()
        # A logger's filter is not its children's: each of optuna-dashboard's own loggers gets it.
        quiet = lambda record: self.down is None and self.answers() is None  # noqa: E731
        for name in ["optuna_dashboard"] + [n for n in logging.Logger.manager.loggerDict
                                             if n.startswith("optuna_dashboard.")]:
            logging.getLogger(name).addFilter(quiet)

    def answers(self) -> str | None:
        """None when the storage answers a query; else why not, on one line."""
        engine = getattr(self.storage, "engine", None)
        if engine is None:
            return None   # a snapshot in memory: nothing to lose
        try:
            import sqlalchemy

            with engine.connect() as connection:
                connection.execute(sqlalchemy.text("SELECT 1"))
            return None
        except Exception as exc:  # noqa: BLE001 - what SQLAlchemy and the driver raise varies
            return _why(exc, 200)

    def _checked(self) -> str | None:
        """``answers()``, its change since the last request said (once)."""
        why = self.answers()
        with self.lock:
            if why is not None and self.down is None:
                self.say(f"autoloader: {self.description} stopped answering ({why}); each request is answered "
                         "503 until it is back")
            elif why is None and self.down is not None:
                self.say(f"autoloader: {self.description} answers again; serving it")
            self.down = why
        return why

    def __call__(self, environ, start_response):
        why = self._checked()
        if why is not None:
            return self._unavailable(start_response, why)
        said = {}

        def capture(status, headers, *_):   # exc_info unused: a failure shows in the status
            said.update(status=status, headers=headers)
            return lambda data: None   # the body is returned, not written (bottle's way)

        body = b"".join(self.app(environ, capture))
        if said.get("status", "").startswith("500"):
            why = self._checked()   # failed mid-request: an outage, or a fault of its own
            if why is not None:
                return self._unavailable(start_response, why)
        start_response(said.get("status", "500 Internal Server Error"), said.get("headers", []))
        return [body]

    def _unavailable(self, start_response, why: str):
        text = (f"{self.description} is not answering ({why}); this page answers again once it is back\n").encode()
        start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8"),
                                                   ("Content-Length", str(len(text))), ("Retry-After", "5")])
        return [text]
