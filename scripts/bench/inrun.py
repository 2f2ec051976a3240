"""In-run tuning on the README's worked example: epoch 1 tuned in the run against epoch 1 with the
run's own pick set from the start, and the pick against a CLI tune's with the same step.

    PYTHONPATH=. python -m scripts.bench.inrun --runs 3 --out results/inrun/<name>

Each run starts from empty results homes, in this order: (0) ``--warm`` epochs over a plain
DataLoader without workers, not measured (the first epochs in a process run slower, whatever the
loader: without them the in-run epoch, always first, would pay that alone); (1) ``best_loader(ds, batch_size=64,
device="cpu")`` (tuned in the run) and one epoch of the worked example's training loop over it,
the first batch's time from the call; (2) one epoch over a plain DataLoader with that run's pick
(shuffled, the same seed); (3) ``tune(make, step=make_step, ...)`` apart, as the CLI does, and
where its pick differs from the in-run one, ``--pairs`` epochs of each alternating, paired. With
``--bracket`` the CLI tune comes first and an epoch with its pick before (1): where that is the
in-run pick too, the control is the geometric mean of the epochs before and after (a drift over
the run, which the in-run epoch would otherwise pay or gain alone, cancels). The
dataset is the worked example's ``Spectra`` (``--clips`` clips, read ``--length`` samples an epoch,
index modulo the clips) so that an epoch lasts long enough to tune in. Writes ``runs.json`` (every
figure, the closing lines, the machine's load average) and ``summary.md``; prints the summary.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Spectra(Dataset):
    """The README's worked example's dataset: ``clips`` audio clips as one numpy array, read as
    ``length`` samples (clip ``i % clips``), each turned into a log spectrum on the fly."""

    def __init__(self, clips: int = 10_000, length: int = 60_000, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.clips = rng.standard_normal((clips, 16_000), dtype=np.float32)
        self.labels = rng.integers(0, 10, clips)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        i = i % len(self.clips)
        frames = self.clips[i].reshape(80, 200)
        spectrum = np.log1p(np.abs(np.fft.rfft(frames, axis=1))).astype(np.float32)
        return torch.from_numpy(spectrum), int(self.labels[i])


ARGS = {"clips": 10_000, "length": 60_000}
# The sizes travel to the CLI tune's trial process (which imports this module afresh) by this variable.
SIZES = "AUTOLOADER_BENCH_INRUN_SIZES"


def make():
    clips, length = (int(x) for x in os.environ.get(SIZES, f"{ARGS['clips']},{ARGS['length']}").split(","))
    return Spectra(clips, length)


def make_step():
    """The worked example's step: an MLP's forward, backward and update on the batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(80 * 101, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def epoch(loader, step) -> tuple[float, float, int]:
    """(the epoch's wall time, its first batch's time, batches) of one pass of the loop."""
    began = time.perf_counter()
    first, n = None, 0
    for batch in loader:
        if first is None:
            first = time.perf_counter() - began
        step(batch)
        n += 1
    return time.perf_counter() - began, first or 0.0, n


def plain(dataset, kwargs: dict, seed: int) -> DataLoader:
    from autoloader.seeding import seed_worker

    kwargs = {k: v for k, v in kwargs.items()}
    if kwargs.get("num_workers"):
        kwargs["worker_init_fn"] = seed_worker
    return DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(seed), **kwargs)


def one_run(index: int, dataset, args) -> dict:
    import autoloader

    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("autoloader")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    record: dict = {"run": index, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cli_home:
        record["warm_s"] = [epoch(plain(dataset, {"batch_size": 64, "num_workers": 0}, 1000 + index), make_step())[0]
                            for _ in range(args.warm)]
        result = cli_tune(autoloader, record, cli_home, args) if args.bracket else None
        if args.bracket and result is not None:   # the control before the in-run epoch, as after it
            wall, first, n = epoch(plain(dataset, result.config.loader_kwargs(), index), make_step())
            record["pick_before"] = {"epoch_s": wall, "first_batch_s": first, "batches": n,
                                     "config": result.config.loader_kwargs()}
        step = make_step()
        called = time.perf_counter()
        loader = autoloader.best_loader(dataset, batch_size=64, device="cpu", out=home, epochs=args.epochs,
                                        generator=torch.Generator().manual_seed(index))
        built = time.perf_counter() - called
        wall, first, n = epoch(loader, step)
        record["in_run"] = {"built_s": built, "first_batch_s": built + first, "epoch_s": wall, "batches": n,
                            "loader": type(loader).__name__, "later_epochs_s": []}
        while getattr(getattr(loader, "plan", None), "state", None) != "settled" \
                and len(record["in_run"]["later_epochs_s"]) < args.max_epochs - 1:   # tuning spans epochs
            record["in_run"]["later_epochs_s"].append(epoch(loader, step)[0])
        if hasattr(loader, "plan"):
            record["in_run"]["segments"] = [r.to_dict() for r in loader.plan.readings]
            record["in_run"]["steps"] = getattr(loader.plan, "steps", None)
            record["in_run"]["finalists"] = [c.loader_kwargs() for c in loader.plan.finalists]
            record["in_run"]["why"] = loader.plan.why
        pick = loader.plan.pick if hasattr(loader, "plan") else None
        record["in_run"]["pick"] = pick.loader_kwargs() if pick is not None else None
        record["in_run"]["settled"] = getattr(getattr(loader, "plan", None), "state", None)
        stored = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs if f.endswith(".json")]
        record["in_run"]["stored"] = json.load(open(stored[0])).get("in_run") if stored else None
        del loader
        if pick is not None:
            step = make_step()
            wall, first, n = epoch(plain(dataset, pick.loader_kwargs(), index), step)
            record["pick_from_start"] = {"epoch_s": wall, "first_batch_s": first, "batches": n}
        if not args.bracket:
            result = cli_tune(autoloader, record, cli_home, args)
        if result is not None and pick is not None and result.config.loader_kwargs() != pick.loader_kwargs() and args.pairs:
            pairs = []
            for r in range(args.pairs):
                order = [("in_run", pick.loader_kwargs()), ("cli", result.config.loader_kwargs())]
                if r % 2:
                    order.reverse()
                walls = {}
                for name, kwargs in order:
                    walls[name] = epoch(plain(dataset, kwargs, 100 + r), make_step())[0]
                pairs.append(walls)
            record["paired_epochs"] = pairs
    logger.removeHandler(handler)
    record["lines"] = [line for line in log.getvalue().splitlines() if "tuned in the run" in line]
    record["load_after"] = os.getloadavg()
    return record


