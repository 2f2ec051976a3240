"""scripts/bench/workloads: the two workloads no rule was tuned on, built at a tiny scale, and the
registry's specs as `autoloader tune --dataset` resolves them."""

import pytest

from autoloader.inputs.source import load_spec, resolve_dataset
from scripts.bench.workloads import WORKLOADS
from scripts.bench.workloads.images import hugefloat_side


@pytest.fixture
def tiny_scale(monkeypatch):
    monkeypatch.setenv("AUTOLOADER_BENCH_SCALE", "0.01")


def test_every_spec_resolves_from_the_registry():
    from scripts.bench.run import DEFAULT_WORKLOADS

    assert set(DEFAULT_WORKLOADS.split(",")) <= set(WORKLOADS), "the bench's default workloads are all defined"
    for w in WORKLOADS.values():
        assert w.dataset_spec == f"scripts.bench.workloads:{w.name}_dataset"
        assert callable(load_spec(w.dataset_spec)) and callable(load_spec(w.step_spec))


def test_hugefloat_is_192_mib_a_batch_at_scale_one_and_small_below(tiny_scale):
    import torch

    assert hugefloat_side(1.0) == 512 and hugefloat_side(4.0) == 512
    assert 64 * 3 * 512 * 512 * 4 == 192 * 2**20
    assert hugefloat_side(0.01) == 51
    dataset = resolve_dataset(load_spec(WORKLOADS["hugefloat"].dataset_spec), "hugefloat")
    x, y = dataset[7]
    assert x.shape == (3, 51, 51) and x.dtype == torch.float32 and 0 <= y < 10
    # Nothing is computed per sample: a view of the pool.
    assert x.data_ptr() == torch.from_numpy(dataset.pool[7 % len(dataset.pool)]).data_ptr()


def test_pyobjects_reads_python_objects(tiny_scale):
    import torch

    dataset = resolve_dataset(load_spec(WORKLOADS["pyobjects"].dataset_spec), "pyobjects")
    assert len(dataset) == 2000 and len(dataset.records) == 3000
    record = dataset.records[5]
    assert isinstance(record, dict) and isinstance(record["text"], str) and len(record["tokens"]) == 16
    assert all(t > 256 for t in record["tokens"])   # ints of their own, not the interpreter's cached ones
    x, y = dataset[123]
    assert x.shape == (8,) and x.dtype == torch.float32 and 0 <= y < 10
    assert torch.equal(dataset[123][0], x)          # deterministic
    step = load_spec(WORKLOADS["pyobjects"].step_spec)()
    step((torch.stack([x, x]), torch.tensor([y, y])))


def test_the_uint8_variants_hold_the_same_samples_in_a_quarter_of_the_bytes(tiny_scale):
    from scripts.bench.workloads import hugefloat8_dataset, hugefloat_dataset

    floats, bytes8 = hugefloat_dataset()[0][0], hugefloat8_dataset()[0][0]
    assert floats.shape == bytes8.shape and str(bytes8.dtype) == "torch.uint8"
    assert bytes8.element_size() * 4 == floats.element_size()
