"""The fault suite's cases of issue 31 (stored records and the new commands under bad input): the
checks of ``records.py`` (bad result fields, the report's writes and text), ``specs.py`` (specs
that name no dataset, a worker's failure line, the memory ceiling in the final) and ``fleet.py``
(a PostgreSQL storage stopped under the dashboard and mid-tune, ``report --storage``), their
section of the report and their rows of its totals. Each check counts the tracebacks the user was
shown and what was lost (a pick, a stored file, a report, a trial the fleet never got).

    python -m scripts.faults --only issue31 [-k WORD]     # these alone, printed (no report written)
"""

from __future__ import annotations

from typing import Callable

from scripts.faults import fleet, records, specs
from scripts.faults import datasets as faulty
from scripts.faults.checks import Check

PREFIX = "issue 31"


def run(root: str, add: Callable[[Check, Callable[[Check], None]], None]) -> None:
    records.run(root, add)
    specs.run(root, add)
    fleet.run(root, add)


def owns(check: Check) -> bool:
    return check.group.startswith(PREFIX)


def _ran(checks: list[Check]) -> list[Check]:
    return [c for c in checks if owns(c) and not c.note.startswith("not run")]


def render(checks: list[Check]) -> list[str]:
    mine = [c for c in checks if owns(c)]
    lines = ["## Issue 31: stored records, reports, specs and the fleet's storage", "",
             "Each is real runs of the CLI (a PostgreSQL server of the suite's own for the fleet's storage, stopped "
             "and started again). Survived = every command exited as the README says (a usage error with the rule "
             "and the fix, a warning naming the file and the field, exit 4 naming what could not be written), "
             "with no traceback and nothing lost. Lost = picks not saved, damaged files neither kept nor set aside "
             "(`.corrupt-<time>`, byte for byte), results changed by their report, report files neither written "
             "nor named, trials a run kept that never reached the fleet.", "",
             "| group | case | injected as | via | survived | tracebacks | lost | run s |",
             "|---|---|---|---|---|---|---|---|"]
    for c in mine:
        group = c.group[len(PREFIX) + 2:]
        if c.note.startswith("not run"):
            lines.append(f"| {group} | {c.name} | {c.injected_as} | {c.via} | {c.note} | - | - | - |")
            continue
        lines.append(f"| {group} | {c.name} | {c.injected_as} | {c.via} | {'yes' if c.survived else '**NO**'} | "
                     f"{c.tracebacks} | {c.lost if c.lost is not None else 0} | {c.seconds:.0f} |")
    lines += ["", "What the user was told:", ""]
    lines += [f"- {c.name}: `{c.told[:600]}`" + (f" ({c.note})" if c.note and not c.note.startswith("not run") else "")
              for c in mine if c.told or c.note]
    return lines + [""]


def totals(checks: list[Check], orphans: list[str]) -> list[str]:
    """Rows for the report's totals table; ``orphans``: processes of the suite alive after these checks."""
    ran = _ran(checks)
    return [f"| issue-31 cases survived | {sum(c.survived for c in ran)} of {len(ran)} | all |",
            f"| tracebacks shown by the issue-31 checks | {sum(c.tracebacks for c in ran)} | 0 |",
            f"| picks, stored files, reports and fleet trials lost to them | {sum(c.lost or 0 for c in ran)} | 0 |",
            f"| processes left behind by the issue-31 checks (the PostgreSQL server's included) | {len(orphans)} | 0 |"]


def leftover(tag: str) -> list[str]:
    return faulty.leftover_processes(tag)
