"""``WhatIfClaim``: one what-if as a result stores it, predicted beside measured, and how sure.

A result's ``what_ifs`` says, for each change the explanation asked the model about (explain/
whatif.py), the rate and gain predicted, the gain measured where the run measured the change, and
on what that measurement rests: paired rounds of the final give the gain a 95% interval (NOTE
[ Paired rounds ] in search/paired.py); separate bursts give a figure, never an interval. Read
and written by the codec (search/codec.py; NOTE [ Result formats ] in result.py: an older result
has none, read as none).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.codec import Stored, stored
from ..search.paired import BURSTS, PAIRED


@dataclass(frozen=True)
class WhatIfClaim(Stored):
    """``name``: the what-if's (explain/whatif.py's WhatIf.name); ``change``: what it changes,
    in words; ``predicted_gain``: over the pick's predicted rate; ``measured_gain``: the
    measured config over the pick, where measured (``measured_from``: PAIRED or BURSTS), with
    ``measured_interval`` [lo, hi] of the gain from ``rounds`` paired rounds (None from one
    round or from bursts); ``sure``: all of that in words, as the report prints it."""

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
        if self.measured_interval and self.measured_interval[0] > self.measured_interval[1]:
            raise ValueError(f"measured_interval is {list(self.measured_interval)!r}, not [low, high]")
        return self


__all__ = ["BURSTS", "PAIRED", "WhatIfClaim"]
