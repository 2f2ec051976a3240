"""Sub-second unit tests of the rules the tuning runs lean on, without a trial process: which
stored verdicts stand (store/study.py), what the clock keeps back (search/budget.py), what a
stored record must hold (store/result.py), and that the pure part imports no torch, probe or
store."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys

import pytest

from autoloader.search.budget import (
    Clock,
    final_measure_seconds,
    measure_seconds,
    round_seconds,
    trial_seconds,
)
from autoloader.search.policy import (FINAL_RESERVE_SHARE, FINAL_ROUNDS, FINAL_SETTINGS, FIRST_TRIAL_S,
                                      BurstSettings, expected_window_s)
from autoloader.search.results import CONSTRAINT, FAILED, HANG, OK, TrialResult
from autoloader.search.space import LoaderConfig
from autoloader.errors import StoredStateWarning
from autoloader.store.result import InvalidRecord, TuneResult, trial_record
from autoloader.store.door import load_result
from autoloader.store.study import OnceMore, StoredTrial, code_changed, standing

A, B, C = (LoaderConfig.make(16, w, False) for w in (1, 2, 4))
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ok(config, rate=100.0, seconds=3.0, window=2.0, batches=20) -> TrialResult:
    return TrialResult(config, OK, samples_per_s=rate, seconds=seconds, window_s=window, batches=batches)


def failed(config, cause) -> TrialResult:
    return TrialResult(config, FAILED, cause=cause, error="boom")


# --- store/study.py: which stored verdicts stand -----------------------------------------------------------

def test_each_configs_newest_result_stands():
    stored = [StoredTrial(ok(A, 100.0)), StoredTrial(ok(B)), StoredTrial(ok(A, 200.0))]
    history = standing(stored, lambda result, limits: False, code=None)
    assert [(t.config, t.samples_per_s) for t in history.trials] == [(B, 100.0), (A, 200.0)]


def test_a_user_code_failure_stands_only_under_the_same_code():
    stored = [StoredTrial(failed(A, "dataset_error"), code="v1"), StoredTrial(failed(B, "step_error"), code="v2"),
              StoredTrial(failed(C, "dataset_error"), code=None)]
    history = standing(stored, lambda result, limits: False, code="v1")
    assert [t.config for t in history.trials] == [A]
    assert history.code_changed == 2, "another digest, or none recorded, is other code"
    assert not code_changed(failed(A, "worker_killed"), "v0", "v1"), "a crash is not the user's code"
    assert not code_changed(failed(A, "dataset_error"), "v0", None), "no digest now: nothing to compare"


def test_a_crash_stands_once_seen_twice():
    once = standing([StoredTrial(failed(A, "worker_killed"))], lambda r, lim: False, code=None)
    assert once.trials == () and once.crashed_once == (A,)
    twice = standing([StoredTrial(failed(A, "worker_killed")), StoredTrial(failed(A, "worker_killed"))],
                     lambda r, lim: False, code=None)
    assert [t.cause for t in twice.trials] == ["worker_killed"]
    tracker = OnceMore({B})
    assert not tracker.stands(failed(A, "runner_killed")), "a first crash: tried once more"
    assert tracker.stands(failed(A, "runner_killed")), "the second counts"
    assert tracker.stands(failed(B, "worker_segfault")), "one crash already stored: this is the second"
    assert tracker.stands(failed(C, "dataset_error")), "only crashes get a second try"


def test_a_limits_verdict_under_a_raised_limit_is_measured_again():
    stored = [StoredTrial(TrialResult(A, CONSTRAINT, cause="host_memory"), limits={"max_memory": 1}),
              StoredTrial(TrialResult(B, HANG, cause="hang"), limits={"trial_timeout": 5})]
    history = standing(stored, lambda result, limits: result.config == A, code=None)
    assert [t.config for t in history.trials] == [B] and history.limit_raised == 1


# --- search/budget.py: the clock ---------------------------------------------------------------------------

def test_a_trial_is_assumed_to_take_the_first_guess_until_one_is_measured():
    assert trial_seconds([]) == FIRST_TRIAL_S
    assert trial_seconds([ok(A, seconds=2.0), ok(B, seconds=4.0), ok(C, seconds=9.0)]) == 4.0


def test_a_final_measurement_costs_its_trials_overhead_and_the_finals_window():
    trial = ok(B, seconds=5.0, window=2.0, batches=40)   # 3 s beyond its window, 0.05 s a batch
    expected = 3.0 + expected_window_s(FINAL_SETTINGS, 2, 0.05)
    assert final_measure_seconds(B, [trial]) == pytest.approx(expected)
    assert measure_seconds(trial, FINAL_SETTINGS, 2) == pytest.approx(expected)
    slow = BurstSettings(max_window_s=1.0, min_cycles=4.0)
    assert measure_seconds(ok(B, seconds=2.5, window=2.0, batches=4), slow, 8) == pytest.approx(0.5 + 3.0), \
        "slow batches at many workers wait for their cycles, up to three time caps"
    assert final_measure_seconds(C, [trial]) == max(1.5, min(5.0, FINAL_SETTINGS.max_window_s + 2.0)), \
        "a config never measured: the typical trial, within bounds"
    assert round_seconds([B, C], [trial]) == pytest.approx(expected + final_measure_seconds(C, [trial]))


def test_the_clock_keeps_back_the_finals_rounds_up_to_a_share_of_the_budget():
    clock = Clock(100.0, started=0.0)
    history = [ok(A, seconds=4.0, window=2.0), ok(B, seconds=4.0, window=2.0)]
    assert clock.finals_reserve(history, [A]) == 0.0, "one finalist: no final"
    reserve = clock.finals_reserve(history, [A, B])
    assert reserve == pytest.approx(min(FINAL_ROUNDS * round_seconds([A, B], history), FINAL_RESERVE_SHARE * 100))
    long = [ok(A, seconds=60.0, window=2.0), ok(B, seconds=60.0, window=2.0)]
    assert clock.finals_reserve(long, [A, B]) == FINAL_RESERVE_SHARE * 100.0
    assert clock.search_left(history, [A, B]) == pytest.approx(clock.left() - reserve, abs=0.1)
    one = clock.finals_reserve(history, [A, B], rounds=1)
    assert one == pytest.approx(min(round_seconds([A, B], history), FINAL_RESERVE_SHARE * 100)) and one < reserve, \
        "while the pick is unmeasured the search may spend the reserve down to one round"


# --- store/result.py: what a stored record must hold -----------------------------------------------------

def result_record(**changes) -> dict:
    data = {"format": 2, "config": {"batch_size": 16, "num_workers": 2, "pin_memory": False, "prefetch_factor": 2,
                                    "persistent_workers": True}, "samples_per_s": 1000.0, "rel_interval": 0.02,
            "baseline_samples_per_s": 400.0, "knee": None, "hardware": {"fingerprint": "box", "cpus": 2},
            "dataset_key": "ds-n100-abc", "device": "cpu"}
    return {**data, **changes}


@pytest.mark.parametrize("change, says", [
    ({"samples_per_s": math.inf}, "samples_per_s"), ({"samples_per_s": True}, "samples_per_s"),
    ({"samples_per_s": -1.0}, "samples_per_s"), ({"format": 99}, "newer autoloader"),
    ({"hardware": "box"}, "hardware"), ({"dataset_key": 3}, "dataset_key"),
    ({"config": {"batch_size": 0, "num_workers": 2, "pin_memory": False}}, "batch_size"),
    ({"config": {"batch_size": 16, "num_workers": 9, "pin_memory": False, "prefetch_factor": 2}}, "num_workers is 9"),
    ({"config": {"batch_size": 16, "num_workers": 2, "pin_memory": "yes", "prefetch_factor": 2}}, "pin_memory"),
    ({"knee": {"stops_paying": 1}}, "peak is None"),
], ids=["inf", "bool", "negative", "newer", "hardware", "key", "batch", "workers-past-the-cpus", "pin", "knee"])
def test_a_result_record_that_no_run_wrote_is_refused_with_what_is_wrong(change, says):
    with pytest.raises(InvalidRecord, match=says):
        TuneResult.from_dict(result_record(**change))


def test_a_sound_result_record_reads_back_and_the_one_reader_warns_on_a_bad_file(tmp_path):
    tuned = TuneResult.from_dict(result_record()).tuned
    assert tuned.config == LoaderConfig.make(16, 2, False, 2, True) and tuned.samples_per_s == 1000.0
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(result_record()))
    bad.write_text(json.dumps(result_record(samples_per_s=None)))
    stored = load_result(str(good))
    assert stored.where == str(good) and stored.tuned == tuned
    assert stored.hardware.fingerprint == "box" and stored.hardware.cpus == 2
    assert load_result(str(tmp_path / "missing.json")) is None
    with pytest.warns(StoredStateWarning, match="ignored the stored result .*bad.json: samples_per_s.*left as it is"):
        assert load_result(str(bad)) is None
    assert bad.exists() and not list(tmp_path.glob("bad.json.corrupt-*")), "a reader leaves it where it is"
    with pytest.warns(StoredStateWarning, match="ignored the stored result .*bad.json: samples_per_s.*set aside"):
        assert load_result(str(bad), set_aside=True) is None
    assert not bad.exists() and len(list(tmp_path.glob("bad.json.corrupt-*"))) == 1, "set aside beside it"
    with pytest.warns(StoredStateWarning, match="a folder"):
        assert load_result(str(tmp_path)) is None
    assert tmp_path.is_dir(), "a folder is only ignored"


def test_a_trial_record_is_checked_field_by_field():
    record = {"format": 2, "config": {"batch_size": 16, "num_workers": 0, "pin_memory": False}, "status": OK,
              "samples_per_s": 10.0, "batches": 4}
    assert trial_record(record).samples_per_s == 10.0
    for change, says in (({"status": "great"}, "status"), ({"batches": -1}, "batches"),
                         ({"samples_per_s": None}, "samples_per_s"), ({"pruned": "no"}, "pruned")):
        with pytest.raises(InvalidRecord, match=says):
            trial_record({**record, **change})


# --- the pure part ----------------------------------------------------------------------------------------

PURE = "autoloader/search"
FORBIDDEN = ("torch", "multiprocessing", "subprocess", "psutil", "click", "optuna", "autoloader.probe",
             "autoloader.store", "autoloader.tuning", "autoloader.fleet", "autoloader.node", "autoloader.inputs")
# The report layer's pure part (explain/): records in, records out, from the search's records and
# errors alone; its plots and page (matplotlib, files) are not in it.
EXPLAIN = "autoloader/explain"
EXPLAIN_PURE = ("__init__", "evidence", "verdict", "whatif", "thresholds")
EXPLAIN_MAY_IMPORT = ("autoloader.search", "autoloader.errors", "autoloader.events.lines", *(f"autoloader.explain.{m}" for m in EXPLAIN_PURE[1:]))


def _imports(path: str, package: str) -> set[str]:
    tree = ast.parse(open(path).read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module)
    return names


def _under(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _explain_outsider(module: str) -> bool:
    """An import the pure explain modules may not make: autoloader's own beyond the search and
    errors, or anything outside the standard library (matplotlib among them)."""
    if module.split(".")[0] == "autoloader":
        return not _under(module, EXPLAIN_MAY_IMPORT)
    return module.split(".")[0] not in sys.stdlib_module_names or _under(module, FORBIDDEN)


def test_the_pure_part_imports_no_torch_no_processes_no_store():
    """Everything under search/ (space, model, search, choice) decides from records alone: no
    torch, no processes, no files, no probe or store, anywhere in the file (lazy imports too).
    explain/'s pure modules (the verdict, the what-ifs, the ceiling) likewise, importing only
    from search/ and errors."""
    folder = os.path.join(REPO, PURE)
    offenders = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            found = {m for m in _imports(os.path.join(folder, name), "autoloader.search") if _under(m, FORBIDDEN)}
            if found:
                offenders[name] = sorted(found)
    for name in EXPLAIN_PURE:
        found = {m for m in _imports(os.path.join(REPO, EXPLAIN, name + ".py"), "autoloader.explain")
                 if _explain_outsider(m)}
        if found:
            offenders["explain/" + name] = sorted(found)
    assert offenders == {}
    # And at run time: importing the whole pure part loads none of them.
    forbidden = (*FORBIDDEN, "matplotlib")
    code = ("import sys, pkgutil, importlib, autoloader.search as s\n"
            "for m in pkgutil.iter_modules(s.__path__): importlib.import_module('autoloader.search.' + m.name)\n"
            f"for m in {EXPLAIN_PURE[1:]!r}: importlib.import_module('autoloader.explain.' + m)\n"
            f"print(sorted(n for n in sys.modules if any(n == f or n.startswith(f + '.') for f in {forbidden!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


FOLDERS = ("inputs", "search", "probe", "store", "tuning", "fleet", "node", "integrations", "explain", "events")


def _cross_folder_imports():
    """(importing file, folder, module or name) for every import of one folder from outside it."""
    root = os.path.join(REPO, "autoloader")
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
            package = module if name == "__init__.py" else module.rsplit(".", 1)[0]
            own = package.split(".")[1] if package.count(".") else None
            for node in ast.walk(ast.parse(open(path).read())):
                if not isinstance(node, ast.ImportFrom):
                    continue
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])).split(".")
                if target[0] != "autoloader" or len(target) < 2 or target[1] not in FOLDERS or target[1] == own:
                    continue
                wanted = [target[2]] if len(target) > 2 else [alias.name for alias in node.names]
                for item in wanted:
                    yield os.path.relpath(path, REPO), target[1], item


def test_every_import_across_folders_is_of_the_folders_public_face():
    """Each folder's ``__all__`` lists what other folders import from it (a module or a name), and
    each name in it exists: a module another folder starts to import joins its folder's face."""
    import importlib

    outside = {}
    for where, folder, item in _cross_folder_imports():
        face = importlib.import_module(f"autoloader.{folder}").__all__
        if item not in face:
            outside.setdefault(f"autoloader.{folder}", set()).add(f"{item} (imported by {where})")
    assert outside == {}
    for folder in FOLDERS:
        package = importlib.import_module(f"autoloader.{folder}")
        for item in package.__all__:
            assert hasattr(package, item) or importlib.util.find_spec(f"autoloader.{folder}.{item}"), (folder, item)


