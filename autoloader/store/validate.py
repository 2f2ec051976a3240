"""Stored records checked on load: a trial record in the study, the pick of a result file.

Both carry a ``"format"`` field (FORMAT); a record without one was written before it existed and
is read as format 1, the same fields. Every value is checked for its type and range before a
record is used (checks.py; the whole result, field by field, in result.py and parts.py), so a
file edited by hand, written by a newer autoloader or damaged on disk is never applied and never a
traceback: it is ignored with a warning that names it and the field (``StoredStateWarning``; the
CLI shows it), and a result file is set aside (door.py). The checks are what the records' own
constructors need plus the bounds a config can have (a count of workers no run would try is no
config to hand out).
"""

from __future__ import annotations

from ..errors import StoredStateWarning
from ..search.config import TunedConfig
from ..search.knee import Knee
from ..search.policy import MAX_WORKERS_PER_CPU
from ..search.results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from ..search.settings import SETTINGS, WORKERS
from ..search.space import LoaderConfig
from . import checks
from .checks import MAX_BATCH_SIZE, MAX_CPUS, MAX_PREFETCH, InvalidRecord

__all__ = ["FORMAT", "InvalidRecord", "StoredStateWarning", "loader_config", "record_format", "trial_record",
           "tuned_config"]

# Format 2 added the field itself and, in the study, the digest of the code a trial ran.
FORMAT = 2
_STATUSES = (OK, CONSTRAINT, FAILED, HANG)




def record_format(data: dict) -> int:
    """The record's format: 1 when absent; an InvalidRecord when not one this version reads."""
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise InvalidRecord(f"format {fmt!r} is not a format number")
    if fmt > FORMAT:
        raise InvalidRecord(f"format {fmt} was written by a newer autoloader (this one reads 1 to {FORMAT})")
    return fmt


def _number(data: dict, key: str, *, optional: bool = True, positive: bool = False) -> None:
    checks.number(data.get(key), key, optional=optional, positive=positive)


def _count(data: dict, key: str, *, optional: bool = True) -> None:
    checks.count(data.get(key), key, optional=optional)


def _flag(data: dict, key: str, default: bool) -> None:
    checks.flag(data.get(key, default), key)


def _text(data: dict, key: str, *, optional: bool = True) -> None:
    checks.text(data.get(key), key, optional=optional)


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


def bounded(config: LoaderConfig) -> LoaderConfig:
    """``config``, within the sizes the model can simulate: NOTE [ Bounds of a stored record ] in checks.py."""
    if config.batch_size > MAX_BATCH_SIZE:
        raise InvalidRecord(f"batch_size is {config.batch_size}, more than any loader's ({MAX_BATCH_SIZE})")
    if config.prefetch_factor is not None and config.prefetch_factor > MAX_PREFETCH:
        raise InvalidRecord(f"prefetch_factor is {config.prefetch_factor}, more than any loader's ({MAX_PREFETCH})")
    return config


def config_at(data: object, name: str, max_workers: int | None = None) -> LoaderConfig:
    """The config stored as field ``name`` of a record, checked (``loader_config``, ``bounded``)."""
    try:
        return bounded(loader_config(data, max_workers))
    except InvalidRecord as exc:
        raise checks.within(name, exc, own="config") from None


def trial_record(data: object, max_workers: int | None = None) -> TrialResult:
    """The TrialResult a study's record (or a result's trial) holds, or InvalidRecord saying what
    is wrong with it. ``max_workers``: the most workers a run on the hardware it is read for tries."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the record is {type(data).__name__}, not a mapping")
    record_format(data)
    config = config_at(data.get("config"), "config", max_workers)
    if data.get("status") not in _STATUSES:
        raise InvalidRecord(f"status is {data.get('status')!r}, not one of {', '.join(_STATUSES)}")
    for key in ("samples_per_s", "steady_samples_per_s", "rel_interval", "wait_fraction", "consumer_fraction",
                "gpu_util", "startup_s", "lead_s", "teardown_s", "epoch_restart_s", "window_s", "seconds", "stalled_s",
                "others_cpus", "steal_cpus", "tree_cpus"):
        _number(data, key)
    for key in ("peak_host_bytes", "peak_pss_bytes", "peak_shm_bytes", "gpu_peak_bytes", "batch_bytes",
                "batches", "epochs_crossed", "worker_samples", "worker_uss_bytes", "worker_file_bytes", "pinned_bytes"):
        _count(data, key)
    _flag(data, "pruned", False)
    _flag(data, "os_error", False)
    _text(data, "cause")
    _text(data, "error")
    if data["status"] == OK:
        _number(data, "samples_per_s", optional=False, positive=True)
    if data.get("rank_samples_per_s") is not None:
        checks.numbers(data["rank_samples_per_s"], "rank_samples_per_s")
    for i, n in enumerate(checks.items(data.get("worker_delivered"), "worker_delivered")):
        checks.count(n, f"worker_delivered[{i}]", optional=False)
    _number(data, "duplicate_share")
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
    config = config_at(data.get("config"), "config", max_workers(hardware, cpus))
    if batch_sizes is not None and config.batch_size not in batch_sizes:
        raise InvalidRecord(f"batch_size is {config.batch_size}, not one of the batch sizes its key was tuned for "
                            f"({', '.join(map(str, batch_sizes))})")
    _number(data, "samples_per_s", optional=False, positive=True)
    _number(data, "rel_interval")
    _number(data, "baseline_samples_per_s", positive=True)
    _text(data, "dataset_key", optional=False)
    if not data["dataset_key"]:
        raise InvalidRecord("dataset_key is empty")
    for key in ("device", "finished_at", "autoloader_version", "provisional"):
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


def max_workers(hardware: dict, cpus: int | None = None) -> int | None:
    """The most workers a config of a result may have: MAX_WORKERS_PER_CPU of this machine's
    ``cpus`` when given, else of the result's own hardware (``tuned_config``)."""
    return MAX_WORKERS_PER_CPU * (cpus or hardware.get("cpus") or 0) or None


def _hardware(hardware: dict) -> None:
    """The fields of a result's hardware that are read: its fingerprint names a folder and a
    study, its CPU count scales a warm start."""
    fingerprint = hardware.get("fingerprint")
    if "fingerprint" in hardware and (not isinstance(fingerprint, str) or not fingerprint or "/" in fingerprint):
        raise InvalidRecord(f"hardware.fingerprint is {fingerprint!r}, not a hardware fingerprint")
    checks.count(hardware.get("cpus"), "hardware.cpus", least=1, most=MAX_CPUS)
    checks.count(hardware.get("ranks"), "hardware.ranks", least=1, most=MAX_CPUS)
    checks.text(hardware.get("cpu_model"), "hardware.cpu_model")
    checks.number(hardware.get("memory_gib"), "hardware.memory_gib")
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
