"""The retune registry: a small TOML file listing the datasets a machine re-tunes each night.

Example (every key but ``datasets[].dataset`` may be left out)::

    [fleet]                       # where results, the study and the reports go (CLI options win)
    out = "/var/cache/autoloader"
    storage = "postgresql://tuner@db.internal/autoloader"
    reports = "/var/log/autoloader"

    [defaults]                    # each dataset's settings unless it says otherwise
    budget = 60
    device = "cpu"
    max_memory = "8G"
    trial_timeout = 60

    [thresholds]                  # what counts as drift (exit 3)
    rate = 0.25                   # the old pick's rate now against then, either way
    knee = 4                      # workers the knee moved (default: reported, not judged)
    memory_per_worker = 0.5       # relative change of the memory one more worker costs
    pick = true                   # a changed pick (not a tie) is drift
    busy = 0.5                    # others past this share of the CPUs: the night is inconclusive (exit 5);
                                  # default $AUTOLOADER_BUSY_SHARE, else 0.5

    [[datasets]]
    name = "images"               # default: the dataset spec
    dataset = "autoloader.demo:images"
    step = "train.py:step"
    batch_sizes = [64, 128]       # or batch_size = 128
    version = "2026-11"
    budget = 30
    options = { drop_last = true }   # DataLoader arguments used in every trial

A ``path/to/file.py`` in a spec is relative to the registry's folder, and that folder is where
dotted module names are looked for too, so a registry and its dataset modules travel together.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

try:
    import tomllib
except ImportError:   # Python 3.10: the same parser, as a package
    import tomli as tomllib

from ..errors import UsageError, usage
from ..inputs.loader_args import check_loader_kwargs
from ..inputs.problem import batch_sizes_of
from ..inputs.source import Source, _split_spec
from ..inputs.options import DEFAULT_BUDGET_S, DEFAULT_TRIAL_TIMEOUT_S, Options, default_thresholds
from ..search.policy import Thresholds

SETTINGS = ("budget", "device", "max_memory", "trial_timeout")
FLEET = ("out", "storage", "reports")
THRESHOLDS = ("rate", "knee", "memory_per_worker", "pick", "busy")
DATASET_KEYS = {"name", "dataset", "step", "batch_size", "batch_sizes", "version", "options", *SETTINGS}


@dataclass(frozen=True)
class Entry:
    """One dataset to re-tune."""
    name: str
    dataset: Source
    step: Source | None
    batch_sizes: tuple[int, ...]
    version: str | None
    options: dict
    settings: dict          # budget, device, max_memory, trial_timeout: the defaults with its own on top

    def run_options(self, out: str | None = None, storage: str | None = None, thresholds: Thresholds | None = None):
        """Its run settings as a run takes them (``inputs.options.Options``)."""
        get = self.settings.get
        return Options.build(get("budget", DEFAULT_BUDGET_S), get("trial_timeout", DEFAULT_TRIAL_TIMEOUT_S),
                             get("max_memory"), out, storage, thresholds)


@dataclass(frozen=True)
class Registry:
    path: str
    entries: tuple[Entry, ...]
    thresholds: Thresholds = field(default_factory=Thresholds)
    fleet: dict = field(default_factory=dict)   # out, storage, reports


def load(path: str) -> Registry:
    """Read and check the registry at ``path``; a UsageError names what is wrong and the fix."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise usage("the registry must be a TOML file that exists", path, "pass the path of your registry") from None
    except UnicodeDecodeError as exc:
        raise usage("the registry must be readable TOML, which is UTF-8 text", f"{path}: {exc}",
                    "save the file as UTF-8 (iconv -t UTF-8, or your editor's encoding setting)") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise usage("the registry must be readable TOML", f"{path}: {exc}",
                    "fix the line it names (see the example in `autoloader retune --help`)") from None
    return parse(data, path)


