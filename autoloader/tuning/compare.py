"""What changed since the last tuning of the same problem: the question a nightly re-tune asks.

Results are stored per hardware (``<out>/<hardware-fingerprint>/<dataset-key>.json``) and the
dataset key does not name the hardware, so a run on new hardware finds the same problem's
result from the old one under the same ``--out``. The comparison is made before the new result
is written, against this hardware's previous result if there is one, else the newest from other
hardware.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from ..search.config import TunedConfig
from ..search.policy import RATE_SHIFT, SETTINGS_TIE
from ..search.space import TUNED_SETTINGS
from ..store.study import read_json
from ..store.validate import load_result
from ..store.versions import reuse_problem


@dataclass(frozen=True)
class Change:
    """One DataLoader setting that differs from the previous pick."""
    setting: str
    before: object
    after: object


@dataclass(frozen=True)
class Comparison:
    """This run's pick against the previous result for the same problem."""
    previous_path: str
    previous_hardware: str
    same_hardware: bool
    changes: tuple[Change, ...]
    rate_before: float
    rate_after: float
    previous_pick_now: float | None = None   # this run's rate for the previous pick, if it measured it
    # Why the previous result's figures are not this autoloader's (NOTE [ Measurement format ]).
    measured_differently: str | None = None

    @property
    def rate_ratio(self) -> float:
        return self.rate_after / self.rate_before

    @property
    def rate_shifted(self) -> bool:
        return abs(self.rate_ratio - 1) > RATE_SHIFT

    @property
    def settings_tie(self) -> bool:
        """The settings differ, but the previous pick read within SETTINGS_TIE of the new one here."""
        return (bool(self.changes) and self.previous_pick_now is not None
                and self.previous_pick_now >= (1 - SETTINGS_TIE) * self.rate_after)

    @property
    def changed(self) -> bool:
        """A setting differs (and not by a tie), or the rate moved past what noise explains, or
        the two were measured differently (then nothing can be said to be unchanged)."""
        return (bool(self.changes) and not self.settings_tie) or self.rate_shifted or bool(self.measured_differently)

    def to_dict(self) -> dict:
        return {"previous_path": self.previous_path, "previous_hardware": self.previous_hardware,
                "same_hardware": self.same_hardware, "changed": self.changed,
                "changes": [{"setting": c.setting, "before": c.before, "after": c.after} for c in self.changes],
                "samples_per_s_before": self.rate_before, "samples_per_s_after": self.rate_after,
                "rate_ratio": self.rate_ratio, "rate_shifted": self.rate_shifted,
                "previous_pick_now": self.previous_pick_now, "settings_tie": self.settings_tie,
                "measured_differently": self.measured_differently}


def compare(previous: TunedConfig, current: TunedConfig, previous_path: str,
            previous_pick_now: float | None = None, measured_differently: str | None = None) -> Comparison:
    """``previous_pick_now``: the previous pick's rate in the current run, when it was measured;
    ``measured_differently``: why the previous figures are not comparable (``format_note``)."""
    before = previous.config.loader_kwargs()
    after = current.config.loader_kwargs()
    changes = tuple(Change(s, before.get(s), after.get(s)) for s in TUNED_SETTINGS if before.get(s) != after.get(s))
    old_hw = previous.hardware.get("fingerprint", "unknown")
    return Comparison(previous_path=previous_path, previous_hardware=old_hw,
                      same_hardware=old_hw == current.hardware.get("fingerprint"), changes=changes,
                      rate_before=previous.samples_per_s, rate_after=current.samples_per_s,
                      previous_pick_now=previous_pick_now, measured_differently=measured_differently)


def format_note(path: str) -> str | None:
    """Why the result at ``path`` was measured differently from this autoloader, or None."""
    data = read_json(path)
    return reuse_problem(data) if isinstance(data, dict) else None


def previous_result(out: str, fingerprint: str, key: str) -> tuple[str, TunedConfig] | None:
    """The last stored result for the problem ``key`` under ``out``: this hardware's, else the
    newest (by file time) from other hardware. Files that fail validate.py's checks are passed
    over, each with a warning that names it."""
    mine = os.path.join(out, fingerprint, key + ".json")
    others = sorted((p for p in glob.glob(os.path.join(glob.escape(out), "*", glob.escape(key) + ".json"))
                     if os.path.abspath(p) != os.path.abspath(mine)), key=os.path.getmtime, reverse=True)
    for path in [mine] + others:
        found = load_result(path)   # one that fails its checks is passed over, with a warning
        if found is not None:
            return path, found
    return None
