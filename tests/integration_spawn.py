"""Two ranks under Lightning's ``strategy="ddp_spawn"`` with a ``TunedDataModule``: run as a script
by test_integrations.py (``python tests/integration_spawn.py OUT REPORT``).

``ddp_spawn`` pickles the model and the datamodule to each rank's new process, so both are
module-level classes here; each rank writes what it trained with to ``REPORT.<rank>.json`` when
its fit ends: the train loader's settings, its sampler and the datamodule's tuned settings.
"""

from __future__ import annotations

import json
import sys

import lightning
import torch

from autoloader.integrations.lightning import TunedDataModule
from integration_workloads import Points

SETTINGS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


class Linear(lightning.LightningModule):
    """One nn.Linear fitted to Points; reports its rank's loader when the fit ends."""

    def __init__(self, report: str):
        super().__init__()
        self.report = report
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_index):
        x, y, _ = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_end(self):
        used = self.trainer.train_dataloader
        sampler = used.sampler
        record = {"rank": self.global_rank, "world": self.trainer.world_size,
                  "used": {k: getattr(used, k) for k in SETTINGS}, "settings": self.trainer.datamodule.settings,
                  "sampler": type(sampler).__name__, "num_replicas": getattr(sampler, "num_replicas", None),
                  "sampler_rank": getattr(sampler, "rank", None)}
        with open(f"{self.report}.{self.global_rank}.json", "w") as f:
            json.dump(record, f)


def main(out: str, report: str) -> None:
    torch.manual_seed(0)
    data = TunedDataModule(Points(cost_s=0.0005), batch_size=32, out=out, budget=60, trial_timeout=20)
    trainer = lightning.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=1,
                                limit_train_batches=3, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Linear(report), datamodule=data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
