"""Issue 52: one run, one story. Each figure is computed once, and every surface (the table, the
verdict, the report page, the JSON) renders that one value; the page carries the table's caveats;
advice fits its object; the install check names the one fix.

The results here are built from synthetic records (tests/explain_cases.py), no trial runs.
"""

from __future__ import annotations

from autoloader.events.lines import cpus, others_text


def test_plurals_of_cpus():
    assert cpus(1) == "1 CPU" and cpus(2) == "2 CPUs" and cpus(1.5) == "1.5 CPUs"
    assert others_text(0.5, 1) == "other processes used 0.5 of 1 CPU"


# -- the install path: a torch and a torchvision built for different devices or releases --------

from autoloader import demo  # noqa: E402

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def test_a_cpu_torch_beside_a_cuda_torchvision_gets_the_cpu_index_line():
    # The machine: the README's CPU index unreachable, a +cpu torch 2.13 stayed beside
    # PyPI's CUDA-built torchvision 0.28 (the right release): the fix is the device, not the release.
    error = "OSError: libc10_cuda.so: cannot open shared object file: No such file or directory"
    fix = demo.pair_fix("2.13.0+cpu", "0.28.0", error)
    assert fix.endswith(f"pip install --force-reinstall --no-deps 'torchvision==0.28.*' {CPU_INDEX}"), fix
    assert "CPU build" in fix
    # A tagged CUDA torchvision says so by its version alone.
    assert CPU_INDEX in demo.pair_fix("2.13.0+cpu", "0.28.0+cu128", "undefined symbol: x")
    # And a CUDA torch beside a CPU torchvision: its own index.
    assert demo.pair_fix("2.13.0+cu128", "0.28.0+cpu").endswith("--index-url https://download.pytorch.org/whl/cu128")


def test_another_release_gets_the_paired_release():
    fix = demo.pair_fix("2.13.0+cpu", "0.26.0+cpu", "operator torchvision::nms does not exist")
    assert "'torchvision==0.28.*'" in fix and CPU_INDEX in fix and "0.26" not in fix
    # Never the version already there as the whole fix: same release, same build, the pair again.
    same = demo.pair_fix("2.13.0", "0.28.0", "operator torchvision::nms does not exist")
    assert "'torch==2.13.0' 'torchvision==0.28.*'" in same


def test_the_demo_error_names_the_device_fix(monkeypatch):
    import sys
    import types

    import pytest

    from autoloader.errors import UsageError

    demo._torchvision_io.cache_clear()

    def operator(*args, **kwargs):
        raise OSError("libc10_cuda.so: cannot open shared object file: No such file or directory")

    io = types.SimpleNamespace(encode_jpeg=operator, decode_jpeg=operator)
    monkeypatch.setitem(sys.modules, "torchvision", types.SimpleNamespace(io=io, __path__=[]))
    monkeypatch.setitem(sys.modules, "torchvision.io", io)
    monkeypatch.setattr(demo.torch, "__version__", "2.13.0+cpu")
    monkeypatch.setattr(demo, "_installed", lambda name: "0.28.0")
    try:
        with pytest.raises(UsageError) as caught:
            demo.JpegImages(length=8)
    finally:
        demo._torchvision_io.cache_clear()
    text = str(caught.value)
    assert "torch 2.13.0+cpu, torchvision 0.28.0" in text and "libc10_cuda.so" in text
    assert f"'torchvision==0.28.*' {CPU_INDEX}" in text
