"""Where a tune's time goes: the set-up's and the profile's parts recorded in the result, each
burst's lead and teardown; the dataset's heap read without its factory module's imports (so a
small dataset skips the growth stage); and the imports compiled from source, found and said
(NOTE [ Imports compiled every start ] in autoloader/probe/trial.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from workloads import Tiny

from autoloader import tune
from autoloader.inputs.source import Source
from autoloader.probe.protocol import DatasetInfo, RunnerSetup
from autoloader.probe.trial import _Runner
from autoloader.search.policy import GROWTH_MIN_DATASET
from autoloader.store.records import Inputs
from autoloader.store.result import TuneResult
from autoloader.tuning.start import warn_uncompiled

HEAP_MODULE = """
import torch

# Touched at import (bytes of a pattern, not zeros): the module's own heap, tens of MiB.
BLOB = bytes(range(256)) * (256 * 1024)


class Small(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((4,), float(i))


def small():
    return Small()


built = Small()
built.rows = bytearray(b"r" * (48 << 20))   # the dataset's own rows, built (and touched) at import


def the_built():
    return built
"""


@pytest.fixture
def heap_module(tmp_path, monkeypatch):
    name = f"heapmod_{tmp_path.name}"   # a module of its own each test: none is imported already
    (tmp_path / f"{name}.py").write_text(HEAP_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_factorys_module_imports_are_not_counted_as_its_datasets_heap(heap_module):
    runner = _Runner(RunnerSetup(Source.from_spec(f"{heap_module}:small"), None, "cpu", {}, 16))
    assert runner.dataset_bytes is not None
    # The module holds 64 MiB and more, the dataset nothing: the growth stage is not due.
    assert runner.dataset_bytes < GROWTH_MIN_DATASET, runner.dataset_bytes
    assert [what for what, *_ in runner.parts.marks][:3] == [
        "start the interpreter, import torch", "import the dataset's module", "build the dataset"]


@pytest.mark.parametrize("attr", ["built", "the_built"])
def test_a_dataset_built_at_its_modules_import_counts_the_module(tmp_path, monkeypatch, attr):
    """Named itself, or returned by a factory as one of its module's names: built at import, its
    heap cannot be told from the module's, so both count (64 + 48 MiB)."""
    name = f"heapinst_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(HEAP_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = _Runner(RunnerSetup(Source.from_spec(f"{name}:{attr}"), None, "cpu", {}, 16))
    assert runner.dataset_bytes is not None and runner.dataset_bytes >= 100 * 2**20, runner.dataset_bytes


def test_a_tune_records_its_set_up_and_profile_parts_and_each_bursts_lead_and_teardown(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(Tiny(512), batch_size=16, budget=25, out=str(tmp_path), device="cpu", progress=False)
    parts = result.inputs.parts
    names = [what for what, *_ in parts]
    assert names[0] == "start the interpreter, import torch"
    assert {"build the dataset", "load a first batch", "profile: samples", "profile: consumer"} <= set(names)
    set_up = next(m for m in result.inputs.timeline if m[0] == "set-up")
    for what, start, end in parts:
        # On the run's clock: the trial process starts after the run does, each part after the last.
        assert 0.0 <= start <= end, (what, start, end)
        if not what.startswith("profile: "):
            assert end <= set_up[2] + 0.05, (what, end, set_up)
    # The set-up's parts account for the set-up: the spawn to Ready, nothing left unnamed but the pickle.
    assert sum(end - start for what, start, end in parts if not what.startswith("profile: ")) >= 0.7 * set_up[2]
    ok = [t for t in result.trials if t.ok]
    assert ok and all(t.lead_s is not None and t.lead_s >= 0 and t.teardown_s is not None and t.teardown_s >= 0
                      for t in ok)
    assert all(t.startup_s + t.lead_s + t.window_s + t.teardown_s <= t.seconds + 0.05 for t in ok)
    # Stored and read back whole.
    again = TuneResult.from_dict(result.to_dict())
    assert again.inputs.parts == parts and again.profile.stage_s == result.profile.stage_s


def test_stored_parts_are_checked():
    from autoloader.search.codec import InvalidRecord

    good = {"timeline": [], "parts": [["build the dataset", 0.5, 1.5]]}
    assert Inputs.from_dict(good).parts == (("build the dataset", 0.5, 1.5),)
    with pytest.raises(InvalidRecord, match=r"inputs.parts\[0\]"):
        Inputs.from_dict({"parts": [["build the dataset", 0.5]]}, "inputs")
    assert Inputs.from_dict({"step": None}).parts == ()   # an older result: none recorded


def _uncompiled_in_fresh_interpreter(folder, env) -> str:
    code = ("import coldpkg; from autoloader.probe.trial import uncompiled; "
            "print(','.join(uncompiled(('coldpkg',))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_package_without_bytecode_is_found_and_found_no_more_once_compiled(tmp_path):
    package = tmp_path / "coldpkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONPYCACHEPREFIX", None)
    assert _uncompiled_in_fresh_interpreter(tmp_path, env) == "coldpkg"
    assert not (package / "__pycache__").exists()   # nothing written: the flag held
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, env=env, timeout=120)
    assert _uncompiled_in_fresh_interpreter(tmp_path, env) == ""


def test_the_warning_names_the_packages_the_seconds_and_the_fix(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    info = DatasetInfo(10, 0.1, 4, 1, 1, setup_parts=(("start the interpreter, import torch", 0.0, 4.5),
                                                      ("import the dataset's module", 4.5, 10.0),
                                                      ("build the dataset", 10.0, 10.1)),
                       uncompiled=("torch", "torchvision"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_uncompiled(info)
        warn_uncompiled(DatasetInfo(10, 0.1, 4, 1, 1))   # all compiled: nothing said
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "torch, torchvision" in text and "PYTHONDONTWRITEBYTECODE is set" in text
    assert "10.0 s" in text and "python -m compileall" in text and "torch.__path__[0]" in text


def test_the_quick_bench_shows_each_tunes_parts():
    from scripts.bench.quick import anatomy_lines

    tuner = {"inputs": {"parts": [["start the interpreter, import torch", 0.0, 4.0],
                                  ["profile: growth", 6.0, 8.5]],
                        "timeline": [["set-up", 0.0, 5.0, None], ["burst", 9.0, 14.0, "bs64-w15-pin1-pf2-pw1"],
                                     ["final", 14.0, 18.0, "bs64-w0-pin1"]]},
             "trials": [{"config": {"batch_size": 64, "num_workers": 15, "pin_memory": True, "prefetch_factor": 2,
                                    "persistent_workers": True},
                         "startup_s": 1.0, "lead_s": 0.5, "window_s": 3.0, "teardown_s": 0.25}]}
    text = "\n".join(anatomy_lines({"large": {"tuner": tuner}}))
    assert "start the interpreter, import torch 4.00" in text and "profile: growth 2.50" in text
    assert "burst w15 5.0 = 1.0+0.5+3.0+0.2+0.2" in text or "burst w15 5.0 = 1.0+0.5+3.0+0.2+0.3" in text
    assert "final w0 4.0" in text


def test_the_module_heap_fixture_is_what_the_first_test_reads(heap_module):
    # The premise of the first test: importing the module alone adds tens of MiB to the heap.
    from autoloader.probe.growth import anonymous_bytes

    before = anonymous_bytes()
    __import__(heap_module)
    added = anonymous_bytes() - before
    assert added >= 60 * 2**20, added
    del sys.modules[heap_module]
