"""The callback API: what ``tune(progress=...)`` and the other entry points report, and the warnings.

A ``progress`` callable gets one event object per thing a run reports, an instance of one of the
frozen dataclasses below (all derive from ``Event``). ``event.kind`` names it; ``event.line`` is
the line the CLI prints for it (None for an event the CLI says nothing about, such as
``TuneDone``, whose ``result`` the CLI prints as its table). Match on the type::

    def progress(event):
        if isinstance(event, TrialDone):
            bar.update(1)
        elif event.line:
            print(event.line)

The same events go to the ``logging`` module (logger ``"autoloader"``: those with a line at
INFO, the rest at DEBUG), each record carrying its event as ``record.event``.

A callable of the old two-argument form, ``progress(event_name, data)``, still works: it is
given ``event.kind`` and a dict of the event's fields, with a DeprecationWarning (a warning rather
than an error, so a script written for it keeps running while it is moved to the one-argument form).

Importing this module imports no torch, nor any of the folders that emit the events.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Callable

from ..errors import (AutoloaderWarning, NotStored, StoredStateWarning, StudyMovedAside, StudySkipped, usage)
from .kinds import (EVENTS, BusyRecheck, ControlRetried, Event, FinalRound, FleetPushed, InRunAdopted, InRunDone,
                    InRunExploring, InRunFollowing, InRunNotAdopted, InRunSettled, InRunStarted, NotInRun, Profiled, ResultNotReused,
                    ResultReused, Retuned, RetuneStarted, RuleRetried, SegmentRead, SettingsApplied, TrialDone, TrialsUnstored, TuneDone,
                    TuneStarted, Waiting, WaitingForLock, WaitingForRank, WaitingForTrialStart, WarmStarted)

__all__ = ["EVENTS", "AutoloaderWarning", "BusyRecheck", "ControlRetried", "Event", "FinalRound", "FleetPushed",
           "InRunAdopted", "InRunDone", "InRunExploring", "InRunFollowing", "InRunNotAdopted", "InRunSettled", "InRunStarted", "NotInRun", "NotStored", "SegmentRead",
           "Profiled", "Progress", "ResultNotReused", "ResultReused", "RetuneStarted", "Retuned", "RuleRetried",
           "SettingsApplied", "StoredStateWarning", "StudyMovedAside", "StudySkipped", "TrialDone", "TrialsUnstored", "TuneDone",
           "TuneStarted", "Waiting", "WaitingForLock", "WaitingForRank", "WaitingForTrialStart", "WarmStarted",
           "lines", "subscriber"]

Progress = Callable[[Event], None]
"""What every emitter calls: one event, nothing returned."""

FORM = ("progress= takes a callable of one argument, an autoloader.events event "
        "(for example progress=lambda event: print(event.line))")


class _Legacy:
    """A callback of the old ``(event, data)`` form, given each event as that pair."""

    def __init__(self, callback: Callable[[str, dict], None]):
        self.callback = callback

    def __call__(self, event: Event) -> None:
        self.callback(*event.legacy())


def subscriber(progress: Callable | None, stacklevel: int = 2) -> Progress | None:
    """The ``progress`` argument of an entry point as a callable of one event.

    Args:
        progress: None (nothing), a callable of one event, or a callable of the deprecated
            ``(event, data)`` form.
        stacklevel: where the DeprecationWarning points, counted as ``warnings.warn`` counts
            from the caller of this function (2: that caller's caller).

    Returns:
        ``progress`` itself, a wrapper handing a two-argument callable ``event.legacy()``, or None.

    Raises:
        UsageError: ``progress`` is not callable, or takes neither one argument nor two.
    """
    if progress is None:
        return None
    if not callable(progress):
        raise usage("progress must be None, False or a callable of one event", progress, FORM)
    arity = _arity(progress)
    if arity == 2:
        warnings.warn(f"a progress callable of two arguments (event, data) is deprecated and will stop working: "
                      f"{FORM}; an event's .kind is the old event name, its fields the old data's keys",
                      DeprecationWarning, stacklevel=stacklevel + 1)
        return _Legacy(progress)
    if arity is None:
        raise usage("progress must take one positional argument, the event", _describe(progress), FORM)
    return progress


def _arity(callback: Callable) -> int | None:
    """1 when ``callback`` takes one positional argument (an event), 2 when it takes exactly two
    (the old form), None when neither; 1 when its signature cannot be read (a builtin)."""
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):
        return 1
    for count in (1, 2):
        try:
            signature.bind(*[None] * count)
            return count
        except TypeError:
            continue
    return None


def _describe(callback: Callable) -> str:
    try:
        return f"{getattr(callback, '__qualname__', type(callback).__name__)}{inspect.signature(callback)}"
    except (TypeError, ValueError):
        return repr(callback)
