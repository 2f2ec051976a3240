"""``python -m scripts.memory_growth``: the tuner's memory forecast against a real epoch.

Tunes a dataset (``autoloader.tune``, in this process), then runs one full epoch of the pick and
of the cpus-1 rule, each in a fresh spawned process built like the tuner's trial process, and
writes one JSON record: per config, the forecast the tune made (search/memory.py: each worker's
memory at the end of an epoch, the tree's peak) against what the epoch measured (each worker's
USS as the epoch's last batch arrived, the tree's PSS peak sampled every 0.2 s). Why workers
grow: NOTE [ Copy on read ] in autoloader/search/growth.py.

    python -m scripts.memory_growth --workload pyrows --device cuda --out /tmp/memory_growth.json

``epoch_memory`` is the measurement alone, for the tests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

from autoloader.probe import guard
from autoloader.probe.pages import private_pages

SAMPLE_S = 0.2
KEEP_EVERY_S = 1.0


def _child(conn, dataset_spec: str, step_spec: str | None, device: str, kwargs: dict, epochs: int,
           start_method: str) -> None:
    """The epoch's process: built as the trial process is (spawned, the dataset and step built
    here, workers started the DataLoader's way), then ``epochs`` epochs of the loader."""
    from autoloader.probe.workers import die_with_parent

    die_with_parent()
    mp.set_start_method(start_method, force=True)
    import torch
    from torch.utils.data import DataLoader

    from autoloader.inputs.source import load_spec, resolve_dataset, resolve_step
    from autoloader.probe.trial import to_device
    from autoloader.seeding import seed_worker

    dataset = resolve_dataset(load_spec(dataset_spec), dataset_spec)
    step = resolve_step(load_spec(step_spec), step_spec) if step_spec else None
    cuda = device.startswith("cuda")
    consume = step or ((lambda b: to_device(b, device, kwargs.get("pin_memory", False))) if cuda else (lambda b: None))
    loader = DataLoader(dataset, shuffle=True, worker_init_fn=seed_worker, **kwargs)
    memory = guard.sample_memory(os.getpid())
    conn.send(("ready", {"runner_uss": memory.uss, "runner_pss": memory.pss, "length": len(dataset),
                         "batches": len(loader)}))
    for epoch in range(epochs):
        t0, batches = time.perf_counter(), len(loader)
        it = iter(loader)
        end = None
        for k, batch in enumerate(it, 1):
            consume(batch)
            if k == batches:   # every sample read; the workers are still there
                workers = [w.pid for w in getattr(it, "_workers", ())]
                readings = [p.uss for p in (private_pages(pid) for pid in workers) if p is not None]
                end = {"worker_uss": readings, "tree": guard.sample_memory(os.getpid()).__dict__}
        if cuda:
            torch.cuda.synchronize()
        conn.send(("epoch", {"epoch": epoch, "seconds": time.perf_counter() - t0, "batches": batches, "end": end}))
        del it
    conn.send(("done", None))


def epoch_memory(dataset_spec: str, loader_kwargs: dict, step_spec: str | None = None, device: str = "cpu",
                 epochs: int = 1, timeout_s: float = 900.0) -> dict:
    """Run ``epochs`` epochs of a DataLoader with ``loader_kwargs`` (shuffled) over the dataset in
    a fresh process, and what its memory did: each worker's USS at every epoch's end, the tree's
    PSS and USS peaks, and a reading a second."""
    context = mp.get_context("spawn")
    parent, child = context.Pipe()
    start_method = mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]
    proc = context.Process(target=_child, args=(child, dataset_spec, step_spec, device, dict(loader_kwargs),
                                                epochs, start_method), name="autoloader-epoch")
    proc.start()
    child.close()
    watch = guard.TreeWatch(proc.pid, interval=SAMPLE_S)
    record: dict = {"config": dict(loader_kwargs), "epochs": [], "series": []}
    t0 = time.monotonic()
    kept = -KEEP_EVERY_S
    try:
        while True:
            if parent.poll(0.05):
                kind, data = parent.recv()
                if kind == "ready":
                    record.update(data)
                    watch = guard.TreeWatch(proc.pid, interval=SAMPLE_S)   # the peak from here on
                elif kind == "epoch":
                    end = data.get("end") or {}
                    readings = end.get("worker_uss") or []
                    data["worker_uss_mean"] = sum(readings) / len(readings) if readings else None
                    record["epochs"].append(data)
                else:
                    break
                continue
            sample = watch.poll()
            now = time.monotonic() - t0
            if sample is not None and now - kept >= KEEP_EVERY_S:
                kept = now
                record["series"].append([round(now, 2), sample.pss, sample.uss, sample.processes])
            if not proc.is_alive() and not parent.poll(0):
                raise RuntimeError(f"the epoch's process died (exit code {proc.exitcode})")
            if now > timeout_s:
                raise RuntimeError(f"the epoch took more than {timeout_s:.0f} s")
    finally:
        guard.kill_tree(proc.pid, also=watch.procs)
        proc.join(timeout=5)
    record.update(peak_pss=watch.peak.pss, peak_uss=watch.peak.uss, seconds=time.monotonic() - t0)
    return record


