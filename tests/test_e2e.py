"""End to end through the public API: real trials in real processes, measured on this machine.

Budgets are small (tens of seconds) and datasets tiny or synthetic; the rate comparisons are
between configs measured in the same run, so they hold on any machine with two free cores.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings

import optuna
import pytest

from autoloader.search.results import BUDGET_ENDED
from autoloader.events.lines import provisional_text
from conftest import parallel_capacity
from torch.utils.data import DataLoader
from workloads import BusyWork, FreeLarge, Tiny

from autoloader import TuneResult, best_loader, seed_worker, tune

SEARCH_BUDGET = 30.0
# Two CPU-bound processes must get this many cores for "workers pay" to be checkable.
MIN_CORES = 1.6


def ok_trials(result: TuneResult):
    return [t for t in result.trials if t.ok and t.samples_per_s]


def stored_key(kwargs: dict) -> str:
    from autoloader import LoaderConfig

    return LoaderConfig.from_dict(kwargs).key


def finite(x: float | None, default: float = 0.0) -> float:
    return x if x is not None and math.isfinite(x) else default


def describe(result: TuneResult) -> str:
    trials = ", ".join(f"{t.config.key}={t.samples_per_s or 0:.0f}/s" for t in result.trials)
    finals = ", ".join(f"{f.config.key}={'/'.join(f'{r:.0f}' for r in f.rates)}/s" for f in result.finals)
    return f"pick {result.config.key} {result.samples_per_s:.0f}/s; trials: {trials}; finals: {finals}"


def free_cores(wanted: float, probes: int = 3) -> float:
    """The best of a few capacity probes a second apart: a blip of other load is not a busy machine."""
    best = 0.0
    for probe in range(probes):
        best = max(best, parallel_capacity())
        if best >= wanted:
            break
        time.sleep(1.0)
    return best


def measured(check, out_root: str, attempts: int = 2, min_cores: float | None = None) -> None:
    """Run ``check(out_dir)``; retry once in a fresh directory if it fails. These tests compare
    rates measured on a shared machine, where another process can skew one run; a real
    regression fails every attempt.

    ``min_cores``: the check is only meaningful when two CPU-bound processes get at least this
    many cores (probed before and after the run). An attempt on a machine too busy for that is
    inconclusive, not failed; when every attempt is inconclusive the test is skipped."""
    failures, busy = [], []
    for attempt in range(1, attempts + 1):
        out_dir = os.path.join(out_root, f"attempt{attempt}")
        if min_cores and (cores := free_cores(min_cores)) < min_cores:
            busy.append(f"attempt {attempt}: two processes got {cores:.2f} cores before tuning")
            continue
        try:
            check(out_dir)
        except AssertionError as exc:
            if min_cores and (cores := parallel_capacity()) < min_cores:
                busy.append(f"attempt {attempt}: two processes got {cores:.2f} cores after tuning ({exc})")
            else:
                failures.append(f"attempt {attempt}: {exc}")
            continue
        if failures or busy:  # passed on a retry: say so, since it was a close call
            warnings.warn(f"passed on attempt {attempt}; before: {failures + busy}", stacklevel=2)
        return
    if failures:
        pytest.fail("\n".join(failures + busy))
    pytest.skip("inconclusive: other load left the workers no second core: " + "; ".join(busy))


@pytest.mark.slow
@pytest.mark.heavy
def test_cpu_bound_samples_pay_for_workers(out_dir):
    """~3 ms of GIL-bound Python per sample: only worker processes run samples in parallel, so
    on 2 cores the tuner must pick workers, and the pick must beat num_workers=0 by a margin."""

    def check(out):
        result = tune(BusyWork(cost_s=0.003), batch_size=16, budget=SEARCH_BUDGET, device="cpu", out=out)
        info = describe(result)
        baseline = [t for t in ok_trials(result) if t.config.num_workers == 0]
        assert baseline, f"num_workers=0 was never measured: {info}"
        assert result.config.num_workers > 0, info
        assert result.samples_per_s > baseline[0].samples_per_s * 1.2, info
        tuned = result.tuned
        assert tuned.baseline_samples_per_s and tuned.samples_per_s > 1.2 * tuned.baseline_samples_per_s, info
        assert result.knee is not None and result.knee.stops_paying > 0, info
        assert result.config.batch_size == 16
        assert os.path.isfile(result.path) and os.path.isfile(result.snippet_path)

    # Workers can only pay when there is a second core for them to run on.
    measured(check, out_dir, min_cores=MIN_CORES)


@pytest.mark.slow
@pytest.mark.heavy
def test_free_large_samples_get_no_more_workers_than_pay(out_dir):
    """1 MiB samples that cost nothing to make: workers add copies through shared memory and
    save no work, so more of them rarely pay. Whatever this machine's memory makes of that, the
    pick must not have more workers than the tuner's own knee says pay, and must be as fast as
    the best measured config, within the noise of the measurements."""

    def check(out):
        result = tune(FreeLarge(), batch_size=16, budget=SEARCH_BUDGET, device="cpu", out=out)
        info = describe(result)
        ok = ok_trials(result)
        assert any(t.config.num_workers == 0 for t in ok), f"num_workers=0 was never measured: {info}"
        assert result.knee is not None
        assert result.config.num_workers <= result.knee.stops_paying, info

        # Each config's best estimate: its interleaved final median when it was a finalist (the
        # tuner's own, better-controlled figure), else its search trial.
        estimates = {t.config: (t.samples_per_s, finite(t.rel_interval)) for t in ok}
        for final in result.finals:
            estimates[final.config] = (final.median, final.spread / 2)
            assert len(final.waits) == len(final.rates), f"a round's wait was not kept: {info}"
        with open(result.path) as fh:
            saved = json.load(fh)["finals"]
        assert [len(f["waits"]) for f in saved] == [len(f.rates) for f in result.finals], info
        best_config = max(estimates, key=lambda c: estimates[c][0])
        best_rate, best_noise = estimates[best_config]
        pick_rate, pick_noise = estimates[result.config]
        assert result.samples_per_s == pick_rate, info
        noise = max(0.10, best_noise + pick_noise)
        assert pick_rate >= best_rate * (1 - noise), f"{best_config.key} is faster: {info}"

    measured(check, out_dir)


@pytest.mark.slow
def test_best_loader_tunes_once_then_reuses_the_stored_result(out_dir, caplog):
    """...and says so through logging (the API's default progress), silent only when asked."""
    import logging

    dataset = Tiny(512)
    with caplog.at_level(logging.INFO, logger="autoloader"):
        loader = best_loader(dataset, batch_size=32, budget=10, device="cpu", out=out_dir, tune="before")
    said = [r.getMessage() for r in caplog.records if r.name == "autoloader"]
    assert any(line.startswith("autoloader: tuning ") for line in said), said
    assert any(line.startswith("  profile [") for line in said) and any("trial 1 of" in line for line in said)
    assert isinstance(loader, DataLoader) and loader.dataset is dataset
    (fingerprint,) = os.listdir(out_dir)
    (json_name,) = [n for n in os.listdir(os.path.join(out_dir, fingerprint)) if n.endswith(".json")]
    path = os.path.join(out_dir, fingerprint, json_name)

    with open(path) as fh:
        stored = json.load(fh)
    kwargs = stored["config"]
    assert kwargs["batch_size"] == 32
    assert loader.batch_size == 32
    assert loader.num_workers == kwargs["num_workers"]
    assert loader.pin_memory == kwargs["pin_memory"]
    if kwargs["num_workers"]:
        assert loader.prefetch_factor == kwargs["prefetch_factor"]
        assert loader.persistent_workers == kwargs["persistent_workers"]
        assert loader.worker_init_fn is seed_worker
    assert sum(len(batch) for batch in loader) == 512

    before = (os.stat(path).st_mtime_ns, open(path).read())
    db = path[:-len(".json")] + ".db"
    db_before = os.stat(db).st_mtime_ns
    caplog.clear()
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="autoloader"):
        again = best_loader(dataset, batch_size=32, budget=10, device="cpu", out=out_dir)
    elapsed = time.monotonic() - t0
    said = [r.getMessage() for r in caplog.records if r.name == "autoloader"]
    reuse, *provisional = said[0].split("\n")
    assert reuse == (f"autoloader: using the stored result {path}: {stored_key(kwargs)} at "
                     f"{stored['samples_per_s']:,.0f}/s (tuned on cpu; delete it, or pass version=, to tune again)")
    # A pick the run could not judge (a busy machine, no final) says so in one more line.
    assert provisional == ([f"autoloader: {provisional_text(stored['provisional'])}"] if stored.get("provisional")
                           else []), said[0]
    # The closing line (NOTE [ The closing line ]): the settings applied, reused, where the result is.
    assert len(said) == 2 and said[1].startswith("autoloader: applied ") and "(reused" in said[1], said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="autoloader"):
        best_loader(dataset, batch_size=32, budget=10, device="cpu", out=out_dir, progress=False)
    assert not [r for r in caplog.records if r.name == "autoloader"], "progress=False says nothing"
    assert elapsed < 3.0, f"the second call took {elapsed:.1f} s: it tuned again"
    assert (os.stat(path).st_mtime_ns, open(path).read()) == before, "the result was rewritten"
    assert os.stat(db).st_mtime_ns == db_before, "the study was touched"
    assert (again.batch_size, again.num_workers, again.pin_memory) == (
        loader.batch_size, loader.num_workers, loader.pin_memory)


