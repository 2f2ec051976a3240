"""Finding results again, keys that follow the data, and what a re-tune measures.

Real tunes are short (budget 10, tiny or paced datasets); the rest reads records directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT
from fleet_workloads import SLOWDOWN_ENV, Paced, Scaled

from autoloader import best_loader, stored_result, tune
from autoloader.events import ResultNotReused
from autoloader.inputs.content import dataset_fingerprint
from autoloader.inputs.home import HOME_ENV, default_out


@pytest.fixture(scope="module")
def stored_home(tmp_path_factory):
    """A results home holding one best_loader result for Scaled(256), batch size 16."""
    home = str(tmp_path_factory.mktemp("stored-home"))
    loader = best_loader(Scaled(256), batch_size=16, budget=10, device="cpu", out=home, tune="before")
    return home, loader


def test_the_results_home_is_per_user_not_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "mine"))
    assert default_out() == str(tmp_path / "mine")
    monkeypatch.delenv(HOME_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if sys.platform.startswith("linux"):
        assert default_out() == str(tmp_path / "cache" / "autoloader")
    monkeypatch.chdir(tmp_path)
    assert not default_out().startswith(os.path.join(str(tmp_path), "results"))


@pytest.mark.slow
def test_a_second_best_loader_call_is_a_lookup_from_another_directory(stored_home, monkeypatch, tmp_path):
    home, first = stored_home
    monkeypatch.setenv(HOME_ENV, home)      # the default out: no out= below
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    def no_trial_process(self):
        raise AssertionError("a trial process was started: the stored result was not found")

    monkeypatch.setattr("autoloader.tuning.run.TrialRunner.start", no_trial_process)
    # A first tune on a busy machine is provisional and is measured again once the machine is
    # quiet (test_busy_answers); here the load stays as it was, so the lookup is what is looked at.
    monkeypatch.setattr("autoloader.api._load_now", lambda: (None, True))
    events = []
    again = best_loader(Scaled(256), batch_size=16, budget=10, device="cpu",
                        progress=lambda event: events.append(event.kind))
    assert events == ["reused", "applied"], "the stored result is used, and said so"
    assert (again.num_workers, again.batch_size) == (first.num_workers, first.batch_size)
    assert not os.listdir(elsewhere), "nothing written under the working directory"


def test_a_changed_transform_or_split_misses_the_cache(stored_home):
    home, _ = stored_home
    assert stored_result(Scaled(256), batch_size=16, device="cpu", out=home) is not None
    assert stored_result(Scaled(256, scale=2.0), batch_size=16, device="cpu", out=home) is None, "another transform"
    assert stored_result(Scaled(256, offset=256), batch_size=16, device="cpu", out=home) is None, "another split"
    assert stored_result(Scaled(256), batch_size=16, device="cpu", out=home, version="v2") is None, "another version"


def test_a_result_measured_differently_is_not_reused_and_says_why(stored_home, tmp_path, monkeypatch):
    import shutil

    from autoloader import api as tuner

    home = str(tmp_path / "copy")
    shutil.copytree(stored_home[0], home)
    (path,) = [os.path.join(r, f) for r, _, fs in os.walk(home) for f in fs
               if f.endswith(".json") and "history" not in r]
    with open(path) as fh:
        data = json.load(fh)
    data["measurement_format"] = 0
    with open(path, "w") as fh:
        json.dump(data, fh)
    assert stored_result(Scaled(256), batch_size=16, device="cpu", out=home) is None
    events = []

    def stop(*args):
        raise RuntimeError("would tune")

    monkeypatch.setattr(tuner, "_tune", stop)
    with pytest.raises(RuntimeError, match="would tune"):
        best_loader(Scaled(256), batch_size=16, budget=10, device="cpu", out=home, tune="before",
                    progress=events.append)
    (why,) = [e.why for e in events if isinstance(e, ResultNotReused)]
    assert "format 0" in why and "measures with format 1" in why


@pytest.mark.slow
def test_the_content_fingerprint_is_the_same_in_a_fresh_process():
    """Random transforms read alike (the draws are seeded), and the trial process's reading of a
    spec must match the caller's reading of the object."""
    from autoloader.demo import JpegImages

    here = dataset_fingerprint(JpegImages(length=64, pool=4))
    code = ("from autoloader.demo import JpegImages; from autoloader.inputs.content import dataset_fingerprint; "
            "print(dataset_fingerprint(JpegImages(length=64, pool=4)))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert there.returncode == 0, there.stderr
    assert there.stdout.strip() == here
    assert dataset_fingerprint(Scaled(256)) != dataset_fingerprint(Scaled(256, scale=1.01))


@pytest.mark.slow
@pytest.mark.heavy
def test_a_retune_after_the_data_changed_measures_it_again(out_dir, monkeypatch):
    """A complete run's trials are not this run's measurements: after the data got four
    times slower every trial of the new run reads the new speed, and the change is flagged."""
    first = tune(Paced(cost_s=0.002), batch_size=16, budget=20, device="cpu", out=out_dir)
    monkeypatch.setenv(SLOWDOWN_ENV, "4")
    second = tune(Paced(cost_s=0.002), batch_size=16, budget=20, device="cpu", out=out_dir)
    assert second.tuned.dataset_key == first.tuned.dataset_key, "same data, same key: only its speed changed"
    assert second.resumed_trials == 0
    # This run's own measurements read the data as it is now: its profile's sample cost, and every
    # config both runs measured.
    import statistics

    assert statistics.median(second.profile.sample_s) > 2 * statistics.median(first.profile.sample_s)
    before = {t.config: t.samples_per_s for t in first.trials if t.ok and not t.pruned}
    both = [(t.config.key, before[t.config], t.samples_per_s) for t in second.trials
            if t.ok and not t.pruned and t.config in before]
    assert all(now < 0.6 * then for _, then, now in both), both
    if not first.conclusive:   # a busy first run is no baseline (store/history.last_good): nothing to compare
        print("the first run was measured on a busy machine: no baseline, no change to flag")
        return
    assert second.since is not None and second.since.changed and second.since.rate_shifted


@pytest.mark.slow
def test_a_spec_tuned_by_the_cli_is_found_by_best_loader(repo_cwd, results_home):
    """The trial process fingerprints a spec-only tune's dataset; the caller's process fingerprints
    the object best_loader builds: one key, so the lookup finds the CLI's result."""
    from click.testing import CliRunner

    from autoloader.cli import main

    spec = "tests/fleet_workloads.py:scaled"
    done = CliRunner().invoke(main, ["tune", "--dataset", spec, "--batch-size", "16", "--budget", "10",
                                     "--device", "cpu", "--json", "--quiet", "--dataset-version", "v1"])
    assert done.exit_code == 0, (done.output, done.exception)
    data = json.loads(done.stdout)
    assert data["path"].startswith(results_home) and data["dataset"]["content"] and data["dataset"]["version"] == "v1"
    found = stored_result(spec, batch_size=16, device="cpu", version="v1")
    assert found is not None and found.dataset_key == data["dataset_key"]
    assert stored_result(spec, batch_size=16, device="cpu") is None, "the version is part of the key"
    # One dataset, one key: the object the spec builds, and the factory, find the same result
    # (the key names the dataset's class, not the way it was given).
    import fleet_workloads

    assert data["dataset"]["class"] == "fleet_workloads.Scaled" and data["dataset_key"].startswith("Scaled-n256-")
    for given in (fleet_workloads.scaled(), fleet_workloads.scaled):
        again = stored_result(given, batch_size=16, device="cpu", version="v1")
        assert again is not None and again.dataset_key == data["dataset_key"], given
