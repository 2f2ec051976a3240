"""The search's records as a stored result holds them, each checked field by field and built.

One reader per part of a result (``TuneResult.from_dict`` in result.py calls them): the profile
and its growth, the calibration, the model's prediction, the finalists, the memory forecasts, the
machine's load, the main process's threads and the warm start. Each takes the stored value and the
field's name, and returns the record, None where the part is absent, or raises ``InvalidRecord``
naming the field (``profile.cpus is 0, ...``). What a part's record derives from its fields
(a profile's quantiles, a load's ``busy``, a forecast's ``epoch_host_bytes``) is written for the
reader of the file and never read back: the record computes it again.
"""

from __future__ import annotations

from ..search.choice import Finalist
from ..search.growth import Growth
from ..search.nodes import NodesGraph
from ..search.load import MachineLoad
from ..search.memory import MemoryForecast
from ..search.methods import StartChoice
from ..search.model import Calibration, Prediction
from ..search.profile import Profile
from ..search.results import OK, TrialResult
from ..search.shards import Stream, StreamFinding
from ..search.threads import Threads
from ..search.warm import WarmStart, warm_of_record
from . import checks
from .checks import MAX_BATCH_SIZE, MAX_CPUS, InvalidRecord
from .validate import config_at


def _fields(data: dict, name: str, kinds: dict) -> None:
    """Each field of ``data`` named in ``kinds`` checked by its kind: a ``checks`` function, or
    (function, options)."""
    for key, kind in kinds.items():
        check, options = kind if isinstance(kind, tuple) else (kind, {})
        check(data.get(key), f"{name}.{key}", **options)


_SECONDS = (checks.number, {})
_SIGNED = (checks.number, {"signed": True})
_REQUIRED = (checks.number, {"optional": False})
_COUNT = (checks.count, {})


def growth(value: object, name: str) -> Growth | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    _fields(data, name, {"flat_bytes": (checks.count, {"optional": False}), "base_bytes": _SIGNED,
                         "row_bytes": _REQUIRED, "block_rows": (checks.count, {"optional": False}),
                         "length": (checks.count, {"optional": False}), "dataset_bytes": _COUNT,
                         "per_sample_bytes": _SECONDS, "ceiling_bytes": _COUNT, "last_samples": _COUNT,
                         "last_bytes": _SIGNED, "last_rate": _SIGNED, "seconds": _SECONDS})
    if not isinstance(data.get("base_bytes"), int):
        raise InvalidRecord(f"{name}.base_bytes is {data.get('base_bytes')!r}, not a whole number of bytes")
    checks.pairs(data.get("points"), f"{name}.points", signed=True)
    checks.pairs(data.get("bursts"), f"{name}.bursts", signed=True)
    return _built(Growth.from_dict, data, name)


def profile(value: object, name: str = "profile") -> Profile | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    required = {k: (checks.number, {"optional": False}) for k in ("collate_s", "recv_s", "step_s", "startup_s")}
    _fields(data, name, {**required, "batch_size": (checks.count, {"optional": False, "least": 1,
                                                                  "most": MAX_BATCH_SIZE}),
                         "sample_bytes": (checks.count, {"optional": False}),
                         "cpus": (checks.number, {"optional": False, "positive": True}),
                         "pin_s": _SECONDS, "h2d_pinned_s": _SECONDS, "h2d_pageable_s": _SECONDS,
                         "worker_pss": _COUNT, "epoch_batches": _COUNT, "seconds": _SECONDS,
                         "sample_cpu_share": _SECONDS, "collate_main_s": _SECONDS, "pin_local_s": _SECONDS,
                         "recv_busy_s": _SECONDS, "main_threads": (checks.count, {"least": 1}),
                         "main_default_s": _SECONDS, "main_one_thread_s": _SECONDS, "others_cpus": _SECONDS,
                         "steal_cpus": _SECONDS, "cut_s": _SECONDS})
    if data["cpus"] > MAX_CPUS:
        raise InvalidRecord(f"{name}.cpus is {data['cpus']!r}, more than any machine's ({MAX_CPUS})")
    if "sample_s" not in data:
        raise InvalidRecord(f"{name}.sample_s is missing")
    for key in ("sample_s", "step_samples"):
        checks.numbers(data.get(key), f"{name}.{key}")
    checks.numbers(data.get("main_thread_ratios"), f"{name}.main_thread_ratios", positive=True)
    checks.named_seconds(data.get("stage_s"), f"{name}.stage_s")
    return _built(Profile.from_dict, {**data, "growth": growth(data.get("growth"), f"{name}.growth")}, name)


