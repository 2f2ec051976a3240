"""The result record (store/result.py): every format the project has written reads back from the
fixtures (tests/fixtures/results/, real files of each era), keeps what it held, and a result
written today reads back to the same bytes. Unit tests: no trial runs."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import warnings

import pytest

from autoloader.search.profile import Profile
from autoloader.search.results import TrialResult
from autoloader.search.codec import InvalidRecord
from autoloader.store.records import Comparison, NodeRecord
from autoloader.store.door import load_result
from autoloader.store.result import SUMMARY, TuneResult
from autoloader.errors import StoredStateWarning

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "results")
RESULTS = sorted(glob.glob(os.path.join(FIXTURES, "format*.json")))
TODAY = os.path.join(FIXTURES, "format2-since-os-error-20261202.json")
# Written once, no longer: an unused count of the warm start's priors.
DROPPED = {"priors"}
# Renamed: read under either name, written under the new (NOTE [ Result formats ]).
RENAMED = {"control": "rule", **{f"control{f}": f"rule{f}" for f in (
    "_samples_per_s", "_ratio", "_ratio_interval", "_ratio_rounds")}}


def fixture(path: str):
    with open(path) as fh:
        return json.load(fh)


def changed(before, after, at="") -> list[str]:
    """Where ``after`` lost or changed what ``before`` held (what it adds is not a change)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key, value in before.items():
            key_now = RENAMED.get(key, key)
            if key_now in after and key_now not in before:
                out += changed(value, after[key_now], f"{at}.{key_now}")
            elif key not in after:
                out += [] if key in DROPPED else [f"{at}.{key} dropped"]
            else:
                out += changed(value, after[key], f"{at}.{key}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [c for i, (x, y) in enumerate(zip(before, after)) for c in changed(x, y, f"{at}[{i}]")]
    return [] if before == after else [f"{at}: {before!r} -> {after!r}"]


def test_the_fixtures_hold_each_era():
    names = {os.path.basename(p) for p in RESULTS}
    assert len(names) == 6
    eras = [fixture(p) for p in RESULTS]
    assert any("profile" not in e for e in eras) and any("profile" in e and "format" not in e for e in eras)
    assert any("priors" in e for e in eras) and any("threads" in e for e in eras)
    assert any(e.get("since") for e in eras), "one holds a comparison"


@pytest.mark.parametrize("path", RESULTS, ids=[os.path.basename(p)[:-5] for p in RESULTS])
def test_every_format_the_project_wrote_loads_and_keeps_what_it_held(path, tmp_path):
    data = fixture(path)
    result = TuneResult.from_dict(data)
    assert result.config.loader_kwargs() == {k: v for k, v in data["config"].items()}
    assert result.samples_per_s == data["samples_per_s"] and result.dataset_key == data["dataset_key"]
    assert [t.to_dict()["config"]["num_workers"] for t in result.trials] == \
        [t["config"]["num_workers"] for t in data["trials"]]
    assert [f.rates for f in result.finals] == [tuple(f["rates"]) for f in data["finals"]]
    if data.get("profile"):
        assert result.profile == Profile.from_dict(data["profile"])
    assert result.trials == tuple(TrialResult.from_dict(t) for t in data["trials"])
    # Read back and written again: everything the file held is still there, the same (the
    # fields it did not have are added, absent), but for what is no longer written.
    again = result.to_dict()
    assert changed(data, again) == []
    assert not {k for k in again if k.startswith("control")} and "control" not in (again.get("memory") or {})
    assert TuneResult.from_dict(again) == result
    # Through the door, as a file: the same record, with where it came from.
    copy = tmp_path / "result.json"
    copy.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoredStateWarning)
        loaded = load_result(str(copy), batch_sizes=(result.config.batch_size,))
    assert loaded == dataclasses.replace(result, where=str(copy)) and copy.exists()


