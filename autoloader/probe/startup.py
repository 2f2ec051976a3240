"""The trial process's start-up, as the driver waits for it: Ready or SetupFailed within the
set-up's limit, the user told meanwhile what the wait is for, and a clear SetupError when the
process died first or took too long (NOTE [ Trial protocol ] in protocol.py, step 1)."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

from ..events import Event, WaitingForTrialStart
from .failures import exit_text
from .protocol import SetupError
from .reimport import StartNote
from .waiting import Notices

# Start-up clipped to the budget's end (NOTE [ The budget is a wall bound ] in search/budget.py)
# still gets this long, inside the time the run keeps back for closing: a restart late in a run
# is refused at once rather than waited for past the bound.
MIN_CLIPPED_SETUP_S = 1.0


def ready(proc, conn, limit: float, setup_timeout_s: float, note: StartNote,
          notice: Callable[[Event], None] | None, kill: Callable[[], None]):
    """The trial process's answer to its set-up (Ready or SetupFailed), or SetupError when it
    died first (with its own message when it left one: NOTE [ A script re-imported by spawn ] in
    reimport.py) or had not answered within ``limit`` seconds (``setup_timeout_s`` clipped to the
    budget when less). ``kill`` kills its tree."""
    t0 = time.monotonic()
    # Said at once, then as the wait goes on: the command's first line, so a start-up of seconds
    # (a fresh interpreter importing torch and the dataset) is not a silent one.
    notices = Notices(next_s=0.0)
    while not conn.poll(0.2):
        waited = time.monotonic() - t0
        if not proc.is_alive():
            raise _died(proc, note, kill, "while building the dataset or step")
        if waited > limit:
            kill()
            raise SetupError(_too_slow(limit, setup_timeout_s), usage=False, budget=limit < setup_timeout_s)
        if notice is not None and notices.due(waited):
            notice(WaitingForTrialStart(waited, limit, clipped=limit < setup_timeout_s))
    try:
        return conn.recv()
    except (EOFError, OSError):
        raise _died(proc, note, kill, "while starting") from None


def _died(proc, note: StartNote, kill: Callable[[], None], when: str) -> SetupError:
    proc.join(timeout=2.0)
    code = proc.exitcode
    kill()
    own = note.read()
    if own is not None:
        return SetupError(own, usage=True)
    return SetupError(f"the trial process died {when} ({exit_text(code)})" + (_main_script_hint() if code == 1 else ""),
                      usage=False)


def _too_slow(limit: float, setup_timeout_s: float) -> str:
    lazily = ("do the slow part lazily (open or decode files in __getitem__, not in __init__), or build the "
              "dataset once, save it, and have --dataset load the saved copy")
    if limit < setup_timeout_s:
        return (f"starting the trial process and building the dataset and step must end within the budget "
                f"(they had {limit:.0f} s left of it, a fresh interpreter importing torch and your modules "
                "included), and they had not finished; the trial process was stopped. "
                "Fix: raise --budget (a loaded machine starts processes several times slower), or " + lazily)
    return (f"starting the trial process and building the dataset and step must take under "
            f"{setup_timeout_s:.0f} s, and they had not finished; the trial process was stopped. Fix: " + lazily)


def _main_script_hint() -> str:
    """A likely cause when the trial process dies while starting and left no message of its own:
    'spawn' re-runs the caller's script in the new process (NOTE [ A script re-imported by
    spawn ] in reimport.py), and something at its module level failed there."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.endswith("__main__")):
        return ""
    return (f". If {os.path.basename(path)} calls tune() at module level, put the call under "
            "`if __name__ == \"__main__\":` (the trial process re-imports that script); the "
            "trial process's own error is on stderr above")
