"""Stored records checked on load: a trial record in the study, a tuned-config result file.

Both carry a ``"format"`` field (FORMAT); a record without one was written before it existed and
is read as format 1, the same fields. Every value is checked for its type and range before a
record is used, so a file edited by hand, written by a newer autoloader or damaged on disk is
ignored with a warning that names it (``StoredStateWarning``; the CLI shows it), never applied
and never a traceback. The checks are what the records' own constructors need plus the bounds a
config can have (a count of workers no run would try is no config to hand out).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass

from ..errors import AutoloaderWarning
from ..search.config import TunedConfig
from ..search.knee import Knee
from ..search.policy import MAX_WORKERS_PER_CPU
from ..search.results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from ..search.settings import SETTINGS, WORKERS
from ..search.space import LoaderConfig
from .versions import reuse_problem

# Format 2 added the field itself and, in the study, the digest of the code a trial ran.
FORMAT = 2
_STATUSES = (OK, CONSTRAINT, FAILED, HANG)


class StoredStateWarning(AutoloaderWarning):
    """A stored record (a study's trial, a result file) was unreadable or invalid and is ignored."""


class InvalidRecord(ValueError):
    """Why a stored record cannot be used."""


def record_format(data: dict) -> int:
    """The record's format: 1 when absent; an InvalidRecord when not one this version reads."""
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise InvalidRecord(f"format {fmt!r} is not a format number")
    if fmt > FORMAT:
        raise InvalidRecord(f"format {fmt} was written by a newer autoloader (this one reads 1 to {FORMAT})")
    return fmt


def _number(data: dict, key: str, *, optional: bool = True, positive: bool = False) -> None:
    value = data.get(key)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value <= 0):
        raise InvalidRecord(f"{key} is {value!r}, not a {'positive' if positive else 'non-negative'} finite number")


def _count(data: dict, key: str, *, optional: bool = True) -> None:
    value = data.get(key)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRecord(f"{key} is {value!r}, not a count")


def _flag(data: dict, key: str, default: bool) -> None:
    if not isinstance(data.get(key, default), bool):
        raise InvalidRecord(f"{key} is {data.get(key)!r}, not true or false")


def _text(data: dict, key: str, *, optional: bool = True) -> None:
    value = data.get(key)
    if not (isinstance(value, str) or (value is None and optional)):
        raise InvalidRecord(f"{key} is {value!r}, not text")


def loader_config(data: object, max_workers: int | None = None) -> LoaderConfig:
    """The LoaderConfig a stored mapping describes, every setting checked by its knob's rule
    (NOTE [ The settings table ] in search/settings.py)."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"config is {data!r}, not a mapping")
    for knob in SETTINGS:
        problem = knob.stored(knob.name, data) if knob.stored is not None else None
        if problem is not None:
            raise InvalidRecord(problem)
        if knob is WORKERS and max_workers is not None and data[knob.name] > max_workers:
            raise InvalidRecord(f"{knob.name} is {data[knob.name]}, more than the {max_workers} a run on this "
                                f"hardware tries ({MAX_WORKERS_PER_CPU} per CPU)")
    try:
        return LoaderConfig.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRecord(f"config {data!r}: {exc}") from None


def trial_record(data: object) -> TrialResult:
    """The TrialResult a study's record holds, or InvalidRecord saying what is wrong with it."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the record is {type(data).__name__}, not a mapping")
    record_format(data)
    config = loader_config(data.get("config"))
    if data.get("status") not in _STATUSES:
        raise InvalidRecord(f"status is {data.get('status')!r}, not one of {', '.join(_STATUSES)}")
    for key in ("samples_per_s", "steady_samples_per_s", "rel_interval", "wait_fraction", "consumer_fraction",
                "gpu_util", "startup_s", "epoch_restart_s", "window_s", "seconds", "stalled_s",
                "others_cpus", "steal_cpus", "tree_cpus"):
        _number(data, key)
    for key in ("peak_host_bytes", "peak_pss_bytes", "peak_shm_bytes", "gpu_peak_bytes", "batch_bytes",
                "batches", "epochs_crossed", "worker_samples", "worker_uss_bytes"):
        _count(data, key)
    _flag(data, "pruned", False)
    _flag(data, "os_error", False)
    _text(data, "cause")
    _text(data, "error")
    if data["status"] == OK:
        _number(data, "samples_per_s", optional=False, positive=True)
    fields = {k: v for k, v in data.items() if k not in ("config", "format")}
    try:
        return TrialResult.from_dict({**fields, "config": config.to_dict()})
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRecord(str(exc)) from None