def cli_tune(autoloader, record: dict, cli_home: str, args):
    """``tune(make, step=make_step, ...)`` apart, as the CLI does: its result, or None (recorded)."""
    t0 = time.perf_counter()
    try:
        result = autoloader.tune(make, step=make_step, batch_size=64, budget=args.budget, device="cpu",
                                 out=cli_home, progress=False)
    except autoloader.AutoloaderError as exc:   # a result about this machine's load, not the bench's end
        record["cli"] = {"pick": None, "error": str(exc), "tune_s": time.perf_counter() - t0}
        return None
    record["cli"] = {"pick": result.config.loader_kwargs(), "tune_s": time.perf_counter() - t0,
                     "samples_per_s": result.samples_per_s}
    return result


def control_s(run: dict) -> float | None:
    """The control the in-run epoch is compared with: the pick's epoch after it, or, where the run
    bracketed it with the same config before (``--bracket``), the geometric mean of the two (a
    drift over the run cancels)."""
    after, before, pick = run.get("pick_from_start"), run.get("pick_before"), run["in_run"].get("pick")
    if not after:
        return None
    if before and before["config"] == pick:
        return math.sqrt(before["epoch_s"] * after["epoch_s"])
    return after["epoch_s"]


def short(kw: dict | None) -> str:
    """A config's loader arguments as the tables name it (``w2 pf2``), or ``-``."""
    if not kw:
        return "-"
    return f"w{kw.get('num_workers')}" + (f" pf{kw['prefetch_factor']}" if kw.get("num_workers") else "")


