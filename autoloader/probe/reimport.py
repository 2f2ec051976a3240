"""A script's module-level ``tune()`` or ``best_loader()`` met again in a process 'spawn' started.

# NOTE [ A script re-imported by spawn ]
# 'spawn' (the trial process's start method, and the default on macOS and Windows) runs the
# caller's main script once more in the fresh interpreter, as ``__mp_main__``, so that what was
# pickled by reference can be found; whatever it does at module level runs again. A best_loader()
# outside ``if __name__ == "__main__":`` would then wait in the trial process on the key's lock its
# parent holds until the set-up's timeout blamed the dataset; a tune() would meet multiprocessing's
# refusal to start a process while bootstrapping. So both first ask whether this process still
# prepares its main module (multiprocessing marks it ``_inheriting`` until its target is about to
# run; a frame of spawn's main-module fix-up says the same) and raise a UsageError naming the
# script and the guard. The trial process dies of it before it has its pipe, so it also writes the
# message into a file the driver named in its environment (NOTE_VAR), read when it died starting.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading

from ..errors import usage

NOTE_VAR = "AUTOLOADER_START_NOTE"
TRIAL_PROCESS_NAME = "autoloader-runner"   # the trial process's multiprocessing name, set before its main runs
# spawn.py's functions that run the main module in a new process (forkserver's preload uses the last).
_FIXUPS = frozenset({"_fixup_main_from_path", "_fixup_main_from_name", "import_main_path"})
_environ_lock = threading.Lock()


def _preparing() -> bool:
    import multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):
        return True
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _FIXUPS and os.path.basename(os.path.dirname(code.co_filename)) == "multiprocessing":
            return True
        frame = frame.f_back
    return False


def _script() -> str:
    main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path:
        return path
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) or "the main script"


def refuse_reimport(entry: str) -> None:
    """Raise a UsageError when ``entry`` (``"tune()"``, ``"best_loader()"``) is called while this
    process re-runs its parent's main script (NOTE [ A script re-imported by spawn ])."""
    if not _preparing():
        return
    script = _script()
    name = os.path.basename(script)
    error = usage(f"{entry} must not run when a new process re-imports the main script: multiprocessing's "
                  f"'spawn' runs {name}'s module-level code again in every process it starts, autoloader's "
                  f"trial process among them, where {entry} would start another tune",
                  f"{entry} at module level of {script}",
                  f"put the call, and the code that uses its result, under `if __name__ == \"__main__\":` in "
                  f"{name} (or in a function called from there)")
    if _leave_note(str(error)):
        # autoloader's own trial process: the driver raises the error in the user's process, so
        # this one ends quietly (SystemExit passes a script's ``except Exception`` too).
        raise SystemExit(1)
    raise error


def _leave_note(message: str) -> bool:
    import multiprocessing as mp

    path = os.environ.get(NOTE_VAR)
    if not path or mp.current_process().name != TRIAL_PROCESS_NAME:
        return False
    try:
        with open(path, "w") as fh:
            fh.write(message)
    except OSError:
        return False   # the driver then reports the death with its generic hint
    return True


class StartNote:
    """The driver's side: a file named in the trial process's environment while it starts, read
    back when it died while starting."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="autoloader-start-", suffix=".txt")
        os.close(fd)

    @contextlib.contextmanager
    def passed(self):
        """NOTE_VAR names the file to a process started in the block ('spawn' copies the environment)."""
        with _environ_lock:
            before = os.environ.get(NOTE_VAR)
            os.environ[NOTE_VAR] = self.path
            try:
                yield
            finally:
                if before is None:
                    os.environ.pop(NOTE_VAR, None)
                else:
                    os.environ[NOTE_VAR] = before

    def read(self) -> str | None:
        try:
            with open(self.path) as fh:
                return fh.read().strip() or None
        except OSError:
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)

