"""In-run tuning on the GPU bench's workloads (issue 54's GPU done-when), in one device call.

    python3 -m scripts.bench.inrun_gpu --workloads heavytail --out $OUT          # on the GPU
    PYTHONPATH=. python -m scripts.bench.inrun_gpu --tiny --device cpu --out /tmp/ig   # here

Per workload, in this order, each phase written to ``results.json`` and ``summary.md`` as soon as
it ends (a call cut at its limit still returns what it measured):

1. first batch: ``best_loader(ds, batch_size=..., device=..., tune="run")`` from an empty results
   home, timed from the call to its first batch, against a plain ``DataLoader`` with the rule's
   config (``num_workers=cpus-1``, pinned, kept workers) timed from its construction; alternated,
   ``--first-batches`` of each (no step: the first batch alone).
2. grid round 0: each config of a small grid (no workers, a quarter of the CPUs, the rule, more
   workers than CPUs with deep prefetch, three per CPU) reads a segment of the real loop (the
   workload's step on every batch): after a warm-up of its first wave of workers, ``--segment-s``
   seconds, the device synchronised at both ends; its rate is samples/s. The best rate sizes the
   epochs: ``--epoch-s`` seconds of the fastest config, or less where the deadline cannot hold
   three epochs and the rounds to come (said in the summary).
3. epochs: epoch 1 over the in-run loader (a fresh home; later epochs while it has not settled, up
   to ``--max-epochs`` and the deadline); an epoch over a plain DataLoader with the in-run pick
   from the start; an epoch with the rule (none with ``--no-rule-epoch``); with ``--epoch-pairs N``,
   N-1 more pairs of epoch 1 in the run (each from an empty home) and the pick's, the pick first in
   every second pair, and the in-run epoch over the pick's paired with its 95% interval. Each
   epoch is timed from ``iter()`` to the device synchronised after its last step; the in-run
   loader's own build time is kept apart.
4. grid rounds 1..: the grid and the in-run pick (where it is not a grid config), one segment each
   a round, the order shuffled every round, until ``--rounds`` or the deadline. The pick over
   each config and over the best (the highest median) is ``by_rounds`` over the rounds both read
   (search/paired.py: the geometric mean and its 95% interval).

The epochs and the rounds read the workload's dataset through ``Lengthened`` (index modulo the
workload's own length), so that an epoch can last as long as asked.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset

from autoloader.inrun import schedule
from autoloader.search.model_first import heuristic_config
from autoloader.search.paired import by_rounds, compared, paired_ratio
from autoloader.search.space import LoaderConfig, search_space
from scripts.bench.common import source_digest

# Tiny mode: a CPU check of every phase in seconds (the bench's scale, phase lengths and grid cut).
TINY = {"scale": "0.02", "epoch_s": 2.0, "segment_s": 0.4, "first_batches": 1, "rounds": 2, "grid": 3,
        "deadline": 90.0}
ENDLESS = 1 << 40
# A plain loader's batch that takes longer ends its phase with an error (recorded), not the call.
BATCH_TIMEOUT_S = 120
# A grid config's batches in flight stay within this share of the free memory and of /dev/shm.
MEMORY_SHARE = 0.25


class Lengthened(Dataset):
    """``dataset`` read as ``length`` samples: sample ``i`` is ``dataset[i % len(dataset)]``."""

    def __init__(self, dataset: Dataset, length: int):
        self.dataset, self.length = dataset, int(length)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        return self.dataset[i % len(self.dataset)]


def short(config: LoaderConfig | None) -> str:
    from scripts.bench.common import short as bench_short

    return bench_short(config)


def in_flight(config: LoaderConfig, batch_bytes: int) -> int:
    """Bytes of the batches ``config``'s workers hold ready (the queue a DataLoader fills)."""
    return config.num_workers * (config.prefetch_factor or 2) * batch_bytes


