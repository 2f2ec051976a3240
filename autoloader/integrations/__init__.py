"""Framework integrations: for users whose training loop builds the DataLoader for them.

* ``lightning``: ``TunedDataModule``, a LightningDataModule whose ``train_dataloader`` is tuned
  once per hardware and dataset, then read from the stored result (DDP ranks tune together).
* ``huggingface``: ``tune_trainer(trainer)`` sets a ``Trainer``'s four ``dataloader_*``
  arguments from a tune of its own train dataset, collator and batch size;
  ``training_arguments(result)`` gives them for ``TrainingArguments(**...)``.
* ``accelerate``: ``tuned_loader(dataset, ...)``, the loader to hand ``accelerator.prepare()``.
* ``formats``: a result as DataLoader, TrainingArguments or Lightning source, with no framework
  imported (what ``autoloader show --format`` prints).

Each framework module imports its framework only when used, and says which ``pip install``
brings it when it is missing; nothing here is imported by ``import autoloader``.
"""

from __future__ import annotations

from ..errors import AutoloaderError

EXTRA = "pip install 'torch-autoloader[integrations]'"

# The folder's public face: the framework modules users import, the error they raise, and the
# format module the CLI imports. tests/test_units.py checks every import across folders against it.
__all__ = ["MissingFramework", "accelerate", "formats", "huggingface", "lightning"]


class MissingFramework(AutoloaderError, ImportError):
    """An integration was used without its framework installed; the message names the install."""


def require(module: str, package: str, feature: str):
    """``module`` imported, or an error naming what installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingFramework(f"{feature} needs {package}, which could not be imported ({exc}). "
                              f"Fix: pip install {package} (or {EXTRA})") from None