def parse(data: dict, path: str) -> Registry:
    folder = os.path.dirname(os.path.abspath(path))
    _only(data, {"fleet", "defaults", "thresholds", "datasets"}, "the registry's tables")
    fleet = _table(data, "fleet", FLEET)
    for key, value in fleet.items():
        if not isinstance(value, str) or not value:
            raise usage(f"[fleet] {key} is a non-empty string", value, f'write e.g. {key} = "..."')
    fleet = {k: (v if k == "storage" else os.path.join(folder, os.path.expanduser(v))) for k, v in fleet.items()}
    defaults = _table(data, "defaults", SETTINGS)
    thresholds = _thresholds(_table(data, "thresholds", THRESHOLDS))
    entries = data.get("datasets")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise usage("the registry lists at least one dataset as [[datasets]] tables", entries,
                    'add [[datasets]] with dataset = "MODULE:ATTR"')
    out = tuple(_entry(entry, defaults, folder, index) for index, entry in enumerate(entries))
    names = [e.name for e in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise usage("each dataset in the registry has a name of its own", repeated,
                    "give the repeated ones a name = \"...\" each")
    if folder not in sys.path:
        sys.path.insert(0, folder)   # dotted modules beside the registry (trial processes inherit it)
    return Registry(os.path.abspath(path), out, thresholds, fleet)


def _table(data: dict, name: str, keys: tuple[str, ...]) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise usage(f"[{name}] is a table", value, f"write it as [{name}] with key = value lines")
    _only(value, set(keys), f"[{name}]")
    return value


def _typed(entry: dict, key: str, kind: type, where: str, what: str, example: str, default=None):
    """``entry[key]`` (``default`` where absent), or a UsageError where it is not ``kind``."""
    value = entry.get(key, default)
    if value is not None and not isinstance(value, kind):
        raise usage(f"{where}.{key} is {what}", value, f"write e.g. {example}")
    return value


def _only(table: dict, allowed: set, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise usage(f"{where} may hold only {', '.join(sorted(allowed))}", unknown,
                    "remove or rename the unknown keys (a typo would otherwise be ignored)")


def _thresholds(table: dict) -> Thresholds:
    busy = table.get("busy")
    if busy is not None and (isinstance(busy, bool) or not isinstance(busy, (int, float)) or not 0 < busy < 1):
        raise usage("thresholds.busy is a share of the CPUs, above 0 and below 1", busy, "write e.g. busy = 0.5")
    for key in ("rate", "memory_per_worker"):
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise usage(f"thresholds.{key} is a positive fraction", value, f"write e.g. {key} = 0.25")
    knee = table.get("knee")
    if knee is not None and (isinstance(knee, bool) or not isinstance(knee, int) or knee < 1):
        raise usage("thresholds.knee is a whole number of workers, 1 or more", knee, "write e.g. knee = 2")
    pick = table.get("pick")
    if pick is not None and not isinstance(pick, bool):
        raise usage("thresholds.pick is true or false", pick, "write pick = true")
    values = {k: (float(v) if k in ("rate", "memory_per_worker", "busy") else v) for k, v in table.items()}
    return Thresholds(**{"busy": default_thresholds().busy, **values})


def _entry(entry: dict, defaults: dict, folder: str, index: int) -> Entry:
    where = f"datasets[{index}]"
    _only(entry, DATASET_KEYS, where)
    spec = entry.get("dataset")
    if not isinstance(spec, str):
        raise usage(f"{where} names its dataset as dataset = \"MODULE:ATTR\"", spec,
                    'write e.g. dataset = "autoloader.demo:images"')
    step = _typed(entry, "step", str, where, 'a "MODULE:ATTR" string', 'step = "train.py:step"')
    options = _typed(entry, "options", dict, where, "a table of DataLoader arguments",
                     "options = { drop_last = true }", default={})
    sizes = _typed(entry, "batch_sizes", list, where, "a list", "batch_sizes = [64, 128]")
    try:
        batch_sizes = batch_sizes_of(entry.get("batch_size"), sizes)
        check_loader_kwargs(options, batch_sizes, f"{where}.options entry")
        dataset = _spec_source(spec, folder)
        step_source = _spec_source(step, folder) if step is not None else None
    except UsageError as exc:
        raise usage(f"{where} must be a valid dataset entry", spec, str(exc)) from None
    name = entry.get("name", spec)
    if not isinstance(name, str) or not name:
        raise usage(f"{where}.name is a non-empty string", name, 'write e.g. name = "images"')
    version = _typed(entry, "version", str, where, "a string", 'version = "2026-11"')
    settings = {**defaults, **{k: entry[k] for k in SETTINGS if k in entry}}
    # The run settings checked as a run checks them, so a bad one is a bad registry (exit 2)
    # before anything runs, not a failed dataset after the others.
    device = settings.get("device")
    if device is not None and (not isinstance(device, str) or not (device in ("cpu", "cuda")
                                                                     or device.startswith("cuda:"))):
        raise usage(f"{where}: device is \"cpu\", \"cuda\" or \"cuda:N\"", device, 'write e.g. device = "cuda"')
    checked = Entry(name, dataset, step_source, batch_sizes, version, dict(options), settings)
    try:
        checked.run_options()
    except UsageError as exc:
        raise usage(f"{where} must have valid run settings", {k: settings[k] for k in sorted(settings)},
                    str(exc)) from None
    return checked


def _spec_source(spec: str, folder: str) -> Source:
    """A spec's recipe: its name as written (so the key does not depend on where the registry
    lies), its file made absolute against the registry's folder."""
    module, attr = _split_spec(spec)
    if module.endswith(".py") or "/" in module:
        path = os.path.join(folder, os.path.expanduser(module))
        return Source(name=spec, spec=f"{path}:{attr}")
    return Source.from_spec(spec)
