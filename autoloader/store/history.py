"""Earlier results of one problem: this hardware's last good one, other hardware's, the dated history.

Results are ``<out>/<fingerprint>/<key>.json``; a re-tune keeps every good one as well, dated,
under ``<out>/<fingerprint>/history/<key>/<finished-at>.json``. The current file is only ever
replaced by a run that finished (the run writes it last, atomically), so a failed or killed run
leaves the last good result where it was. Other hardware's results come from the same ``out``
and, when the runs share a storage, from the complete runs' marks in its studies (NOTE [ Runs in
a study ] in runs.py), so a machine new to a fleet starts from its nearest sibling.

A result measured on a busy machine (NOTE [ Others on the machine ] in search/load.py), or whose
comparison was inconclusive (its interval across the threshold band: NOTE [ Drift ] in
tuning/compare.py), is kept like any other, the current file included, but marked (its ``load``
says ``busy``, its ``since`` says ``inconclusive``): ``previous`` passes over it, to this
hardware's newest conclusive result in the history, so a busy or undecided night never becomes
the baseline the next night compares with. Every result is read through the door
(door.load_result: checked; a tune's own key's set aside when damaged, ``set_aside``) and comes
back as its ``TuneResult``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from .door import load_result
from .paths import result_files, result_path, split_study_name
from .result import TuneResult
from .study import atomic_write


def history_dir(out: str, fingerprint: str, key: str) -> str:
    return os.path.join(out, fingerprint, "history", key)


def _stamp(result: TuneResult) -> str:
    return str(result.finished_at or "undated").replace(":", "").replace("-", "").replace("+0000", "Z")


def keep(out: str, fingerprint: str, key: str, stored: TuneResult) -> str | None:
    """Keep ``stored`` in the dated history unless a file of its time is there already (a retune
    records every result): before an inconclusive run replaces the current file, the baseline it held
    stays findable. Returns the path written, if any."""
    if os.path.exists(os.path.join(history_dir(out, fingerprint, key), f"{_stamp(stored)}.json")):
        return None
    return record(out, fingerprint, key, stored)


def record(out: str, fingerprint: str, key: str, result: TuneResult) -> str:
    """Keep ``result`` (a finished one) in the dated history; returns its path."""
    stamp = _stamp(result)
    folder = history_dir(out, fingerprint, key)
    path = os.path.join(folder, f"{stamp}.json")
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(folder, f"{stamp}-{n}.json")
    atomic_write(path, json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    return path


def last_good(out: str, fingerprint: str, key: str, cpus: int | None = None,
              set_aside: bool = False) -> TuneResult | None:
    """This hardware's current result for ``key``, if one passes its checks (one that fails is
    warned about, naming it, and never started from) and is conclusive (TuneResult.conclusive);
    else the newest such result in its dated history. ``cpus``: this machine's, which bound it.
    ``set_aside``: the key's tune reads them, and sets a damaged one aside (door.load_result)."""
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
    ``retune`` and a warm start share: this hardware's last good result, else the nearest other
    hardware's (``nearest``) under ``out`` or in ``storage``. ``hardware``: this machine's
    (inputs/hardware.Hardware). ``set_aside``: the key's own tune, which may set this hardware's
    damaged results of ``key`` aside (never another hardware's)."""
    fingerprint = hardware.fingerprint
    return (last_good(out, fingerprint, key, hardware.cpus, set_aside)
            or nearest(hardware, other_hardware(out, fingerprint, key, storage)))


def stored_picks(storage: str, key: str | None = None, whole: bool = False) -> list[TuneResult]:
    """Each autoloader study's newest complete run's pick in ``storage`` (for ``key`` only, when
    given), where ``<storage>#<study>``; a mark whose pick fails its checks is left out. ``whole``:
    the run's whole result where the storage holds it (a run pushed it: NOTE [ Local first ] in
    push.py), read through the door's checks, else its pick."""
    import optuna

    from . import runs
    from .durable import not_a_study, open_reader, sqlite_file
    from .storage import masked

    path = sqlite_file(storage)
    if path is not None and (not os.path.isfile(path) or not_a_study(path) is not None):
        return []   # nothing stored there yet: a reader does not make the file, nor its tables
    opened = open_reader(storage, must_exist=False)   # a reader: no trial of its own
    picks = []
    for name in optuna.study.get_all_study_names(storage=opened):
        parts = split_study_name(name)
        if parts is None or (key is not None and parts[1] != key):
            continue
        study = optuna.load_study(study_name=name, storage=opened)
        where = f"{masked(storage)}#{name}"
        complete = [dataclasses.replace(mark.summary, where=where) for mark in runs.runs_of(study, where).values()
                    if mark.state == runs.COMPLETE and mark.summary is not None]
        if complete:
            newest = max(complete, key=lambda s: s.finished_at or "")
            picks.append(_whole(study, newest, where) if whole else newest)
    return picks


def _whole(study, pick: TuneResult, where: str) -> TuneResult:
    """The whole result a run pushed beside its mark (the newest complete run is ``pick``'s), or
    ``pick`` when there is none or it fails its checks (a warning names it and the field)."""
    import warnings

    from . import runs
    from ..search.codec import InvalidRecord
    from .push import RESULT_PREFIX
    from .validate import StoredStateWarning

    attrs = study.user_attrs
    newest = max((m for m in runs.runs_of(study, where).values() if m.state == runs.COMPLETE and m.summary is not None),
                 key=lambda m: m.summary.finished_at or "")
    data = attrs.get(RESULT_PREFIX + newest.run_id)
    if data is None:
        return pick
    try:
        return dataclasses.replace(TuneResult.from_dict(data, where), where=where)
    except (InvalidRecord, RecursionError) as exc:
        warnings.warn(f"ignored the result of run {newest.run_id} in {where}: {exc}; its pick is used alone",
                      StoredStateWarning, stacklevel=3)
        return pick


def hardware_distance(a, b) -> float:
    """How unlike two machines are (inputs/hardware.Hardware, or a result's StoredHardware), for
    choosing whose result to start from: the GPUs weigh most, then the CPU model, then the CPU
    count and the memory by their ratios."""
    def ratio(x, y) -> float:
        return abs(math.log2(max(1, x or 1) / max(1, y or 1)))

    return (4.0 * (list(a.gpus or []) != list(b.gpus or []))
            + 2.0 * (a.cpu_model != b.cpu_model)
            + ratio(a.cpus, b.cpus) + 0.5 * ratio(a.memory_gib, b.memory_gib))


def nearest(hardware, found: list[TuneResult]) -> TuneResult | None:
    """The result from the machine most like ``hardware``; the newest among equals."""
    if not found:
        return None
    return min(found, key=lambda s: (hardware_distance(hardware, s.hardware), _negated(s.finished_at or "")))


def _negated(text: str) -> tuple:
    return tuple(-ord(c) for c in text)
