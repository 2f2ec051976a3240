"""Saving a run: its result and snippet written, and a NotSaved saying what could not be
(NOTE [ Stored state a user can trust ] in durable.py)."""

from __future__ import annotations

import os

from ..errors import NotSaved
from .durable import atomic_write_all, sqlite_file, write_failure, write_fix
from ..events.lines import rate


def save(result, files: dict[str, str], store) -> None:
    """Write the run's files; raise NotSaved, carrying ``result``, when they or the study could not be."""
    problems = [store.write_failed] if store.write_failed else []
    errors = [store.write_error] if store.write_error else []
    where = os.path.dirname(next(iter(files), "")) or "."
    written = True
    try:
        atomic_write_all(files)
    except OSError as exc:
        problems.append(write_failure("the result and its snippet", where, exc))
        errors.append(exc)
        written = False
    if problems:
        study = sqlite_file(store.url)
        folder = os.path.abspath(os.path.dirname(os.path.dirname(next(iter(files), "")) or "."))
        under_out = study is not None and os.path.commonpath([study, folder]) == folder
        raise NotSaved(f"the run chose {result.config.key} ({rate(result.samples_per_s, ' samples/s')}) but could not "
                       f"save all of it: {'; '.join(problems)}. Whatever was stored before is kept. Fix: "
                       + write_fix(errors, store.url if store.write_error else None, under_out, where), result,
                       stored_lines(result, written, store.write_failed is None, store))


def stored_lines(result, files: bool, study: bool, store, pushed: bool | None = None) -> tuple[str, ...]:
    """What happened to each thing a run stores, a line each (``pushed``: None without a fleet)."""
    lines = [f"saved {result.path}" if files else f"not saved: {result.path}",
             f"snippet {result.snippet_path}" if files else f"snippet not saved: {result.snippet_path}",
             f"study {store.where}" if study else f"study not saved: {store.where}"]
    if pushed is not None:
        lines.append(f"pushed to {store.shown_url}" if pushed else
                     f"not pushed to {store.shown_url}: the study above keeps it, and the next run with this "
                     "--storage pushes it")
    return tuple(lines)
