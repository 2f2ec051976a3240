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
