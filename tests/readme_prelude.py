"""The names the README's Python snippets assume, small (tests/readme_blocks.py's preludes import
them): the Hugging Face block's Trainer, and a cap on budgets so a snippet's tune takes seconds,
not its README budget. Every other block runs as printed.

Importable by name; nothing here imports a framework until a function that needs it is called.
"""

from __future__ import annotations

import functools

# A snippet's tune measures at most this long (its README budget is meant for real data).
BUDGET_CAP_S = 20.0


def cap_budgets(seconds: float = BUDGET_CAP_S) -> None:
    """``tune`` and ``best_loader``, as the snippet imports them (from ``autoloader`` or through a
    framework helper, which calls ``autoloader.api.best_loader``), with ``budget`` at most
    ``seconds``."""
    import autoloader
    from autoloader import api

    def capped(fn):
        @functools.wraps(fn)
        def call(*args, budget: float = seconds, **kwargs):
            return fn(*args, budget=min(budget, seconds), **kwargs)
        return call

    for name in ("tune", "best_loader"):
        wrapped = capped(getattr(api, name))
        setattr(api, name, wrapped)
        setattr(autoloader, name, wrapped)


def hf_trainer(output_dir: str = "trainer"):
    """A Hugging Face Trainer of a one-layer BERT on token samples, two CPU steps."""
    import transformers

    from integration_workloads import Tokens, tiny_bert, tiny_tokenizer

    args = transformers.TrainingArguments(output_dir=output_dir, per_device_train_batch_size=16, max_steps=2,
                                          use_cpu=True, report_to=[], save_strategy="no")
    return transformers.Trainer(model=tiny_bert(), args=args, train_dataset=Tokens(),
                                data_collator=transformers.DataCollatorWithPadding(tiny_tokenizer()))
