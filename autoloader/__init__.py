"""autoloader: measure DataLoader settings on the real machine and hand back the fastest.

The public API: ``tune``, ``best_loader`` and ``stored_result`` (api.py), ``tuned`` (an existing
DataLoader tuned in the run; ``SeededSamples``, its seeding per sample: inrun/), the records they
return (``TuneResult``, ``TunedConfig``, ``LoaderConfig``, ``TrialResult``), the seeded
``worker_init_fn`` (``seed_worker``, ``worker_generator``), the errors and the warnings, and the
progress events a ``progress`` callable is given (``autoloader.events``: the callback API), and
``watch`` (watching.py): a running loop's data-wait share and verdict, its loader unchanged.

The package's folders, and what each may import: ARCHITECTURE.md.

The names below load on first use, so ``import autoloader`` (or one of its pure modules) does not
import torch.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "tune": "api", "best_loader": "api", "stored_result": "api", "TuneResult": "api",
    "AutoloaderError": "errors", "AutoloaderWarning": "errors", "NoFeasibleConfig": "errors", "NotSaved": "errors",
    "Inconclusive": "errors",
    "UsageError": "errors", "InputError": "errors", "InvalidRecord": "search.codec",
    "TunedConfig": "search.config", "TrialResult": "search.results",
    "LoaderConfig": "search.space", "seed_worker": "seeding", "worker_generator": "seeding",
    "tuned": "inrun", "SeededSamples": "inrun.samples",
    "NotStored": "errors", "StoredStateWarning": "errors", "StudyMovedAside": "errors", "StudySkipped": "errors",
    "watch": "watching", "Watch": "watching", "WatchReport": "watching", "Watched": "watching",
}
# The callback API's events (autoloader/events): what a ``progress`` callable is given.
_PUBLIC.update({name: "events" for name in (
    "Event", "Waiting", "TuneStarted", "TrialsUnstored", "FleetPushed", "Profiled", "RuleRetried", "TrialDone", "FinalRound",
    "BusyRecheck", "TuneDone", "ResultReused", "ResultNotReused", "SettingsApplied", "WaitingForLock", "WaitingForTrialStart",
    "WaitingForRank", "RetuneStarted", "WarmStarted", "Retuned", "NotInRun", "InRunStarted", "SegmentRead",
    "InRunExploring", "InRunSettled", "InRunDone", "InRunFollowing", "InRunAdopted", "InRunNotAdopted",
    "ControlRetried")})   # RuleRetried's name before the rule's config was called the rule (deprecated)

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'autoloader' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
