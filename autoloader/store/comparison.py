"""``Comparison``: a result against the previous one of its problem, as the result stores it
(``since``). What is compared and how: NOTE [ Drift ] in tuning/compare.py, which makes one."""

from __future__ import annotations

from dataclasses import dataclass

from ..search.load import MachineLoad
from ..search.paired import INSIDE, OUTSIDE, STRADDLES, against_band
from . import checks
from .checks import InvalidRecord
from .parts import machine_load

BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED = "baseline", "new hardware", "unchanged", "drifted"
INCONCLUSIVE = "inconclusive"
STATUSES = (BASELINE, NEW_HARDWARE, UNCHANGED, DRIFTED, INCONCLUSIVE)


@dataclass(frozen=True)
class Change:
    """One DataLoader setting that differs from the previous pick."""
    setting: str
    before: object
    after: object


@dataclass(frozen=True)
class Comparison:
    """This run's result against the previous one of the same problem (NOTE [ Drift ])."""
    status: str
    reasons: tuple[str, ...] = ()                  # what went past a threshold
    previous_path: str | None = None
    previous_hardware: str | None = None
    previous_finished_at: str | None = None
    same_hardware: bool = True
    changes: tuple[Change, ...] = ()
    settings_tie: bool = False
    old_pick_now: float | None = None              # the old pick's rate tonight, when measured
    pick_rate_before: float | None = None          # the old pick's rate when it was picked
    pick_rate_after: float | None = None
    knee_before: int | None = None
    knee_after: int | None = None
    memory_per_worker_before: float | None = None  # bytes
    memory_per_worker_after: float | None = None
    hardware_changes: tuple[tuple[str, object, object], ...] = ()
    not_comparable: str | None = None
    paired: tuple[float, ...] = ()                 # the new pick over the old, round by round tonight
    rate_noise: float | None = None                # the rate interval's half-width, a share of the ratio
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
    def drifted(self) -> bool:
        return self.status == DRIFTED

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
        """Where the rate's interval lies against the band 1 +- ``threshold`` (search/paired.py):
        OUTSIDE, INSIDE or STRADDLES; None when no rate was compared. A comparison stored before
        intervals were (no ``rate_interval``, a ``rate_noise``) is judged as it was then: past
        both the threshold and its noise, else inside."""
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

    def to_dict(self) -> dict:
        return {"status": self.status, "changed": self.changed, "reasons": list(self.reasons),
                "previous_path": self.previous_path, "previous_hardware": self.previous_hardware,
                "previous_finished_at": self.previous_finished_at, "same_hardware": self.same_hardware,
                "pick_changed": bool(self.changes),
                "changes": [{"setting": c.setting, "before": c.before, "after": c.after} for c in self.changes],
                "settings_tie": self.settings_tie, "old_pick_now": self.old_pick_now,
                "samples_per_s_before": self.pick_rate_before, "samples_per_s_after": self.pick_rate_after,
                "rate_ratio": self.rate_ratio, "rate_shifted": self.rate_shifted,
                "knee_before": self.knee_before, "knee_after": self.knee_after,
                "memory_per_worker_before": self.memory_per_worker_before,
                "memory_per_worker_after": self.memory_per_worker_after, "memory_ratio": self.memory_ratio,
                "hardware_changes": [{"field": f, "before": b, "after": a} for f, b, a in self.hardware_changes],
                "not_comparable": self.not_comparable, "paired": list(self.paired), "rate_noise": self.rate_noise,
                "inconclusive": self.inconclusive, "load": self.load.to_dict() if self.load is not None else None,
                "set_aside": list(self.set_aside),
                "rate_interval": list(self.rate_interval) if self.rate_interval else None,
                "pick_interval": list(self.pick_interval) if self.pick_interval else None,
                "rounds": self.rounds, "undecided": self.undecided}


