"""autoloader.watch: the loader unchanged, the wait share as the loop measures it, the verdict's words."""

from __future__ import annotations

import logging
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import autoloader
from autoloader.errors import UsageError
from autoloader.explain.thresholds import WORTH_CHANGING
from autoloader.watching import WATCH_KINDS, Watch, Watched, WatchReport, _kind, watch
# The README's worked example ("A worked example"), as the in-run bench holds it: Spectra(n, n) is
# the README's Spectra(n).
from scripts.bench.inrun import Spectra, make_step


def _hand_timed(loader, step) -> tuple[float, float]:
    """The loop's own next() timed by hand: (seconds in next(), seconds between calls), each
    batch's wait and the step after it, summed over the epoch's batches but its first and last, as
    watch counts a loader with a length."""
    it = iter(loader)
    waits, steps = [], []
    while True:
        start = time.perf_counter()
        if len(waits) > len(steps):
            steps.append(start - returned)
        try:
            batch = next(it)
        except StopIteration:
            return sum(waits[1:-1]), sum(steps[1:-1])
        returned = time.perf_counter()
        waits.append(returned - start)
        step(batch)


@pytest.mark.slow   # about 2 s quiet: the dataset and 20 steps of the MLP
def test_the_wait_share_on_the_readmes_example_is_the_one_timed_by_hand():
    torch.manual_seed(0)
    loader = DataLoader(Spectra(1280, 1280), batch_size=64, shuffle=True)
    watched = watch(loader, every=1000, progress=False)
    wait, between = _hand_timed(watched, make_step())
    report = watched.report()
    assert report is not None and report.at_end and report.steps == len(loader) - 2 == 18
    by_hand = wait / (wait + between)
    assert abs(report.wait_share - by_hand) <= 0.05, (report.wait_share, by_hand)
    assert report.kind in WATCH_KINDS and report.num_workers == 0
    assert report.gain_bound == pytest.approx(report.wait_share / (1 - report.wait_share))
    if report.kind.startswith("input/"):
        assert report.kind == "input/main", "with num_workers=0 the main process makes every batch"
    assert "predicted" in report.line and f"{report.wait_share * 100:.0f}% waiting, measured" in report.line


# --- the loader unchanged -------------------------------------------------------------------------

def _numbers(n=40):
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


def test_the_batches_len_and_attributes_are_the_loaders():
    plain = DataLoader(_numbers(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3))
    loader = DataLoader(_numbers(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3))
    watched = watch(loader, every=2, progress=False)
    assert isinstance(watched, Watch) and watched.loader is loader
    assert len(watched) == len(plain) == 5 and watched.batch_size == 8 and watched.sampler is loader.sampler
    for _ in range(2):   # two epochs: the generator moves on as the plain loader's does
        for (a, ia), (b, ib) in zip(plain, watched, strict=True):
            assert torch.equal(a, b) and torch.equal(ia, ib)
    watched.note = "kept"
    assert loader.note == "kept"
    epochs = [r.epoch for r in watched.reports]
    assert epochs == [1, 1, 1, 2, 2, 2], "after steps 2 and 4, and at the end, each epoch"
    assert [(r.first_step, r.last_step, r.at_end) for r in watched.reports[:3]] == [(2, 2, False), (3, 4, False),
                                                                                    (2, 4, True)]


def test_a_break_and_a_second_iter_behave_as_the_loaders():
    watched = watch(DataLoader(_numbers(), batch_size=4), every=100, progress=False)
    for i, _ in enumerate(watched):
        if i == 3:
            break
    assert watched.report() is None, "no end-of-epoch report for an epoch left early"
    assert sum(1 for _ in watched) == 10 and watched.report().epoch == 2
    with pytest.raises(ZeroDivisionError):
        for _ in watched:
            1 / 0


# --- the verdict ----------------------------------------------------------------------------------

def test_a_loop_whose_step_is_the_limit_is_compute_bound_and_not_worth_a_tune():
    # A batch of numbers takes about 0.2 ms to make; the step 30: under 1% waiting, loaded or not.
    watched = watch(DataLoader(_numbers(64), batch_size=4), every=100, progress=False)
    for _ in watched:
        time.sleep(0.03)
    report = watched.report()
    assert report.kind == "compute" and report.level == "not input-bound"
    assert report.gain_bound < WORTH_CHANGING and "not worth one" in report.line
    assert report.step_samples_per_s >= report.samples_per_s > 0


