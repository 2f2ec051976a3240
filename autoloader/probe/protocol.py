"""What the driver (``driver.py``) and the trial process (``trial.py``) say to each other: the
set-up (``RunnerSetup``), what the trial process learns before any trial (``DatasetInfo``), the
error when it cannot get that far (``SetupError``), and the pipe's messages, one frozen
dataclass each.

# NOTE [ Trial protocol ]
# The driver and the trial process share one multiprocessing Pipe; every message is one of the
# dataclasses below, pickled. In order:
# 1. Set-up. The trial process builds the dataset and the step and answers once: Ready(info), or
#    SetupFailed(message, usage) when that raised. A trial process that dies first, or does not
#    answer within setup_timeout_s, is a SetupError (a restart before a trial: that trial FAILED).
# 2. Trials, one at a time. To Measure(config, settings) the trial process answers Begin(pid)
#    before it builds the loader, Beat(batches) while batches flow, then Measured(result,
#    leaked_workers): its TrialResult (the driver adds what it saw of the tree: memory, /dev/shm,
#    the wall time) and how many of its processes outlived the teardown and a kill (orphans).
#    ProfileRequest is served the same way, before the first trial: Begin, Beats between the
#    profile's stages, then Profiled(profile, error, leaked_workers).
# 3. Stop() asks the trial process to exit; the driver then kills what is left of its tree.
# The trial process may also exit on its own after a result: a CUDA error left its context
# unusable (NOTE [ Pinned memory outlives its trial ] in trial.py).
# A pipe that breaks during a trial (EOF, or the process gone and nothing left to read) means it
# died. Before Begin, of something that came before this trial (a late signal from the last
# trial's workers, a process that ended itself): the driver starts a new one and sends the same
# Measure once more, the last attempt. After Begin, or before it again, the trial is FAILED, named
# from the exit code (failures.death_cause).
# The heartbeat: Beat at most every BEAT_S while batches flow, and once more when the burst ends,
# so the teardown gets a whole watchdog timeout. Begin and each Beat tell the watchdog the trial
# moved; no message for hang_timeout_s is a hang (NOTE [ The watchdog times stalls ] in driver.py),
# and the last Beat's count says how far the trial got.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from dataclasses import dataclass

from ..inputs.source import Source
from ..search.policy import BurstSettings
from ..search.nodes import NodesGraph
from ..search.profile import Profile
from ..search.results import TrialResult
from ..search.space import LoaderConfig

BEAT_S = 0.5  # the trial process reports progress at most this often while batches flow


@dataclass(frozen=True)
class RunnerSetup:
    dataset: Source
    step: Source | None
    device: str
    fixed_kwargs: dict
    probe_batch_size: int
    # The driver's default start method. A spawned child would otherwise default to 'spawn'
    # for its own children, and DataLoader workers must start as in the user's process.
    worker_start_method: str = dataclasses.field(
        default_factory=lambda: mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0])
    # (rank, world size) when this trial process is one rank of a node's tune: its loaders read
    # that rank's shard through a DistributedSampler (NOTE [ Tuning a node's ranks ] in node/__init__.py).
    shard: tuple[int, int] | None = None
    # The start methods the profile measures (NOTE [ What a start method costs ] in
    # search/methods.py): empty unless the start method's gate is open.
    start_methods: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetInfo:
    """What the trial process learned about the dataset before any trial."""

    length: int | None          # None for an IterableDataset
    sample_seconds: float       # one sample's __getitem__ in the trial process
    sample_bytes: int           # collated bytes per sample
    runner_uss: int             # the trial process's own memory once the dataset and step are built
    runner_pss: int             # the same, with its share of shared pages (as the guard counts)
    fingerprint: str | None = None  # the dataset's content: NOTE [ Content fingerprint ] in inputs/content.py
    code: str | None = None     # digest of the user's code: NOTE [ Failures keyed by code ] in inputs/code_digest.py
    dataset_class: str | None = None  # the built dataset's class, the name in the problem's key
    step_identity: str | None = None  # the step as given: NOTE [ A step keyed by what it is ] in inputs/code_digest.py
    dataset_bytes: int | None = None  # what building the dataset added to the process's heap (its anonymous pages)
    threads: int | None = None  # torch's intra-op threads in the trial process, as the training process has them
    # An iterable dataset's shards and where it says so (probe/shards.py): the most workers with a share.
    shards: int | None = None
    shards_from: str | None = None
    # A torchdata.nodes graph's own settings (NOTE [ Tuning a torchdata.nodes graph ] in nodes.py).
    nodes: NodesGraph | None = None
    # The set-up's parts as they ran, (what, start, end) in time.monotonic() seconds: where a
    # tune's first seconds go (the interpreter and torch, the dataset, the step, the first batch).
    setup_parts: tuple[tuple[str, float, float], ...] = ()
    # Packages the trial process imported from source, no bytecode cached for them (NOTE [ Imports
    # compiled every start ] in probe/trial.py): each fresh interpreter compiles them again.
    uncompiled: tuple[str, ...] = ()


class SetupError(Exception):
    """The trial process could not build the dataset or step; ``usage`` says whether it is bad input,
    ``budget`` whether the run's budget ended the wait (the clock's reason, not the dataset's)."""

    def __init__(self, message: str, usage: bool, budget: bool = False):
        super().__init__(message)
        self.usage = usage
        self.budget = budget


# --- driver -> trial process: Measure, ProfileRequest, Stop; then back: Ready, SetupFailed,
# Begin, Beat, Measured, Profiled (NOTE [ Trial protocol ] says when each is sent) -----------------

@dataclass(frozen=True)
class Measure:
    config: LoaderConfig
    settings: BurstSettings   # the burst's stop rule


@dataclass(frozen=True)
class ProfileRequest:
    batch_size: int
    memory_budget: int | None = None   # bytes its loaders may hold beyond the trial process
    limit_s: float | None = None       # its share of the budget: NOTE [ A profile within its share ]
    step_stall_s: float | None = None  # how long one call of the step is progress (the user's trial timeout)


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Ready:
    info: DatasetInfo


@dataclass(frozen=True)
class SetupFailed:
    message: str   # the driver raises SetupError(message, usage)
    usage: bool


@dataclass(frozen=True)
class Begin:
    pid: int   # from now on a death is this config's


@dataclass(frozen=True)
class Beat:
    batches: int   # consumed so far in this trial


@dataclass(frozen=True)
class Measured:
    result: TrialResult   # as the trial process measured it (a result, or a failure of its config)
    leaked_workers: int   # the trial's processes still alive after its teardown and a kill


@dataclass(frozen=True)
class Profiled:
    profile: Profile | None   # or why it could not be measured (the trials will meet and report it)
    error: str | None
    leaked_workers: int
