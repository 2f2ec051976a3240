"""torchdata.nodes graphs for the tests of search/nodes.py and probe/nodes.py: a graph whose
mapping burns CPU in Python (threads share one GIL, processes do not), as a built graph, a
zero-argument factory of one, and a factory taking the knobs as keywords. Module-level, so that
a trial process imports them by name."""

from __future__ import annotations

import time

import torch


COST_S = 0.0004      # a sample's CPU, in Python (holds the GIL)
LENGTH = 4096


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def load(index: int) -> torch.Tensor:
    _burn(COST_S)
    return torch.full((32,), float(index))


def collate(items):
    return torch.stack(items)


def make(num_workers: int = 1, method: str = "thread", in_order: bool = True, max_concurrent=None,
         prefetch_factor: int = 2, pin_memory: bool = False, batch_size: int = 32):
    """The graph, built from the tuned knobs: the way NOTE [ Tuning a torchdata.nodes graph ] calls robust."""
    import torchdata.nodes as tn

    node = tn.SamplerWrapper(torch.utils.data.RandomSampler(range(LENGTH)))
    node = tn.ParallelMapper(node, load, num_workers=num_workers, method=method, in_order=in_order,
                             max_concurrent=max_concurrent)
    node = tn.Batcher(node, batch_size=batch_size, drop_last=True)
    node = tn.Mapper(node, collate)
    if pin_memory:
        node = tn.PinMemory(node)
    return tn.Loader(tn.Prefetcher(node, prefetch_factor=prefetch_factor))


def graph():
    """A zero-argument factory: the graph as a user would build it (rebuilt per trial)."""
    return make()


def no_mapper():
    import torchdata.nodes as tn

    return tn.Loader(tn.Batcher(tn.SamplerWrapper(torch.utils.data.SequentialSampler(range(64))), batch_size=8))
