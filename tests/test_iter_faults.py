"""An exception inside ``iter(loader)`` (NOTE [ An iterator that raised while starting ] in
probe/workers.py): named as the sampler's, with and without workers, and the trial process
lives on; and a hang cannot carry a run far past its budget."""

from __future__ import annotations

import time

import pytest

from autoloader import NoFeasibleConfig, tune
from autoloader.events import Profiled, TrialDone
from autoloader.search.results import HANG, OK
from scripts.faults import datasets as faulty
from scripts.faults import inputs


def _tune(dataset, out_dir, **kwargs):
    events = []
    kwargs.setdefault("batch_size", 16)
    kwargs.setdefault("budget", 20)
    kwargs.setdefault("trial_timeout", 20)
    with pytest.raises(NoFeasibleConfig) as info:
        tune(dataset, device="cpu", out=out_dir, progress=events.append, **kwargs)
    return [e.result for e in events if isinstance(e, TrialDone)], str(info.value)


@pytest.mark.slow
def test_a_sampler_that_raises_is_named_and_costs_no_restart(out_dir, tmp_path, capfd):
    marker = tmp_path / "asked"
    trials, message = _tune(inputs.Small(), out_dir, sampler=inputs.RaisingSampler(str(marker)))
    assert any(t.config.num_workers for t in trials) and any(not t.config.num_workers for t in trials), trials
    for trial in trials:
        assert trial.cause == "sampler_error", (trial.cause, trial.error)
        assert "sampler boom" in trial.error
    assert "2x drawing the next indices from the sampler raised" in message
    assert len(set(marker.read_text().split())) == 1, "every trial ran in the same trial process"
    assert "Traceback" not in capfd.readouterr().err, "nothing reached the terminal"


@pytest.mark.slow
def test_a_dataset_too_long_to_shuffle_is_named(out_dir, capfd):
    trials, message = _tune(inputs.HugeLength(), out_dir)
    assert len(trials) >= 2
    for trial in trials:
        assert trial.cause == "sampler_error", (trial.cause, trial.error)
        assert "__len__ is 1,000,000,000,000" in trial.error
    assert "runner_killed" not in {t.cause for t in trials} and "trial process died" not in message
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
@pytest.mark.heavy
def test_a_hang_is_cut_at_the_budget(out_dir, tmp_path):
    """A worker that hangs, a 60 s watchdog and a 20 s budget: the profile's watchdog is clipped to
    what is left of the budget (the hang's message says so; a trial's is not: the wall bound ends
    it, named a cut), num_workers=0 is measured, and the run ends near its budget."""
    events = []
    t0 = time.monotonic()
    result = tune(faulty.HangInWorker(str(tmp_path / "hung"), min_workers=1), batch_size=16, budget=20,
                  trial_timeout=60, device="cpu", out=out_dir, progress=events.append)
    wall = time.monotonic() - t0
    said = [e.error or "" for e in events if isinstance(e, Profiled)]
    said += [t.error or "" for t in result.trials if t.status == HANG]
    clipped = [text for text in said if "clipped from 60 s to what was left of the budget" in text]
    assert clipped, said
    assert float(clipped[0].split("no progress for ")[1].split(" s")[0]) < 20
    assert result.config in {t.config for t in result.trials if t.status == OK}
    assert wall < 20 + 15, f"the run took {wall:.0f} s on a 20 s budget"
