"""The tuned config: what the tuner hands back and stores (store/snippet.py writes its snippet)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .. import seeding
from .knee import Knee
from .space import LoaderConfig

# The problem's key of an IterableDataset (inputs/problem.py names its length "iter").
_ITERABLE_KEY = re.compile(r"-niter-[0-9a-f]+$")


def iterable_key(key: object) -> bool:
    """Whether a problem's key is an IterableDataset's (which DataLoader refuses ``shuffle`` for)."""
    return isinstance(key, str) and _ITERABLE_KEY.search(key) is not None


@dataclass(frozen=True)
class TunedConfig:
    """The chosen DataLoader settings with the figures that chose them."""

    config: LoaderConfig
    samples_per_s: float              # median of the interleaved final re-measurement
    rel_interval: float | None        # 95% half-width of the pick's rate, relative
    baseline_samples_per_s: float | None  # num_workers=0, same protocol
    knee: Knee | None
    hardware: dict
    dataset_key: str
    device: str
    # Why the pick is not judged (NOTE [ A provisional pick ] in choice.py), None when it is.
    provisional: str | None = None

    def loader_kwargs(self) -> dict:
        """Keyword arguments for ``DataLoader``, the seeded ``worker_init_fn`` included."""
        kwargs = self.config.loader_kwargs()
        if self.config.num_workers:
            kwargs["worker_init_fn"] = seeding.seed_worker
        return kwargs

    @property
    def speedup(self) -> float | None:
        if not self.baseline_samples_per_s:
            return None
        return self.samples_per_s / self.baseline_samples_per_s

    def to_dict(self) -> dict:
        # JSON has no infinity: an interval that could not be estimated is stored as null.
        rel_interval = self.rel_interval if self.rel_interval is None or math.isfinite(self.rel_interval) else None
        return {"config": self.config.loader_kwargs(), "samples_per_s": self.samples_per_s,
                "rel_interval": rel_interval, "baseline_samples_per_s": self.baseline_samples_per_s,
                "knee": self.knee.to_dict() if self.knee else None, "hardware": self.hardware,
                "dataset_key": self.dataset_key, "device": self.device,
                **({"provisional": self.provisional} if self.provisional else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "TunedConfig":
        return cls(LoaderConfig.from_dict(data["config"]), data["samples_per_s"], data.get("rel_interval"), data.get("baseline_samples_per_s"),
                   Knee.from_dict(data["knee"]) if data.get("knee") else None, data.get("hardware", {}),
                   data["dataset_key"], data.get("device", "cpu"), data.get("provisional"))