def summary(runs: list[dict], command: str) -> str:
    from autoloader.search.paired import paired_ratio

    lines = [f"# In-run tuning on the worked example (CPU)", "", f"Command: `{command}`", ""]
    lines.append("| run | load avg (1 min) before/after | first batch s | epoch 1 in-run s | epoch 1 pick s "
                 "(before / after, with --bracket) | in-run / pick | in-run pick | CLI pick | tuning cost s (in_run record) |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    pairs = []
    for r in runs:
        i, p = r["in_run"], r.get("pick_from_start")
        if not p:
            lines.append(f"| {r['run']} | {r['load_before'][0]:.1f}/{r['load_after'][0]:.1f} | {i['first_batch_s']:.2f} | "
                         f"{i['epoch_s']:.1f} | - | - | not settled in {1 + len(i['later_epochs_s'])} epochs | - | - |")
            continue
        control = control_s(r)
        ratio = i["epoch_s"] / control
        pairs.append((i["epoch_s"], control))
        before = r.get("pick_before") if (r.get("pick_before") or {}).get("config") == i["pick"] else None
        pick_s = f"{before['epoch_s']:.1f} / {p['epoch_s']:.1f}" if before else f"{p['epoch_s']:.1f}"
        cost = (i.get("stored") or {}).get("tuning_cost_s")
        lines.append(f"| {r['run']} | {r['load_before'][0]:.1f}/{r['load_after'][0]:.1f} | {i['first_batch_s']:.2f} | "
                     f"{i['epoch_s']:.1f} | {pick_s} | {ratio:.3f} | {short(i['pick'])} | "
                     f"{short(r['cli']['pick']) if r['cli']['pick'] else 'failed'} | {cost if cost is None else f'{cost:.2f}'} |")
    ratio = paired_ratio(pairs)
    if ratio is not None:
        span = f" (95% {ratio.lo:.3f}-{ratio.hi:.3f}, {ratio.rounds} runs paired)" if ratio.judged else " (one run)"
        lines += ["", f"Epoch 1 tuned in the run over epoch 1 with the pick from the start: {ratio.ratio:.3f}x the wall time{span}."]
    warm = [f"run {r['run']} {', '.join(f'{w:.1f} s' for w in r['warm_s'])}" for r in runs if r.get("warm_s")]
    if warm:
        lines.append(f"Warm-up epochs before each run (no workers, not compared): {'; '.join(warm)}.")
    for r in runs:
        if r.get("paired_epochs"):
            ratio = paired_ratio([(p["in_run"], p["cli"]) for p in r["paired_epochs"]])
            lines.append(f"Run {r['run']}: the in-run pick's epoch over the CLI pick's: {ratio.ratio:.3f}x"
                         + (f" (95% {ratio.lo:.3f}-{ratio.hi:.3f})" if ratio.judged else ""))
    lines += ["", "Closing lines:", ""] + [f"- run {r['run']}: `{line}`" for r in runs for line in r["lines"]]
    return "\n".join(lines) + "\n"


def combined(folders: list[str]) -> str:
    """One table over the runs of several ``--out`` folders (one code each, alternated with a
    control's: ``NAME-i`` folders grouped by NAME), each group's epoch-1 ratio paired over its runs."""
    from autoloader.search.paired import paired_ratio

    groups: dict[str, list] = {}
    for folder in folders:
        name = os.path.basename(folder.rstrip("/")).rsplit("-", 1)[0]
        for r in json.load(open(os.path.join(folder, "runs.json"))):
            groups.setdefault(name, []).append((os.path.basename(folder.rstrip("/")), r))
    lines = ["| run | load avg (1 min) before/after | first batch s | epoch 1 in-run s | epoch 1 pick s | in-run / pick "
             "| in-run pick | CLI pick | in-run pick's epoch / CLI pick's |", "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for name, runs in groups.items():
        pairs = []
        for label, r in runs:
            i, p = r["in_run"], r.get("pick_from_start") or {}
            control = control_s(r)
            ratio = i["epoch_s"] / control if control else None
            if ratio is not None:
                pairs.append((i["epoch_s"], control))
            versus = "-"
            if r.get("paired_epochs"):
                v = paired_ratio([(e["in_run"], e["cli"]) for e in r["paired_epochs"]])
                versus = f"{v.ratio:.3f}"
            elif r.get("cli", {}).get("pick") and i.get("pick") and r["cli"]["pick"] == i["pick"]:
                versus = "the same config"
            lines.append(f"| {label} | {r['load_before'][0]:.1f}/{r['load_after'][0]:.1f} | {i['first_batch_s']:.2f} | "
                         f"{i['epoch_s']:.1f} | {p.get('epoch_s', 0):.1f} | {'-' if ratio is None else f'{ratio:.3f}'} | "
                         f"{short(i.get('pick'))} | {short(r['cli'].get('pick'))} | {versus} |")
        ratio = paired_ratio(pairs)
        if ratio is not None:
            span = f" (95% {ratio.lo:.3f}-{ratio.hi:.3f}, {ratio.rounds} runs)" if ratio.judged else " (one run)"
            verdicts.append(f"- {name}: epoch 1 in-run over epoch 1 with the pick from the start {ratio.ratio:.3f}x{span}")
    return "\n".join(lines + [""] + verdicts) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--combine":
        print(combined(argv[1:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="--combine FOLDER...: one table over earlier --out folders")
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clips", type=int, default=ARGS["clips"])
    parser.add_argument("--length", type=int, default=ARGS["length"])
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--max-epochs", type=int, default=3, help="epochs the in-run tune may span")
    parser.add_argument("--warm", type=int, default=1,
                        help="unmeasured epochs (no workers) before each run's, so that neither measured epoch "
                             "pays the process's warm-up")
    parser.add_argument("--bracket", action="store_true",
                        help="the CLI tune first, and an epoch with its pick before the in-run epoch as well as "
                             "the in-run pick's after: where the two picks agree, the in-run epoch is compared with "
                             "both (their geometric mean), so a drift over the run cancels")
    parser.add_argument("--epochs", type=int, default=None,
                        help="best_loader(epochs=): the run's epochs the tune weighs a step over (default: not said)")
    args = parser.parse_args(argv)
    ARGS.update(clips=args.clips, length=args.length)
    os.environ[SIZES] = f"{args.clips},{args.length}"
    os.makedirs(args.out, exist_ok=True)
    dataset = make()
    runs = []
    for index in range(args.runs):
        runs.append(one_run(index, dataset, args))
        with open(os.path.join(args.out, "runs.json"), "w") as fh:
            json.dump(runs, fh, indent=2, default=str)
        print(json.dumps({k: runs[-1][k] for k in ("in_run", "pick_from_start", "cli") if k in runs[-1]},
                         default=str), flush=True)
    command = "PYTHONPATH=. python -m scripts.bench.inrun " + " ".join(argv)
    text = summary(runs, command)
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
