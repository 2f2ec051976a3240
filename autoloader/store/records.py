"""The result's own small records: the hardware it was measured on, the dataset, how and when it
was measured, a node's arithmetic, what the run was given, each what-if's claim (made by
tuning/claims.py) and the ``Comparison`` with the previous result of its problem (``since``; what is
compared and how: NOTE [ Drift ] in tuning/compare.py, which makes one). Each is declared once and
read and written by the codec (search/codec.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..search.codec import MAX_CPUS, Stored, stored
from ..search.results import MachineLoad
from ..search.paired import BURSTS, INSIDE, OUTSIDE, PAIRED, STRADDLES, against_band


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


BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED = "baseline", "new hardware", "unchanged", "drifted"
INCONCLUSIVE = "inconclusive"
STATUSES = (BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED, INCONCLUSIVE)


@dataclass(frozen=True)
class Change(Stored):
    """One DataLoader setting that differs from the previous pick."""
    setting: str
    before: object = stored(scalar=True)
    after: object = stored(scalar=True)


class HardwareChange(NamedTuple):
    """One field of the hardware that differs from the previous result's."""
    field: str
    before: object
    after: object


@dataclass(frozen=True)
class Comparison(Stored):
    """This run's result against the previous one of the same problem (NOTE [ Drift ]). The rates
    before and after were stored as ``pick_rate_*`` before they were ``samples_per_s_*``."""
    status: str = stored(choices=STATUSES, then=("changed",))
    reasons: tuple[str, ...] = ()                  # what went past a threshold
    previous_path: str | None = None
    previous_hardware: str | None = None
    previous_finished_at: str | None = stored(None, pattern=(r"[0-9][0-9A-Za-z:+.-]*", "a time"))
    same_hardware: bool = stored(True, then=(("pick_changed", lambda c: bool(c.changes)),))
    changes: tuple[Change, ...] = ()
    settings_tie: bool = False
    old_pick_now: float | None = None              # the old pick's rate tonight, when measured
    # The old pick's rate when it was picked, and the new pick's.
    pick_rate_before: float | None = stored(None, key="samples_per_s_before", old=("pick_rate_before",))
    pick_rate_after: float | None = stored(None, key="samples_per_s_after", old=("pick_rate_after",),
                                           then=("rate_ratio", "rate_shifted"))
    knee_before: int | None = None
    knee_after: int | None = None
    memory_per_worker_before: float | None = stored(None, signed=True)  # bytes
    memory_per_worker_after: float | None = stored(None, signed=True, then=("memory_ratio",))
    hardware_changes: tuple[HardwareChange, ...] = ()
    not_comparable: str | None = None
    paired: tuple[float, ...] = ()                 # the new pick over the old, round by round tonight
    # The rate interval's half-width, a share of the ratio.
    rate_noise: float | None = stored(None, then=("inconclusive",))
    load: MachineLoad | None = None                # tonight's machine load (NOTE [ Others on the machine ])
    set_aside: tuple[str, ...] = ()                # past a threshold on a busy machine: not judged
    # The 95% interval of the old pick's rate now over then (search/paired.runs_ratio), and of the
    # new pick's over the old's in tonight's paired rounds (paired_bounds); None: too few readings.
    rate_interval: tuple[float, float] | None = None
    pick_interval: tuple[float, float] | None = None
    rounds: int = 0                                # tonight's readings of the config the rate is judged on (0: stored before intervals)
    undecided: str | None = None                   # why nothing could be said (inconclusive), in words

    @property
    def changed(self) -> bool:
        """Something went past a threshold, on this hardware or from another's."""
        return bool(self.reasons)

    @property
    def inconclusive(self) -> bool:
        return self.status == INCONCLUSIVE

    @property
    def rate_ratio(self) -> float | None:
        """The old pick's rate now against then, or (not measured tonight) the new pick's against the old's."""
        if self.old_pick_now is not None and self.pick_rate_before:
            return self.old_pick_now / self.pick_rate_before
        if self.pick_rate_before and self.pick_rate_after:
            return self.pick_rate_after / self.pick_rate_before
        return None

    def rate_against(self, threshold: float) -> str | None:
        """Where the rate's interval lies against the band 1 +- ``threshold``: OUTSIDE, INSIDE or
        STRADDLES; None when no rate was compared. One stored before intervals (a ``rate_noise``)
        is judged as it was then: past both the threshold and its noise, else inside."""
        if self.rate_ratio is None:
            return None
        if self.rate_interval is not None:
            return against_band(*self.rate_interval, threshold)
        if self.rounds == 0:   # stored before intervals: no readings counted
            return OUTSIDE if abs(self.rate_ratio - 1) > max(threshold, self.rate_noise or 0.0) else INSIDE
        return STRADDLES

    def rate_past(self, threshold: float) -> bool:
        """The rate's interval lies wholly outside the band 1 +- ``threshold`` (NOTE [ Drift ])."""
        return self.rate_against(threshold) == OUTSIDE

    @property
    def rate_shifted(self) -> bool:
        return any(r.startswith("rate ") for r in self.reasons)

    @property
    def memory_ratio(self) -> float | None:
        if self.memory_per_worker_before is None or self.memory_per_worker_after is None \
                or self.memory_per_worker_before <= 0:
            return None
        return self.memory_per_worker_after / self.memory_per_worker_before

    def _read_back(self) -> Comparison:
        return ordered(self, "rate_interval", "pick_interval")
