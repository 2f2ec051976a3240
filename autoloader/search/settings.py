"""The settings table: every DataLoader setting autoloader tunes, each declared once; what one
knob's declaration says (``Knob``), the table that holds them and the small rules they are built from.

# NOTE [ The settings table ]
# A knob is one ``Knob`` (below) registered in ``SETTINGS``, and everything that names settings
# iterates the table rather than spelling them: ``LoaderConfig`` (space.py) holds one value per
# knob in the table's order, checked by their ``check`` and ``when``; the key joins their
# ``token``s (``bs128-w2-pin0-pf2-pw1``); ``LoaderConfig.cost`` their ``cost`` by ``tie_rank``;
# ``SearchSpace`` their ``domain`` on this machine, offering only ``start`` behind a closed
# ``gate``; a warm start steps along their ``step``; codec.py checks a stored mapping with their
# ``stored`` rule; the outputs print ``loader_kwargs``, each knob's ``hf`` field, ``label`` and
# ``mark``. Semantics stay with the code that models them, reaching the knob through its object
# here (``config[ORDER]``, ``ORDER.proposal``), so that a search for the object finds every use.
# Adding a knob is one declaration below; the declarations' order is the key's, so a new one goes
# last, keeping every existing key (a knob at its default may add no token, as ``ORDER`` does).
#
# NOTE [ The start method as a knob ]
# ``multiprocessing_context`` (``START``): fork (quick, its pages shared until written: NOTE
# [ Copy on read ] in growth.py), forkserver and spawn (a fresh interpreter that unpickles its
# own dataset: seconds to start, no copy on read). None is DataLoader's default, the loop's
# process's method (``Context.start_method``), so every key and keyword argument of a config at
# the default is as it was. The others are offered only behind ``--search-start-method``, since
# they change what the training run must do (the dataset pickled to each worker, the main module
# re-imported); a method the user passed is theirs, and the run offers only None. With the gate
# open the profile measures each method's start-up and memory (search/methods.py).
# torchdata.nodes' knobs are such too: ``LOADER`` names the config's loader (no token for the
# DataLoader), knobs both loaders have list both in ``loaders``, ``METHOD`` and ``CONCURRENCY``
# apply only in a nodes config, and the space offers another loader's knob only its default.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import usage

__all__ = ["BATCH", "CONCURRENCY", "DATALOADER", "LOADER", "METHOD", "NODES", "PERSISTENT", "PIN", "PREFETCH",
           "ORDER", "PREFETCH_CHOICES", "REQUIRED", "SETTINGS", "START", "START_METHODS", "TUNED_SETTINGS",
           "WITH_WORKERS", "WORKERS", "Context", "HfField", "Knob", "check_batch_size", "default_start_method",
           "knobs_of", "platform_methods", "stored_choice"]


class _Required:
    """The default of a knob every config must name."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# The loaders a knob may belong to (``Knob.loaders``): NOTE [ Tuning a torchdata.nodes graph ] in
# probe/nodes.py for the second.
DATALOADER = "DataLoader"
NODES = "torchdata.nodes"


@dataclass(frozen=True)
class When:
    """When a knob means something: ``test`` reads the config's values by name; ``text`` is the
    rule as an error states it."""
    text: str
    test: Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Gate:
    """A user option that a knob's values other than its ``start`` need, since those values change
    what the training run sees."""
    option: str         # the keyword of tune() and the Problem's field
    flag: str           # the command line's spelling
    help: str           # the flag's --help line
    label: str          # the summary table's row for what the closed gate costs
    consequence: str    # what the user accepts by opening it


@dataclass(frozen=True)
class Proposal:
    """The change the explanation proposes on this knob (explain/whatif.py): the pick at ``value``."""
    name: str           # the what-if's name, as its stored explanation records it
    value: Any
    title: str
    change: str         # what to change, exactly
    unpredicted: str | None = None   # what the what-if says instead of a gain it cannot predict


