"""Tuning inside the run (autoloader/inrun): the epoch's order kept, the segments' schedule, the
seeding per sample, the stored result. Tests without worker processes run by default; those that
start workers are ``slow``."""

from __future__ import annotations

import gc
import json
import multiprocessing
import logging
import math
import statistics
import os
import time
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import autoloader
from autoloader.inrun import in_run_loader, tuned
from autoloader.inrun.loader import InRunLoader
from autoloader.inrun.samples import SeededSamples
from autoloader.inrun import schedule
from autoloader.inrun.schedule import CLIMB, DOWN, SETTLED, UP, Plan, Reading, compare, queue_depth, step
from autoloader.search.space import LoaderConfig, SearchSpace
from short_readings import short_readings


class Counted(Dataset):
    """Sample i is (i, a random draw): the draw shows which stream made it."""

    def __init__(self, n: int = 300, cost_s: float = 0.0):
        self.n, self.cost_s = n, cost_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.cost_s:
            t = time.perf_counter()
            while time.perf_counter() - t < self.cost_s:
                pass
        return torch.tensor(i), torch.rand(2)


W0 = LoaderConfig.make(batch_size=8, num_workers=0, pin_memory=False)
W0_PIN = LoaderConfig.make(batch_size=8, num_workers=0, pin_memory=True)


class Stub:
    """A proposer without a profile: the start given, and each step up the next config of
    ``climb`` (none past its end)."""

    def __init__(self, start, climb, rule=None):
        self.profile, self._start, self._climb = None, start, list(climb)
        self.rule = rule or climb[0]
        self.space = SearchSpace((8,), 0)
        self.fits = lambda c: True

    def start(self):
        return self._start

    def neighbour(self, best, direction):
        if direction != UP or best not in self._climb:
            return None
        i = self._climb.index(best)
        return self._climb[i + 1] if i + 1 < len(self._climb) else None


@pytest.fixture
def short_segments(monkeypatch):
    """Readings of a few batches, whatever they take (an in-process epoch is a few milliseconds),
    every step worth its cost, and two steps at most."""
    short_readings(monkeypatch.setattr)


def _in_process(dataset, start=W0, finalists=(W0, W0_PIN), **plain):
    """An in-run loader whose configs start no process (pinning does nothing off CUDA): its
    switches are real, between DataLoaders in this process."""
    return InRunLoader(DataLoader(dataset, **plain), Stub(start, finalists))


def _indices(batches):
    return [batch[0].tolist() for batch in batches]


@pytest.fixture(autouse=True)
def _quiet_pinning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'pin_memory' argument is set as true")
        yield


# --- order ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("drop_last", [False, True])
def test_each_epoch_is_the_plain_loaders_batches_in_order_across_switches(drop_last, short_segments):
    loader = _in_process(Counted(301), batch_size=8, shuffle=True, drop_last=drop_last,
                         generator=torch.Generator().manual_seed(5))
    plain = DataLoader(Counted(301), batch_size=8, shuffle=True, drop_last=drop_last,
                       generator=torch.Generator().manual_seed(5))
    assert len(loader) == len(plain)
    for _ in range(3):
        assert _indices(loader) == _indices(plain)
    assert len({r.config for r in loader.plan.readings}) == 2   # it did switch


def test_every_sample_once_per_epoch(short_segments):
    loader = _in_process(Counted(300), batch_size=8, shuffle=True)
    for _ in range(2):
        seen = [i for batch in _indices(loader) for i in batch]
        assert sorted(seen) == list(range(300))


def test_a_distributed_samplers_epoch_is_followed(short_segments):
    sampler = DistributedSampler(Counted(200), num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = _in_process(Counted(200), batch_size=8, sampler=sampler)
    reference = DistributedSampler(Counted(200), num_replicas=2, rank=1, shuffle=True, seed=3)
    for epoch in (0, 1, 4):
        sampler.set_epoch(epoch)
        reference.set_epoch(epoch)
        assert [i for b in _indices(loader) for i in b] == list(reference)


def test_a_break_and_a_second_iter_behave_as_a_plain_loaders(short_segments):
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    loader = _in_process(Counted(200), batch_size=8, shuffle=True, generator=g1)
    plain = DataLoader(Counted(200), batch_size=8, shuffle=True, generator=g2)
    for i, _ in enumerate(zip(loader, plain)):   # an epoch broken off mid-way
        if i == 9:
            break
    first, second = iter(loader), iter(plain)
    other, other_plain = iter(loader), iter(plain)   # two iterators at once: two epochs
    assert _indices(first) == _indices(second)
    assert _indices(other) == _indices(other_plain)


def test_an_exception_in_the_loop_leaves_the_next_epoch_whole(short_segments):
    loader = _in_process(Counted(200), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
    plain = DataLoader(Counted(200), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
    for each in (loader, plain):   # the same loop, failing at the same step
        with pytest.raises(RuntimeError):
            for i, _ in enumerate(each):
                if i == 5:
                    raise RuntimeError("the step failed")
    assert _indices(loader) == _indices(plain)


# --- seeding per sample ------------------------------------------------------------------------

def test_seeding_per_sample_makes_a_sample_alike_whatever_made_it():
    seeded = SeededSamples(Counted(50), seed=7)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    a = seeded[(2, 11)][1]
    assert torch.equal(torch.get_rng_state(), before)   # the loop's own stream is untouched
    assert torch.equal(seeded[(2, 11)][1], a)
    assert not torch.equal(seeded[(3, 11)][1], a)
    seeded.set_epoch(2)
    assert torch.equal(seeded[11][1], a)


def test_seeded_batches_are_bit_for_bit_those_of_a_fixed_config(short_segments):
    loader = InRunLoader(DataLoader(Counted(200), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4)),
                         Stub(W0, (W0, W0_PIN)), sample_seed=123)
    fixed_data = SeededSamples(Counted(200), seed=123)
    fixed = DataLoader(fixed_data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4))
    for epoch in range(2):
        fixed_data.set_epoch(epoch)
        for a, b in zip(loader, fixed, strict=True):
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# --- the schedule (pure) -----------------------------------------------------------------------

def _reading(config, rate_batches_per_s, round_=None, batches=20, start_s=0.05, jitter=0.0, seed=0, **kw):
    """A reading at ``rate_batches_per_s`` (8 samples a batch), each batch's time off by up to
    ``jitter`` of a cycle."""
    import random

    rng = random.Random(seed)
    cycle = 1.0 / rate_batches_per_s
    calls, t = [], start_s
    for _ in range(batches):
        calls.append(t)
        t += cycle * (1.0 + jitter * (2 * rng.random() - 1))
    return Reading(config, round_, [8] * batches, calls, [c + cycle * 0.1 for c in calls], t, **kw)


def _w(n, pf=2):
    return LoaderConfig.make(batch_size=8, num_workers=n, pin_memory=False, prefetch_factor=pf if n else None,
                             persistent_workers=bool(n))


A = LoaderConfig.make(batch_size=8, num_workers=1, pin_memory=False)
B = LoaderConfig.make(batch_size=8, num_workers=2, pin_memory=False)


def test_a_reading_rates_its_steady_part_and_reads_the_step():
    r = _reading(B, 100.0, batches=40)
    assert r.rate == pytest.approx(800.0, rel=1e-6)
    assert r.step_s == pytest.approx(0.009, rel=1e-6)
    assert r.wait_share == pytest.approx(0.1, rel=1e-6)
    assert r.switch_s == pytest.approx(0.05, abs=1e-6)


def test_a_readings_prefilled_batches_are_left_out_of_its_steady_part():
    """NOTE [ The next config begins during the drain ]: the batches a loader made while the loop
    read the drain come at once; counted, they would read as the config's pace."""
    calls = [i * 0.0001 for i in range(12)] + [0.0012 + i * 0.01 for i in range(28)]
    got = [c + 0.0001 for c in calls]
    end = calls[-1] + 0.01
    filled = Reading(B, None, [8] * 40, calls, got, end, prefilled=12)
    assert filled.rate == pytest.approx(800.0, rel=0.02)
    assert Reading(B, None, [8] * 40, calls, got, end).rate > 1.2 * filled.rate, "its lead alone leaves some in"
    assert filled.to_dict()["prefilled"] == 12


@pytest.mark.parametrize("overlap", [True, False], ids=["begun-during-the-drain", "begun-after"])
def test_the_next_config_begun_during_the_drain_keeps_the_order_and_says_what_it_prefilled(short_segments, monkeypatch,
                                                                                          overlap):
    from autoloader.inrun import loader as inrun_loader

    monkeypatch.setattr(inrun_loader, "OVERLAP", overlap)
    plain = DataLoader(Counted(640), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(5))
    reference = DataLoader(Counted(640), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(5))
    loader = InRunLoader(plain, Stub(_w(1), [_w(1), _w(2), _w(4)]))
    for _ in range(3):
        assert _indices(loader) == _indices(reference)
    readings = loader.plan.readings
    switched = [r for before, r in zip(readings, readings[1:]) if r.config != before.config]
    assert switched, [r.config.num_workers for r in readings]
    if overlap:   # each began while the one before drained (but at an epoch's start): its first wave was pulled
        assert sum(1 for r in switched if r.prefilled >= 1) >= len(switched) - 3, \
            [(r.config.num_workers, r.prefilled) for r in switched]
    else:
        assert not any(r.prefilled for r in readings)
    loader.close()
    assert not _children()


def test_a_readings_rate_is_what_its_workers_made_not_the_stock_it_was_served():
    """NOTE [ When a batch was made ]: a loader that began with its queue full serves the loop at
    the step's pace while its workers make less; its reading's rate is what they made."""
    calls = [i * 0.01 for i in range(100)]   # served at 100 batches a second throughout
    got = [c + 0.001 for c in calls]
    made = tuple((-0.5 + i * 0.0125, 8) for i in range(140))   # made at 80 a second, the first 40 before
    r = Reading(B, None, [8] * 100, calls, got, 1.0, prefilled=20, made=made)
    assert r.served_rate == pytest.approx(800.0, rel=0.01)
    assert r.rate == pytest.approx(640.0, rel=0.03)
    assert r.blocks() and all(b == pytest.approx(math.log(640.0), abs=0.02) for b in r.blocks())
    assert r.to_dict()["served_per_s"] == pytest.approx(r.served_rate)
    assert r.to_dict()["rate_log_se"] == pytest.approx(math.sqrt(r.variance()))
    assert compare([(r, r)])[1] == pytest.approx(max(math.sqrt(2) * r.to_dict()["rate_log_se"], schedule.DRIFT))
    # Without workers the loop makes each batch in next(): served is made.
    assert Reading(W0, None, [8] * 100, calls, got, 1.0, made=made).rate == pytest.approx(800.0, rel=0.01)


def test_every_batch_a_feed_pulls_is_marked_when_its_worker_made_it(tmp_path):
    from autoloader.inrun.made import MadeTimes, StampedSamples
    from autoloader.inrun.order import Feed

    class Many(Counted):   # a dataset that fetches a batch at once: handed a plain list
        def __getitems__(self, keys):
            assert type(keys) is list
            return [self[k] for k in keys]

    for dataset in (Counted(64), Many(64)):
        made = MadeTimes(8)
        feed = Feed(8, made=made)
        loader = DataLoader(StampedSamples(dataset, made), batch_sampler=feed, num_workers=2)
        for epoch in range(2):   # a second opening clears the first's times
            began = time.perf_counter()
            feed.open(iter([list(range(i, i + 8)) for i in range(0, 64, 8)]), epoch)
            assert made.read(8) == [0.0] * 8
            batches = [b[0].tolist() for b in loader]
            times = made.read(len(feed.sizes))
            assert batches == [list(range(i, i + 8)) for i in range(0, 64, 8)]
            assert len(times) == 8 and all(began < t < time.perf_counter() for t in times), times


def test_the_picks_loader_marks_no_batch_once_the_tune_has_settled(short_segments):
    """After tuning no reading is taken: the pick's kept loader feeds its workers bare batches,
    and its table of made times stays as it was."""
    two = _w(2)
    loader = InRunLoader(DataLoader(Counted(800), batch_size=8, shuffle=True), Stub(two, [two]))
    first = [b[0].tolist() for b in loader]
    assert loader.plan.state == SETTLED and loader.final is not None
    table = loader._alive[two].batch_sampler.made
    assert table is not None and any(table.read(len(loader)))   # epoch 1 marked its batches
    table.clear()
    second = [b[0].tolist() for b in loader]
    assert loader._kept.batch_sampler.made is None
    assert table.read(len(loader)) == [0.0] * len(loader)
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(800))
    loader.close()
    assert not _children()


