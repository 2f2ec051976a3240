"""Bad inputs for the stored-state checks (``state.py``, ``commands.py``) and their tests: user
code that raises and is then fixed, a sampler that raises, a dataset too long to shuffle, a
result file as a run writes it (to damage), a registry, and ``best_loader`` run as a command (for
a full disk: ``python -m scripts.faults.inputs best_loader OUT``).

Module level, as the fault datasets are (``datasets.py``): what ``tune()`` is handed is pickled by
reference and re-imported in the trial process. The user modules that are "fixed" between two
runs are written as files (``write_module``), since the fix must change a file the tuner reads.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import torch
from torch.utils.data import Dataset, Sampler

BROKEN_STEP = 'def step(batch):\n    raise RuntimeError("step boom")\n'
FIXED_STEP = 'def step(batch):\n    return None  # fixed\n'

RAGGED = '''import torch
from torch.utils.data import Dataset


class Ragged(Dataset):
    """The first 8 samples (what the set-up probe loads) agree in size; the rest vary."""

    def __len__(self):
        return 256

    def __getitem__(self, index):
        return torch.zeros(4 + (index % 3 if index >= 8 and VARY else 0))


VARY = {vary}


def make():
    return Ragged()
'''


def write_module(path: str, text: str) -> None:
    """Write a user module as an editor would. Its mtime is moved ahead: the import system trusts
    a cached .pyc whose recorded mtime and size match, and a rewrite of the same size within the
    same second would be read stale."""
    with open(path, "w") as fh:
        fh.write(text)
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))


class Small(Dataset):
    def __init__(self, length: int = 256):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return torch.full((4,), float(index))


class RaisingSampler(Sampler):
    """A sampler whose ``__iter__`` raises (a bug in a user's sampler); it appends the pid of the
    process that asked it to ``marker``, so a check can tell whether that process was restarted."""

    def __init__(self, marker: str, length: int = 256):
        self.marker = marker
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        with open(self.marker, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        raise ValueError("sampler boom: no indices today")


class HugeLength(Small):
    """Says it holds 10**12 samples: shuffling it needs a permutation of 10**12 indices."""

    def __len__(self) -> int:
        return 10**12


def result_record(**changes) -> dict:
    """A result file's content as a run writes it (the fields ``show`` and ``best_loader`` read),
    with ``changes`` on top."""
    from autoloader.store.versions import MEASUREMENT_FORMAT

    data = {"format": 2, "config": {"batch_size": 16, "num_workers": 1, "pin_memory": False, "prefetch_factor": 2,
                                    "persistent_workers": True},
            "samples_per_s": 1000.0, "rel_interval": 0.02, "baseline_samples_per_s": 400.0, "knee": None,
            "hardware": {"fingerprint": "box-0x-2cpu", "cpus": 2, "cpu_model": "x", "memory_gib": 8, "gpus": []},
            "dataset_key": "ds-n256-0123456789", "device": "cpu", "measurement_format": MEASUREMENT_FORMAT,
            "autoloader_version": "0.1.0", "finished_at": "2026-12-01T00:00:00+00:00", "trials": [],
            "dataset": {"name": "ds", "length": 256, "content": "abc", "version": None}}
    return {**data, **changes}


def write_result(out: str, data: dict, fingerprint: str | None = None, key: str | None = None) -> str:
    """``data`` stored as ``<out>/<fingerprint>/<key>.json`` (the record's own by default)."""
    fingerprint = fingerprint or data["hardware"]["fingerprint"]
    path = os.path.join(out, fingerprint, (key or data["dataset_key"]) + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps(data))
    return path


def registry_text(dataset: str, *lines: str, budget: int = 10) -> str:
    """A retune registry of one dataset, ``lines`` added to its entry."""
    return "\n".join(["[defaults]", f"budget = {budget}", 'device = "cpu"', "", "[[datasets]]",
                      f'dataset = "{dataset}"', "batch_size = 16", *lines, ""])


def best_loader_main(out: str) -> int:
    """``best_loader`` on ``Small`` into ``out``; one JSON line: the loader's settings and the
    warnings autoloader gave (an error is left to show as it would in a user's script)."""
    from autoloader import best_loader
    from autoloader.errors import AutoloaderWarning
    from scripts.faults.inputs import (
        Small as ByName,  # pickled by its module's name, not __main__'s
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AutoloaderWarning)
        # tune="before": the tune whose result cannot be stored (in the run, the loader stores it later)
        loader = best_loader(ByName(), batch_size=16, budget=10, device="cpu", out=out, trial_timeout=20,
                             tune="before")
    print(json.dumps({"batch_size": loader.batch_size, "num_workers": loader.num_workers,
                      "warnings": [str(w.message) for w in caught if issubclass(w.category, AutoloaderWarning)]}))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["best_loader"]:
        sys.exit(best_loader_main(sys.argv[2]))
    sys.exit(f"usage: python -m scripts.faults.inputs best_loader OUT (got {sys.argv[1:]})")
