"""Lightning: a tuned ``train_dataloader``, tuned once per hardware and dataset, reused after.

The recipe::

    from autoloader.integrations.lightning import TunedDataModule
    data = TunedDataModule(train_set, batch_size=64)       # any best_loader() argument: budget=, step=, ...
    trainer.fit(model, datamodule=data)

``TunedDataModule`` is a ``lightning.pytorch.LightningDataModule`` whose ``train_dataloader()``
is ``best_loader()``: the first fit on a machine tunes (within ``budget``) and stores the
result; every later fit, in this process or another, finds it and tunes nothing. Subclass it to
add ``setup()`` (set ``self.train_dataset`` there) or a ``val_dataloader()``; ``self.settings``
holds the tuned DataLoader settings once ``train_dataloader()`` ran. Inside your own
LightningModule or DataModule (``pytorch_lightning`` too), ``tuned_dataloader(dataset,
trainer=self.trainer, batch_size=64)`` is the same loader.

# NOTE [ Lightning's ranks and samplers ]
# * Ranks. Under DDP Lightning starts the ranks and initialises torch.distributed before it
#   asks for ``train_dataloader()``, on every rank. ``best_loader`` then sees WORLD_SIZE > 1 and
#   takes its node path (NOTE [ Tuning a node's ranks ] in node/__init__.py) beside Lightning's
#   own process group: a gloo group of its own, rank 0's stored-result lookup decides for all,
#   rank 0 searches and stores while the others run every trial with it on their shards, and
#   every rank gets the same per-rank config. One node only: ``num_nodes > 1`` is refused here, since
#   Lightning's launcher does not set LOCAL_WORLD_SIZE, by which the node path tells nodes apart.
# * Samplers. With ``use_distributed_sampler=True`` (the default) and a distributed strategy,
#   Lightning re-creates a train loader with a DistributedSampler of its own, unless the loader
#   already has one: ``_requires_distributed_sampler`` in
#   lightning/pytorch/trainer/connectors/data_connector.py asks ``not isinstance(dataloader.sampler,
#   DistributedSampler)``. Under DDP ``best_loader`` hands each rank a loader on a
#   DistributedSampler shard (num_replicas = ranks, rank = this rank, shuffled, seed 0), so
#   Lightning leaves that loader as it is, with its tuned settings, and calls the sampler's
#   ``set_epoch`` every epoch (fit_loop.py's ``_set_sampler_epoch``). Its seed is 0, not
#   Lightning's PL_GLOBAL_SEED. In one process (no distributed strategy) Lightning replaces no
#   sampler, and the loader shuffles with a plain RandomSampler, as its trials did.
# * Seeds. The tuned loader's ``worker_init_fn`` is autoloader's ``seed_worker``; Lightning adds
#   its own (PL_SEED_WORKERS) only to a loader that has none.
"""

from __future__ import annotations

from . import require
from .lightning_loader import tuned_dataloader

__all__ = ["TunedDataModule", "tuned_dataloader"]


def __getattr__(name: str):
    """``TunedDataModule`` on first use, so that importing this module needs no Lightning. It is a
    module-level class of ``lightning_data`` (a class built inside a function cannot be pickled,
    and ``strategy="ddp_spawn"`` pickles the datamodule to every rank)."""
    if name == "TunedDataModule":
        require("lightning.pytorch", "lightning", "autoloader.integrations.lightning.TunedDataModule")
        from .lightning_data import TunedDataModule

        globals()[name] = TunedDataModule
        return TunedDataModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
