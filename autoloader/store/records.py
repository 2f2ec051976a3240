"""The result's own small records: the hardware it was measured on, the dataset, how and when it
was measured, a node's arithmetic and what the run was given (and the reader of the model's error
on each burst, search/results.BurstError).

Each reads itself from the stored mapping (``from_dict``, checked field by field, raising
``InvalidRecord`` naming the field) and writes the same mapping back (``to_dict``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.results import BurstError
from . import checks
from .checks import MAX_CPUS, InvalidRecord


@dataclass(frozen=True)
class StoredHardware:
    """The machine a result was measured on, as the result says it (inputs/hardware.Hardware's
    fields): the fingerprint names its folder and study, the rest places it among its siblings
    (store/history.hardware_distance). A field an older result does not record is None."""
    fingerprint: str | None = None
    cpus: int | None = None
    cpu_model: str | None = None
    memory_gib: float | None = None
    gpus: tuple[str, ...] | None = None
    ranks: int = 1

    @classmethod
    def from_dict(cls, data: dict) -> "StoredHardware":
        """From a hardware mapping validate.tuned_config has checked."""
        gpus = data.get("gpus")
        return cls(data.get("fingerprint"), data.get("cpus"), data.get("cpu_model"), data.get("memory_gib"),
                   tuple(gpus) if gpus is not None else None, data.get("ranks") or 1)


@dataclass(frozen=True)
class DatasetRecord:
    """What was tuned: the dataset's name, its class, its length, its content fingerprint and the
    user's version label (NOTE [ Content fingerprint ] in inputs/content.py)."""
    name: str | None = None
    dataset_class: str | None = None
    length: int | None = None
    content: str | None = None
    version: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "class": self.dataset_class, "length": self.length, "content": self.content,
                "version": self.version}

    @classmethod
    def from_dict(cls, value: object, name: str = "dataset") -> "DatasetRecord | None":
        data = checks.mapping(value, name, optional=True)
        if data is None:
            return None
        return cls(*(checks.text(data.get(k), f"{name}.{k}") for k in ("name", "class")),
                   checks.count(data.get("length"), f"{name}.length"),
                   *(checks.text(data.get(k), f"{name}.{k}") for k in ("content", "version")))


@dataclass(frozen=True)
class Provenance:
    """How and when a result was measured (NOTE [ Measurement format ] in store/versions.py); a
    result stores these three at its top level."""
    measurement_format: int | None = None
    autoloader_version: str | None = None
    finished_at: str | None = None

    FIELDS = ("measurement_format", "autoloader_version", "finished_at")

    def to_dict(self) -> dict:
        return {"measurement_format": self.measurement_format, "autoloader_version": self.autoloader_version,
                "finished_at": self.finished_at}

    @classmethod
    def from_dict(cls, data: dict) -> "Provenance | None":
        """From a result's top level; None for a result written before it recorded them."""
        if not any(k in data for k in cls.FIELDS):
            return None
        return cls(checks.count(data.get("measurement_format"), "measurement_format"),
                   checks.text(data.get("autoloader_version"), "autoloader_version"),
                   checks.moment(data.get("finished_at"), "finished_at"))


# What a node's result says in words of its figures (NOTE [ Tuning a node's ranks ] in node/__init__.py).
NODE_WORDS = {"config": "per rank: every rank runs this DataLoader on its DistributedSampler shard",
              "samples_per_s": "the node's: ranks x the slowest rank's; trials and finals list the slowest "
                               "rank's (rank_samples_per_s: every rank's)",
              "profile": "rank 0's alone"}


@dataclass(frozen=True)
class NodeRecord:
    """A node's tune: its ranks, the node's CPUs and each rank's share, and each rank's memory ceiling."""
    ranks: int
    node_cpus: int | None = None
    cpus_per_rank: int | None = None
    max_memory_per_rank: int | None = None

    def to_dict(self) -> dict:
        return {"ranks": self.ranks, "node_cpus": self.node_cpus, "cpus_per_rank": self.cpus_per_rank,
                "max_memory_per_rank": self.max_memory_per_rank, **NODE_WORDS}

    @classmethod
    def from_dict(cls, value: object, name: str = "node") -> "NodeRecord | None":
        data = checks.mapping(value, name, optional=True)
        if data is None:
            return None
        return cls(checks.count(data.get("ranks"), f"{name}.ranks", optional=False, least=1, most=MAX_CPUS),
                   checks.count(data.get("node_cpus"), f"{name}.node_cpus", most=MAX_CPUS),
                   checks.count(data.get("cpus_per_rank"), f"{name}.cpus_per_rank", most=MAX_CPUS),
                   checks.count(data.get("max_memory_per_rank"), f"{name}.max_memory_per_rank"))