def epoch_forecasts(forecast, epochs: int) -> list[int | None]:
    """One worker's USS forecast at the end of each of ``epochs`` epochs: workers started afresh
    read one share each epoch; kept ones go on reading, e shares by the end of epoch e."""
    if forecast.worker_bytes is None:
        return [None] * epochs
    own = forecast.worker_bytes - forecast.epoch_copied_bytes
    growth, share = forecast.growth, forecast.samples_per_worker
    if not forecast.config.persistent_workers or growth is None:
        return [forecast.worker_bytes] * epochs
    return [int(own + growth.copied((e + 1) * share)) for e in range(epochs)]


def compare(forecast, measured: dict) -> dict:
    """A config's forecast (MemoryForecast) against its epochs: per epoch, one worker's USS forecast
    and measured at its end; the tree's PSS peak against the forecast at the first epoch's end."""
    epochs = measured.get("epochs") or []
    per_epoch = []
    for e, (data, predicted) in enumerate(zip(epochs, epoch_forecasts(forecast, len(epochs)))):
        worker = data.get("worker_uss_mean")
        per_epoch.append({"epoch": e, "forecast_worker_bytes": predicted, "measured_worker_bytes": worker,
                          "ratio": worker / predicted if worker and predicted else None})
    epoch_host = forecast.epoch_host_bytes
    return {"forecast": forecast.to_dict(), "forecast_epoch_host_bytes": epoch_host, "measured": measured,
            "per_epoch": per_epoch, "worker_ratio": per_epoch[0]["ratio"] if per_epoch else None,
            "host_ratio": measured["peak_pss"] / epoch_host if epoch_host and len(epochs) == 1 else None}


def _mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MiB"


def _commit(given: str | None) -> str | None:
    if given:
        return given
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.memory_growth", description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default=None, help="a name from scripts/bench/workloads (its dataset, step and batch)")
    parser.add_argument("--dataset", default=None, help="MODULE:ATTR of the dataset, when no --workload")
    parser.add_argument("--step", default=None, help="MODULE:ATTR of the step (default: the workload's, or none)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--budget", type=float, default=60.0, help="the tune's --budget in seconds")
    parser.add_argument("--max-memory", default=None, help="the tune's --max-memory (default: the tuner's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of each config measured")
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", required=True, help="the JSON record's path")
    args = parser.parse_args(argv)
    dataset, step, batch = args.dataset, args.step, args.batch_size
    if args.workload:
        from scripts.bench.workloads import WORKLOADS

        w = WORKLOADS[args.workload]
        dataset, step, batch = dataset or w.dataset_spec, step or w.step_spec, batch or w.batch_size
    if not dataset or not batch:
        parser.error("--workload, or --dataset and --batch-size, are needed")
    from autoloader import tune
    from autoloader.inputs import hardware
    from autoloader.tuning.progress import ProgressPrinter, table

    t0 = time.monotonic()
    result = tune(dataset, step=step, batch_size=batch, budget=args.budget, device=args.device,
                  max_memory=args.max_memory, out=tempfile.mkdtemp(prefix="autoloader-memory-growth-"),
                  progress=ProgressPrinter())
    print(table(result), file=sys.stderr, flush=True)   # saved, in a folder of its own
    record = {"command": "python -m scripts.memory_growth " + shlex.join(argv if argv is not None else sys.argv[1:]),
              "commit": _commit(args.commit), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "host": platform.node(), "hardware": hardware.detect().to_dict(), "python": platform.python_version(),
              "device": args.device, "dataset": dataset, "step": step, "batch_size": batch, "budget": args.budget,
              "tune_wall_s": time.monotonic() - t0, "tune_seconds": result.tune_seconds,
              "growth": result.profile.growth.to_dict() if result.profile and result.profile.growth else None,
              "memory": result.memory_record(), "configs": []}
    roles = [("pick", result.config, result.memory)]
    if result.rule is not None and result.rule != result.config:
        roles.append(("cpus-1 rule", result.rule, result.rule_memory))
    for role, config, forecast in roles:
        print(f"[memory_growth] {role}: {config.key}: {args.epochs} epoch(s)", file=sys.stderr, flush=True)
        measured = epoch_memory(dataset, config.loader_kwargs(), step, args.device, args.epochs)
        row = {"role": role, "config": config.loader_kwargs(), **compare(forecast, measured)}
        record["configs"].append(row)
        for e in row["per_epoch"]:
            print(f"[memory_growth] {role}, epoch {e['epoch'] + 1}: a worker's USS at its end "
                  f"{_mib(e['measured_worker_bytes'])} measured, {_mib(e['forecast_worker_bytes'])} forecast "
                  f"(measured / forecast {e['ratio'] or float('nan'):.3f})", file=sys.stderr, flush=True)
        print(f"[memory_growth] {role}: the tree's PSS peak {_mib(measured['peak_pss'])} measured, "
              f"{_mib(row['forecast_epoch_host_bytes'])} forecast at the first epoch's end", file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1, default=str)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
