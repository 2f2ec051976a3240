"""``WhatIfClaim``: one what-if as a result stores it, predicted beside measured, and how sure.

A result's ``what_ifs`` says, for each change the explanation asked the model about (explain/
whatif.py), the rate and gain predicted, the gain measured where the run measured the change, and
on what that measurement rests: paired rounds of the final give the gain a 95% interval (NOTE
[ Paired rounds ] in search/paired.py); separate bursts give a figure, never an interval. Read by
``what_ifs`` below, every field checked (NOTE [ Result formats ] in result.py: an older result
has none, read as none).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.paired import BURSTS, PAIRED
from . import checks
from .checks import InvalidRecord


@dataclass(frozen=True)
class WhatIfClaim:
    """``name``: the what-if's (explain/whatif.py's WhatIf.name); ``change``: what it changes,
    in words; ``predicted_gain``: over the pick's predicted rate; ``measured_gain``: the
    measured config over the pick, where measured (``measured_from``: PAIRED or BURSTS), with
    ``measured_interval`` [lo, hi] of the gain from ``rounds`` paired rounds (None from one
    round or from bursts); ``sure``: all of that in words, as the report prints it."""

    name: str
    change: str
    predicted_samples_per_s: float
    predicted_gain: float
    measured_gain: float | None = None
    measured_from: str | None = None
    measured_interval: tuple[float, float] | None = None
    rounds: int = 0
    sure: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "change": self.change, "predicted_samples_per_s": self.predicted_samples_per_s,
                "predicted_gain": self.predicted_gain, "measured_gain": self.measured_gain,
                "measured_from": self.measured_from,
                "measured_interval": list(self.measured_interval) if self.measured_interval else None,
                "rounds": self.rounds, "sure": self.sure}

    @classmethod
    def from_dict(cls, data: object, name: str = "what_ifs[0]") -> WhatIfClaim:
        """The stored claim, every field checked: InvalidRecord naming the one that is not."""
        data = checks.mapping(data, name)
        words = {k: checks.text(data.get(k), f"{name}.{k}", optional=False) for k in ("name", "change")}
        interval = checks.items(data.get("measured_interval"), f"{name}.measured_interval")
        for x in interval:
            checks.number(x, f"{name}.measured_interval", optional=False, signed=True)
        if interval and (len(interval) != 2 or interval[0] > interval[1]):
            raise InvalidRecord(f"{name}.measured_interval is {interval!r}, not [low, high]")
        source = checks.text(data.get("measured_from"), f"{name}.measured_from")
        if source not in (None, PAIRED, BURSTS):
            raise InvalidRecord(f"{name}.measured_from is {source!r}, not {PAIRED!r} or {BURSTS!r}")
        return cls(words["name"], words["change"],
                   checks.number(data.get("predicted_samples_per_s"), f"{name}.predicted_samples_per_s",
                                 optional=False),
                   checks.number(data.get("predicted_gain"), f"{name}.predicted_gain", optional=False, signed=True),
                   checks.number(data.get("measured_gain"), f"{name}.measured_gain", signed=True), source,
                   tuple(interval) if interval else None,
                   checks.count(data.get("rounds"), f"{name}.rounds") or 0,
                   checks.text(data.get("sure"), f"{name}.sure") or "")


def what_ifs(value: object, name: str = "what_ifs") -> tuple[WhatIfClaim, ...]:
    """A result's stored what-ifs (absent: none)."""
    return tuple(WhatIfClaim.from_dict(item, f"{name}[{i}]") for i, item in enumerate(checks.items(value, name)))


__all__ = ["BURSTS", "PAIRED", "WhatIfClaim", "what_ifs"]
