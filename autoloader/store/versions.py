"""Which autoloader measured a stored result, and whether this one may reuse it.

# NOTE [ Measurement format ]
# A stored rate is only comparable with a new one when both were measured the same way (the
# burst's windows and stop rule, what a trial charges, what the final re-measures).
# MEASUREMENT_FORMAT names that way; it is raised whenever a change makes rates (or picks) before
# and after it disagree, and every result records it with autoloader's version. A result of
# another format is not reused silently: ``best_loader`` tunes again, a comparison says it cannot
# compare, a warm start starts from scratch, and each says why (``reuse_problem``).
"""

from __future__ import annotations

import datetime

MEASUREMENT_FORMAT = 1
# The name autoloader is installed under (``autoloader`` on the public index is another project).
DISTRIBUTION = "torch-autoloader"


def autoloader_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:     # pragma: no cover - Python 3.10+ has it
        return "unknown"
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def now_iso() -> str:
    """The time now in UTC, to the second, ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def provenance() -> dict:
    """The fields every result records about how and when it was measured."""
    return {"measurement_format": MEASUREMENT_FORMAT, "autoloader_version": autoloader_version(),
            "finished_at": now_iso()}


def reuse_problem(found: int | None, version: str | None) -> str | None:
    """Why a result measured in format ``found`` by autoloader ``version`` may not be reused here."""
    if found == MEASUREMENT_FORMAT:
        return None
    by = version or "an autoloader that did not record its version"
    what = f"format {found}" if found is not None else "a format from before formats were recorded"
    return (f"the stored result was measured with {what} (by {by}); this autoloader "
            f"({autoloader_version()}) measures with format {MEASUREMENT_FORMAT}")
