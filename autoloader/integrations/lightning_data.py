"""``TunedDataModule``, the Lightning recipe's class (autoloader/integrations/lightning.py says
how it tunes, its ranks and its samplers). It lives here, at module level, because importing it
imports Lightning, which ``autoloader.integrations.lightning`` must not need until the class is
asked for; and because a class built inside a function cannot be pickled, while
``strategy="ddp_spawn"`` pickles the datamodule to each rank's process."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as lightning
from torch.utils.data import DataLoader

from ..api import applying
from ..errors import usage
from . import check_dataset
from .formats import dataloader_kwargs
from .lightning_loader import tuned_dataloader

__all__ = ["TunedDataModule"]


class TunedDataModule(lightning.LightningDataModule):
    """A LightningDataModule whose train loader is tuned once per hardware and dataset
    (autoloader/integrations/lightning.py). ``train_dataset``: a Dataset, a zero-argument factory
    or a ``MODULE:ATTR`` spec, or None when ``setup()`` sets ``self.train_dataset``. ``options``:
    ``best_loader``'s arguments (``budget``, ``step``, ``out``, ``version``, ...) and DataLoader
    arguments (``collate_fn``, ``drop_last``, ...), used in every trial.

    Args:
        train_dataset: the train Dataset, factory or spec; None when ``setup()`` sets it.
        batch_size: the batch size (``best_loader()``'s default when None).
        **options: ``best_loader()``'s arguments and DataLoader arguments.

    ``train_dataloader()`` returns the tuned DataLoader and sets ``self.settings`` (its
    DataLoader settings); it raises UsageError when there is no train dataset."""

    def __init__(self, train_dataset: Any = None, *, batch_size: int | None = None, **options):
        super().__init__()
        check_dataset(train_dataset, "TunedDataModule(train_dataset)", allow_none=True)
        self.train_dataset = train_dataset
        self.batch_size = batch_size
        self.options = options
        self.settings: dict | None = None   # the tuned DataLoader settings, once known

    def train_dataloader(self):
        if self.train_dataset is None:
            raise usage("TunedDataModule needs a train dataset", None,
                        "pass TunedDataModule(train_set, ...), or set self.train_dataset in setup()")
        with applying("TunedDataModule's train loader"):   # NOTE [ The closing line ] in api.py
            loader = tuned_dataloader(self.train_dataset, trainer=self.trainer, batch_size=self.batch_size,
                                      **self.options)
        # Tuned in the run (NOTE [ Tuning inside the run ] in inrun/__init__.py), the settings are
        # known once the loader has settled: ``loader.plan.pick``.
        self.settings = dataloader_kwargs(loader) if isinstance(loader, DataLoader) else None
        return loader

