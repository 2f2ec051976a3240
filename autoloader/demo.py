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
# does not exist"), or leaves the package half imported; one built for CUDA beside a CPU torch
# misses torch's CUDA libraries (libc10_cuda.so).
_MISMATCH = re.compile(r"operator (torchvision|image)::\w+ does not exist|undefined symbol|Couldn't load custom "
                       r"C\+\+ ops|partially initialized module 'torchvision'|torchvision\._C|libc10_cuda|libcudart")


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
    installed = _installed("torchvision")
    raise usage("the demo's torchvision must be built for the installed torch: the same device (CPU, or the "
                "same CUDA) and its release (each torch 2.N pairs with torchvision 0.(N+15))",
                f"torch {torch.__version__}, torchvision {installed}: {type(cause).__name__}: {str(cause)[:200]}",
                f"{pair_fix(torch.__version__, installed, str(cause))}, or use --dataset autoloader.demo:tensors, "
                "which needs torch alone") from None


def _installed(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


# PyTorch's wheel index: one folder a build (cpu, cu121, ...), named by the local version's tag.
WHEELS = "https://download.pytorch.org/whl"


def _build(version: str) -> str | None:
    """The build a version's local tag names: "cpu", "cu121", "rocm6.1"...; None without a tag."""
    return version.split("+", 1)[1] if "+" in version else None


def _release(version: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def pair_fix(torch_version: str, vision_version: str, error: str = "") -> str:
    """The one pip line that installs the torchvision built for ``torch_version``, judged from
    the two versions and the error torchvision's import raised: another release (torch 2.N pairs
    with torchvision 0.(N+15)), or another device (a ``+cpu`` torch beside a CUDA-built
    torchvision, whose import misses ``libc10_cuda.so``, or the other way round)."""
    release = _release(torch_version)
    vision = "torchvision" if release is None or release[0] != 2 else f"torchvision==0.{release[1] + 15}.*"
    build, vision_build = _build(torch_version), _build(vision_version)
    cuda_vision = (vision_build or "").startswith("cu") or "libc10_cuda" in error or "libcudart" in error
    if build is not None and (vision_build != build if vision_build is not None else cuda_vision and build == "cpu"):
        # Built for another device: the wheel of torch's own build, from that build's index.
        return (f"install torchvision built for torch's {'CPU' if build == 'cpu' else build} build: "
                f"pip install --force-reinstall --no-deps '{vision}' --index-url {WHEELS}/{build}")
    if build is None and cuda_vision and vision_build is None and "libc10_cuda" in error:
        return ("install torchvision from the index your torch came from (a CPU torch beside a CUDA-built "
                f"torchvision): pip install --force-reinstall --no-deps '{vision}' --index-url {WHEELS}/cpu")
    index = f" --index-url {WHEELS}/{build}" if build else ""
    if vision != "torchvision" and _release(vision_version) not in (None, (0, release[1] + 15)):
        return f"install the torchvision of this torch: pip install --force-reinstall --no-deps '{vision}'{index}"
    pinned = f"torch=={torch_version.split('+', 1)[0]}"
    return f"install the pair together: pip install --force-reinstall '{pinned}' '{vision}'{index}"


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
