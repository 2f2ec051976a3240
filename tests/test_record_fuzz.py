"""A real result, every field of it mutated (wrong type, missing, NaN, negative, huge, nested
wrong), and each reader run on each (NOTE [ A bad result file ] in store/door.py): ``load_result``,
``show``, the report's builder, a retune's comparison with the previous result, the warm start,
and the dashboard's notes of the runs' marks. None raises; a bad file is warned about by name and
field and set aside beside itself, never lost; the good file beside it is never touched. Fast by
default (the readers called directly, the CLI and the report on a sample); the slow tests take
every case through every reader, and really tune after a corrupted result."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import warnings
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT

from autoloader.cli import main
from autoloader.errors import UsageError
from autoloader.explain import explain
from autoloader.explain.page import render_html, render_markdown
from autoloader.fleet import show
from autoloader.fleet.retune import warm_plan
from autoloader.inputs.hardware import Hardware
from autoloader.integrations import formats
from autoloader.store import runs
from autoloader.store.door import load_result
from autoloader.store.history import previous, stored_picks
from autoloader.store.result import TuneResult
from autoloader.errors import StoredStateWarning
from autoloader.tuning.compare import compare

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "results")
with open(os.path.join(FIXTURES, "format2-since-os-error-20261202.json")) as _fh:
    BASE = json.load(_fh)
with open(os.path.join(FIXTURES, "mark-summary-20261202.json")) as _fh:
    SUMMARY = json.load(_fh)
GOOD = TuneResult.from_dict(BASE)
FINGERPRINT, KEY = BASE["hardware"]["fingerprint"], BASE["dataset_key"]
CPUS, BATCH_SIZES = BASE["hardware"]["cpus"], (BASE["config"]["batch_size"],)
MISSING = object()
# By default the CLI on every n-th case, the report on every n-th result that passes its checks
# (an explanation simulates the loader under each what-if: a fraction of a second each).
CLI_SAMPLE, REPORT_SAMPLE = 50, 60


def _wrong(value) -> list[tuple[str, object]]:
    """The mutations of one value: missing, the wrong type, and the values of its type no run writes."""
    out = [("missing", MISSING)]
    if isinstance(value, bool):
        out += [("text", "yes"), ("number", 2)]
    elif isinstance(value, (int, float)):
        out += [("text", "x"), ("nan", float("nan")), ("negative", -1), ("zero", 0), ("huge", 10**30),
                ("large", 10**15), ("true", True)]
    elif isinstance(value, str):
        out += [("number", 5), ("empty", ""), ("path", "../x/y")]
    elif isinstance(value, dict):
        out += [("number", 5), ("empty", {}), ("list", [5])]
    elif isinstance(value, list):
        out += [("number", 5), ("items-wrong", [5]), ("nested", [[5]]), ("empty", []), ("mapping", {})]
    else:
        out += [("number", 5), ("text", "x"), ("mapping", {}), ("list", [5])]
    return out


def _paths(node, at=()):
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:1]):
            yield from _paths(value, (*at, i))


def mutations(base: dict) -> list[tuple[str, dict]]:
    """(what was changed, the record) for every mutation of every field of ``base``, nested ones too
    (the first item of a list)."""
    out = []
    for at in _paths(base):
        if not at:
            continue
        value = base
        for step in at:
            value = value[step]
        for kind, wrong in _wrong(value):
            data = copy.deepcopy(base)
            node = data
            for step in at[:-1]:
                node = node[step]
            if wrong is MISSING:
                del node[at[-1]]
            else:
                node[at[-1]] = wrong
            out.append((".".join(map(str, at)) + f"={kind}", data))
    return out


CASES = mutations(BASE)
NAMED = {"trials=[5]": {"trials": [5]}, "profile={}": {"profile": {}}, "calibration=5": {"calibration": 5},
         "profile.cpus=0": {"profile": {**BASE["profile"], "cpus": 0}},
         "finals=[{config: 5}]": {"finals": [{"config": 5}]}}


def _text(data: dict) -> str:
    return json.dumps(data, default=str)


class Folder:
    """An ``--out`` with one good result (made a quiet baseline: ``previous`` returns it) and the
    mutated one beside it, under another key."""

    def __init__(self, root):
        self.out = str(root / "out")
        folder = os.path.join(self.out, FINGERPRINT)
        os.makedirs(folder)
        self.good = os.path.join(folder, KEY + ".json")
        self.bad = os.path.join(folder, "mutated-n1-0.json")
        with open(self.good, "w") as fh:
            # Quiet and conclusive: the fixture's run was busy, so its comparison was inconclusive.
            fh.write(json.dumps({**BASE, "load": None, "since": None}, indent=2) + "\n")
        with open(self.good) as fh:
            self.kept = fh.read()

    def put(self, text: str) -> None:
        for aside in glob.glob(self.bad + ".corrupt-*"):
            os.unlink(aside)   # the last case's: the test's own clean-up
        with open(self.bad, "w") as fh:
            fh.write(text)

    def good_untouched(self) -> bool:
        with open(self.good) as fh:
            return fh.read() == self.kept and not glob.glob(self.good + ".corrupt-*")


def _read(folder: Folder, label: str, text: str) -> TuneResult | None:
    """The door, on the mutated file: the record, or a warning naming the file; a reader leaves
    the file as it was, and a tune (``set_aside``) sets it aside with what it held."""
    folder.put(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read = load_result(folder.bad, CPUS, BATCH_SIZES)
    said = [str(w.message) for w in caught if issubclass(w.category, StoredStateWarning)]
    assert open(folder.bad).read() == text and not glob.glob(folder.bad + ".corrupt-*"), f"{label}: a read writes"
    assert (read is None) == bool(said) and all("set aside as" not in w for w in said), (label, said)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = load_result(folder.bad, CPUS, BATCH_SIZES, set_aside=True)
    said = [str(w.message) for w in caught if issubclass(w.category, StoredStateWarning)]
    assert (found is None) == (read is None), label
    if found is None:
        assert len(said) == 1 and f"ignored the stored result {folder.bad}: " in said[0], (label, said)
        if "written by a newer autoloader" in said[0]:   # good, for that one: only ignored
            assert open(folder.bad).read() == text and not glob.glob(folder.bad + ".corrupt-*"), label
            return None
        (aside,) = glob.glob(folder.bad + ".corrupt-*")
        assert not os.path.exists(folder.bad) and open(aside).read() == text, f"{label}: set aside, not lost"
        assert f"set aside as {aside}" in said[0]
    else:
        assert said == [] and open(folder.bad).read() == text, label
        assert found.where == folder.bad
    return found


def _use(found: TuneResult) -> None:
    """What the readers do with a record that passed its checks: none of it may raise."""
    show.result_text(found)
    compare(found, GOOD)      # a retune's comparison: tonight's run against the stored result
    compare(GOOD, found)
    here = Hardware(CPUS, "x", 16, ())
    warm_plan(found, SimpleNamespace(hardware=here, batch_sizes=BATCH_SIZES))


def _report(found: TuneResult) -> None:
    """The report's builder, as `autoloader report` runs it (the plots aside): a result it cannot
    explain is a usage error stating the fix, never a traceback."""
    try:
        explained = explain(found)
    except UsageError as exc:
        assert "tune again" in str(exc)
        return
    render_html(found, explained, {})
    render_markdown(found, explained, {})


def _cli(folder: Folder, label: str, text: str, found: TuneResult | None) -> None:
    if found is not None:
        show.as_json(found.to_dict())
        formats.render(found, "kwargs")
        formats.render(found, "hf")
        formats.render(found, "lightning")
    runner = CliRunner()
    for args in (["show", "--out", folder.out], ["show", "--json", "--out", folder.out], ["show", folder.bad],
                 ["show", "--out", folder.out, KEY]):
        folder.put(text)
        done = runner.invoke(main, args)
        assert done.exit_code in (0, 2) and "Traceback" not in done.output, (label, args, done.output[-2000:])
        assert open(folder.bad).read() == text and not glob.glob(folder.bad + ".corrupt-*"), (label, args, "a read")
        assert done.exception is None or isinstance(done.exception, SystemExit), (label, args, done.exception)
        if args[1] == "--out" and len(args) == 3:
            assert KEY in done.stdout, f"{label}: the good result is listed"


def _run(tmp_path, every_reader: bool) -> None:
    folder = Folder(tmp_path)
    accepted = refused = 0
    cases = CASES + [(label, {**BASE, **change}) for label, change in NAMED.items()]
    for i, (label, data) in enumerate(cases):
        text = _text(data)
        found = _read(folder, label, text)
        if found is None:
            refused += 1
        else:
            accepted += 1
            _use(found)
            if every_reader or accepted % REPORT_SAMPLE == 1:
                _report(found)
        if every_reader or i % CLI_SAMPLE == 0:
            _cli(folder, label, text, found)
            folder.put(text)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StoredStateWarning)
                assert previous(folder.out, Hardware(CPUS, "x", 16, ()), KEY).where == folder.good
    assert folder.good_untouched()
    assert refused > 700 and accepted > 300, (refused, accepted)
    for label in NAMED:   # the cases are refused, by field
        assert _read(folder, label, _text({**BASE, **NAMED[label]})) is None


def test_every_mutated_result_is_read_or_set_aside_and_no_reader_fails(tmp_path):
    _run(tmp_path, every_reader=False)


@pytest.mark.slow   # a few minutes: every case through the CLI and the report
@pytest.mark.heavy
def test_every_mutated_result_through_every_reader(tmp_path):
    _run(tmp_path, every_reader=True)


def test_a_text_that_is_not_a_result_is_set_aside_too(tmp_path):
    folder = Folder(tmp_path)
    for label, text in (("not-json", "{not json"), ("a-list", "[5]"), ("nested", "[" * 100_000 + "]" * 100_000),
                        ("null", "null"), ("empty", "")):
        assert _read(folder, label, text) is None
    newer = _text({**BASE, "format": 99})
    folder.put(newer)
    with pytest.warns(StoredStateWarning, match="newer autoloader"):
        assert load_result(folder.bad, set_aside=True) is None
    assert open(folder.bad).read() == newer, "a newer autoloader's result is its own: not set aside"
    assert folder.good_untouched()


def _marks(study, summaries) -> None:
    """Each of ``summaries`` as the pick of a complete run's mark in ``study`` (run ids in order)."""
    owner = runs.this_owner()
    for i, data in enumerate(summaries):
        mark = runs.RunMark(f"run{i:04d}", owner, runs.COMPLETE, "2026-12-02T00:00:00+00:00", None)
        study.set_user_attr(runs.RUN_PREFIX + mark.run_id, {**mark.to_dict(), "summary": data})


