"""The settings table: every DataLoader setting autoloader tunes, each declared once.

# NOTE [ The settings table ]
# A knob is one ``Knob`` (knob.py) registered in ``SETTINGS``, and everything that names settings
# iterates the table rather than spelling them:
#   the config   ``LoaderConfig`` (space.py) holds one value per knob, in the table's order; its
#                checks are the knobs' ``check`` and ``when`` (a worker-only knob at its default
#                without workers), ``make`` fills what it is not told with ``start``;
#   the key      each knob that applies adds its ``token`` (``bs128-w2-pin0-pf2-pw1``, ``-ooo``);
#   the tie order ``LoaderConfig.cost``: the knobs' ``cost`` terms by ``tie_rank``;
#   the space    ``SearchSpace`` holds each knob's ``domain`` for this machine (``search_space``)
#                and offers only ``start`` of a knob whose ``gate`` the user left closed;
#                ``candidates`` (model_first.py) enumerates the product, the worker-only knobs
#                inside the worker ladder; a warm start steps along each knob's ``step``;
#   the record   ``to_dict`` is every knob, ``loader_kwargs`` (the stored ``config``) those that
#                apply (less an ``omit_default`` one at its default); store/validate.py checks a
#                stored mapping with each knob's ``stored`` rule, then ``LoaderConfig.from_dict``;
#   the outputs  the snippet, the Lightning source and ``--format kwargs`` print
#                ``loader_kwargs``; ``--format hf`` prints each knob's ``hf`` field; the report
#                page's trial table has a column per knob, the retune report its ``label``s, the
#                plots its ``mark``s; a setting's change between two results is one per knob.
# Semantics stay with the code that models them (model.py simulates out-of-order delivery,
# memory.py prices prefetch depth), reaching the knob through its object here (``config[ORDER]``,
# ``ORDER.proposal``, ``ORDER.gate``), so that a search for the object finds every use.
# Adding a knob is one declaration below, registered in the table: a string-valued one (the
# worker start method) gives ``kind=str``, a ``domain`` from ``Context.platform`` and
# ``stored_choice``; a knob only another loader has gives ``loaders`` and a ``when`` on the
# config's loader. The order of the declarations is the key's, so a new one goes last, keeping
# every existing key (a knob at its default may add no token, as ``ORDER`` does).
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import usage
from .knob import (
    REQUIRED,
    Context,
    Gate,
    HfField,
    Knob,
    Names,
    Proposal,
    Step,
    Table,
    When,
    is_count,
    stored_count,
    stored_flag,
)

__all__ = ["BATCH", "PERSISTENT", "PIN", "PREFETCH", "ORDER", "PREFETCH_CHOICES", "REQUIRED", "SETTINGS",
           "TUNED_SETTINGS", "WITH_WORKERS", "WORKERS", "Context", "Knob", "check_batch_size"]

SETTINGS = Table()
# The DataLoader settings autoloader tunes, in the table's order (a live view of it).
TUNED_SETTINGS = Names(SETTINGS)

# DataLoader's rule: prefetch_factor and persistent_workers (and in_order) only mean something
# when num_workers > 0.
WITH_WORKERS = When("num_workers > 0", lambda values: values["num_workers"] > 0)

# Up to 16: a deep queue lets the other workers run on while a slow batch holds the head of
# the in-order queue; memory decides whether it fits (the guard predicts every config).
PREFETCH_CHOICES: tuple[int, ...] = (2, 4, 8, 16)


def check_batch_size(size: object, fix: str = "pass --batch-size 1 or more, e.g. 128") -> int:
    """The one check of a batch size: a positive integer (a bool is no count)."""
    if not is_count(size, 1):
        raise usage("the batch size must be a positive integer", size, fix)
    return size


def _check_workers(count: object) -> None:
    if not is_count(count):
        raise usage("num_workers must be 0 or more", count, "use 0 or a positive count")


def _check_prefetch(depth: Any) -> None:
    if depth is None or depth < 1:
        raise usage("prefetch_factor must be 1 or more when num_workers > 0", depth,
                    "use 2 (DataLoader's default) or more")


def _stored_batch_size(name: str, data) -> str | None:
    # A count first (its own text), then positive: a stored 0 reads "batch_size is 0".
    return stored_count()(name, data) or (f"{name} is 0" if data.get(name) == 0 else None)


BATCH = SETTINGS.register(Knob(
    "batch_size", int, token=lambda v: f"bs{v}", label="bs", tie_rank=5, cost=lambda v: v,
    check=check_batch_size, stored=_stored_batch_size,
    hf=HfField("per_device_train_batch_size", 9, on_request=True), step=Step(adjacent=True, rank=3)))

WORKERS = SETTINGS.register(Knob(
    "num_workers", int, token=lambda v: f"w{v}", label="w", tie_rank=0, cost=lambda v: v, capacity=True,
    check=_check_workers, stored=stored_count(), hf=HfField("dataloader_num_workers", 0),
    mark=lambda v: f"{v}w"))

# Pinning only matters for a CUDA device, so the space offers it only there.
PIN = SETTINGS.register(Knob(
    "pin_memory", bool, token=lambda v: f"pin{int(v)}", label="pin", tie_rank=2, cost=int, start=True,
    domain=lambda ctx: (True, False) if ctx.cuda else (False,), stored=stored_flag(None),
    hf=HfField("dataloader_pin_memory", 1), step=Step(adjacent=False, rank=2), mark=lambda v: "pin" if v else "",
    proposal=Proposal("pin_off", False, "pin_memory=False",
                      "DataLoader(..., pin_memory=False): no pin thread; the loop then takes each batch itself "
                      "and copies it from pageable memory.")))

# Shallower prefetch holds less memory in flight: cheaper at a tie.
PREFETCH = SETTINGS.register(Knob(
    "prefetch_factor", int, token=lambda v: f"pf{v}", label="pf", tie_rank=1, cost=lambda v: v,
    default=None, start=2, domain=lambda ctx: PREFETCH_CHOICES, when=WITH_WORKERS, capacity=True,
    check=_check_prefetch, stored=stored_count(1, optional=True, rule="a count of 1 or more"),
    hf=HfField("dataloader_prefetch_factor", 3), step=Step(adjacent=True, rank=0),
    mark=lambda v: "" if v == 2 else f"pf{v}"))

# Kept workers are cheaper over a whole run: fresh ones pay their start-up again every epoch.
PERSISTENT = SETTINGS.register(Knob(
    "persistent_workers", bool, token=lambda v: f"pw{int(v)}", label="pw", tie_rank=3,
    cost=lambda v: int(not v), default=False, start=True, domain=lambda ctx: (True, False), when=WITH_WORKERS,
    stored=stored_flag(False), hf=HfField("dataloader_persistent_workers", 2), step=Step(adjacent=False, rank=1),
    mark=lambda v: "" if v else "fresh"))

# False lets a worker's finished batch overtake a slow one ahead of it: it changes the order of
# batches, so it is tried only when the user allows it (its gate), and is a keyword argument only
# when chosen (older torch has no in_order). Batches in order are cheaper at a tie.
ORDER = SETTINGS.register(Knob(
    "in_order", bool, token=lambda v: "" if v else "ooo", label="in_order", tie_rank=4,
    cost=lambda v: int(not v), default=True, domain=lambda ctx: (True, False), when=WITH_WORKERS,
    capacity=True, omit_default=True, stored=stored_flag(True), hf=HfField("dataloader_in_order", 4),
    mark=lambda v: "" if v else "ooo",
    gate=Gate("allow_reorder", "--allow-reorder",
              "Let the pick deliver batches out of order (DataLoader in_order=False) when that is faster.",
              "out of order", "batches then come in another order"),
    proposal=Proposal("in_order", False, "Out-of-order delivery (in_order=False)",
                      "DataLoader(..., in_order=False): a worker's finished batch overtakes a slow one ahead of "
                      "it, so batches come in another order (fine for shuffled training, not where order "
                      "matters); autoloader tune --allow-reorder lets the tuner choose and measure it.",
                      # The simulation sees a slow batch no longer holding up the rest, not what
                      # delivery out of order costs (measured at -15% where it predicted +0%).
                      unpredicted="not predicted: measure it with --allow-reorder")))


def knob(name: str) -> Knob:
    """The knob of DataLoader keyword ``name`` (KeyError for one autoloader does not tune)."""
    return SETTINGS[name]


def open_gates(source: Any) -> frozenset[str]:
    """The gate options ``source`` (a Problem, or anything with the options as attributes) opens."""
    return frozenset(k.gate.option for k in SETTINGS if k.gate is not None and getattr(source, k.gate.option, False))


def context(device: str = "cpu", cpus: int = 1, platform: str | None = None) -> Context:
    """What the knobs' domains depend on, on this platform unless told another."""
    return Context(device, cpus, platform or sys.platform)
