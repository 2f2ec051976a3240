"""``autoloader show``: what is stored, per hardware and dataset, and any one result in full."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..errors import usage
from ..inputs import hardware
from ..search.load import MachineLoad
from ..search.space import LoaderConfig
from ..store.durable import open_reader
from ..store.history import busy, stored_picks
from ..store.paths import result_files, split_study_name
from ..store.validate import StoredResult, load_result
from ..tuning.progress import load_lines


@dataclass(frozen=True)
class Stored:
    """One stored result, as listed."""
    hardware: str
    key: str
    pick: dict
    samples_per_s: float
    finished_at: str | None
    version: str | None
    measurement_format: int | None
    where: str
    dataset: dict | None = None
    busy: bool = False       # measured on a busy machine: NOTE [ Others on the machine ]

    def to_dict(self) -> dict:
        return {"hardware": self.hardware, "key": self.key, "config": self.pick, "samples_per_s": self.samples_per_s,
                "finished_at": self.finished_at, "autoloader_version": self.version,
                "measurement_format": self.measurement_format, "where": self.where, "dataset": self.dataset,
                "busy": self.busy}


def _row(stored: StoredResult) -> Stored:
    data = stored.data
    return Stored(stored.hardware.get("fingerprint") or "?", stored.tuned.dataset_key, stored.tuned.config.loader_kwargs(),
                  stored.tuned.samples_per_s, data.get("finished_at"), data.get("autoloader_version"),
                  data.get("measurement_format"), stored.where, data.get("dataset"), busy(data))


def _all(out: str, storage: str | None) -> list[StoredResult]:
    """Every stored result under ``out`` that passes its checks (one that fails is warned about,
    naming it) and, with ``storage``, every complete run's pick in its studies that ``out`` does
    not hold already."""
    found = [stored for path in result_files(out) if (stored := load_result(path)) is not None]
    if storage is not None:
        open_reader(storage, must_exist=True).engine.dispose()   # one that is not there is not made
        seen = {(s.hardware.get("fingerprint"), s.tuned.dataset_key) for s in found}
        found += [s for s in stored_picks(storage)
                  if (s.hardware.get("fingerprint"), s.tuned.dataset_key) not in seen]
    return found


def listing(out: str, storage: str | None = None) -> list[Stored]:
    """Every stored result under ``out`` (``<fingerprint>/<key>.json``) and, with ``storage``,
    every complete run's pick in its studies; by hardware, key."""
    return sorted((_row(s) for s in _all(out, storage)), key=lambda r: (r.hardware, r.key))


def find(out: str, name: str, storage: str | None = None) -> tuple[str, dict]:
    """One stored result: by path, by ``<fingerprint>/<key>``, or by key (this hardware's when
    several machines have one)."""
    if os.path.isfile(name):
        stored = load_result(name)
        if stored is not None:
            return name, stored.data
        raise usage("the file must be an autoloader result that passes its checks", name,
                    "pass a <key>.json that `autoloader show` lists (the warning above says what is wrong with it)")
    parts = split_study_name(name)
    fingerprint, key = parts if parts else (None, name)
    matches = [s for s in _all(out, storage) if s.tuned.dataset_key == key
               and (fingerprint is None or s.hardware.get("fingerprint") == fingerprint)]
    if not matches:
        raise usage("the result must be one that is stored", name,
                    "pass a key that `autoloader show` lists (with the same --out/--storage)")
    if len(matches) > 1:
        mine = [m for m in matches if m.hardware.get("fingerprint") == hardware.detect().fingerprint]
        if len(mine) != 1:
            raise usage("the key names results of several machines", [m.hardware.get("fingerprint") for m in matches],
                        "pass <fingerprint>/<key>")
        matches = mine
    return matches[0].where, matches[0].data


def _pick(kwargs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in kwargs.items())


def listing_text(rows: list[Stored]) -> str:
    if not rows:
        return "autoloader: nothing stored yet"
    lines = []
    for fingerprint in sorted({r.hardware for r in rows}):
        lines += ["", fingerprint]
        for r in (r for r in rows if r.hardware == fingerprint):
            form = r.measurement_format if r.measurement_format is not None else "?"
            by = f"autoloader {r.version or '?'}, format {form}"
            lines.append(f"  {r.key}")
            lines.append(f"    {_pick(r.pick)}")
            busy = ", measured on a busy machine (no baseline)" if r.busy else ""
            lines.append(f"    {r.samples_per_s:,.0f} samples/s, {r.finished_at or 'undated'}, {by}{busy}")
    return "\n".join(lines[1:]) + "\n"


def result_text(where: str, data: dict) -> str:
    lines = [f"{data.get('dataset_key')} on {(data.get('hardware') or {}).get('fingerprint')}", f"  from {where}"]
    # What is handed out, as load_result checked it: keys no run sets are not shown as settings.
    lines += [f"  {k:<20} {v}" for k, v in LoaderConfig.from_dict(data["config"]).loader_kwargs().items()]
    lines.append(f"  {'samples/s':<20} {data['samples_per_s']:,.0f}")
    if data.get("baseline_samples_per_s"):
        lines.append(f"  {'num_workers=0':<20} {data['baseline_samples_per_s']:,.0f}")
    knee = data.get("knee")
    if isinstance(knee, dict):
        lines.append(f"  {'worker knee':<20} stops paying at {knee.get('stops_paying')}, peak at {knee.get('peak')}")
    dataset = data.get("dataset") or {}
    if dataset:
        lines.append(f"  {'dataset':<20} {dataset.get('name')}, {dataset.get('length')} samples, content "
                     f"{dataset.get('content')}"
                     + (f", version {dataset['version']}" if dataset.get("version") else ""))
    lines.append(f"  {'measured':<20} {data.get('finished_at') or 'undated'} by autoloader "
                 f"{data.get('autoloader_version') or '?'}, format {data.get('measurement_format', '?')}")
    if data.get("trials"):
        held = " (warm start held)" if data.get("early_stop") else ""
        lines.append(f"  {'trials':<20} {len(data['trials'])}{held}")
    load = data.get("load")
    if isinstance(load, dict):
        try:
            text = load_lines(MachineLoad.from_dict(load))
        except (KeyError, TypeError, ValueError):
            text = []
        lines += [f"  {'machine load' if i == 0 else '':<20} {t}" for i, t in enumerate(text)]
    threads = data.get("threads")
    if isinstance(threads, dict) and threads.get("threads"):
        lines.append(f"  {'main threads':<20} {threads['threads']}"
                     + (f"; set {threads['set']} in the training process ({threads.get('slower', 0):.1f}x faster "
                        "with one thread here)" if threads.get("set") else ""))
    return "\n".join(lines) + "\n"


def as_json(value) -> str:
    return json.dumps(value, indent=2, default=str)
