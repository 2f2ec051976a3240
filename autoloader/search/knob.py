"""What one knob's declaration says, and the table that holds the declarations.

The declarations themselves are in settings.py (NOTE [ The settings table ] there); this module
is the form they take and the small rules they are built from. Pure: no torch, no files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import usage


class _Required:
    """The default of a knob every config must name (a mapping without it is no config)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# The loader whose keyword arguments a config's ``loader_kwargs`` are; a knob of another loader
# (torchdata.nodes' ParallelMapper, Prefetcher) names that one in its ``loaders``.
DATALOADER = "DataLoader"
# torchdata.nodes' graph (ParallelMapper, Prefetcher, PinMemory): NOTE [ Tuning a torchdata.nodes
# graph ] in probe/nodes.py.
NODES = "torchdata.nodes"


@dataclass(frozen=True)
class When:
    """When a knob means something, as DataLoader's rules say: ``test`` reads the other values of
    the config by name; ``text`` is the rule as an error states it."""
    text: str
    test: Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Gate:
    """A user option that a knob's values other than its ``start`` need: the search offers only
    ``start`` until the user opens it, since those values change what the training run sees."""
    option: str         # the keyword of tune() and the Problem's field
    flag: str           # the command line's spelling
    help: str           # the flag's --help line
    label: str          # the summary table's row for what the closed gate costs
    consequence: str    # what the user accepts by opening it


@dataclass(frozen=True)
class Proposal:
    """The change the explanation proposes on this knob (explain/whatif.py asks the model about
    it): set the pick's value to ``value`` where the knob applies and can take it here."""
    name: str           # the what-if's name, as its stored explanation records it
    value: Any
    title: str
    change: str         # what to change, exactly
    # Where the model cannot say what the change does (it sees only part of its effect), the
    # sentence the what-if says instead of a gain until the run measured it; None: predicted.
    unpredicted: str | None = None


@dataclass(frozen=True)
class HfField:
    """The knob as a ``TrainingArguments`` field. ``rank``: its place among the fields printed
    (the order users have seen); ``on_request``: only when the caller asks (the batch size,
    which the Trainer takes from the user)."""
    name: str
    rank: int
    on_request: bool = False


@dataclass(frozen=True)
class Step:
    """How a warm start moves the knob one step (NOTE [ Warm start ] in warm.py): to the values
    next to the current one in sorted order (``adjacent``), else to each other value offered.
    ``rank``: its place among the steps (the order a re-tune measures them)."""
    adjacent: bool
    rank: int


