"""The worker start method as a knob (NOTE [ The start method as a knob ] in
autoloader/search/settings.py, NOTE [ What a start method costs ] in autoloader/search/methods.py):
declared once, behind its gate, a user's own honoured; the model and the memory forecast per
method; the report's words; and, end to end, a Python-object dataset tuned under fork and spawn
whose epoch memory forecast per method is within 25% of a real epoch measured here."""

from __future__ import annotations

import json
import os

import pytest
from conftest import TESTS_DIR

from autoloader.errors import UsageError
from autoloader.inputs.problem import Problem
from autoloader.integrations import formats
from autoloader.search.memory import EPOCH_END, MEASURED_PEAK, MemoryLimits
from autoloader.search.methods import MethodCost, MethodRow, StartChoice
from autoloader.search.model import Model
from autoloader.search.model_first import candidates
from autoloader.search.settings import START, default_start_method
from autoloader.search.space import LoaderConfig, search_space
from autoloader.search.codec import InvalidRecord, read
from autoloader.store.snippet import snippet
from autoloader.search.config import TunedConfig
from autoloader.tuning.start import measured_space, start_plan

import dataclasses

from explain_cases import profile as _profile


def a_profile(**changes):
    return dataclasses.replace(_profile(device="cpu"), **changes)

SPEC = os.path.join(TESTS_DIR, "start_workloads.py") + ":rows"


def test_the_start_method_is_one_knob_that_keeps_every_key_at_its_default():
    fork = LoaderConfig.make(64, 2, False)
    spawn = fork.replace(multiprocessing_context="spawn")
    assert fork.multiprocessing_context is None and fork.key == "bs64-w2-pin0-pf2-pw1"
    assert spawn.key == "bs64-w2-pin0-pf2-pw1-mpspawn" and spawn[START] == "spawn"
    assert "multiprocessing_context" not in fork.loader_kwargs()
    assert spawn.loader_kwargs()["multiprocessing_context"] == "spawn"
    assert min([spawn, fork], key=LoaderConfig.cost) == fork      # the default's quick start wins a tie
    assert LoaderConfig.make(64, 0, False, multiprocessing_context="spawn").multiprocessing_context is None
    assert read(LoaderConfig, json.loads(json.dumps(spawn.loader_kwargs()))) == spawn
    with pytest.raises(InvalidRecord, match="not one of fork, forkserver, spawn"):
        read(LoaderConfig, {**spawn.loader_kwargs(), "multiprocessing_context": "vfork"})
    with pytest.raises(UsageError, match="start method's name"):
        LoaderConfig(64, 2, False, 2, multiprocessing_context="vfork")


def test_every_form_passes_the_chosen_context():
    spawn = LoaderConfig.make(64, 2, False, multiprocessing_context="forkserver")
    assert formats.render(spawn, "hf").strip().endswith("dataloader_multiprocessing_context='forkserver'")
    assert "multiprocessing_context='forkserver'" in formats.render(spawn, "kwargs")
    assert "multiprocessing_context='forkserver'" in formats.render(spawn, "lightning")
    source = snippet(TunedConfig(spawn, 100.0, None, None, None, {}, "rows", "cpu"))
    namespace: dict = {}
    exec(next(line for line in source.splitlines() if line.startswith("LOADER_KWARGS = ")), namespace)
    assert namespace["LOADER_KWARGS"]["multiprocessing_context"] == "forkserver"
    # At the default, no form names it (the six knobs' forms stay as they were).
    assert "multiprocessing" not in formats.render(LoaderConfig.make(64, 2, False), "hf")


def test_the_domain_is_the_platform_s_other_methods_behind_the_gate():
    linux = search_space((64,), 2, "cpu", platform="linux", start_method="fork")
    assert linux.values(START) == (None, "forkserver", "spawn")
    assert linux.offered(START) == (None,)                       # the gate closed: as before
    assert {c.multiprocessing_context for c in candidates(linux, 2)} == {None}
    opened = search_space((64,), 2, "cpu", unlocked=("search_start_method",), platform="linux", start_method="fork")
    assert {c.multiprocessing_context for c in candidates(opened, 2) if c.num_workers} == {None, "forkserver", "spawn"}
    assert search_space((64,), 2, "cpu", platform="win32").values(START) == (None,)
    assert search_space((64,), 2, "cpu", platform="linux", start_method="spawn").values(START) == (None, "fork",
                                                                                                     "forkserver")
    assert default_start_method("linux", (3, 12)) == "fork" and default_start_method("linux", (3, 14)) == "forkserver"
    assert default_start_method("darwin") == "spawn"
    # Only the methods the profile measured stay offered.
    profile = a_profile(methods=(_cost("fork", True), _cost("spawn", False)))
    assert measured_space(opened, profile).values(START) == (None, "spawn")


def test_a_users_start_method_is_honoured_not_searched():
    asked = Problem.build("m:d", batch_size=8, search_start_method=True)
    assert start_plan(asked)[1] and "search_start_method" in start_plan(asked)[0]
    given = Problem.build("m:d", batch_size=8, search_start_method=True,
                          fixed_kwargs={"multiprocessing_context": "spawn"})
    assert start_plan(given) == (frozenset(), ())
    assert Problem.build("m:d", batch_size=8, search_start_method=["spawn"]).search_start_method == ("spawn",)
    with pytest.raises(UsageError, match="start methods of this platform"):
        Problem.build("m:d", batch_size=8, search_start_method=["vfork"])
    said = StartChoice("spawn", "fork", True, 2, True).lines()
    assert said == ["spawn, as the loader's multiprocessing_context sets it (honoured, not searched)"]
    # The key of a problem that does not search it is the key it had.
    plain = Problem.build("m:d", batch_size=8).with_length(100)
    assert plain.key == Problem.build("m:d", batch_size=8, search_start_method=False).with_length(100).key
    assert plain.key != asked.with_length(100).key


