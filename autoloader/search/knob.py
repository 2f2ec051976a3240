"""What one knob's declaration says, the table that holds them (declared in settings.py: NOTE
[ The settings table ]), and the small rules they are built from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import usage


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
    """One setting autoloader tunes: NOTE [ The settings table ] in settings.py."""
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
