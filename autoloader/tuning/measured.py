"""The parts of a run's result record that are plain functions of what the run measured."""

from __future__ import annotations

from typing import Sequence

from ..inputs.problem import Problem
from ..probe.protocol import DatasetInfo
from ..search.choice import Finalist
from ..search.config import Knee, find_knee
from ..search.model import Calibration, Model
from ..search.model_first import Strategy
from ..search.profile import Profile
from ..search.results import OK, TrialResult
from ..search.settings import ORDER
from ..search.space import LoaderConfig
from ..store.records import DatasetRecord


def knee_of(strategy: Strategy, history: Sequence[TrialResult]) -> Knee | None:
    """The knee of the worker curve the strategy reports."""
    curve = strategy.curve(history)
    return find_knee(curve) if curve else None


def reorder_gain(model: Model, config: LoaderConfig, calib: Calibration, allowed: bool) -> float | None:
    """What out-of-order delivery is predicted to gain over the pick, when the user did not allow it."""
    if allowed or not config.applies(ORDER):
        return None
    base = model.predict(config, calib).samples_per_s
    return model.predict(ORDER.proposed(config), calib).samples_per_s / base - 1.0 if base else None


def fallback_profile(info: DatasetInfo, batch_size: int, cpus: int) -> Profile:
    """A profile from the set-up's one batch alone, for when the profile could not be measured:
    every other cost starts at zero, for the bursts to correct."""
    return Profile(batch_size=batch_size, sample_s=(info.sample_seconds,), collate_s=0.0,
                   sample_bytes=info.sample_bytes, recv_s=0.0, pin_s=0.0, h2d_pinned_s=0.0, h2d_pageable_s=0.0,
                   step_s=0.0, startup_s=0.0, worker_pss=None, cpus=cpus,
                   epoch_batches=-(-info.length // batch_size) if info.length else None, measured=False)


def dataset_record(problem: Problem) -> DatasetRecord:
    return DatasetRecord(problem.dataset.name, problem.dataset_class, problem.length, problem.content,
                         problem.version)


def baseline_rate(finals: Sequence[Finalist], history: Sequence[TrialResult]) -> float | None:
    """num_workers=0's rate in the same protocol as the pick: the final's when it was there."""
    return next((f.median for f in finals if f.config.num_workers == 0), None) or next(
        (t.samples_per_s for t in history if t.status == OK and t.config.num_workers == 0), None)


def setup_parts(info, since: float) -> list[tuple[str, float, float]]:
    """The trial process's set-up parts on the run's clock (``since``: the run's start, monotonic)."""
    return [(what, start - since, end - since) for what, start, end in getattr(info, "setup_parts", ()) or ()]


def profile_parts(profile, start: float) -> list[tuple[str, float, float]]:
    """The profile's stages end to end from ``start``."""
    parts, at = [], start
    for what, seconds in (profile.stage_s if profile is not None else ()):
        parts.append((f"profile: {what}", at, at + seconds))
        at += seconds
    return parts
