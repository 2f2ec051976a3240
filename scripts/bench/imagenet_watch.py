"""PyTorch's imagenet/main.py with ``autoloader.watch`` added: its line against main.py's own timing.

    python scripts/bench/imagenet_watch.py MAIN_PY [--workers 4 0] [--arch mobilenet_v3_small]
        [--batch-size 32] [--train 640] [--val 64] [--out results/inrun/imagenet-watch.md]

MAIN_PY is pytorch/examples' imagenet/main.py, fetched (never copied into this repository). For
each ``-j`` given, a copy of it is written to a temporary folder with the one added line,

    train_loader = autoloader.watch(train_loader)

(and ``import autoloader``) after the train loader is built, and with the ``--dummy`` FakeData
sets cut to ``--train`` and ``--val`` samples (1,281,167 and 50,000 in the script: hours on a
CPU). The copy runs ``--dummy --epochs 1 --print-freq 1`` on the CPU in that folder (its
checkpoint lands there; the folder is removed after), with PYTHONPATH naming this checkout, so
the autoloader run is this one. Each run's watch lines are set beside main.py's own measure of
the same loop: its ``Data`` (time from the last step's end to the batch) over its ``Time`` (the
whole step), summed over the steps but the first and the last, as watch counts a loader with a
length. ``uptime`` before and after each run
says what else the machine was doing.

With ``--tuned PATH``, one more copy (at the first ``-j``) per ``--tuned-device`` replaces the
watch line by ``from autoloader.inrun import tuned; train_loader = tuned(train_loader)`` with
PYTHONPATH=PATH (a checkout whose autoloader has the in-run tuning loader; where it has watch
too, the line is ``train_loader = autoloader.watch(autoloader.tuned(train_loader))``: the in-run
loader, watched): its closing line and main.py's own figures; ``--tuned-device cpu`` adds
``device='cpu'``. A run that fails is kept in the table with its last line. Every run's results
home (AUTOLOADER_HOME) is a folder of its own, so nothing outside it is written.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCH_LINE = "    train_loader = autoloader.watch(train_loader)\n"
TUNED_LINE = "    from autoloader.inrun import tuned; train_loader = tuned(train_loader{})\n"
WATCHED_TUNED_LINE = "    train_loader = autoloader.watch(autoloader.tuned(train_loader{}))\n"
ANCHOR = "    val_loader = torch.utils.data.DataLoader("
STEP = re.compile(r"Epoch: \[\d+\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+([\d.]+)\s+\(\s*[\d.]+\)\s+Data\s+([\d.]+)")


def edited(source: str, line: str, train: int, val: int) -> str:
    """main.py with ``line`` before the val loader is built, and the dummy sets cut."""
    if ANCHOR not in source or "datasets.FakeData(1281167," not in source:
        raise SystemExit("this main.py is not the one the script knows: no val_loader line or FakeData(1281167, ...)")
    source = source.replace("datasets.FakeData(1281167,", f"datasets.FakeData({train},", 1)
    source = source.replace("datasets.FakeData(50000,", f"datasets.FakeData({val},", 1)
    source = source.replace(ANCHOR, line + ANCHOR, 1)
    return "import autoloader\n" + source


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run(main_py: str, workers: int, args, line: str, path: str) -> dict:
    with open(main_py) as fh:
        source = edited(fh.read(), line, args.train, args.val)
    folder = tempfile.mkdtemp(prefix="imagenet-watch-")
    copy = os.path.join(folder, "main.py")
    with open(copy, "w") as fh:
        fh.write(source)
    command = [sys.executable, copy, "--dummy", "-a", args.arch, "-j", str(workers), "-b", str(args.batch_size),
               "--epochs", "1", "--print-freq", "1"]
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", AUTOLOADER_HOME=os.path.join(folder, "home"))
    before = uptime()
    start = time.monotonic()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.monotonic() - start
    after = uptime()
    shutil.rmtree(folder, ignore_errors=True)   # main.py's checkpoints, the results home: nothing is kept
    out = done.stdout + done.stderr
    failed = out.strip().splitlines()[-1] if done.returncode != 0 else None   # kept in the table, not fatal
    steps = [(int(m[1]), int(m[2]), float(m[3]), float(m[4])) for m in STEP.finditer(done.stdout)]
    past = [s for s in steps if 1 < s[0] < s[1]]   # (step, of, time, data): as watch counts them
    data, total = sum(s[3] for s in past), sum(s[2] for s in past)
    watch = [ln for ln in out.splitlines() if ln.startswith("autoloader: watch")]
    others = [ln for ln in out.splitlines() if ln.startswith("autoloader:") and not ln.startswith("autoloader: watch")]
    shown = " ".join(["python", "main.py", *command[2:]])
    return {"workers": workers, "command": shown, "line": line.strip(), "wall": wall, "before": before,
            "after": after, "steps": len(steps), "main_share": data / total if total else None,
            "main_step": total / len(past) if past else None, "watch": watch, "others": others, "failed": failed}


def markdown(runs: list[dict], args, main_py: str) -> str:
    head = [f"# imagenet/main.py --dummy, watched: `{os.path.basename(main_py)}` on the CPU", "",
            f"Made by `python scripts/bench/imagenet_watch.py {main_py} --workers "
            f"{' '.join(str(w) for w in args.workers)} --arch {args.arch} --batch-size {args.batch_size} "
            f"--train {args.train} --val {args.val}"
            + (f" --tuned {args.tuned} --tuned-device {' '.join(args.tuned_device)}" if args.tuned else "")
            + "` from the repository's root.", "",
            "Each run is a copy of main.py with `import autoloader` and one added line after the train loader "
            "is built, and its FakeData sets cut (1,281,167 and 50,000 samples in the script); run as below in a "
            "folder of its own. main.py's own figure: the sum of its `Data` over the sum of its `Time`, "
            "over the steps but the first and the last (as watch counts a loader with a length).", ""]
    rows = ["| -j | added line | watch: wait share (measured) | main.py: Data/Time, same steps | main.py: a step | "
            "wall | load before / after |", "|---|---|---|---|---|---|---|"]
    body = []
    for r in runs:
        end = next((ln for ln in reversed(r["watch"]) if "the epoch's" in ln), None)
        share = re.search(r"\((\d+)% waiting, measured", end).group(1) + "%" if end else "-"
        share = f"failed: {r['failed']}" if r["failed"] else share
        main = f"{r['main_share'] * 100:.0f}%" if r["main_share"] is not None else "-"
        step = f"{r['main_step']:.2f} s" if r["main_step"] is not None else "-"
        load = f"{_load(r['before'])} / {_load(r['after'])}"
        rows.append(f"| {r['workers']} | `{r['line']}` | {share} | {main} | {step} | {r['wall']:.0f} s | {load} |")
        body += [f"## -j {r['workers']}: `{r['line']}`", "", "```", r["command"], "", f"uptime before: {r['before']}",
                 f"uptime after:  {r['after']}", "", *r["others"], *r["watch"],
                 *([f"failed: {r['failed']}"] if r["failed"] else []), "```", ""]
    return "\n".join(head + rows + [""] + body)


def _load(line: str) -> str:
    found = re.search(r"load average: ([\d.]+)", line)
    return found.group(1) if found else "?"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("main_py")
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 0])
    parser.add_argument("--arch", default="mobilenet_v3_small")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train", type=int, default=640)
    parser.add_argument("--val", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--tuned", default=None, help="a checkout whose autoloader has tuned(): also run it watched")
    parser.add_argument("--tuned-device", nargs="+", default=["default"],
                        help="the tuned runs' device= (default: tuned()'s own choice)")
    parser.add_argument("--out", default=None, help="write the markdown here (else print it)")
    args = parser.parse_args(argv)
    runs = [run(args.main_py, w, args, WATCH_LINE, REPO) for w in args.workers]
    if args.tuned:
        both = os.path.exists(os.path.join(args.tuned, "autoloader", "watching.py"))
        for device in args.tuned_device:
            device_arg = "" if device == "default" else f", device={device!r}"
            line = (WATCHED_TUNED_LINE if both else TUNED_LINE).format(device_arg)
            runs.append(run(args.main_py, args.workers[0], args, line, args.tuned))
    text = markdown(runs, args, args.main_py)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
