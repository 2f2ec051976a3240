"""Every command fails clearly (issue 23, tracebacks and losses): bad input exits 2 with the rule,
the value and the fix, never a traceback, and nothing chosen is lost: best_loader on a full disk or
an unwritable folder, retune's reports, DataLoader arguments, show, dashboard, a result file that
widens its own limits, a registry that is not UTF-8, and the small ones (--out "", a string for a
dataset, --batch-sizes 16,,32, the folder a variable chose, two tunes of one problem at once).

Most are CliRunner or API calls that start no process; the ones that really tune are slow."""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT

from autoloader import UsageError, best_loader, stored_result, tune
from autoloader.cli import main
from autoloader.inputs.hardware import usable_cpus
from autoloader.search.policy import MAX_WORKERS_PER_CPU
from scripts.faults import datasets as faulty
from scripts.faults import full_disk
from scripts.faults.inputs import Small, registry_text, result_record, write_result

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
needs_private_mount = pytest.mark.skipif(not faulty.private_shm_available(),
                                         reason="needs root and unshare for a private tmpfs")


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def usage_error(result, *needles: str) -> str:
    """The CLI's stderr, once it is a usage error (exit 2, "Error: ... Fix: ...", no traceback)
    that holds every needle."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert "Error:" in result.stderr and "Fix:" in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"
    return result.stderr


def tune_args(out: str, *more: str) -> list[str]:
    return ["tune", "--dataset", "scripts.faults.datasets:tiny", "--batch-size", "16", "--budget", "10",
            "--device", "cpu", "--out", out, "--quiet", *more]


# --- 4. best_loader: a full disk, a folder it cannot write ---------------------------------------

@pytest.mark.slow
@needs_private_mount
@pytest.mark.heavy
def test_best_loader_on_a_full_disk_returns_the_loader_it_chose_and_warns(tmp_path):
    out = str(tmp_path / "out")
    run = full_disk.in_private_tmpfs("1m", out, 0, [sys.executable, "-m", "scripts.faults.inputs", "best_loader",
                                                    out], cwd=REPO_ROOT)
    assert run["returncode"] == 0, run["stderr"][-3000:]
    assert "Traceback" not in run["stderr"]
    loaded = json.loads(run["stdout"].strip().splitlines()[-1])
    assert loaded["batch_size"] == 16 and loaded["num_workers"] >= 0
    (said,) = [w for w in loaded["warnings"] if "not stored" in w]
    assert "could not save all of it" in said and "free there" in said and "tunes again" in said


@pytest.mark.parametrize("make, says", [
    (lambda base: os.symlink(os.path.join(base, "gone", "away"), os.path.join(base, "out")),
     "symbolic link to"),
    (lambda base: open(os.path.join(base, "out"), "w").close(), "it is a file"),
], ids=["dangling-symlink", "file-as-folder"])
def test_best_loader_with_a_results_folder_it_cannot_make_is_a_usage_error(tmp_path, make, says):
    make(str(tmp_path))
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        best_loader(Small(), batch_size=16, budget=10, device="cpu", out=str(tmp_path / "out"))
    message = str(caught.value)
    assert "the results folder must be a folder this run can make and write" in message and says in message
    assert str(tmp_path / "out") in message and "Fix:" in message and "pass --out" in message
    assert time.monotonic() - started < 10, "refused before any trial process"


def test_best_loader_under_a_file_is_a_usage_error_and_no_stored_result_warning(tmp_path):
    (tmp_path / "file").write_text("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # nothing is "ignored": there is no result under a file
        with pytest.raises(UsageError, match="a part of the path is not a folder"):
            best_loader(Small(), batch_size=16, budget=10, device="cpu", out=str(tmp_path / "file" / "out"))


@pytest.mark.slow
@needs_private_mount
def test_best_loader_on_a_read_only_folder_is_a_usage_error(tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    code = ("from autoloader import best_loader, UsageError\nfrom scripts.faults.inputs import Small\n"
            f"try:\n    best_loader(Small(), batch_size=16, budget=10, device='cpu', out={out!r})\n"
            "except UsageError as exc:\n    print(exc)\n")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o ro,size=1m tmpfs {out} && exec {sys.executable} -c \"$0\"", code],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "it is on a read-only file system" in done.stdout and "Fix: mount it writable" in done.stdout


# --- 5. retune: its reports -----------------------------------------------------------------------

def test_retune_with_reports_naming_a_file_exits_2_before_tuning(tmp_path):
    registry = tmp_path / "fleet.toml"
    registry.write_text(registry_text("scripts.faults.datasets:tiny"))
    (tmp_path / "reports").write_text("a file")
    result = invoke("retune", str(registry), "--out", str(tmp_path / "out"), "--reports", str(tmp_path / "reports"))
    usage_error(result, "the reports folder", "it is a file", "--reports")
    assert not os.path.exists(tmp_path / "out" / "retune") and faulty.find_study(str(tmp_path / "out")) is None, \
        "nothing tuned"


def test_a_retune_report_that_cannot_be_written_is_printed_and_exits_4(tmp_path, monkeypatch):
    from autoloader.fleet import retune

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(retune, "write_new", full)
    registry = tmp_path / "fleet.toml"
    registry.write_text(registry_text("nosuchmodule:data"))   # fails at once, without a trial process
    result = invoke("retune", str(registry), "--out", str(tmp_path / "out"))
    assert result.exit_code == 4, (result.output, result.exception)
    assert "Traceback" not in result.output
    assert result.stdout.startswith("# autoloader retune") and "nosuchmodule" in result.stdout, "the report is printed"
    assert "**the report could not be written** (exit 4)" in result.stdout
    assert "- this report is not stored: could not write the report to" in result.stdout
    assert "Error: could not write the report to" in result.stderr and "No space left on device" in result.stderr
    assert "Fix: free space there, or pass --reports DIR" in result.stderr
    as_json = invoke("retune", str(registry), "--out", str(tmp_path / "out"), "--json")
    assert as_json.exit_code == 4 and json.loads(as_json.stdout)["report_error"].startswith("could not write")


def test_two_retune_reports_of_the_same_second_keep_both(tmp_path):
    from autoloader.fleet.retune import RetuneReport, write
    from autoloader.search.policy import Thresholds

    folder = str(tmp_path / "reports")
    reports = [RetuneReport(f"/r/fleet-{n}.toml", "2026-12-01T00:00:00+00:00", "2026-12-01T00:00:09+00:00",
                            {"fingerprint": "box"}, Thresholds(), (), "/out") for n in (1, 2)]
    first, second = (write(report, folder) for report in reports)
    assert first.write_error is None and second.write_error is None
    assert first.paths["json"] != second.paths["json"] and first.paths["markdown"] != second.paths["markdown"]
    assert os.path.basename(second.paths["json"]) == "20261201T000000Z-2.json"
    for report, written in zip(reports, (first, second)):
        data = json.load(open(written.paths["json"]))
        assert data["registry"] == report.registry and data["report"]["json"] == written.paths["json"]
        assert report.registry in open(written.paths["markdown"]).read()
    assert json.load(open(os.path.join(folder, "latest.json")))["registry"] == "/r/fleet-2.toml"


def test_a_dated_name_is_claimed_once_by_writers_racing_for_it(tmp_path):
    from autoloader.store.durable import write_new

    folder = str(tmp_path)
    claimed, barrier = [], threading.Barrier(4)

    def writer(n: int) -> None:
        barrier.wait()
        claimed.append(write_new(folder, "stamp", (".json", ".md"), lambda paths: {".json": str(n), ".md": str(n)}))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = sorted(os.path.basename(c[".json"]) for c in claimed)
    assert names == ["stamp-2.json", "stamp-3.json", "stamp-4.json", "stamp.json"]
    assert sorted(open(c[".json"]).read() for c in claimed) == ["0", "1", "2", "3"], "each kept its own"
    assert not [f for f in os.listdir(folder) if f.startswith(".tmp-")]


@pytest.mark.slow
@needs_private_mount
@pytest.mark.heavy
def test_retune_on_a_full_disk_prints_its_report_and_keeps_the_picks(tmp_path):
    registry = tmp_path / "fleet.toml"
    registry.write_text(registry_text("scripts.faults.datasets:tiny"))
    out = str(tmp_path / "out")
    run = full_disk.in_private_tmpfs("1m", out, 0, [AUTOLOADER, "retune", str(registry), "--out", out, "--quiet"],
                                     cwd=REPO_ROOT)
    assert run["returncode"] == 4, run["stderr"][-3000:]
    assert "Traceback" not in run["stderr"]
    assert run["stdout"].startswith("# autoloader retune"), "the report reaches stdout"
    assert "bs=16 w=" in run["stdout"], "the dataset's pick is in it though it could not be stored"
    assert "Error: could not write the report to" in run["stderr"] and "free there" in run["stderr"]


# --- 6. DataLoader arguments ------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, says", [
    ({"nonsense_kw": 1}, "['nonsense_kw']"),
    ({"drop_lats": True}, "did you mean drop_last?"),
    ({"drop_last": "yes"}, "drop_last is True or False"),
    ({"timeout": -1}, "timeout is a number of seconds, 0 or more"),
    ({"batch_sampler": 3}, "batch_sampler is a Sampler"),
    ({"sampler": 3}, "sampler is a Sampler"),
    ({"collate_fn": "stack"}, "collate_fn is a function"),
    ({"shuffle": "no"}, "shuffle is True, False or None"),
    ({"multiprocessing_context": "fork-ish"}, "start method of this platform"),
    ({"batch_sampler": [[0, 1]]}, "batch_sampler makes the batches itself"),
    ({"num_workers": 2}, "num_workers is what autoloader tunes"),
], ids=["unknown", "typo", "drop-last-text", "timeout-negative", "batch-sampler-int", "sampler-int",
        "collate-text", "shuffle-text", "start-method", "batch-sampler-with-a-batch-size", "tuned"])
def test_a_dataloader_argument_it_would_refuse_is_a_usage_error_before_any_process(tmp_path, kwargs, says):
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        tune(Small(), batch_size=16, budget=10, device="cpu", out=str(tmp_path / "out"), **kwargs)
    assert says in str(caught.value) and "Fix:" in str(caught.value)
    assert time.monotonic() - started < 5 and not (tmp_path / "out").exists(), "no trial process, nothing written"


def test_a_registrys_bad_dataloader_options_exit_2(tmp_path):
    registry = tmp_path / "fleet.toml"
    registry.write_text(registry_text("scripts.faults.datasets:tiny", 'options = { drop_last = "yes" }'))
    usage_error(invoke("retune", str(registry), "--out", str(tmp_path / "out")), "datasets[0].options",
                "drop_last is True or False")
    registry.write_text(registry_text("scripts.faults.datasets:tiny", "options = { nonsense_kw = 1 }"))
    usage_error(invoke("retune", str(registry), "--out", str(tmp_path / "out")), "nonsense_kw")
    assert not (tmp_path / "out").exists()


def test_a_loader_a_trial_cannot_build_is_a_failure_about_the_argument_not_a_crash():
    """What only DataLoader itself refuses (the driver's checks bypassed here): the trial process's
    set-up says so as a usage error, and a trial returns it as a result naming the argument."""
    from autoloader.inputs.source import Source
    from autoloader.probe.protocol import RunnerSetup, SetupError
    from autoloader.probe.trial import _Runner
    from autoloader.search.policy import BurstSettings
    from autoloader.search.results import LOADER_ARGUMENTS
    from autoloader.search.space import LoaderConfig

    setup = RunnerSetup(Source.from_object(Small(), "dataset"), None, "cpu", {"drop_last": "yes"}, 16)
    runner = _Runner(setup)
    with pytest.raises(SetupError) as caught:
        runner._check_loader()
    assert caught.value.usage and "drop_last" in str(caught.value) and "Fix:" in str(caught.value)
    result = runner.measure(LoaderConfig.make(16, 0, False), BurstSettings())
    assert result.status == "failed" and result.cause == LOADER_ARGUMENTS
    assert "drop_last should be a boolean value" in result.error
    # A start method is given for the workers: a loader without workers is built without it.
    spawn = _Runner(RunnerSetup(setup.dataset, None, "cpu", {"multiprocessing_context": "spawn"}, 16))
    spawn._check_loader()
    assert spawn._loader(LoaderConfig.make(16, 2, False)).multiprocessing_context is not None


@pytest.mark.slow
def test_what_only_dataloader_refuses_ends_the_run_at_set_up_as_a_usage_error(tmp_path):
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:   # an IterableDataset takes no shuffle
        tune(faulty.TinyStream(), batch_size=16, budget=10, device="cpu", out=str(tmp_path / "out"), shuffle=True)
    assert "must build a DataLoader" in str(caught.value) and "shuffle" in str(caught.value)
    assert time.monotonic() - started < 60, "one set-up, no trial, no crash tried twice"


# --- 7. show ------------------------------------------------------------------------------------------

MALFORMED = {
    "dataset-text": {"dataset": "images"},
    "trials-a-number": {"trials": 3},
    "fingerprint-a-number": {"hardware": {"fingerprint": 7, "cpus": 2}},
    "fingerprint-none": {"hardware": {"fingerprint": None, "cpus": 2}},
    "key-empty": {"dataset_key": ""},
    "rate-infinite": {"samples_per_s": float("inf")},
    "rate-boolean": {"samples_per_s": True},
    "workers-boolean": {"config": {"batch_size": 16, "num_workers": True, "pin_memory": False}},
    "cpus-infinite": {"hardware": {"fingerprint": "box-0x-2cpu", "cpus": float("inf")}},
    "early-stop-text": {"early_stop": "yes"},
}


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
def test_show_checks_what_it_lists(tmp_path, change):
    out = str(tmp_path / "out")
    good = write_result(out, result_record())
    bad = write_result(out, result_record(**change), fingerprint="other-0x-2cpu", key="bad")
    again = write_result(out, result_record(**change), fingerprint="other-0x-2cpu", key="again")
    with open(good) as fh:
        kept = fh.read()
    with open(bad) as fh:
        damaged = fh.read()
    shown = invoke("show", bad)
    usage_error(shown, "passes its checks", "not an autoloader result", bad)
    assert f"Warning: ignored the stored result {bad}" in shown.stderr and "left as it is" in shown.stderr
    assert "set aside" not in shown.stderr and not glob.glob(bad + ".corrupt-*"), "a read never writes"
    with open(bad) as fh:
        assert fh.read() == damaged, "left where it is, as it was"
    listed = invoke("show", "--out", out)
    assert listed.exit_code == 0 and "Traceback" not in listed.output, listed.output
    assert "ds-n256-0123456789" in listed.stdout and "1,000 samples/s" in listed.stdout, "the good one is listed"
    assert listed.stdout.count("samples/s") == 1 and f"ignored the stored result {again}" in listed.stderr
    assert f"ignored the stored result {bad}" in listed.stderr and os.path.isfile(bad) and os.path.isfile(again)
    assert invoke("show", good).exit_code == 0
    with open(good) as fh:
        assert fh.read() == kept, "the good file untouched"


def test_show_tells_keys_of_one_dataset_class_apart(tmp_path):
    """Four ImageFolder keys on one machine: each names its dataset as given, its step (its
    identity), the date it was tuned and its rate; a result older than the step's record says so."""
    out = str(tmp_path / "out")
    given = [("data.py:make", "data.make_step#0a1b2c3d4e5f", "data.py:make_step", "2026-12-01T10:00:00+00:00", 5.3),
             ("data.py:make_small", "data.make_step#0a1b2c3d4e5f", "data.py:make_step", "2026-12-02T10:00:00+00:00",
              7.14),
             ("train.make", "train.Step#99aa88bb77cc", "train.Step", "2026-12-03T10:00:00+00:00", 1234.0),
             ("torchvision.datasets.folder.ImageFolder", None, None, "2026-12-04T10:00:00+00:00", 0.42)]
    keys = []
    for i, (spec, identity, step, when, rate) in enumerate(given):
        key = f"ImageFolder-n2000-{i:010d}"
        keys.append(key)
        write_result(out, result_record(
            dataset_key=key, finished_at=when, samples_per_s=rate,
            dataset={"name": spec, "class": "torchvision.datasets.folder.ImageFolder", "length": 2000,
                     "content": "abc", "version": None},
            inputs={"step": step, "step_identity": identity, "allow_reorder": False, "max_memory": None,
                    "shm_free": None, "timeline": []}))
    old = result_record(dataset_key="ImageFolder-n2000-old0000000")   # no inputs: written before they were
    write_result(out, old)
    listed = invoke("show", "--out", out)
    assert listed.exit_code == 0, listed.output
    blocks = {b.split("\n", 1)[0].strip(): b for b in re.split(r"\n(?=  \S)", listed.stdout.split("\n", 1)[1])}
    assert sorted(blocks) == sorted(keys + [old["dataset_key"]])
    assert "dataset data.py:make (ImageFolder), step data.make_step#0a1b2c3d4e5f, on cpu" in blocks[keys[0]]
    assert "5.3 samples/s, tuned 2026-12-01T10:00:00+00:00" in blocks[keys[0]]
    assert "dataset data.py:make_small (ImageFolder)" in blocks[keys[1]] and "7.14 samples/s, tuned 2026-12-02" in blocks[keys[1]]
    assert "step train.Step#99aa88bb77cc" in blocks[keys[2]] and "1,234 samples/s, tuned 2026-12-03" in blocks[keys[2]]
    assert "dataset torchvision.datasets.folder.ImageFolder, no step, on cpu" in blocks[keys[3]]
    assert "0.42 samples/s" in blocks[keys[3]]
    assert "dataset ds, step not recorded, on cpu" in blocks[old["dataset_key"]]
    assert len({b.split("\n", 2)[1] for b in blocks.values()}) == len(blocks), "each key's second line differs"
    one = invoke("show", os.path.join(out, "box-0x-2cpu", keys[0] + ".json"))
    assert "step                 data.make_step#0a1b2c3d4e5f (given as data.py:make_step)" in one.stdout, one.stdout


def test_show_with_a_storage_that_is_not_there_makes_no_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    usage_error(invoke("show", "--out", str(tmp_path / "out"), "--storage", "sqlite:///new.db"),
                "must name a storage that exists", "'sqlite:///new.db'")
    assert not (tmp_path / "new.db").exists()


@pytest.mark.slow   # each storage Optuna cannot open is tried three times (store/storage.py)
def test_show_with_a_storage_it_cannot_read_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out")
    usage_error(invoke("show", "--out", out, "--storage", "bogus://x"), "'bogus://x'", "--storage")
    usage_error(invoke("show", "--out", out, "--storage", "notaurl"), "'notaurl'")
    (tmp_path / "garbage.db").write_bytes(b"not a database" * 100)
    usage_error(invoke("show", "--out", out, "--storage", "sqlite:///garbage.db"), "not a database")


# --- 8. dashboard ------------------------------------------------------------------------------------

@pytest.fixture
def dashboard_extra():
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")


def _study_file(path: str, name: str) -> None:
    import optuna

    os.makedirs(os.path.dirname(path), exist_ok=True)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{path}", direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=1.0))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("args, says", [
    (["--port", "99999"], "--port is a TCP port from 1 to 65535 (got 99999)"),
    (["--port", "-1"], "(got -1)"),
    (["--port", "0"], "(got 0)"),
    (["--host", "no.such.host.invalid"], "--host must be a name or address"),
    (["--host", "192.0.2.1"], "--host must be an address of this machine"),
    (["--storage", "sqlite:///no/such.db"], "must name a storage that exists"),
], ids=["port-high", "port-negative", "port-zero", "host-unknown", "host-not-here", "storage-missing"])
def test_the_dashboard_refuses_what_it_cannot_serve(tmp_path, dashboard_extra, args, says):
    """Checked before anything is served: no server is left running by a test that passes."""
    port = [] if "--port" in args else ["--port", str(_free_port())]
    usage_error(invoke("dashboard", "--out", str(tmp_path / "out"), *port, *args), says)