@dataclass(frozen=True)
class HfField:
    """The knob as a ``TrainingArguments`` field: ``rank`` its place among those printed,
    ``on_request`` printed only when asked (the batch size)."""
    name: str
    rank: int
    on_request: bool = False


@dataclass(frozen=True)
class Step:
    """How a warm start moves the knob (NOTE [ Warm start ]): to the ``adjacent`` values in sorted
    order, else to each other value offered; ``rank``: its place among the steps."""
    adjacent: bool
    rank: int


@dataclass(frozen=True)
class Context:
    """What a knob's domain may depend on; ``start_method``: the one workers get when not told
    (None: the platform's default)."""
    device: str = "cpu"
    cpus: int = 1
    platform: str = "linux"
    start_method: str | None = None
    loader: str = DATALOADER

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


@dataclass(frozen=True, eq=False)
class Knob:
    """One setting autoloader tunes: NOTE [ The settings table ]."""
    name: str                      # the DataLoader keyword, and its stored key
    kind: type                     # its values' type
    token: Callable[[Any], str]    # its part of ``LoaderConfig.key`` ('' for none)
    label: str                     # its name in the retune report
    tie_rank: float                # its place in ``LoaderConfig.cost``
    cost: Callable[[Any], Any]     # its term there
    default: Any = REQUIRED        # DataLoader's own (REQUIRED: none)
    start: Any = None              # the search's first value (None: ``default``)
    domain: Callable[[Context], tuple] | None = None   # the values offered here (None: the space's own axes)
    when: When | None = None       # when it applies (else it holds ``default``, no token, no keyword, no cost)
    gate: Gate | None = None       # the option its values but ``start`` need
    omit_default: bool = False     # no keyword argument at its default
    check: Callable[[Any], None] | None = None   # LoaderConfig's rule (raises UsageError)
    stored: Callable[[str, Mapping[str, Any]], str | None] | None = None   # what is wrong with a stored value
    hf: HfField | None = None      # its ``TrainingArguments`` field
    loaders: frozenset[str] = frozenset({DATALOADER})   # the loaders that have it
    from_loader: Callable[[Any], Any] | None = None   # read back from a built loader (None: its attribute)
    step: Step | None = None       # how a warm start moves it
    mark: Callable[[Any], str] = lambda value: ""   # its word on a plot
    capacity: bool = False         # it changes only how fast batches come (policy.same_kind)
    proposal: Proposal | None = None   # its what-if
    fixable: bool = False          # the user may pass it: honoured, not searched

    @property
    def first(self) -> Any:
        """The value the search starts from when not told."""
        return self.default if self.start is None else self.start

    def applies(self, values: Mapping[str, Any]) -> bool:
        """Whether the knob means something beside ``values`` (a config, or its mapping)."""
        return self.when is None or self.when.test(values)

    def setting(self, value: Any) -> str:
        """``name=value``, as a DataLoader call spells it."""
        return f"{self.name}={value!r}"

    def proposed(self, config):
        """``config`` with this knob at its proposal's value."""
        return config.replace(**{self.name: self.proposal.value})

    def past_gate(self, config) -> bool:
        """Whether ``config`` holds a value of this knob that its gate must have let through."""
        return self.gate is not None and config[self] != self.first


class Table:
    """The knobs in declaration order: the key's, the keyword arguments', a stored mapping's.
    ``names``: their names, a live view (a knob registered later is in it)."""

    def __init__(self) -> None:
        self._knobs: dict[str, Knob] = {}
        self.names = self._knobs.keys()

    def register(self, knob: Knob) -> Knob:
        if knob.name in self._knobs:
            raise usage("each knob is declared once", knob.name, "give the new knob another name")
        self._knobs[knob.name] = knob
        return knob

    def remove(self, name: str) -> None:
        del self._knobs[name]

    def __iter__(self) -> Iterator[Knob]:
        return iter(self._knobs.values())

    def __len__(self) -> int:
        return len(self._knobs)

    def __contains__(self, name: object) -> bool:
        return name in self._knobs

    def __getitem__(self, name: str) -> Knob:
        """The knob of DataLoader keyword ``name``."""
        return self._knobs[name]

    def knobs(self) -> tuple[Knob, ...]:
        return tuple(self._knobs.values())

    def by_tie_rank(self) -> tuple[Knob, ...]:
        return tuple(sorted(self._knobs.values(), key=lambda k: k.tie_rank))


