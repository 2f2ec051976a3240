"""Errors the library raises on purpose; the CLI maps them to exit codes."""

from __future__ import annotations


class AutoloaderError(Exception):
    """Base class: every error autoloader raises deliberately derives from it."""

    exit_code = 1


class UsageError(AutoloaderError, ValueError):
    """Bad usage or bad input: the message states the rule, the value received and the fix."""

    exit_code = 2


class NoFeasibleConfig(AutoloaderError, RuntimeError):
    """Every configuration tried failed or broke a constraint."""

    exit_code = 1


def usage(rule: str, got: object, fix: str) -> UsageError:
    """Build a UsageError in the house style: rule, value received, fix."""
    return UsageError(f"{rule} (got {got!r}). Fix: {fix}")