def tuned_config(data: object, cpus: int | None = None, batch_sizes: tuple[int, ...] | None = None) -> TunedConfig:
    """The TunedConfig a result file holds, or InvalidRecord. ``cpus``: this machine's usable
    CPUs, which bound the worker count (MAX_WORKERS_PER_CPU each) whatever the file says its own
    were, so a file cannot widen its own limit; without them (a listing of other machines'
    results) the file's own count bounds it. ``batch_sizes``: the problem's, which the file's
    key was tuned for, so its batch size must be one of them."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the file holds {type(data).__name__}, not a mapping")
    record_format(data)
    hardware = data.get("hardware", {})
    if not isinstance(hardware, dict):
        raise InvalidRecord(f"hardware is {hardware!r}, not a mapping")
    _hardware(hardware)
    config = loader_config(data.get("config"), MAX_WORKERS_PER_CPU * (cpus or hardware.get("cpus") or 0) or None)
    if batch_sizes is not None and config.batch_size not in batch_sizes:
        raise InvalidRecord(f"batch_size is {config.batch_size}, not one of the batch sizes its key was tuned for "
                            f"({', '.join(map(str, batch_sizes))})")
    _number(data, "samples_per_s", optional=False, positive=True)
    _number(data, "rel_interval")
    _number(data, "baseline_samples_per_s", positive=True)
    _text(data, "dataset_key", optional=False)
    if not data["dataset_key"]:
        raise InvalidRecord("dataset_key is empty")
    for key in ("device", "finished_at", "autoloader_version"):
        _text(data, key)
    _count(data, "measurement_format")
    _flag(data, "early_stop", False)
    if not isinstance(data.get("trials", []), list):
        raise InvalidRecord(f"trials is {data.get('trials')!r}, not a list")
    _dataset(data.get("dataset"))
    knee = data.get("knee")
    if knee is not None:
        _knee(knee)
    try:
        return TunedConfig.from_dict({**data, "config": config.loader_kwargs()})
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRecord(str(exc)) from None


def _hardware(hardware: dict) -> None:
    """The fields of a result's hardware that are read: its fingerprint names a folder and a
    study, its CPU count scales a warm start."""
    fingerprint = hardware.get("fingerprint")
    if "fingerprint" in hardware and (not isinstance(fingerprint, str) or not fingerprint or "/" in fingerprint):
        raise InvalidRecord(f"hardware.fingerprint is {fingerprint!r}, not a hardware fingerprint")
    cpus = hardware.get("cpus")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1):
        raise InvalidRecord(f"hardware.cpus is {cpus!r}, not a count of 1 or more")
    gpus = hardware.get("gpus")
    if gpus is not None and not (isinstance(gpus, list) and all(isinstance(g, str) for g in gpus)):
        raise InvalidRecord(f"hardware.gpus is {gpus!r}, not a list of names")


def _dataset(dataset: object) -> None:
    """What a result says its data was (its name, length, content fingerprint, version)."""
    if dataset is None:
        return
    if not isinstance(dataset, dict):
        raise InvalidRecord(f"dataset is {dataset!r}, not a mapping")
    for key in ("name", "content", "version"):
        value = dataset.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidRecord(f"dataset.{key} is {value!r}, not text")
    _count({"dataset.length": dataset.get("length")}, "dataset.length")


def _knee(knee: object) -> Knee:
    if not isinstance(knee, dict):
        raise InvalidRecord(f"knee is {knee!r}, not a mapping")
    for key in ("stops_paying", "peak"):
        _count(knee, key, optional=False)
    _count(knee, "starts_hurting")
    _number(knee, "tolerance", optional=False)
    curve = knee.get("curve")
    if not isinstance(curve, list) or not all(isinstance(p, list) and len(p) == 2 for p in curve):
        raise InvalidRecord(f"knee curve is {curve!r}, not a list of [workers, rate] pairs")
    for workers, rate in curve:
        _count({"workers": workers}, "workers", optional=False)
        _number({"rate": rate}, "rate", optional=False)
    try:
        return Knee.from_dict(knee)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRecord(f"knee: {exc}") from None


@dataclass(frozen=True)
class StoredResult:
    """A stored result that passed its checks: where it is (a file, or ``<storage>#<study>`` for a
    complete run's mark in a shared storage), the tuned config, and the whole record as stored."""

    where: str
    tuned: TunedConfig
    data: dict

    @property
    def hardware(self) -> dict:
        return self.data.get("hardware") or {}

    @property
    def finished_at(self) -> str | None:
        return self.data.get("finished_at")

    def measured_differently(self) -> str | None:
        """Why this autoloader cannot compare with or reuse the record (NOTE [ Measurement format ]
        in store/versions.py), or None."""
        return reuse_problem(self.data)


def checked_result(where: str, data: object, cpus: int | None = None,
                   batch_sizes: tuple[int, ...] | None = None) -> StoredResult:
    """``data`` as a StoredResult, or InvalidRecord saying what is wrong with it."""
    return StoredResult(where, tuned_config(data, cpus, batch_sizes), data)


def load_result(path: str, cpus: int | None = None, batch_sizes: tuple[int, ...] | None = None) -> StoredResult | None:
    """The result file at ``path``, checked: the one reader of a stored result. None when there is
    none, and None with a warning naming the file when it cannot be read or holds what no run
    wrote. ``cpus`` and ``batch_sizes``: this machine's usable CPUs and the problem's batch sizes,
    which bound what a result handed out here may say (``tuned_config``)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except (FileNotFoundError, NotADirectoryError):   # none there (a part of the path is a file)
        return None
    except IsADirectoryError:
        return _ignored(path, "it is a folder, not a file")
    except OSError as exc:
        return _ignored(path, f"it cannot be read ({exc})")
    try:
        data = json.loads(text)
    except ValueError as exc:
        return _ignored(path, f"it is not JSON ({exc})")
    try:
        return checked_result(path, data, cpus, batch_sizes)
    except InvalidRecord as exc:
        return _ignored(path, str(exc))


def _ignored(path: str, why: str) -> None:
    warnings.warn(f"ignored the stored result {path}: {why}. It is not used; a new tune replaces it "
                  "(move it aside to keep it)", StoredStateWarning, stacklevel=3)
    return None
