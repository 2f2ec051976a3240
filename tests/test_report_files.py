"""The report's files under bad folders (NOTE [ A report writes what it can ] in
autoloader/explain/page.py): a read-only or full folder, a folder where the page goes, a
``.plots`` that is a symbolic link out of --out; ``tune --report`` never fails the saved tune; a
dataset named ``<script>`` is text in the markdown twin as in the page; every malformed field the
issue found goes through the door before the report reads it."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from autoloader.cli import main
from autoloader.explain import explain
from autoloader.explain.page import render_html, render_markdown, report_paths, write_report
from autoloader.store.result import TuneResult

from conftest import REPO_ROOT
from explain_cases import synthetic_result
from scripts.faults import datasets as faulty

AUTOLOADER = os.path.join(os.path.dirname(sys.executable), "autoloader")
SCRIPT = "<script>alert(1)</script>"
needs_private_mount = pytest.mark.skipif(not faulty.private_shm_available(),
                                         reason="needs root and unshare for a private mount")


def stored(folder, name: str | None = None) -> tuple[str, dict]:
    path = os.path.join(str(folder), "synthetic-1x-16cpu-64g-00000000", "synthetic-n1000-0000000000.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = synthetic_result(path)
    if name is not None:
        data["dataset"] = {**(data.get("dataset") or {}), "name": name}
    with open(path, "w") as fh:
        json.dump(data, fh)
    return path, data


def test_the_markdown_twin_escapes_html_as_the_page_does(tmp_path):
    path, data = stored(tmp_path, SCRIPT)
    result = TuneResult.from_dict(data, path)
    explained = explain(result)
    page = render_html(result, explained, {})
    twin = render_markdown(result, explained, {})
    for text in (page, twin):
        assert SCRIPT not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "```python" in twin and "from torch.utils.data import DataLoader" in twin, "the code block as written"


def _untouched(path: str, data: dict) -> None:
    with open(path) as fh:
        assert json.load(fh) == data, "the result is untouched"


@pytest.mark.slow   # draws five plots
def test_a_plots_folder_that_links_out_of_out_is_not_followed(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    path, data = stored(out)
    paths = report_paths(path)
    os.symlink(elsewhere, paths["plots"])
    done = CliRunner().invoke(main, ["report", path])
    assert done.exit_code == 4, done.output
    assert os.listdir(elsewhere) == [], "nothing written through the link"
    assert os.path.islink(paths["plots"]), "the user's link is left as it was"
    assert "symbolic link" in done.output and "Traceback" not in done.output
    assert os.path.isfile(paths["html"]) and os.path.isfile(paths["markdown"])
    assert "could not be written" in open(paths["markdown"]).read(), "the twin says where the plots are"
    assert "![" not in open(paths["markdown"]).read()
    _untouched(path, data)


@pytest.mark.slow   # draws five plots
def test_a_folder_where_the_page_goes_is_said_and_the_rest_written(tmp_path):
    path, data = stored(tmp_path)
    paths = report_paths(path)
    os.makedirs(os.path.join(paths["html"], "inside"))
    done = CliRunner().invoke(main, ["report", path])
    assert done.exit_code == 4, done.output
    assert f"could not write the report page to {paths['html']}: a folder is there" in done.output
    assert os.path.isdir(os.path.join(paths["html"], "inside")), "the folder is left as it was"
    assert os.path.isfile(paths["markdown"]) and len(glob.glob(os.path.join(paths["plots"], "*.png"))) == 5
    _untouched(path, data)


@pytest.mark.slow   # draws five plots
def test_tune_report_with_the_page_a_folder_exits_as_the_tune_did(tmp_path, monkeypatch):
    """The tune is done and its result saved; a page that cannot be written is a warning, and the
    command exits 0 (it exited 1 after saving the result)."""
    import autoloader.cli as cli

    path, data = stored(tmp_path)
    os.makedirs(report_paths(path)["html"])
    monkeypatch.setattr(cli, "tune", lambda *args, **kwargs: TuneResult.from_dict(data, path))
    done = CliRunner().invoke(main, ["tune", "--dataset", "x:y", "--quiet", "--report", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert f"saved {path}" in done.stdout
    assert "report partly written" in done.stderr and "a folder is there" in done.stderr
    _untouched(path, data)


def _in_namespace(path: str, mount: str, *command: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``command`` in a private mount namespace where the result's folder is ``mount``ed first:
    "ro" (bind-mounted read-only) or "full" (a 1 MiB tmpfs holding the result, filled); and the
    result as it was in that folder after the command."""
    import shlex

    folder, parent = os.path.dirname(path), os.path.dirname(os.path.dirname(path))
    q = shlex.quote
    keep, after = os.path.join(parent, "keep.json"), os.path.join(parent, "after.json")
    if mount == "ro":
        setup = f"mount --bind {q(folder)} {q(folder)} && mount -o remount,bind,ro {q(folder)}"
    else:
        setup = (f"cp {q(path)} {q(keep)} && mount -t tmpfs -o size=1m tmpfs {q(folder)} && cp {q(keep)} {q(path)} && "
                 f"{q(sys.executable)} -c 'from scripts.faults.full_disk import fill; fill(\"{folder}\")'")
    inner = " ".join(q(c) for c in command)
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"{setup} && {{ {inner}; code=$?; cp {q(path)} {q(after)}; ls -A {q(folder)} >&2; "
                           "exit $code; }"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=180)
    with open(after) as fh:
        return done, json.load(fh)


