"""The self-contained snippet written beside each result: the tuned DataLoader without autoloader."""

from __future__ import annotations

import inspect

from .. import seeding
from ..search.config import TunedConfig, iterable_key
from ..search.nodes import NodesGraph, graph_snippet
from ..events.lines import rate

# What make_loader's docstring says of the order: an IterableDataset takes no shuffle.
_ORDER = {False: "It shuffles,\n    as the trials did, unless given shuffle=, sampler= or batch_sampler=.",
          True: "It does not\n    shuffle: the dataset tuned is an IterableDataset, whose stream sets the order."}


def snippet(tuned: TunedConfig, nodes: NodesGraph | None = None) -> str:
    """Python source that defines ``seed_worker`` and ``make_loader(dataset)`` without importing
    autoloader (seeding.py copied in whole); for a torchdata.nodes graph, the source that builds it."""
    if nodes is not None:
        return graph_snippet(tuned.config, nodes, f"{tuned.samples_per_s:,.0f} samples/s on {tuned.device}")
    kwargs = ", ".join(f"{k}={v!r}" for k, v in tuned.config.loader_kwargs().items())
    module_doc, seeding_source = inspect.getsource(seeding).split('"""', 2)[1:]
    seeding_source = seeding_source.lstrip("\n")
    # The seeds' NOTE, which seed_worker's docstring refers to, travels with it: the snippet says
    # what it does without the package beside it.
    note = module_doc[module_doc.index("# NOTE [ Worker seeds ]"):].rstrip()
    # seeding imports torch inside the worker only; make_loader below needs it at module level.
    seeding_source = seeding_source.replace("import numpy as np\n", "import numpy as np\nimport torch\n", 1)
    measured = f"{rate(tuned.samples_per_s, ' samples/s')} on {tuned.device}"
    return (f'"""DataLoader tuned by autoloader for {tuned.dataset_key} ({measured}).\n\n'
            f'Self-contained: needs torch and numpy only.\n"""\n'
            f"{note}\n\n{seeding_source}\n\n"
            f"LOADER_KWARGS = dict({kwargs})\n\n\n"
            "def make_loader(dataset, generator=None, **overrides):\n"
            '    """The tuned DataLoader; pass generator=torch.Generator().manual_seed(s) for runs\n'
            '    that repeat exactly, and any other DataLoader argument as an override. '
            f'{_ORDER[iterable_key(tuned.dataset_key)]}"""\n'
            "    kwargs = {**LOADER_KWARGS, **overrides}\n"
            "    if kwargs.get(\"num_workers\", 0) > 0:\n"
            "        kwargs.setdefault(\"worker_init_fn\", seed_worker)\n"
            "    if not isinstance(dataset, torch.utils.data.IterableDataset) and not (\n"
            "            {\"sampler\", \"batch_sampler\"} & kwargs.keys()):\n"
            "        kwargs.setdefault(\"shuffle\", True)\n"
            "    return torch.utils.data.DataLoader(dataset, generator=generator, **kwargs)\n")
