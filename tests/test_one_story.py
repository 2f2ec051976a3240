"""Issue 52: one run, one story. Each figure is computed once, and every surface (the table, the
verdict, the report page, the JSON) renders that one value; the page carries the table's caveats;
advice fits its object; the install check names the one fix.

The results here are built from synthetic records (tests/explain_cases.py), no trial runs.
"""

from __future__ import annotations

from autoloader.events.lines import cpus, others_text


def test_plurals_of_cpus():
    assert cpus(1) == "1 CPU" and cpus(2) == "2 CPUs" and cpus(1.5) == "1.5 CPUs"
    assert others_text(0.5, 1) == "other processes used 0.5 of 1 CPU"
