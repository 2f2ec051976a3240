"""Telling the engineer why, and what to change: the verdict, the what-ifs, the ceiling, the report.

Whom it serves:
- a person reading a run: ``autoloader report RESULT`` and ``tune --report`` write an HTML page
  and a markdown twin beside the result (``page.py``, with ``plots.py``'s PNGs);
- the CLI table's one verdict line (``tuning.progress.table`` calls ``headline``);
- a benchmark script tabulating many runs: ``benchmark_row(result)`` gives the verdict's class
  and the top what-if with its predicted gain.

Each takes a result's record (a ``TuneResult``: what ``tune()`` returns, or a stored result's JSON
read by ``TuneResult.from_dict``, which checks it) or, for ``explain``, ``Evidence``.

``evidence``, ``verdict``, ``whatif`` and ``ceiling`` are pure (records in, records out: no torch,
no files, no printing); ``plots`` draws with matplotlib; ``page`` renders and writes the files.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ceiling import Ceiling, ceiling
from .evidence import Evidence
from .verdict import KINDS, Verdict, beaten, beaten_words, verdict
from .whatif import WhatIf, how_sure, top, whatifs

# The folder's public face: the explanation's records and functions, and the modules that write
# the page and its plots. tests/test_units.py checks every import across folders against it.
__all__ = ["KINDS", "Ceiling", "Evidence", "Explanation", "Verdict", "WhatIf", "beaten", "beaten_words",
           "benchmark_row", "caveats", "explain", "figures", "files", "headline", "how_sure", "page", "plots", "whatifs"]


@dataclass(frozen=True)
class Explanation:
    evidence: Evidence
    verdict: Verdict
    whatifs: tuple[WhatIf, ...]
    ceiling: Ceiling

    def to_dict(self) -> dict:
        best = top(self.whatifs)
        return {"verdict": self.verdict.to_dict(), "whatifs": [w.to_dict() for w in self.whatifs],
                "top_whatif": best.to_dict() if best else None, "ceiling": self.ceiling.to_dict()}


def explain(result) -> Explanation:
    """The whole explanation of a result's record (a ``TuneResult``) or of ``Evidence``."""
    ev = result if isinstance(result, Evidence) else Evidence.from_result(result)
    # Without a measured profile the model has nothing to predict from: no what-ifs.
    changes = tuple(whatifs(ev)) if ev.profiled else ()
    return Explanation(ev, verdict(ev, changes), changes, ceiling(ev))


def headline(result) -> str | None:
    """The verdict of a result's record in one line (no what-ifs: cheap enough for every table),
    or None for a result without a profile."""
    if getattr(result, "profile", None) is None:
        return None
    return verdict(Evidence.from_result(result)).headline


def figures(result) -> dict:
    """The verdict's and the ceiling's figures of a result's record, as the table and the page
    say them (no what-ifs: cheap enough for every JSON), for the JSON's ``explained`` block."""
    ev = Evidence.from_result(result)
    v = verdict(ev)
    return {"kind": v.kind, "headline": v.headline, "wait_share": v.wait_share, "wait_source": v.wait_source,
            "ceiling": ceiling(ev).to_dict()}


def benchmark_row(result) -> dict:
    """For a benchmark's table, of a result's record: the verdict's class and headline, the top
    what-if (its name and predicted gain, and its measured gain where the run measured it) and
    the gap to the ceiling."""
    explained = explain(result)
    best = top(explained.whatifs)
    return {"kind": explained.verdict.kind, "level": explained.verdict.level,
            "wait_share": explained.verdict.wait_share, "wait_source": explained.verdict.wait_source,
            "headline": explained.verdict.headline,
            "top_whatif": best.name if best else None, "top_title": best.title if best else None,
            "top_gain": best.gain if best else None, "top_measured_gain": best.measured_gain if best else None,
            "ceiling": explained.ceiling.to_dict()["ceiling"], "ceiling_binding": explained.ceiling.binding,
            "gap": explained.ceiling.gap}