@pytest.mark.slow
def test_a_reading_that_begins_with_a_full_queue_reads_what_its_workers_make(monkeypatch):
    """Two workers make less than the step takes, eight more. A reading of the two after the
    eight's drain begins with its queue full, and is served from it faster than the two make:
    its rate is what they made, as in its readings that began without a stock."""
    monkeypatch.setattr(schedule, "FAR_AHEAD", math.inf)   # a second pair: the two read after the eight
    two, eight = _w(2, 16), _w(8, 16)
    loader = InRunLoader(DataLoader(_Waits(cpu=False, seconds=0.006, length=40_000), batch_size=8, shuffle=True), Stub(two, [two, eight]))
    for _ in loader:
        end = time.perf_counter() + 0.014   # the step
        while time.perf_counter() < end:
            pass
        if loader.plan.state == SETTLED:
            break
    loader.close()
    readings = [(r.config.num_workers, r.prefilled, round(r.rate), round(r.served_rate)) for r in loader.plan.readings]
    stocked = [r for r in loader.plan.readings if r.config == two and r.prefilled]
    fresh = statistics.median(r.rate for r in loader.plan.readings if r.config == two and not r.prefilled)
    # Two workers asleep 6 ms a sample make at most 2 / 0.006 samples a second: the stocked
    # reading is served past that, and its rate is not. The fresh readings (the first with the
    # epoch's start in it) bound it from below, loosely: a busy machine slows the sleeps.
    most = 2 / 0.006
    assert stocked, readings
    assert all(r.served_rate > 1.1 * r.rate and r.rate < 1.05 * most and r.rate > 0.85 * fresh for r in stocked), readings
    assert loader.plan.pick == eight, readings


def test_a_switchs_drain_is_told_on_the_reading_after_it(short_segments):
    # Every batch of a tuned epoch is in a reading or in the drain of the switch before one, save
    # a drain the epoch's end cut short (no reading after it).
    plain = DataLoader(Counted(640), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(5))
    loader = InRunLoader(plain, Stub(_w(1), [_w(1), _w(2), _w(4)]))
    began = time.perf_counter()
    assert len(list(loader)) == len(loader) == 80
    wall = time.perf_counter() - began
    readings = loader.plan.readings
    switched = [r for before, r in zip(readings, readings[1:]) if r.config != before.config]
    assert switched and all(r.drained >= 1 and r.drain_s > 0 for r in switched), \
        [(r.config.num_workers, r.drained, r.drain_s) for r in readings]
    # Ending the old workers and beginning the next config's are parts of the switch; a start
    # begun during the drain counts in the reading's switch, as one begun at its start does.
    assert all(0 <= r.end_s and 0 < r.begin_s and r.end_s + r.begin_s <= r.drain_s for r in switched)
    assert all(r.switch_s >= r.begin_s for r in switched)
    assert not any(r.drained for r in readings if r not in switched)
    told = sum(r.batches + r.drained for r in readings)
    assert len(loader) - queue_depth(readings[-1].config) <= told <= len(loader), (told, len(loader))
    assert sum(r.wall_s + r.drain_s for r in readings) <= wall
    assert {"drained", "drain_s", "begin_s", "end_s"} <= set(switched[0].to_dict())
    loader.close()


def test_a_reading_says_the_cpus_the_loops_processes_took_over_it():
    from autoloader.inrun.loader import _Open

    t0 = time.perf_counter()
    reading = _Open(B, t0, 0, lead=None, started=True)
    while time.perf_counter() - t0 < 0.5:   # the loop's one thread, busy throughout
        reading.add(time.perf_counter(), time.perf_counter(), dry=False)
    taken = reading.close(time.perf_counter(), [8] * len(reading.got))
    assert taken.own_cpus == pytest.approx(1.0, abs=0.25), taken.own_cpus
    t0 = time.perf_counter()
    reading = _Open(B, t0, 0, lead=None, started=True)
    time.sleep(0.5)   # idle
    reading.add(t0, time.perf_counter(), dry=False)
    assert reading.close(time.perf_counter(), [8]).own_cpus < 0.2
    # A check in passing (cut) reads no CPUs: only a reading taken does.
    assert reading.close(time.perf_counter(), [8], cut=True).own_cpus is None


class _Waits(Dataset):
    """Samples that take ``seconds`` each: asleep (``cpu=False``, as a read from slow storage, and
    no CPU: many workers fit on two CPUs) or on a CPU."""

    def __init__(self, cpu: bool, seconds: float = 0.004, length: int = 4096):
        self.cpu, self.seconds, self.length = cpu, seconds, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.cpu:
            end = time.perf_counter() + self.seconds
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(self.seconds)
        return torch.zeros(16)


