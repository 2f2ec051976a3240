"""What a newcomer's first errors read like: a failure found by running the input gets no click
usage header (the command was typed right), a mistyped command does; the demo names a
torch/torchvision pair that does not match, with the pip line that fixes it."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
import torch
from click.testing import CliRunner

from autoloader import demo
from autoloader.cli import main as cli
from autoloader.errors import InputError, UsageError
from conftest import REPO_ROOT

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")


@pytest.mark.parametrize("error, header", [(InputError("the dataset raised (got 1). Fix: fix it"), False),
                                           (UsageError("--budget is a number (got 'x'). Fix: pass one"), True)])
def test_only_a_mistyped_command_gets_the_usage_header(monkeypatch, error, header):
    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr("autoloader.cli.tune", fails)
    done = CliRunner().invoke(cli, ["tune", "--dataset", "x:y"])
    assert done.exit_code == 2, done.output
    assert ("Usage: " in done.output) is header and f"Error: {error}" in done.output, done.output


def fake_torchvision(monkeypatch, failure: Exception | None):
    """A torchvision whose io raises ``failure`` when its operators are called (None: not installed)."""
    demo._torchvision_io.cache_clear()
    if failure is None:
        monkeypatch.setitem(sys.modules, "torchvision", None)
        return

    def operator(*args, **kwargs):
        raise failure

    io = types.SimpleNamespace(encode_jpeg=operator, decode_jpeg=operator)
    monkeypatch.setitem(sys.modules, "torchvision", types.SimpleNamespace(io=io, __path__=[]))
    monkeypatch.setitem(sys.modules, "torchvision.io", io)


def test_the_demo_names_a_torchvision_built_for_another_torch(monkeypatch):
    fake_torchvision(monkeypatch, RuntimeError("operator image::encode_jpeg does not exist"))
    try:
        with pytest.raises(UsageError) as caught:
            demo.JpegImages(length=8)
    finally:
        demo._torchvision_io.cache_clear()
    text = str(caught.value)
    minor = int(torch.__version__.split(".")[1])
    assert "must be built for the installed torch" in text and f"torch {torch.__version__}" in text
    assert "operator image::encode_jpeg does not exist" in text
    assert f"'torchvision==0.{minor + 15}.*'" in text and "pip install --force-reinstall" in text
    assert "autoloader.demo:tensors" in text


def test_the_demo_names_a_missing_torchvision_and_passes_other_errors_on(monkeypatch):
    fake_torchvision(monkeypatch, None)
    try:
        with pytest.raises(UsageError, match="which must be installed"):
            demo.JpegImages(length=8)
        fake_torchvision(monkeypatch, RuntimeError("a decoder's own bug"))
        with pytest.raises(RuntimeError, match="a decoder's own bug"):
            demo.JpegImages(length=8)
    finally:
        demo._torchvision_io.cache_clear()


@pytest.mark.slow
def test_a_mismatched_torchvision_fails_the_demo_without_the_usage_header(tmp_path):
    """torchvision built for another torch fails on import with its operators unregistered; the
    trial process meets it building the demo, and the command says which pair and the fix."""
    package = tmp_path / "shadow" / "torchvision"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), REPO_ROOT,
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([AUTOLOADER, "tune", "--dataset", "autoloader.demo:images", "--budget", "20", "--device",
                           "cpu", "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Usage:" not in done.stderr and "Try 'autoloader" not in done.stderr, done.stderr[-3000:]
    assert "must be built for the installed torch" in done.stderr
    assert "operator torchvision::nms does not exist" in done.stderr and "'torchvision==0." in done.stderr
