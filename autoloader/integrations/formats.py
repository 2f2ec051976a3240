"""A tuned result in the forms the training frameworks take, with no framework (and no torch)
imported: DataLoader keyword arguments, ``TrainingArguments``' ``dataloader_*`` fields, and the
source of a Lightning ``train_dataloader``. What ``autoloader show --format`` prints.

Every function takes any form a result comes in (``result_settings``): a ``TuneResult``, a
``TunedConfig``, a ``LoaderConfig``, a stored result as read from its JSON file (or printed by
``autoloader show --json``), a DataLoader keyword mapping, or a built DataLoader.
"""

from __future__ import annotations

from typing import Any

from ..errors import usage
from ..search.config import iterable_key
from ..search.space import LoaderConfig

# The forms ``render`` (and ``--format``) knows.
FORMATS = ("kwargs", "hf", "lightning")

# TrainingArguments' field for each DataLoader setting autoloader tunes (batch size aside: it is
# per_device_train_batch_size, set by the user and honoured by the tune).
HF_FIELDS = {"num_workers": "dataloader_num_workers", "pin_memory": "dataloader_pin_memory",
             "persistent_workers": "dataloader_persistent_workers", "prefetch_factor": "dataloader_prefetch_factor"}


def result_settings(result: Any) -> LoaderConfig:
    """The tuned settings of ``result``, whichever form it comes in (module docstring)."""
    tuned = getattr(result, "tuned", None)         # a TuneResult
    if tuned is not None:
        result = tuned
    inner = getattr(result, "config", None)        # a TunedConfig
    if isinstance(inner, LoaderConfig):
        return inner
    if isinstance(result, LoaderConfig):
        return result
    if isinstance(result, dict):
        data = result.get("config", result)       # a stored result, or its "config" alone
        if isinstance(data, dict) and {"batch_size", "num_workers", "pin_memory"} <= data.keys():
            return LoaderConfig.from_dict(data)
    elif all(hasattr(result, name) for name in ("batch_size", "num_workers", "pin_memory", "persistent_workers")):
        if result.batch_size is None:   # a DataLoader built from a batch_sampler keeps no batch size
            raise usage("the loader must have a batch size to read its settings", result,
                        "pass the TuneResult or TunedConfig instead, or a loader built with batch_size=")
        workers = result.num_workers
        return LoaderConfig.make(result.batch_size, workers, bool(result.pin_memory),
                                 getattr(result, "prefetch_factor", None) if workers else None,
                                 bool(result.persistent_workers), bool(getattr(result, "in_order", True)))
    raise usage("the result must be a TuneResult, a TunedConfig, a LoaderConfig, a stored result or a DataLoader",
                type(result).__name__, "pass what tune() returns, result.tuned, or the JSON a result file holds")


def dataloader_kwargs(result: Any) -> dict:
    """The tuned settings as ``DataLoader`` keyword arguments (no ``worker_init_fn``: add
    autoloader's ``seed_worker`` when ``num_workers > 0``, as ``TunedConfig.loader_kwargs`` does)."""
    return result_settings(result).loader_kwargs()


def training_arguments(result: Any, *, batch_size: bool = False) -> dict:
    """The tuned settings as ``TrainingArguments`` fields: the four ``dataloader_*`` ones (and
    ``dataloader_in_order=False`` when the pick reorders, which needs a transformers that has
    it). ``batch_size=True`` adds ``per_device_train_batch_size``, for a tune that searched it."""
    config = result_settings(result)
    fields = {HF_FIELDS[name]: getattr(config, name) for name in HF_FIELDS}
    if not config.in_order:
        fields["dataloader_in_order"] = False
    if batch_size:
        fields["per_device_train_batch_size"] = config.batch_size
    return fields


def tuned_iterable(result: Any) -> bool:
    """Whether ``result`` was tuned on an IterableDataset (which DataLoader refuses ``shuffle``
    for): its problem's key says so (a TuneResult, a TunedConfig, a stored result), or the
    DataLoader's dataset is iterable. False where the form does not say (a LoaderConfig, keyword
    arguments)."""
    if getattr(result, "_dataset_kind", None) == 1:   # a DataLoader over an IterableDataset
        return True
    tuned = getattr(result, "tuned", result)
    key = getattr(tuned, "dataset_key", None) or (result.get("dataset_key") if isinstance(result, dict) else None)
    return iterable_key(key)


def lightning_source(result: Any, iterable: bool | None = None) -> str:
    """Python source of a ``train_dataloader`` method with the tuned settings, to paste into a
    LightningModule or LightningDataModule that keeps its dataset as ``self.train_dataset``;
    shuffled unless the result was tuned on an IterableDataset (``iterable``, read from the
    result when not given)."""
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
    if form == "kwargs":
        return ", ".join(_keywords(dataloader_kwargs(result))) + "\n"
    if form == "hf":
        return ", ".join(_keywords(training_arguments(result))) + "\n"
    if form == "lightning":
        return lightning_source(result)
    raise usage(f"the format must be one of {', '.join(FORMATS)}", form, "pass --format kwargs, hf or lightning")


def _keywords(kwargs: dict) -> list[str]:
    return [f"{name}={value!r}" for name, value in kwargs.items()]
