"""Two DDP ranks under Lightning, then accelerate's sharding of their loaders: run as a script by
test_integrations.py (``python tests/integration_ranks.py OUT REPORT``).

Lightning's ``strategy="ddp"`` starts rank 1 by running this same command again (its subprocess
launcher), so each rank runs ``main`` and writes what it saw to ``REPORT.<rank>.json``:
* two fits with a ``TunedDataModule``: the first tunes (the ranks together, before the run), the second finds
  the stored result (no progress event); after each, the train loader Lightning used, its
  sampler and whether it is the very loader ``train_dataloader()`` returned;
* accelerate's ``prepare_data_loader`` for two processes over ``best_loader``'s rank loader and
  over ``tuned_loader``'s, both from the stored result: the sample indices each rank reads.
"""

from __future__ import annotations

import glob
import json
import os
import sys

from integration_workloads import Points, linear_module

SETTINGS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
OPTIONS = dict(batch_size=32, budget=10, trial_timeout=20, tune="before")   # the node's tune before the run


def dataset() -> Points:
    return Points(cost_s=0.0005)


def fit(out: str) -> dict:
    import lightning

    from autoloader.integrations.lightning import TunedDataModule

    class Recording(TunedDataModule):
        def train_dataloader(self):
            self.returned = super().train_dataloader()
            return self.returned

    events: list[str] = []
    data = Recording(dataset(), out=out, progress=lambda event: events.append(event.kind), **OPTIONS)
    trainer = lightning.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, limit_train_batches=3,
                                logger=False, enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False)
    trainer.fit(linear_module(), datamodule=data)
    used = trainer.train_dataloader
    sampler = used.sampler
    return {"events": events, "settings": data.settings, "same_loader": used is data.returned,
            "used": {k: getattr(used, k) for k in SETTINGS},
            "sampler": type(sampler).__name__, "num_replicas": getattr(sampler, "num_replicas", None),
            "sampler_rank": getattr(sampler, "rank", None), "sampler_epoch": getattr(sampler, "epoch", None),
            "results": sorted(os.path.relpath(p, out) for p in glob.glob(os.path.join(out, "*", "*.json")))}


def shards(out: str, rank: int) -> dict:
    from accelerate.data_loader import prepare_data_loader

    from autoloader import best_loader
    from autoloader.integrations.accelerate import tuned_loader

    def indices(loader) -> list[int]:
        prepared = prepare_data_loader(loader, num_processes=2, process_index=rank)
        return sorted(int(i) for _, _, index in prepared for i in index.tolist())

    events: list[str] = []
    options = dict(out=out, device="cpu", progress=lambda event: events.append(event.kind), **OPTIONS)
    rank_loader = best_loader(dataset(), **options)
    whole = tuned_loader(dataset(), **options)
    return {"events": events, "rank_loader_sampler": type(rank_loader.sampler).__name__,
            "tuned_loader_sampler": type(whole.sampler).__name__,
            "best_loader": indices(rank_loader), "tuned_loader": indices(whole),
            "tuned_settings": {k: getattr(whole, k) for k in SETTINGS},
            "rank_settings": {k: getattr(rank_loader, k) for k in SETTINGS}}


def main(out: str, report: str) -> None:
    first = fit(out)
    second = fit(out)
    import torch.distributed as dist

    rank = dist.get_rank()
    record = {"rank": rank, "world": dist.get_world_size(), "first": first, "second": second,
              "accelerate": shards(out, rank)}
    with open(f"{report}.{rank}.json", "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
