"""torchdata.nodes graphs in the trial process: recognised, read, rebuilt per config, profiled.

# NOTE [ Tuning a torchdata.nodes graph ]
# A graph (a ``Loader`` or its root ``BaseNode``), a zero-argument factory of one, or a factory
# taking the knobs as keywords (``make(num_workers=..., method=..., in_order=..., max_concurrent=...,
# prefetch_factor=..., pin_memory=..., batch_size=...)``, any subset, with defaults) is tuned like
# a Dataset. Its own settings are read off the graph (``NodesGraph``: the ParallelMapper nearest
# the root, the Prefetcher and PinMemory above it, the Batcher's batch size) and measured in the
# final as the rule (search/nodes.py), in the place of the DataLoader's cpus-1 rule.
# A trial's graph is built per config:
#   a keyword factory is called with the config's values for the keywords it takes (the others
#   stay the graph's): the user's own code builds it, so any node works; the robust way;
#   a graph, or a zero-argument factory's, is rebuilt from its parts: everything below the
#   ParallelMapper reused (reset() restarts it each epoch), the ParallelMapper made anew with the
#   config's knobs, a Prefetcher and a Batcher above it anew with its depth and batch size,
#   PinMemory kept or dropped as it pins (added under the top Prefetcher when it pins and the graph
#   has none), any other node above copied with its source replaced (one of several sources needs
#   a factory); a graph without a Prefetcher gets one at the config's depth on top.
# The ParallelMapper's workers are threads or processes of the trial process (never a DataLoader's),
# started per epoch (the Loader resets the graph), and stopped after each trial (``stop``).
"""

from __future__ import annotations

import copy
import inspect
import time
from typing import Any

from ..batches import bytes_in, samples_in
from ..errors import usage
from ..search.settings import NODES
from ..search.nodes import FACTORY, FACTORY_KEYWORDS, REBUILT, TORCHDATA_FIX, NodesGraph
from ..search.space import LoaderConfig
from .timing import timed_batches

__all__ = ["Pipeline", "inline", "inspect_graph", "is_nodes", "load", "stop", "torchdata_nodes"]


def load(source) -> Any:
    """The dataset spec's object; a module that needs torchdata, missing, is a usage error."""
    try:
        return source.load()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "torchdata":
            raise usage("a torchdata.nodes graph needs torchdata installed", f"{source.name}: {exc}",
                        TORCHDATA_FIX) from None
        raise


def inline(runner, batch_size: int | None = None) -> LoaderConfig:
    """The graph's config without workers, at ``batch_size`` (None: the set-up's probe size)."""
    return LoaderConfig.make(batch_size or runner.setup.probe_batch_size, 0, False, loader=NODES)


def inspect_graph(runner):
    """The set-up's look at a graph (``_Runner.inspect``): one batch made inline, timed."""
    from ..inputs.code_digest import code_fingerprint

    pipeline = runner.pipeline
    t0 = time.perf_counter()
    try:
        batch = pipeline.first_batch(inline(runner))
    except StopIteration:
        raise usage("the graph must yield at least one batch", "it yielded none", "check its source") from None
    return runner.info(batch, time.perf_counter() - t0, max(1, samples_in(batch)), length=None, nodes=pipeline.graph,
                       code=code_fingerprint(pipeline.template, runner.step, {"map_fn": pipeline.chain[-1].map_fn}))


def torchdata_nodes():
    """The torchdata.nodes module, or the usage error that says how to install it."""
    try:
        import torchdata.nodes as tn
    except ImportError as exc:
        raise usage("a torchdata.nodes graph needs torchdata installed", f"ImportError: {exc}",
                    TORCHDATA_FIX) from None
    return tn


def _from_torchdata(obj: Any) -> bool:
    return type(obj).__module__.startswith("torchdata.nodes")


