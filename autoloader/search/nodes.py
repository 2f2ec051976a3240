"""A torchdata.nodes graph as the search sees it: its own settings, the rule they make, the
space its knobs span, and the source that builds the tuned graph (NOTE [ Tuning a torchdata.nodes
graph ] in probe/nodes.py says how a trial builds it)."""

from __future__ import annotations

from dataclasses import dataclass

from .codec import Stored
from .settings import CONCURRENCY, NODES
from .space import LoaderConfig, SearchSpace

__all__ = ["FACTORY", "NodesGraph", "REBUILT", "TORCHDATA_FIX", "graph_rule", "graph_snippet", "graph_space"]

TORCHDATA_FIX = "pip install autoloader[nodes] (torchdata 0.11)"

# How a trial gets the graph of a config: by calling the user's factory with the knobs as
# keywords, or by rebuilding the graph it was given from its parts.
FACTORY = "factory"
REBUILT = "rebuilt"

# The keywords a graph factory may take (each one it takes is tuned; the others keep the graph's).
FACTORY_KEYWORDS = ("batch_size", "num_workers", "method", "in_order", "max_concurrent", "prefetch_factor",
                    "pin_memory")


@dataclass(frozen=True)
class NodesGraph(Stored):
    """What the user's graph holds (None: no such node)."""
    num_workers: int
    method: str
    in_order: bool
    max_concurrent: int | None
    prefetch_factor: int | None
    pin_memory: bool
    batch_size: int | None
    chain: tuple[str, ...]   # the node types from the root down to the ParallelMapper
    built: str               # FACTORY or REBUILT
    takes: tuple[str, ...]   # the keywords a factory takes
    name: str                # what built it

    def tuned(self, name: str) -> bool:
        """Whether the search may move the knob ``name``."""
        return self.built == REBUILT or name in self.takes


def graph_rule(graph: NodesGraph, batch_size: int, cuda: bool) -> LoaderConfig:
    """The graph as the user built it, the final's rule (pinning only on CUDA, where PinMemory runs)."""
    return LoaderConfig.make(batch_size=batch_size, num_workers=graph.num_workers, loader=NODES,
                             method=graph.method, in_order=graph.in_order, max_concurrent=graph.max_concurrent,
                             prefetch_factor=graph.prefetch_factor, pin_memory=graph.pin_memory and cuda)


def graph_space(space: SearchSpace, graph: NodesGraph, rule: LoaderConfig) -> SearchSpace:
    """``space`` holding the rule's values (only them for a knob a factory does not take)."""
    choices = dict(space.choices)
    for name, values in list(choices.items()):
        own = rule[name]
        if name == CONCURRENCY.name or not graph.tuned(name):
            choices[name] = tuple(dict.fromkeys(((None,) if graph.tuned(name) else ()) + (own,)))
        elif own not in values and own is not None:
            choices[name] = tuple(values) + (own,)
    workers = space.max_workers if graph.tuned("num_workers") else rule.num_workers
    return SearchSpace(space.batch_sizes, max(workers, rule.num_workers), unlocked=space.unlocked, **choices)


def graph_snippet(config: LoaderConfig, graph: NodesGraph, rate: str) -> str:
    """Python source that builds the tuned graph: the factory's call, or its nodes rebuilt."""
    kw = config.loader_kwargs()
    mapper = {"num_workers": config.num_workers, "method": config.method if config.num_workers else graph.method,
              "in_order": config.in_order, "max_concurrent": config.max_concurrent}
    head = f'"""torchdata.nodes graph tuned by autoloader for {graph.name} ({rate})."""\n'
    if graph.built == FACTORY:
        module, _, attr = graph.name.partition(":") if ":" in graph.name else graph.name.rpartition(".")
        # As a trial calls it (probe/nodes.py): without workers, the graph's own depth.
        own = {"prefetch_factor": config.prefetch_factor if config.prefetch_factor is not None
               else graph.prefetch_factor}
        call = {k: mapper[k] if k in mapper else own[k] if k in own else kw.get(k, config[k])
                for k in FACTORY_KEYWORDS if k in graph.takes}
        args = ", ".join(f"{k}={v!r}" for k, v in call.items())
        load = f"from {module} import {attr}\n\n" if attr and module and module not in ("__main__", "__mp_main__") \
            else f"# {attr or graph.name}: your graph's factory\n"
        return f"{head}{load}graph = {attr or graph.name}({args})\n"
    names = sorted({"Loader", "ParallelMapper", "PinMemory", "Prefetcher"} | ({"Batcher"} & set(graph.chain)))
    lines = [head, f"from torchdata.nodes import {', '.join(names)}\n\n",
             "# source, map_fn: your graph's, as it was given (nodes below the ParallelMapper unchanged).\n",
             "node = ParallelMapper(source, map_fn, " + ", ".join(f"{k}={v!r}" for k, v in mapper.items()) + ")\n"]
    depth = config.prefetch_factor if config.prefetch_factor is not None else graph.prefetch_factor
    pin, pinned = config.pin_memory, False   # a PinMemory node at least once, below any Prefetcher
    for kind in reversed(graph.chain[:-1]):
        if kind == "Batcher":
            lines.append(f"node = Batcher(node, batch_size={config.batch_size})  # and your drop_last\n")
        elif kind in ("PinMemory", "Prefetcher"):
            if pin and (kind == "PinMemory" or not pinned):
                lines.append("node = PinMemory(node)\n")
                pinned = True
            if kind == "Prefetcher":
                lines.append(f"node = Prefetcher(node, prefetch_factor={depth})\n")
                depth = None
        elif kind != "Loader":
            lines.append(f"node = {kind}(node, ...)  # as in your graph\n")
    if pin and not pinned:
        lines.append("node = PinMemory(node)\n")
    if depth is not None:
        lines.append(f"node = Prefetcher(node, prefetch_factor={depth})\n")
    lines.append("loader = Loader(node)\n")
    return "".join(lines)
