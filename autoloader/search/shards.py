"""A stream's shards and what its workers delivered (NOTE [ Counting what each worker delivered ]
in probe/shards.py), as findings with their fixes: the cap on the workers a sharded
IterableDataset can use (``worker_cap``), workers left idle, samples duplicated across workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .codec import Stored, stored
from .results import OK, TrialResult

# Of the samples digested, this share made by another worker too is a stream read whole by each.
DUPLICATE_SHARE = 0.5

# The libraries a stream's shards are read from, by the package its class comes from.
LIBRARIES = {"datasets": "Hugging Face", "webdataset": "webdataset", "torchdata": "torchdata", "litdata": "litdata"}
_SHARD_FIXES = {
    "Hugging Face": ("stream it from as many files as workers (to_iterable_dataset(num_shards=K)) and split it "
                     "across ranks with datasets.distributed.split_dataset_by_node"),
    "webdataset": "keep wds.split_by_worker in its pipeline (WebDataset does by default; a DataPipeline needs it)",
    "torchdata": "read every num_workers-th item in each worker, from the id torch.utils.data.get_worker_info() gives",
    "litdata": "let StreamingDataset split its chunks by worker (its default): do not wrap it in a stream of your own",
}
_MORE_SHARDS = {
    "Hugging Face": "to_iterable_dataset(num_shards=K), or more data files",
    "webdataset": "write it as more, smaller .tar shards (wds.ShardWriter with a smaller maxcount)",
    "torchdata": "split its source into more files",
    "litdata": "optimize it into more chunks (a smaller chunk_size)",
}
GENERIC_SHARD_FIX = ("shard the stream by worker: in __iter__, read every num_workers-th item (or file) from the id "
                     "torch.utils.data.get_worker_info() gives")
IDLE_FIX = ("use no more workers than the stream has shards, or reshard it to K files (K at least the workers: "
            "a multiple of them keeps every worker busy to the end)")


def library(shards_from: str | None) -> str | None:
    root = (shards_from or "").split(".", 1)[0]
    return LIBRARIES.get(root)


def shard_fix(shards_from: str | None) -> str:
    lib = library(shards_from)
    return GENERIC_SHARD_FIX + (f"; for {lib}: {_SHARD_FIXES[lib]}" if lib else "")


def worker_cap(shards: int | None, max_workers: int) -> int:
    """The most workers worth searching: a sharded stream gives a worker past its shards nothing."""
    return max_workers if not shards or shards >= max_workers else shards


def shards_text(shards: int | None, shards_from: str | None, cap: int, uncapped: int) -> str:
    """The start line's words on a stream's shards ("" without them)."""
    if not shards:
        return ""
    searched = f"; workers searched up to {cap}" if cap < uncapped else ""
    return f" of {shards} shard{'s' * (shards != 1)} ({shards_from}{searched})"


@dataclass(frozen=True)
class Reading:
    """What one loader's workers delivered: ``who`` names it."""

    who: str
    workers: int
    delivered: tuple[int, ...]
    duplicate_share: float | None

    @property
    def duplicated(self) -> bool:
        return self.duplicate_share is not None and self.duplicate_share >= DUPLICATE_SHARE

    @property
    def idle(self) -> int:
        return sum(1 for n in self.delivered if n == 0)


def trial_reading(trial: TrialResult) -> Reading | None:
    if trial.status != OK or not trial.worker_delivered:
        return None
    return Reading(trial.config.key, trial.config.num_workers, trial.worker_delivered, trial.duplicate_share)


def profile_reading(profile) -> Reading | None:
    delivered = tuple(getattr(profile, "stream_delivered", ()) or ())
    if not delivered:
        return None
    return Reading(f"the profile's {len(delivered)} workers", len(delivered), delivered,
                   getattr(profile, "stream_duplicates", None))


def _note(reading: Reading | None, duplicated: str, idle: str) -> str | None:
    """The words on a reading (formatted with it as ``r``) of duplicates or idle workers, or None."""
    if reading is None or not (reading.duplicated or reading.idle):
        return None
    return (duplicated if reading.duplicated else idle).format(r=reading)


def trial_note(trial: TrialResult) -> str | None:
    """What one trial's workers showed, for its progress line; None when nothing is wrong."""
    return _note(trial_reading(trial),
                 "its {r.workers} workers made the same samples ({r.duplicate_share:.0%} of those digested made "
                 "by another worker too): the stream is not sharded by worker",
                 "{r.idle} of its {r.workers} workers delivered nothing (the stream ran out of shards)")


