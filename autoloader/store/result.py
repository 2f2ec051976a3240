"""``TuneResult``: what a tuning run returns and stores, read and written by itself.

``to_dict()`` is the result file's JSON (and ``tune --json``'s); ``TuneResult.from_dict(data)``
reads any format a run has written (NOTE [ Result formats ]), every field checked as it is read
(checks.py, validate.py, parts.py, records.py): a bad one is an ``InvalidRecord`` naming it, never
a record with a bad field in it, so whoever holds a TuneResult reads attributes and need not check.

# NOTE [ Result formats ]
# A result file carries ``format`` (validate.FORMAT); one without it is format 1. The fields grew
# over formats 1 and 2 without any changing meaning: the first results held the pick, its knee,
# trials and finals; the profile, the calibration, the prediction and the control came next,
# then the format itself with the dataset and the provenance, the warm start, the memory
# forecasts, the machine's load and the threads, the what-ifs (claims.py). A field a result does not have is read as
# absent (None, or empty), so an old result reads as what it measured; a field no longer written
# (an old ``priors`` count) is not read. What the record derives from its fields (``faults``,
# ``profile_seconds``, ``control_samples_per_s``, ``control_ratio`` and its interval, the
# ``verdict``...) is written for the file's readers and
# computed again on reading, not read back. A complete run's mark in a shared storage holds the
# pick and its figures alone (``summary``, NOTE [ Runs in a study ] in runs.py): read, it is the
# same record with ``partial`` set and the rest absent.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..search.choice import Finalist, finalist_of, paired, rule_verdict
from ..search.config import TunedConfig
from ..search.growth import growth_finding
from ..search.nodes import NodesGraph
from ..search.knee import Knee
from ..search.load import MachineLoad
from ..search.memory import MemoryForecast
from ..search.methods import StartChoice
from ..search.model import Calibration, Prediction
from ..search.paired import Ratio, compared
from ..search.profile import Profile
from ..search.results import OK, BurstError, TrialResult
from ..search.space import LoaderConfig
from ..search.shards import Stream
from ..search.threads import Threads
from ..search.warm import WarmStart, warm_record
from . import checks, parts
from .claims import WhatIfClaim, what_ifs
from .checks import InvalidRecord
from .comparison import Comparison, comparison
from .records import DatasetRecord, Inputs, NodeRecord, Provenance, StoredHardware, burst_error
from .validate import FORMAT, config_at, max_workers, tuned_config
from .versions import reuse_problem

# What a complete run's mark keeps of its result (NOTE [ Runs in a study ] in runs.py).
SUMMARY = ("config", "samples_per_s", "rel_interval", "baseline_samples_per_s", "knee", "hardware", "dataset_key",
           "device", "dataset", "measurement_format", "autoloader_version", "finished_at", "path", "load")


@dataclass(frozen=True)
class TuneResult:
    """What ``tune()`` returns: the pick, every trial, the final round and where it was saved.
    ``where``: where the record was read from (a file, or ``<storage>#<study>`` for a run's mark);
    empty for a run's own. ``partial``: a run's mark, the pick and its figures alone."""

    tuned: TunedConfig
    trials: tuple[TrialResult, ...]
    finals: tuple[Finalist, ...]
    path: str
    snippet_path: str
    storage: str
    tune_seconds: float
    resumed_trials: int
    orphans: int
    shm_leaks: int = 0
    since: Comparison | None = None   # against the previous result for this problem, if any
    profile: Profile | None = None
    calibration: Calibration | None = None
    predicted: Prediction | None = None   # the model's figures for the pick, corrected by the bursts
    control: LoaderConfig | None = None   # the rule the tuner replaces, measured in the final
    reorder_gain: float | None = None     # predicted gain of ORDER's proposal, when its gate is closed
    model_error: tuple[BurstError, ...] = ()   # each burst: predicted against measured
    study: str = ""                       # the study's name in its storage, and this run's id in it
    run_id: str = ""
    dataset: DatasetRecord | None = None  # what was tuned: name, length, content fingerprint, version
    provenance: Provenance | None = None  # measurement format, autoloader version, when
    warm_start: WarmStart | None = None
    early_stop: bool = False              # the warm start's pick held and the search ended there
    node: NodeRecord | None = None        # a node's tune: NOTE [ Tuning a node's ranks ] in node/__init__.py
    inputs: Inputs | None = None          # what the run was given that its figures do not say (explain/)
    # The pick's and the control's memory over a run, as the limit judged them (NOTE [ Copy on
    # read ] in search/growth.py): a measured peak, or a forecast at the end of an epoch.
    memory: MemoryForecast | None = None
    control_memory: MemoryForecast | None = None
    load: MachineLoad | None = None       # what others took of the CPUs meanwhile: NOTE [ Others on the machine ]
    threads: Threads | None = None        # the main process's torch threads: NOTE [ The main process's threads ]
    stream: Stream | None = None          # an iterable dataset's shards and its workers' findings (search/shards.py)
    start: StartChoice | None = None      # the pick's start method and why: NOTE [ What a start method costs ]
    what_ifs: tuple[WhatIfClaim, ...] = ()   # each change asked about: predicted, measured, how sure (claims.py)
    nodes: NodesGraph | None = None       # a torchdata.nodes graph's own settings (search/nodes.py)
    where: str = ""
    partial: bool = False

    @property
    def busy(self) -> bool:
        """Measured on a busy machine: inconclusive for a nightly comparison, never its baseline."""
        return self.load is not None and self.load.busy

    @property
    def conclusive(self) -> bool:
        """May be the baseline a later run compares with: not measured on a busy machine, and its
        own comparison (if any) decided something (NOTE [ Drift ] in tuning/compare.py)."""
        return not self.busy and not (self.since is not None and self.since.inconclusive)

    @property
    def config(self) -> LoaderConfig:
        return self.tuned.config

    @property
    def samples_per_s(self) -> float:
        return self.tuned.samples_per_s

    @property
    def dataset_key(self) -> str:
        return self.tuned.dataset_key

    @property
    def device(self) -> str:
        return self.tuned.device

    @property
    def hardware(self) -> StoredHardware:
        return StoredHardware.from_dict(self.tuned.hardware)

    @property
    def finished_at(self) -> str | None:
        return self.provenance.finished_at if self.provenance is not None else None

    @property
    def knee(self) -> Knee | None:
        return self.tuned.knee

    @property
    def curve(self) -> tuple[tuple[int, float], ...]:
        return self.tuned.knee.curve if self.tuned.knee else ()

    @property
    def control_samples_per_s(self) -> float | None:
        """The control's final median: what the rule the tuner replaces reads in this run (on a
        node, the node's rate: its ranks x the slowest rank's)."""
        median = next((f.median for f in self.finals if f.config == self.control), None)
        return median * self.ranks if median is not None else None

    @property
    def control_ratio(self) -> Ratio | None:
        """The pick's rate over the rule's on the final's paired rounds, with its interval
        (NOTE [ Paired rounds ] in search/paired.py); None when the pick is the rule's config or
        no round measured both."""
        if self.control is None or self.control == self.config:
            return None
        return paired(finalist_of(self.config, self.finals), finalist_of(self.control, self.finals))

    @property
    def verdict(self) -> str:
        """The pick against the rule in the words its interval supports (choice.rule_verdict)."""
        return rule_verdict(self.config, self.control, self.finals, self.trials)

    def _baseline_final(self) -> Finalist | None:
        return next((f for f in self.finals if f.config.num_workers == 0 and f.rates), None)

    @property
    def baseline_ratio(self) -> Ratio | None:
        """The pick over num_workers=0 on their paired rounds, when the final measured both."""
        if self.config.num_workers == 0:
            return None
        return paired(finalist_of(self.config, self.finals), self._baseline_final())

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
        """Why this autoloader cannot compare with or reuse the record (NOTE [ Measurement format ]
        in store/versions.py), or None."""
        p = self.provenance or Provenance()
        return reuse_problem(p.measurement_format, p.autoloader_version)

    def memory_record(self) -> dict | None:
        """The result's ``memory``: the pick's forecast, the control's, and the growth finding."""
        if self.memory is None:
            return None
        finding = growth_finding(self.memory)
        return {"pick": self.memory.to_dict(),
                "control": self.control_memory.to_dict() if self.control_memory is not None else None,
                "finding": finding.to_dict() if finding is not None else None}

    def faults(self) -> dict[str, int]:
        """Failed or infeasible trials by cause."""
        return dict(Counter(t.cause for t in self.trials if t.status != OK))

    def summary(self) -> TuneResult:
        """The result as a complete run's mark keeps it: the pick and its figures (``SUMMARY``)."""
        return TuneResult(self.tuned, (), (), self.path, "", "", 0.0, 0, 0, dataset=self.dataset,
                          provenance=self.provenance, load=self.load, where=self.where, partial=True)

    def to_dict(self) -> dict:
        """The stored form: the result file's JSON, or a partial record's summary (``SUMMARY``)."""
        data = {"format": FORMAT, **self.tuned.to_dict(), "path": self.path, "snippet_path": self.snippet_path,
                "storage": self.storage, "tune_seconds": self.tune_seconds,
                "resumed_trials": self.resumed_trials, "orphans": self.orphans, "shm_leaks": self.shm_leaks,
                "faults": self.faults(), "since": self.since.to_dict() if self.since else None,
                "trials": [t.to_dict() for t in self.trials], "finals": [f.to_dict() for f in self.finals],
                "profile": self.profile.to_dict() if self.profile else None,
                "profile_seconds": self.profile.seconds if self.profile else None,
                "calibration": self.calibration.to_dict() if self.calibration else None,
                "predicted": self.predicted.to_dict() if self.predicted else None,
                "predicted_samples_per_s": self.predicted.samples_per_s if self.predicted else None,
                "bound": self.predicted.bound if self.predicted else None,
                "control": self.control.loader_kwargs() if self.control else None,
                "control_samples_per_s": self.control_samples_per_s,
                **_ratio_fields("control_ratio", self.control_ratio), "verdict": self.verdict,
                **_ratio_fields("baseline_ratio", self.baseline_ratio), "baseline_verdict": self.baseline_verdict,
                "what_ifs": [w.to_dict() for w in self.what_ifs],
                "reorder_gain": self.reorder_gain, "model_error": [e.to_dict() for e in self.model_error],
                "study": self.study, "run_id": self.run_id,
                "dataset": self.dataset.to_dict() if self.dataset else None,
                "warm_start": warm_record(self.warm_start), "early_stop": self.early_stop,
                "memory": self.memory_record(),
                "load": self.load.to_dict() if self.load else None,
                "threads": self.threads.to_dict() if self.threads else None,
                **({"stream": self.stream.to_dict()} if self.stream else {}),
                **({"start_method": self.start.to_dict()} if self.start else {}),
                **({"nodes": self.nodes.to_dict()} if self.nodes else {}),
                **({"node": self.node.to_dict()} if self.node else {}),
                "inputs": self.inputs.to_dict() if self.inputs else None,
                **(self.provenance.to_dict() if self.provenance else {})}
        return {k: data.get(k) for k in SUMMARY} if self.partial else data

    @classmethod
    def from_dict(cls, data: object, where: str = "", cpus: int | None = None,
                  batch_sizes: tuple[int, ...] | None = None, partial: bool = False) -> TuneResult:
        """The record ``data`` holds (a result file's JSON, or a run's mark's summary with
        ``partial``), every field checked; InvalidRecord naming the field that is not what a run
        writes. ``cpus``: this machine's usable CPUs and ``batch_sizes``: the problem's, which
        bound what a result handed out here may say (validate.tuned_config); without them, the
        result's own hardware bounds it. ``where``: where it was read from, kept on the record."""
        tuned = tuned_config(data, cpus, batch_sizes)
        provenance = Provenance.from_dict(data)
        if partial:
            return cls(tuned, (), (), checks.text(data.get("path"), "path") or "", "", "", 0.0, 0, 0,
                       dataset=DatasetRecord.from_dict(data.get("dataset")), provenance=provenance,
                       load=parts.machine_load(data.get("load")), where=where, partial=True)
        limit = max_workers(data.get("hardware") or {}, cpus)
        trials = parts.trials(data.get("trials"), max_workers=limit)
        memory = checks.mapping(data.get("memory"), "memory", optional=True) or {}
        words = {k: checks.text(data.get(k), k) or "" for k in ("path", "snippet_path", "storage", "study", "run_id")}
        counts = {k: checks.count(data.get(k), k) or 0 for k in ("resumed_trials", "orphans", "shm_leaks")}
        return cls(
            tuned, trials, parts.finalists(data.get("finals"), trials, max_workers=limit), words["path"],
            words["snippet_path"], words["storage"], checks.number(data.get("tune_seconds"), "tune_seconds") or 0.0,
            counts["resumed_trials"], counts["orphans"], counts["shm_leaks"], since=comparison(data.get("since")),
            profile=parts.profile(data.get("profile")), calibration=parts.calibration(data.get("calibration")),
            predicted=parts.prediction(data.get("predicted"), max_workers=limit),
            control=config_at(data["control"], "control", limit) if data.get("control") is not None else None,
            reorder_gain=checks.number(data.get("reorder_gain"), "reorder_gain", signed=True),
            model_error=tuple(burst_error(e, f"model_error[{i}]")
                              for i, e in enumerate(checks.items(data.get("model_error"), "model_error"))),
            study=words["study"], run_id=words["run_id"], dataset=DatasetRecord.from_dict(data.get("dataset")),
            provenance=provenance, warm_start=parts.warm_start(data.get("warm_start"), max_workers=limit),
            early_stop=bool(data.get("early_stop", False)), node=NodeRecord.from_dict(data.get("node")),
            inputs=Inputs.from_dict(data.get("inputs")),
            memory=parts.memory(memory.get("pick"), "memory.pick", limit),
            control_memory=parts.memory(memory.get("control"), "memory.control", limit),
            load=parts.machine_load(data.get("load")), threads=parts.threads(data.get("threads")),
            stream=parts.stream(data.get("stream")), start=parts.start_choice(data.get("start_method")),
            what_ifs=what_ifs(data.get("what_ifs")), nodes=parts.nodes_graph(data.get("nodes")), where=where)


def _ratio_fields(name: str, ratio: Ratio | None) -> dict:
    """A ratio as the file writes it: the ratio, its interval [lo, hi] (null from one round)
    and the paired rounds it rests on."""
    return {name: ratio.ratio if ratio else None, f"{name}_interval": list(ratio.interval) if ratio and ratio.judged
            else None, f"{name}_rounds": ratio.rounds if ratio else 0}


__all__ = ["SUMMARY", "InvalidRecord", "TuneResult"]
