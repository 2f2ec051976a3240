"""The trial process's GPU-only helpers (probe/trial.py), driven on the CPU with stand-ins (CI
has no GPU): releasing a trial's cached memory, and finding the trial's GPU in NVML for its
utilisation."""

from types import SimpleNamespace

from autoloader.probe.trial import nvml_bus_id, pinned_peak, release_cached_memory, reset_pinned_peak


def test_a_trial_releases_the_pinned_blocks_it_cached():
    # NOTE [ Pinned memory outlives its trial ]: CI has no GPU, so a stand-in torch records the
    # calls; the device is synchronised first, so no block is still in use by a copy.
    calls = []
    cuda = SimpleNamespace(synchronize=lambda: calls.append("sync"), empty_cache=lambda: calls.append("device"))
    torch = SimpleNamespace(cuda=cuda, _C=SimpleNamespace(_host_emptyCache=lambda: calls.append("host")))
    assert release_cached_memory(torch) is None
    assert calls == ["sync", "device", "host"]
    calls.clear()
    assert release_cached_memory(SimpleNamespace(cuda=cuda, _C=SimpleNamespace())) is None  # no such call
    assert calls == ["sync", "device"]


def test_a_bursts_pinned_peak_is_read_from_the_caching_host_allocator():
    # NOTE [ Pinned batches ] in search/memory.py: the allocator's peak of page-locked bytes since
    # the trial began; a torch without the statistics gives no figure (the forecast's stands).
    stats = {"allocated_bytes.peak": 0}
    cuda = SimpleNamespace(reset_peak_host_memory_stats=lambda: stats.update({"allocated_bytes.peak": 0}),
                           host_memory_stats=lambda: dict(stats))
    torch = SimpleNamespace(cuda=cuda)
    stats["allocated_bytes.peak"] = 3 * 2**27
    reset_pinned_peak(torch)
    assert pinned_peak(torch) == 0
    stats["allocated_bytes.peak"] = 2**27
    assert pinned_peak(torch) == 2**27
    old = SimpleNamespace(cuda=SimpleNamespace())
    reset_pinned_peak(old)
    assert pinned_peak(old) is None


def test_a_cuda_error_left_by_the_trial_is_returned_not_raised():
    # It surfaces in the synchronise after the trial; raised there, it would replace the trial's
    # own result. Returned, the runner reports the result and then ends its broken process.
    def assert_triggered():
        raise RuntimeError("CUDA error: device-side assert triggered")

    cuda = SimpleNamespace(synchronize=assert_triggered, empty_cache=lambda: None)
    error = release_cached_memory(SimpleNamespace(cuda=cuda, _C=SimpleNamespace()))
    assert error == "RuntimeError: CUDA error: device-side assert triggered"


def test_the_gpu_is_found_in_nvml_by_its_whole_pci_address():
    # torch gives domain, bus and device apart; NVML wants them joined, in hexadecimal.
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    assert nvml_bus_id(props) == "00000000:1b:00.0"
    assert nvml_bus_id(SimpleNamespace(pci_domain_id=0x10, pci_bus_id=0xC3, pci_device_id=1)) == "00000010:c3:01.0"
    # Properties without the three numbers: None, and utilisation is not read (no guessing).
    assert nvml_bus_id(SimpleNamespace(pci_bus_id=0x1B)) is None
    assert nvml_bus_id(SimpleNamespace()) is None


def test_a_cuda_index_must_name_a_gpu_that_exists():
    import pytest

    from autoloader import UsageError
    from autoloader.inputs.problem import resolve_device as _resolve_device

    assert _resolve_device("cuda:0", ("NVIDIA H200",)) == "cuda:0"
    assert _resolve_device("cuda:1", ("NVIDIA H200", "NVIDIA H200")) == "cuda:1"
    for bad in ("cuda:1", "cuda:x", "cuda:"):
        with pytest.raises(UsageError) as err:
            _resolve_device(bad, ("NVIDIA H200",))
        assert f"(got '{bad}')" in str(err.value) and "0 to 0" in str(err.value) and "Fix:" in str(err.value)
