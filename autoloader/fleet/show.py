"""``autoloader show``: what is stored, per hardware and dataset, and any one result in full."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields

from ..errors import usage
from ..events.lines import provisional_text, rate
from ..inputs import hardware
from ..search.nodes import graph_snippet
from ..store.door import load_result
from ..store.durable import open_reader
from ..store.history import stored_picks
from ..store.paths import result_files, result_path, split_study_name
from ..store.records import DatasetRecord
from ..store.result import TuneResult
from ..explain.verdict import caveats, load_lines, profiled


@dataclass(frozen=True)
class Stored:
    """One stored result, as listed."""
    hardware: str
    key: str
    config: dict
    samples_per_s: float
    finished_at: str | None
    autoloader_version: str | None
    measurement_format: int | None
    where: str
    dataset: DatasetRecord | None = None
    busy: bool = False       # measured on a busy machine: NOTE [ Others on the machine ]
    step: str | None = None  # the step's identity (module.qualname#digest), else its name as given
    step_known: bool = True  # False: an older result, which does not say whether a step was timed
    device: str | None = None

    def to_dict(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "step_known"},
                "dataset": self.dataset.to_dict() if self.dataset else None}

    @property
    def what(self) -> str:
        """What tells keys of one dataset class apart: the dataset as given (its spec on the command
        line, its class's module and name from Python), the step, the device."""
        d = self.dataset or DatasetRecord()
        name = d.name or d.dataset_class
        built = d.dataset_class if d.dataset_class and d.dataset_class != name else None
        cls = f" ({built.rsplit('.', 1)[-1]})" if built else ""
        step = f"step {self.step}" if self.step else "no step" if self.step_known else "step not recorded"
        return (f"dataset {name or 'not recorded'}{cls}, {step}"
                + (f", on {self.device}" if self.device else ""))


def _row(stored: TuneResult) -> Stored:
    made, inputs = stored.provenance, stored.inputs
    step = (inputs.step_identity or inputs.step) if inputs is not None else None
    return Stored(stored.hardware.fingerprint or "?", stored.dataset_key, stored.config.loader_kwargs(),
                  stored.samples_per_s, stored.finished_at, made.autoloader_version if made else None,
                  made.measurement_format if made else None, stored.where, stored.dataset, stored.busy,
                  step, inputs is not None, stored.device)


def _all(out: str, storage: str | None, whole: bool = False) -> list[TuneResult]:
    """Every stored result under ``out`` that passes its checks and, with ``storage``, every
    complete run's pick in its studies that ``out`` does not hold already."""
    found = [stored for path in result_files(out) if (stored := load_result(path)) is not None]
    if storage is not None:
        open_reader(storage, must_exist=True).engine.dispose()   # one that is not there is not made
        seen = {(s.hardware.fingerprint, s.dataset_key) for s in found}
        found += [s for s in stored_picks(storage, whole=whole) if (s.hardware.fingerprint, s.dataset_key) not in seen]
    return found


def listing(out: str, storage: str | None = None) -> list[Stored]:
    """Every stored result (``_all``), by hardware and key."""
    return sorted((_row(s) for s in _all(out, storage)), key=lambda r: (r.hardware, r.key))


def find(out: str, name: str, storage: str | None = None, whole: bool = False) -> TuneResult:
    """One stored result (its ``where`` says from where): by path, by ``<fingerprint>/<key>``, or
    by key (this hardware's when several machines have one). ``whole``: a result held only in
    ``storage`` whole where the storage has it (``report``), not only its pick."""
    if os.path.isfile(name):
        return _named_file(name)
    parts = split_study_name(name)
    fingerprint, key = parts if parts else (None, name)
    matches = [s for s in _all(out, storage, whole) if s.dataset_key == key
               and (fingerprint is None or s.hardware.fingerprint == fingerprint)]
    if not matches:
        raise usage("the result must be one that is stored", name,
                    "pass a key that `autoloader show` lists (with the same --out/--storage)")
    if len(matches) > 1:
        mine = [m for m in matches if m.hardware.fingerprint == hardware.detect().fingerprint]
        if len(mine) != 1:
            raise usage("the key names results of several machines", [m.hardware.fingerprint for m in matches],
                        "pass <fingerprint>/<key>")
        matches = mine
    return matches[0]


RESULT_FILE = ("the file must be an autoloader result that passes its checks, at its own path in a results "
               "folder (<hardware>/<key>.json, as autoloader tune writes it)")


def _named_file(name: str) -> TuneResult:
    """The result a file named on the command line holds, read and never written (NOTE [ A bad
    result file ] in store/door.py): only a ``.json`` file whose checked record puts it at its own
    path (<fingerprint>/<key>.json) is a result; anything else is refused, and left as it is."""
    if not name.endswith(".json"):
        raise usage(RESULT_FILE, f"{name}: not an autoloader result (not a .json file)",
                    "pass a <key>.json that `autoloader show` lists, or its key")
    stored = load_result(name)
    if stored is None:
        raise usage(RESULT_FILE, f"{name}: not an autoloader result",
                    "pass a <key>.json that `autoloader show` lists (the warning above says what is wrong with it)")
    folder, base = os.path.split(os.path.abspath(name))
    own = (os.path.basename(folder), base[:-len(".json")])
    if own != (stored.hardware.fingerprint, stored.dataset_key):
        raise usage(RESULT_FILE, f"{name}: not an autoloader result at its own path (it says it is "
                    f"{stored.hardware.fingerprint}/{stored.dataset_key}.json)",
                    "pass the file where autoloader tune wrote it, or its key with --out")
    return stored


def report_beside(out: str, found: TuneResult) -> str:
    """Where ``found``'s report is written, beside its result file: the file it was read from,
    or for a result held only in a storage, where its file would be under ``out``. A storage's
    pick alone (a run that pushed no whole result) cannot be explained: a usage error says so."""
    if os.path.isfile(found.where) or found.where.endswith(".json"):
        return found.where
    if found.partial:
        raise usage("a report needs the run's whole result; the storage holds only this run's pick (its run did "
                    "not push its result: an earlier autoloader, or its push failed)", found.where,
                    "run autoloader report on the machine that tuned it (its result file is there), or tune again "
                    "with this --storage, which pushes the whole result")
    return result_path(out, found.hardware.fingerprint or "unknown", found.dataset_key)


def listing_text(rows: list[Stored]) -> str:
    if not rows:
        return "autoloader: nothing stored yet"
    lines = []
    for fingerprint in sorted({r.hardware for r in rows}):
        lines += ["", fingerprint]
        for r in (r for r in rows if r.hardware == fingerprint):
            form = r.measurement_format if r.measurement_format is not None else "?"
            busy = ", measured on a busy machine (no baseline)" if r.busy else ""
            lines += [f"  {r.key}", f"    {r.what}", "    " + ", ".join(f"{k}={v}" for k, v in r.config.items()),
                      f"    {rate(r.samples_per_s, ' samples/s')}, tuned {r.finished_at or 'undated'}, autoloader "
                      f"{r.autoloader_version or '?'}, format {form}{busy}"]
    return "\n".join(lines[1:]) + "\n"


def result_text(result: TuneResult) -> str:
    tuned, inputs, d, made, threads = result.tuned, result.inputs, result.dataset, result.provenance, result.threads
    # What is handed out, as load_result checked it: keys no run sets are not shown as settings.
    rows = [*result.config.loader_kwargs().items(), ("samples/s", rate(result.samples_per_s, ""))]
    if tuned.provisional:
        rows.append(("provisional", provisional_text(tuned.provisional)))
    if tuned.baseline_samples_per_s:
        rows.append(("num_workers=0", rate(tuned.baseline_samples_per_s, "")))
    if inputs is not None:
        rows.append(("step", f"{(inputs.step_identity or inputs.step) or 'none'}"
                     + (f" (given as {inputs.step})" if inputs.step_identity and inputs.step else "")))
    if result.knee is not None and profiled(result):
        rows.append(("worker knee", f"stops paying at {result.knee.stops_paying}, peak at {result.knee.peak}"))
    if d is not None and d != DatasetRecord():
        rows.append(("dataset", f"{d.name}, {d.length} samples, content {d.content}"
                     + (f", version {d.version}" if d.version else "")))
    form = made.measurement_format if made is not None and made.measurement_format is not None else "?"
    rows.append(("measured", f"{result.finished_at or 'undated'} by autoloader "
                 f"{(made.autoloader_version if made else None) or '?'}, format {form}"))
    if result.trials:
        rows.append(("trials", f"{len(result.trials)}{' (warm start held)' if result.early_stop else ''}"))
    # The table's and the page's caveats, from the same function: where the rate is from, the
    # rule, the machine's load (a run's mark, which keeps the pick alone, has its load).
    rows += caveats(result) if not result.partial else [("machine load", t) for t in load_lines(result.load)]
    if threads is not None and threads.threads:
        rows.append(("main threads", f"{threads.threads}" + (
            f"; set torch.set_num_threads(1) in the training process ({threads.slower or 0:.1f}x faster with one "
            "thread here)" if threads.advise else "")))
    lines = [f"{result.dataset_key} on {result.hardware.fingerprint}", f"  from {result.where}"]
    lines += [f"  {label if i == 0 or rows[i - 1][0] != label else '':<20} {text}"   # a label once per run of it
              for i, (label, text) in enumerate(rows)]
    if result.nodes is not None:   # the tuned graph, as code: search/nodes.py
        lines += ["", "  the tuned torchdata.nodes graph:", ""]
        measured = f"{rate(result.samples_per_s, ' samples/s')} on {tuned.device}"
        lines += [f"    {line}".rstrip() for line in graph_snippet(result.config, result.nodes, measured).splitlines()]
    return "\n".join(lines) + "\n"


def as_json(value) -> str:
    return json.dumps(value, indent=2, default=str)