def test_the_marks_of_a_shared_storage_are_checked_and_the_dashboard_notes_them(tmp_path):
    pytest.importorskip("optuna_dashboard", reason="the [dashboard] extra is not installed")
    import optuna
    from optuna_dashboard import get_note

    from autoloader.fleet import dashboard

    name = f"{FINGERPRINT}/{KEY}"
    summaries = [SUMMARY] + [data for _, data in mutations(SUMMARY)]
    memory = optuna.storages.InMemoryStorage()   # the dashboard's snapshot of a storage
    _marks(optuna.create_study(study_name=name, storage=memory), summaries)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        marks = runs.runs_of(optuna.load_study(study_name=name, storage=memory))
        dashboard.annotate(memory)
    said = [str(w.message) for w in caught if issubclass(w.category, StoredStateWarning)]
    assert len(marks) == len(summaries), "a mark with a bad pick is kept, without the pick"
    bad = [m for m in marks.values() if m.summary is None]
    assert 50 < len(bad) < len(summaries) and len(said) >= len(bad) and all(f"{name}: " in s for s in said)
    assert marks["run0000"].summary.to_dict() == SUMMARY
    note = get_note(optuna.load_study(study_name=name, storage=memory))
    assert "run0000" in note and f"{SUMMARY['samples_per_s']:,.0f} samples/s" in note
    # A shared storage's picks (show --storage, a warm start from a sibling): the bad one left out.
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    _marks(optuna.create_study(study_name=name, storage=url), [{**SUMMARY, "config": 5}, SUMMARY])
    with pytest.warns(StoredStateWarning, match=f"ignored the pick of run run0000 in .*#{name}: config is 5"):
        (pick,) = stored_picks(url)
    assert pick.partial and pick.where.endswith(f"#{name}") and pick.to_dict() == SUMMARY


