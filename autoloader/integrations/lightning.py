"""Lightning: a tuned ``train_dataloader``, tuned once per hardware and dataset, reused after.

``TunedDataModule(train_set, batch_size=64)`` is a ``LightningDataModule`` whose
``train_dataloader()`` is ``best_loader()``; ``tuned_dataloader(dataset, trainer=self.trainer,
batch_size=64)`` is the same loader inside your own module (``pytorch_lightning`` too).

# NOTE [ Lightning's ranks and samplers ]
# * Ranks. Under DDP Lightning starts the ranks and initialises torch.distributed before it
#   asks for ``train_dataloader()``, on every rank. ``best_loader`` then sees WORLD_SIZE > 1 and
#   takes its node path beside Lightning's own process group: the ranks tune in the run together
#   (NOTE [ Ranks in the run ] in inrun/ranks.py), or before it with a ``step=`` or
#   ``tune="before"`` (NOTE [ Tuning a node's ranks ] in node/__init__.py); every rank gets the
#   same per-rank config. One node only:
#   ``num_nodes > 1`` is refused here, since Lightning's launcher does not set LOCAL_WORLD_SIZE,
#   by which the node path tells nodes apart.
# * Samplers. With ``use_distributed_sampler=True`` (the default) and a distributed strategy,
#   Lightning re-creates a train loader with a DistributedSampler of its own unless the loader
#   already has one (``_requires_distributed_sampler`` in trainer/connectors/data_connector.py).
#   Under DDP ``best_loader`` hands each rank a loader on a DistributedSampler shard (shuffled,
#   seed 0, not PL_GLOBAL_SEED), so Lightning leaves it as it is, with its tuned settings, and
#   calls its ``set_epoch`` every epoch (the in-run loader's ``sampler`` too: it is no
#   DataLoader, and Lightning re-creates none but a DataLoader). In one process Lightning replaces no sampler, and the
#   loader shuffles with a plain RandomSampler, as its trials did.
# * Seeds. The tuned loader's ``worker_init_fn`` is autoloader's ``seed_worker``; Lightning adds
#   its own (PL_SEED_WORKERS) only to a loader that has none.
"""

from __future__ import annotations

from typing import Any

from ..api import applying, best_loader
from ..errors import usage
from . import _short, check_dataset, require

__all__ = ["TunedDataModule", "tuned_dataloader"]


def tuned_dataloader(dataset: Any, *, trainer: Any = None, batch_size: int | None = None, **options):
    """``best_loader(dataset, batch_size=..., **options)`` on ``trainer``'s device (unless
    ``device=`` is given) and, under DDP, tuned by its ranks together (NOTE [ Lightning's ranks
    and samplers ]).

    Args:
        dataset: a Dataset, a factory of one, or a ``MODULE:ATTR`` spec.
        trainer: the Lightning ``Trainer`` the loader is for, or None (then ``device=`` decides).
        batch_size: the batch size (``best_loader()``'s default when None).
        **options: ``best_loader()``'s arguments (``progress`` among them) and DataLoader arguments.

    Returns:
        A ``torch.utils.data.DataLoader`` with the tuned settings (under DDP, on this rank's shard).

    Raises:
        UsageError: the Trainer spans several nodes, or an input breaks a rule.
        NoFeasibleConfig, AutoloaderError: as ``best_loader()`` does.
    """
    check_dataset(dataset, "tuned_dataloader(dataset)")
    if trainer is not None:
        missing = [name for name in ("strategy", "num_nodes") if not hasattr(trainer, name)]
        if missing:
            raise usage("tuned_dataloader(trainer=) takes a Lightning Trainer (it reads its strategy, num_nodes)",
                        f"{type(trainer).__name__} {_short(trainer)}, without {', '.join(missing)}",
                        "pass trainer=self.trainer from your LightningModule or DataModule, or leave trainer out "
                        "(then pass device='cuda' or 'cpu')")
        if trainer.num_nodes > 1:
            raise usage("autoloader tunes the ranks of one node together, and this Trainer spans several nodes",
                        f"num_nodes={trainer.num_nodes}", "tune once with Trainer(num_nodes=1) on one node of the "
                        "kind; the stored result then serves every node of that kind")
        kind = getattr(getattr(trainer.strategy, "root_device", None), "type", None)
        if "device" not in options and kind in ("cuda", "cpu"):
            options["device"] = kind
    with applying("the Lightning train loader returned"):   # NOTE [ The closing line ] in api.py
        loader = best_loader(dataset, batch_size=batch_size, **options)
    epochs = getattr(trainer, "max_epochs", None)
    if hasattr(loader, "expect") and isinstance(epochs, int) and epochs > 0:
        loader.expect(epochs)   # tuned in the run: its steps are weighed over the trainer's epochs
    return loader


def __getattr__(name: str):
    """``TunedDataModule`` on first use, so that importing this module needs no Lightning."""
    if name != "TunedDataModule":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require("lightning.pytorch", "lightning", "autoloader.integrations.lightning.TunedDataModule")
    return globals().setdefault(name, _data_module())


# NOTE [ A class built on first use that pickles ]
# ``TunedDataModule`` derives from Lightning's LightningDataModule, so defining it imports
# Lightning, which importing this module must not need: it is built on first use (``__getattr__``)
# and kept as this module's global. ``strategy="ddp_spawn"`` pickles the datamodule to each rank,
# and pickle finds a class by its module and qualified name: the class says it is this module's
# ``TunedDataModule``, and that name, looked up in a rank's fresh process, builds the same class.
def _data_module() -> type:
    import lightning.pytorch as lightning

    from .formats import dataloader_kwargs
    from torch.utils.data import DataLoader

    class TunedDataModule(lightning.LightningDataModule):
        """A LightningDataModule whose train loader is tuned once per hardware and dataset. Subclass
        it for ``setup()`` (set ``self.train_dataset`` there) or a ``val_dataloader()``.

        Args:
            train_dataset: the train Dataset, a zero-argument factory or a ``MODULE:ATTR`` spec;
                None when ``setup()`` sets it.
            batch_size: the batch size (``best_loader()``'s default when None).
            **options: ``best_loader()``'s arguments (``budget``, ``step``, ``out``, ...) and
                DataLoader arguments (``collate_fn``, ``drop_last``, ...), used in every trial.

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

    TunedDataModule.__module__ = __name__
    TunedDataModule.__qualname__ = "TunedDataModule"
    return TunedDataModule
