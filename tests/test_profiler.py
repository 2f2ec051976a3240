"""The profile on stand-in datasets whose per-sample cost, tail and interpreter use are known."""

import time

import pytest
import torch

from autoloader.probe.profiler import run_profile
from autoloader.probe.workers import pss as _pss


class Timed(torch.utils.data.Dataset):
    """Each sample costs ``cost`` seconds (every ``tail_every``-th costs ``tail``), spent spinning
    in Python (holding the interpreter) or asleep (holding nothing)."""

    def __init__(self, cost, spin, tail_every=0, tail=0.0, n=4096):
        self.cost, self.spin, self.tail_every, self.tail, self.n = cost, spin, tail_every, tail, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        cost = self.tail if self.tail_every and i % self.tail_every == 0 else self.cost
        if self.spin:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < cost:
                pass
        else:
            time.sleep(cost)
        return torch.zeros(1024), i


def profile_of(dataset, batch_size=16):
    return run_profile(dataset, {}, batch_size, lambda batch: None, "cpu", _pss)


@pytest.mark.slow
def test_the_per_sample_cost_is_a_distribution_with_its_tail():
    p = profile_of(Timed(0.002, spin=False, tail_every=10, tail=0.02))
    q = p.sample_quantiles()
    assert q["median"] == pytest.approx(0.002, rel=0.5)
    assert q["max"] == pytest.approx(0.02, rel=0.5)          # the tail is kept, not averaged away
    assert q["p99"] > 5 * q["median"]
    assert p.sample_cpu_share < 0.5                           # asleep: not CPU work
    assert p.sample_bytes == 1024 * 4 + 8                     # the tensor and the index


@pytest.mark.slow
def test_spinning_samples_are_cpu_work():
    p = profile_of(Timed(0.002, spin=True))
    assert p.sample_quantiles()["median"] == pytest.approx(0.002, rel=0.5)
    assert p.sample_cpu_share > 0.6


@pytest.mark.slow
def test_a_worker_running_python_makes_its_batches_slower_to_receive():
    """NOTE [ A busy worker's receive ]: taking a batch while its worker runs Python code waits for
    that worker's interpreter; taking one from an idle worker does not."""
    # On a loaded machine some profiles' takes all meet the worker off its CPU and read as idle
    # ones, so up to three profiles are taken; on an idle one the first shows it.
    seen = []
    for _ in range(3):
        p = profile_of(Timed(0.001, spin=True))
        assert p.recv_busy_s is not None
        seen.append((p.recv_s, p.recv_busy_s))
        if p.recv_busy_s > p.recv_s + 0.0005:
            break
    else:
        raise AssertionError(f"no profile read a busy worker's receive as slower: {seen}")


@pytest.mark.slow
def test_a_sleeping_worker_is_received_from_as_fast_as_an_idle_one():
    p = profile_of(Timed(0.001, spin=False))
    assert p.recv_busy_s is not None and p.recv_busy_s < p.recv_s + 0.002, (p.recv_s, p.recv_busy_s)


def test_a_pin_is_timed_warm_with_each_result_released_first():
    # NOTE [ Warm pinning ]: the first call allocates (here a 50 ms stand-in), later ones reuse
    # what the one before released; the timing is the later ones', and no result outlives its turn.
    import weakref

    from autoloader.probe.timing import _warm_time

    class Block:
        pass

    alive, calls = [], []

    def pin():
        assert not any(ref() is not None for ref in alive), "the previous result was still held"
        time.sleep(0.05 if not calls else 0.002)
        calls.append(1)
        block = Block()
        alive.append(weakref.ref(block))
        return block

    seconds = _warm_time(pin, repeats=2)
    assert len(calls) == 3
    assert 0.001 < seconds < 0.02


@pytest.mark.slow
def test_a_profile_beside_spinners_reads_its_samples_without_their_waits():
    # NOTE [ A profile read under load ]: BusyWork spins on its process's CPU time, so its wall
    # time grows with every wait for a CPU while its cost does not.
    import os
    import statistics
    import subprocess
    import sys

    from tests.workloads import BusyWork

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.3)
        p = profile_of(BusyWork(length=4096, cost_s=0.002))
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    assert p.sample_delay_share is not None and p.sample_delay_share > 0.1, p.sample_delay_share
    assert statistics.median(p.sample_s) == pytest.approx(0.002, rel=0.3)
    # The receive, timed at two sizes: its fixed part within it.
    assert p.recv_fixed_s is not None and 0.0 <= p.recv_fixed_s <= p.recv_s