def test_the_start_gives_samples_that_wait_more_workers_than_cpus_and_busy_ones_no_more():
    from torch.utils.data import default_collate

    from autoloader.inrun.quick import Proposer, quick_profile, space_for

    waiting = quick_profile(_Waits(cpu=False), 16, default_collate, 2, seconds=0.3)
    busy = quick_profile(_Waits(cpu=True), 16, default_collate, 2, seconds=0.3)
    assert waiting.sample_cpu_share < 0.3 and busy.sample_cpu_share > 0.7, (waiting.sample_cpu_share,
                                                                           busy.sample_cpu_share)
    start = lambda profile: Proposer(profile, space_for(16, 2, "cpu"), 2, "cpu", fits=lambda c: True).start()
    assert start(waiting).num_workers > 2 >= start(busy).num_workers, (start(waiting), start(busy))


def test_the_start_pins_where_the_device_offers_pinning_and_the_forecast_lets_it():
    from torch.utils.data import default_collate

    from autoloader.inrun.quick import Proposer, quick_profile, space_for

    profile = quick_profile(_Waits(cpu=False), 16, default_collate, 2, seconds=0.3)
    start = lambda device, fits: Proposer(profile, space_for(16, 2, device), 2, device, fits=fits).start()
    pinned = start("cuda", lambda c: True)
    assert pinned.pin_memory and pinned.num_workers, pinned
    assert not start("cuda", lambda c: not c.pin_memory).pin_memory   # the forecast refuses the pinned
    assert start("cuda", lambda c: not c.pin_memory) == pinned.replace(pin_memory=False)
    assert not start("cpu", lambda c: True).pin_memory                 # no pinning offered


def test_a_step_up_grows_the_workers_within_the_space_and_the_memory_forecast():
    fits = lambda c: c.num_workers <= 10
    assert step(_w(4), UP, 16, (2, 4, 8, 16), fits).num_workers == 8
    assert step(_w(8), UP, 16, (2, 4, 8, 16), fits).num_workers == 10   # 12 is past the forecast
    assert step(_w(10), UP, 16, (2, 4, 8, 16), fits) is None
    assert step(_w(15), UP, 16, (2, 4, 8, 16), lambda c: True).num_workers == 16
    assert step(_w(0), UP, 16, (2, 4, 8, 16), fits).num_workers == 1
    assert step(_w(4), DOWN, 16, (2, 4, 8, 16), fits).num_workers == 2
    assert step(_w(1), DOWN, 16, (2, 4, 8, 16), fits).num_workers == 0
    assert step(_w(4), schedule.DEEPER, 16, (2, 4, 8, 16), fits).prefetch_factor == 8


def _climb(rate_of, start, max_workers=64, run_left=10**6, epoch=10**6, jitter=0.02, limit=60, cpus=None,
           own=lambda config: None, pins=(False,), aim=None, fits=lambda config: True):
    """Run a plan against a loop whose rate (batches/s) is ``rate_of(config)``: readings long
    enough to be cut by time, each a little noisy, the loop's processes taking ``own(config)``
    CPUs of ``cpus``. Returns the plan and the readings it asked for."""
    plan = Plan(start, start, max_workers, cpus=cpus, pins=pins, aim=aim, fits=fits)
    asked = []
    for i in range(limit):
        config, _ = plan.next(epoch, epoch, run_left)
        if plan.state == SETTLED:
            break
        asked.append(config)
        plan.done(_reading(config, rate_of(config), batches=400, jitter=jitter, seed=i, own_cpus=own(config)))
    return plan, asked


def _saturating(config):
    """More workers pay up to 40, then the rate is flat; deeper prefetch does not pay."""
    return 10.0 * min(config.num_workers, 40) + 5.0


def test_a_step_up_reaches_as_far_as_the_models_guess_with_the_step_read():
    # More workers pay up to 40: from 4, the doubling climbs 4, 8, 16, 32, 64 then halfway; the
    # model's guess (here 40, with any reading's step) is reached in one step, and where 40
    # workers do not fit the memory forecast the step doubles as before.
    aimed = []
    plan, asked = _climb(_saturating, _w(4), aim=lambda reading: aimed.append(reading.step_s) or _w(40))
    assert asked[:2] == [_w(4), _w(40)] and plan.pick == _w(40), [c.num_workers for c in asked]
    assert aimed and all(s > 0 for s in aimed)   # asked with the step the best's reading read
    plan, asked = _climb(_saturating, _w(4), aim=lambda reading: _w(40), fits=lambda c: c.num_workers != 40)
    assert asked[:2] == [_w(4), _w(8)], [c.num_workers for c in asked]
    plan, asked = _climb(_saturating, _w(4), aim=lambda reading: _w(6))   # a guess short of one step
    assert asked[:2] == [_w(4), _w(8)], [c.num_workers for c in asked]


def test_the_aim_counts_workers_the_model_sees_idle_only_on_an_accelerator():
    from autoloader.inrun.quick import Proposer, space_for
    from autoloader.search.profile import Profile

    # Heavy-tailed samples on 16 CPUs, batches received from busy workers slowly: the model sees
    # more workers than CPUs idle enough to pay where the step leaves the CPUs to them.
    costs = tuple([0.001] * 62 + [0.04, 0.04])
    profile = Profile(batch_size=32, sample_s=costs, collate_s=0.001, sample_bytes=49_152, recv_s=0.001,
                      recv_busy_s=0.011, pin_s=None, h2d_pinned_s=None, h2d_pageable_s=None, step_s=0.0,
                      startup_s=0.15, worker_pss=None, cpus=16, epoch_batches=2000, seconds=0.1,
                      recv_fixed_s=0.0002, sample_cpu_share=1.0)
    reading = _reading(_w(16), 280.0, batches=50)   # a 3.2 ms step
    aim = lambda device: Proposer(profile, space_for(32, 16, device), 16, device, fits=lambda c: True).aim(reading)
    start = Proposer(profile, space_for(32, 16, "cuda"), 16, "cuda", fits=lambda c: True).start()
    assert start.num_workers <= 16 < aim("cuda").num_workers, (start, aim("cuda"))
    assert aim("cpu").num_workers <= 16


def test_the_quick_profile_guesses_a_busy_workers_receive_by_its_tensors_and_the_samples_cpu():
    import sys

    from torch.utils.data import default_collate

    from autoloader.inrun.quick import quick_profile

    waiting = quick_profile(_Waits(cpu=False), 16, default_collate, 2, seconds=0.3)
    busy = quick_profile(_Waits(cpu=True), 16, default_collate, 2, seconds=0.3)
    interval = sys.getswitchinterval()
    # A batch of _Waits is one tensor: a switch interval more from a worker busy on a CPU.
    assert busy.recv_busy_s - busy.recv_s == pytest.approx(interval * busy.sample_cpu_share, rel=1e-6)
    assert waiting.recv_busy_s - waiting.recv_s < interval * 0.3


def test_the_climb_steps_up_while_it_pays_and_stops_where_a_step_does_not():
    plan, asked = _climb(_saturating, _w(4))
    workers = [c.num_workers for c in dict.fromkeys(asked)]
    assert workers[:5] == [4, 8, 16, 32, 64], workers
    assert plan.pick.num_workers >= 32 and plan.state == SETTLED, plan.why
    assert all(c.num_workers <= 64 for c in asked)


def test_the_climb_steps_down_where_no_step_up_pays():
    # The loop's step shares the CPUs: each worker past the first slows it. No workers first.
    plan, asked = _climb(lambda c: 100.0 - 10.0 * max(0, c.num_workers - 1), _w(4), max_workers=8)
    assert plan.state == SETTLED and plan.pick.num_workers in (0, 1), (plan.pick, plan.why)
    assert [c.num_workers for c in dict.fromkeys(asked)][:3] == [4, 8, 0]


def _sharing(config):
    """Two CPUs the step's threads share with the workers: no workers is fastest (as the worked
    example's loop on the 2-core machine reads)."""
    return {0: 150.0, 1: 120.0, 2: 100.0, 3: 97.0, 4: 95.0}[config.num_workers]


def test_where_the_loops_processes_fill_the_cpus_the_climb_steps_down_first():
    # The start's reading took both CPUs: more workers have no CPU to take, so no workers read
    # next, win, and no step up is read at all.
    plan, asked = _climb(_sharing, _w(2), max_workers=8, cpus=2, own=lambda c: 1.97)
    assert [c.num_workers for c in dict.fromkeys(asked)] == [2, 0], asked
    assert plan.pick.num_workers == 0 and plan.state == SETTLED
    # The control: with the CPUs unread the climb tries more workers first, as before.
    plan, asked = _climb(_sharing, _w(2), max_workers=8, cpus=2)
    assert [c.num_workers for c in dict.fromkeys(asked)][:3] == [2, 4, 0], asked
    # Where the start left CPUs free, up first.
    plan, asked = _climb(_sharing, _w(2), max_workers=8, cpus=2, own=lambda c: 1.2)
    assert [c.num_workers for c in dict.fromkeys(asked)][:2] == [2, 4], asked