# --- the rules a declaration is built from ------------------------------------------------------

def is_count(value: object, least: int = 0) -> bool:
    """An integer (not a bool) of at least ``least``."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


def checked(ok: Callable[[Any], bool], rule: str, fix: str) -> Callable[[Any], None]:
    """A knob's ``check``: a UsageError stating ``rule`` and ``fix`` for a value ``ok`` refuses."""
    def check(value: Any) -> None:
        if not ok(value):
            raise usage(rule, value, fix)
    return check


def stored_count(least: int = 0, *, optional: bool = False, rule: str = "a count"):
    """A stored count of at least ``least`` (``rule``: those words); ``optional``: null is fine."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name)
        if (value is None and optional) or is_count(value, least):
            return None
        return f"{name} is {value!r}, not {rule}"
    return problem


def stored_flag(default: bool | None):
    """A stored true/false; ``default`` None: it must be there."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name, False if default is None else default)
        if not isinstance(value, bool):
            return f"{name} is {data.get(name)!r}, not true or false"
        return f"{name} is missing" if default is None and name not in data else None
    return problem


def stored_choice(choices: Sequence[str]):
    """A stored name among ``choices``, or null for the default."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name)
        return None if value is None or value in choices else f"{name} is {value!r}, not one of {', '.join(choices)}"
    return problem



SETTINGS = Table()
# The DataLoader settings autoloader tunes, in the table's order (a live view of it).
TUNED_SETTINGS = SETTINGS.names

WITH_WORKERS = When("num_workers > 0", lambda values: values["num_workers"] > 0)
# A DataLoader's workers alone can persist (a ParallelMapper starts its own each epoch).
DATALOADER_WORKERS = When("num_workers > 0", lambda values: values["num_workers"] > 0
                          and values.get("loader", DATALOADER) == DATALOADER)
NODES_WORKERS = When("num_workers > 0 in a torchdata.nodes graph",
                     lambda values: values["num_workers"] > 0 and values.get("loader") == NODES)
BOTH = frozenset({DATALOADER, NODES})

# A deep queue lets the other workers run on past a slow batch; memory decides whether it fits.
PREFETCH_CHOICES: tuple[int, ...] = (2, 4, 8, 16)


def check_batch_size(size: object, fix: str = "pass --batch-size 1 or more, e.g. 128") -> int:
    """The one check of a batch size: a positive integer."""
    if not is_count(size, 1):
        raise usage("the batch size must be a positive integer", size, fix)
    return size


def _stored_batch_size(name: str, data) -> str | None:
    # A count first (its own text), then positive: a stored 0 reads "batch_size is 0".
    return stored_count()(name, data) or (f"{name} is 0" if data.get(name) == 0 else None)


BATCH = SETTINGS.register(Knob(
    "batch_size", int, token=lambda v: f"bs{v}", label="bs", tie_rank=5, cost=lambda v: v,
    check=check_batch_size, stored=_stored_batch_size,
    hf=HfField("per_device_train_batch_size", 9, on_request=True), step=Step(adjacent=True, rank=3), loaders=BOTH))

WORKERS = SETTINGS.register(Knob(
    "num_workers", int, token=lambda v: f"w{v}", label="w", tie_rank=0, cost=lambda v: v, capacity=True,
    check=checked(is_count, "num_workers must be 0 or more", "use 0 or a positive count"), stored=stored_count(),
    hf=HfField("dataloader_num_workers", 0), mark=lambda v: f"{v}w", loaders=BOTH))

# Pinning only matters for a CUDA device, so the space offers it only there.
PIN = SETTINGS.register(Knob(
    "pin_memory", bool, token=lambda v: f"pin{int(v)}", label="pin", tie_rank=2, cost=int, start=True,
    domain=lambda ctx: (True, False) if ctx.cuda else (False,), stored=stored_flag(None),
    hf=HfField("dataloader_pin_memory", 1), step=Step(adjacent=False, rank=2), mark=lambda v: "pin" if v else "",
    proposal=Proposal("pin_off", False, "pin_memory=False",
                      "DataLoader(..., pin_memory=False): no pin thread; the loop then takes each batch itself "
                      "and copies it from pageable memory."),
    loaders=BOTH))

# Shallower prefetch holds less memory in flight: cheaper at a tie.
PREFETCH = SETTINGS.register(Knob(
    "prefetch_factor", int, token=lambda v: f"pf{v}", label="pf", tie_rank=1, cost=lambda v: v,
    default=None, start=2, domain=lambda ctx: PREFETCH_CHOICES, when=WITH_WORKERS, capacity=True,
    check=checked(lambda depth: not (depth is None or depth < 1), "prefetch_factor must be 1 or more when "
                  "num_workers > 0", "use 2 (DataLoader's default) or more"),
    stored=stored_count(1, optional=True, rule="a count of 1 or more"),
    hf=HfField("dataloader_prefetch_factor", 3), step=Step(adjacent=True, rank=0),
    mark=lambda v: "" if v == 2 else f"pf{v}", loaders=BOTH))

# Kept workers are cheaper over a whole run: fresh ones pay their start-up again every epoch.
PERSISTENT = SETTINGS.register(Knob(
    "persistent_workers", bool, token=lambda v: f"pw{int(v)}", label="pw", tie_rank=3,
    cost=lambda v: int(not v), default=False, start=True, domain=lambda ctx: (True, False), when=DATALOADER_WORKERS,
    stored=stored_flag(False), hf=HfField("dataloader_persistent_workers", 2), step=Step(adjacent=False, rank=1),
    mark=lambda v: "" if v else "fresh"))

# False changes the order of batches, so it is tried only behind its gate, and is a keyword
# argument only when chosen (older torch has no in_order). In order is cheaper at a tie.
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
                      # delivery out of order costs.
                      unpredicted="not predicted: measure it with --allow-reorder"),
    loaders=BOTH))


# Which loader a config is for; the problem fixes it (never searched).
LOADER = SETTINGS.register(Knob(
    "loader", str, token=lambda v: "" if v == DATALOADER else "nodes", label="loader", tie_rank=6,
    cost=lambda v: 0, default=DATALOADER, domain=lambda ctx: (ctx.loader,), loaders=frozenset({NODES}),
    omit_default=True, stored=stored_choice((DATALOADER, NODES))))

# ParallelMapper's workers as threads (its default: one GIL) or processes; threads win a tie.
METHOD = SETTINGS.register(Knob(
    "method", str, token=lambda v: "" if v == "thread" else "proc", label="method", tie_rank=0.5,
    cost=lambda v: int(v == "process"), default="thread",
    domain=lambda ctx: ("thread", "process") if ctx.loader == NODES else ("thread",), when=NODES_WORKERS,
    loaders=frozenset({NODES}), stored=stored_choice(("thread", "process")),
    mark=lambda v: "proc" if v == "process" else ""))


# ParallelMapper's cap on the items in flight (None: 2 x num_workers), which it refuses past its
# workers: the knob applies only with at least that many.
CONCURRENCY = SETTINGS.register(Knob(
    "max_concurrent", int, token=lambda v: "" if v is None else f"mc{v}", label="mc", tie_rank=4.5,
    cost=lambda v: int(v is not None), default=None,
    domain=lambda ctx: (None,), loaders=frozenset({NODES}),
    when=When("num_workers > 0, at least max_concurrent of them, in a torchdata.nodes graph",
              lambda values: NODES_WORKERS.test(values)
              and (values.get("max_concurrent") is None or values["max_concurrent"] <= values["num_workers"])),
    check=checked(lambda cap: cap is None or is_count(cap, 1), "max_concurrent is None or 1 or more",
                  "use None (ParallelMapper's 2 x num_workers) or a count"),
    stored=stored_count(1, optional=True, rule="a count of 1 or more"),
    mark=lambda v: "" if v is None else f"mc{v}"))


def knobs_of(loader: str) -> tuple[Knob, ...]:
    """The knobs a loader has, in the table's order (a report's columns for its configs)."""
    return tuple(k for k in SETTINGS if loader in k.loaders or (k is LOADER and loader != DATALOADER))


# Every start method multiprocessing knows, cheapest start first (the order of the tie).
START_METHODS: tuple[str, ...] = ("fork", "forkserver", "spawn")


def platform_methods(platform: str) -> tuple[str, ...]:
    """The start methods ``platform`` has: spawn alone on Windows."""
    return ("spawn",) if platform.startswith(("win", "cygwin")) else START_METHODS


def default_start_method(platform: str, version: tuple[int, int] | None = None) -> str:
    """The start method a process gets when no one set one."""
    if platform.startswith(("win", "cygwin", "darwin")):
        return "spawn"
    return "forkserver" if (version or tuple(sys.version_info[:2])) >= (3, 14) else "fork"


def _start_domain(ctx: Context) -> tuple:
    default = ctx.start_method or default_start_method(ctx.platform)
    return (None,) + tuple(m for m in platform_methods(ctx.platform) if m != default)


# NOTE [ The start method as a knob ]: a cheaper start wins a tie; None costs nothing.
START = SETTINGS.register(Knob(
    "multiprocessing_context", str, token=lambda v: f"mp{v}" if v else "", label="mp", tie_rank=3.5,
    cost=lambda v: 0 if v is None else 1 + START_METHODS.index(v), default=None, domain=_start_domain,
    when=WITH_WORKERS, omit_default=True, stored=stored_choice(START_METHODS),
    check=checked(lambda method: method is None or method in START_METHODS,
                  f"multiprocessing_context is a start method's name ({', '.join(START_METHODS)}) or None",
                  "pass e.g. multiprocessing_context='spawn'"),
    hf=HfField("dataloader_multiprocessing_context", 5),
    from_loader=lambda loader: _loader_method(getattr(loader, "multiprocessing_context", None)),
    mark=lambda v: v or "", fixable=True,
    gate=Gate("search_start_method", "--search-start-method",
              "Measure the worker start methods (fork, forkserver, spawn: DataLoader multiprocessing_context) "
              "and let the tuner pick one.",
              "start method", "spawn and forkserver pickle the dataset to every worker and re-import the main "
                              "module, so the training script needs its `if __name__ == \"__main__\":` guard")))


def _loader_method(context: Any) -> str | None:
    # A context object (or None); the default's own is no choice of the user's.
    if context is None or isinstance(context, str):
        return context
    name = context.get_start_method() if hasattr(context, "get_start_method") else None
    return None if name == default_start_method(sys.platform) else name


def open_gates(source: Any) -> frozenset[str]:
    """The gate options ``source`` (anything with the options as attributes) opens."""
    return frozenset(k.gate.option for k in SETTINGS if k.gate is not None and getattr(source, k.gate.option, False))


def context(device: str = "cpu", cpus: int = 1, platform: str | None = None,
            start_method: str | None = None, loader: str = DATALOADER) -> Context:
    """What the knobs' domains depend on, on this platform unless told another."""
    return Context(device, cpus, platform or sys.platform, start_method, loader)
