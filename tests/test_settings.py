"""The settings table (NOTE [ The settings table ] in autoloader/search/settings.py): a knob
declared in one place reaches the space, the key, the stored record, the snippet, the report page,
the framework forms and the retune report, and the six knobs keep the keys and JSON they had."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from autoloader.cli import main
from autoloader.explain import explain
from autoloader.explain.page import render_html, render_markdown
from autoloader.fleet.retune import _pick
from autoloader.integrations import formats
from autoloader.search.config import TunedConfig
from autoloader.search.model_first import candidates
from autoloader.search.settings import (ORDER, PIN, SETTINGS, TUNED_SETTINGS, WITH_WORKERS, Context, HfField, Knob,
                                        stored_choice)
from autoloader.search.space import LoaderConfig, SearchSpace, search_space
from autoloader.search.codec import InvalidRecord, read
from autoloader.store.result import TuneResult
from autoloader.store.snippet import snippet

from explain_cases import synthetic_result

SIX = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "in_order")
# The start method came seventh (NOTE [ The start method as a knob ]): at its default (None) it
# adds no token and no keyword argument, so the six keep their keys and JSON.
NINE = SIX + ("loader", "method", "max_concurrent")
SEVEN = SIX + ("multiprocessing_context",)


def _methods(ctx: Context) -> tuple[str, ...]:
    # A domain that depends on the platform, as the worker start method's will.
    return ("fork", "spawn") if ctx.platform.startswith("linux") else ("spawn",)


@pytest.fixture
def toy():
    """A string-valued, worker-only knob whose domain depends on the platform, declared here and
    nowhere else: registered for the test, removed after it."""
    declared = Knob("toy_method", str, token=lambda v: f"tm{v}", label="tm", tie_rank=3.5,
                    cost=lambda v: ("fork", "spawn").index(v), default=None, start="fork", domain=_methods,
                    when=WITH_WORKERS, stored=stored_choice(("fork", "spawn")),
                    hf=HfField("dataloader_toy_method", 5), mark=lambda v: "" if v == "fork" else v)
    SETTINGS.register(declared)
    try:
        yield declared
    finally:
        SETTINGS.remove(declared.name)


def test_the_table_holds_the_six_knobs_in_the_order_of_the_key():
    # The DataLoader's six, torchdata.nodes' (LOADER, METHOD, CONCURRENCY), then the start method.
    assert tuple(TUNED_SETTINGS) == NINE + ("multiprocessing_context",) == tuple(k.name for k in SETTINGS)
    assert SETTINGS["in_order"] is ORDER and SETTINGS["pin_memory"] is PIN
    assert ORDER.gate.option == "allow_reorder" and ORDER.proposal.value is False
    with pytest.raises(ValueError, match="declared once"):
        SETTINGS.register(PIN)


def test_the_toy_knob_reaches_the_space_and_the_candidates(toy):
    linux = search_space((16,), 2, "cpu", platform="linux")
    assert linux.values(toy) == ("fork", "spawn")
    assert search_space((16,), 2, "cpu", platform="darwin").values(toy) == ("spawn",)
    found = candidates(linux, 2)
    assert {c.toy_method for c in found if c.num_workers} == {"fork", "spawn"}
    assert {c.toy_method for c in found if not c.num_workers} == {None}   # not without workers
    assert len(found) == len(set(found))
    assert linux.contains(LoaderConfig.make(16, 2, False, toy_method="spawn"))
    assert not search_space((16,), 2, "cpu", platform="darwin").contains(LoaderConfig.make(16, 2, False))
    assert SearchSpace((16,), 2, pin_memory=(False,), toy_method=("spawn",)).default_config(2).toy_method == "spawn"


def test_the_toy_knob_reaches_the_key_the_kwargs_the_tie_order_and_the_rules(toy):
    spawn = LoaderConfig.make(16, 2, False, toy_method="spawn")
    fork = LoaderConfig.make(16, 2, False)
    assert fork.toy_method == "fork" and spawn[toy] == "spawn"
    assert spawn.key == "bs16-w2-pin0-pf2-pw1-tmspawn"
    assert spawn.loader_kwargs()["toy_method"] == "spawn"
    assert LoaderConfig.make(16, 0, False, toy_method="spawn").loader_kwargs() == {
        "batch_size": 16, "num_workers": 0, "pin_memory": False}
    assert min([spawn, fork], key=LoaderConfig.cost) == fork
    assert _pick(spawn.loader_kwargs()).endswith("tm=spawn")
    with pytest.raises(ValueError, match="toy_method needs num_workers > 0"):
        LoaderConfig(16, 0, False, toy_method="spawn")


def test_the_toy_knob_makes_a_stored_round_trip(toy):
    config = LoaderConfig.make(16, 2, True, 4, False, toy_method="spawn")
    assert read(LoaderConfig, json.loads(json.dumps(config.to_dict()))) == config
    assert read(LoaderConfig, json.loads(json.dumps(config.loader_kwargs()))) == config
    assert LoaderConfig.from_dict(config.loader_kwargs()) == config
    with pytest.raises(InvalidRecord, match="toy_method is 'vfork', not one of fork, spawn"):
        read(LoaderConfig, {**config.loader_kwargs(), "toy_method": "vfork"})


@pytest.mark.slow   # explains a result and runs the CLI three times
def test_the_toy_knob_reaches_the_snippet_the_page_and_the_framework_forms(toy, tmp_path):
    path = os.path.join(str(tmp_path), "synthetic-1x-16cpu-64g-00000000", "synthetic-n1000-0000000000.json")
    os.makedirs(os.path.dirname(path))
    data = synthetic_result(path)     # its configs built with the toy registered: at its start
    data["config"]["toy_method"] = "spawn"
    with open(path, "w") as fh:
        json.dump(data, fh)
    pick = LoaderConfig.from_dict(data["config"])
    assert pick.toy_method == "spawn" and pick.num_workers

    source = snippet(TunedConfig(pick, 1000.0, None, None, None, {}, "synthetic", "cuda"))
    assert "toy_method='spawn'" in source
    namespace: dict = {}
    exec(next(line for line in source.splitlines() if line.startswith("LOADER_KWARGS = ")), namespace)
    assert namespace["LOADER_KWARGS"] == pick.loader_kwargs()

    record = TuneResult.from_dict(data, path)   # the report reads the validated record only
    ex = explain(record)
    page = render_markdown(record, ex, {})
    assert "toy_method" in page and "spawn" in page        # the pick's rows and the trial table's column
    assert "<th>toy_method</th>" in render_html(record, ex, {})

    shown = {form: CliRunner().invoke(main, ["show", path, "--out", str(tmp_path), "--format", form])
             for form in ("kwargs", "hf", "lightning")}
    assert all(r.exit_code == 0 for r in shown.values()), {f: r.output for f, r in shown.items()}
    assert "toy_method='spawn'" in shown["kwargs"].stdout and "toy_method='spawn'" in shown["lightning"].stdout
    assert shown["hf"].stdout.strip().endswith("dataloader_toy_method='spawn'")
    assert {k.name: k.hf.name for k in formats.hf_knobs()}["toy_method"] == "dataloader_toy_method"


def test_a_knob_read_back_from_a_loader_and_a_knob_of_another_loader():
    """A knob whose built loader keeps it as an object (as DataLoader keeps its start method's
    context) reads it with ``from_loader``; a knob only another loader has is no DataLoader
    keyword, though it is in the key and the stored form."""
    import types

    read = Knob("toy_context", str, token=lambda v: f"tc{v}", label="tc", tie_rank=3.6, cost=lambda v: 0,
                default=None, start="spawn", domain=lambda ctx: ("spawn",), when=WITH_WORKERS,
                from_loader=lambda loader: loader.toy_context.method)
    other = Knob("toy_depth", int, token=lambda v: f"td{v}", label="td", tie_rank=3.7, cost=lambda v: v, default=1,
                 domain=lambda ctx: (1, 2), loaders=frozenset({"torchdata.nodes"}))
    SETTINGS.register(read)
    SETTINGS.register(other)
    try:
        loader = types.SimpleNamespace(batch_size=16, num_workers=2, pin_memory=False, prefetch_factor=4,
                                       persistent_workers=True, toy_context=types.SimpleNamespace(method="spawn"))
        config = formats.result_settings(loader)
        assert config.toy_context == "spawn" and config.prefetch_factor == 4
        deep = config.replace(toy_depth=2)
        assert "toy_depth" not in deep.loader_kwargs() and deep.key.endswith("-td2")
        assert deep.to_dict()["toy_depth"] == 2 and LoaderConfig.from_dict(deep.to_dict()) == deep
    finally:
        SETTINGS.remove(other.name)
        SETTINGS.remove(read.name)


def test_the_table_is_as_it_was_after_the_toy(toy):
    SETTINGS.remove(toy.name)
    try:
        assert tuple(TUNED_SETTINGS) == NINE + ("multiprocessing_context",)
        assert LoaderConfig.make(16, 2, False).key == "bs16-w2-pin0-pf2-pw1"
    finally:
        SETTINGS.register(toy)   # for the fixture to remove


def test_the_six_knobs_keep_their_keys_json_and_forms():
    unordered = LoaderConfig.make(128, 2, False, in_order=False)
    assert unordered.key == "bs128-w2-pin0-pf2-pw1-ooo"
    assert json.dumps(unordered.loader_kwargs()) == (
        '{"batch_size": 128, "num_workers": 2, "pin_memory": false, "prefetch_factor": 2, '
        '"persistent_workers": true, "in_order": false}')
    assert tuple(unordered.to_dict()) == SEVEN and unordered.multiprocessing_context is None
    assert formats.render(unordered, "hf") == (
        "dataloader_num_workers=2, dataloader_pin_memory=False, dataloader_persistent_workers=True, "
        "dataloader_prefetch_factor=2, dataloader_in_order=False\n")
    assert formats.render(LoaderConfig.make(128, 0, True), "hf") == (
        "dataloader_num_workers=0, dataloader_pin_memory=True, dataloader_persistent_workers=False, "
        "dataloader_prefetch_factor=None\n")
    assert formats.training_arguments(unordered, batch_size=True)["per_device_train_batch_size"] == 128
    assert LoaderConfig.make(128, 4, True, 8, False).cost() == (4, 8, 1, 1, 0, 0, 128)
    assert repr(LoaderConfig(8, 0, False)) == ("LoaderConfig(batch_size=8, num_workers=0, pin_memory=False, "
                                               "prefetch_factor=None, persistent_workers=False, in_order=True, "
                                               "multiprocessing_context=None)")
