"""Hugging Face ``Trainer``: its ``dataloader_*`` arguments, tuned for its own train loader.

``tune_trainer(trainer)`` tunes (or finds the stored result for) what
``Trainer.get_train_dataloader`` loads: ``trainer.train_dataset``, shuffled, in batches of
``args.train_batch_size``, through the collator as the Trainer wraps it (dropping the columns
``model.forward`` does not take when ``remove_unused_columns``), ``drop_last`` and the
multiprocessing context as ``args`` say; then it sets the ``args.dataloader_*`` field of each
tuned setting that has one (``formats.hf_knobs()``), which the Trainer reads each time it builds a
loader. Without a Trainer, ``TrainingArguments(..., **training_arguments(result))``.

The collator and the dataset reach the trial process pickled (it is started with spawn): a
lambda or a closure does not travel, and ``tune_trainer`` refuses it before any trial. Under
``torchrun`` / ``accelerate launch`` the ranks tune together (NOTE [ Tuning a node's ranks ] in
node/__init__.py), each trial reading a DistributedSampler shard per rank, as the Trainer's
prepared loader reads its shard of the batches.
"""

from __future__ import annotations

import pickle
import re
from typing import Any

from ..api import applying, best_loader
from ..errors import usage
from ..search.settings import SETTINGS
from . import require
from .formats import training_arguments

__all__ = ["TrainerCollator", "training_arguments", "tune_trainer"]


class TrainerCollator:
    """The Trainer's collator as its train loader applies it, named by what it wraps: the stored
    result's key names the DataLoader arguments by their ``repr``, the same for every collator the
    Trainer's column-dropping wrapper holds, so a new collator or columns kept is a new key. A batch
    that is a mapping but no dict (a ``BatchEncoding``) is handed on as a dict, whose tensors the
    trial's default consumer moves to the device (the same tensors, pinning and copy)."""

    def __init__(self, collate: Any, name: str):
        self.collate = collate
        self.name = name

    def __call__(self, features):
        from collections.abc import Mapping

        batch = self.collate(features)
        return dict(batch) if isinstance(batch, Mapping) and not isinstance(batch, dict) else batch

    def __repr__(self) -> str:
        return f"TrainerCollator({self.name})"


def trainer_inputs(trainer: Any) -> tuple[Any, dict]:
    """(the dataset as the Trainer reads it, the DataLoader arguments it fixes) of
    ``trainer.get_train_dataloader``, less the tuned settings and the sampler (the tune shuffles,
    as the Trainer's RandomSampler); a UsageError when it has no train dataset."""
    args = trainer.args
    dataset = trainer.train_dataset
    if dataset is None:
        raise usage("tune_trainer needs the trainer's train dataset", None,
                    "pass Trainer(train_dataset=...) before calling tune_trainer")
    collate = trainer.data_collator
    inner = collate
    if type(dataset).__module__.split(".")[0] == "datasets" and hasattr(dataset, "column_names"):
        # A datasets.Dataset loses its unused columns up front; the collator stays as it is.
        dataset = trainer._remove_unused_columns(dataset, description="Training")
    elif getattr(args, "remove_unused_columns", False):
        collate = trainer._get_collator_with_removed_columns(collate, description="Training")
    name = _plain(repr(inner))
    kept = getattr(collate, "signature_columns", None)
    if kept is not None:
        name += f", keeping {sorted(set(kept))}"
    fixed: dict = {"collate_fn": TrainerCollator(collate, name)}
    if args.dataloader_drop_last:
        fixed["drop_last"] = True
    if getattr(args, "dataloader_multiprocessing_context", None):
        fixed["multiprocessing_context"] = args.dataloader_multiprocessing_context
    return dataset, fixed