def profile_note(profile) -> str:
    """The profile line's words on its stream stage ("" where it did not run or found nothing)."""
    return _note(profile_reading(profile),
                 "; its stream read by {r.workers} workers gave each the same samples ({r.duplicate_share:.0%} "
                 "digested twice): not sharded by worker",
                 "; its stream read by {r.workers} workers left {r.idle} with nothing") or ""


@dataclass(frozen=True)
class StreamFinding(Stored):
    """One finding about a stream: ``kind`` is shards, duplicates or idle."""

    kind: str
    text: str
    fix: str


@dataclass(frozen=True)
class Stream(Stored):
    """The result's ``stream``: its shards and the cap they put on the search (``max_workers`` of
    the ``uncapped_max_workers`` it would try), the loaders whose workers duplicated samples or
    sat idle, and each finding."""

    shards: int | None = stored(None, least=1)
    shards_from: str | None = None
    max_workers: int = 0
    uncapped_max_workers: int = 0
    duplicated: tuple[str, ...] = ()
    idle: tuple[str, ...] = ()
    findings: tuple[StreamFinding, ...] = ()

    def lines(self) -> list[str]:
        """The findings, one line each with its fix (the table's and the report's)."""
        lines = [f"{f.text}. Fix: {f.fix}" if f.fix else
                 f"{f.text}; they cover the CPUs the workers can use, so no more are needed" for f in self.findings]
        if not lines and self.shards:
            lines.append(f"the stream has {self.shards} shards ({self.shards_from}): no more than the "
                         f"{self.max_workers} workers searched, each of which delivered")
        return lines


def stream_record(shards: int | None, shards_from: str | None, uncapped: int,
                  history: Sequence[TrialResult], profile=None, cpus: float | None = None) -> Stream | None:
    """The result's ``Stream``, or None for one with nothing to say; ``cpus``: the usable CPUs (a
    stream of as many shards needs no more)."""
    readings = [r for r in [profile_reading(profile), *map(trial_reading, history)] if r is not None]
    dup = [r for r in readings if r.duplicated]
    idle = [r for r in readings if r.idle]
    findings = []
    cap = worker_cap(shards, uncapped)
    if shards is not None and cap < uncapped:
        findings.append(StreamFinding("shards", (
            f"the stream has {shards} shard{'s' * (shards != 1)} ({shards_from}): a worker past the "
            f"{shards} gets none to read and delivers nothing, so the rate is flat past {shards} workers; the "
            f"search stopped at {cap} (of the {uncapped} it would try) and the curve ends there"),
            _more_shards(shards, shards_from, cpus)))
    if dup:
        worst = max(dup, key=lambda r: r.duplicate_share)
        findings.append(StreamFinding("duplicates", (
            f"every worker reads the whole stream: with {worst.workers} workers {worst.duplicate_share:.0%} of the "
            f"samples digested were made by another worker too ({', '.join(r.who for r in dup)}), so a loader "
            "with workers hands the loop each sample once per worker and its rate counts the copies"),
            shard_fix(shards_from)))
    if idle:
        most = max(idle, key=lambda r: r.idle)
        findings.append(StreamFinding("idle", (
            f"with {most.workers} workers {most.idle} delivered nothing: the stream has shards for "
            f"{most.workers - most.idle} ({', '.join(r.who for r in idle)})"), IDLE_FIX))
    if shards is None and not findings:
        return None
    return Stream(shards, shards_from, cap, uncapped, tuple(r.who for r in dup), tuple(r.who for r in idle),
                  tuple(findings))


def _more_shards(shards: int, shards_from: str | None, cpus: float | None) -> str:
    """More shards, in its library's words; "" where its shards already cover the usable CPUs."""
    if cpus is not None and shards >= cpus:
        return ""
    lib = library(shards_from)
    how = f" ({lib}: {_MORE_SHARDS[lib]})" if lib else ""
    up_to = f", up to the {cpus:g} usable CPU{'s' * (cpus != 1)}" if cpus is not None else ""
    return f"to use more workers{up_to}, reshard the stream to more files{how}"


def stream_lines(stream: Stream | None) -> list[str]:
    return stream.lines() if stream is not None else []
