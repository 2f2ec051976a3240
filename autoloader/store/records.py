"""The result's own small records: the hardware it was measured on, the dataset, how and when it
was measured, a node's arithmetic, what the run was given and each what-if's claim (made by
tuning/claims.py). Each is declared once and read and written by the codec (search/codec.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.codec import MAX_CPUS, Stored, stored
from ..search.paired import BURSTS, PAIRED


@dataclass(frozen=True)
class StoredHardware(Stored):
    """The machine a result was measured on (inputs/hardware.Hardware's fields); None where an
    older result does not record one."""
    fingerprint: str = stored(absent=None, pattern=(r"[^/]+", "a hardware fingerprint"))   # None: not recorded
    cpus: int | None = stored(None, least=1, most=MAX_CPUS)
    cpu_model: str | None = None
    memory_gib: float | None = None
    gpus: tuple[str, ...] | None = None
    ranks: int = stored(1, least=1, most=MAX_CPUS)


@dataclass(frozen=True)
class DatasetRecord(Stored):
    """What was tuned: the dataset's name, class, length, content (NOTE [ Content fingerprint ]) and version."""
    name: str | None = None
    dataset_class: str | None = stored(None, key="class")
    length: int | None = None
    content: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class Provenance(Stored):
    """How and when a result was measured (NOTE [ Measurement format ]), at the result's top level."""
    measurement_format: int | None = None
    autoloader_version: str | None = None
    # It names a history file: a time as results are dated (ISO 8601), nothing else.
    finished_at: str | None = stored(None, pattern=(r"[0-9][0-9A-Za-z:+.-]*", "a time"))


# What a node's result says in words of its figures (NOTE [ Tuning a node's ranks ] in node/__init__.py).
NODE_WORDS = {"config": "per rank: every rank runs this DataLoader on its DistributedSampler shard",
              "samples_per_s": "the node's: ranks x the slowest rank's; trials and finals list the slowest "
                               "rank's (rank_samples_per_s: every rank's)",
              "profile": "rank 0's alone"}


@dataclass(frozen=True)
class NodeRecord(Stored):
    """A node's tune: its ranks, the node's CPUs and each rank's share, and each rank's memory ceiling."""
    ranks: int = stored(least=1, most=MAX_CPUS)
    node_cpus: int | None = stored(None, most=MAX_CPUS)
    cpus_per_rank: int | None = stored(None, most=MAX_CPUS)
    max_memory_per_rank: int | None = stored(None, then=(("**", lambda _: NODE_WORDS),))


@dataclass(frozen=True)
class Inputs(Stored):
    """What the run was given that its figures do not say (explain/ and ``show`` read it): the
    step's name as given (None: no step), whether reordering was allowed, the memory limits, when
    each part ran (what, start s, end s, config key or None), and the step's identity
    (``module.qualname#digest``: NOTE [ A step keyed by what it is ])."""
    step: str | None = None
    allow_reorder: bool | None = None
    max_memory: int | None = None
    shm_free: int | None = None
    timeline: tuple[tuple[str, float, float, str | None], ...] = ()
    step_identity: str | None = None
    # The set-up's and the profile's parts, (what, start s, end s) from the run's start.
    parts: tuple[tuple[str, float, float], ...] = stored((), signed=True)
    # What set max_memory: --max-memory, the RAM available or the cgroup's room (NOTE [ Reading the
    # cgroup ]); and the cgroup's memory limit where one binds. Written only when known.
    max_memory_by: str | None = stored(None, sparse=True, choices=("given", "ram", "cgroup"))
    cgroup_limit: int | None = stored(None, sparse=True)


@dataclass(frozen=True)
class WhatIfClaim(Stored):
    """One what-if (explain/whatif.py) as the result keeps it: the gain predicted over the pick's
    predicted rate; the gain measured where the run measured it (``measured_from``), with a 95%
    interval [lo, hi] from ``rounds`` paired rounds (NOTE [ Paired rounds ]; None from one round
    or from separate bursts); ``sure``: all of that in words, as the report prints it."""

    name: str
    change: str
    predicted_samples_per_s: float
    predicted_gain: float = stored(signed=True)
    measured_gain: float | None = stored(None, signed=True)
    measured_from: str | None = stored(None, choices=(PAIRED, BURSTS))
    measured_interval: tuple[float, float] | None = stored(None, signed=True)
    rounds: int = 0
    sure: str = ""

    def _read_back(self) -> WhatIfClaim:
        return ordered(self, "measured_interval")


def ordered(record, *names: str):
    """``record``, unless an interval of it (``names``) is not [lo, hi] with lo <= hi: a ValueError."""
    for name in names:
        pair = getattr(record, name)
        if pair is not None and pair[0] > pair[1]:
            raise ValueError(f"{name} is {list(pair)!r}, not [lo, hi] with lo <= hi")
    return record
