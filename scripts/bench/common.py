"""Names and number formats every part of the bench shares."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
import statistics

from autoloader.search.policy import FINAL_TIE
from autoloader.search.space import LoaderConfig

# The repository's root: the tuner and the workloads' specs are resolved from here.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Within the tuner's own final tie of the best median: within noise.
TIE = FINAL_TIE


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def source_digest(root: str = REPO) -> str:
    """The first 12 hex digits of a SHA-256 over ``root``'s autoloader/ Python files (each path and
    its bytes, in path order): what the bench ran, whatever git state a copy of the tree carries.
    ``python -c "from scripts.bench.common import source_digest; print(source_digest())"`` in a
    checkout of a commit tells whether a result was made by it."""
    digest = hashlib.sha256()
    package = os.path.join(root, "autoloader")
    paths = sorted(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                   for d, _, files in os.walk(package) for f in files if f.endswith(".py"))
    for path in paths:
        digest.update(path.encode() + b"\0")
        with open(os.path.join(root, path), "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()[:12]


def log(message: str) -> None:
    print(message, flush=True)


def short(config: LoaderConfig | None) -> str:
    if config is None:
        return "-"
    if config.num_workers == 0:
        return f"w0 pin{int(config.pin_memory)}"
    return (f"w{config.num_workers} pf{config.prefetch_factor} pin{int(config.pin_memory)} "
            f"pw{int(config.persistent_workers)}")


def rule_field(data: dict, name: str = ""):
    """A result file's ``rule{name}`` (the rule's config, or one of its figures), read under the
    name older files wrote it under too (``control{name}``)."""
    return data.get(f"rule{name}", data.get(f"control{name}"))


def config_from_kwargs(kwargs: dict) -> LoaderConfig:
    return LoaderConfig.make(int(kwargs["batch_size"]), int(kwargs["num_workers"]), bool(kwargs["pin_memory"]),
                             kwargs.get("prefetch_factor"), bool(kwargs.get("persistent_workers", False)))


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}"


def fmt_ratio(value: float | None, digits: int = 3, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def fmt_share(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def fmt_gib(value: float | None) -> str:
    return "n/a" if not value else f"{value / 2**30:.2f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def median(values):
    return statistics.median(values) if values else None


def geomean(values) -> float | None:
    """The geometric mean of positive ratios (the mean that treats 2x and 0.5x alike), None if none."""
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