@dataclass(frozen=True)
class Context:
    """What a knob's domain may depend on: the device, the CPUs, the platform (sys.platform), the
    start method DataLoader's workers get when not told one (``start_method``; None: the
    platform's default, settings.default_start_method), and the loader tuned (a knob of another
    loader offers only its default)."""
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
    """One setting autoloader tunes: NOTE [ The settings table ] in settings.py.

    ``name``   the DataLoader keyword, and the key in every stored mapping;
    ``kind``   the type of its values (int, bool, str);
    ``token``  its part of ``LoaderConfig.key`` ('' for none: e.g. a value at its default);
    ``label``  its short name in the retune report;
    ``tie_rank`` its place in ``LoaderConfig.cost`` (lower ranks weigh first), ``cost`` its
             term there (a knob that does not apply costs 0);
    ``default`` DataLoader's own default (what a mapping without it means); REQUIRED: none;
    ``start``  what ``LoaderConfig.make`` gives it when not told, the common rule's value and the
             search's first (None: ``default``);
    ``domain`` the values the search space offers on a machine; None for the space's own axes
             (the batch sizes asked for, the worker ladder);
    ``when``   when it applies (None: always); where it does not it holds ``default``, is left out
             of the key and the keyword arguments, and costs nothing;
    ``gate``   the user option its values other than ``start`` need;
    ``omit_default`` left out of the keyword arguments (and the frameworks' forms) at its default,
             for a keyword older releases lack;
    ``check``  LoaderConfig's rule for a value (raises UsageError), where the knob applies;
    ``stored`` what is wrong with a stored mapping's value of it (InvalidRecord's text), or None;
    ``hf``     its ``TrainingArguments`` field; ``loaders``: the loaders that have it (only a
             DataLoader knob is a DataLoader keyword argument); ``from_loader``: its value read
             back from a built loader (None: the attribute of its name, as DataLoader keeps them);
    ``fixable`` the user may pass it among the DataLoader arguments: it is then theirs, honoured
             and not searched (the start method); any other knob passed is refused;
    ``step``   how a warm start moves it (None: never); ``mark``: its word on a plot's label
             ('' for nothing to say); ``capacity``: it changes only how fast batches come, not the
             step's work or the epoch restarts (policy.same_kind); ``proposal``: its what-if.
    """
    name: str
    kind: type
    token: Callable[[Any], str]
    label: str
    tie_rank: float
    cost: Callable[[Any], Any]
    default: Any = REQUIRED
    start: Any = None
    domain: Callable[[Context], tuple] | None = None
    when: When | None = None
    gate: Gate | None = None
    omit_default: bool = False
    check: Callable[[Any], None] | None = None
    stored: Callable[[str, Mapping[str, Any]], str | None] | None = None
    hf: HfField | None = None
    loaders: frozenset[str] = frozenset({DATALOADER})
    from_loader: Callable[[Any], Any] | None = None
    step: Step | None = None
    mark: Callable[[Any], str] = lambda value: ""
    capacity: bool = False
    proposal: Proposal | None = None
    fixable: bool = False

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
    """The knobs in declaration order: the order of the key, of the keyword arguments, of a
    stored mapping. ``register`` adds one (at import, in settings.py; a test's toy knob at run
    time, ``remove``d after it)."""

    def __init__(self) -> None:
        self._knobs: dict[str, Knob] = {}
        self._tuple: tuple[Knob, ...] = ()

    def register(self, knob: Knob) -> Knob:
        if knob.name in self._knobs:
            raise usage("each knob is declared once", knob.name, "give the new knob another name")
        self._knobs[knob.name] = knob
        self._tuple = tuple(self._knobs.values())
        return knob

    def remove(self, name: str) -> None:
        del self._knobs[name]
        self._tuple = tuple(self._knobs.values())

    def __iter__(self) -> Iterator[Knob]:
        return iter(self._tuple)

    def __len__(self) -> int:
        return len(self._tuple)

    def __contains__(self, name: object) -> bool:
        return name in self._knobs

    def __getitem__(self, name: str) -> Knob:
        """The knob of DataLoader keyword ``name``."""
        return self._knobs[name]

    def knobs(self) -> tuple[Knob, ...]:
        return self._tuple

    def names(self) -> tuple[str, ...]:
        return tuple(self._knobs)

    def by_tie_rank(self) -> tuple[Knob, ...]:
        return tuple(sorted(self._tuple, key=lambda k: k.tie_rank))


class Names(Sequence):
    """The table's names as a live sequence (a knob registered later is in it)."""

    def __init__(self, table: Table):
        self._table = table

    def __getitem__(self, index):
        return self._table.names()[index]

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return repr(self._table.names())


# --- the rules a declaration is built from ------------------------------------------------------

def is_count(value: object, least: int = 0) -> bool:
    """An integer of at least ``least`` (a bool is no count)."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


def stored_count(least: int = 0, *, optional: bool = False, rule: str | None = None):
    """A stored count: "X is v, not a count" (then "X is v" under ``least``); with ``rule``, any
    value off it reads "X is v, not <rule>". ``optional``: null (or absent) is fine."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name)
        if value is None and optional:
            return None
        if rule is not None:
            return None if is_count(value, least) else f"{name} is {value!r}, not {rule}"
        if not is_count(value):
            return f"{name} is {value!r}, not a count"
        return None if value >= least else f"{name} is {value!r}"
    return problem


def stored_flag(default: bool | None):
    """A stored true/false; ``default`` None: it must be there ("X is missing")."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name, False if default is None else default)
        if not isinstance(value, bool):
            return f"{name} is {data.get(name)!r}, not true or false"
        return f"{name} is missing" if default is None and name not in data else None
    return problem


def stored_choice(choices: Sequence[str]):
    """A stored name among ``choices`` (a string-valued knob), or null for DataLoader's default."""
    def problem(name: str, data: Mapping[str, Any]) -> str | None:
        value = data.get(name)
        return None if value is None or value in choices else f"{name} is {value!r}, not one of {', '.join(choices)}"
    return problem