@pytest.mark.slow   # a storage Optuna cannot open is tried three times (store/storage.py)
def test_the_dashboard_refuses_a_storage_it_cannot_open(tmp_path, dashboard_extra):
    usage_error(invoke("dashboard", "--storage", "bogus://x", "--port", str(_free_port())), "'bogus://x'",
                "--storage")


def test_the_dashboard_refuses_a_port_in_use(tmp_path, dashboard_extra):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        usage_error(invoke("dashboard", "--out", str(tmp_path / "out"), "--port", str(port)),
                    f"--port must be one no other program listens on at 127.0.0.1 (got {port})", "pass another")


@pytest.mark.slow   # three SQLite studies made, opened and copied
def test_one_unreadable_study_does_not_stop_the_dashboard_serving_the_others(tmp_path, dashboard_extra):
    import optuna

    from autoloader.fleet import dashboard

    out = tmp_path / "out"
    _study_file(str(out / "hwA" / "a.db"), "hwA/a")
    _study_file(str(out / "hwB" / "b.db"), "hwB/b")
    (out / "hwC").mkdir()
    (out / "hwC" / "c.db").write_bytes(os.urandom(40000))
    with pytest.warns(dashboard.StudySkipped, match=r"leaves out the study .*hwC/c\.db: it cannot be read"):
        served = dashboard.storage_to_serve(str(out), None)
    assert sorted(optuna.study.get_all_study_names(served.storage)) == ["hwA/a", "hwB/b"]
    assert "snapshot of the 2 studies" in served.description
    (out / "hwA" / "a.db").write_bytes(b"x" * 5000)
    (out / "hwB" / "b.db").write_bytes(b"x" * 5000)
    with pytest.warns(dashboard.StudySkipped):
        with pytest.raises(UsageError, match="needs a study it can read"):
            dashboard.storage_to_serve(str(out), None)


