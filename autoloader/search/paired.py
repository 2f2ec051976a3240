"""A ratio of two configs' rates with its 95% interval, from paired rounds.

NOTE [ Paired rounds ]
The interleaved final measures its configs one after another in each round (A B C A B C ...), so
the two readings of one round ran seconds apart, under the same drift; their ratio cancels what
the round shares. So two configs are compared on the rounds both were measured in, and nothing
else: d_i = log(a_i / b_i), the ratio exp(mean d), its 95% interval exp(mean d ± t(0.975, n-1)
sd(d) / sqrt(n)). One round gives no spread: its ratio is said, never judged. Separate bursts
share no round and move by more than most gaps the tuner judges: a comparison resting on them
says so and claims no interval.

NOTE [ Sure enough ]
The final adds rounds until the pick's comparison with the rule is settled (``Ratio.settled``):
its interval above or below 1 (a gap), or inside the noise band EQUIVALENT_WITHIN (a tie: the
same config drifts that much in one process). Otherwise it is indistinguishable, and the cheaper
of the two is kept: nothing measured supports paying more.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from .policy import MIN_TOLERANCE

# Where a measured gain is from: the final's paired rounds, or separate bursts (no interval).
PAIRED, BURSTS = "paired", "bursts"

# An interval inside 1 ± this is a tie, settled: NOTE [ Sure enough ].
EQUIVALENT_WITHIN = MIN_TOLERANCE

# Student's t at 0.975 for 1..30 degrees of freedom; past 30, the Cornish-Fisher expansion.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """Student's t quantile at 0.975 for ``df`` degrees of freedom: infinity below one (nothing known)."""
    if df < 1:
        return math.inf
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Ratio:
    """One config's rate over another's from ``rounds`` paired rounds, with its 95% interval [lo, hi]."""

    ratio: float
    lo: float | None = None
    hi: float | None = None
    rounds: int = 1

    @property
    def judged(self) -> bool:
        """An interval is stated (``paired_ratio`` states none for one round; a reading's own spread,
        the in-run climb's, can give one pair an interval)."""
        return self.lo is not None and self.hi is not None

    @property
    def faster(self) -> bool:
        return self.judged and self.lo > 1.0

    @property
    def slower(self) -> bool:
        return self.judged and self.hi < 1.0

    def within(self, band: float = EQUIVALENT_WITHIN) -> bool:
        """The whole interval inside 1 ± ``band``."""
        return self.judged and self.lo >= 1.0 - band and self.hi <= 1.0 + band

    def settled(self, band: float = EQUIVALENT_WITHIN) -> bool:
        """A gap either way, or a tie: NOTE [ Sure enough ]."""
        return self.faster or self.slower or self.within(band)

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.lo, self.hi) if self.judged else None

    def to_dict(self) -> dict:
        return {"ratio": self.ratio, "interval": list(self.interval) if self.judged else None, "rounds": self.rounds}


def paired_ratio(pairs: Sequence[tuple[float, float]]) -> Ratio | None:
    """a/b over ``pairs`` [(a_i, b_i), ...] of positive rates (NOTE [ Paired rounds ]); None if none."""
    logs = [math.log(a / b) for a, b in pairs if a and b and a > 0 and b > 0]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return Ratio(math.exp(mean), rounds=1)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def by_rounds(a: Mapping[int, float], b: Mapping[int, float]) -> Ratio | None:
    """a over b on the rounds both were measured in (each a round index -> rate)."""
    return paired_ratio([(a[r], b[r]) for r in sorted(a.keys() & b.keys())])


def signed_share(x: float) -> str:
    """+9%, −4% (a true minus)."""
    value = round(x * 100)
    return f"{'−' if value < 0 else '+'}{abs(value)}%"


def signed_span(lo: float, hi: float) -> str:
    """−4…+9%."""
    return f"{signed_share(lo)[:-1]}…{signed_share(hi)}"


def _span(lo: float, hi: float) -> str:
    """3-8% (a gap under 1% rounds up to 1)."""
    low, high = max(1, round(lo * 100)), max(1, round(hi * 100))
    return f"{low}-{high}%" if low != high else f"{low}%"


def compared(r: Ratio | None, other: str, unpaired: str | None = None) -> str:
    """The words a ratio of the pick over ``other`` supports, and no more ("faster than the rule by
    3-8%"); ``unpaired``: what the run has instead when no round paired them."""
    if r is None:
        return f"not paired with {other} ({unpaired}): no interval" if unpaired else f"not measured against {other}"
    if not r.judged:
        return f"one round against {other}: not judged"
    if r.faster and r.lo >= 2.0:
        low, high = f"{r.lo:.1f}", f"{r.hi:.1f}"
        return f"{low}{'-' + high if high != low else ''}x as fast as {other}"
    if r.faster:
        return f"faster than {other} by {_span(r.lo - 1.0, r.hi - 1.0)}"
    if r.slower and r.hi <= 0.5:
        return f"slower than {other}: {r.lo:.2f}-{r.hi:.2f}x its rate"
    if r.slower:
        return f"slower than {other} by {_span(1.0 - r.hi, 1.0 - r.lo)}"
    return f"indistinguishable from {other} ({signed_span(r.lo - 1.0, r.hi - 1.0)})"


# --- The nightly's comparisons (tuning/compare.py, store/records.py: NOTE [ Drift ]) ----------
# Bounds as plain numbers, (ratio, lo, hi), with (0, inf) where the readings show no spread.

OUTSIDE, INSIDE, STRADDLES = "outside", "inside", "straddles"


def paired_bounds(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``a`` over ``b`` from readings paired by index: ``paired_ratio`` as (ratio, lo, hi), (ratio,
    0, inf) from one round."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired readings need as many of each, at least one: {len(a)} and {len(b)}")
    r = paired_ratio(list(zip(a, b)))
    if r is None or not r.judged:
        return math.exp(statistics.fmean(math.log(x / y) for x, y in zip(a, b))), 0.0, math.inf
    return r.ratio, r.lo, r.hi


def runs_ratio(now: Sequence[float], then: Sequence[float]) -> tuple[float, float, float]:
    """One config's rate in two runs, ``now`` over ``then``: (ratio, lo, hi), Student's two-sample
    interval with one spread pooled from both (the same config is as noisy in either run);
    (ratio, 0, inf) from fewer than three readings."""
    if not now or not then:
        raise ValueError(f"each run needs a reading: {len(now)} and {len(then)}")
    x, y = [math.log(v) for v in now], [math.log(v) for v in then]
    mx, my = statistics.fmean(x), statistics.fmean(y)
    diff, df = mx - my, len(x) + len(y) - 2
    if df < 1:
        return math.exp(diff), 0.0, math.inf
    pooled = (sum((v - mx) ** 2 for v in x) + sum((v - my) ** 2 for v in y)) / df
    half = t95(df) * math.sqrt(pooled * (1 / len(x) + 1 / len(y)))
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def against_band(lo: float, hi: float, band: float) -> str:
    """Where [lo, hi] lies against [1 - band, 1 + band]: OUTSIDE (a change), INSIDE, or STRADDLES."""
    if hi < 1 - band or lo > 1 + band:
        return OUTSIDE
    if lo >= 1 - band and hi <= 1 + band:
        return INSIDE
    return STRADDLES