def test_a_step_down_from_full_cpus_that_loses_tries_up_where_it_may_repay():
    # Full CPUs, but the workers are the bottleneck (a step that takes little): fewer lose, and
    # then a step up is weighed (its gain capped by the CPUs the loop did not take).
    plan, asked = _climb(lambda c: 10.0 * c.num_workers + 5.0, _w(4), max_workers=16, cpus=4,
                         own=lambda c: 3.85)
    workers = [c.num_workers for c in dict.fromkeys(asked)]
    assert workers[:3] == [4, 0, 2] and 8 in workers, workers
    assert plan.pick.num_workers >= 4


def test_a_step_ups_gain_is_capped_by_the_cpus_the_loop_leaves():
    def opened(own):
        plan = Plan(_w(4), _w(4), 64, cpus=4)
        plan.done(_reading(_w(4), 50.0, batches=200, own_cpus=own))   # the loop waits 10% of the time
        return plan, plan.next(10**5, 10**5, 300)[0]   # 6 s left: 10% of it repays a step's 0.5 s, 7.5% not

    plan, config = opened(None)
    assert plan.state == CLIMB and config == _w(8)
    plan, config = opened(3.7)   # 4 / 3.7: at most 8% more
    assert plan.candidate != _w(8), (plan.candidate, plan.why)


def test_where_the_device_offers_pinning_the_climb_reads_the_other_pinning_last():
    # A CUDA loop whose copy is faster from pinned memory: the climb settles the workers, then pins.
    rate = lambda c: _saturating(c) * (1.2 if c.pin_memory else 1.0)
    plan, asked = _climb(rate, _w(8), max_workers=64, pins=(True, False))
    assert plan.pick.pin_memory and plan.pick.num_workers >= 32, (plan.pick, plan.why)
    assert asked.index(plan.pick) > max(i for i, c in enumerate(asked) if not c.pin_memory and c.num_workers < 32)
    # Where pinning does not pay, the unpinned start stays; where the device offers none, none is read.
    plan, _ = _climb(_saturating, _w(8), max_workers=64, pins=(True, False))
    assert not plan.pick.pin_memory, plan.pick
    plan, asked = _climb(rate, _w(8), max_workers=64)
    assert not any(c.pin_memory for c in asked)


def test_a_step_down_to_no_workers_that_loses_halves_the_workers_next():
    plan, asked = _climb(lambda c: 100.0 if c.num_workers == 3 else 80.0 if c.num_workers else 40.0, _w(6),
                         max_workers=8)
    assert [c.num_workers for c in dict.fromkeys(asked)][:4] == [6, 8, 0, 3] and plan.pick.num_workers == 3


def test_each_pair_begins_with_the_config_the_last_one_ended_with():
    # best, candidate | candidate, best | best, candidate: one switch (and its drain) a pair.
    plan, asked = _climb(lambda c: 100.0, _w(8, 4), max_workers=16, jitter=0.6, limit=6)
    assert asked == [_w(8, 4), _w(16, 4), _w(16, 4), _w(8, 4), _w(8, 4), _w(16, 4)], asked
    assert plan.rounds_done == 3 and all(len(set(plan.rates(c))) == 3 for c in (_w(8, 4), _w(16, 4)))


def test_an_undecided_step_up_that_read_a_gain_tries_the_halfway_workers_once():
    # The pairs one H100 run read of w64 against w32 on heavytail (results/inrun/gpu-20261206-night-h100):
    # +24%, +0.7%, +6%: a gain on the mean, undecided over three pairs; the grid's best had 48 workers.
    plan = Plan(_w(32, 4), _w(15), 64)
    for i, ratio in enumerate((1.24, 1.007, 1.062)):
        pair = [(_w(32, 4), 100.0), (_w(64, 4), 100.0 * ratio)]
        for j, (config, rate) in enumerate(pair if i % 2 == 0 else pair[::-1]):   # each pair begins where the last ended
            assert plan.next(10**6, 10**6, 10**7)[0] == config
            plan.done(_reading(config, rate, batches=400, seed=2 * i + j))
    best, up = plan.rates(_w(32, 4)), plan.rates(_w(64, 4))
    assert [round(up[r] / best[r], 2) for r in sorted(up)] == [1.24, 1.01, 1.06], "paired as read, either order"
    assert plan.next(10**6, 10**6, 10**7)[0] == _w(32, 4)
    plan.done(_reading(_w(32, 4), 100.0, batches=400, seed=9))
    assert plan.next(10**6, 10**6, 10**7)[0] == _w(48, 4)
    # Where the halfway workers win clearly, the climb keeps them; the halfway step is not taken again.
    for i in range(6):
        config = plan.next(10**6, 10**6, 10**7)[0]
        assert config in (_w(32, 4), _w(48, 4)), config
        plan.done(_reading(config, 125.0 if config == _w(48, 4) else 100.0, batches=400, seed=20 + i))
        if plan.candidate is None:
            break
    assert plan.best == _w(48, 4)
    assert all(c.num_workers in (32, 48, 64) for c in plan.finalists)


def test_an_undecided_candidate_whose_mean_reads_a_gain_reads_on():
    # As pinning read on one H100 (+11%, +5%, +10% over three pairs, undecided: the cheaper was
    # kept, results/inrun/gpu-20261207-h100; +11.5% over five in gpu-20261207c-h100): with
    # no halfway step to read instead, more pairs, until Student's interval over them clears.
    best = _w(64, 4)
    pinned = best.replace(pin_memory=True)
    plan = Plan(best, _w(15), 64, pins=(True, False))
    plan.done(_reading(best, 100.0, batches=400, seed=140, jitter=0.7))
    plan.candidate, plan.direction = pinned, schedule.PIN
    for i in range(schedule.PAIRS_FOR_A_GAIN):
        plan.done(_reading(pinned, 111.0, batches=400, seed=141 + 2 * i, jitter=0.7))
        if plan.candidate != pinned:
            break
        if i == schedule.PAIRS_PER_STEP - 1:
            read = compare(plan._pairs)
            assert Plan.judge(plan._pairs, schedule.PIN) is None and read[0] > math.log(1.03), read
        plan.done(_reading(best, 100.0, batches=400, seed=142 + 2 * i, jitter=0.7))
    assert i >= schedule.PAIRS_PER_STEP, "it read past three pairs"
    assert plan.best == pinned, "and the gain cleared the noise"


def test_a_step_up_that_read_no_gain_tries_no_halfway_workers():
    plan, asked = _climb(lambda c: 50.0, _w(8), max_workers=32, jitter=0.6)
    assert 12 not in [c.num_workers for c in asked], [c.num_workers for c in dict.fromkeys(asked)]


def test_a_candidate_within_the_noise_keeps_the_cheaper():
    plan, asked = _climb(lambda c: 50.0, _w(4), jitter=0.6)
    assert plan.pick == _w(4) or plan.pick.num_workers < 4, plan.pick


def test_the_stop_rule_weighs_a_step_over_the_rest_of_the_run():
    def opened(run_left):
        plan = Plan(_w(4), _w(4), 64)
        config, _ = plan.next(60, 1000, run_left)
        plan.done(_reading(config, 50.0, batches=200))   # the loop waits 10% of the time
        return plan, plan.next(60, 1000, run_left)[0]

    plan, config = opened(None)            # only the epoch's 60 batches left: 1.2 s
    assert plan.state == SETTLED and config == _w(4) and "repay" in plan.why
    plan, config = opened(60 + 20 * 1000)   # 20 more epochs: a step may repay its start
    assert plan.state == CLIMB and plan.candidate == _w(8)
    assert config == _w(4)   # (it reads next epoch: this one's rest cannot hold its reading)