def test_the_part_follows_where_the_wait_was_spent():
    # With workers: a batch made already means the wait was the main process's receive.
    assert _kind(0.4, 2, 0.9, 0.5, 2) == "input/main"
    assert _kind(0.4, 2, 0.1, 0.5, 2) == "input/workers"
    assert _kind(0.4, 2, 0.1, 1.95, 2) == "input/cores"
    assert _kind(0.4, 2, None, None, 2) == "input/workers"
    assert _kind(0.4, 0, None, 1.95, 2) == "input/main"
    # Moderately: balanced while the step's rate is within BALANCED_WITHIN of the loop's.
    assert _kind(0.10, 2, 0.1, 0.5, 2) == "balanced"
    assert _kind(0.15, 2, 0.1, 0.5, 2) == "input/workers"
    assert _kind(0.04, 2, 0.1, 0.5, 2) == "compute"


class Slow(Dataset):
    def __len__(self):
        return 160

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.full((4,), float(i))


@pytest.mark.slow
def test_a_loop_waiting_for_its_workers_says_so_and_the_batches_are_unchanged():
    loader = DataLoader(Slow(), batch_size=8, num_workers=1)
    watched = watch(loader, every=5, progress=False)
    batches = list(watched)
    assert [int(b[0, 0]) for b in batches] == list(range(0, 160, 8))
    report = watched.report()
    assert report.at_end and report.first_batch_s is not None and report.num_workers == 1
    assert report.kind in ("input/workers", "input/cores") and report.level == "highly input-bound"
    assert report.main_share is not None and report.main_share < 0.5
    assert len(watched.reports) == 4, "after steps 5, 10 and 15, and at the last batch"
    assert (report.first_step, report.last_step, report.steps) == (2, 19, 18)


# --- what it says, and to whom --------------------------------------------------------------------

def test_the_reports_go_to_a_callable_and_to_the_log(caplog):
    got = []
    watched = watch(DataLoader(_numbers(), batch_size=8), every=3, progress=got.append)
    with caplog.at_level(logging.INFO, logger="autoloader"):
        list(watched)
    assert [type(e) for e in got] == [Watched, Watched] and isinstance(got[0].report, WatchReport)
    assert got[-1].kind == "watch" and got[-1].line == watched.report().line
    records = [r for r in caplog.records if r.name == "autoloader"]
    assert [r.getMessage() for r in records] == [e.line for e in got] and records[0].event is got[0]
    assert got[0].line.startswith("autoloader: watch, epoch 1, steps 2-3")
    assert watched.report().to_dict()["wait_share"] == watched.report().wait_share
    assert watched.report().to_dict()["gain_source"] == "predicted"


def test_it_is_exported_and_refuses_bad_input_saying_the_rule_and_the_fix():
    assert autoloader.watch is watch and "watch" in autoloader.__all__
    loader = DataLoader(_numbers(), batch_size=8)
    for kwargs, words in [({"every": 0}, "every must be a positive int"), ({"every": 2.5}, "every must be"),
                          ({"every": True}, "every must be"), ({"progress": "yes"}, "progress must be")]:
        with pytest.raises(UsageError, match=words) as caught:
            watch(loader, **kwargs)
        assert "Fix:" in str(caught.value)
    with pytest.raises(UsageError, match="iterable of batches"):
        watch(5)
    with pytest.raises(UsageError, match="not watched already"):
        watch(watch(loader, progress=False))


# --- Lightning: the callback timed at the hooks, against watch timed at next() -----------------------

@pytest.mark.slow
def test_the_lightning_callback_reads_the_share_watch_reads_in_the_same_fit():
    lightning = pytest.importorskip("lightning.pytorch")
    from autoloader.integrations.lightning_watch import WatchCallback

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(80 * 101, 256), nn.ReLU(), nn.Linear(256, 10))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    loader = watch(DataLoader(Spectra(1280, 1280), batch_size=64), every=1000, progress=False)
    callback = WatchCallback(every=10, progress=False)
    trainer = lightning.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    trainer.fit(Module(), train_dataloaders=loader)
    hooks, at_next = callback.report(), loader.report()
    assert hooks.at_end and hooks.steps == 19 and at_next.steps == 18 and hooks.epoch == at_next.epoch == 1
    assert [(r.first_step, r.last_step) for r in callback.reports] == [(2, 10), (11, 20), (2, 20)]
    # The hooks' wait holds Lightning's own work between batches as well (its logging, the batch
    # moved to the device): 2-3 points over on the 2-core machine, more when others load it.
    assert -0.02 <= hooks.wait_share - at_next.wait_share <= 0.08, (hooks.wait_share, at_next.wait_share)
    with pytest.raises(UsageError, match="every must be"):
        WatchCallback(every=0)


@pytest.mark.slow
def test_the_queues_are_read_without_taking_a_batch():
    from autoloader.watching import _ready

    it = iter(DataLoader(Slow(), batch_size=8, num_workers=1))
    assert _ready(it) is False, "a worker just started has made no batch"
    deadline = time.monotonic() + 20
    while not _ready(it) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ready(it) is True
    assert int(next(it)[0, 0]) == 0, "reading the queues took nothing from them"
    assert _ready(iter([1, 2])) is None, "an iterator of another kind: not read"
    del it