@pytest.mark.slow
def test_best_loader_builds_a_factorys_dataset_once_in_this_process(out_dir):
    import workloads

    workloads.BUILDS.clear()
    loader = best_loader(workloads.counted_tiny, batch_size=32, budget=10, device="cpu", out=out_dir,
                         tune="before")
    assert len(loader.dataset) == 256
    assert workloads.BUILDS == [os.getpid()], "built more than once here (the trial process builds its own)"
    best_loader(workloads.counted_tiny, batch_size=32, budget=10, device="cpu", out=out_dir)  # stored
    assert len(workloads.BUILDS) == 2


@pytest.mark.slow
def test_best_loader_takes_tunes_arguments_and_keeps_them_from_the_dataloader(out_dir):
    """trial_timeout, storage and batch_sizes are tune()'s: they reach the tuner, not DataLoader
    (which would reject them after the whole tuning run), and the stored result is found again."""
    storage = f"sqlite:///{os.path.join(out_dir, 'study.db')}"
    loader = best_loader(Tiny(256), batch_sizes=[16, 32], budget=10, device="cpu", out=out_dir,
                         trial_timeout=30, storage=storage)
    assert loader.batch_size in (16, 32)
    assert os.path.isfile(os.path.join(out_dir, "study.db")), "the storage given was used"
    events = []
    again = best_loader(Tiny(256), batch_sizes=[16, 32], budget=10, device="cpu", out=out_dir,
                        trial_timeout=30, storage=storage, progress=lambda event: events.append(event))
    assert [e.kind for e in events] == ["reused", "applied"], \
        f"the stored result for these batch sizes was not found: it tuned again: {[e.line for e in events][:2]}"
    assert again.batch_size == loader.batch_size