def test_a_result_written_today_reads_back_to_the_same_record_and_the_same_bytes():
    data = fixture(TODAY)
    result = TuneResult.from_dict(data)
    written = result.to_dict()
    # The fixture was written before the stream's and the page kinds' fields existed: reading it
    # loses and changes nothing, and what is written now reads back to the same bytes.
    assert changed(data, written) == []
    assert json.dumps(TuneResult.from_dict(written).to_dict(), indent=2, default=str) == \
        json.dumps(written, indent=2, default=str)
    assert result.since is not None and result.since.load is not None and result.load is not None
    since = result.since.to_dict()
    # Written before the comparison's intervals: those read back empty, the rest as written.
    assert {k: v for k, v in since.items() if k in data["since"]} == data["since"]
    assert {k: since[k] for k in set(since) - set(data["since"])} == {
        "rate_interval": None, "pick_interval": None, "rounds": 0, "undecided": None}
    assert result.provenance.finished_at == data["finished_at"]
    assert result.hardware.fingerprint == data["hardware"]["fingerprint"]
    assert result.measured_differently() is None and not result.partial


def test_a_runs_mark_is_the_partial_record():
    summary = fixture(os.path.join(FIXTURES, "mark-summary-20261202.json"))
    mark = TuneResult.from_dict(summary, "sqlite:///x.db#hw/key", partial=True)
    assert mark.partial and mark.trials == () and mark.profile is None and mark.where == "sqlite:///x.db#hw/key"
    assert mark.to_dict() == summary and list(summary) == list(SUMMARY)
    full = TuneResult.from_dict(fixture(TODAY))
    assert full.summary().to_dict() == {k: full.to_dict().get(k) for k in SUMMARY}
    assert TuneResult.from_dict(full.summary().to_dict(), partial=True) == full.summary()


def test_a_comparison_of_every_format_reads_back():
    for data in fixture(os.path.join(FIXTURES, "drift-pick-rate-20261201.json")):
        found = Comparison.from_dict(data, "since")
        assert found.pick_rate_before == data["pick_rate_before"] and found.status == data["status"]
        assert found.to_dict()["samples_per_s_before"] == data["pick_rate_before"]
        assert [c.setting for c in found.changes] == [c["setting"] for c in data["changes"]]
        assert Comparison.from_dict(found.to_dict()) == found


def test_a_nodes_result_reads_back():
    node = NodeRecord(2, 16, 8, 2**30)
    result = dataclasses.replace(TuneResult.from_dict(fixture(TODAY)), node=node)
    data = result.to_dict()
    assert data["node"]["ranks"] == 2 and "per rank" in data["node"]["config"]
    assert TuneResult.from_dict(data) == result and result.ranks == 2
    assert result.rule_samples_per_s == 2 * TuneResult.from_dict(fixture(TODAY)).rule_samples_per_s
    with pytest.raises(InvalidRecord, match="node.ranks is 0"):
        TuneResult.from_dict({**data, "node": {**node.to_dict(), "ranks": 0}})


@pytest.mark.parametrize("change, says", [
    ({"trials": [5]}, r"trials\[0\] is 5, not a mapping"),
    ({"profile": {}}, "profile.batch_size is None"),
    ({"calibration": 5}, "calibration is 5, not a mapping"),
    ({"finals": [{"config": 5}]}, r"finals\[0\].config is 5, not a mapping"),
    ({"finished_at": "../../x"}, "finished_at is '../../x', not a time"),
    ({"since": {"status": "fine"}}, "since.status is 'fine'"),
    ({"model_error": [{"config": "x", "predicted": 1.0, "measured": 0}]}, r"model_error\[0\].measured is 0"),
], ids=["trials", "profile", "calibration", "finals", "finished-at", "since", "model-error"])
def test_a_bad_field_is_named_with_its_place(change, says):
    profile = fixture(TODAY)["profile"]
    data = {**fixture(TODAY), **change}
    if "profile" in change:
        assert set(profile) - set(change["profile"])
    with pytest.raises(InvalidRecord, match=says):
        TuneResult.from_dict(data)


def test_the_profile_and_the_pick_are_bounded_by_this_machine_and_the_problem():
    data = fixture(TODAY)
    cpus = data["hardware"]["cpus"]
    with pytest.raises(InvalidRecord, match="profile.cpus is 0"):
        TuneResult.from_dict({**data, "profile": {**data["profile"], "cpus": 0}})
    many = {**data["trials"][0], "config": {**data["trials"][0]["config"], "num_workers": 4 * cpus + 1}}
    with pytest.raises(InvalidRecord, match=r"trials\[0\].config.num_workers"):
        TuneResult.from_dict({**data, "trials": [many]})
    with pytest.raises(InvalidRecord, match="batch_size is 16, not one of the batch sizes"):
        TuneResult.from_dict(data, batch_sizes=(32,))
