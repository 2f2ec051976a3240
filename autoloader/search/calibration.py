"""The model's efficiency terms (``Calibration``), fitted to the bursts: NOTE [ The pipeline
model ] in model.py."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Sequence

from .model import Calibration, Model, Prediction
from .policy import CPU_FIT_GAIN, LOADER_BOUND_WAIT, MAX_CORRECTION
from .results import OK, TrialResult


def calibrate(model: Model, history: Sequence[TrialResult]) -> Calibration:
    """Fit the efficiency terms to the measured bursts, each to the stage the burst speaks for
    (``_term``); bursts without workers fit their own. With worker-bound bursts at two or more
    counts, the CPUs the workers really get are fitted too."""
    measured = [t for t in history if t.status == OK and t.samples_per_s and not t.pruned]
    if not measured:
        return Calibration()
    calib = _fit_terms(model, measured, Calibration())
    bound = [t for t in measured if t.config.num_workers and _term(t, model.predict(t.config, calib)) == "worker"]
    counts = sorted({t.config.num_workers for t in bound})
    if len(counts) >= 2:
        best, best_error = calib, _error(model, bound, calib)
        top = model.profile.cpus
        # A cap shows only between the counts measured; one below them all fits their noise.
        for eff in [top * f / 16 for f in range(4, 16) if counts[0] <= top * f / 16 < counts[-1]]:
            trial_calib = _fit_terms(model, measured, replace(Calibration(), cpus=eff))
            error = _error(model, bound, trial_calib)
            if error < best_error * CPU_FIT_GAIN:   # a clear improvement, not noise
                best, best_error = trial_calib, error
        calib = best
    # The default start method's start-ups (another's adds Model.method_startup_s), each less one
    # batch's own work.
    batch = model.profile.worker_batch_s() * calib.worker
    starts = [(t.config.num_workers, max(0.0, t.startup_s - batch)) for t in measured
              if t.config.num_workers and t.startup_s and t.config.multiprocessing_context is None]
    base, per_worker = _line(starts) if starts else (None, 0.0)
    # NOTE [ An epoch boundary of kept workers ] in model.py.
    boundaries = [(t.config.num_workers, t.epoch_restart_s) for t in measured
                  if t.config.num_workers and t.config.persistent_workers and t.epochs_crossed
                  and t.epoch_restart_s is not None]
    restart_base, restart_per_worker = _line(boundaries) if boundaries else (None, 0.0)
    return replace(calib, startup_base=base, startup_per_worker=per_worker,
                   restart_base=restart_base, restart_per_worker=restart_per_worker)


def _fit_terms(model: Model, measured: Sequence[TrialResult], calib: Calibration) -> Calibration:
    for _ in range(3):
        ratios: dict[str, list[float]] = {"worker": [], "main": [], "pin": [], "local": []}
        for trial in measured:
            predicted = model.predict(trial.config, calib)
            ratio = predicted.steady_samples_per_s / (trial.steady_samples_per_s or trial.samples_per_s)
            if not math.isfinite(ratio) or ratio <= 0:
                continue
            term = "local" if not trial.config.num_workers else _term(trial, predicted)
            ratios[term].append(ratio)
        # A term a burst corrected stays fitted when, so corrected, it speaks for another stage.
        calib = replace(calib, **{t: _clamp(getattr(calib, t) * _geomean(r)) for t, r in ratios.items()},
                        **{f"{t}_fits": max(getattr(calib, f"{t}_fits"), len(ratios[t]))
                           for t in ("worker", "main", "pin")})
    return calib


def _error(model: Model, trials: Sequence[TrialResult], calib: Calibration) -> float:
    return sum(math.log(model.predict(t.config, calib).steady_samples_per_s
                        / (t.steady_samples_per_s or t.samples_per_s)) ** 2 for t in trials)


def _term(trial: TrialResult, predicted: Prediction) -> str:
    """The term a burst corrects: a loop that waited for data was held by the workers (or the pin
    thread, where the model says it holds), one that did not by the loop."""
    if trial.wait_fraction is None:
        waited = predicted.bound in ("workers", "pin")
    else:
        # Less the loop's own receive, which is inside next() but is the loop's work.
        waited = trial.wait_fraction - predicted.receive_share > LOADER_BOUND_WAIT
    if not waited:
        # Fed where the model said the pin thread holds it: the pin thread was faster than modelled.
        measured = trial.steady_samples_per_s or trial.samples_per_s or 0.0
        return "pin" if predicted.bound == "pin" and measured > predicted.steady_samples_per_s else "main"
    return "pin" if predicted.bound == "pin" else "worker"


def _geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.median(math.log(v) for v in values)) if values else 1.0


def _clamp(value: float) -> float:
    return min(MAX_CORRECTION, max(1.0 / MAX_CORRECTION, value))


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(base, cost per worker) of seconds against workers, least squares with neither below 0;
    the mean alone until two worker counts are measured."""
    counts = {n for n, _ in points}
    mean_n = statistics.fmean(n for n, _ in points)
    mean_s = statistics.fmean(s for _, s in points)
    if len(counts) < 2:
        return mean_s, 0.0
    var = sum((n - mean_n) ** 2 for n, _ in points)
    slope = max(0.0, sum((n - mean_n) * (s - mean_s) for n, s in points) / var)
    if mean_s - slope * mean_n >= 0:
        return mean_s - slope * mean_n, slope
    # The base at its bound: the least-squares line through the origin.
    return 0.0, sum(n * s for n, s in points) / sum(n * n for n, _ in points)
