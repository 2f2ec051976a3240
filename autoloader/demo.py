"""Built-in demo datasets, so ``autoloader tune --dataset autoloader.demo:images`` works anywhere.

``images``: JPEG decode and augmentation, milliseconds of CPU a sample (workers pay).
``tensors``: large samples that cost nothing to make (workers only add copies).
"""

from __future__ import annotations

import functools
import re

import torch
from torch.utils.data import Dataset


class JpegImages(Dataset):
    """Decodes and augments JPEGs encoded once in memory (a pool of distinct images, cycled)."""

    def __init__(self, length: int = 20_000, size: int = 160, pool: int = 64):
        encode_jpeg = _torchvision_io().encode_jpeg
        generator = torch.Generator().manual_seed(0)
        self.length = length
        self.size = size
        coarse = torch.randint(0, 256, (pool, 3, size // 8, size // 8), dtype=torch.uint8, generator=generator)
        # Upsampled noise compresses like a photo (tens of KB), unlike white noise.
        images = torch.nn.functional.interpolate(coarse.float(), size=(size, size), mode="bilinear")
        self.jpegs = [encode_jpeg(img.clamp(0, 255).to(torch.uint8), quality=90) for img in images]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        from torchvision.transforms import v2

        image = _torchvision_io().decode_jpeg(self.jpegs[index % len(self.jpegs)])
        crop = v2.RandomResizedCrop(self.size * 3 // 4, antialias=True)(image)
        if torch.rand(()) < 0.5:
            crop = crop.flip(-1)
        tensor = crop.float().div_(255.0).sub_(0.5).div_(0.25)
        return tensor, index % 10


# What torchvision raises when its compiled operators were built for another torch: its C++
# extension fails to load (an undefined symbol), registers nothing ("operator torchvision::nms
# does not exist"), or leaves the package half imported.
_MISMATCH = re.compile(r"operator (torchvision|image)::\w+ does not exist|undefined symbol|Couldn't load custom "
                       r"C\+\+ ops|partially initialized module 'torchvision'|torchvision\._C")


@functools.lru_cache(maxsize=None)
def _torchvision_io():
    """``torchvision.io``, checked once a process by encoding and decoding a tiny image, or a
    UsageError naming why it cannot be used: not installed, or installed for another torch (the
    common cause: torch upgraded alone), with the fix."""
    from .errors import usage

    try:
        import torchvision.io as io

        # A missing compiled operator surfaces only when called.
        io.decode_jpeg(io.encode_jpeg(torch.zeros((3, 8, 8), dtype=torch.uint8)))
        return io
    except ImportError as exc:
        if not _MISMATCH.search(str(exc)):
            raise usage("the demo's JPEG dataset decodes with torchvision, which must be installed",
                        f"{type(exc).__name__}: {exc}",
                        "pip install 'torch-autoloader[demo]' (or pip install torchvision matching your torch), "
                        "or use --dataset autoloader.demo:tensors, which needs torch alone") from None
        cause = exc
    except (RuntimeError, AttributeError, OSError) as exc:
        if not _MISMATCH.search(str(exc)):
            raise
        cause = exc
    raise usage("the demo's torchvision must be the release built for the installed torch (each torch 2.N "
                "pairs with torchvision 0.(N+15))", f"torch {torch.__version__}, torchvision {_installed('torchvision')}: "
                f"{type(cause).__name__}: {str(cause)[:200]}", f"install the pair together, e.g. {_pair_fix()}, or use "
                "--dataset autoloader.demo:tensors, which needs torch alone") from None


def _installed(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _pair_fix() -> str:
    """The pip line that installs the torchvision of the installed torch."""
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if match is None or match.group(1) != "2":
        return "pip install --upgrade torch torchvision"
    return (f"pip install 'torchvision==0.{int(match.group(2)) + 15}.*' from the index your torch came from (or "
            "pip install --upgrade torch torchvision)")


class FreeTensors(Dataset):
    """Large samples (a slice of one preallocated tensor): nothing to compute, much to copy."""

    def __init__(self, length: int = 4_096, shape: tuple[int, ...] = (3, 256, 256)):
        self.length = length
        # Seeded, as the images are: the same data in every process, so one key (NOTE [ Content
        # fingerprint ] in inputs/content.py: a dataset drawn afresh at each build is new data each time).
        self.pool = torch.rand((16, *shape), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return self.pool[index % len(self.pool)]


def images() -> JpegImages:
    return JpegImages()


def tensors() -> FreeTensors:
    return FreeTensors()