def test_the_receive_s_fixed_part_is_the_line_through_two_sizes_at_no_bytes():
    from autoloader.probe.profiler import receive_fixed

    assert receive_fixed(0.004, 4000, 0.0025, 1000) == pytest.approx(0.002)
    assert receive_fixed(0.004, 4000, 0.005, 1000) == pytest.approx(0.004)   # the small one slower: all fixed
    assert receive_fixed(0.004, 4000, 0.0, 1000) == 0.0                      # never below nothing
    assert receive_fixed(0.004, 1000, 0.001, 1000) == 0.004                  # one size: no line


# --- the uint8 stage: NOTE [ A quarter of the bytes ] in search/profile.py ---------------------------

class Pixels(torch.utils.data.Dataset):
    """3x256x256 float32 images (768 KiB) and a label, views of a small pool: 12 MiB a batch of 16."""

    def __init__(self, n=256, dtype=torch.float32):
        self.pool, self.n = (torch.rand(4, 3, 256, 256) * 255).to(dtype), n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.pool[i % 4], i


def test_a_float32_tensor_is_seen_as_uint8_of_its_shape_without_a_copy():
    from autoloader.probe.profiler import as_uint8

    image = torch.rand(3, 8, 8)
    (view, label), seen = as_uint8((image, torch.tensor(3)))
    assert seen == 1 and view.dtype is torch.uint8 and view.shape == image.shape
    assert view.data_ptr() == image.data_ptr() and label.dtype is torch.int64
    assert as_uint8(torch.rand(8, 8).t())[1] == 0   # not contiguous: left as it is


def test_the_uint8_stage_times_the_change_against_the_float32_samples():
    from torch.utils.data._utils.collate import default_collate

    from autoloader.probe.profiler import MIN_ROUNDS, uint8_cost

    data = Pixels()
    samples = [data[i] for i in range(16)]
    batch = default_collate(samples)
    u = uint8_cost(samples, batch, 16, default_collate, "cpu", lambda: None)
    assert u.byte_share == pytest.approx(0.25, rel=0.01)   # the labels keep their bytes
    assert min(u.loop_collate_s + u.worker_collate_s) > 0 and u.convert_s > 0 and u.rounds >= MIN_ROUNDS
    assert u.pin_s is None and u.h2d_pinned_s is None and u.h2d_pageable_s is None   # off CUDA: no pin, no copy
    # Cheap: about 0.05 s here on a quiet machine (a 192 MiB batch on a GPU host, under 0.2 s);
    # loose, for a loaded one.
    assert u.seconds < 2.0, u.seconds
    eights = [data.pool.to(torch.uint8)[i % 4] for i in range(16)]
    assert uint8_cost([(x, 0) for x in eights], default_collate([(x, 0) for x in eights]), 16, default_collate,
                      "cpu", lambda: None) is None, "no float32 tensor: nothing to change"

    def float_only(items):
        if any(x.dtype is not torch.float32 for x, _ in items):
            raise TypeError("float32 only")
        return default_collate(items)

    assert uint8_cost(samples, batch, 16, float_only, "cpu", lambda: None) is None


@pytest.mark.slow
def test_the_profile_times_uint8_only_for_a_large_float32_batch():
    p = profile_of(Pixels())
    assert p.uint8 is not None and p.uint8.byte_share == pytest.approx(0.25, rel=0.01)
    assert profile_of(Timed(0.0005, spin=False)).uint8 is None   # 16 x 4 KiB: too small to ask


def test_the_busy_receive_begins_no_cycle_that_would_end_past_its_seconds():
    # Each cycle lets the worker fill a queue of 2 batches of 0.15 s work (0.455 s), then takes:
    # two cycles end inside BUSY_SECONDS, a third would end at about 1.4 s, so it is not begun.
    from autoloader.probe.profiler import BUSY_SECONDS, _busy_receive

    began = time.perf_counter()
    takes = _busy_receive(iter(range(100)), 2, 0.15, lambda: None)
    spent = time.perf_counter() - began
    assert takes is not None
    assert spent <= BUSY_SECONDS + 0.05, spent
    assert spent >= 0.85, "two cycles, not one"