def test_the_stop_rule_counts_what_the_switches_read_so_far_cost():
    # The best reads 50 batches a second, waiting 10%: a step up may take back 0.2 s of every 100
    # batches. A switch that took 1.2 s to serve 20 of them (0.8 s past their pace) makes each
    # later step cost 1.6 s more: over 700 batches (1.4 s to gain) no step repays it.
    def judged(drain_s):
        plan = Plan(_w(4), _w(4), 64)
        plan.done(_reading(_w(4), 50.0, batches=200))
        plan.done(_reading(_w(4), 50.0, batches=200, drained=20, drain_s=drain_s, started=False))
        return plan, plan.worth(_w(8), UP, 700)

    plan, worth = judged(0.4)   # served at the best's pace: no loss
    assert plan.switch_loss_s() == pytest.approx(0.0, abs=1e-6) and worth
    plan, worth = judged(1.2)
    assert plan.switch_loss_s() == pytest.approx(0.8, rel=0.01) and not worth
    # A start begun during the drain is the start's cost, counted once.
    plan = Plan(_w(4), _w(4), 64)
    plan.done(_reading(_w(4), 50.0, batches=200, drained=20, drain_s=1.2, begin_s=0.8))
    assert plan.switch_loss_s() == pytest.approx(0.0, abs=1e-6)


def test_unpinning_is_worth_a_step_only_where_the_loop_waits_and_pinning_whatever_the_wait():
    # Unpinning moves the copy into the step: it can take back only the time the loop waits for
    # the pin thread. Pinning makes the step's copy faster, whatever the wait.
    def worth(best, candidate, wait):
        plan = Plan(best, best, 64)
        reading = _reading(best, 50.0, batches=200)
        reading.got = [c + wait / 50.0 for c in reading.calls]
        plan.done(reading)
        return plan.worth(candidate, schedule.PIN, 10_000)   # 200 s of the best's batches to come

    pinned, unpinned = _w(16).replace(pin_memory=True), _w(16)
    assert not worth(pinned, unpinned, 0.02) and worth(pinned, unpinned, 0.2)
    assert worth(unpinned, pinned, 0.02)


def test_a_step_up_read_far_ahead_wins_in_one_pair_a_nearer_one_waits_for_a_second():
    def first_pair(rate, jitter=0.02):
        plan = Plan(_w(16), _w(16), 64)
        plan.done(_reading(_w(16), 100.0, batches=400, jitter=jitter))
        assert plan.next(10**6, 10**6, 10**7)[0] == _w(32)
        plan.done(_reading(_w(32), rate, batches=400, jitter=jitter, seed=1))
        return plan

    plan = first_pair(180.0)   # far past what a rate drifts between two readings
    assert plan.best == _w(32) and plan.rounds_done == 1, plan.why
    for rate in (130.0, 145.0):   # past the noise, but a drift between readings could make it
        plan = first_pair(rate)
        assert plan.best == _w(16) and plan.candidate == _w(32)
    assert first_pair(160.0).best == _w(32)
    plan = first_pair(160.0, jitter=0.9)   # as far ahead, but not past Z of its readings' noise
    assert plan.best == _w(16) and plan.candidate == _w(32)