def test_the_events_import_only_the_pure_part_and_no_torch():
    """autoloader.events sits below every folder that emits events: it imports the errors and the
    pure search/ records alone, so a user's callback module (and the trial process) loads no more."""
    folder = os.path.join(REPO, "autoloader", "events")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            own = {m for m in _imports(os.path.join(folder, name), "autoloader.events")
                   if m.split(".")[0] == "autoloader"}
            assert all(_under(m, ("autoloader.events", "autoloader.errors", "autoloader.search")) for m in own), own
    code = ("import sys, autoloader.events, autoloader.events.lines\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'numpy', 'optuna', 'psutil')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- store/paths.held: processes of one machine take turns ---------------------------------------------

def _hold(path: str, seconds: float, conn) -> None:
    import time

    from autoloader.store.paths import held

    with held(path):
        conn.send(time.monotonic())
        time.sleep(seconds)
        conn.send(time.monotonic())


def test_two_processes_holding_one_problems_lock_take_turns(tmp_path):
    import multiprocessing
    import time

    from autoloader.store.paths import held

    path = str(tmp_path / "sub" / "key.lock")   # its folder is made
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    holder = context.Process(target=_hold, args=(path, 1.0, child))
    holder.start()
    entered = parent.recv()
    with held(path):
        mine = time.monotonic()
    left = parent.recv()
    holder.join(10)
    assert entered < left <= mine, "the second waited for the first to let go"
