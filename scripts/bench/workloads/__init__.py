"""Benchmark workloads for the DataLoader auto-tuner.

Eleven workloads, each stressing a different input-pipeline bottleneck, built from real parts
(PIL JPEG decode, torchvision transforms and models, plain Python objects). Every workload names
two zero-argument, module-level callables of this package, so that ``--dataset
scripts.bench.workloads:<name>_dataset`` (from the repository's root) reaches them:

* ``<name>_dataset()`` returns a picklable map-style ``Dataset``;
* ``<name>_step()`` builds the model once and returns ``step(batch)``, which moves the batch to
  ``cuda`` (``cpu`` as a fallback) with ``non_blocking=True`` and launches the training step.
  It never synchronizes: the harness times with CUDA events.

All data is generated deterministically, on local disk (``AUTOLOADER_BENCH_DIR``, default
``/tmp/autoloader-bench``) or in memory; nothing is downloaded. ``AUTOLOADER_BENCH_SCALE``
(default 1.0) scales dataset lengths and the amount of generated data (not per-sample shapes or
costs, except hugefloat's side below scale 1: its point is bytes a batch), so that tests can
run tiny. Six workloads (jpeg to gpubound) are those the tuner's rules were made on; hugefloat,
pyobjects, stepbound and launchbound are new to it (the last two: the step sets the pace,
stepbound.py); pyrows is the memory forecast's (``python -m scripts.memory_growth``); hugefloat8
and large8 make the report's uint8 what-if (``python -m scripts.bench whatif``).

``python -m scripts.bench.workloads`` runs a quick self-check at the current scale.
"""

from __future__ import annotations

from scripts.bench.workloads.common import Workload, workload
from scripts.bench.workloads.images import (
                     gpubound_dataset,
                     gpubound_step,
                     hugefloat8_dataset,
                     hugefloat8_step,
                     hugefloat_dataset,
                     hugefloat_step,
                     jpeg_dataset,
                     jpeg_step,
                     large8_dataset,
                     large8_step,
                     large_dataset,
                     large_step,
)
from scripts.bench.workloads.pyrows import pyrows_dataset, pyrows_step
from scripts.bench.workloads.stepbound import (
                     launchbound_dataset,
                     launchbound_step,
                     stepbound_dataset,
                     stepbound_step,
)
from scripts.bench.workloads.pysamples import (
                     heavytail_dataset,
                     heavytail_step,
                     pyobjects_dataset,
                     pyobjects_step,
                     small_dataset,
                     small_step,
                     startup_dataset,
                     startup_step,
)

__all__ = ["WORKLOADS", "Workload", "gpubound_dataset", "gpubound_step", "heavytail_dataset", "heavytail_step",
           "hugefloat8_dataset", "hugefloat8_step", "hugefloat_dataset", "hugefloat_step", "jpeg_dataset", "jpeg_step",
           "large8_dataset", "large8_step", "large_dataset", "large_step", "launchbound_dataset", "launchbound_step",
           "pyobjects_dataset", "pyobjects_step", "pyrows_dataset", "pyrows_step", "small_dataset", "small_step",
           "startup_dataset", "startup_step", "stepbound_dataset", "stepbound_step"]

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    workload("jpeg", "JPEG decode and augmentation on the CPU feeding ResNet-18 at 160 px; "
             "bound by CPU decode throughput, so it wants many workers.", 256),
    workload("small", "Many tiny dict samples built by Python loops; bound by per-sample "
             "Python and per-batch inter-process transfer, not bytes.", 64),
    workload("large", "3 MiB float32 samples with a trivial GPU consumer; bound by host "
             "copies, pinning and H2D, and memory-hungry with deep prefetch.", 64),
    workload("startup", "Short epochs of cheap samples behind a ~1.5 s per-process lazy "
             "setup; persistent_workers decides.", 32),
    workload("heavytail", "Mostly ~1 ms samples with 2% at 30-50 ms; in-order delivery "
             "stalls on slow batches unless prefetch is deep enough.", 32),
    workload("gpubound", "ResNet-50 at 224 px in bf16 with cheap in-memory data; GPU "
             "bound, so few workers suffice and more only cost CPU and RAM.", 128),
    workload("hugefloat", "3 MiB float32 samples served as views of an in-memory pool (nothing "
             "computed per sample), 192 MiB batches, trivial GPU consumer; the main process's "
             "per-batch receive, pin and copy is the cap, not the workers.", 64),
    workload("hugefloat8", "hugefloat's samples held and served as uint8 (a quarter of the bytes), "
             "normalised on the device: the report's uint8 what-if made (scripts/bench/whatif.py).", 64),
    workload("large8", "large's samples as uint8, normalised on the device: the uint8 what-if made.", 64),
    workload("pyobjects", "Samples read from ~300 MB of Python dicts, strings and lists built in "
             "__init__; reading touches reference counts, so each forked worker copies what it "
             "reads and peak memory grows with the workers; light step.", 256),
    workload("pyrows", "1.5 million annotation rows ({id, boxes: 24 floats, tag}) kept as Python objects, "
             "0.1 ms a sample; each forked worker copies the rows it reads, so its memory grows all epoch "
             "long, far past what a burst sees; light step.", 256),
    workload("stepbound", "ResNet-50 (from its constructor, no weights) trained in bf16 at 176 px on cheap uint8 "
             "crops normalised on the device; the step sets the pace, and the supply needs headroom to keep "
             "a short queue from running dry.", 96),
    workload("launchbound", "Samples of about 1 ms of CPU (a log spectrum) beside a step launch-bound by its "
             "many small kernels (a 48-block residual MLP): the main thread launches all the time beside the "
             "workers.", 64),
)}