def calibration(value: object, name: str = "calibration") -> Calibration | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    positive = (checks.number, {"positive": True})
    _fields(data, name, {"worker": positive, "main": positive, "pin": positive, "local": positive, "cpus": positive,
                         "startup_base": _SIGNED, "startup_per_worker": _SIGNED, "restart_base": _SIGNED,
                         "restart_per_worker": _SIGNED, "worker_fits": _COUNT, "main_fits": _COUNT,
                         "pin_fits": _COUNT})
    return _built(Calibration.from_dict, _present(data), name)


def prediction(value: object, name: str = "predicted", max_workers: int | None = None) -> Prediction | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    config = config_at(data.get("config"), f"{name}.config", max_workers)
    _fields(data, name, {"samples_per_s": _REQUIRED, "steady_samples_per_s": _REQUIRED, "wait_share": _REQUIRED,
                         "bound": (checks.text, {"optional": False}), "restart_s": _REQUIRED,
                         "receive_share": _SECONDS, "workers_busy": _SECONDS})
    return _built(Prediction.from_dict, {**data, "config": config.to_dict()}, name)


def trials(value: object, name: str = "trials", max_workers: int | None = None) -> tuple[TrialResult, ...]:
    from .validate import trial_record

    out = []
    for i, data in enumerate(checks.items(value, name)):
        try:
            out.append(trial_record(data, max_workers))
        except InvalidRecord as exc:
            raise checks.within(f"{name}[{i}]", exc) from None
    return tuple(out)


def finalists(value: object, trials: tuple[TrialResult, ...], name: str = "finals",
              max_workers: int | None = None) -> tuple[Finalist, ...]:
    """The final's configs, each with the last measured search trial of its config (the record
    does not repeat it): what ``Finalist.rate`` falls back on."""
    by_config = {t.config: t for t in trials if t.status == OK}
    out = []
    for i, data in enumerate(checks.items(value, name)):
        at = f"{name}[{i}]"
        data = checks.mapping(data, at)
        config = config_at(data.get("config"), f"{at}.config", max_workers)
        rates = checks.numbers(data.get("rates"), f"{at}.rates")
        checks.numbers(data.get("waits"), f"{at}.waits")
        checks.number(data.get("opening"), f"{at}.opening", positive=True)   # NOTE [ The opening round ]
        rounds = [checks.count(r, f"{at}.rounds[{j}]", optional=False)
                  for j, r in enumerate(checks.items(data.get("rounds"), f"{at}.rounds"))]
        if rounds and len(rounds) != len(rates):
            raise InvalidRecord(f"{at}.rounds has {len(rounds)} rounds for {len(rates)} rates")
        out.append(_built(lambda d: Finalist.from_dict(d, by_config.get(config)),
                          {**data, "config": config.to_dict()}, at))
    return tuple(out)


def memory(value: object, name: str, max_workers: int | None = None) -> MemoryForecast | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    config = config_at(data.get("config"), f"{name}.config", max_workers)
    whole = (checks.count, {"optional": False})
    _fields(data, name, {"basis": (checks.text, {"optional": False}), "host_bytes": whole, "shm_bytes": whole,
                         "flat_bytes": whole, "copied_bytes": _COUNT, "epoch_copied_bytes": _COUNT,
                         "samples_per_worker": _COUNT, "worker_bytes": _COUNT, "run_worker_bytes": _COUNT,
                         "measured_peak_bytes": _COUNT})
    return _built(MemoryForecast.from_dict, {**_present(data), "config": config.to_dict(), "growth": None}, name,
                  growth=growth(data.get("growth"), f"{name}.growth"))


