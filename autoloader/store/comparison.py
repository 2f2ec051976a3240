"""``Comparison``: a result against the previous one of its problem, as the result stores it
(``since``). What is compared and how: NOTE [ Drift ] in tuning/compare.py, which makes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..search.codec import Stored, stored
from ..search.load import MachineLoad
from ..search.paired import INSIDE, OUTSIDE, STRADDLES, against_band
from .records import ordered

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
