"""Datasets, models and a tokenizer for the framework integration tests (test_integrations.py).

The datasets live at module level in a file of their own because the tuner's trial process is
started with spawn and re-imports them by module name (as tests/workloads.py). Nothing here
imports a framework at import time (the trial processes only need the datasets); the models and
the tokenizer are built by functions that import theirs, from configs, with nothing downloaded.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset

VOCAB = ["[PAD]", "[UNK]"] + [f"w{i}" for i in range(30)]


class Points(Dataset):
    """``(x, y, index)`` of a fixed random linear map, seeded: for a linear model (the index
    tells which samples a loader read). Each sample
    costs ``cost_s`` of CPU work holding the GIL (as a decode would), so workers can pay."""

    def __init__(self, length: int = 512, features: int = 8, cost_s: float = 0.0):
        self.cost_s = cost_s
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(length, features, generator=generator)
        self.y = self.x @ torch.randn(features, 1, generator=generator)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int):
        end = time.process_time() + self.cost_s
        while time.process_time() < end:
            pass
        return self.x[index], self.y[index], torch.tensor(index)


class Tokens(Dataset):
    """Token-id samples of varying length for a tiny BERT, as dicts: ``input_ids`` and
    ``attention_mask`` as lists (to be padded by DataCollatorWithPadding), ``labels``, and a
    ``length`` column the model's forward does not take (the Trainer's collator drops it).
    ``fixed=True``: every sample of one length, as tensors, for ``default_data_collator``."""

    def __init__(self, length: int = 256, fixed: bool = False):
        self.length = length
        self.fixed = fixed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        size = 12 if self.fixed else 4 + index % 9
        ids = [2 + (index * 7 + k) % (len(VOCAB) - 2) for k in range(size)]
        sample = {"input_ids": ids, "attention_mask": [1] * size, "labels": index % 2, "length": size}
        if self.fixed:
            sample = {k: torch.tensor(v) for k, v in sample.items()}
        return sample


def tiny_tokenizer():
    """A word-level fast tokenizer over VOCAB, built in memory (pads with [PAD])."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(WordLevel({word: i for i, word in enumerate(VOCAB)}, unk_token="[UNK]"))
    core.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]")


def tiny_bert():
    """A one-layer BERT classifier of hidden size 32, from its config."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2)
    return BertForSequenceClassification(config)


def linear_module():
    """A LightningModule: one nn.Linear fitted to Points by mean squared error."""
    import lightning

    class Linear(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_index):
            x, y, _ = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    return Linear()