def _keywords(fn: Any) -> tuple[str, ...] | None:
    """The knob keywords a callable takes (all of them for **kwargs), None for none."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return FACTORY_KEYWORDS
    taken = tuple(k for k in FACTORY_KEYWORDS if k in params)
    return taken or None


def is_nodes(obj: Any) -> bool:
    """Whether ``obj`` is a torchdata.nodes graph or a factory taking the knob keywords."""
    if _from_torchdata(obj):
        return True
    return callable(obj) and not isinstance(obj, type) and _keywords(obj) is not None \
        and not hasattr(obj, "__getitem__") and not hasattr(obj, "__iter__")


def given_graph(obj: Any) -> Any:
    """What the trial process tunes for a dataset spec's object: a zero-argument factory (a
    function, not a class or a Dataset) is called here, and a graph it returns is the graph;
    anything else it returned is handed on as a factory of it, for resolve_dataset's checks."""
    if _from_torchdata(obj) or isinstance(obj, type) or not callable(obj) or _keywords(obj) is not None \
            or (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")) or hasattr(obj, "__iter__"):
        return obj
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return obj
    if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return obj
    made = obj()
    return made if _from_torchdata(made) else (lambda: made)


def _chain(root: Any, tn) -> list:
    """The nodes from ``root`` down to the ParallelMapper tuned (usage error: none): the nearest
    with workers, else the deepest (a ``Mapper``, a collate's often, has no workers)."""
    chain, node, seen, mappers = [], root, [], []
    while node is not None and len(chain) < 256:
        chain.append(node)
        if isinstance(node, tn.ParallelMapper):
            mappers.append(len(chain))
            if node.num_workers > 0:
                return chain
        seen.append(type(node).__name__)
        node = getattr(node, "root", None) if isinstance(node, tn.Loader) else getattr(node, "source", None)
    if mappers:
        return chain[:mappers[-1]]
    raise usage("a torchdata.nodes graph to tune must hold a ParallelMapper (its workers are what is tuned)",
                " -> ".join(seen) or type(root).__name__,
                "map the samples with ParallelMapper(source, map_fn, num_workers=...) in the graph")


def _mapper(tn, old, source, **changes):
    """``old``, a ParallelMapper, made anew over ``source`` with ``changes`` (its __init__ builds
    its workers' iterator: its attributes cannot just be set)."""
    src, map_fn = old.source, old.map_fn
    if old.prebatch is not None:   # ParallelMapper wrapped them itself: give it the originals
        src, map_fn = src.source, map_fn.map_fn
    settings = {"num_workers": old.num_workers, "in_order": old.in_order, "method": old.method,
                "multiprocessing_context": old.multiprocessing_context, "max_concurrent": old.max_concurrent,
                "snapshot_frequency": old.snapshot_frequency, "prebatch": old.prebatch, **changes}
    return tn.ParallelMapper(src if source is None else source, map_fn, **settings)


class Pipeline:
    """The user's graph (or factory) and how to build it for a config."""

    def __init__(self, obj: Any, name: str):
        self.tn = tn = torchdata_nodes()
        self.name = name
        self.takes: tuple[str, ...] = ()
        if _from_torchdata(obj):
            self.factory, template, built = None, obj, REBUILT
        else:
            keywords = _keywords(obj)
            self.factory, template = obj, obj()
            built, self.takes = (FACTORY, keywords) if keywords else (REBUILT, ())
            if not isinstance(template, (tn.BaseNode, tn.Loader)):
                raise usage("a graph factory must return a torchdata.nodes BaseNode or Loader",
                            f"{name}() -> {type(template).__name__}", "return the graph's Loader or its root node")
        if not isinstance(template, (tn.BaseNode, tn.Loader)):
            raise usage("a torchdata.nodes graph is a BaseNode or a Loader", type(template).__name__,
                        "pass the graph's Loader, its root node or a factory of one")
        if built == REBUILT:
            self.factory = None
        self.template, self.built = template, built
        self.chain = _chain(template, tn)
        mapper = self.chain[-1]
        prefetch = next((n for n in self.chain if isinstance(n, tn.Prefetcher)), None)
        batcher = next((n for n in self.chain if isinstance(n, tn.Batcher)), None)
        self.graph = NodesGraph(
            num_workers=mapper.num_workers, method=mapper.method, in_order=mapper.in_order,
            max_concurrent=mapper.max_concurrent, prefetch_factor=prefetch.prefetch_factor if prefetch else None,
            pin_memory=any(isinstance(n, tn.PinMemory) for n in self.chain),
            batch_size=batcher.batch_size if batcher else None,
            chain=tuple(type(n).__name__ for n in self.chain), built=built, takes=self.takes, name=name)

    def build(self, config: LoaderConfig):
        """A fresh Loader of the graph with ``config``'s knobs (NOTE [ Tuning a torchdata.nodes graph ])."""
        tn = self.tn
        if self.factory is not None:
            values = {**config.to_dict(), "method": config.method if config.num_workers else self.graph.method,
                      "prefetch_factor": config.prefetch_factor if config.prefetch_factor is not None
                      else self.graph.prefetch_factor}
            graph = self.factory(**{k: values[k] for k in self.takes})
            return graph if isinstance(graph, tn.Loader) else tn.Loader(graph)
        mapper = self.chain[-1]
        node = _mapper(tn, mapper, None, num_workers=config.num_workers, in_order=config.in_order,
                       method=config.method if config.num_workers else mapper.method,
                       max_concurrent=config.max_concurrent if config.num_workers else None)
        depth, pinned, loader = config.prefetch_factor, False, None
        for old in reversed(self.chain[:-1]):
            if isinstance(old, tn.Loader):
                loader = old
            elif isinstance(old, tn.ParallelMapper):   # another map above (a Mapper's collate)
                node = _mapper(tn, old, node)
            elif isinstance(old, tn.Batcher):
                node = tn.Batcher(node, batch_size=config.batch_size, drop_last=old.drop_last)
            elif isinstance(old, tn.PinMemory):
                if config.pin_memory:
                    node, pinned = tn.PinMemory(node, old._pin_memory_device or ""), True
            elif isinstance(old, tn.Prefetcher):
                if config.pin_memory and not pinned:
                    node, pinned = tn.PinMemory(node), True
                node = tn.Prefetcher(node, prefetch_factor=depth or old.prefetch_factor,
                                     snapshot_frequency=old.snapshot_frequency)
                depth = None
            else:
                if not hasattr(old, "source"):
                    raise usage("a graph rebuilt per trial has one source per node above its ParallelMapper",
                                type(old).__name__, "pass a factory taking the knobs as keywords instead "
                                "(NOTE [ Tuning a torchdata.nodes graph ])")
                old = copy.copy(old)
                old.source = node
                node = old
        if config.pin_memory and not pinned:
            node = tn.PinMemory(node)
        if depth is not None:
            node = tn.Prefetcher(node, prefetch_factor=depth)
        return tn.Loader(node, restart_on_stop_iteration=loader.restart_on_stop_iteration if loader else True)

    def first_batch(self, config: LoaderConfig):
        loader = self.build(config)
        try:
            return next(iter(loader))
        finally:
            stop(loader)


def stop(obj: Any, depth: int = 0) -> None:
    """A graph's iterators' threads and processes stopped now, root to leaves: a finished trial's
    workers must not run into the next one."""
    if obj is None or depth > 64:
        return
    from .workers import shut_down

    it = getattr(obj, "_it", None)
    shut_down(it, "_shutdown")
    if it is not None and it is not obj:
        stop(it, depth + 1)
    for attr in ("root", "source"):
        child = getattr(obj, attr, None)
        if child is not None and child is not obj:
            stop(child, depth + 1)


def profile_nodes(pipeline: Pipeline, config: LoaderConfig, consume, beat, batches: int = 12):
    """The graph's profile: its batches made inline, each timed, the consumer on one, one worker's
    start-up at the graph's method; the parts a graph has not (collate apart, the receive) 0."""
    from ..search.profile import Profile
    from .profiler import usable_cpus

    t_begin = time.perf_counter()
    inline = config.replace(num_workers=0, pin_memory=False)
    loader = pipeline.build(inline)
    times, sizes, batch = [], [], None
    try:
        for batch, called, returned in timed_batches(iter(loader)):
            times.append(returned - called)
            sizes.append(max(1, samples_in(batch)))
            beat()
            if len(times) == batches:
                break
    finally:
        stop(loader)
    if not times:
        raise usage("the graph must yield at least one batch", "it yielded none", "check its source")
    steps = []
    for _ in range(3):
        t0 = time.perf_counter()
        consume(batch)
        steps.append(time.perf_counter() - t0)
    one = config.replace(num_workers=1, method=pipeline.graph.method, pin_memory=False)
    loader = pipeline.build(one)
    try:
        t0 = time.perf_counter()
        next(iter(loader))
        startup = max(0.0, time.perf_counter() - t0 - sorted(times)[len(times) // 2])
    finally:
        stop(loader)
    sample_s = tuple(t / n for t, n in zip(times, sizes))
    return Profile(batch_size=config.batch_size, sample_s=sample_s, collate_s=0.0,
                   sample_bytes=max(1, bytes_in(batch) // sizes[-1]), recv_s=0.0, pin_s=None,
                   h2d_pinned_s=None, h2d_pageable_s=None, step_s=sorted(steps)[1], startup_s=startup,
                   worker_pss=None, cpus=usable_cpus(), epoch_batches=None,
                   seconds=time.perf_counter() - t_begin)
