"""Earlier results of one problem: this hardware's last good one, other hardware's, the dated history.

A re-tune keeps every good result, dated, under ``<out>/<fingerprint>/history/<key>/<finished-at>.json``;
the current file is only replaced by a run that finished, so a failed or killed run leaves the
last good result where it was. Other hardware's results come from the same ``out`` and from the
complete runs' marks in a shared storage (NOTE [ Runs in a study ] in runs.py). A result measured
on a busy machine, or whose comparison was inconclusive, is kept but is never the baseline:
``previous`` passes over it to this hardware's newest conclusive result. Every result is read
through the door (door.load_result).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from .door import load_result
from .paths import result_files, result_path, split_study_name
from .result import TuneResult
from .durable import write_new


def history_dir(out: str, fingerprint: str, key: str) -> str:
    return os.path.join(out, fingerprint, "history", key)


def _stamp(result: TuneResult) -> str:
    return str(result.finished_at or "undated").replace(":", "").replace("-", "").replace("+0000", "Z")


def keep(out: str, fingerprint: str, key: str, stored: TuneResult) -> str | None:
    """Keep ``stored`` in the dated history unless a file of its time is there already, so that the
    baseline stays findable once an inconclusive run replaces the current file; the path written."""
    if os.path.exists(os.path.join(history_dir(out, fingerprint, key), f"{_stamp(stored)}.json")):
        return None
    return record(out, fingerprint, key, stored)


def record(out: str, fingerprint: str, key: str, result: TuneResult) -> str:
    """Keep ``result`` (a finished one) in the dated history, as ``<stamp>.json`` or ``<stamp>-N.json``."""
    text = json.dumps(result.to_dict(), indent=2, default=str) + "\n"
    return write_new(history_dir(out, fingerprint, key), _stamp(result), (".json",), lambda _: {".json": text})[".json"]


def last_good(out: str, fingerprint: str, key: str, cpus: int | None = None,
              set_aside: bool = False) -> TuneResult | None:
    """This hardware's current result for ``key`` if it passes its checks and is conclusive, else
    the newest such result in its dated history (``cpus`` and ``set_aside``: door.load_result's)."""
    current = load_result(result_path(out, fingerprint, key), cpus, set_aside=set_aside)
    if current is not None and current.conclusive:
        return current
    folder = history_dir(out, fingerprint, key)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    kept = [stored for name in names if name.endswith(".json")
            and (stored := load_result(os.path.join(folder, name), cpus, set_aside=set_aside)) is not None
            and stored.conclusive]
    return max(kept, key=lambda s: s.finished_at or "") if kept else None


def other_hardware(out: str, fingerprint: str, key: str, storage: str | None = None) -> list[TuneResult]:
    """Other hardware's results for ``key``: under ``out``, and in ``storage``'s studies."""
    found = [stored for path in result_files(out, key) if os.path.basename(os.path.dirname(path)) != fingerprint
             and (stored := load_result(path)) is not None]
    if storage is not None:
        found += [s for s in stored_picks(storage, key) if s.hardware.fingerprint != fingerprint]
    return [s for s in found if s.conclusive]


def previous(out: str, hardware, key: str, storage: str | None = None, set_aside: bool = False) -> TuneResult | None:
    """The previous result of the problem ``key``, by the one rule that ``tune --fail-if-changed``,
    ``retune`` and a warm start share: this hardware's (inputs/hardware.Hardware) last good result,
    else the nearest other hardware's. ``set_aside``: the key's own tune, which may set this
    hardware's damaged results aside (never another hardware's)."""
    fingerprint = hardware.fingerprint
    return (last_good(out, fingerprint, key, hardware.cpus, set_aside)
            or nearest(hardware, other_hardware(out, fingerprint, key, storage)))


def stored_picks(storage: str, key: str | None = None, whole: bool = False) -> list[TuneResult]:
    """Each autoloader study's newest complete run's pick in ``storage`` (of ``key`` alone, when
    given), where ``<storage>#<study>``. ``whole``: the run's whole result where the storage holds
    it (NOTE [ Local first ] in study.py), else its pick."""
    import optuna

    from . import runs
    from .durable import not_a_study, not_a_study_database, open_reader, sqlite_file
    from .storage import masked

    path = sqlite_file(storage)
    if path is not None and (not os.path.isfile(path) or not_a_study(path) is not None):
        return []   # nothing stored there yet: a reader does not make the file, nor its tables
    if path is None and not_a_study_database(storage) is not None:
        return []   # nor another database's tables
    opened = open_reader(storage, must_exist=False)   # a reader: no trial of its own
    picks = []
    for name in optuna.study.get_all_study_names(storage=opened):
        parts = split_study_name(name)
        if parts is None or (key is not None and parts[1] != key):
            continue
        study = optuna.load_study(study_name=name, storage=opened)
        where = f"{masked(storage)}#{name}"
        complete = [m for m in runs.runs_of(study, where).values() if m.state == runs.COMPLETE and m.summary]
        if complete:
            newest = max(complete, key=lambda m: m.summary.finished_at or "")
            pick = dataclasses.replace(newest.summary, where=where)
            picks.append(_whole(study, newest.run_id, pick) if whole else pick)
    return picks


def _whole(study, run_id: str, pick: TuneResult) -> TuneResult:
    """The whole result run ``run_id`` pushed beside its mark, else ``pick``."""
    import warnings

    from ..search.codec import InvalidRecord
    from .study import RESULT_PREFIX
    from ..errors import StoredStateWarning

    data = study.user_attrs.get(RESULT_PREFIX + run_id)
    if data is None:
        return pick
    try:
        return TuneResult.from_dict(data, pick.where)
    except (InvalidRecord, RecursionError) as exc:
        warnings.warn(f"ignored the result of run {run_id} in {pick.where}: {exc}; its pick is used alone",
                      StoredStateWarning, stacklevel=3)
        return pick


def hardware_distance(a, b) -> float:
    """How unlike two machines are (Hardware or StoredHardware): the GPUs weigh most, then the CPU
    model, then the CPU count and the memory by their ratios."""
    def ratio(x, y) -> float:
        return abs(math.log2(max(1, x or 1) / max(1, y or 1)))

    return (4.0 * (list(a.gpus or []) != list(b.gpus or []))
            + 2.0 * (a.cpu_model != b.cpu_model)
            + ratio(a.cpus, b.cpus) + 0.5 * ratio(a.memory_gib, b.memory_gib))


def nearest(hardware, found: list[TuneResult]) -> TuneResult | None:
    """The result from the machine most like ``hardware``; the newest among equals."""
    return max(found, key=lambda s: (-hardware_distance(hardware, s.hardware), s.finished_at or ""), default=None)