# --- 9. a result file bounded by this machine and its key ----------------------------------------

def _stored_here(out: str, dataset, **changes) -> str:
    """``result_record(**changes)`` stored where ``stored_result(dataset, batch_size=16)`` looks."""
    from autoloader.api import built_problem

    problem = built_problem(dataset, dataset, batch_size=16, device="cpu")
    record = result_record(dataset_key=problem.key, **changes)
    return write_result(out, record, fingerprint=problem.hardware.fingerprint)


def test_a_result_file_cannot_widen_its_own_limits(tmp_path):
    out, dataset = str(tmp_path / "out"), Small()
    _stored_here(out, dataset)
    assert stored_result(dataset, batch_size=16, device="cpu", out=out).config.num_workers == 1, "a sound one is used"
    past = MAX_WORKERS_PER_CPU * usable_cpus() + 1
    path = _stored_here(out, dataset, hardware={"fingerprint": "box-0x-2cpu", "cpus": 200},
                        config={"batch_size": 16, "num_workers": past, "pin_memory": False, "prefetch_factor": 2})
    with pytest.warns(UserWarning, match=f"ignored the stored result {path}: config.num_workers is {past}"):
        assert stored_result(dataset, batch_size=16, device="cpu", out=out) is None
    path = _stored_here(out, dataset, config={"batch_size": 999999, "num_workers": 1, "pin_memory": False,
                                              "prefetch_factor": 2})
    with pytest.warns(UserWarning, match="batch_size is 999999, not one of the batch sizes its key was tuned for"):
        assert stored_result(dataset, batch_size=16, device="cpu", out=out) is None


