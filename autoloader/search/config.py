"""The tuned config: what the tuner hands back and stores (store/snippet.py writes its snippet)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import seeding
from .codec import Stored, stored
from .knee import Knee
from .space import LoaderConfig

# The problem's key of an IterableDataset (inputs/problem.py names its length "iter").
_ITERABLE_KEY = re.compile(r"-niter-[0-9a-f]+$")


def iterable_key(key: object) -> bool:
    """Whether a problem's key is an IterableDataset's (which DataLoader refuses ``shuffle`` for)."""
    return isinstance(key, str) and _ITERABLE_KEY.search(key) is not None


@dataclass(frozen=True)
class TunedConfig(Stored):
    """The chosen DataLoader settings with the figures that chose them."""

    config: LoaderConfig
    samples_per_s: float = stored(positive=True)   # median of the interleaved final re-measurement
    rel_interval: float | None                     # 95% half-width of the pick's rate, relative
    baseline_samples_per_s: float | None = stored(positive=True)  # num_workers=0, same protocol
    knee: Knee | None
    hardware: dict = stored(absent={})   # inputs/hardware.Hardware's fields (read by store/records.StoredHardware)
    dataset_key: str = stored(nonempty=True)
    device: str = "cpu"
    # Why the pick is not judged (NOTE [ A provisional pick ] in choice.py), None when it is:
    # written only when set, so a judged result's file is as before.
    provisional: str | None = stored(None, sparse=True)

    def loader_kwargs(self) -> dict:
        """Keyword arguments for ``DataLoader``, the seeded ``worker_init_fn`` included."""
        kwargs = self.config.loader_kwargs()
        if self.config.num_workers:
            kwargs["worker_init_fn"] = seeding.seed_worker
        return kwargs
