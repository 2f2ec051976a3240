"""What a tuning run returns and stores: ``TuneResult``, the result file's record of one run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..search.choice import Finalist
from ..search.config import TunedConfig
from ..search.growth import growth_finding
from ..search.knee import Knee
from ..search.load import MachineLoad
from ..search.memory import MemoryForecast
from ..search.model import Calibration, Prediction
from ..search.profile import Profile
from ..search.results import OK, TrialResult
from ..search.space import LoaderConfig
from ..search.threads import Threads
from ..search.warm import WarmStart, warm_record
from ..store.validate import FORMAT as RESULT_FORMAT
from .compare import Comparison


@dataclass(frozen=True)
class TuneResult:
    """What ``tune()`` returns: the pick, every trial, the final round and where it was saved."""

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
    model_error: tuple[dict, ...] = ()    # each burst: predicted against measured
    study: str = ""                       # the study's name in its storage, and this run's id in it
    run_id: str = ""
    dataset: dict | None = None           # what was tuned: name, length, content fingerprint, version
    provenance: dict | None = None        # measurement format, autoloader version, when
    warm_start: WarmStart | None = None
    early_stop: bool = False              # the warm start's pick held and the search ended there
    node: dict | None = None              # a node's tune: NOTE [ Tuning a node's ranks ] in node/__init__.py
    inputs: dict | None = None            # what the run was given that its figures do not say (explain/)
    # The pick's and the control's memory over a run, as the limit judged them (NOTE [ Copy on
    # read ] in search/growth.py): a measured peak, or a forecast at the end of an epoch.
    memory: MemoryForecast | None = None
    control_memory: MemoryForecast | None = None
    load: MachineLoad | None = None       # what others took of the CPUs meanwhile: NOTE [ Others on the machine ]
    threads: Threads | None = None        # the main process's torch threads: NOTE [ The main process's threads ]

    @property
    def busy(self) -> bool:
        """Measured on a busy machine: inconclusive for a nightly comparison, never its baseline."""
        return self.load is not None and self.load.busy

    @property
    def config(self) -> LoaderConfig:
        return self.tuned.config

    @property
    def samples_per_s(self) -> float:
        return self.tuned.samples_per_s

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
    def ranks(self) -> int:
        return self.node["ranks"] if self.node else 1

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

    def to_dict(self) -> dict:
        return {"format": RESULT_FORMAT, **self.tuned.to_dict(), "path": self.path, "snippet_path": self.snippet_path,
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
                "reorder_gain": self.reorder_gain, "model_error": list(self.model_error),
                "study": self.study, "run_id": self.run_id, "dataset": self.dataset,
                "warm_start": warm_record(self.warm_start), "early_stop": self.early_stop,
                "memory": self.memory_record(),
                "load": self.load.to_dict() if self.load else None,
                "threads": self.threads.to_dict() if self.threads else None,
                **({"node": self.node} if self.node else {}), "inputs": self.inputs, **(self.provenance or {})}


def summary(result: TuneResult) -> dict:
    """A complete run's pick, as its mark in the study keeps it (NOTE [ Runs in a study ] in
    store/runs.py): what ``autoloader show`` and a warm start read from a shared storage without
    the result file."""
    data = result.to_dict()
    return {k: data.get(k) for k in ("config", "samples_per_s", "rel_interval", "baseline_samples_per_s", "knee",
                                     "hardware", "dataset_key", "device", "dataset", "measurement_format",
                                     "autoloader_version", "finished_at", "path", "load")}
