"""``TuneResult``: what a tuning run returns and stores (``to_dict()`` is the result file's JSON
and ``tune --json``'s), read by the codec with every field checked (NOTE [ One declaration per
stored field ] in search/codec.py): a bad one is an ``InvalidRecord`` naming it.

# NOTE [ Result formats ]
# A result file and a study's trial carry ``format`` (FORMAT); one without it is format 1 (format 2
# added the field itself and, in the study, the digest of the code a trial ran). Fields were added
# over the formats (records.py's among them), none changed meaning. A field a result lacks reads as
# absent (None, or empty), so an old result reads as what it measured; a field no longer written
# (an old ``priors`` count) is not read; a renamed one (``control``, now ``rule``, and
# ``memory.control``) is read under either name and written under the new. What the record derives
# from its fields (``then`` in their declarations: ``faults``, ``rule_ratio``, the ``verdict``...;
# older files wrote the rule's as ``control_*``) is written for the file's readers and computed
# again on reading, not read back. A complete run's mark holds the pick and its figures alone
# (``summary``, NOTE [ Runs in a study ] in runs.py): read, it is the same record with
# ``partial`` set and the rest absent.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ..search.choice import Finalist, finalist_of, paired, rule_verdict
from ..search.codec import InvalidRecord, Stored, read, stored
from ..search.config import TunedConfig
from ..search.growth import growth_finding
from ..search.results import OK, BurstError, MachineLoad, TrialResult
from ..search.memory import MemoryForecast
from ..search.methods import StartChoice
from ..search.model import Calibration, Prediction
from ..search.nodes import NodesGraph
from ..search.paired import Ratio, compared
from ..search.policy import MAX_WORKERS_PER_CPU
from ..search.profile import Profile, Threads
from ..search.shards import Stream
from ..search.space import LoaderConfig
from ..search.model_first import WarmStart
from .records import Comparison, DatasetRecord, Inputs, NodeRecord, Provenance, StoredHardware, WhatIfClaim
from .versions import reuse_problem

FORMAT = 2


def record_format(data: object) -> int:
    """The record's format (1 when absent); InvalidRecord for no mapping, or a format not read here."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"the record is {type(data).__name__}, not a mapping")
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise InvalidRecord(f"format {fmt!r} is not a format number")
    if fmt > FORMAT:
        raise InvalidRecord(f"format {fmt} was written by a newer autoloader (this one reads 1 to {FORMAT})")
    return fmt


def trial_record(data: object, max_workers: int | None = None) -> TrialResult:
    """The TrialResult a study's record holds, or InvalidRecord saying what is wrong with it."""
    record_format(data)
    return read(TrialResult, data, limit=max_workers)


# What a complete run's mark keeps of its result (NOTE [ Runs in a study ] in runs.py).
SUMMARY = ("config", "samples_per_s", "rel_interval", "baseline_samples_per_s", "knee", "hardware", "dataset_key",
           "device", "dataset", "measurement_format", "autoloader_version", "finished_at", "path", "load")


def _ratio_fields(name: str, ratio: Ratio | None) -> dict:
    """The ratio, its interval [lo, hi] (null from one round) and its paired rounds."""
    return {name: ratio.ratio if ratio else None, f"{name}_interval": list(ratio.interval) if ratio and ratio.judged
            else None, f"{name}_rounds": ratio.rounds if ratio else 0}


# What the file writes of the rule beside it, for its readers (the record computes it again).
_RULE_FIGURES = ("rule_samples_per_s", ("**", lambda r: _ratio_fields("rule_ratio", r.rule_ratio)),
                    "verdict", ("**", lambda r: _ratio_fields("baseline_ratio", r.baseline_ratio)),
                    "baseline_verdict")


