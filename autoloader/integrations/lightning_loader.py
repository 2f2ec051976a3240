"""Lightning's ``tuned_dataloader``: ``best_loader()`` for a Trainer's device and ranks.

Its own module so that ``lightning.py`` (the integration's face) and ``lightning_data.py`` (the
``TunedDataModule``, which needs Lightning) both import it and neither imports the other back.
NOTE [ Lightning's ranks and samplers ] is in lightning.py.
"""

from __future__ import annotations

from typing import Any

from ..api import applying, best_loader
from ..errors import usage
from . import check_dataset, check_object

__all__ = ["tuned_dataloader"]


def tuned_dataloader(dataset: Any, *, trainer: Any = None, batch_size: int | None = None, **options):
    """``best_loader(dataset, batch_size=..., **options)`` for a Lightning ``trainer``: on its
    device (``trainer.strategy.root_device``, unless ``device=`` is given) and, under DDP, tuned
    by its ranks together (NOTE [ Lightning's ranks and samplers ] in lightning.py). ``options`` are
    ``best_loader``'s: ``budget=``, ``step=``, ``out=``, ..., and DataLoader arguments.

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
        check_object(trainer, "tuned_dataloader(trainer=)", "Lightning Trainer", ("strategy", "num_nodes"),
                     "pass trainer=self.trainer from your LightningModule or DataModule, or leave trainer out "
                     "(then pass device='cuda' or 'cpu')")
        nodes = getattr(trainer, "num_nodes", 1)
        if nodes > 1:
            raise usage("autoloader tunes the ranks of one node together, and this Trainer spans several nodes",
                        f"num_nodes={nodes}", "tune once with Trainer(num_nodes=1) on one node of the kind; the "
                        "stored result then serves every node of that kind")
        if "device" not in options:
            kind = getattr(getattr(getattr(trainer, "strategy", None), "root_device", None), "type", None)
            if kind in ("cuda", "cpu"):
                options["device"] = kind
    with applying("the Lightning train loader returned"):   # NOTE [ The closing line ] in api.py
        return best_loader(dataset, batch_size=batch_size, **options)