# --- 10. a registry that is not UTF-8 -------------------------------------------------------------------

def test_a_registry_that_is_not_utf8_exits_2(tmp_path):
    registry = tmp_path / "fleet.toml"
    registry.write_bytes(registry_text("scripts.faults.datasets:tiny").encode() + b'name = "caf\xe9"\n')
    usage_error(invoke("retune", str(registry), "--out", str(tmp_path / "out")), "must be readable TOML",
                "UTF-8", str(registry))


# --- 13. the small ones -----------------------------------------------------------------------------------

def test_an_empty_out_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    usage_error(invoke(*tune_args("")), "--out (out=) names the folder", "(got '')")
    usage_error(invoke("show", "--out", ""), "(got '')")
    assert os.listdir(tmp_path) == []


def test_a_dataset_that_is_a_string_is_refused(tmp_path):
    module = tmp_path / "paths.py"
    module.write_text('TRAIN = "/data/train"\n')
    with pytest.raises(UsageError, match=r"not text .*str '/data/train'"):
        best_loader(f"{module}:TRAIN", batch_size=16, budget=10, device="cpu", out=str(tmp_path / "out"))


def test_an_empty_batch_size_in_the_list_is_refused(tmp_path):
    usage_error(invoke("tune", "--dataset", "scripts.faults.datasets:tiny", "--batch-sizes", "16,,32",
                       "--out", str(tmp_path)), "none of them empty", "'16,,32'")


