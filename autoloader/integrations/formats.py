"""A tuned result in the forms the training frameworks take, with no framework (and no torch)
imported: DataLoader keyword arguments, ``TrainingArguments``' ``dataloader_*`` fields, and the
source of a Lightning ``train_dataloader`` (what ``autoloader show --format`` prints). Every
function takes a result in any form (``result_settings``): a ``TuneResult``, a ``TunedConfig``, a
``LoaderConfig``, a stored result's JSON, a DataLoader keyword mapping, or a built DataLoader.
"""

from __future__ import annotations

from typing import Any

from ..errors import usage
from ..search.config import iterable_key
from ..search.settings import NODES, REQUIRED, SETTINGS, Knob
from ..search.space import LoaderConfig

# The forms ``render`` knows: the one list (cli.py's ``--format`` choices read it).
FORMATS = ("kwargs", "hf", "lightning")


def hf_knobs() -> list[Knob]:
    """The knobs a ``TrainingArguments`` field expresses (each knob's ``hf``), in the order the
    fields are printed; the batch size's (the user's, honoured by the tune) only on request."""
    return sorted((k for k in SETTINGS if k.hf is not None), key=lambda k: k.hf.rank)


def result_settings(result: Any) -> LoaderConfig:
    """The tuned settings of ``result``, whichever form it comes in (module docstring)."""
    result = getattr(result, "tuned", result)   # a TuneResult's TunedConfig
    for config in (getattr(result, "config", None), result):   # a TunedConfig's, or a LoaderConfig
        if isinstance(config, LoaderConfig):
            return config
    if isinstance(result, dict):
        data = result.get("config", result)       # a stored result, or its "config" alone
        if isinstance(data, dict) and _required() <= data.keys():
            return LoaderConfig.from_dict(data)
    elif all(hasattr(result, name) for name in _required()):
        if result.batch_size is None:   # a DataLoader built from a batch_sampler keeps no batch size
            raise usage("the loader must have a batch size to read its settings", result,
                        "pass the TuneResult or TunedConfig instead, or a loader built with batch_size=")
        # A DataLoader keeps each setting as its attribute (one an older torch lacks: its default).
        values = {k.name: k.from_loader(result) if k.from_loader is not None
                  else getattr(result, k.name, None if k.default is REQUIRED else k.default) for k in SETTINGS}
        return LoaderConfig.make(**{name: bool(v) if SETTINGS[name].kind is bool else v for name, v in values.items()})
    raise usage("the result must be a TuneResult, a TunedConfig, a LoaderConfig, a stored result or a DataLoader",
                type(result).__name__, "pass what tune() returns, result.tuned, or the JSON a result file holds")


def dataloader_kwargs(result: Any) -> dict:
    """The tuned settings as ``DataLoader`` keyword arguments (no ``worker_init_fn``: add
    autoloader's ``seed_worker`` when ``num_workers > 0``, as ``TunedConfig.loader_kwargs`` does)."""
    return result_settings(result).loader_kwargs()


def training_arguments(result: Any, *, batch_size: bool = False) -> dict:
    """The tuned settings as ``TrainingArguments`` fields (``hf_knobs``; an ``omit_default`` knob's
    only where the pick sets it, which needs a transformers that has it). ``batch_size=True`` adds
    ``per_device_train_batch_size``, for a tune that searched it."""
    config = result_settings(result)
    return {k.hf.name: config[k] for k in hf_knobs()
            if (batch_size or not k.hf.on_request) and not (k.omit_default and config[k] == k.default)}


def tuned_iterable(result: Any) -> bool:
    """Whether ``result`` was tuned on an IterableDataset (which DataLoader refuses ``shuffle``
    for), as its key or its DataLoader's dataset says; False where its form does not say."""
    if getattr(result, "_dataset_kind", None) == 1:   # a DataLoader over an IterableDataset
        return True
    tuned = getattr(result, "tuned", result)
    key = getattr(tuned, "dataset_key", None) or (result.get("dataset_key") if isinstance(result, dict) else None)
    return iterable_key(key)


def lightning_source(result: Any, iterable: bool | None = None) -> str:
    """Python source of a ``train_dataloader`` method with the tuned settings over
    ``self.train_dataset``; shuffled unless tuned on an IterableDataset (``iterable``, else read
    from the result)."""
    config = result_settings(result)
    iterable = tuned_iterable(result) if iterable is None else iterable
    args = ["self.train_dataset", *([] if iterable else ["shuffle=True"]), *_keywords(config.loader_kwargs())]
    lines = ["def train_dataloader(self):", "    from torch.utils.data import DataLoader"]
    if config.num_workers:
        lines.append("    from autoloader import seed_worker")
        args.append("worker_init_fn=seed_worker")
    lines.append(f"    return DataLoader({', '.join(args)})")
    return "\n".join(lines) + "\n"


def render(result: Any, form: str) -> str:
    """``result`` as text in ``form`` (one of FORMATS): ``kwargs`` the DataLoader keyword
    arguments, ``hf`` the TrainingArguments fields, both one line to paste into the call;
    ``lightning`` the ``train_dataloader`` method."""
    if result_settings(result).loader == NODES:
        return _nodes_form(result, form)
    if form == "kwargs":
        return ", ".join(_keywords(dataloader_kwargs(result))) + "\n"
    if form == "hf":
        return ", ".join(_keywords(training_arguments(result))) + "\n"
    if form == "lightning":
        return lightning_source(result)
    raise usage(f"the format must be one of {', '.join(FORMATS)}", form,
                f"pass --format {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")


def _nodes_form(result: Any, form: str) -> str:
    """A torchdata.nodes graph's pick in ``form``, which no DataLoader takes: ``kwargs`` is the code
    that builds the tuned graph, ``lightning`` a ``train_dataloader`` calling its factory; ``hf``,
    or ``lightning`` for a graph given built (no factory to call), is a usage error."""
    from ..search.nodes import FACTORY, graph_snippet

    graph = getattr(result, "nodes", None)
    config = result_settings(result)
    if graph is None or form == "hf":
        raise usage(f"--format {form} prints a DataLoader's settings; this result tuned a torchdata.nodes graph, "
                    "whose settings (method, in_order, max_concurrent) no DataLoader takes", form,
                    "run autoloader show KEY (it prints the code that builds the tuned graph), or --format kwargs")
    if form == "kwargs":
        return graph_snippet(config, graph, f"{config.batch_size} per batch")
    if graph.built != FACTORY:
        raise usage("--format lightning calls the graph's factory; this graph was given built, so there is none "
                    "to call", graph.name, "pass --format kwargs (the code that builds the tuned graph), or tune a "
                    "factory taking the knobs as keywords (README: torchdata.nodes)")
    code = graph_snippet(config, graph, "").splitlines()
    body = [line for line in code[1:] if line.strip()]   # the import (if any) and `graph = make(...)`
    call = body[-1].split("=", 1)[1].strip()
    lines = ["def train_dataloader(self):", *[f"    {line}" for line in body[:-1]], f"    return {call}"]
    return "\n".join(lines) + "\n"


def _required() -> set[str]:
    """The settings every config names: a mapping or an object with them is a config's."""
    return {k.name for k in SETTINGS if k.default is REQUIRED}


def _keywords(kwargs: dict) -> list[str]:
    return [f"{name}={value!r}" for name, value in kwargs.items()]
