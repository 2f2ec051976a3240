"""torchdata.nodes graphs: the knobs in the settings table (DataLoader configs and keys as they
were), a trial's graph built from a keyword factory and rebuilt from a given graph, the clear
errors, and a graph tuned end to end on the CPU against its own settings as the rule."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from autoloader.cli import main

from autoloader.errors import UsageError
from autoloader.search.settings import METHOD, NODES
from autoloader.search.nodes import FACTORY, REBUILT, NodesGraph, graph_rule, graph_snippet, graph_space
from autoloader.search.space import LoaderConfig, search_space


def _graph(built=REBUILT, **changes) -> NodesGraph:
    fields = dict(num_workers=2, method="thread", in_order=True, max_concurrent=None, prefetch_factor=2,
                  pin_memory=False, batch_size=32, chain=("Loader", "Prefetcher", "ParallelMapper", "Batcher",
                                                          "ParallelMapper"),
                  built=built, takes=("num_workers", "method") if built == FACTORY else (), name="mod:make")
    return NodesGraph(**{**fields, **changes})


def test_dataloader_configs_keep_their_keys_and_keywords():
    config = LoaderConfig.make(128, 4, True)
    assert config.key == "bs128-w4-pin1-pf2-pw1"
    assert "method" not in config.loader_kwargs() and "loader" not in config.loader_kwargs()
    assert search_space((128,), 2, "cpu").values(METHOD) == ("thread",)


def test_a_nodes_config_names_its_knobs_and_reads_back():
    config = LoaderConfig.make(64, 4, False, loader=NODES, method="process", max_concurrent=4, prefetch_factor=8)
    assert config.key == "bs64-w4-pin0-pf8-nodes-proc-mc4"
    kwargs = config.loader_kwargs()
    assert kwargs["method"] == "process" and "persistent_workers" not in kwargs
    assert LoaderConfig.from_dict(kwargs) == config
    # ParallelMapper refuses a cap past its workers: below it, the knob holds its default.
    assert LoaderConfig.make(64, 2, False, loader=NODES, max_concurrent=4).max_concurrent is None


def test_the_graph_as_given_is_the_rule_and_in_the_space():
    graph = _graph(max_concurrent=2, method="process")
    rule = graph_rule(graph, 32, cuda=False)
    assert (rule.num_workers, rule.method, rule.max_concurrent) == (2, "process", 2)
    space = graph_space(search_space((32,), 2, "cpu", loader=NODES), graph, rule)
    assert space.contains(rule) and set(space.values(METHOD)) == {"thread", "process"}
    # A factory's knob it does not take stays at the graph's value.
    fixed = graph_space(search_space((32,), 2, "cpu", loader=NODES), _graph(FACTORY, takes=("num_workers",)), rule)
    assert dict(fixed.choices)["method"] == ("process",)


def test_the_snippet_builds_the_tuned_graph():
    config = LoaderConfig.make(32, 3, False, loader=NODES, method="process", prefetch_factor=4)
    rebuilt = graph_snippet(config, _graph(), "1/s")
    assert "ParallelMapper(source, map_fn, num_workers=3, method='process'" in rebuilt
    assert "Prefetcher(node, prefetch_factor=4)" in rebuilt and "Batcher(node, batch_size=32)" in rebuilt
    made = graph_snippet(config, _graph(FACTORY), "1/s")
    assert "from mod import make" in made and "graph = make(num_workers=3, method='process')" in made


# --- with torchdata --------------------------------------------------------------------------

def test_a_graph_is_rebuilt_and_a_factory_called_per_config():
    pytest.importorskip("torchdata.nodes")
    import nodes_workloads

    from autoloader.probe.nodes import Pipeline, stop

    config = LoaderConfig.make(16, 2, False, loader=NODES, prefetch_factor=4)
    for given, built in ((nodes_workloads.make, FACTORY), (nodes_workloads.graph, REBUILT)):
        pipeline = Pipeline(given, "nodes_workloads:x")
        assert pipeline.graph.built == built and pipeline.graph.num_workers == 1
        assert pipeline.graph.batch_size == 32 and pipeline.graph.prefetch_factor == 2
        loader = pipeline.build(config)
        batch = next(iter(loader))
        stop(loader)
        assert tuple(batch.shape) == (16, 32)
        mapper = next(n for n in _walk(loader.root) if type(n).__name__ == "ParallelMapper" and n.num_workers)
        prefetch = next(n for n in _walk(loader.root) if type(n).__name__ == "Prefetcher")
        assert mapper.num_workers == 2 and prefetch.prefetch_factor == 4


def _walk(node):
    while node is not None:
        yield node
        node = getattr(node, "source", None)


def test_a_graph_without_a_parallel_mapper_is_a_usage_error():
    pytest.importorskip("torchdata.nodes")
    import nodes_workloads

    from autoloader.probe.nodes import Pipeline

    with pytest.raises(UsageError, match="must hold a ParallelMapper.*Loader -> Batcher -> SamplerWrapper"):
        Pipeline(nodes_workloads.no_mapper, "nodes_workloads:no_mapper")


def test_without_torchdata_the_error_says_how_to_install_it(monkeypatch):
    from autoloader.probe import nodes

    monkeypatch.setitem(sys.modules, "torchdata.nodes", None)
    monkeypatch.setitem(sys.modules, "torchdata", None)
    with pytest.raises(UsageError, match=r"needs torchdata installed.*pip install autoloader\[nodes\]"):
        nodes.torchdata_nodes()


@pytest.mark.slow
def test_a_graph_is_tuned_end_to_end_and_its_pick_ties_or_beats_its_own_settings(tmp_path):
    pytest.importorskip("torchdata.nodes")
    from autoloader import tune
    from autoloader.search.choice import FINAL_TIE
    from autoloader.tuning.progress import table

    out = str(tmp_path / "out")
    import nodes_workloads

    result = tune(nodes_workloads.make, batch_size=32, budget=60, device="cpu", out=out)
    assert result.nodes is not None and result.config.loader == NODES and result.rule.loader == NODES
    rule = next(f for f in result.finals if f.config == result.rule) if result.rule != result.config else None
    if rule is not None:   # measured in the same final, as the cpus-1 rule is for a DataLoader
        assert result.samples_per_s >= rule.median * (1.0 - FINAL_TIE)
    text = table(result)
    assert "tuned torchdata.nodes graph" in text and "graph as given" in text and "loader" in text
    assert "torchdata.nodes graph tuned by autoloader" in open(result.snippet_path).read()
    shown = CliRunner().invoke(main, ["show", result.dataset_key, "--out", out]).output
    assert "the tuned torchdata.nodes graph" in shown and "graph = make(" in shown and "method=" in shown
