"""The ``autoloader`` command through click's CliRunner: usage errors exit 2 with a message that
names the value and a fix; a run exits 0 and writes the result, the snippet and the study."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from conftest import WORKLOADS

from autoloader.cli import main
from autoloader.inputs.hardware import gpu_names


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_usage_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert not result.stdout.strip(), "errors go to stderr, stdout stays clean for --json"
    message = result.stderr
    assert "Error:" in message and "Fix:" in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


def strict_json(text: str) -> dict:
    def reject(constant):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def test_help():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "tune" in result.stdout
    result = invoke("tune", "--help")
    assert result.exit_code == 0
    for option in ("--dataset", "--step", "--batch-size", "--batch-sizes", "--budget", "--max-memory",
                   "--device", "--out", "--storage", "--json", "--quiet", "--trial-timeout", "--dataset-version"):
        assert option in result.stdout
    assert "AUTOLOADER_HOME" in result.stdout, "--out says where results go by default"
    for command in ("retune", "show", "dashboard"):
        assert invoke(command, "--help").exit_code == 0


def test_dataset_is_required():
    result = invoke("tune")
    assert result.exit_code == 2
    assert "--dataset" in result.stderr


# --- rejected before anything runs ---------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (["--batch-size", "0"], ["0", "--batch-size"]),
    (["--batch-size", "-4"], ["-4"]),
    (["--batch-size", "8", "--batch-sizes", "8,16"], ["not both"]),
    (["--batch-sizes", "8,x"], ["'8,x'", "--batch-sizes 64,128,256"]),
    (["--batch-sizes", ""], ["''", "--batch-sizes 64,128,256"]),
    (["--budget", "1"], ["1.0", "--budget"]),
    (["--budget", "-5"], ["-5"]),
    (["--max-memory", "lots"], ["'lots'", "--max-memory 16G"]),
    (["--budget", "nan"], ["nan", "--budget 60"]),
    (["--budget", "inf"], ["inf", "--budget 60"]),
    (["--max-memory", "0"], ["--max-memory 16G"]),
    (["--max-memory", "16"], ["'16'", "256 MiB", "without a unit counts bytes", "--max-memory 16G"]),
    (["--trial-timeout", "0"], ["--trial-timeout", "0.0"]),
], ids=["batch-0", "batch-negative", "both-batch-options", "batch-sizes-junk", "batch-sizes-empty",
        "budget-1", "budget-negative", "memory-junk", "budget-nan", "budget-inf", "memory-zero", "memory-no-unit",
        "trial-timeout-0"])
def test_bad_options_exit_2(args, needles, out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--out", out_dir, "--quiet", *args)
    assert_usage_error(result, *needles)
    assert os.listdir(out_dir) == [], "nothing written for bad input"


def test_out_that_is_a_file_exits_2(tmp_path):
    path = tmp_path / "results"
    path.write_text("not a folder")
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--out", str(path), "--quiet")
    assert_usage_error(result, "--out", str(path), "not a file")
    assert path.read_text() == "not a folder"


@pytest.mark.slow
def test_a_dataset_that_raises_when_built_exits_2_with_its_traceback(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:raises_when_built", "--out", out_dir, "--quiet")
    assert_usage_error(result, "raised FileNotFoundError", "/no/such/data", "fresh Python process",
                       "Traceback", "raises_when_built")


@pytest.mark.skipif(bool(gpu_names()), reason="a GPU is visible: --device cuda is valid here")
def test_device_cuda_without_a_gpu_exits_2(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--device", "cuda", "--out", out_dir, "--quiet")
    assert_usage_error(result, "--device cuda", "--device cpu")


def test_spec_without_attribute_exits_2(out_dir):
    assert_usage_error(invoke("tune", "--dataset", "workloads", "--out", out_dir), "MODULE:ATTR", "'workloads'")


# --- rejected by the trial process while building the dataset ------------------------------------

@pytest.mark.slow
def test_missing_module_exits_2(out_dir):
    result = invoke("tune", "--dataset", "nosuchmodule:x", "--out", out_dir, "--quiet")
    assert_usage_error(result, "nosuchmodule")


@pytest.mark.slow
def test_missing_file_exits_2(out_dir, tmp_path):
    result = invoke("tune", "--dataset", f"{tmp_path}/nowhere.py:data", "--out", out_dir, "--quiet")
    assert_usage_error(result, "nowhere.py")


@pytest.mark.slow
def test_missing_attribute_exits_2(out_dir, repo_cwd):
    result = invoke("tune", "--dataset", "tests/workloads.py:no_such_name", "--out", out_dir, "--quiet")
    assert_usage_error(result, "no_such_name", "tiny")  # the fix lists what the module does have


@pytest.mark.slow
def test_not_a_dataset_exits_2(out_dir, repo_cwd):
    result = invoke("tune", "--dataset", "tests/workloads.py:not_a_dataset", "--out", out_dir, "--quiet")
    assert_usage_error(result, "not_a_dataset", "Dataset")


@pytest.mark.slow
def test_empty_dataset_exits_2(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:empty", "--out", out_dir, "--quiet")
    assert_usage_error(result, "at least one sample")


@pytest.mark.slow
def test_uncollatable_samples_exit_2(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:uncollatable", "--out", out_dir, "--quiet")
    assert_usage_error(result, "collate", "object", "collate_fn")


@pytest.mark.slow
def test_bogus_storage_exits_2(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:tiny", "--storage", "bogus://x", "--out", out_dir,
                    "--quiet")
    assert_usage_error(result, "--storage", "'bogus://x'", "sqlite:///")


@pytest.mark.slow
def test_no_feasible_config_exits_1(out_dir):
    result = invoke("tune", "--dataset", f"{WORKLOADS}:breaks_past_probe", "--budget", "20", "--batch-size", "16",
                    "--out", out_dir, "--quiet")
    assert result.exit_code == 1, (result.output, result.exception)
    assert "no config ran" in result.stderr and "corrupt" in result.stderr


# --- a run -----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.heavy
def test_json_run_writes_result_snippet_and_study(out_dir, repo_cwd):
    result = invoke("tune", "--dataset", "tests/workloads.py:tiny", "--batch-size", "16", "--budget", "10",
                    "--json", "--quiet", "--out", out_dir)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stderr == "", "--quiet prints no progress"
    data = strict_json(result.stdout)
    for key in ("config", "samples_per_s", "knee", "trials", "path", "snippet_path"):
        assert key in data
    assert data["config"]["batch_size"] == 16, "--batch-size is honoured exactly"
    assert data["resumed_trials"] == 0
    assert data["samples_per_s"] > 0
    assert data["trials"] and all(t["config"]["batch_size"] == 16 for t in data["trials"])
    assert data["knee"]["curve"] and data["knee"]["stops_paying"] in [w for w, _ in data["knee"]["curve"]]

    path = data["path"]
    assert os.path.isfile(path)
    fingerprint = data["hardware"]["fingerprint"]
    assert os.path.dirname(os.path.abspath(path)) == os.path.join(out_dir, fingerprint)
    assert os.path.basename(path) == data["dataset_key"] + ".json"
    with open(path) as fh:
        saved = strict_json(fh.read())
    assert saved["config"] == data["config"]
    assert saved["samples_per_s"] == data["samples_per_s"]
    assert os.path.isfile(data["snippet_path"]) and data["snippet_path"] == path[:-len(".json")] + ".py"
    with open(data["snippet_path"]) as fh:
        compile(fh.read(), data["snippet_path"], "exec")
    assert os.path.isfile(path[:-len(".json")] + ".db")

    # Again, with the table and progress: the same problem, so the same study, which keeps the
    # first run's trials beside this run's own.
    again = invoke("tune", "--dataset", "tests/workloads.py:tiny", "--batch-size", "16", "--budget", "10",
                   "--out", out_dir)
    assert again.exit_code == 0, (again.output, again.exception)
    assert "batch_size           16" in again.stdout
    assert f"saved {path}" in again.stdout
    assert "autoloader: tuning" in again.stderr and "resuming" not in again.stderr


@pytest.mark.slow
@pytest.mark.heavy
# Two 10 s tunes on two shared CPUs: in a busy spell the old pick's rate read tonight can land
# inside the noise band (no "rate" reason) twice running; three reruns, not the tier's one.
@pytest.mark.flaky(reruns=3)
def test_fail_if_changed_flags_a_pick_that_differs_from_another_machines(out_dir, repo_cwd):
    """The nightly job: results from an old machine under the same --out, a re-tune here, exit 3."""
    args = ("tune", "--dataset", "tests/workloads.py:tiny", "--batch-size", "16", "--budget", "10",
            "--json", "--quiet", "--out", out_dir)
    first = invoke(*args, "--fail-if-changed")
    assert first.exit_code == 0, "nothing to compare with: not a change"
    data = strict_json(first.stdout)
    assert data["since"] is None
    # Make the result look like another machine's, with another pick at a tenth of the rate.
    with open(data["path"]) as fh:
        old = json.load(fh)
    os.unlink(data["path"])
    old["hardware"]["fingerprint"] = "old-machine"
    old["config"].update(num_workers=old["config"]["num_workers"] + 3, prefetch_factor=4, persistent_workers=True)
    old["samples_per_s"] = data["samples_per_s"] / 10
    os.makedirs(os.path.join(out_dir, "old-machine"))
    old_path = os.path.join(out_dir, "old-machine", os.path.basename(data["path"]))
    with open(old_path, "w") as fh:
        json.dump(old, fh)

    again = invoke(*args, "--fail-if-changed")
    assert again.exit_code == 3, (again.output, again.exception)
    since = strict_json(again.stdout)["since"]
    assert since["previous_path"] == old_path and since["previous_hardware"] == "old-machine"
    assert not since["same_hardware"] and since["changed"] and since["rate_shifted"], since
    assert "num_workers" in [c["setting"] for c in since["changes"]]
    with open(data["path"]) as fh:
        assert json.load(fh)["since"]["previous_hardware"] == "old-machine", "the saved result says it too"
    # Without the flag a change is reported, not an error; the table says it in one line.
    table = invoke(*args[:-4], "--out", out_dir, "--quiet")
    assert table.exit_code == 0, (table.output, table.exception)
    assert "since last" in table.stdout


def test_progress_lines_for_an_early_stopped_trial():
    """A trial stopped early has no interval (inf in memory): the line says so, not '±inf%'."""
    import io
    import math

    from autoloader import LoaderConfig, TrialResult
    from autoloader.events import TrialDone
    from autoloader.tuning.progress import ProgressPrinter

    stream = io.StringIO()
    printer = ProgressPrinter(stream)
    config = LoaderConfig.make(16, 2, False)
    for rel in (math.inf, None, 0.021):
        result = TrialResult(config, "ok", samples_per_s=1234.0, rel_interval=rel, wait_fraction=0.5)
        printer(TrialDone(1, 6, result, result, 3.0))
    failed = TrialResult(config, "failed", cause="dataset_error", error="boom")
    printer(TrialDone(2, 6, failed, None, 4.0))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4
    assert "inf" not in stream.getvalue()
    assert "1,234/s ±?" in lines[0] and "1,234/s ±?" in lines[1] and "1,234/s ±2%" in lines[2]
    assert "FAILED" in lines[3] and "boom" in lines[3]
    assert "gpu" not in stream.getvalue(), "no GPU utilisation was measured, so none is shown"
    on_gpu = TrialResult(config, "ok", samples_per_s=1234.0, rel_interval=0.02, wait_fraction=0.1, gpu_util=0.874)
    printer(TrialDone(3, 6, on_gpu, on_gpu, 5.0))
    assert "wait 10% gpu 87%" in stream.getvalue().splitlines()[-1]
