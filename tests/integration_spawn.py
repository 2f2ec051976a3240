"""Two ranks under Lightning's ``strategy="ddp_spawn"`` with a ``TunedDataModule`` tuned in the run:
run as a script by test_integrations.py (``python tests/integration_spawn.py OUT REPORT``).

``ddp_spawn`` pickles the model and the datamodule to each rank's new process, so both are
module-level classes here. Without a ``step=`` the ranks tune in the run together (NOTE [ Ranks in
the run ] in autoloader/inrun/ranks.py), over readings kept short here (set at import, so in every
rank's process). Each rank writes what it trained with to ``REPORT.<rank>.json`` when its fit
ends: the train loader's type, its schedule (each reading's config, batches and rate), its pick,
its sampler, and the sample indices each epoch's steps saw.
"""

from __future__ import annotations

import json
import sys

import lightning
import torch

from autoloader.integrations.lightning import TunedDataModule
from integration_workloads import Points
from short_readings import short_readings

EPOCHS = 3
short_readings(segment_s=0.05)


class Linear(lightning.LightningModule):
    """One nn.Linear fitted to Points; reports its rank's loader when the fit ends."""

    def __init__(self, report: str):
        super().__init__()
        self.report = report
        self.layer = torch.nn.Linear(8, 1)
        self.seen: list[list[int]] = []

    def on_train_epoch_start(self):
        self.seen.append([])

    def training_step(self, batch, batch_index):
        x, y, index = batch
        self.seen[-1] += [int(i) for i in index.tolist()]
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_end(self):
        used = self.trainer.train_dataloader
        sampler = used.sampler
        plan = getattr(used, "plan", None)
        record = {"rank": self.global_rank, "world": self.trainer.world_size, "loader": type(used).__name__,
                  "state": plan.state if plan else None, "pick": plan.pick.key if plan and plan.pick else None,
                  "readings": [(r.config.key, r.batches, r.rate) for r in plan.readings] if plan else None,
                  "sampler": type(sampler).__name__, "num_replicas": getattr(sampler, "num_replicas", None),
                  "sampler_rank": getattr(sampler, "rank", None), "sampler_epoch": getattr(sampler, "epoch", None),
                  "seen": self.seen}
        with open(f"{self.report}.{self.global_rank}.json", "w") as f:
            json.dump(record, f)


def main(out: str, report: str) -> None:
    torch.manual_seed(0)
    data = TunedDataModule(Points(length=4096, cost_s=0.0005), batch_size=32, out=out)
    trainer = lightning.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=EPOCHS, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Linear(report), datamodule=data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
