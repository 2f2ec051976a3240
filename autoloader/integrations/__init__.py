"""Framework integrations: for users whose training loop builds the DataLoader for them.

``lightning`` (``TunedDataModule``, ``tuned_dataloader``), ``huggingface`` (``tune_trainer``,
``training_arguments``), ``accelerate`` (``tuned_loader``, for ``accelerator.prepare()``), and
``formats``: a result as DataLoader, TrainingArguments or Lightning source, with no framework
imported (what ``autoloader show --format`` prints). Each framework module imports its framework
only when used, naming the ``pip install`` that brings it when it is missing; nothing here is
imported by ``import autoloader``.
"""

from __future__ import annotations

from typing import Any

from ..errors import AutoloaderError, usage

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


def check_dataset(dataset: Any, where: str, allow_none: bool = False) -> None:
    """``dataset`` is what ``best_loader`` takes: a Dataset (or anything indexable with a length),
    a zero-argument factory of one, or a ``MODULE:ATTR`` spec; checked where the helper is called,
    not at the first fit or the first batch."""
    from torch.utils.data import Dataset, IterableDataset

    if dataset is None and allow_none:
        return
    if isinstance(dataset, str):
        if ":" in dataset:
            return
    elif isinstance(dataset, (Dataset, IterableDataset)) or callable(dataset) or (
            hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__") and not isinstance(dataset, bytes)):
        return
    raise usage(f"{where} is a Dataset, a zero-argument function returning one, or a 'MODULE:ATTR' spec",
                f"{type(dataset).__name__} {_short(dataset)}",
                "pass the training set itself (e.g. torchvision.datasets.ImageFolder('train/')), the function "
                "that builds it, or 'data.py:make'")


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."
