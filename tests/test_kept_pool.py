"""A final's kept worker pools (NOTE [ A kept pool in the final ] in autoloader/probe/kept.py):
a config that keeps its workers is resumed from one final reading to the next instead of started
and ended each time, its backlog skipped; any other reading ends the kept pools first; the run
keeps them only where the final's configs fit the memory limits together."""

from __future__ import annotations

import time

import psutil
import pytest

from autoloader.inputs.source import Source
from autoloader.probe.kept import SETTLE_CAP_S, idle, keepable, resumed, settle
from autoloader.probe.protocol import RunnerSetup
from autoloader.probe.trial import _Runner
from autoloader.search.memory import MemoryLimits
from autoloader.search.policy import FINAL_SETTINGS
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig

KEPT = LoaderConfig.make(16, 2, False, 2, True)     # two workers, kept between epochs
FRESH = LoaderConfig.make(16, 2, False, 2, False)   # two workers, started anew each epoch
NONE = LoaderConfig.make(16, 0, False)


def test_only_a_dataloader_with_kept_workers_keeps_its_pool():
    assert keepable(KEPT, True, graph=False)
    assert not keepable(KEPT, False, graph=False)
    assert not keepable(KEPT, True, graph=True)
    assert not keepable(FRESH, True, graph=False) and not keepable(NONE, True, graph=False)


def test_a_resumed_reading_skips_the_backlog_an_idle_pool_made():
    # A fresh burst skips num_workers + 2 after its first batch; an idle pool of 2 workers at
    # prefetch 2 has 4 made, and 2 more: 6 in all, so 4 beyond the workers.
    settings = resumed(FINAL_SETTINGS, KEPT)
    assert KEPT.num_workers + settings.extra_skip == 2 * 2 + FINAL_SETTINGS.extra_skip
    deep = LoaderConfig.make(16, 3, False, 8, True)
    assert deep.num_workers + resumed(FINAL_SETTINGS, deep).extra_skip == 8 * 3 + FINAL_SETTINGS.extra_skip


def _alive(pids) -> bool:
    return bool(pids) and all(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                              for p in pids)


@pytest.mark.slow
def test_a_kept_pool_is_resumed_and_any_other_reading_ends_it():
    runner = _Runner(RunnerSetup(Source.from_spec("workloads:busy"), None, "cpu", {}, 16))
    try:
        first = runner.measure(KEPT, FINAL_SETTINGS, keep=True)
        pids = runner.kept.pids()
        assert first.status == OK and len(pids) == KEPT.num_workers and _alive(pids)
        # Another config's final reading leaves the pool as it is.
        other = runner.measure(NONE, FINAL_SETTINGS, keep=True)
        assert other.status == OK and runner.kept.pids() == pids and _alive(pids)
        again = runner.measure(KEPT, FINAL_SETTINGS, keep=True)
        assert again.status == OK and runner.kept.pids() == pids
        # Resumed: no workers to start (the first batch is the backlog's); its teardown only the
        # wait for the pool to make its backlog again, within the cap.
        assert again.startup_s < first.startup_s and again.teardown_s < SETTLE_CAP_S, (first, again)
        assert again.worker_samples is None   # its workers read in the earlier reading too
        # The same rate within what two readings of one config move by on this machine.
        assert 0.5 < again.samples_per_s / first.samples_per_s < 2.0, (first.samples_per_s, again.samples_per_s)
        # A reading that is not the final's ends the kept pool first.
        runner.measure(NONE, FINAL_SETTINGS)
        assert not runner.kept and not _alive(pids)
    finally:
        runner.release_kept()


def test_the_final_keeps_pools_only_where_its_configs_fit_together():
    wide = LoaderConfig.make(16, 4, False, 2, True)
    history = [TrialResult(c, OK, samples_per_s=100.0, seconds=1.0, window_s=0.5, batches=10,
                           peak_pss_bytes=3 << 30, peak_host_bytes=3 << 30) for c in (KEPT, wide)]

    def limits(ceiling: int, shm_free: int | None = None) -> MemoryLimits:
        return MemoryLimits(ceiling=ceiling, shm_free=shm_free, runner_uss=1 << 30, runner_pss=1 << 30,
                            sample_bytes=1024)

    # Each forecast holds the trial process's own 1 GiB; together they hold it once.
    runner = 1 << 30
    alone = [limits(64 << 30).forecast(c, history).host_bytes for c in (KEPT, wide, NONE)]
    together = runner + sum(f - runner for f in alone)
    assert together < sum(alone)
    assert limits(together).fit_together([KEPT, wide, NONE], history)
    assert all(limits(together - 1).fits(c, history) for c in (KEPT, wide, NONE))
    assert not limits(together - 1).fit_together([KEPT, wide, NONE], history)
    # Their batches in /dev/shm add up too.
    assert not limits(together, shm_free=1).fit_together([KEPT, wide], history)


class _Queue:
    def __init__(self, sizes):
        self.sizes = iter(sizes)

    def qsize(self):
        return next(self.sizes)


class _Iterator:
    def __init__(self, outstanding, sizes):
        self._tasks_outstanding = outstanding
        self._data_queue = _Queue(sizes)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_a_pool_is_kept_once_every_batch_it_asked_for_is_made():
    clock = _Clock()
    # Four outstanding, made one by one: idle at the fourth.
    assert settle(_Iterator(4, [1, 2, 3, 4]), cap_s=5.0, clock=clock, sleep=clock.sleep)
    assert 0 < clock.now < 1.0
    # Never idle within the cap: not kept, and the wait ends at the cap.
    clock = _Clock()
    beats = []
    assert not settle(_Iterator(4, iter(lambda: 1, None)), cap_s=3.0, beat=lambda: beats.append(clock.now),
                      clock=clock, sleep=clock.sleep)
    assert 3.0 <= clock.now < 3.1 and len(beats) == 2
    # An iterator that shows neither figure is not kept.
    assert idle(object()) is None and not settle(object())


def _cpu(pids) -> float:
    return sum(sum(psutil.Process(p).cpu_times()[:2]) for p in pids)


def test_a_kept_pool_is_idle_while_the_next_config_is_read():
    # workloads:busy spends CPU on every sample: a pool still making its backlog would show.
    runner = _Runner(RunnerSetup(Source.from_spec("workloads:busy"), None, "cpu", {}, 16))
    try:
        first = runner.measure(KEPT, FINAL_SETTINGS, keep=True)
        assert first.status == OK and runner.kept
        kept = runner.kept.take(KEPT)
        runner.kept.put(KEPT, kept)
        assert idle(kept.iterator)
        pids = runner.kept.pids()
        before = _cpu(pids)
        time.sleep(0.3)
        assert _cpu(pids) - before < 0.05   # two workers busy would take about 0.6 s of CPU
    finally:
        runner.release_kept()