def grid(cpus: int, batch_size: int, device: str, size: int | None = None, batch_bytes: int = 0,
         room: int | None = None) -> tuple[list[LoaderConfig], list[LoaderConfig]]:
    """(the grid the pick is measured against, the configs left out): no workers, a quarter of the
    CPUs, the rule (first), 1.5 per CPU with prefetch 8, 3 per CPU; duplicates
    dropped, ``size`` kept; one whose batches in flight pass ``room`` bytes left out (the rule
    never: the pick is held against it)."""
    space = search_space((batch_size,), cpus, device)
    rule = heuristic_config(space, cpus, batch_size)
    configs = [rule, rule.replace(num_workers=0), rule.replace(num_workers=max(1, cpus // 4)),
               rule.replace(num_workers=max(1, (3 * cpus) // 2), prefetch_factor=8),
               rule.replace(num_workers=3 * cpus)]
    configs = list(dict.fromkeys(configs))
    fits = [c for c in configs if c == rule or room is None or in_flight(c, batch_bytes) <= room]
    return (fits[:size] if size else fits), [c for c in configs if c not in fits]


def kwargs_of(config: LoaderConfig) -> dict:
    kwargs = config.loader_kwargs()
    kwargs.pop("batch_size", None)
    if not config.num_workers:
        for name in ("prefetch_factor", "persistent_workers", "in_order"):
            kwargs.pop(name, None)
    return kwargs


def plain(dataset: Dataset, config: LoaderConfig, batch_size: int, seed: int, endless: bool = False) -> DataLoader:
    """A plain DataLoader with ``config``, shuffled; ``endless``: one permutation after another
    (drawn as read), so that a segment never runs out whatever its rate."""
    from torch.utils.data import RandomSampler

    from autoloader.seeding import seed_worker

    kwargs = kwargs_of(config)
    if config.num_workers:
        kwargs["worker_init_fn"] = seed_worker
        kwargs["timeout"] = BATCH_TIMEOUT_S   # a batch stuck this long is an error said in the results
    generator = torch.Generator().manual_seed(seed)
    if endless:
        kwargs["sampler"] = RandomSampler(dataset, num_samples=ENDLESS, generator=generator)
    else:
        kwargs["shuffle"] = True
    return DataLoader(dataset, batch_size=batch_size, generator=generator, **kwargs)


def ended(iterator: Any) -> None:
    """End a loader's iterator now, its workers joined (kept workers too)."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    close = getattr(iterator, "close", None)   # the in-run loader's epoch is a generator
    if close is not None:
        close()


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def first_batch_s(make: Callable[[], Any]) -> tuple[float, float]:
    """(seconds from ``make()`` to the first batch of its loader, of them in ``make``)."""
    began = time.perf_counter()
    loader = make()
    built = time.perf_counter() - began
    iterator = iter(loader)
    next(iterator)
    took = time.perf_counter() - began
    ended(iterator)
    del iterator, loader
    return took, built


def segment(loader: DataLoader, step: Callable, device: str, seconds: float, batch_size: int) -> dict:
    """One config's reading of the real loop: its first wave of workers (and at least a second)
    left out, then ``seconds`` of batches, each stepped; samples/s between two synchronisations."""
    began = time.perf_counter()
    iterator = iter(loader)
    lead = max(2, loader.num_workers * (loader.prefetch_factor or 2) if loader.num_workers else 2)
    try:
        n = 0
        for batch in iterator:
            step(batch)
            n += 1
            if n >= lead and time.perf_counter() - began >= 1.0:
                break
        synchronize(device)
        t0 = time.perf_counter()
        samples = 0
        for batch in iterator:
            step(batch)
            samples += len(batch[0]) if isinstance(batch, (list, tuple)) else batch_size
            if time.perf_counter() - t0 >= seconds:
                break
        synchronize(device)
        t1 = time.perf_counter()
    finally:
        ended(iterator)
    return {"rate": samples / (t1 - t0) if samples else 0.0, "samples": samples, "steady_s": t1 - t0,
            "lead_batches": n, "wall_s": time.perf_counter() - began}


def epoch(loader: Any, step: Callable, device: str) -> dict:
    """One pass of the loop: (wall from ``iter()`` to the device synchronised, first batch, batches)."""
    began = time.perf_counter()
    first, n = None, 0
    iterator = iter(loader)
    try:
        for batch in iterator:
            if first is None:
                first = time.perf_counter() - began
            step(batch)
            n += 1
        synchronize(device)
    finally:
        if not hasattr(loader, "plan"):   # the in-run loader keeps its pick's workers for later epochs
            ended(iterator)
    return {"epoch_s": time.perf_counter() - began, "first_batch_s": first, "batches": n}


class Bench:
    """One run's record, written whole after every phase (``results.json``, ``summary.md``)."""

    def __init__(self, out: str, meta: dict, deadline_s: float):
        self.out, self.meta = out, meta
        self.began = time.perf_counter()
        self.deadline_s = deadline_s
        self.workloads: dict[str, dict] = {}

    def left(self) -> float:
        return self.deadline_s - (time.perf_counter() - self.began)

    def write(self) -> None:
        self.meta["elapsed_s"] = time.perf_counter() - self.began
        data = {"meta": self.meta, "workloads": self.workloads}
        for name, text in (("results.json", json.dumps(data, indent=2, default=str)), ("summary.md", summary(data))):
            path = os.path.join(self.out, name)
            with open(path + ".part", "w") as fh:
                fh.write(text)
            os.replace(path + ".part", path)
        done = "; ".join(f"{k}: {', '.join(w['phases_done']) or '-'}" for k, w in self.workloads.items())
        print(f"[{self.meta['elapsed_s']:.0f} s] written {self.out}/results.json ({done or 'started'})", flush=True)


def rates_by_round(rounds: list[dict], key: str) -> dict[int, float]:
    return {r["round"]: r["rates"][key] for r in rounds if r["rates"].get(key)}


def versus(rounds: list[dict], pick: str | None, keys: list[str]) -> dict:
    """The pick over each config and over the best (the highest median), paired by rounds."""
    if pick is None:
        return {}
    medians = {k: statistics.median(v.values()) for k in keys for v in [rates_by_round(rounds, k)] if v}
    out: dict = {"medians": medians, "over": {}}
    for k in medians:
        if k != pick:
            r = by_rounds(rates_by_round(rounds, pick), rates_by_round(rounds, k))
            out["over"][k] = r.to_dict() if r is not None else None
    if medians:
        best = max(medians, key=medians.get)
        out["best"] = best
        r = by_rounds(rates_by_round(rounds, pick), rates_by_round(rounds, best)) if best != pick else None
        out["pick_over_best"] = r.to_dict() if r is not None else ({"ratio": 1.0, "interval": None, "rounds": 0,
                                                                   "note": "the pick is the best median"}
                                                                  if best == pick else None)
    return out


def run_workload(bench: Bench, name: str, args) -> None:
    import autoloader
    from autoloader.inputs.hardware import usable_cpus
    from scripts.bench import workloads

    record: dict = {"phases_done": []}
    bench.workloads[name] = record
    spec = workloads.WORKLOADS[name]
    base = getattr(workloads, f"{name}_dataset")()
    step = getattr(workloads, f"{name}_step")()
    batch_size, cpus, device = spec.batch_size, usable_cpus(), args.device
    from autoloader.inputs.hardware import available_memory, shm_free
    from autoloader.batches import bytes_in

    batch_bytes = bytes_in(next(iter(DataLoader(base, batch_size=batch_size))))
    shm = shm_free()
    room = int(min(MEMORY_SHARE * available_memory(), MEMORY_SHARE * shm if shm else float("inf")))
    configs, left_out = grid(cpus, batch_size, device, args.grid, batch_bytes, room)
    named = {short(c): c for c in configs}
    rule = configs[0]
    record.update(batch_size=batch_size, cpus=cpus, rule=short(rule), grid=list(named),
                  workload_length=len(base), batch_bytes=batch_bytes, room_bytes=room,
                  left_out=[short(c) for c in left_out])
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("autoloader")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        # 1. first batch
        firsts = []
        short_ds = Lengthened(base, max(len(base), 64 * batch_size))
        for i in range(args.first_batches):
            order = ["in_run", "plain"] if i % 2 == 0 else ["plain", "in_run"]
            row = {}
            for which in order:
                if which == "plain":
                    took, built = first_batch_s(lambda: plain(short_ds, rule, batch_size, i))
                else:
                    with tempfile.TemporaryDirectory() as home:
                        took, built = first_batch_s(lambda: autoloader.best_loader(
                            short_ds, batch_size=batch_size, device=device, out=home, tune="run",
                            generator=torch.Generator().manual_seed(i)))
                row[which] = {"first_batch_s": took, "built_s": built}
            firsts.append(row)
        record["first_batch"] = firsts
        record["phases_done"].append("first_batch")
        bench.write()

        # 2. grid round 0, which sizes the epochs
        rounds: list[dict] = []

        def one_round(r: int, keys: list[str]) -> None:
            keys = list(keys)
            random.Random(r).shuffle(keys)
            readings = {}
            for k in keys:
                readings[k] = segment(plain(base, named[k], batch_size, 1000 + r, endless=True), step, device, args.segment_s,
                                      batch_size)
            rounds.append({"round": r, "order": keys, "rates": {k: v["rate"] for k, v in readings.items()},
                           "readings": readings})
            record["rounds"] = rounds

        t0 = time.perf_counter()
        one_round(0, list(named))
        round_s = time.perf_counter() - t0
        record["round_s"] = round_s
        best_rate = max(rounds[0]["rates"].values())
        # Three epochs (in-run, pick, rule: the rule's at the best rate over its own) and two more
        # rounds must fit in what is left.
        # (at most 3x: a slower rule's epoch is skipped where it does not fit, said as such).
        rule_slower = min(3.0, best_rate / max(rounds[0]["rates"][short(rule)], 1e-9))
        spare = bench.left() - 2 * (round_s + args.segment_s) - 10.0
        epoch_s = min(args.epoch_s, spare / (2.1 * args.epoch_pairs + (0.0 if args.no_rule_epoch else rule_slower))) \
            if spare > 0 else 0.0
        length = max(4 * batch_size, int(epoch_s * best_rate))
        record["epochs_sized"] = {"asked_s": args.epoch_s, "target_s": epoch_s, "best_rate": best_rate,
                                  "length": length, "rule_slower": rule_slower,
                                  "cut": epoch_s < args.epoch_s}
        record["phases_done"].append("round0")
        bench.write()

        # 3. epochs
        dataset = Lengthened(base, length)
        epochs: dict = {}
        record["epochs"] = epochs
        with tempfile.TemporaryDirectory() as home:
            began = time.perf_counter()
            loader = in_run(dataset, batch_size, device, home)
            built = time.perf_counter() - began
            first = epoch(loader, step, device)
            later = []
            plan = getattr(loader, "plan", None)
            while plan is not None and plan.state != "settled" and 1 + len(later) < args.max_epochs \
                    and bench.left() > 2.5 * first["epoch_s"] + round_s:
                later.append(epoch(loader, step, device))
            # Not settled within the epochs run: its leader stands in, said as such (no done-when holds then).
            pick = (plan.pick or plan.leader()) if plan is not None else None
            pick_from = "settled" if plan is not None and plan.pick is not None else \
                "the leader, not settled" if pick is not None else None
            epochs["in_run"] = {"built_s": built, **first, "later": later, "loader": type(loader).__name__,
                                "settled": getattr(plan, "state", None), "why": getattr(plan, "why", None),
                                "pick": short(pick), "pick_from": pick_from, "pick_kwargs": pick.loader_kwargs() if pick else None,
                                "start": short(getattr(plan, "start", None)),
                                "finalists": [short(c) for c in getattr(plan, "finalists", None) or []],
                                "segments": [r.to_dict() for r in getattr(plan, "readings", [])],
                                "tuned_epochs": getattr(loader, "tuned_epochs", None)}
            stored = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs if f.endswith(".json")]
            epochs["in_run"]["stored"] = json.load(open(stored[0])).get("in_run") if stored else None
            if hasattr(loader, "close"):   # every worker it keeps ends before the next epochs start
                loader.close()
            del loader, plan
        record["phases_done"].append("epoch_in_run")
        bench.write()
        for key, config in (("pick_from_start", pick), ("rule", rule)):
            if config is None:
                continue
            if key == "rule" and args.no_rule_epoch:
                epochs[key] = {"skipped": "--no-rule-epoch"}
                continue
            if bench.left() < 1.2 * epochs["in_run"]["epoch_s"] * (rule_slower if key == "rule" else 1.0):
                epochs[key] = {"skipped": f"{bench.left():.0f} s left of the deadline"}
                continue
            try:
                epochs[key] = {"config": short(config), **epoch(plain(dataset, config, batch_size, 7), step, device)}
            except RuntimeError as exc:   # a batch past BATCH_TIMEOUT_S: said, and the bench goes on
                epochs[key] = {"config": short(config), "error": str(exc)[:500]}
            record["phases_done"].append(f"epoch_{key}")
            bench.write()
        if args.epoch_pairs > 1 and pick is not None and "epoch_s" in epochs.get("pick_from_start", {}):
            more_pairs(bench, record, args, dataset, pick, batch_size, step, device)

        # 4. grid rounds with the pick
        if pick is not None and named.get(short(pick)) != pick:
            # A config the label does not tell apart from a grid one still reads as itself.
            named[short(pick) if short(pick) not in named else short(pick) + " (the pick)"] = pick
        pick_name = next((k for k, c in named.items() if c == pick), None)
        record["pick_name"] = pick_name
        record["pick_in_grid"] = pick is None or pick in configs
        estimate = round_s * len(named) / max(1, len(configs)) + args.segment_s
        r = 1
        while r < args.rounds and bench.left() > estimate:
            one_round(r, list(named))
            record["versus"] = versus(rounds, pick_name, list(named))
            bench.write()
            r += 1
        record["versus"] = versus(rounds, pick_name, list(named))
        record["phases_done"].append("rounds")
    except Exception as exc:   # a failed workload is a result; the next one still runs
        import traceback

        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = traceback.format_exc()
        print(record["traceback"], file=sys.stderr, flush=True)
    finally:
        logger.removeHandler(handler)
        record["lines"] = [line for line in log.getvalue().splitlines() if "autoloader" in line][-6:]
        bench.write()


def in_run(dataset: Any, batch_size: int, device: str, home: str) -> Any:
    """``best_loader`` tuning in the run from the results home ``home``, as a user's first run."""
    import autoloader

    return autoloader.best_loader(dataset, batch_size=batch_size, device=device, out=home, tune="run",
                                  generator=torch.Generator().manual_seed(7))


def more_pairs(bench: Any, record: dict, args: Any, dataset: Any, pick: LoaderConfig, batch_size: int,
               step: Callable, device: str) -> None:
    """Epoch 1 in the run (each from an empty results home) and an epoch with the first run's
    pick from the start, in pairs after the first, the order alternated (the second pair reads
    the pick first), until ``--epoch-pairs`` or the deadline; then the in-run epoch over the
    pick's, paired (``paired_ratio``: its 95% interval from two pairs on)."""
    epochs = record["epochs"]
    pairs = [{"order": ["in_run", "pick_from_start"], "in_run": epochs["in_run"]["epoch_s"],
              "pick_from_start": epochs["pick_from_start"]["epoch_s"], "pick": epochs["in_run"]["pick"]}]
    epochs["pairs"] = pairs
    while len(pairs) < args.epoch_pairs:
        if bench.left() < 2.3 * max(pairs[0]["in_run"], pairs[0]["pick_from_start"]):
            epochs["pairs_cut"] = f"{bench.left():.0f} s left of the deadline after {len(pairs)} pair(s)"
            break
        order = ["pick_from_start", "in_run"] if len(pairs) % 2 else ["in_run", "pick_from_start"]
        row: dict = {"order": order}
        for key in order:
            if "pairs_cut" in epochs:
                break
            if key == "pick_from_start":
                try:
                    row[key] = epoch(plain(dataset, pick, batch_size, 7), step, device)["epoch_s"]
                except RuntimeError as exc:
                    epochs["pairs_cut"] = f"pair {len(pairs) + 1}, {key}: {str(exc)[:300]}"
                continue
            with tempfile.TemporaryDirectory() as home:
                loader = in_run(dataset, batch_size, device, home)
                try:
                    row[key] = epoch(loader, step, device)["epoch_s"]
                    plan = getattr(loader, "plan", None)
                    row["pick"] = short(plan.pick or plan.leader()) if plan is not None else None
                except RuntimeError as exc:   # a batch past BATCH_TIMEOUT_S: the pairs end, said
                    epochs["pairs_cut"] = f"pair {len(pairs) + 1}, {key}: {str(exc)[:300]}"
                finally:
                    if hasattr(loader, "close"):
                        loader.close()
        if "pairs_cut" in epochs:
            break
        pairs.append(row)
        ratio = paired_ratio([(p["in_run"], p["pick_from_start"]) for p in pairs])
        epochs["pairs_ratio"] = ratio.to_dict() if ratio is not None else None
        bench.write()


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _ratio(r: dict | None) -> str:
    if not r:
        return "-"
    if r.get("interval"):
        return f"{r['ratio']:.3f} (95% {r['interval'][0]:.3f}-{r['interval'][1]:.3f}, {r['rounds']} rounds)"
    return f"{r['ratio']:.3f} ({r.get('note') or str(r['rounds']) + ' round: no interval'})"


def first_pair_line(segments: list[dict], meta: dict) -> str | None:
    """The climb's first pair as judged on one pair (schedule.compare over the readings' own errors,
    ``rate_log_se``): the candidate over the start, and that ratio Z errors down, which a one-pair
    win must hold past FAR_AHEAD (NOTE [ The climb ]); None where the readings carry no error."""
    import math

    from types import SimpleNamespace

    pair = [s for s in segments if s.get("round") == 0]
    if len(pair) != 2 or any(s.get("rate_log_se") is None or not s.get("samples_per_s") for s in pair):
        return None
    best, candidate = pair   # the first pair reads the start first
    # The stored reading as compare() reads one: its rate and its own variance.
    read = lambda s: SimpleNamespace(rate=s["samples_per_s"], variance=lambda: s["rate_log_se"] ** 2)
    d, se = schedule.compare([(read(best), read(candidate))])
    z, far = meta.get("z", schedule.Z), meta.get("far_ahead", schedule.FAR_AHEAD)
    name = lambda s: short(LoaderConfig.from_dict(s["config"]))
    return (f"First pair, on its own: {name(candidate)} over {name(best)} {math.exp(d):.3f}x, "
            f"{math.exp(d - z * se):.3f}x at {z:g} errors down (the readings' own, {se:.3f} in log); "
            f"a step up wins on one pair past {far:g}x.")


def summary(data: dict) -> str:
    from autoloader.search.paired import Ratio

    m = data["meta"]
    lines = ["# In-run tuning on the GPU bench (issue 54)", "",
             f"- device: {m.get('gpu')}; {m.get('cpus')} usable CPUs; torch {m.get('torch')}",
             f"- commit: {m.get('commit')}" + (f" (autoloader/ source digest {m['source']})" if m.get("source") else ""),
             f"- command: `{m.get('command')}`",
             f"- elapsed: {m.get('elapsed_s', 0):.0f} s of a {m.get('deadline_s')} s deadline", ""]
    for name, w in data["workloads"].items():
        lines += [f"## {name} (batch {w.get('batch_size')}, rule {w.get('rule')})", ""]
        if w.get("error"):
            lines += [f"**Failed**: `{w['error']}` (after {', '.join(w['phases_done']) or 'nothing'})", ""]
        fb = w.get("first_batch") or []
        if fb:
            ins = [r["in_run"]["first_batch_s"] for r in fb]
            pls = [r["plain"]["first_batch_s"] for r in fb]
            lines.append(f"**First batch** (s from the call / the DataLoader's construction): in-run "
                         f"{', '.join(_f(x) for x in ins)}; plain DataLoader (rule) {', '.join(_f(x) for x in pls)}; "
                         f"in-run minus plain, median {statistics.median(a - b for a, b in zip(ins, pls)):+.2f} s "
                         f"(done-when: at most +2 s).")
            lines.append("")
        if w.get("left_out"):
            lines += [f"Left out of the grid (batches in flight past {w['room_bytes'] / 2**30:.1f} GiB, "
                      f"{w['batch_bytes'] / 2**20:.0f} MiB a batch): {', '.join(w['left_out'])}.", ""]
        sized = w.get("epochs_sized")
        if sized:
            lines.append(f"**Epochs sized** to {sized['target_s']:.1f} s of the best grid rate "
                         f"({sized['best_rate']:.0f} samples/s in round 0): {sized['length']} samples"
                         + (f" (asked {sized['asked_s']:.0f} s: cut to fit the deadline)" if sized["cut"] else "")
                         + ".")
            lines.append("")
        e = w.get("epochs") or {}
        i = e.get("in_run")
        if i:
            lines += ["| epoch | config | wall s | first batch s | batches |", "|---|---|---|---|---|"]
            lines.append(f"| 1, tuned in the run (build {i['built_s']:.2f} s apart) | {i['start']} -> {i['pick']} "
                         f"({i.get('pick_from')}) | {i['epoch_s']:.1f} | {_f(i['first_batch_s'])} | {i['batches']} |")
            for k, later in enumerate(i.get("later") or []):
                lines.append(f"| {k + 2}, in-run | | {later['epoch_s']:.1f} | {_f(later['first_batch_s'])} | "
                             f"{later['batches']} |")
            for key in ("pick_from_start", "rule"):
                row = e.get(key)
                if row and "epoch_s" in row:
                    lines.append(f"| 1, {key.replace('_', ' ')} | {row['config']} | {row['epoch_s']:.1f} | "
                                 f"{_f(row['first_batch_s'])} | {row['batches']} |")
                elif row:
                    why = f"skipped: {row['skipped']}" if "skipped" in row else f"{row['config']}: {row['error']}"
                    lines.append(f"| 1, {key.replace('_', ' ')} | {why} | | | |")
            lines.append("")
            p = e.get("pick_from_start")
            if p and "epoch_s" in p:
                lines.append(f"Epoch 1 in-run over the pick from the start: {i['epoch_s'] / p['epoch_s']:.3f}x "
                             f"the wall time ({(i['epoch_s'] + i['built_s']) / p['epoch_s']:.3f}x with the build); "
                             f"{'the first pair (all pairs below)' if len(e.get('pairs') or []) > 1 else 'one epoch each, so no interval'}"
                             f" (done-when: at most 1.03x"
                             f"{'' if i.get('pick_from') == 'settled' else '; the tune had not settled: its leader'}"
                             f"). Finalists: "
                             f"{', '.join(i['finalists'])}" + (f"; settled: {i['why']}." if i.get('why') else "."))
            pairs = e.get("pairs") or []
            if len(pairs) > 1:
                ratio = e.get("pairs_ratio") or {}
                lines.append(f"Epoch 1 in-run over the pick from the start, {len(pairs)} pairs (the pick first in "
                             f"every second pair; the in-run epochs each from an empty results home, their picks "
                             f"{', '.join(str(p.get('pick')) for p in pairs)}): "
                             + ", ".join(f"{p['in_run']:.1f}/{p['pick_from_start']:.1f} s" for p in pairs)
                             + "; paired " + (f"{ratio['ratio']:.3f}x (95% {ratio['interval'][0]:.3f}-"
                                              f"{ratio['interval'][1]:.3f})" if ratio.get("interval") else "-")
                             + (f" ({e['pairs_cut']})" if e.get("pairs_cut") else "")
                             + " (done-when: at most 1.03x).")
            r = e.get("rule")
            if r and "epoch_s" in r:
                lines.append(f"Epoch 1 in-run over the rule's epoch: {i['epoch_s'] / r['epoch_s']:.3f}x the wall time.")
            segments = i.get("segments") or []
            switches = [s for s in segments if s.get("drained")]
            if switches:
                lines.append(f"Switches in the tuned epoch(s): {len(switches)}; outside the readings (each from a cut "
                             f"to the next reading's start: the old queue served, workers ended and begun) "
                             f"{sum(s['drained'] for s in switches)} batches in "
                             f"{sum(s['drain_s'] for s in switches):.1f} s (ending workers "
                             f"{sum(s.get('end_s', 0.0) for s in switches):.1f} s, beginning the next config's "
                             f"{sum(s.get('begin_s', 0.0) for s in switches):.1f} s); in the readings "
                             f"{sum(s['batches'] for s in segments)} batches in {sum(s['wall_s'] for s in segments):.1f} s.")
            first_pair = first_pair_line(segments, data.get("meta", {}))
            if first_pair:
                lines.append(first_pair)
            lines.append("")
        v = w.get("versus")
        rounds = w.get("rounds") or []
        if rounds:
            lines += [f"**Grid, paired** ({len(rounds)} rounds of {w.get('grid') and len(w['grid'])} grid configs"
                      f"{'' if w.get('pick_in_grid', True) else ' and the pick'}, each a "
                      f"segment of the loop, order shuffled each round; samples/s):", "",
                      "| config | " + " | ".join(f"round {r['round']}" for r in rounds) + " | pick / config |",
                      "|---|" + "---|" * (len(rounds) + 1)]
            keys = list(dict.fromkeys(k for r in rounds for k in r["rates"]))
            for k in keys:
                over = (v or {}).get("over", {}).get(k) if v else None
                lines.append(f"| {k} | " + " | ".join(_f(r["rates"].get(k), ".0f") for r in rounds)
                             + f" | {_ratio(over) if over else ('(the pick)' if v and k not in v.get('over', {}) else '-')} |")
            lines.append("")
            if v and v.get("best"):
                pob = v.get("pick_over_best")
                words = ""
                if pob and pob.get("interval"):
                    words = " — " + compared(Ratio(pob["ratio"], *pob["interval"], pob["rounds"]), "the best")
                lines.append(f"The pick over the best ({v['best']}, highest median): {_ratio(pob)}{words} "
                             f"(done-when: at least 0.98).")
                lines.append("")
        if w.get("lines"):
            lines += ["Closing lines:", ""] + [f"- `{x}`" for x in w["lines"]] + [""]
    return "\n".join(lines) + "\n"


def meta(args, argv: list[str]) -> dict:
    from autoloader.inputs.hardware import usable_cpus

    # The caller's word first: the device's copy of the tree can carry a .git of another commit.
    commit = os.environ.get("AUTOLOADER_BENCH_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
        except OSError:
            commit = None
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "no GPU (cpu)"
    return {"gpu": gpu, "cpus": usable_cpus(), "torch": torch.__version__, "commit": commit,
            "source": source_digest(),
            "command": "python3 -m scripts.bench.inrun_gpu " + " ".join(argv), "deadline_s": args.deadline_seconds,
            "scale": os.environ.get("AUTOLOADER_BENCH_SCALE", "1.0"), "tiny": args.tiny,
            "far_ahead": schedule.FAR_AHEAD, "z": schedule.Z}


def parse(argv: list[str]) -> argparse.Namespace:
    from scripts.bench import workloads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--workloads", default="heavytail,hugefloat")
    parser.add_argument("--device", default=None, help="cuda (default where present) or cpu")
    parser.add_argument("--deadline-seconds", type=float, default=None, help="the whole run's bound (default 470)")
    parser.add_argument("--epoch-s", type=float, default=None, help="epoch length asked, at the best grid rate (60)")
    parser.add_argument("--segment-s", type=float, default=None, help="a grid segment's steady seconds (5)")
    parser.add_argument("--rounds", type=int, default=None, help="grid rounds at most, round 0 included (4)")
    parser.add_argument("--first-batches", type=int, default=None, help="first-batch pairs (2)")
    parser.add_argument("--grid", type=int, default=None, help="grid configs kept, the rule first (all)")
    parser.add_argument("--max-epochs", type=int, default=2, help="epochs the in-run tune may span (2)")
    parser.add_argument("--tiny", action="store_true", help="a CPU check of every phase in seconds")
    parser.add_argument("--no-rule-epoch", action="store_true",
                        help="no epoch with the rule: the epochs are sized for two (a short call)")
    parser.add_argument("--epoch-pairs", type=int, default=1,
                        help="pairs of epoch 1 in the run and with the pick from the start, the order "
                             "alternated from the second on, for a paired interval (1)")
    parser.add_argument("--far-ahead", type=float, default=None,
                        help="the climb's one-pair bound for this run (schedule.FAR_AHEAD; default: the code's)")
    args = parser.parse_args(argv)
    defaults = {"deadline_seconds": 470.0, "epoch_s": 60.0, "segment_s": 5.0, "rounds": 4, "first_batches": 2}
    if args.tiny:
        os.environ.setdefault("AUTOLOADER_BENCH_SCALE", TINY["scale"])
        defaults = {"deadline_seconds": TINY["deadline"], "epoch_s": TINY["epoch_s"], "segment_s": TINY["segment_s"],
                    "rounds": TINY["rounds"], "first_batches": TINY["first_batches"]}
        args.grid = args.grid or TINY["grid"]
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no GPU here; pass --device cpu (with --tiny for a check)")
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in workloads.WORKLOADS]
    if unknown or not names:
        parser.error(f"--workloads takes names from {', '.join(workloads.WORKLOADS)}; got {args.workloads!r}")
    for name in ("deadline_seconds", "epoch_s", "segment_s"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if args.rounds < 1 or args.first_batches < 0 or args.max_epochs < 1 or args.epoch_pairs < 1:
        parser.error(f"--rounds, --max-epochs and --epoch-pairs take 1 or more, --first-batches 0 or more; got "
                     f"--rounds {args.rounds} --max-epochs {args.max_epochs} --epoch-pairs {args.epoch_pairs} "
                     f"--first-batches {args.first_batches}")
    if args.far_ahead is not None and not args.far_ahead > 1.0:
        parser.error(f"--far-ahead is a ratio past 1 (a candidate this many times the best's rate), got "
                     f"{args.far_ahead}: pass e.g. --far-ahead 1.25, or leave it out for the code's")
    args.names = names
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # DataLoader's warning for more workers than it suggests: the grid asks for them on purpose.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    args = parse(argv)
    far_ahead = schedule.FAR_AHEAD
    if args.far_ahead is not None:
        schedule.FAR_AHEAD = args.far_ahead
    try:
        os.makedirs(args.out, exist_ok=True)
        bench = Bench(args.out, meta(args, argv), args.deadline_seconds)
        bench.write()
        for k, name in enumerate(args.names):
            # Each workload gets an even share of what is left, the last all of it.
            share = bench.left() / (len(args.names) - k)
            whole = bench.deadline_s
            bench.deadline_s = (time.perf_counter() - bench.began) + share
            run_workload(bench, name, args)
            bench.deadline_s = whole
        bench.write()
    finally:
        schedule.FAR_AHEAD = far_ahead
    with open(os.path.join(args.out, "summary.md")) as fh:
        print(fh.read(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
