"""``autoloader show``: what is stored, per hardware and dataset, and any one result in full."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass

from ..errors import usage
from ..inputs import hardware
from ..store.history import stored_picks, usable
from ..store.paths import split_study_name
from ..store.study import read_json


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

    def to_dict(self) -> dict:
        return {"hardware": self.hardware, "key": self.key, "config": self.pick, "samples_per_s": self.samples_per_s,
                "finished_at": self.finished_at, "autoloader_version": self.version,
                "measurement_format": self.measurement_format, "where": self.where, "dataset": self.dataset}


def _stored(where: str, data: dict) -> Stored:
    return Stored((data.get("hardware") or {}).get("fingerprint", "?"), data.get("dataset_key", "?"), data["config"],
                  float(data["samples_per_s"]), data.get("finished_at"), data.get("autoloader_version"),
                  data.get("measurement_format"), where, data.get("dataset"))


def listing(out: str, storage: str | None = None) -> list[Stored]:
    """Every stored result under ``out`` (``<fingerprint>/<key>.json``) and, with ``storage``,
    every complete run's pick in its studies that ``out`` does not hold already; by hardware, key."""
    rows = [_stored(path, data) for path in glob.glob(os.path.join(glob.escape(out), "*", "*.json"))
            if usable(data := read_json(path))]
    if storage is not None:
        seen = {(r.hardware, r.key) for r in rows}
        rows += [row for where, data in stored_picks(storage)
                 if (row := _stored(where, data)) and (row.hardware, row.key) not in seen]
    return sorted(rows, key=lambda r: (r.hardware, r.key))


def find(out: str, name: str, storage: str | None = None) -> tuple[str, dict]:
    """One stored result: by path, by ``<fingerprint>/<key>``, or by key (this hardware's when
    several machines have one)."""
    if os.path.isfile(name):
        data = read_json(name)
        if usable(data):
            return name, data
        raise usage("the file must be an autoloader result", name, "pass a <key>.json that `autoloader show` lists")
    parts = split_study_name(name)
    fingerprint, key = parts if parts else (None, name)
    matches = [(r.where, r) for r in listing(out, storage) if r.key == key
               and (fingerprint is None or r.hardware == fingerprint)]
    if not matches:
        raise usage("the result must be one that is stored", name,
                    "pass a key that `autoloader show` lists (with the same --out/--storage)")
    if len(matches) > 1:
        mine = [m for m in matches if m[1].hardware == hardware.detect().fingerprint]
        if len(mine) != 1:
            raise usage("the key names results of several machines", [m[1].hardware for m in matches],
                        "pass <fingerprint>/<key>")
        matches = mine
    where, row = matches[0]
    data = read_json(where) if os.path.isfile(where) else None
    return where, data if usable(data) else {**row.to_dict(), "dataset_key": row.key,
                                             "hardware": {"fingerprint": row.hardware}}


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
            lines.append(f"    {r.samples_per_s:,.0f} samples/s, {r.finished_at or 'undated'}, {by}")
    return "\n".join(lines[1:]) + "\n"


def result_text(where: str, data: dict) -> str:
    lines = [f"{data.get('dataset_key')} on {(data.get('hardware') or {}).get('fingerprint')}", f"  from {where}"]
    lines += [f"  {k:<20} {v}" for k, v in data["config"].items()]
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
    return "\n".join(lines) + "\n"


def as_json(value) -> str:
    return json.dumps(value, indent=2, default=str)
