"""A stream's shards and what its workers delivered, as findings: the cap on the workers a
sharded IterableDataset can use, workers left idle, and samples duplicated across workers.

Pure: what the trial process counted (NOTE [ Counting what each worker delivered ] in
probe/shards.py) and what the dataset said of its shards, in words with their fixes. The run
caps the search's workers at the shards (``worker_cap``); the result keeps ``stream_record``;
the table, the progress lines and the explain report say its findings.
"""

from __future__ import annotations

from typing import Sequence

from .results import OK, TrialResult

# Of the samples digested, this share made by another worker too is a stream read whole by each.
DUPLICATE_SHARE = 0.5

SHARD_FIX = ("shard the stream by worker: in __iter__, read every num_workers-th item (or file) from the id "
             "torch.utils.data.get_worker_info() gives; for a Hugging Face dataset, stream it from as many files "
             "as workers (to_iterable_dataset(num_shards=K)) and split it across ranks with "
             "datasets.distributed.split_dataset_by_node; for webdataset, keep its split_by_worker")
IDLE_FIX = ("use no more workers than the stream has shards, or reshard it to K files (K at least the workers: "
            "a multiple of them keeps every worker busy to the end)")


def worker_cap(shards: int | None, max_workers: int) -> int:
    """The most workers worth searching: a sharded stream gives a worker past its shards nothing."""
    return max_workers if not shards or shards >= max_workers else shards


def shards_text(shards: int | None, shards_from: str | None, cap: int, uncapped: int) -> str:
    """The start line's words on a stream's shards ("" without them)."""
    if not shards:
        return ""
    searched = f"; workers searched up to {cap}" if cap < uncapped else ""
    return f" of {shards} shard{'s' * (shards != 1)} ({shards_from}{searched})"


def duplicated(trial: TrialResult) -> bool:
    return trial.duplicate_share is not None and trial.duplicate_share >= DUPLICATE_SHARE


def idle_workers(trial: TrialResult) -> int:
    """Workers of a measured trial that delivered nothing."""
    if trial.status != OK or not trial.worker_delivered:
        return 0
    return sum(1 for n in trial.worker_delivered if n == 0)


def trial_note(trial: TrialResult) -> str | None:
    """What one trial's workers showed, for its progress line; None when nothing is wrong."""
    if duplicated(trial):
        return (f"its {trial.config.num_workers} workers made the same samples ({trial.duplicate_share:.0%} of "
                "those digested made by another worker too): the stream is not sharded by worker")
    idle = idle_workers(trial)
    if idle:
        return f"{idle} of its {trial.config.num_workers} workers delivered nothing (the stream ran out of shards)"
    return None


def stream_record(shards: int | None, shards_from: str | None, uncapped: int,
                  history: Sequence[TrialResult]) -> dict | None:
    """The result's ``stream``: the shards the dataset said it has and the cap they put on the
    search, the trials whose workers sat idle or duplicated samples, and each finding in words
    with its fix (``findings``: kind, text, fix). None for a stream with nothing to say (and
    for a map-style dataset, which the caller does not ask about)."""
    counted = [t for t in history if t.status == OK and t.worker_delivered]
    dup = [t for t in counted if duplicated(t)]
    idle = [t for t in counted if idle_workers(t)]
    findings = []
    cap = worker_cap(shards, uncapped)
    if shards is not None and cap < uncapped:
        findings.append({"kind": "shards", "text": (
            f"the stream has {shards} shard{'s' * (shards != 1)} ({shards_from}): a worker past the "
            f"{shards} gets none to read and delivers nothing, so the rate is flat past {shards} workers; the "
            f"search stopped at {cap} (of the {uncapped} it would try) and the curve ends there"),
            "fix": ("to use more workers, reshard the stream to more files (Hugging Face: "
                    "to_iterable_dataset(num_shards=K), or more data files)")})
    if dup:
        worst = max(dup, key=lambda t: t.duplicate_share)
        findings.append({"kind": "duplicates", "text": (
            f"every worker reads the whole stream: with {worst.config.num_workers} workers "
            f"{worst.duplicate_share:.0%} of the samples digested were made by another worker too, so the loop "
            f"gets each sample up to {worst.config.num_workers} times and the rates of configs with workers count "
            f"the copies ({', '.join(t.config.key for t in dup)})"), "fix": SHARD_FIX})
    if idle:
        most = max(idle, key=idle_workers)
        busy = most.config.num_workers - idle_workers(most)
        findings.append({"kind": "idle", "text": (
            f"with {most.config.num_workers} workers {idle_workers(most)} delivered nothing: the stream has "
            f"shards for {busy} (configs: {', '.join(t.config.key for t in idle)})"), "fix": IDLE_FIX})
    if shards is None and not findings:
        return None
    return {"shards": shards, "shards_from": shards_from, "max_workers": cap, "uncapped_max_workers": uncapped,
            "duplicated": [t.config.key for t in dup], "idle": [t.config.key for t in idle], "findings": findings}


def stream_lines(record: dict | None) -> list[str]:
    """The stream's findings, one line each with its fix (the table's and the report's)."""
    if not record:
        return []
    lines = [f"{f['text']}. Fix: {f['fix']}" for f in record.get("findings") or ()]
    if not lines and record.get("shards"):
        lines.append(f"the stream has {record['shards']} shards ({record['shards_from']}): no more than the "
                     f"{record['max_workers']} workers searched, each of which delivered")
    return lines