@pytest.mark.slow
@pytest.mark.heavy
def test_a_run_after_a_complete_one_measures_anew_with_the_old_trials_kept(out_dir):
    """A complete run's trials stay in the study, never a later run's measurements: the next run
    starts with no history of its own and measures every config it decides on (a resumed
    interrupted run, which keeps its trials, is test_faults' driver-killed test)."""
    from fleet_workloads import (
        Paced,  # its samples are its indices: one key (BusyWork's count spins)
    )

    dataset = Paced(cost_s=0.002)
    first = tune(dataset, batch_size=16, budget=12, device="cpu", out=out_dir)
    assert first.resumed_trials == 0
    second = tune(dataset, batch_size=16, budget=12, device="cpu", out=out_dir)
    info = f"first: {describe(first)}\nsecond: {describe(second)}"

    assert second.path == first.path and second.storage == first.storage and second.study == first.study
    assert first.study == f"{first.tuned.hardware['fingerprint']}/{first.tuned.dataset_key}", "per hardware x key"
    assert second.resumed_trials == 0, info
    assert second.run_id != first.run_id and second.trials, info

    # The study holds both runs' trials, each marked with its run.
    study = optuna.load_study(study_name=second.study, storage=second.storage)
    finished = [t for t in study.get_trials(deepcopy=False) if t.state != optuna.trial.TrialState.RUNNING]
    runs = [t.user_attrs["autoloader_run"] for t in finished]
    assert runs.count(first.run_id) == len(first.trials) and runs.count(second.run_id) == len(second.trials)


@pytest.mark.slow
@pytest.mark.heavy
def test_small_budget_still_measures_the_baseline(out_dir):
    """Even a budget of a few trials measures num_workers=0 and the model's pick, so the pick is
    never more workers than were shown to pay (the finals' reserve must not eat the search)."""
    result = tune(BusyWork(cost_s=0.003), batch_size=16, budget=20, device="cpu", out=out_dir)
    counts = {t.config.num_workers for t in ok_trials(result)}
    assert 0 in counts and len(counts) >= 2, describe(result)
    assert result.tuned.baseline_samples_per_s is not None
    # The final is sized from the finalists' own trial times, so the run ends inside its budget.
    assert result.tune_seconds < 20 + 5, f"the budget bounds the run, its final included: {result.tune_seconds:.1f} s"


DATASET_FILE = '''
import time

import torch
from torch.utils.data import Dataset


class FileDataset(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, index):
        time.sleep(0.002)   # waits, as on I/O: workers pay, so the search measures some
        return torch.full((4,), float(index))


def make():
    return FileDataset()
'''


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dataset_file_reaches_spawned_workers(out_dir, tmp_path):
    """``path/to/file.py:attr`` with workers started by 'spawn' (macOS's default): the workers
    unpickle the dataset by its class's module, which must be importable there."""
    path = tmp_path / f"spawn_data_{os.getpid()}.py"
    path.write_text(DATASET_FILE)
    result = tune(f"{path}:make", batch_size=16, budget=25, device="cpu", out=out_dir,
                  multiprocessing_context="spawn")
    # A burst the budget's end cut (BUDGET_ENDED: still stepping) is not a failure of the spawned workers.
    with_workers = [t for t in result.trials if t.config.num_workers > 0 and t.cause != BUDGET_ENDED]
    assert all(t.ok for t in with_workers), [t.describe_failure() for t in with_workers if not t.ok]
    # Spawned workers' start-up (a fresh interpreter each) may leave the search one burst; the
    # final measures the rule's workers all the same.
    in_final = [f for f in result.finals if f.config.num_workers > 0 and f.rates]
    assert with_workers or in_final, describe(result)