class _OfTuned:
    """An attribute the result reads from its ``tuned`` (the pick and its figures)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, result, owner=None):
        return self if result is None else getattr(result.tuned, self.name)


@dataclass(frozen=True)
class TuneResult(Stored):
    """What ``tune()`` returns: the pick, every trial, the final round and where it was saved.
    ``where``: where the record was read from (a file, or ``<storage>#<study>`` for a run's mark);
    empty for a run's own. ``partial``: a run's mark, the pick and its figures alone. Its fields
    stand in the file's order (NOTE [ Result formats ])."""

    tuned: TunedConfig = stored(flat=True)
    trials: tuple[TrialResult, ...] = stored((), after="since")
    finals: tuple[Finalist, ...] = stored((), after="trials")
    path: str = ""
    snippet_path: str = ""
    storage: str = ""
    tune_seconds: float = 0.0
    resumed_trials: int = 0
    orphans: int = 0
    shm_leaks: int = stored(0, then=("faults",))
    since: Comparison | None = None   # against the previous result for this problem, if any
    profile: Profile | None = stored(None, then=(("profile_seconds", lambda r: r.profile and r.profile.seconds),))
    calibration: Calibration | None = None
    # The model's figures for the pick, corrected by the bursts.
    predicted: Prediction | None = stored(None, then=(
        ("predicted_samples_per_s", lambda r: r.predicted and r.predicted.samples_per_s),
        ("bound", lambda r: r.predicted and r.predicted.bound)))
    # The rule the tuner replaces, measured in the final (``control`` in older files).
    rule: LoaderConfig | None = stored(None, old=("control",), then=_RULE_FIGURES)
    what_ifs: tuple[WhatIfClaim, ...] = ()   # each change asked about: predicted, measured, how sure (records.py)
    # The predicted gain of ORDER's proposal, when its gate is closed.
    reorder_gain: float | None = stored(None, signed=True)
    model_error: tuple[BurstError, ...] = ()   # each burst: predicted against measured
    study: str = ""                       # the study's name in its storage, and this run's id in it
    run_id: str = ""
    dataset: DatasetRecord | None = None  # what was tuned: name, length, content fingerprint, version
    warm_start: WarmStart | None = None
    # The warm start's pick held and the search ended there.
    early_stop: bool = stored(False, then=(("memory", "memory_record"),))
    # The pick's and the rule's memory over a run, as the limit judged them (NOTE [ Copy on
    # read ] in search/growth.py): a measured peak, or a forecast at the end of an epoch; stored
    # together with the growth finding (``memory_record``).
    memory: MemoryForecast | None = stored(None, key="memory.pick", write=False)
    rule_memory: MemoryForecast | None = stored(None, key="memory.rule", old=("control",), write=False)
    load: MachineLoad | None = None       # what others took of the CPUs meanwhile: NOTE [ Others on the machine ]
    threads: Threads | None = None        # the main process's torch threads: NOTE [ The main process's threads ]
    # An iterable dataset's shards and its workers' findings (search/shards.py).
    stream: Stream | None = stored(None, sparse=True)
    # The pick's start method and why: NOTE [ What a start method costs ].
    start: StartChoice | None = stored(None, key="start_method", sparse=True)
    nodes: NodesGraph | None = stored(None, sparse=True)   # a torchdata.nodes graph's own settings (search/nodes.py)
    # A node's tune: NOTE [ Tuning a node's ranks ] in node/__init__.py.
    node: NodeRecord | None = stored(None, sparse=True)
    inputs: Inputs | None = None          # what the run was given that its figures do not say (explain/)
    provenance: Provenance | None = stored(None, flat=True)   # measurement format, autoloader version, when
    where: str = stored("", read=False, write=False)
    partial: bool = stored(False, read=False, write=False)

    @property
    def busy(self) -> bool:
        """Measured on a busy machine: inconclusive for a nightly comparison, never its baseline."""
        return self.load is not None and self.load.busy

    @property
    def conclusive(self) -> bool:
        """May be the baseline a later run compares with: not measured on a busy machine, and its
        own comparison (if any) decided something (NOTE [ Drift ] in tuning/compare.py)."""
        return not self.busy and not (self.since is not None and self.since.inconclusive)

    # LoaderConfig, float, str, str, Knee | None
    config, samples_per_s, dataset_key, device, knee = (_OfTuned() for _ in range(5))

    @property
    def hardware(self) -> StoredHardware:
        return read(StoredHardware, self.tuned.hardware, "hardware")

    @property
    def finished_at(self) -> str | None:
        return self.provenance.finished_at if self.provenance is not None else None

    @property
    def curve(self) -> tuple[tuple[int, float], ...]:
        return self.tuned.knee.curve if self.tuned.knee else ()

    @property
    def rule_samples_per_s(self) -> float | None:
        """The rule's final median (on a node, the node's rate: ranks x the slowest rank's)."""
        median = next((f.median for f in self.finals if f.config == self.rule), None)
        return median * self.ranks if median is not None else None

    @property
    def rule_ratio(self) -> Ratio | None:
        """The pick's rate over the rule's on the final's paired rounds (NOTE [ Paired rounds ]);
        None when the pick is the rule's config or no round measured both."""
        if self.rule is None or self.rule == self.config:
            return None
        return paired(finalist_of(self.config, self.finals), finalist_of(self.rule, self.finals))

    @property
    def verdict(self) -> str:
        """The pick against the rule in the words its interval supports (choice.rule_verdict)."""
        return rule_verdict(self.config, self.rule, self.finals, self.trials)

    @property
    def baseline_ratio(self) -> Ratio | None:
        """The pick over num_workers=0 on their paired rounds, when the final measured both."""
        if self.config.num_workers == 0:
            return None
        baseline = next((f for f in self.finals if f.config.num_workers == 0 and f.rates), None)
        return paired(finalist_of(self.config, self.finals), baseline)

    @property
    def baseline_verdict(self) -> str | None:
        """The pick against num_workers=0 in the words its interval supports; None unmeasured."""
        if not self.tuned.baseline_samples_per_s:
            return None
        if self.config.num_workers == 0:
            return "the pick is num_workers=0"
        return compared(self.baseline_ratio, "num_workers=0",
                        unpaired="measured in separate bursts, which share no round")

    @property
    def ranks(self) -> int:
        return self.node.ranks if self.node else 1

    def measured_differently(self) -> str | None:
        """Why this autoloader cannot compare with or reuse the record (NOTE [ Measurement format ])."""
        p = self.provenance or Provenance()
        return reuse_problem(p.measurement_format, p.autoloader_version)

    def memory_record(self) -> dict | None:
        """The result's ``memory``: the pick's forecast, the rule's, and the growth finding."""
        if self.memory is None:
            return None
        finding = growth_finding(self.memory)
        return {"pick": self.memory.to_dict(),
                "rule": self.rule_memory.to_dict() if self.rule_memory is not None else None,
                "finding": finding.to_dict() if finding is not None else None}

    def faults(self) -> dict[str, int]:
        """Failed or infeasible trials by cause."""
        return dict(Counter(t.cause for t in self.trials if t.status != OK))

    def summary(self) -> TuneResult:
        """The result as a complete run's mark keeps it: the pick and its figures (``SUMMARY``)."""
        return TuneResult(self.tuned, path=self.path, dataset=self.dataset, provenance=self.provenance,
                          load=self.load, where=self.where, partial=True)

    def to_dict(self) -> dict:
        """The stored form: the result file's JSON, or a partial record's summary (``SUMMARY``)."""
        data = {"format": FORMAT, **super().to_dict()}
        return {k: data.get(k) for k in SUMMARY} if self.partial else data

    @classmethod
    def from_dict(cls, data: object, where: str = "", cpus: int | None = None,
                  batch_sizes: tuple[int, ...] | None = None, partial: bool = False) -> TuneResult:
        """The record ``data`` holds (a result file's JSON; a run's mark's summary with ``partial``),
        every field checked: InvalidRecord naming the one that is not what a run writes. ``cpus``
        (this machine's usable CPUs, else the file's own) bounds its configs' workers, so a file
        cannot widen its own limit; ``batch_sizes``: those its key was tuned for."""
        record_format(data)
        own = read(StoredHardware, data.get("hardware", {}), "hardware")
        limit = MAX_WORKERS_PER_CPU * (cpus or own.cpus or 0) or None
        result = read(cls, {k: data[k] for k in SUMMARY if k in data} if partial else data, limit=limit)
        if batch_sizes is not None and result.config.batch_size not in batch_sizes:
            raise InvalidRecord(f"batch_size is {result.config.batch_size}, not one of the batch sizes its key was "
                                f"tuned for ({', '.join(map(str, batch_sizes))})")
        return replace(result, where=where, partial=partial)

    def _read_back(self) -> TuneResult:
        """Each final with its config's last measured trial, which ``Finalist.rate`` falls back on."""
        by_config = {t.config: t for t in self.trials if t.status == OK}
        return replace(self, finals=tuple(replace(f, trial=by_config.get(f.config)) for f in self.finals))


__all__ = ["FORMAT", "SUMMARY", "InvalidRecord", "TuneResult", "record_format", "trial_record"]