def tune_trainer(trainer: Any, **options) -> dict:
    """Tune ``trainer``'s train loader (module docstring), set its ``args``' ``dataloader_*``
    fields (``training_arguments``; a gated knob's field where this transformers has it), and
    return the fields set. The batch size is the trainer's own.

    Args:
        trainer: a ``transformers.Trainer`` with a train dataset and a picklable collator.
        **options: ``best_loader()``'s arguments (``progress`` among them), but no batch size and
            none of the DataLoader arguments the trainer fixes.

    Returns:
        The ``TrainingArguments`` fields set, by name (``dataloader_num_workers``, ...).

    Raises:
        MissingFramework: transformers is not installed.
        UsageError: a batch size or a DataLoader argument the trainer fixes was passed, the
            collator does not pickle, or an input breaks a rule.
        NoFeasibleConfig, AutoloaderError: as ``best_loader()`` does.
    """
    transformers = require("transformers", "transformers", "autoloader.integrations.huggingface.tune_trainer")
    if not isinstance(trainer, transformers.Trainer):
        raise usage("tune_trainer takes a transformers.Trainer (it reads its train_dataset, data_collator and args)",
                    f"{type(trainer).__name__} {_plain(repr(trainer))[:80]}",
                    "pass the Trainer you call .train() on: tune_trainer(Trainer(model=..., args=..., "
                    "train_dataset=...)); for a dataset alone, use autoloader.best_loader(dataset, ...)")
    for name in ("batch_size", "batch_sizes"):
        if name in options:
            raise usage("tune_trainer honours the trainer's batch size (args.per_device_train_batch_size)",
                        f"{name}={options[name]!r}",
                        "set per_device_train_batch_size in TrainingArguments; to search the batch size, "
                        "tune(dataset, batch_sizes=[...]) and pass TrainingArguments(**training_arguments(result, "
                        "batch_size=True))")
    args = trainer.args
    dataset, fixed = trainer_inputs(trainer)
    try:
        pickle.dumps(trainer.data_collator)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is this one rule
        raise usage("the Trainer's data_collator must be picklable to reach autoloader's trial process "
                    "(it is started with spawn)", f"{_plain(repr(trainer.data_collator))}: {exc}",
                    "define the collator at module level (no lambda or closure), e.g. default_data_collator "
                    "or DataCollatorWithPadding(tokenizer)") from None
    clash = sorted(fixed.keys() & options.keys())
    if clash:
        raise usage("tune_trainer takes the DataLoader arguments from the trainer", clash,
                    "set them on the Trainer or its TrainingArguments (data_collator=, dataloader_drop_last=, ...)")
    device = getattr(getattr(args, "device", None), "type", None)
    if "device" not in options and device in ("cuda", "cpu"):
        options["device"] = device
    # A gated knob the user already set past its start in args (batches out of order) opens its
    # gate; and where this transformers has the knob's field, the pick sets it either way.
    # A knob the trainer fixes (its start method, set in args) is the user's: honoured, not searched
    # and not reset.
    gated = [k for k in SETTINGS if k.gate is not None and k.hf is not None and hasattr(args, k.hf.name)
             and k.name not in fixed]
    for knob in gated:
        value = getattr(args, knob.hf.name)
        if value is not None and value != knob.first:
            options.setdefault(knob.gate.option, True)
    # The Trainer builds its own DataLoader from the fields set: the tune is made before the run
    # (NOTE [ Tuning inside the run ] in inrun/__init__.py).
    options.setdefault("tune", "before")
    with applying("the Trainer's TrainingArguments (dataloader_*)"):   # NOTE [ The closing line ] in api.py
        loader = best_loader(dataset, batch_size=args.train_batch_size, **fixed, **options)
    fields = training_arguments(loader)
    for knob in gated:
        if not knob.fixable:   # a fixable one at its default is the args' own (the start method's None)
            fields.setdefault(knob.hf.name, knob.default)
    for name, value in fields.items():
        setattr(args, name, value)
    return fields


def _plain(text: str) -> str:
    """A repr without memory addresses (they differ in every process)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)

