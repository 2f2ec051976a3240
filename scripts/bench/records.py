"""OUT/records.jsonl: one JSON line per measurement, written and flushed as it is made, so a run
killed outright keeps everything it finished (``python -m scripts.bench rebuild`` reads it back).

Phases a line can hold: ``meta`` (the run's machine and command, first), ``tuner`` (a workload's
``autoloader tune``: its JSON output under ``tuner``), ``stability_tuner`` (the second and third
tunes of a workload under ``--stability``, with ``index``), ``grid`` (a grid trial, or the list
of configs ``skipped`` for time), ``final`` (one run of the interleaved final, with ``round`` and
the config's ``roles``), ``ceiling``, ``summary`` (a finished workload's figures) and ``skipped``
(a workload not begun, with the ``reason``). A trial line holds ``config``, ``key``, ``result``
(TrialResult.to_dict()), ``t_start`` and ``t_end`` (wall clock)."""

from __future__ import annotations

import json
import sys
from typing import Callable

from autoloader.search.results import TrialResult
from scripts.bench.common import utc_now


class Records:
    """Appends to OUT/records.jsonl, one line per call, flushed at once."""

    def __init__(self, path: str, run_id: str):
        self.fh = open(path, "a", buffering=1)
        self.run_id = run_id

    def write(self, **fields) -> None:
        fields = {"run_id": self.run_id, "utc": utc_now(), **fields}
        self.fh.write(json.dumps(fields, default=str) + "\n")
        self.fh.flush()

    def trial(self, workload: str, phase: str, round_: int | None, result: TrialResult,
              t_start: float, t_end: float, **extra) -> None:
        self.write(workload=workload, phase=phase, round=round_, config=result.config.loader_kwargs(),
                   key=result.config.key, result=result.to_dict(), t_start=t_start, t_end=t_end, **extra)

    def close(self) -> None:
        self.fh.close()


def read_records(paths: list[str]) -> list[dict]:
    """The lines of records.jsonl files, in order; a line torn by a kill mid-write is dropped."""
    rows = []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def report_main(argv: list[str], command: str, analyse: Callable[[list[dict]], list],
                report: Callable[[list], str]) -> int:
    """A command that reads records only: ``report(analyse(rows))`` of the records files named in
    ``argv``, printed (agreement.py, replay.py)."""
    if not argv:
        print(f"usage: python -m scripts.bench {command} RUN/records.jsonl [MORE/records.jsonl ...]", file=sys.stderr)
        return 2
    print(report(analyse(read_records(argv))))
    return 0