def _waves(config, rate_batches_per_s, batches, swing):
    """A reading cut at its end (as the loader cuts one), its batches in waves of 50, each wave
    ``swing`` slower or faster than ``rate_batches_per_s``: blocks that spread."""
    calls, t = [], 0.05
    for i in range(batches):
        calls.append(t)
        t += (1.0 + (swing if (i // 50) % 2 else -swing)) / rate_batches_per_s
    return Reading(config, None, [8] * batches, calls, [c + 0.1 / rate_batches_per_s for c in calls], t,
                   steady_end=batches)


def test_a_candidate_far_ahead_in_its_first_pair_reads_on_until_its_win_is_past_the_noise():
    plan = Plan(_w(16), _w(16), 64)
    plan.done(_reading(_w(16), 100.0, batches=400, jitter=0.02))
    assert plan.next(10**6, 10**6, 10**7)[0] == _w(32)
    # About 2 s each: long enough to be cut, and 1.7x the best; the waves' blocks not yet past Z errors.
    assert plan.cut(_waves(_w(32), 170.0, 400, 0.0))
    assert not plan.cut(_waves(_w(32), 170.0, 400, 0.5))
    assert plan.cut(_waves(_w(32), 170.0, 1100, 0.5))   # 6 s: CANDIDATE_SEGMENTS
    assert plan.cut(_waves(_w(32), 130.0, 300, 0.5))    # not far ahead: a second pair judges it
    # After the first pair, a candidate reads as long as any reading.
    plan.done(_waves(_w(32), 130.0, 300, 0.5))
    assert plan.candidate == _w(32) and plan.next(10**6, 10**6, 10**7)[0] == _w(32)
    assert plan.cut(_waves(_w(32), 170.0, 400, 0.5))


def test_the_closing_line_states_the_pick_against_the_start_with_the_climbs_interval():
    # Two pairs, w32 read 1.45x and 1.35x w16: the climb judged the win; Student's interval over
    # two pairs alone (one degree of freedom) would call it indistinguishable.
    from autoloader.search.paired import by_rounds, compared

    def climbed(ratios):
        plan = Plan(_w(16), _w(16), 64)
        for i, ratio in enumerate(ratios):
            pair = [(_w(16), 100.0), (_w(32), 100.0 * ratio)]
            for j, (config, rate) in enumerate(pair if i % 2 == 0 else pair[::-1]):
                plan.next(10**6, 10**6, 10**7)
                plan.done(_reading(config, rate, batches=400, jitter=0.3, seed=2 * i + j))
        assert plan.best == _w(32)
        return plan

    plan = climbed((1.45, 1.35))
    climb, student = plan.versus(_w(32), _w(16)), by_rounds(plan.rates(_w(32)), plan.rates(_w(16)))
    assert climb.rounds == 2 and climb.lo > 1.2 and not student.lo > 1.0, (climb, student)
    assert compared(climb, "the start").startswith("faster than the start by")
    # A win in one pair (far ahead) is said with the interval it was judged on.
    climb = climbed((1.8,)).versus(_w(32), _w(16))
    assert climb.rounds == 1 and climb.lo > 1.5 and compared(climb, "the start").startswith("faster than the start by")


def test_no_step_is_read_where_the_wait_bounds_its_gain_under_what_its_pairs_could_show():
    # Waiting 4.5%, deeper prefetch may bring 4.7% at most: past MIN_GAIN by less than the pairs'
    # noise, so a long run still does not read it; waiting 8%, it may bring 8.7%.
    def worth(wait, direction=schedule.DEEPER, config=_w(16, pf=4)):
        plan = Plan(_w(16), _w(16), 64)
        reading = _reading(_w(16), 50.0, batches=200)
        reading.got = [c + wait / 50.0 for c in reading.calls]
        plan.done(reading)
        return plan.worth(config, direction, 10**6)

    assert not worth(0.045) and worth(0.08)
    assert not worth(0.045, UP, _w(32)) and worth(0.08, UP, _w(32))
    assert worth(0.045, DOWN, _w(8))   # fewer workers: a gain in the step, whatever the wait


def test_no_step_up_where_the_loop_does_not_wait():
    plan = Plan(_w(4), _w(4), 64)
    reading = _reading(_w(4), 50.0, batches=200)
    reading.got = list(reading.calls)   # never waits: the step sets the pace
    plan.done(reading)
    config, _ = plan.next(10**5, 10**5, 10**7)
    assert config.num_workers < 4 or plan.state == SETTLED


def test_a_reading_is_cut_by_time_and_worker_cycles_not_a_batch_count():
    plan = Plan(_w(16), _w(16), 64)
    assert not plan.cut(_reading(_w(16), 100.0, batches=40))    # 0.4 s: too short to read
    assert not plan.cut(_reading(_w(16), 20.0, batches=50))     # 2.5 s but three worker cycles
    assert plan.cut(_reading(_w(16), 100.0, batches=300))       # 3 s, 18 cycles


def test_a_reading_is_not_cut_before_its_steady_part_holds_its_queues_depth():
    """NOTE [ Segments of the epoch ]: the batches a queue held when the steady part began are
    served at the step's pace; a reading shorter than its queue would read the step."""
    deep = _w(16, pf=8)   # 128 batches held ahead, 64 in four worker cycles
    plan = Plan(deep, deep, 64)
    assert schedule.queue_depth(deep) == 128 and schedule.queue_depth(_w(0)) == 0
    held = _reading(deep, 40.0, batches=160, lead=0, steady_end=100)   # 2.5 s: past the cycles, not the queue
    assert held.steady_s >= schedule.SEGMENT_S and 64 <= held.steady_batches < 128
    assert not plan.cut(held)
    assert plan.cut(_reading(deep, 40.0, batches=160, lead=0, steady_end=130))


def test_a_tune_in_the_run_reads_prefetch_no_deeper_than_its_readings_can_hold():
    """Heavy-tailed samples: the model's start over the full space asks for a deeper queue than
    the in-run space holds; the in-run start and every step stay within MAX_PREFETCH."""
    import dataclasses

    from events_cases import PROFILE

    from autoloader.inrun.quick import MAX_PREFETCH, Proposer, space_for
    from autoloader.search.settings import PREFETCH
    from autoloader.search.space import search_space

    tail = dataclasses.replace(PROFILE, batch_size=32, sample_s=(0.002,) * 60 + (0.25,) * 4, sample_cpu_share=0.1,
                               cpus=16, worker_pss=None)
    full = Proposer(tail, search_space((32,), 16, "cuda"), 16, "cuda", fits=lambda c: True).start()
    assert full.prefetch_factor > MAX_PREFETCH
    space = space_for(32, 16, "cuda")
    assert max(space.values(PREFETCH)) == MAX_PREFETCH
    start = Proposer(tail, space, 16, "cuda", fits=lambda c: True).start()
    assert start.num_workers and start.prefetch_factor <= MAX_PREFETCH
    deeper = step(start.replace(prefetch_factor=2), schedule.DEEPER, 64, space.values(PREFETCH), lambda c: True)
    assert deeper.prefetch_factor == MAX_PREFETCH
    assert step(deeper, schedule.DEEPER, 64, space.values(PREFETCH), lambda c: True) is None


def test_a_candidate_clearly_behind_ends_its_reading_early():
    plan = Plan(_w(4), _w(4), 64)
    plan.done(_reading(_w(4), 100.0, batches=300, jitter=0.05))
    candidate, _ = plan.next(10**5, 10**5, 10**7)
    assert candidate == _w(8)
    slow = _reading(candidate, 40.0, batches=40, jitter=0.05, lead=1)   # 1 s in: behind, and far
    assert slow.steady_s < schedule.SEGMENT_S and plan.cut(slow)
    alike = _reading(candidate, 101.0, batches=40, jitter=0.05, lead=1)
    assert not plan.cut(alike)
    assert not plan.cut(_reading(_w(4), 40.0, batches=40, lead=1))   # the best's own reading reads on


def test_a_candidate_without_workers_far_behind_ends_after_its_first_batch():
    # Many workers on samples that wait: the loop making its own batches is 64 times slower, and
    # one batch says so (a reading of blocks would cost several such batches).
    plan = Plan(_w(64), _w(64), 64)
    plan.done(_reading(_w(64), 100.0, batches=300))
    plan.candidate, plan._due, plan.direction = _w(0), schedule.CANDIDATE, DOWN
    assert plan.cut(_reading(_w(0), 100.0 / 64, batches=1, start_s=0.0))
    assert not plan.cut(_reading(_w(0), 90.0, batches=1, start_s=0.0))   # near the best's pace: read on
    # Read far behind, it loses at once: its one batch has no error to wait on.
    plan.done(_reading(_w(0), 100.0 / 64, batches=1, start_s=0.0))
    assert plan.state == SETTLED or plan.candidate != _w(0)
    assert _w(0) not in plan.alive() and plan.best == _w(64)
    # Not for a config with workers: its first batch waits for their start.
    plan.candidate = _w(32)
    assert not plan.cut(_reading(_w(32), 100.0 / 64, batches=1, start_s=0.0))


def test_compare_is_paired_and_says_its_noise():
    quiet = [(_reading(B, 100.0, batches=200, jitter=0.01, seed=i), _reading(A, 120.0, batches=200, jitter=0.01,
                                                                              seed=10 + i)) for i in range(2)]
    d, se = compare(quiet)
    assert d == pytest.approx(0.1823, abs=0.02) and se < 0.05
    noisy = [(_reading(B, 100.0, batches=200, jitter=0.9, seed=3), _reading(A, 120.0, batches=200, jitter=0.9, seed=4))]
    assert compare(noisy)[1] > se


def _stalling(config, rate_batches_per_s, batches=400, swing=0.5):
    """A reading whose worker cycles alternate an in-order stall and the catch-up after it: its
    blocks spread by ``swing`` while its whole rate holds."""
    cycle, size = 1.0 / rate_batches_per_s, batches // 8
    calls, t = [], 0.05
    for i in range(batches):
        calls.append(t)
        t += cycle * (1.0 + (swing if (i // size) % 2 else -swing))
    return Reading(config, None, [8] * batches, calls, [c + cycle * 0.1 for c in calls], t)


def test_from_three_pairs_a_candidate_is_judged_on_the_pairs_own_spread():
    # Blocks that trade a stall for its catch-up read a wide noise inside each reading; the
    # pairs, each 6% apart, read none: Student's interval over them decides.
    best, more = _w(8, 4), _w(16, 4)
    pairs = [(_stalling(best, 100.0 * (1 + d)), _stalling(more, 106.0 * (1 + d))) for d in (0.0, 0.01, -0.01)]
    assert math.sqrt(pairs[0][0].variance()) > 0.03, pairs[0][0].variance()   # each reading's own error
    assert Plan.judge(pairs[:2], UP) is None   # two pairs: the blocks' spread still counts
    assert Plan.judge(pairs, UP) == "win"
    # Where the pairs themselves disagree, three do not decide.
    noisy = [(_stalling(best, 100.0), _stalling(more, 100.0 * g)) for g in (1.30, 0.95, 1.02)]
    assert Plan.judge(noisy, UP) is None


def test_a_candidate_does_not_start_where_the_epoch_cannot_hold_it():
    plan = Plan(_w(4), _w(4), 64)
    plan.done(_reading(_w(4), 100.0, batches=300, jitter=0.05))
    config, round_ = plan.next(50, 1000, 10**7)   # 0.5 s left in this epoch
    assert config == _w(4) and round_ is None and plan.state == CLIMB
    config, round_ = plan.next(1000, 1000, 10**7)
    assert config == _w(8) and round_ == 0
    short = Plan(_w(4), _w(4), 64)   # epochs shorter than a reading: the candidate reads at an epoch's start
    short.done(_reading(_w(4), 100.0, batches=300, jitter=0.05))
    assert short.next(20, 50, 10**7)[0] == _w(4) and short.next(50, 50, 10**7)[0] == _w(8)


def test_the_runs_epochs_given_weigh_the_steps_and_a_bad_count_is_refused():
    loader = _in_process(Counted(80), batch_size=8)
    assert loader._run_left(5) is None   # not known: the epoch's rest
    loader.expect(3)
    iter(loader)   # the first epoch begins
    assert loader._run_left(5) == 5 + 2 * 10
    with pytest.raises(autoloader.UsageError, match="epochs"):
        tuned(DataLoader(Counted(80), batch_size=8), epochs=0)
    with pytest.raises(autoloader.UsageError, match=r"best_loader\(epochs=\)"):
        autoloader.best_loader(Counted(80), batch_size=8, epochs="3")


def test_best_loader_passes_the_runs_epochs_to_the_in_run_loader(tmp_path):
    loader = autoloader.best_loader(Counted(80), batch_size=8, device="cpu", out=str(tmp_path), epochs=4,
                                    progress=False)
    assert loader.run_epochs == 4


def test_the_best_reads_first():
    plan = Plan(_w(4), _w(4), 64)
    assert plan.state == CLIMB and plan.next(1000, 1000)[0] == _w(4)
    assert plan.alive() == {_w(4)}


# --- with worker processes -----------------------------------------------------------------------

def _children():
    return {p.pid for p in multiprocessing.active_children()}


def _shm():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.slow
def test_tuned_loader_keeps_order_and_ends_every_segments_workers(short_segments, tmp_path):
    shm = _shm()
    # Samples of 1 ms: the start has workers (cheaper ones start without: a busy worker's receive).
    plain = DataLoader(Counted(1200, cost_s=0.001), batch_size=8, shuffle=True,
                       generator=torch.Generator().manual_seed(2))
    loader = tuned(plain, out=str(tmp_path), progress=False)
    reference = DataLoader(Counted(1200), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(2))
    for epoch in range(6):   # until settled (the climb's pairs can span epochs), two epochs at least
        assert _indices(loader) == _indices(reference)
        if epoch and loader.plan.state == SETTLED:
            break
    readings = loader.plan.readings
    assert len({r.config for r in readings}) >= 2
    assert loader.plan.state == SETTLED
    # Going back to the best after a candidate's reading starts no workers: they were kept.
    assert any(not r.started and r.config.num_workers and r.config != before.config
               for before, r in zip(readings, readings[1:])), [(r.config.num_workers, r.started) for r in readings]
    # close() ends the pick's kept workers at once (a pick without workers keeps none); the next
    # epoch starts them afresh, in order.
    assert bool(_children()) == bool(loader.plan.pick.num_workers), loader.plan.pick
    loader.close()
    assert not _children()
    assert _indices(loader) == _indices(reference)
    del loader
    gc.collect()
    assert not _children()
    assert _shm() <= shm


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only fallback of a pinning loader")
def test_a_pinning_loader_on_a_machine_without_cuda_is_tuned_on_the_cpu(tmp_path):
    """PyTorch ignores pin_memory=True where there is no accelerator (imagenet/main.py sets it):
    tuned() then tunes for the CPU instead of refusing a CUDA device that is not there."""
    plain = DataLoader(Counted(64), batch_size=8, pin_memory=True)
    loader = tuned(plain, out=str(tmp_path), progress=False)
    assert len(loader) == len(plain)
    assert sorted(i for batch in _indices(loader) for i in batch) == list(range(64))


@pytest.mark.slow
def test_a_break_and_an_exception_leave_no_workers(short_segments, tmp_path):
    plain = DataLoader(Counted(600), batch_size=8, shuffle=True)
    loader = tuned(plain, out=str(tmp_path), progress=False)
    for i, _ in enumerate(loader):
        if i == 30:
            break
    gc.collect()
    assert not _children()
    with pytest.raises(ValueError):
        for i, _ in enumerate(loader):
            if i == 30:
                raise ValueError("the loop's own error")
    gc.collect()
    assert not _children()


@pytest.mark.slow
def test_seeded_batches_with_workers_are_bit_for_bit_a_fixed_configs(short_segments, tmp_path):
    plain = DataLoader(Counted(800, cost_s=0.0002), batch_size=8, shuffle=True,
                       generator=torch.Generator().manual_seed(6))
    loader = tuned(plain, sample_seed=99, out=str(tmp_path), progress=False)
    fixed_data = SeededSamples(Counted(800), seed=99)
    fixed = DataLoader(fixed_data, batch_size=8, shuffle=True, num_workers=2,
                       generator=torch.Generator().manual_seed(6))
    for epoch in range(2):
        fixed_data.set_epoch(epoch)
        for a, b in zip(loader, fixed, strict=True):
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert len({r.config.num_workers for r in loader.plan.readings}) >= 2


@pytest.mark.slow
def test_best_loader_tunes_in_the_run_stores_and_the_next_call_reuses(short_segments, tmp_path):
    out = str(tmp_path / "home")
    began = time.perf_counter()
    loader = autoloader.best_loader(Counted(1500, cost_s=0.0003), batch_size=16, device="cpu", out=out,
                                    progress=False)
    first = next(iter(loader))
    assert time.perf_counter() - began < 10.0
    assert isinstance(loader, InRunLoader) and first[0].shape == (16,)
    for _ in range(5):   # the first epoch(s): rounds that do not fit an epoch go on in the next
        for _ in loader:
            pass
        if loader.reported:
            break
    stored = autoloader.stored_result(Counted(1500), batch_size=16, device="cpu", out=out)
    assert stored is not None and stored.config == loader.plan.pick
    files = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f.endswith(".json")]
    record = json.load(open(files[0]))["in_run"]
    assert record["pick_samples_per_s"] > 0 and record["tuning_cost_s"] is not None
    again = autoloader.best_loader(Counted(1500), batch_size=16, device="cpu", out=out, progress=False)
    assert isinstance(again, DataLoader) and again.num_workers == loader.plan.pick.num_workers


@pytest.mark.slow
def test_a_tune_in_the_run_gives_its_events_to_a_callable_and_one_closing_line_to_the_log(short_segments, tmp_path,
                                                                                         caplog):
    from autoloader import InRunDone, InRunSettled, InRunStarted, SegmentRead

    events = []
    plain = DataLoader(Counted(900, cost_s=0.0003), batch_size=8, shuffle=True)
    with caplog.at_level("INFO", logger="autoloader"):
        loader = tuned(plain, out=str(tmp_path), progress=events.append)
        while not loader.reported and loader.epochs < 6:   # at most MAX_ROUNDS rounds: a few epochs
            for _ in loader:
                pass
    assert isinstance(events[0], InRunStarted) and events[0].start == loader.plan.start
    reads = [e for e in events if isinstance(e, SegmentRead)]
    assert [(e.config, e.samples_per_s) for e in reads] == [(r.config, r.rate) for r in loader.plan.readings]
    assert all(e.round == r.round for e, r in zip(reads, loader.plan.readings) if e.round is not None)
    (settled,) = [e for e in events if isinstance(e, InRunSettled)]
    done = events[-1]
    assert isinstance(done, InRunDone) and done.pick == settled.pick == loader.plan.pick
    assert done.path == settled.path and done.path.endswith(".json") and os.path.exists(done.path)
    assert done.samples_per_s > 0 and done.tuning_cost_s is not None and done.tried == tuple(loader.plan.finalists)
    lines = [r.getMessage() for r in caplog.records if "tuned in the run" in r.getMessage()]
    assert lines == [done.line]
    assert "tried" in lines[0] and "picked" in lines[0] and "tuning cost" in lines[0] and "stored" in lines[0]


def _free(path: str) -> bool:
    """Whether another process could take the lock on ``path`` now (a lock of its own open file:
    flock locks of two opens conflict within one process too)."""
    from filelock import FileLock, Timeout

    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    lock.release()
    return True


def test_a_tune_in_the_run_holds_its_problems_lock_until_its_result_is_stored(short_segments, tmp_path):
    plain = DataLoader(Counted(400), batch_size=8, shuffle=True)
    loader = tuned(plain, out=str(tmp_path / "a"), progress=False)
    lock = loader._report.claim.path
    assert lock.endswith(".lock") and not _free(lock)
    while not loader.reported and loader.epochs < 6:
        for _ in loader:
            pass
    assert loader.reported and _free(lock)
    assert not os.path.exists(lock + ".pid")
    unsettled = tuned(plain, out=str(tmp_path / "b"), progress=False)   # closed before it stores
    assert not _free(unsettled._report.claim.path)
    unsettled.close()
    assert _free(unsettled._report.claim.path)


def test_a_tune_before_the_run_waits_for_a_tune_in_the_run_naming_its_pid(tmp_path):
    """The lock is one for both: a tune before the run (best_loader's, the CLI's) that finds a
    tune in a run holding it says who holds it, and waits until it is let go."""
    import threading

    from autoloader.store.paths import Claim, held

    path = str(tmp_path / "box" / "key.lock")
    claim = Claim(path)
    assert claim.held and claim.holder is None
    waited, entered = [], threading.Event()

    def before_the_run():
        with held(path, on_wait=waited.append):
            entered.set()

    other = threading.Thread(target=before_the_run)
    other.start()
    assert not entered.wait(0.5) and waited == [os.getpid()]
    assert Claim(path).held   # this thread's own: re-entrant, as ``held`` is (no wait on itself)
    claim.release()
    assert entered.wait(10)
    other.join(10)


def _tune_in_a_run(home, plain, said, claimed, epochs):
    """A training process: the in-run loader's events and whether each epoch kept the order."""
    from short_readings import short_readings

    short_readings()
    events = []
    loader = tuned(plain(), out=home, progress=events.append)
    claimed.set()
    reference, ordered = plain(), []
    for _ in range(epochs):
        ordered.append(_indices(loader) == _indices(reference))
        if loader.reported and not loader.following and (loader.epochs > 1 or loader.plan.readings):
            break
    loader.close()
    said.put((os.getpid(), events, ordered, loader.plan.pick))


def _plain_counted():
    return DataLoader(Counted(600, cost_s=0.0003), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4))


@pytest.mark.slow
def test_two_runs_tuning_one_problem_at_once_one_tunes_the_other_takes_its_pick(tmp_path):
    """NOTE [ One tune of a problem at a time ]: two training processes start on the same
    problem and results home. The first tunes in its run and stores; the second trains with its
    start untuned and, from the epoch after the first stored, with the first's pick; both keep the
    plain loader's order every epoch, and the one result is the first's."""
    from autoloader import InRunAdopted, InRunDone, InRunFollowing, InRunStarted

    home = str(tmp_path / "home")
    ctx = multiprocessing.get_context("fork")
    said, claimed, ready = ctx.Queue(), ctx.Event(), ctx.Event()
    first = ctx.Process(target=_tune_in_a_run, args=(home, _plain_counted, said, claimed, 12))
    first.start()
    assert claimed.wait(60)
    second = ctx.Process(target=_tune_in_a_run, args=(home, _plain_counted, said, ready, 40))
    second.start()
    runs = {pid: (events, ordered, pick) for pid, events, ordered, pick in (said.get(timeout=240) for _ in range(2))}
    first.join(30)
    second.join(30)
    events, ordered, pick = runs[first.pid]
    assert isinstance(events[0], InRunStarted) and isinstance(events[-1], InRunDone) and all(ordered)
    stored = events[-1].path
    events2, ordered2, pick2 = runs[second.pid]
    following, adopted = events2
    assert following == InRunFollowing(events[0].key, first.pid, home, events[0].start) or \
        (isinstance(following, InRunFollowing) and following.holder == first.pid), following
    assert isinstance(adopted, InRunAdopted) and adopted.pick == pick == pick2 and adopted.path == stored
    assert adopted.epoch >= 1 and all(ordered2) and len(ordered2) == adopted.epoch + 1
    assert [f for f in os.listdir(os.path.dirname(stored)) if f.endswith(".json")] == [os.path.basename(stored)]
    assert json.load(open(stored))["in_run"]["segments"], "the first's record, with its readings"


def test_an_iterable_dataset_asked_to_tune_in_the_run_says_why_it_tunes_before():
    from autoloader import NotInRun
    from autoloader.api import _tunes_in_run

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(8))

    events = []
    assert not _tunes_in_run("run", None, Stream(), None, {}, events.append)
    assert events == [NotInRun("an IterableDataset has no order to read in segments")]
    assert _tunes_in_run(None, None, Counted(8), None, {}, events.append) and len(events) == 1


def test_tune_before_or_a_step_keeps_the_tune_apart_and_bad_values_are_refused(tmp_path):
    with pytest.raises(autoloader.UsageError, match="tune="):
        autoloader.best_loader(Counted(64), batch_size=8, device="cpu", out=str(tmp_path), tune="later")
    with pytest.raises(autoloader.UsageError, match="DataLoader"):
        tuned([1, 2, 3])


@pytest.mark.slow
def test_lightning_fits_on_the_in_run_loader_and_it_settles_and_stores(short_segments, tmp_path):
    lightning = pytest.importorskip("lightning")
    from integration_workloads import Points, linear_module

    from autoloader.integrations.lightning import TunedDataModule

    data = TunedDataModule(Points(length=2048, cost_s=0.0002), batch_size=16, out=str(tmp_path), device="cpu",
                           progress=False)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_epochs=4, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(linear_module(), datamodule=data)
    loader = trainer.train_dataloader
    assert isinstance(loader, InRunLoader) and loader.plan.state == SETTLED
    assert trainer.global_step == 4 * len(loader), "every batch of every epoch reached the step"
    stored = autoloader.stored_result(Points(length=2048), batch_size=16, device="cpu", out=str(tmp_path))
    assert stored is not None and stored.config == loader.plan.pick


def test_accelerates_loader_is_tuned_before_the_run(monkeypatch):
    """accelerate's prepare() rebuilds the loader it is given: tune="before"."""
    from integration_workloads import Points

    from autoloader.integrations import accelerate

    asked = {}

    def recorded(dataset, **options):
        asked.update(options)
        return DataLoader(dataset, batch_size=8)

    monkeypatch.setattr(accelerate, "best_loader", recorded)
    accelerate.tuned_loader(Points(), batch_size=8)
    assert asked["tune"] == "before"


def test_no_config_past_the_memory_forecast_starts(short_segments, tmp_path, monkeypatch):
    """A limit no worker fits: only configs without workers run, the rest are listed as refused.
    Its result is stored and read back, even where the load made the tuning cost read below zero."""
    from autoloader.api import built_problem
    from autoloader.inrun import record

    monkeypatch.setattr(record, "tune_cost", lambda loader: (10.0, 10.5, -0.5))
    dataset = Counted(400)
    plain = DataLoader(dataset, batch_size=8, shuffle=True)
    problem = built_problem(dataset, dataset, batch_size=8, device="cpu", fixed_kwargs={})
    loader = in_run_loader(plain, problem, str(tmp_path), progress=None, max_memory=1, profile_seconds=0.2)
    for _ in range(3):
        for _ in loader:
            pass
    assert loader.plan.readings and all(r.config.num_workers == 0 for r in loader.plan.readings)
    assert loader.refused and all(c.num_workers > 0 for c in loader.refused)
    assert loader.plan.pick is not None and loader.plan.pick.num_workers == 0
    line = record.done_event(loader, None).line   # the refused named once each, the first two in words
    refused = list(dict.fromkeys(loader.refused))
    assert line.count("past the memory forecast") == 1 and len(line) < 1500, line
    assert "no tuning cost: the 10.0 s took 0.5 s less than the pick's pace would" in line, line
    if len(refused) > 2:
        assert f"and {len(refused) - 2} more" in line, line
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a stored record that fails its checks is a warning
        stored = autoloader.stored_result(dataset, batch_size=8, device="cpu", out=str(tmp_path))
    assert stored is not None and stored.config == loader.plan.pick


def test_the_memory_forecast_counts_the_bests_kept_workers_beside_a_candidate():
    from autoloader.inrun.loader import WORKER_GUESS_BYTES

    limit = int(4.5 * WORKER_GUESS_BYTES)   # four workers fit alone, not beside two kept ones
    loader = InRunLoader(DataLoader(Counted(80), batch_size=8), Stub(_w(2), [_w(2), _w(4)]), max_memory=limit)
    assert loader.plan.best == _w(2)
    assert not loader.fits(_w(4)) and _w(4) in loader.refused
    loader.plan.best = _w(0)
    assert loader.fits(_w(4))


def test_a_follower_whose_stored_pick_is_past_its_memory_limit_keeps_its_start_and_says_why():
    """NOTE [ One tune of a problem at a time ]: the other tune stored a pick whose workers this
    run's limit cannot hold; it never starts, and the run says so in a line naming both sizes."""
    from autoloader.events import InRunNotAdopted
    from autoloader.inrun.loader import WORKER_GUESS_BYTES

    class Follower:   # record.py's Reporter, as a run that another process's tune holds sees it
        following, said = True, []

        def stored(self):
            return _w(4), "/home/r.json"

        def adopted(self, *args):
            self.said.append(("adopted", args))

        def not_adopted(self, *args):
            self.said.append(("not_adopted", args))

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    report = Follower()
    loader = InRunLoader(DataLoader(Counted(80), batch_size=8), Stub(_w(0), [_w(0), _w(4)]),
                         max_memory=2 * WORKER_GUESS_BYTES, report=report)
    for epoch in range(2):
        assert sorted(i for batch in loader for i in batch[0].tolist()) == list(range(80))
    assert loader.plan.pick == _w(0) and loader.refused == [_w(4)] and not loader.following
    (kind, (epoch, pick, path, forecast, limit, kept)), = report.said
    assert kind == "not_adopted" and (epoch, pick, path, kept) == (0, _w(4), "/home/r.json", _w(0))
    assert forecast > limit == 2 * WORKER_GUESS_BYTES
    text = InRunNotAdopted(epoch, pick, path, forecast, limit, kept).line
    assert "num_workers=4" in text and "num_workers=0" in text and "max_memory=" in text, text
    loader.close()


def test_an_epoch_that_ends_still_exploring_says_so(tmp_path, caplog):
    """A loop whose epoch ends before the tune settles hears it: how far it got and who leads,
    and nothing is stored yet (the closing line comes once settled)."""
    plain = DataLoader(Counted(48), batch_size=8)
    loader = tuned(plain, out=str(tmp_path), progress=None)
    with caplog.at_level(logging.INFO, logger="autoloader"):
        assert sorted(i for batch in _indices(loader) for i in batch) == list(range(48))
    assert loader.plan.state != SETTLED   # six batches: shorter than one segment
    lines = [r.getMessage() for r in caplog.records if "still exploring" in r.getMessage()]
    assert lines and lines[0].startswith("autoloader: epoch 0 ended with the tune in the run still exploring ("), lines
    assert not list(tmp_path.rglob("*.json"))


def test_a_run_whose_epochs_end_exploring_stores_its_best(tmp_path, caplog, monkeypatch):
    """Told the run's epochs, the tune settles on the best so far when the last one ends (its
    readings too long for the run to finish the climb), and the next call finds the result."""
    monkeypatch.setattr(schedule.Plan, "worth", lambda self, *args: True)   # every step worth reading
    dataset = Counted(48)
    loader = tuned(DataLoader(dataset, batch_size=8), out=str(tmp_path), epochs=2, progress=None)
    with caplog.at_level(logging.INFO, logger="autoloader"):
        for _ in range(2):
            assert sorted(i for batch in _indices(loader) for i in batch) == list(range(48))
    assert loader.plan.state == SETTLED and loader.plan.pick == loader.plan.best, loader.plan.why
    assert "run's" in loader.plan.why
    assert any("tuned in the run over 2 epoch(s)" in r.getMessage() for r in caplog.records)
    stored = autoloader.stored_result(dataset, batch_size=8, device="cpu", out=str(tmp_path))
    assert stored is not None and stored.config == loader.plan.pick