# --- a real tune after a corrupted result -----------------------------------------------------------

@pytest.mark.slow   # two retunes of a paced dataset (about a minute)
def test_a_tune_after_a_corrupted_result_saves_its_pick_and_sets_its_own_file_aside(tmp_path):
    from test_retune import AUTOLOADER, REGISTRY, SLOWDOWN_ENV

    registry = tmp_path / "fleet.toml"
    registry.write_text(REGISTRY)
    out = str(tmp_path / "out")

    def retune() -> tuple[int, dict, str]:
        done = subprocess.run([AUTOLOADER, "retune", str(registry), "--out", out, "--json", "--quiet"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, SLOWDOWN_ENV: "1"})
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        return done.returncode, json.loads(done.stdout), done.stderr

    code, first, _ = retune()
    (entry,) = first["datasets"]
    path = entry["result_path"]
    assert code != 1 and os.path.isfile(path)
    # This machine's result damaged as the issue did it (and made a quiet baseline, so that the
    # next run compares with it), and another machine's result of the key under the shared out.
    with open(path) as fh:
        data = json.load(fh)
    with open(path, "w") as fh:
        json.dump({**data, "trials": [5], "load": None}, fh)
    (kept,) = glob.glob(os.path.join(os.path.dirname(path), "history", "*", "*.json"))
    with open(kept, "w") as fh:
        json.dump({**data, "trials": [5], "load": None}, fh)
    elsewhere = os.path.join(out, "big-0x-64cpu-256g-00000000", os.path.basename(path))
    os.makedirs(os.path.dirname(elsewhere))
    with open(elsewhere, "w") as fh:
        json.dump({**data, "hardware": {**data["hardware"], "fingerprint": "big-0x-64cpu-256g-00000000",
                                        "cpus": 64}, "finals": [{"config": 5}]}, fh)

    code, second, stderr = retune()
    (entry,) = second["datasets"]
    assert code != 1 and entry["status"] != "failed" and entry["error"] is None, (entry, stderr[-3000:])
    for damaged, field in ((path, "trials[0]"), (kept, "trials[0]")):
        assert f"ignored the stored result {damaged}: {field}" in stderr and glob.glob(damaged + ".corrupt-*")
    # Another machine's result of the key is read, warned about, and left where it is: a tune sets
    # aside only its own hardware's files (issue 50: reads never write).
    assert f"ignored the stored result {elsewhere}: finals[0].config" in stderr
    assert os.path.isfile(elsewhere) and not glob.glob(elsewhere + ".corrupt-*")
    stored = load_result(path)
    assert stored is not None and stored.config.loader_kwargs() == entry["pick"], "the new pick is saved"
    assert stored.since is None, "nothing left to compare with: a baseline"
