"""Limits the user sets or meets: Ctrl-C, a memory ceiling past the RAM, a dataset shorter than
one batch, and the budget as a cap on the whole run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT, WORKLOADS

from autoloader import tune
from autoloader.cli import main
from scripts.faults import datasets as faulty

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
FAULTY = "scripts.faults.datasets"  # the CLI's --dataset module, imported from the repository's root


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
def test_ctrl_c_exits_130_and_leaves_nothing(out_dir, monkeypatch):
    """SIGINT as a terminal's Ctrl-C sends it: exit 130 (not 1, which says no config was feasible),
    a line that says so, and no trial process left behind."""
    tag = f"ctrl-c-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv(faulty.TAG_VAR, tag)
    driver = subprocess.Popen([AUTOLOADER, "tune", "--dataset", f"{FAULTY}:waiting", "--batch-size", "16",
                               "--budget", "60", "--device", "cpu", "--out", out_dir],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=faulty.sigint_as_from_a_terminal)
    try:
        assert faulty.wait_for_running_trial(out_dir, driver, 120), "no trial ever ran"
        time.sleep(0.3)  # into the trial
        driver.send_signal(signal.SIGINT)
        stdout, stderr = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 130, (driver.returncode, stderr[-2000:])
    assert "interrupted" in stderr and "Traceback" not in stderr and "Aborted" not in stderr
    assert not faulty.leftover_processes(tag)


def test_a_memory_ceiling_past_the_ram_is_refused(out_dir):
    total = psutil.virtual_memory().total
    too_much = f"{int(total / 2**30) + 64}G"
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--max-memory", too_much, "--out", out_dir, "--quiet")
    assert result.exit_code == 2, (result.output, result.exception)
    assert too_much in result.stderr and f"{total / 2**30:.1f} GiB" in result.stderr and "Fix:" in result.stderr
    assert os.listdir(out_dir) == []


@pytest.mark.slow
def test_a_batch_larger_than_the_dataset_is_warned_about(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--batch-size", "512", "--budget", "10",
                    "--device", "cpu", "--out", out_dir, "--quiet", "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "Warning: batch size 512 is larger than the dataset (256 samples)" in result.stderr
    assert json.loads(result.stdout)["config"]["batch_size"] == 512, "honoured, as asked"


@pytest.mark.slow
@pytest.mark.heavy
def test_memory_is_predicted_from_the_batches_a_short_dataset_makes(out_dir):
    """Four samples of 16 MiB and a batch size of 1024: every batch is 64 MiB, not 16 GiB, so a
    4 GiB ceiling (the profile's process alone reads about 2 GiB of it) holds every config (the prediction from the batch size ruled all of them out,
    and /dev/shm had to hold 16 GiB)."""
    dataset = faulty.BigSamples(width=4 * 2**20, length=4)
    with pytest.warns(UserWarning, match="batch size 1024 is larger than the dataset"):
        result = tune(dataset, batch_size=1024, budget=25, device="cpu", out=out_dir, max_memory="4G")
    assert not [t for t in result.trials if t.cause == "predicted_memory"], result.faults()
    assert result.samples_per_s > 0
