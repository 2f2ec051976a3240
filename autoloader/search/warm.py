"""The warm start: a re-tune measures the last pick first, and stops early when it still holds.

# NOTE [ Warm start ]
# A nightly re-tune mostly finds what it found the night before, and a full search to say so
# costs the whole budget. So a ``WarmStart`` measures first the stored pick, the strategy's rule,
# then the pick's ``neighbours`` (one step along each setting but the worker count). From this
# hardware's own last result, when the pick re-measures within its tie of the stored rate
# (``hold_tie``) and nothing measured reads clearly ahead of it, the search ends there and the
# final re-measures the strategy's finalists as usual; once the pick reads otherwise, the search
# takes over at once from these measurements. From other hardware's result there is no early
# stop: its pick, its workers scaled to this machine's CPUs, is only a first guess. Every warm
# config is measured here (NOTE [ Runs in a study ] in store/runs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .codec import Stored, stored
from .policy import HOLD_TIE, RATE_SHIFT
from .results import OK, TrialResult
from .settings import SETTINGS
from .space import LoaderConfig, SearchSpace
from .model_first import Strategy


@dataclass(frozen=True)
class WarmStart(Stored):
    """What a run measures first (NOTE [ Warm start ])."""
    pick: LoaderConfig               # the stored pick (scaled to this machine when from another)
    rate: float = stored(key="samples_per_s", positive=True)   # its stored rate
    rel_interval: float | None = None
    may_stop: bool = False           # this hardware's own result: an early stop is allowed
    neighbours: bool = stored(True, read=False, write=False)   # measure the pick's neighbours too


def neighbours(config: LoaderConfig, space: SearchSpace) -> list[LoaderConfig]:
    """Configs one step from ``config`` along each knob's ``step``, in their ranks' order."""
    out = []
    stepped = sorted((k for k in SETTINGS if k.step is not None and config.applies(k)), key=lambda k: k.step.rank)
    for knob in stepped:
        value, offered = config[knob], space.offered(knob)
        if knob.step.adjacent:
            ordered = sorted(offered)
            if value in ordered:
                at = ordered.index(value)
                out += [config.replace(**{knob.name: ordered[i]})
                        for i in (at - 1, at + 1) if 0 <= i < len(ordered)]
        else:
            out += [config.replace(**{knob.name: v}) for v in offered if v != value]
    return [c for c in out if space.contains(c) and c != config]


def scaled(config: LoaderConfig, their_cpus: int, my_cpus: int) -> LoaderConfig:
    """Another machine's pick with its worker count in proportion to this machine's CPUs."""
    if not config.num_workers:
        return config
    return config.replace(num_workers=max(1, round(config.num_workers * my_cpus / max(1, their_cpus))))


def hold_tie(warm: WarmStart, now: TrialResult) -> float:
    """HOLD_TIE, widened by the two readings' intervals (a burst is noisier than a final), up to RATE_SHIFT."""
    spread = sum(x for x in (warm.rel_interval, now.rel_interval) if x is not None and math.isfinite(x))
    return min(RATE_SHIFT, max(HOLD_TIE, spread))


def holds(warm: WarmStart, history: Sequence[TrialResult]) -> bool:
    """The stored pick reads within its tie of the stored rate, and nothing clearly ahead of it."""
    now = next((t for t in history if t.config == warm.pick), None)
    if now is None or now.status != OK or not now.samples_per_s or now.pruned:
        return False
    tie = hold_tie(warm, now)
    if abs(now.samples_per_s / warm.rate - 1) > tie:
        return False
    return not any(t.status == OK and t.samples_per_s and t.samples_per_s > now.samples_per_s * (1 + tie)
                   for t in history)


class Warmed:
    """``inner`` (a Strategy) with the warm start's configs first; everything else is its own."""

    def __init__(self, inner: Strategy, warm: WarmStart, space: SearchSpace):
        self.inner, self.warm = inner, warm
        # The rule second, so that the final holds it however soon the clock ends the search; a
        # pick past the cores beside num_workers = CPUs (NOTE [ Past the cores ] in choice.py).
        first = [warm.pick] + ([inner.rule] if warm.may_stop and inner.rule is not None else [])
        if inner.cpus is not None and warm.pick.num_workers > inner.cpus:
            first.append(warm.pick.replace(num_workers=inner.cpus))
        first += list(neighbours(warm.pick, space)) if warm.neighbours else []
        self.first = list(dict.fromkeys(c for c in first if space.contains(c)))
        self.stopped_early = False

    def propose(self, history: Sequence[TrialResult]) -> LoaderConfig | None:
        if self.first and self.first[0] == self.warm.pick:
            done = {t.config for t in history}
            if self.warm.pick not in done:
                return self.warm.pick
            if holds(self.warm, history):
                # The pick still reads as it did: its neighbours, then (this hardware) the end.
                for config in self.first[1:]:
                    if config not in done:
                        return config
                if self.warm.may_stop:
                    self.stopped_early = True
                    return None
        return self.inner.propose(history)   # a pick that moved hands over to the search at once

    def __getattr__(self, name: str):
        return getattr(self.__dict__["inner"], name)   # all but the warm start's own is the inner's


def warmed(strategy: Strategy, warm: WarmStart | None, space: SearchSpace) -> Strategy:
    return strategy if warm is None else Warmed(strategy, warm, space)


