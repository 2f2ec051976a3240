"""A ratio of two configs' rates with its 95% interval, from paired rounds (the same round's two
readings) or from two runs' readings of one config.

Rates are compared by their logarithms: a ratio's noise is multiplicative (a slower machine
slows both readings of a round by a share, not by an amount), and the log of a ratio is a
difference, whose mean and spread Student's t bounds. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

OUTSIDE, INSIDE, STRADDLES = "outside", "inside", "straddles"

# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def t95(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval at ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else 1.960 + 2.4 / df


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``a`` over ``b`` from paired readings (``a[i]`` and ``b[i]`` taken in the same round):
    (ratio, lo, hi), the geometric mean of the rounds' ratios and its 95% interval. One round
    shows no spread: its interval is (0, inf), nothing known."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired readings need as many of each, at least one: {len(a)} and {len(b)}")
    logs = [math.log(x / y) for x, y in zip(a, b)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def runs_ratio(now: Sequence[float], then: Sequence[float]) -> tuple[float, float, float]:
    """One config's rate in two runs, ``now`` over ``then`` (each a run's readings): (ratio, lo,
    hi) with a 95% interval. The runs' readings are not paired, so the interval is Student's for
    two samples with one spread, pooled from both: the same config on the same machine is as noisy
    in one run as in the other, and a run of one reading borrows the other's. Fewer than three
    readings in all show no spread: (0, inf)."""
    if not now or not then:
        raise ValueError(f"each run needs a reading: {len(now)} and {len(then)}")
    x, y = [math.log(v) for v in now], [math.log(v) for v in then]
    diff = statistics.fmean(x) - statistics.fmean(y)
    df = len(x) + len(y) - 2
    if df < 1:
        return math.exp(diff), 0.0, math.inf
    mx, my = statistics.fmean(x), statistics.fmean(y)
    pooled = (sum((v - mx) ** 2 for v in x) + sum((v - my) ** 2 for v in y)) / df
    half = t95(df) * math.sqrt(pooled * (1 / len(x) + 1 / len(y)))
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def against_band(lo: float, hi: float, band: float) -> str:
    """Where a ratio's interval [lo, hi] lies against the band [1 - band, 1 + band]: OUTSIDE
    when wholly outside it (a change), INSIDE when wholly inside (no change), STRADDLES when it
    crosses an edge (more rounds, or nothing can be said)."""
    if hi < 1 - band or lo > 1 + band:
        return OUTSIDE
    if lo >= 1 - band and hi <= 1 + band:
        return INSIDE
    return STRADDLES
