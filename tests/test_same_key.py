"""One problem, one key, however it is named (NOTE [ A step keyed by what it is ] in
inputs/code_digest.py): a CLI spec of a file and the objects imported from it; a change to the
step's code is another problem, a comment is not; a script's own objects are named by its file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from autoloader.api import built_problem
from autoloader.inputs.code_digest import callable_identity, module_name
from autoloader.inputs.problem import Problem
from autoloader.inputs.source import load_spec
from conftest import REPO_ROOT

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")

DATA = textwrap.dedent('''
    import time

    import torch
    from torch.utils.data import Dataset


    class Rows(Dataset):
        def __len__(self):
            return 2048

        def __getitem__(self, i):
            end = time.process_time() + 0.0002
            while time.process_time() < end:
                pass
            return torch.full((16,), float(i)), i % 3


    def make():
        return Rows()


    def make_step():
        layer = torch.nn.Linear(16, 3)

        def step(batch):
            x, y = batch
            torch.nn.functional.cross_entropy(layer(x), y).backward()

        return step
''')

TRAIN = textwrap.dedent('''
    import json
    import sys

    from autoloader import best_loader
    from data import make, make_step

    if __name__ == "__main__":
        events = []
        loader = best_loader(make(), batch_size=16, step=make_step, device="cpu", budget=20,
                             progress=lambda event, data: events.append(event))
        json.dump({"events": events, "num_workers": loader.num_workers}, sys.stdout)
''')


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "data.py").write_text(DATA)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("data", None)
    yield tmp_path
    sys.modules.pop("data", None)


def test_a_spec_of_a_file_and_the_objects_imported_from_it_have_one_key(folder):
    spec = Problem.build("data.py:make", step="data.py:make_step", batch_size=16, device="cpu")
    # The trial process loads the spec (source.py imports data.py as the module `data`) and reports:
    step = load_spec("data.py:make_step")
    dataset = load_spec("data.py:make")()
    from autoloader.inputs.content import dataset_class, dataset_fingerprint

    on_cli = spec.with_length(len(dataset), dataset_fingerprint(dataset), dataset_class(dataset),
                              callable_identity(step))
    import data

    from_python = built_problem(data.make(), data.make(), step=data.make_step, batch_size=16, device="cpu")
    assert on_cli.key == from_python.key
    assert from_python.step_identity.startswith("data.make_step#")
    assert built_problem(data.make(), data.make(), step="data.py:make_step", batch_size=16, device="cpu").key \
        == on_cli.key, "a spec given to best_loader names the same step"


def test_the_steps_code_is_in_its_identity_and_its_comments_are_not(folder):
    import data

    before = callable_identity(data.make_step)
    (folder / "data.py").write_text(DATA.replace("        return step\n", "        # the step\n        return step\n"))
    sys.modules.pop("data", None)
    import data as commented

    assert callable_identity(commented.make_step) == before
    (folder / "data.py").write_text(DATA.replace("cross_entropy", "nll_loss"))
    sys.modules.pop("data", None)
    import data as changed

    assert callable_identity(changed.make_step) != before, "another step is another problem"


def test_a_scripts_own_objects_are_named_by_its_file(monkeypatch, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    assert module_name("__main__") == "train" and module_name("__mp_main__") in ("train", "__main__")
    assert module_name("pkg.data") == "pkg.data"


@pytest.mark.slow
def test_a_result_tuned_on_the_cli_is_found_from_python_in_the_files_folder(folder):
    """`autoloader tune --dataset data.py:make --step data.py:make_step`, then, in the same folder,
    ``best_loader(make(), step=make_step)`` from a script that imports `data`: no second tune."""
    (folder / "train.py").write_text(TRAIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])}
    tuned = subprocess.run([AUTOLOADER, "tune", "--dataset", "data.py:make", "--step", "data.py:make_step",
                            "--batch-size", "16", "--budget", "20", "--device", "cpu", "--json"],
                           capture_output=True, text=True, env=env, cwd=str(folder), timeout=120)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    pick = json.loads(tuned.stdout)["config"]
    found = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, env=env, cwd=str(folder),
                           timeout=120)
    assert found.returncode == 0, found.stderr[-3000:]
    seen = json.loads(found.stdout)
    assert seen["events"] == ["reused", "applied"], f"tuned again: {seen}\n{found.stderr[-2000:]}"
    assert seen["num_workers"] == pick["num_workers"]