def machine_load(value: object, name: str = "load") -> MachineLoad | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    _fields(data, name, {"usable_cpus": (checks.number, {"optional": False, "positive": True}),
                         "others_cpus": _SECONDS, "peak_others_cpus": _SECONDS, "steal_cpus": _SECONDS,
                         "profile_others_cpus": _SECONDS, "final_others_cpus": _SECONDS, "measured_s": _SECONDS,
                         "threshold": (checks.number, {"positive": True})})
    for i, span in enumerate(checks.items(data.get("busy_trials"), f"{name}.busy_trials")):
        at = f"{name}.busy_trials[{i}]"
        _fields(checks.mapping(span, at), at, {"first": (checks.count, {"optional": False}),
                                                "last": (checks.count, {"optional": False}),
                                                "others_cpus": _REQUIRED})
    return _built(MachineLoad.from_dict, data, name)


def threads(value: object, name: str = "threads") -> Threads | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    _fields(data, name, {"threads": (checks.count, {"optional": False, "least": 1, "most": MAX_CPUS}),
                         "batch_size": (checks.count, {"optional": False}), "default_s": _SECONDS,
                         "one_thread_s": _SECONDS})
    checks.numbers(data.get("ratios"), f"{name}.ratios", positive=True)
    return _built(Threads.from_dict, data, name)


def nodes_graph(value: object, name: str = "nodes") -> NodesGraph | None:
    """A torchdata.nodes graph's own settings (search/nodes.py)."""
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    return _built(NodesGraph.from_dict, data, name)


def stream(value: object, name: str = "stream") -> Stream | None:
    """An iterable dataset's shards, cap and findings (search/shards.py)."""
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    _fields(data, name, {"shards": (checks.count, {"least": 1}), "shards_from": checks.text,
                         "max_workers": (checks.count, {"optional": False}),
                         "uncapped_max_workers": (checks.count, {"optional": False})})
    who = {key: tuple(checks.text(w, f"{name}.{key}[{i}]", optional=False)
                      for i, w in enumerate(checks.items(data.get(key), f"{name}.{key}"))) for key in ("duplicated", "idle")}
    findings = []
    for i, item in enumerate(checks.items(data.get("findings"), f"{name}.findings")):
        found = checks.mapping(item, f"{name}.findings[{i}]")
        findings.append(StreamFinding(*(checks.text(found.get(k), f"{name}.findings[{i}].{k}", optional=False)
                                        for k in ("kind", "text", "fix"))))
    return Stream(data.get("shards"), data.get("shards_from"), data["max_workers"], data["uncapped_max_workers"],
                  who["duplicated"], who["idle"], tuple(findings))


def start_choice(value: object, name: str = "start_method") -> StartChoice | None:
    """The pick's start method and each method's figures (search/methods.py)."""
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    for key in ("chosen", "default"):
        checks.text(data.get(key), f"{name}.{key}", optional=False)
    checks.count(data.get("workers"), f"{name}.workers", optional=False)
    for i, item in enumerate(checks.items(data.get("rows"), f"{name}.rows")):
        row = checks.mapping(item, f"{name}.rows[{i}]")
        checks.text(row.get("method"), f"{name}.rows[{i}].method", optional=False)
        checks.count(row.get("worker_bytes"), f"{name}.rows[{i}].worker_bytes")
        checks.count(row.get("host_bytes"), f"{name}.rows[{i}].host_bytes", optional=False)
    return _built(StartChoice.from_dict, data, name)


def warm_start(value: object, name: str = "warm_start", max_workers: int | None = None) -> WarmStart | None:
    data = checks.mapping(value, name, optional=True)
    if data is None:
        return None
    config = config_at(data.get("pick"), f"{name}.pick", max_workers)
    _fields(data, name, {"samples_per_s": (checks.number, {"optional": False, "positive": True}),
                         "rel_interval": _SECONDS})
    checks.flag(data.get("may_stop", False), f"{name}.may_stop")
    return _built(warm_of_record, {**data, "pick": config.to_dict()}, name)


def _present(data: dict) -> dict:
    """The fields stored with a value: a null one takes its record's default."""
    return {k: v for k, v in data.items() if v is not None}


def _built(make, data: dict, name: str, **replaced):
    """``make(data)``, with ``replaced`` fields set on what it built; a record the checks let
    through that its constructor still refuses is invalid all the same."""
    try:
        built = make(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidRecord(f"{name}: {type(exc).__name__}: {exc}") from None
    if replaced:
        from dataclasses import replace

        built = replace(built, **replaced)
    return built


__all__ = ["calibration", "finalists", "growth", "machine_load", "memory", "prediction", "profile",
           "threads", "trials", "warm_start"]
