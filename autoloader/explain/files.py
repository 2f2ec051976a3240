"""The report's files, written beside the result: ``<key>.html``, ``<key>.md`` and ``<key>.plots/``.

# NOTE [ A report writes what it can ]
# A report is written from a result already stored, so nothing it does may cost the result: each
# file is written on its own, atomically, and one that cannot be written is said, by name and
# reason, while the others are still written. The page is self-contained (its plots inline), so
# it is written whatever became of the PNGs; the markdown twin links them only when they were
# written. Nothing is written through a symbolic link out of the result's folder: a
# ``<key>.plots`` that is a link is not followed, and a page or PNG that is a link is replaced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..store.durable import atomic_write_all, write_failure
from . import explain
from .page import render_html, render_markdown


@dataclass(frozen=True)
class Written:
    """Where a result's report goes, what of it was written (paths) and what could not be (one
    sentence each: what, where, why)."""
    html: str
    markdown: str
    plots: str
    written: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.failed


def report_paths(result_path: str) -> dict[str, str]:
    stem = result_path[:-len(".json")] if result_path.endswith(".json") else result_path
    return {"html": stem + ".html", "markdown": stem + ".md", "plots": stem + ".plots"}


def write_report(result_path: str, result) -> Written:
    """Explain ``result`` (the ``TuneResult`` stored at ``result_path``) and write its page, its
    markdown twin and the PNGs beside it, each that can be (NOTE [ A report writes what it can ])."""
    from .plots import draw

    explained = explain(result)
    plots = draw(explained)
    paths = report_paths(result_path)
    written, failed = [], []
    files = _write_plots(paths, plots, written, failed)
    for what, path, render in (("the report page", paths["html"], lambda: render_html(result, explained, plots)),
                               ("its markdown twin", paths["markdown"],
                                lambda: render_markdown(result, explained, files,
                                                        plots_left_out=None if files or not plots
                                                        else os.path.basename(paths["plots"])))):
        problem = _put(path, render().encode(), what)
        (failed.append(problem) if problem else written.append(path))
    return Written(paths["html"], paths["markdown"], paths["plots"], tuple(written), tuple(failed))


def _write_plots(paths: dict[str, str], plots: dict, written: list, failed: list) -> dict[str, tuple[str, str]]:
    """The PNGs into ``<key>.plots/``: name -> (caption, path relative to the markdown), or {}."""
    folder = paths["plots"]
    if not plots:
        return {}
    if os.path.islink(folder):
        failed.append(f"the plots were not written to {folder}: it is a symbolic link (to {os.readlink(folder)}), "
                      "which a report does not follow out of the result's folder; the page has the plots inline")
        return {}
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        failed.append(write_failure("the plots", folder, exc) + "; the page has them inline")
        return {}
    files = {}
    for name, (caption, png) in plots.items():
        target = os.path.join(folder, f"{name}.png")
        problem = _put(target, png, "the plots")
        if problem:
            failed.append(problem + "; the page has them inline")
            return {}   # the twin links all of them or none
        written.append(target)
        files[name] = (caption, os.path.relpath(target, os.path.dirname(paths["markdown"]) or "."))
    return files


def _put(path: str, content: bytes, what: str) -> str | None:
    """``content`` at ``path``; None when written, else what could not be and why."""
    if os.path.isdir(path) and not os.path.islink(path):
        return f"could not write {what} to {path}: a folder is there (move it away to have the file written)"
    try:
        atomic_write_all({path: content})
    except OSError as exc:
        return write_failure(what, path, exc)
    return None