def _cost(method: str, default: bool, start_s: float = 0.1, per_s: float = 0.0, uss: int = 300 * 2**20,
          rise: int = 0) -> MethodCost:
    return MethodCost(method, default, ((1, start_s), (2, start_s + per_s)), uss, uss + 2**20, rise, 1000)


def test_the_model_adds_a_methods_start_up_to_fresh_workers_only():
    profile = a_profile(methods=(_cost("fork", True, 0.1), _cost("spawn", False, 2.1, 0.5)))
    model = Model(profile, "cpu")
    kept = LoaderConfig.make(64, 2, False, multiprocessing_context="spawn")
    fresh = kept.replace(persistent_workers=False)
    assert model.method_startup_s(2, "spawn") == pytest.approx(2.5)
    assert model.method_startup_s(2, None) == 0.0
    assert model.predict(fresh).samples_per_s < model.predict(fresh.replace(multiprocessing_context=None)).samples_per_s
    assert model.predict(kept).samples_per_s == pytest.approx(
        model.predict(kept.replace(multiprocessing_context=None)).samples_per_s)


def test_the_forecast_takes_a_methods_worker_from_its_figures():
    spawn = _cost("spawn", False, uss=400 * 2**20)
    limits = MemoryLimits(ceiling=2**40, shm_free=None, runner_uss=500 * 2**20, runner_pss=500 * 2**20,
                          sample_bytes=1024, length=10_000, methods=(_cost("fork", True), spawn))
    config = LoaderConfig.make(64, 2, False, multiprocessing_context="spawn")
    f = limits.forecast(config, [])
    assert f.basis == MEASURED_PEAK and f.worker_bytes == 400 * 2**20
    assert f.host_bytes == 500 * 2**20 + 2 * spawn.worker_pss_bytes + (2 * 2 + 2) * 64 * 1024
    growing = limits.__class__(**{**limits.__dict__, "methods": (_cost("spawn", False, rise=8 * 2**20),)})
    g = growing.forecast(config, [])
    # 8 MiB over 1,000 samples read, over each worker's 5,000 of the epoch.
    assert g.basis == EPOCH_END and g.epoch_copied_bytes == 40 * 2**20
    # The default's forecast is as it was without the figures.
    default = config.replace(multiprocessing_context=None)
    assert limits.forecast(default, []) == limits.__class__(**{**limits.__dict__, "methods": ()}).forecast(default, [])


def test_the_words_say_which_method_the_data_needs_and_why():
    rows = (MethodRow("fork", int(1.9 * 2**30), 40 * 2**30, 0.2, False, int(1.6 * 2**30)),
            MethodRow("spawn", int(0.3 * 2**30), 8 * 2**30, 2.3, True))
    lines = StartChoice("spawn", "fork", False, 8, True, rows, python_rows=True).lines()
    assert lines[0] == ("fork: 1.9 GiB, spawn: 0.3 GiB a worker at the epoch's end; spawn costs 2.1 s of start-up "
                        "a run with persistent workers")
    assert lines[1] == "the data needs spawn: fork does not fit the memory limit (40.0 GiB forecast)"
    assert lines[2].startswith("what if the rows were a shared buffer (numpy arrays or Arrow")
    assert "307 MiB a worker at the epoch's end instead of 1,946 MiB" in lines[2]
    back = StartChoice.from_dict(json.loads(json.dumps(StartChoice("spawn", "fork", False, 8, True, rows).to_dict())))
    assert back.rows == rows
    fits = StartChoice("fork", "fork", False, 2, False, (rows[0].__class__("fork", 2**28, 2**30, 0.2, True),
                                                        rows[1])).lines()
    assert "every epoch (workers not kept)" in fits[0] and fits[1] == "fork it is: it fits and starts quickest"


@pytest.mark.slow   # a tune that starts spawned workers, then a real epoch under each method
@pytest.mark.heavy
def test_a_python_object_dataset_under_fork_and_spawn_is_forecast_within_a_quarter_of_its_epoch(tmp_path):
    import start_workloads

    from autoloader import tune
    from autoloader.tuning.progress import table
    from scripts.memory_growth import epoch_memory

    result = tune(start_workloads.rows, batch_size=64, budget=60, out=str(tmp_path),
                  search_start_method=("fork", "spawn"), progress=False)
    assert {m.method for m in result.profile.methods} == {default_start_method("linux"), "spawn"}
    choice = result.start
    assert choice is not None and not choice.given and {r.method for r in choice.rows} == {"fork", "spawn"}
    config = result.config if result.config.num_workers else result.rule
    shown = table(result)
    assert "start method" in shown and "a worker at the epoch's end" in shown, shown
    assert "shared buffer" in shown   # the rows are Python objects: the growth finding's
    for row in choice.rows:
        kwargs = config.replace(multiprocessing_context=None if row.method == choice.default else row.method)
        epoch = epoch_memory(SPEC, kwargs.loader_kwargs())
        measured = epoch["epochs"][0]["worker_uss_mean"]
        print(f"\n{row.method}: a worker at the epoch's end {measured / 2**20:.1f} MiB measured, "
              f"{row.worker_bytes / 2**20:.1f} MiB forecast; start-up {row.startup_s:.2f} s")
        assert 0.75 * measured <= row.worker_bytes <= 1.25 * measured, (row, measured)
    fork, spawn = choice.row("fork"), choice.row("spawn")
    assert fork.copied_bytes > 0 and spawn.copied_bytes == 0     # copy on read is fork's
    assert spawn.startup_s > fork.startup_s
