"""Telling the engineer why, and what to change: the verdict, the what-ifs, the ceiling, the report.

Each takes a result's record (a ``TuneResult``) or, for ``explain``, ``Evidence``: the CLI table's
verdict line (``headline``), the JSON's ``explained`` block (``figures``), a benchmark's row
(``benchmark_row``) and the report (``page``, which writes it, and ``plots``). ``evidence``,
``verdict`` and ``whatif`` (the ceiling too) are pure: records in, records out.
"""

from __future__ import annotations

from dataclasses import dataclass

from .evidence import Evidence
from .verdict import KINDS, Verdict, beaten, beaten_words, verdict
from .whatif import Ceiling, WhatIf, ceiling, how_sure, top, whatifs

# The folder's public face: the explanation's records and functions, and the modules that write
# the page and its plots. tests/test_units.py checks every import across folders against it.
__all__ = ["KINDS", "Ceiling", "Evidence", "Explanation", "Verdict", "WhatIf", "beaten", "beaten_words",
           "benchmark_row", "explain", "figures", "headline", "how_sure", "page", "plots",
           "thresholds", "verdict", "whatifs"]


@dataclass(frozen=True)
class Explanation:
    evidence: Evidence
    verdict: Verdict
    whatifs: tuple[WhatIf, ...]
    ceiling: Ceiling


def explain(result) -> Explanation:
    """The whole explanation of a result's record (a ``TuneResult``) or of ``Evidence``."""
    ev = result if isinstance(result, Evidence) else Evidence.from_result(result)
    # Without a measured profile the model has nothing to predict from: no what-ifs.
    changes = tuple(whatifs(ev)) if ev.profiled else ()
    return Explanation(ev, verdict(ev, changes), changes, ceiling(ev))


def headline(result) -> str | None:
    """The verdict of a result's record in one line (no what-ifs: cheap enough for every table)."""
    if getattr(result, "profile", None) is None:
        return None
    return verdict(Evidence.from_result(result)).headline


def _said(v: Verdict) -> dict:
    return {"kind": v.kind, "headline": v.headline, "wait_share": v.wait_share, "wait_source": v.wait_source}


def figures(result) -> dict:
    """The verdict's and the ceiling's figures of a result's record, for the JSON's ``explained``."""
    ev = Evidence.from_result(result)
    return {**_said(verdict(ev)), "ceiling": ceiling(ev).to_dict()}


def benchmark_row(result) -> dict:
    """For a benchmark's table: the verdict's class and headline, the top what-if (its name, its
    predicted gain, and its measured gain where the run measured it) and the gap to the ceiling."""
    explained = explain(result)
    best, c = top(explained.whatifs), explained.ceiling
    return {**_said(explained.verdict), "level": explained.verdict.level,
            "top_whatif": best and best.name, "top_title": best and best.title, "top_gain": best and best.gain,
            "top_measured_gain": best and best.measured_gain,
            "ceiling": c.to_dict()["ceiling"], "ceiling_binding": c.binding, "gap": c.gap}
