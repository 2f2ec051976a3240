"""A command that reads never writes: every read command pointed at files that are not autoloader's
(a text file, a folder of a project's JSON, an application's SQLite database) leaves every byte and
every name as it was (NOTE [ A bad result file ] in store/door.py, NOTE [ A reader opens a study
read-only ] in store/durable.py)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3

import pytest
from click.testing import CliRunner

from autoloader.cli import main
from scripts.faults.inputs import result_record, write_result
from scripts.faults.issue50 import decoys, tree

KEY = result_record()["dataset_key"]
FINGERPRINT = result_record()["hardware"]["fingerprint"]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def untouched(root, before: dict[str, str], done, *needles: str) -> None:
    assert "Traceback" not in done.output and (done.exception is None or isinstance(done.exception, SystemExit)), \
        (done.output[-2000:], done.exception)
    for needle in needles:
        assert needle in done.output, (needle, done.output)
    assert tree(str(root)) == before, "every byte and name as it was"


@pytest.mark.parametrize("which", ["text", "package", "db"])
def test_show_file_refuses_what_is_not_a_result_and_leaves_it(tmp_path, which):
    paths = decoys(str(tmp_path))
    before = tree(str(tmp_path))
    done = invoke("show", paths[which])
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "not an autoloader result")


def test_show_file_refuses_a_result_away_from_its_own_path(tmp_path):
    """A good result copied into a project folder is not at ``<hardware>/<key>.json``: refused."""
    paths = decoys(str(tmp_path))
    copy = os.path.join(os.path.dirname(paths["package"]), "result.json")
    with open(copy, "w") as fh:
        json.dump(result_record(), fh)
    before = tree(str(tmp_path))
    done = invoke("show", copy)
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "not an autoloader result at its own path", f"{FINGERPRINT}/{KEY}.json")


@pytest.mark.parametrize("args", [["show", "--out"], ["show", "--json", "--out"]], ids=["show--out", "show--json"])
def test_show_out_lists_around_a_projects_json_and_leaves_it(tmp_path, args):
    paths = decoys(str(tmp_path))
    good = write_result(str(tmp_path), result_record())
    damaged = write_result(str(tmp_path), result_record(samples_per_s="fast"), key="damaged")
    before = tree(str(tmp_path))
    done = invoke(*args, str(tmp_path))
    assert done.exit_code == 0, done.output
    untouched(tmp_path, before, done, KEY, f"ignored the stored result {paths['package']}",
              f"ignored the stored result {damaged}: samples_per_s", "left as it is")
    assert "set aside as" not in done.output and os.path.isfile(good)


def test_show_storage_refuses_an_application_database_untouched(tmp_path):
    paths = decoys(str(tmp_path))
    before = tree(str(tmp_path))
    done = invoke("show", "--out", str(tmp_path / "empty"), "--storage", f"sqlite:///{paths['db']}")
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "not a study", "users")
    connection = sqlite3.connect(f"file:{paths['db']}?mode=ro", uri=True)
    tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    connection.close()
    assert tables == ["users"], "no Optuna table written into it"


def test_show_storage_of_a_missing_file_makes_none(tmp_path):
    before = tree(str(tmp_path))
    done = invoke("show", "--out", str(tmp_path), "--storage", f"sqlite:///{tmp_path / 'nothing.db'}")
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "exists")


@pytest.mark.parametrize("which", ["text", "package"])
def test_report_file_refuses_what_is_not_a_result_and_leaves_it(tmp_path, which):
    paths = decoys(str(tmp_path))
    before = tree(str(tmp_path))
    done = invoke("report", paths[which])
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "not an autoloader result")


def test_report_key_out_leaves_a_projects_files_alone(tmp_path):
    paths = decoys(str(tmp_path))
    write_result(str(tmp_path), result_record())
    before = tree(str(tmp_path))
    done = invoke("report", KEY, "--out", str(tmp_path))
    assert done.exit_code in (0, 2), done.output
    after = tree(str(tmp_path))
    # The report's own files, beside the result, are autoloader's: every other name is as it was.
    ours = os.path.join(FINGERPRINT, KEY)
    assert {k: v for k, v in after.items() if not k.startswith(ours + ".")} == \
        {k: v for k, v in before.items() if not k.startswith(ours + ".")}
    untouched(tmp_path, after, done, f"ignored the stored result {paths['package']}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_out_leaves_an_application_database_untouched(tmp_path):
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    paths = decoys(str(tmp_path))
    before = tree(str(tmp_path))
    done = invoke("dashboard", "--out", str(tmp_path), "--port", str(_free_port()))
    assert done.exit_code == 2
    untouched(tmp_path, before, done, f"leaves out {paths['db']}: not a study")


def test_dashboard_storage_refuses_an_application_database_untouched(tmp_path):
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    paths = decoys(str(tmp_path))
    before = tree(str(tmp_path))
    done = invoke("dashboard", "--storage", f"sqlite:///{paths['db']}", "--port", str(_free_port()))
    assert done.exit_code == 2
    untouched(tmp_path, before, done, "not a study")
