"""Loading ``path/to/file.py:attr`` specs: under the file's own name, so processes started with
'spawn' can import it; under a private name when that name belongs to another module."""

import importlib
import os
import random
import sys

from autoloader.inputs.source import load_spec


def test_a_file_is_imported_under_its_own_name(tmp_path):
    stem = f"spec_data_{os.getpid()}"
    (tmp_path / f"{stem}.py").write_text("class Data:\n    pass\n")
    data_class = load_spec(f"{tmp_path}/{stem}.py:Data")
    assert data_class.__module__ == stem
    assert importlib.import_module(stem).Data is data_class  # what a spawned process would do
    assert str(tmp_path) in sys.path


def test_a_file_named_like_another_module_does_not_shadow_it(tmp_path):
    (tmp_path / "random.py").write_text("VALUE = 42\n")
    assert load_spec(f"{tmp_path}/random.py:VALUE") == 42
    assert sys.modules["random"] is random and hasattr(random, "shuffle")


# --- what a spec names: an instance, a factory, a class (issue 31) ------------------------------

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402

from autoloader.errors import UsageError  # noqa: E402
from autoloader.inputs.source import resolve_dataset, resolve_step  # noqa: E402


class NeedsArgs(Dataset):
    def __init__(self, root, length):
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return torch.zeros(2)


class NoArgs(NeedsArgs):
    def __init__(self):
        super().__init__("/data", 3)


class StepNeedsModel:
    def __init__(self, model):
        self.model = model

    def __call__(self, batch):
        return None


def test_a_dataset_class_is_built_when_it_takes_no_arguments():
    built = resolve_dataset(NoArgs, "m:NoArgs")
    assert isinstance(built, NoArgs) and len(built) == 3


@pytest.mark.parametrize("spec, obj, says", [
    ("m:NeedsArgs", NeedsArgs, "m:NeedsArgs -> class NeedsArgs(root, length)"),
    ("m:make", lambda root: NoArgs(), "a callable is called only when it takes no arguments"),
    ("m:none", lambda: None, "m:none() returned None"),
    ("m:five", lambda: 5, "m:five() returned int"),
    ("m:cls", lambda: NoArgs, "m:cls() returned type"),
])
def test_a_spec_that_gives_no_dataset_is_a_usage_error_naming_the_fix(spec, obj, says):
    with pytest.raises(UsageError) as caught:
        resolve_dataset(obj, spec)
    message = str(caught.value)
    assert says in message and "Fix:" in message, message


def test_a_step_class_that_needs_arguments_is_refused_not_called_per_batch():
    with pytest.raises(UsageError, match=r"class StepNeedsModel\(model\).*Fix: pass an instance"):
        resolve_step(StepNeedsModel, "m:StepNeedsModel")
    step = StepNeedsModel(None)
    assert resolve_step(step, "m:step") is step