@pytest.mark.slow   # draws five plots
@needs_private_mount
@pytest.mark.parametrize("mount, says", [("ro", "Read-only file system"), ("full", "free there")])
def test_a_read_only_or_full_folder_is_said_and_the_result_untouched(tmp_path, mount, says):
    path, data = stored(tmp_path)
    done, after = _in_namespace(path, mount, AUTOLOADER, "report", path)
    assert done.returncode == 4, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert "report not written" in done.stdout and says in done.stdout, done.stdout
    for what in ("the report page", "its markdown twin", "the plots"):
        assert what in done.stdout, what
    assert after == data, "the result is untouched"
    left = set(done.stderr.split("Fix:")[-1].split()) if mount == "ro" else set()
    assert not any(n.endswith((".html", ".md")) or n.startswith((".report-", ".tmp-")) for n in left), left


# The fields of the issue's report crash, each a record that must be refused at the door or
# explained: every one, through the command, with no traceback.
def _malformed(base: dict) -> dict[str, dict]:
    p, t = base["profile"], base["trials"][0]
    cases = {
        "profile={}": {"profile": {}}, "profile.cpus=0": {"profile": {**p, "cpus": 0}},
        "calibration=5": {"calibration": 5}, "finals=[{config: 5}]": {"finals": [{"config": 5}]},
        "profile.sample_s=[]": {"profile": {**p, "sample_s": []}},
        "profile.batch_size=-1": {"profile": {**p, "batch_size": -1}},
        "profile.recv_s=nan": {"profile": {**p, "recv_s": float("nan")}},
        "calibration.main=text": {"calibration": {**(base.get("calibration") or {}), "main": "x"}},
        "finals[0].rates=[text]": {"finals": [{**base["finals"][0], "rates": ["x"]}]},
        "trials[0].config=5": {"trials": [{**t, "config": 5}] + base["trials"][1:]},
        "trials[0].wait_fraction=7": {"trials": [{**t, "wait_fraction": 7}] + base["trials"][1:]},
        "inputs.timeline=[[5]]": {"inputs": {**(base.get("inputs") or {}), "timeline": [[5]]}},
        "inputs.max_memory=-1": {"inputs": {**(base.get("inputs") or {}), "max_memory": -1}},
        "rule=5": {"rule": 5}, "knee.curve=[5]": {"knee": {**(base.get("knee") or {}), "curve": [5]}},
        "memory=[5]": {"memory": [5]}, "model_error=[{}]": {"model_error": [{}]},
        "hardware.cpus=0": {"hardware": {**base["hardware"], "cpus": 0}},
    }
    return {label: {**copy.deepcopy(base), **change} for label, change in cases.items()}


@pytest.mark.slow   # the report of each that passes draws five plots
def test_the_issues_malformed_fields_never_crash_report(tmp_path):
    path, data = stored(tmp_path)
    cases = _malformed(data)
    assert len(cases) >= 16
    explained = 0
    for label, record in cases.items():
        with open(path, "w") as fh:
            json.dump(record, fh)
        done = CliRunner().invoke(main, ["report", path])
        assert done.exit_code in (0, 2), (label, done.output[-2000:])
        assert done.exception is None or isinstance(done.exception, SystemExit), (label, done.exception)
        assert "Traceback" not in done.output, label
        if done.exit_code == 2:
            assert "passes its checks" in done.output or "tune again" in done.output, (label, done.output)
            for aside in glob.glob(path + ".corrupt-*"):
                os.unlink(aside)
        else:
            explained += 1
    assert explained < len(cases), "most of them are refused at the door"
