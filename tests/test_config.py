"""TunedConfig: dict round trip and the self-contained snippet."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from workloads import GlobalDraws, Tiny

from autoloader import LoaderConfig, TunedConfig, seed_worker
from autoloader.search.config import find_knee
from autoloader.store.snippet import snippet

HARDWARE = {"cpus": 2, "cpu_model": "test cpu", "memory_gib": 16, "gpus": [],
            "fingerprint": "cpu-0x-2cpu-16g-00000000"}


def tuned(config: LoaderConfig, **changes) -> TunedConfig:
    fields = dict(config=config, samples_per_s=2500.5, rel_interval=0.021, baseline_samples_per_s=1000.0,
                  knee=find_knee([(0, 1000.0), (1, 1800.0), (2, 2500.5), (4, 2400.0)]), hardware=HARDWARE,
                  dataset_key="workloads-Tiny-n256-0123456789", device="cpu")
    fields.update(changes)
    return TunedConfig(**fields)


WITH_WORKERS = LoaderConfig.make(16, 2, False, 4, False)
NO_WORKERS = LoaderConfig.make(16, 0, False)
CASES = {
    "workers": tuned(WITH_WORKERS),
    "persistent": tuned(LoaderConfig.make(8, 3, True, 2, True), device="cuda"),
    "no-workers": tuned(NO_WORKERS),
    "bare": tuned(NO_WORKERS, rel_interval=None, baseline_samples_per_s=None, knee=None, hardware={}),
}


@pytest.mark.parametrize("name", CASES)
def test_round_trip_through_a_dict_and_json(name):
    config = CASES[name]
    data = config.to_dict()
    assert TunedConfig.from_dict(data) == config
    assert TunedConfig.from_dict(json.loads(json.dumps(data))) == config
    assert data["config"] == config.config.loader_kwargs()


def test_dict_is_strict_json_even_with_an_unknown_interval():
    data = tuned(WITH_WORKERS, rel_interval=math.inf).to_dict()
    text = json.dumps(data, allow_nan=False)  # raises on Infinity/NaN, which JSON does not have
    assert json.loads(text)["rel_interval"] is None


def test_loader_kwargs_add_the_seeded_init_only_with_workers():
    assert CASES["workers"].loader_kwargs() == {**WITH_WORKERS.loader_kwargs(), "worker_init_fn": seed_worker}
    assert CASES["no-workers"].loader_kwargs() == NO_WORKERS.loader_kwargs()


def exec_snippet(source: str) -> dict:
    namespace = {"__name__": "tuned_loader"}
    exec(compile(source, "tuned_loader.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", CASES)
def test_snippet_is_python_that_never_imports_autoloader(name):
    source = snippet(CASES[name])
    tree = ast.parse(source)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert "autoloader" not in imported
    assert imported <= {"__future__", "os", "random", "numpy", "torch"}, imported
    assert ast.get_docstring(tree).startswith("DataLoader tuned by autoloader for workloads-Tiny-n256")


@pytest.mark.parametrize("name", CASES)
@pytest.mark.slow
def test_snippet_defines_a_working_make_loader(name):
    config = CASES[name].config
    ns = exec_snippet(snippet(CASES[name]))
    assert callable(ns["make_loader"]) and callable(ns["seed_worker"])
    assert ns["LOADER_KWARGS"] == config.loader_kwargs()
    loader = ns["make_loader"](Tiny(40))
    assert loader.batch_size == config.batch_size
    assert loader.num_workers == config.num_workers
    assert loader.pin_memory == config.pin_memory
    if config.num_workers:
        assert loader.prefetch_factor == config.prefetch_factor
        assert loader.persistent_workers == config.persistent_workers
        assert loader.worker_init_fn is ns["seed_worker"]
    else:
        assert loader.worker_init_fn is None
    batches = list(loader)
    assert [len(b) for b in batches] == [config.batch_size] * (40 // config.batch_size) + (
        [40 % config.batch_size] if 40 % config.batch_size else [])
    # Shuffled, as the trials and best_loader are: every sample once, not in order.
    order = torch.cat(batches)[:, 0].tolist()
    assert sorted(order) == [float(i) for i in range(40)] and order != sorted(order)
    # overrides reach the DataLoader
    assert ns["make_loader"](Tiny(40), batch_size=5).batch_size == 5
    in_order = torch.cat(list(ns["make_loader"](Tiny(40), shuffle=False)))[:, 0].tolist()
    assert in_order == [float(i) for i in range(40)]


def test_snippet_seeds_exactly_like_the_library():
    """One source of truth: the copied seed_worker gives the same streams as autoloader's."""
    ns = exec_snippet(snippet(CASES["persistent"]))
    from torch.utils.data import DataLoader

    def draws(loader):
        return [tuple(float(v) for v in sample) for _ in range(2) for sample in loader]

    kwargs = dict(batch_size=None, num_workers=2, persistent_workers=True, shuffle=True)
    ours = draws(ns["make_loader"](GlobalDraws(), generator=torch.Generator().manual_seed(5), **kwargs))
    lib = draws(DataLoader(GlobalDraws(), generator=torch.Generator().manual_seed(5), worker_init_fn=seed_worker,
                           **kwargs))
    assert ours == lib
    assert len(set(ours)) == len(ours)


CHECK = textwrap.dedent("""
    import json, runpy, sys

    sys.modules["autoloader"] = None  # any import of autoloader now fails, editable install or not
    try:
        import autoloader
    except ImportError:
        pass
    else:
        raise SystemExit("autoloader is importable: the check proves nothing")

    ns = runpy.run_path(sys.argv[1])
    import torch
    from torch.utils.data import Dataset

    class Draws(Dataset):
        def __len__(self):
            return 48

        def __getitem__(self, index):
            return torch.tensor([float(index), ns["worker_generator"]().random(), torch.rand(1).item()])

    loader = ns["make_loader"](Draws(), generator=torch.Generator().manual_seed(3))
    rows = [row for _ in range(2) for batch in loader for row in batch.tolist()]
    print(json.dumps({
        "batch_size": loader.batch_size, "num_workers": loader.num_workers, "pin_memory": loader.pin_memory,
        "prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers,
        "worker_init_fn": getattr(loader.worker_init_fn, "__name__", None), "rows": rows}))
""")


@pytest.mark.slow
def test_snippet_runs_where_autoloader_is_not_installed(tmp_path):
    config = LoaderConfig.make(16, 2, False, 4, True)
    path = tmp_path / "tuned_loader.py"
    path.write_text(snippet(tuned(config)))
    check = tmp_path / "check.py"
    check.write_text(CHECK)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    # -I: no PYTHONPATH, no user site, no script or current directory on sys.path
    proc = subprocess.run([sys.executable, "-I", str(check), str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: out[k] for k in config.loader_kwargs()} == config.loader_kwargs()
    assert out["worker_init_fn"] == "seed_worker"
    rows = out["rows"]
    epochs = [[int(r[0]) for r in rows[:48]], [int(r[0]) for r in rows[48:]]]
    assert all(sorted(e) == list(range(48)) for e in epochs)
    assert epochs[0] != epochs[1], "each epoch is shuffled anew"
    for col in (1, 2):  # the worker Generator and torch: distinct across workers and epochs
        assert len({r[col] for r in rows}) == len(rows)