@pytest.mark.parametrize("variable", ["AUTOLOADER_HOME", "XDG_CACHE_HOME"])
def test_a_folder_a_variable_chose_is_named_in_the_fix(tmp_path, variable):
    (tmp_path / "file").write_text("x")
    env = {"AUTOLOADER_HOME": str(tmp_path / "file" / "home")} if variable == "AUTOLOADER_HOME" else \
        {"AUTOLOADER_HOME": None, "XDG_CACHE_HOME": str(tmp_path / "file")}
    result = invoke("tune", "--dataset", "scripts.faults.datasets:tiny", "--quiet", env=env)
    usage_error(result, f"${variable}", "or pass --out")
    given = invoke(*tune_args(str(tmp_path / "file" / "out")))
    assert "$" not in usage_error(given, "pass --out"), "a folder --out named names no variable"


def test_a_lock_is_reentrant_in_its_thread_and_waited_for_by_another(tmp_path):
    from autoloader.store.paths import held

    path, order, waited = str(tmp_path / "k.lock"), [], threading.Event()

    def other() -> None:
        with held(path, on_wait=lambda holder: waited.set()):
            order.append("other")

    with held(path):
        with held(path):   # best_loader around the run that takes it too: no deadlock
            thread = threading.Thread(target=other)
            thread.start()
            assert waited.wait(5), "the other thread was told it waits"
            order.append("first")
    thread.join(5)
    assert order == ["first", "other"]


@pytest.mark.slow
@pytest.mark.heavy
def test_two_cli_tunes_of_one_problem_take_turns(tmp_path):
    import optuna

    from autoloader.store import runs

    out = str(tmp_path / "out")
    command = [AUTOLOADER, *[a for a in tune_args(out, "--json") if a != "--quiet"]]   # it says when it waits
    first = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = [p.communicate(timeout=240) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [e[-1500:] for _, e in done]
    assert sum(bool(re.search(r"another process( \(pid \d+\))? is tuning", e)) for _, e in done) == 1, "the later one said it waited"
    db = json.loads(done[0][0])["path"][:-len(".json")] + ".db"
    study = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{db}")[0], storage=f"sqlite:///{db}")
    spans = {}
    for trial in study.get_trials(deepcopy=False):
        run = trial.user_attrs.get(runs.RUN_ATTR)
        start, end = trial.datetime_start, trial.datetime_complete or trial.datetime_start
        low, high = spans.get(run, (start, end))
        spans[run] = (min(low, start), max(high, end))
    (a, b) = sorted(spans.values())
    assert a[1] <= b[0], f"the runs' trials overlap: {spans}"
