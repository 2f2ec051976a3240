"""Built-in demo datasets, so ``autoloader tune --dataset autoloader.demo:images`` works anywhere.

``images``: JPEG decode and augmentation, milliseconds of CPU a sample (workers pay).
``tensors``: large samples that cost nothing to make (workers only add copies).
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class JpegImages(Dataset):
    """Decodes and augments JPEGs encoded once in memory (a pool of distinct images, cycled)."""

    def __init__(self, length: int = 20_000, size: int = 160, pool: int = 64):
        try:
            from torchvision.io import encode_jpeg
        except ImportError:
            from .errors import usage

            raise usage("the demo's JPEG dataset decodes with torchvision, which must be installed", "no torchvision",
                        "pip install 'torch-autoloader[demo]' (or pip install torchvision matching your torch), or "
                        "use --dataset autoloader.demo:tensors, which needs torch alone") from None

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
        from torchvision.io import decode_jpeg
        from torchvision.transforms import v2

        image = decode_jpeg(self.jpegs[index % len(self.jpegs)])
        crop = v2.RandomResizedCrop(self.size * 3 // 4, antialias=True)(image)
        if torch.rand(()) < 0.5:
            crop = crop.flip(-1)
        tensor = crop.float().div_(255.0).sub_(0.5).div_(0.25)
        return tensor, index % 10


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