def comparison(data: object, name: str = "since") -> Comparison | None:
    """The comparison a result stores as ``name``, checked; None when it has none. Read from any
    format written: the rates before and after were ``pick_rate_*`` before they were
    ``samples_per_s_*``; what the record derives (``changed``, ``rate_ratio``...) is not read."""
    data = checks.mapping(data, name, optional=True)
    if data is None:
        return None
    status = data.get("status")
    if status not in STATUSES:
        raise InvalidRecord(f"{name}.status is {status!r}, not one of {', '.join(STATUSES)}")
    number = lambda key, **kind: checks.number(data.get(key), f"{name}.{key}", **kind)  # noqa: E731
    words = lambda key: tuple(checks.text(x, f"{name}.{key}[{i}]", optional=False)  # noqa: E731
                              for i, x in enumerate(checks.items(data.get(key), f"{name}.{key}")))
    changes, moved = [], []
    for i, c in enumerate(checks.items(data.get("changes"), f"{name}.changes")):
        c = checks.mapping(c, f"{name}.changes[{i}]")
        changes.append(Change(checks.text(c.get("setting"), f"{name}.changes[{i}].setting", optional=False),
                              checks.scalar(c.get("before"), f"{name}.changes[{i}].before"),
                              checks.scalar(c.get("after"), f"{name}.changes[{i}].after")))
    for i, h in enumerate(checks.items(data.get("hardware_changes"), f"{name}.hardware_changes")):
        h = checks.mapping(h, f"{name}.hardware_changes[{i}]")
        moved.append((checks.text(h.get("field"), f"{name}.hardware_changes[{i}].field", optional=False),
                      h.get("before"), h.get("after")))
    before = "samples_per_s_before" if "samples_per_s_before" in data else "pick_rate_before"
    after = "samples_per_s_after" if "samples_per_s_after" in data else "pick_rate_after"
    return Comparison(
        status, reasons=words("reasons"), previous_path=checks.text(data.get("previous_path"), f"{name}.previous_path"),
        previous_hardware=checks.text(data.get("previous_hardware"), f"{name}.previous_hardware"),
        previous_finished_at=checks.moment(data.get("previous_finished_at"), f"{name}.previous_finished_at"),
        same_hardware=checks.flag(data.get("same_hardware", True), f"{name}.same_hardware"),
        changes=tuple(changes), settings_tie=checks.flag(data.get("settings_tie", False), f"{name}.settings_tie"),
        old_pick_now=number("old_pick_now"), pick_rate_before=number(before), pick_rate_after=number(after),
        knee_before=checks.count(data.get("knee_before"), f"{name}.knee_before"),
        knee_after=checks.count(data.get("knee_after"), f"{name}.knee_after"),
        memory_per_worker_before=number("memory_per_worker_before", signed=True),
        memory_per_worker_after=number("memory_per_worker_after", signed=True),
        hardware_changes=tuple(moved), not_comparable=checks.text(data.get("not_comparable"), f"{name}.not_comparable"),
        paired=checks.numbers(data.get("paired"), f"{name}.paired"), rate_noise=number("rate_noise"),
        load=machine_load(data.get("load"), f"{name}.load"), set_aside=words("set_aside"),
        rate_interval=_interval(data.get("rate_interval"), f"{name}.rate_interval"),
        pick_interval=_interval(data.get("pick_interval"), f"{name}.pick_interval"),
        rounds=checks.count(data.get("rounds"), f"{name}.rounds") or 0,
        undecided=checks.text(data.get("undecided"), f"{name}.undecided"))


def _interval(data: object, name: str) -> tuple[float, float] | None:
    """A stored [lo, hi], checked: two numbers, lo <= hi."""
    if data is None:
        return None
    pair = checks.numbers(data, name)
    if len(pair) != 2 or pair[0] > pair[1]:
        raise InvalidRecord(f"{name} is {data!r}, not [lo, hi] with lo <= hi")
    return pair[0], pair[1]