@dataclass(frozen=True)
class Inputs:
    """What the run was given that its figures do not say (explain/ and ``show`` read it): the
    step's name as given (a spec, or the object's module and name; None: no step), whether
    reordering was allowed, the memory limits the configs were held to, when each part of the run
    ran: (what, start s, end s, config key or None), and the step's identity, what its key holds
    (``module.qualname#digest``: NOTE [ A step keyed by what it is ]; None in older results)."""
    step: str | None = None
    allow_reorder: bool | None = None
    max_memory: int | None = None
    shm_free: int | None = None
    timeline: tuple[tuple[str, float, float, str | None], ...] = ()
    step_identity: str | None = None
    # The set-up's and the profile's parts, (what, start s, end s) from the run's start: where the
    # run's first seconds went (the trial process's interpreter and torch, the dataset, the step,
    # each profile stage). Empty in older results.
    parts: tuple[tuple[str, float, float], ...] = ()
    # What set max_memory: "given" (--max-memory), "ram" (the RAM available), "cgroup" (the
    # cgroup's room: NOTE [ Reading the cgroup ] in inputs/cgroup.py); and the cgroup's memory
    # limit where one binds. None in older results.
    max_memory_by: str | None = None
    cgroup_limit: int | None = None

    def to_dict(self) -> dict:
        return {"step": self.step, "allow_reorder": self.allow_reorder, "max_memory": self.max_memory,
                "shm_free": self.shm_free, "timeline": [list(mark) for mark in self.timeline],
                "step_identity": self.step_identity, "parts": [list(part) for part in self.parts],
                "max_memory_by": self.max_memory_by, "cgroup_limit": self.cgroup_limit}

    @classmethod
    def from_dict(cls, value: object, name: str = "inputs") -> "Inputs | None":
        data = checks.mapping(value, name, optional=True)
        if data is None:
            return None
        timeline = [(checks.text(m[0], f"{at}[0]", optional=False), checks.number(m[1], f"{at}[1]", optional=False),
                     checks.number(m[2], f"{at}[2]", optional=False), checks.text(m[3], f"{at}[3]"))
                    for at, m in _marks(data, name, "timeline", "[what, start, end, config]")]
        parts = [(checks.text(m[0], f"{at}[0]", optional=False),
                  checks.number(m[1], f"{at}[1]", optional=False, signed=True),
                  checks.number(m[2], f"{at}[2]", optional=False, signed=True))
                 for at, m in _marks(data, name, "parts", "[what, start, end]")]
        return cls(checks.text(data.get("step"), f"{name}.step"),
                   checks.flag(data.get("allow_reorder"), f"{name}.allow_reorder", optional=True),
                   checks.count(data.get("max_memory"), f"{name}.max_memory"),
                   checks.count(data.get("shm_free"), f"{name}.shm_free"), tuple(timeline),
                   checks.text(data.get("step_identity"), f"{name}.step_identity"), tuple(parts),
                   checks.text(data.get("max_memory_by"), f"{name}.max_memory_by"),
                   checks.count(data.get("cgroup_limit"), f"{name}.cgroup_limit"))


def _marks(data: dict, name: str, key: str, shape: str) -> list[tuple[str, list]]:
    """``data[key]``'s entries with where each is, every one a list of ``shape``'s length."""
    width = shape.count(",") + 1
    out = []
    for i, mark in enumerate(checks.items(data.get(key), f"{name}.{key}")):
        at = f"{name}.{key}[{i}]"
        if not isinstance(mark, list) or len(mark) != width:
            raise InvalidRecord(f"{at} is {mark!r}, not {shape}")
        out.append((at, mark))
    return out


def burst_error(value: object, name: str) -> BurstError:
    """One burst's entry of a result's ``model_error``, checked."""
    data = checks.mapping(value, name)
    return BurstError(checks.text(data.get("config"), f"{name}.config", optional=False),
                      checks.number(data.get("predicted"), f"{name}.predicted", optional=False),
                      checks.number(data.get("measured"), f"{name}.measured", optional=False, positive=True))
