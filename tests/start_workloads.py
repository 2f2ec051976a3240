"""A dataset of Python-object rows for the start-method tests (NOTE [ What a start method costs ]
in autoloader/search/methods.py): growth_workloads' rows, fewer of them, so that spawn's pickling
of the dataset to each worker takes seconds, not tens of them, on a 2-CPU machine, while fork's
workers still copy tens of MiB as they read. A module-level factory, so that a trial process (and
a spawned worker) re-imports it by name."""

from __future__ import annotations

from growth_workloads import Rows

ROWS = 30_000
BOXES = 96


def rows() -> Rows:
    return Rows(length=ROWS, boxes=BOXES)
