"""Errors the library raises on purpose; the CLI maps them to exit codes."""

from __future__ import annotations


class AutoloaderError(Exception):
    """Base class: every error autoloader raises deliberately derives from it. ``resumable``:
    the run it ends is left as interrupted, so the same command resumes its stored trials,
    rather than marked failed."""

    exit_code = 1
    resumable = False


class UsageError(AutoloaderError, ValueError):
    """Bad usage or bad input: the message states the rule, the value received and the fix."""

    exit_code = 2


class InputError(UsageError):
    """Bad input found by running it rather than by reading the command (the dataset failing to
    build, DataLoader refusing the arguments): exit 2, but the CLI prints no usage header."""


class NoFeasibleConfig(AutoloaderError, RuntimeError):
    """Every configuration tried failed or broke a constraint."""

    exit_code = 1


class Inconclusive(NoFeasibleConfig):
    """Nothing could be measured, for a reason that is the machine's or the clock's, not the
    configs': the budget ended before a trial could run or finish, or trials stalled while others
    took the CPUs. The message says the cause and the machine's load; the same command on a
    quieter machine, or with the budget it names, measures. Exits 5, as a busy nightly does."""

    exit_code = 5


def clip(text: str, limit: int = 1000) -> str:
    """``text`` whole when it is up to ``limit`` characters, else cut at the last word boundary
    before it and marked " ..." (a runaway message kept to a line's worth)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind(" ")
    return (head[:cut] if cut > limit // 2 else head).rstrip(" ,;:") + " ..."


def one_line(text: str) -> str:
    """``text`` with its line breaks and other control characters as single spaces."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())


def usage(rule: str, got: object, fix: str) -> UsageError:
    """Build a UsageError in the house style: rule, value received, fix."""
    return UsageError(f"{rule} (got {got!r}). Fix: {fix}")


class NotSaved(AutoloaderError, OSError):
    """The run chose a config but could not store all of it (a full disk, a storage that stopped
    taking writes). ``result`` is the TuneResult, so the pick is not lost with the files; what
    was stored before the failure is kept."""

    exit_code = 4
    resumable = True   # its message says the same command resumes: NOTE [ Stored state a user can trust ]

    def __init__(self, message: str, result=None, stored: tuple[str, ...] = ()):
        super().__init__(message)
        self.result = result
        self.stored = stored   # what happened to each thing the run stores, a line each ("saved PATH"...)


class AutoloaderWarning(UserWarning):
    """Base class of autoloader's warnings (the CLI shows them as "Warning: ...")."""


# The warnings of the modules that raise them, defined here so that autoloader.events can export
# them all without importing those modules (each module re-imports its own).

class StoredStateWarning(AutoloaderWarning):
    """A stored record (a study's trial, a result file) was unreadable or invalid and is ignored."""


class StudyMovedAside(AutoloaderWarning):
    """A study that could not be read was moved aside and a fresh one started."""


class NotStored(AutoloaderWarning):
    """best_loader tuned a loader but could not store the result: the loader is returned all the same."""


class StudySkipped(AutoloaderWarning):
    """A study file under --out could not be read, so the dashboard serves the others without it."""
