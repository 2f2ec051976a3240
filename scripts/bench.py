#!/usr/bin/env python3
"""Benchmark: autoloader's tuner against a measured grid, per /work/shared/BENCHMARK.md.

    PYTHONUNBUFFERED=1 python3 scripts/bench.py --workloads jpeg,small --out $OUT
    python3 scripts/bench.py --workloads small --quick --scale 0.02 --out /tmp/benchout   # CPU smoke test
    python3 scripts/bench.py --merge part1 part2 part3 --out results/benchmarks/run   # one summary of parts

For each workload of scripts/bench_workloads.py, in one process and in this order:

1. tuner   `python -m autoloader.cli tune ... --json --quiet` as a user runs it (default budget),
           timed; its pick and its own rate estimate are kept.
2. grid    configs measured with long windows (3-5 s, fresh DataLoader each) through autoloader's
           own TrialRunner: the worker sweep, then prefetch / pinning / persistence variants at the
           sweep's best two worker counts (see GRID below for why this grid is enough).
3. final   the grid's top 3, the tuner's pick, num_workers=0 and the cpus-1 heuristic re-measured
           interleaved (A B C A B C ...), 3 rounds, same runner; the best median is the oracle.
4. ceiling min(consumer on device-resident replayed batches, cores x one worker's rate), in a
           spawned child (scripts/bench_ceiling.py).

Every measurement is appended to OUT/records.jsonl as it is made; OUT/summary.md (the table, the
command, the machine) is rewritten after each workload, so a killed run keeps what it finished.
The main process never initialises CUDA: the runner and the ceiling child own it, the GPU is found
through NVML (NOTE [ No CUDA in the driver ] in autoloader/hardware.py).

Time: each workload has a wall budget (--workload-seconds). The tuner, the worker sweep, the final
round and the ceiling always run; the grid's variants run in priority order only while the
estimated cost of what must still follow fits the budget. Skipped variants are listed.
--deadline-seconds bounds the whole run (a device call is killed outright at its limit, with no
chance to write a summary): variants, final rounds and whole workloads that the time left cannot
hold are not begun, and the summary says which. A run killed anyway keeps records.jsonl, from
which --rebuild writes the summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib.metadata
import json
import multiprocessing as mp
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")
# scripts/ for bench_workloads and bench_ceiling (spawned children get this sys.path too); the
# repository root so the autoloader package imports even without the editable install.
for _path in (SCRIPTS, REPO):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from autoloader import hardware  # noqa: E402  (no torch, no CUDA)
from autoloader.probe.burst import BurstSettings, expected_window_s  # noqa: E402
from autoloader.probe.driver import RunnerSetup, SetupError, TrialRunner  # noqa: E402
from autoloader.results import OK, TrialResult  # noqa: E402
from autoloader.source import Source  # noqa: E402
from autoloader.space import LoaderConfig  # noqa: E402

# --- the protocol ------------------------------------------------------------------------------
#
# GRID. Why this grid is enough to find the oracle: num_workers is the dimension that moves the
# rate by integer factors; the sweep 0, 2, 4, 8, 12, 16, 24 (on 16 cores) runs from no workers to
# 1.5x the cores, so it brackets the knee of every workload: the rate rises, then flattens or
# falls once the cores or the consumer are the limit. Prefetch depth, pinning and persistence
# change the rate by percents, and only where the loader and the consumer are close, i.e. near the
# knee; far from it they cannot change the ranking. So they are varied, one at a time, at the two
# best worker counts of the sweep only. The interleaved final round then re-measures the grid's
# top 3 together with the tuner's pick, so a pick between two grid points (say 10 workers) competes
# on equal terms and a grid point that won the sweep by noise is re-judged.
# It is the largest grid that fits the device time: with the tuner's default 120 s, the final
# round (up to 6 configs x 3 rounds x ~4 s) and the ceiling, the 7-point sweep and a few variants
# already fill a ~3.5 minute workload; every further grid point costs 5-7 s (3-5 s window plus
# worker start-up and the skipped first batches).
SWEEP_WORKERS = (0, 2, 4, 8, 12, 16, 24)
# At least 4 worker cycles a window, as the tuner's final: NOTE [ Honest burst ] in autoloader/probe/burst.py.
GRID_SETTINGS = BurstSettings(min_window_s=3.0, max_window_s=5.0, target_rel_interval=0.02, min_cycles=4.0)
FINAL_SETTINGS = BurstSettings(min_window_s=2.0, max_window_s=3.0, target_rel_interval=0.02, min_cycles=4.0)
FINAL_ROUNDS = 3
TOP_FROM_GRID = 3
TIE = 0.02                      # within 2% of the oracle's median: within noise
MEMORY_SHARE = 0.6              # of available RAM, for the runner's memory guard
HANG_TIMEOUT_S = 120.0
CEILING = {"replay_batches": 8, "consumer_window_s": 3.0, "loader_window_s": 3.0, "loader_warmup_s": 0.5}

QUICK_SWEEP = (0, 1, 2)
QUICK_GRID = BurstSettings(min_window_s=0.6, max_window_s=1.0, target_rel_interval=0.05)
QUICK_FINAL = BurstSettings(min_window_s=0.4, max_window_s=0.8, target_rel_interval=0.05)
QUICK_CEILING = {"replay_batches": 4, "consumer_window_s": 0.7, "loader_window_s": 0.7, "loader_warmup_s": 0.2}
QUICK_TUNER_BUDGET = 20.0


class Interrupted(BaseException):
    """SIGTERM (the device's time limit) or Ctrl-C: stop measuring, keep what was measured."""


def _on_signal(signum, frame):  # noqa: ARG001
    signal.signal(signum, signal.SIG_IGN)  # once: the clean-up that follows must not be cut short
    raise Interrupted(signal.Signals(signum).name)


# --- small helpers -----------------------------------------------------------------------------

def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG for the tuner: it runs in a session of its own (so it can be killed as a
    group), and must not outlive this process if this process is killed outright."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def log(message: str) -> None:
    print(message, flush=True)


def short(config: LoaderConfig | None) -> str:
    if config is None:
        return "-"
    if config.num_workers == 0:
        return f"w0 pin{int(config.pin_memory)}"
    return (f"w{config.num_workers} pf{config.prefetch_factor} pin{int(config.pin_memory)} "
            f"pw{int(config.persistent_workers)}")


def config_from_kwargs(kwargs: dict) -> LoaderConfig:
    return LoaderConfig.make(int(kwargs["batch_size"]), int(kwargs["num_workers"]), bool(kwargs["pin_memory"]),
                             kwargs.get("prefetch_factor"), bool(kwargs.get("persistent_workers", False)))


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}"


def fmt_ratio(value: float | None, digits: int = 3, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def fmt_share(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


class Records:
    """OUT/records.jsonl: one JSON line per measurement, flushed as soon as it is made."""

    def __init__(self, path: str, run_id: str):
        self.fh = open(path, "a", buffering=1)
        self.run_id = run_id

    def write(self, **fields) -> None:
        fields = {"run_id": self.run_id, "utc": utc_now(), **fields}
        self.fh.write(json.dumps(fields, default=str) + "\n")
        self.fh.flush()

    def trial(self, workload: str, phase: str, round_: int | None, result: TrialResult,
              t_start: float, t_end: float, **extra) -> None:
        self.write(workload=workload, phase=phase, round=round_, config=result.config.loader_kwargs(),
                   key=result.config.key, result=result.to_dict(), t_start=t_start, t_end=t_end, **extra)

    def close(self) -> None:
        self.fh.close()


# --- one workload ------------------------------------------------------------------------------

@dataclasses.dataclass
class Mode:
    sweep: tuple[int, ...]
    grid: BurstSettings
    final: BurstSettings
    rounds: int
    ceiling: dict
    tuner_budget: float | None
    workload_seconds: float
    ceiling_estimate_s: float
    # time.monotonic() by which the whole run must have ended (--deadline-seconds), or None.
    deadline: float | None = None

    def seconds_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()


class Workload:
    """Runs the four phases of one workload and holds what they measured."""

    def __init__(self, w, mode: Mode, records: Records, out: str, device: str, cpus: int):
        self.w = w
        self.name = w.name
        self.bs = w.batch_size
        self.mode = mode
        self.records = records
        self.out = out
        self.device = device
        self.cuda = device.startswith("cuda")
        self.cpus = cpus
        self.t0 = time.monotonic()
        self.phase_s: dict[str, float] = {}
        self.tuner: dict | None = None
        self.tuner_error: str | None = None
        self.tuner_wall: float | None = None
        self.pick: LoaderConfig | None = None
        self.grid: list[TrialResult] = []
        self.skipped: list[LoaderConfig] = []
        self.final: dict[LoaderConfig, list[TrialResult]] = {}
        self.final_roles: dict[LoaderConfig, list[str]] = {}
        self.ceiling: dict | None = None
        self.ceiling_facts: dict | None = None
        self.ceiling_error: str | None = None
        self.runner: TrialRunner | None = None
        self.runner_info = None
        self.interrupted: str | None = None
        self._tuner_proc: subprocess.Popen | None = None
        self._ceiling_proc = None
        self._ceiling_conn = None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    # phase 0: build the dataset once in this process so one-time data generation (the jpeg
    # workload writes its JPEGs on first use) is not charged to the tuner. No CUDA: datasets only.
    def prepare(self) -> None:
        from autoloader.source import load_spec, resolve_dataset

        t = time.monotonic()
        dataset = resolve_dataset(load_spec(self.w.dataset_spec), self.w.dataset_spec)
        self.length = len(dataset)
        del dataset
        self.phase_s["prepare"] = time.monotonic() - t

    # phase 1 ------------------------------------------------------------------------------------
    def run_tuner(self) -> None:
        tmp = tempfile.mkdtemp(prefix=f"autoloader-bench-{self.name}-")
        cmd = [sys.executable, "-m", "autoloader.cli", "tune", "--dataset", self.w.dataset_spec,
               "--step", self.w.step_spec, "--batch-size", str(self.bs), "--out", tmp, "--json", "--quiet"]
        if self.mode.tuner_budget is not None:
            cmd[-2:-2] = ["--budget", str(self.mode.tuner_budget)]
        budget = self.mode.tuner_budget or 120.0
        log(f"[{self.name}] tuner: {' '.join(shlex.quote(c) for c in cmd[1:])}")
        t_start = time.time()
        t = time.monotonic()
        try:
            self._tuner_proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                text=True, start_new_session=True, preexec_fn=_die_with_parent)
            try:
                stdout, stderr = self._tuner_proc.communicate(timeout=2 * budget + 120)
            except subprocess.TimeoutExpired:
                self._kill_tuner()
                stdout, stderr = self._tuner_proc.communicate()
                stderr += f"\n[bench] tuner killed after {2 * budget + 120:.0f} s"
            rc = self._tuner_proc.returncode
            self._tuner_proc = None
        finally:
            self.tuner_wall = time.monotonic() - t
            self.phase_s["tuner"] = self.tuner_wall
        if stderr.strip():
            with open(os.path.join(self.out, f"tuner-{self.name}.stderr.txt"), "w") as fh:
                fh.write(stderr)
        data = None
        if rc == 0:
            for line in reversed(stdout.strip().splitlines()):
                if line.startswith("{"):
                    try:
                        data = json.loads(line)
                    except json.JSONDecodeError:
                        pass
                    break
        if data is None:
            tail = (stderr.strip().splitlines() or ["(no stderr)"])[-3:]
            self.tuner_error = f"rc={rc}: " + " | ".join(tail)
            log(f"[{self.name}] tuner FAILED ({self.tuner_error})")
        else:
            self.tuner = data
            self.pick = config_from_kwargs(data["config"])
            log(f"[{self.name}] tuner: {self.tuner_wall:.0f} s wall ({data.get('tune_seconds', 0):.0f} s inside), "
                f"{len(data.get('trials', []))} trials, pick {short(self.pick)} at "
                f"{fmt_rate(data.get('samples_per_s'))}/s (its estimate)")
        self.records.write(workload=self.name, phase="tuner", round=None,
                           config=data["config"] if data else None, t_start=t_start, t_end=time.time(),
                           wall_s=self.tuner_wall, returncode=rc, error=self.tuner_error, tuner=data)
        shutil.rmtree(tmp, ignore_errors=True)

    def _kill_tuner(self) -> None:
        proc = self._tuner_proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session; its runner dies with it
            except (ProcessLookupError, PermissionError):
                pass

    # set-up of phases 2-4: the trial runner and the ceiling child start side by side -----------
    def start(self) -> None:
        t = time.monotonic()
        setup = RunnerSetup(Source.from_spec(self.w.dataset_spec), Source.from_spec(self.w.step_spec),
                            self.device, {}, self.bs)
        self._start_ceiling(setup)
        self.runner = TrialRunner(setup, max_memory=int(MEMORY_SHARE * hardware.available_memory()),
                                  hang_timeout_s=HANG_TIMEOUT_S)
        self.runner_info = self.runner.start()
        self._wait_ceiling_ready()
        self.phase_s["setup"] = time.monotonic() - t

    def _start_ceiling(self, setup: RunnerSetup) -> None:
        from bench_ceiling import ceiling_main

        context = mp.get_context("spawn")
        parent, child = context.Pipe()
        self._ceiling_proc = context.Process(target=ceiling_main, name="bench-ceiling",
                                             args=(child, self.w.dataset_spec, self.w.step_spec, self.bs,
                                                   self.mode.ceiling, setup.worker_start_method))
        self._ceiling_proc.start()
        child.close()
        self._ceiling_conn = parent

    def _ceiling_recv(self, timeout: float):
        deadline = time.monotonic() + timeout
        while not self._ceiling_conn.poll(0.2):
            if not self._ceiling_proc.is_alive():
                raise RuntimeError(f"the ceiling process died (exit code {self._ceiling_proc.exitcode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer from the ceiling process in {timeout:.0f} s")
        return self._ceiling_conn.recv()

    def _wait_ceiling_ready(self) -> None:
        try:
            kind, payload = self._ceiling_recv(300.0)
        except (RuntimeError, EOFError, OSError) as exc:
            kind, payload = "error", str(exc)
        if kind == "ready":
            self.ceiling_facts = payload
        else:
            self.ceiling_error = str(payload).strip().splitlines()[0][:300] if payload else "unknown"
            log(f"[{self.name}] ceiling set-up FAILED: {payload}")
            self._stop_ceiling()

    def _stop_ceiling(self) -> None:
        proc = self._ceiling_proc
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
        if self._ceiling_conn is not None:
            self._ceiling_conn.close()
        self._ceiling_proc = self._ceiling_conn = None

    # phase 2 ------------------------------------------------------------------------------------
    def _measure(self, phase: str, round_: int | None, config: LoaderConfig, settings: BurstSettings,
                 **extra) -> TrialResult:
        t_start = time.time()
        result = self.runner.measure(config, settings)
        self.records.trial(self.name, phase, round_, result, t_start, time.time(), **extra)
        if result.status == OK:
            log(f"[{self.name}] {phase:5s}{'' if round_ is None else ' r' + str(round_)} {short(config):22s} "
                f"{result.samples_per_s:>10,.0f}/s ±{(result.rel_interval or 0) * 100:4.1f}% "
                f"{result.window_s:4.1f}s win {result.seconds:4.1f}s")
        else:
            log(f"[{self.name}] {phase:5s}{'' if round_ is None else ' r' + str(round_)} {short(config):22s} "
                f"{result.status}: {result.cause} {(result.error or '')[:80]}")
        return result

    def base(self, workers: int) -> LoaderConfig:
        """The sweep's config: DataLoader's prefetch default, kept workers, pinning on CUDA."""
        return LoaderConfig.make(self.bs, workers, pin_memory=self.cuda, prefetch_factor=2, persistent_workers=True)

    def heuristic(self) -> LoaderConfig:
        return LoaderConfig.make(self.bs, max(0, self.cpus - 1), pin_memory=self.cuda, prefetch_factor=2,
                                 persistent_workers=True)

    def _ok_grid(self) -> list[TrialResult]:
        return sorted((t for t in self.grid if t.status == OK and t.samples_per_s), key=lambda t: -t.samples_per_s)

    def _trial_estimate(self, config: LoaderConfig, settings: BurstSettings) -> float:
        """Seconds one trial of config takes under settings, from the grid trial nearest in workers."""
        ok = [t for t in self.grid if t.status == OK and t.seconds]
        if not ok:
            return 2.0 + settings.max_window_s
        near = min(ok, key=lambda t: (t.config != config, abs(t.config.num_workers - config.num_workers)))
        overhead = max(0.3, near.seconds - near.window_s)
        per_batch = near.window_s / near.batches if near.batches else 0.0
        return overhead + expected_window_s(settings, config.num_workers, per_batch)

    def final_candidates(self) -> list[tuple[LoaderConfig, str]]:
        out = [(t.config, f"grid#{i + 1}") for i, t in enumerate(self._ok_grid()[:TOP_FROM_GRID])]
        if self.pick is not None:
            out.append((self.pick, "pick"))
        out.append((self.base(0), "nw0"))
        out.append((self.heuristic(), "heuristic"))
        return out

    def _round_estimate(self) -> float:
        """Seconds of one interleaved final round over the candidates as they stand now."""
        return sum(self._trial_estimate(c, self.mode.final) for c in {c for c, _ in self.final_candidates()})

    def run_grid(self) -> None:
        t = time.monotonic()
        deadline_hit = False
        for workers in self.mode.sweep:
            # Past the deadline's reach, the rest of the sweep is skipped: one final round and the
            # ceiling must still fit after it.
            need = (self._trial_estimate(self.base(workers), self.mode.grid) + self._round_estimate()
                    + self.mode.ceiling_estimate_s)
            if self.grid and need > self.mode.seconds_left():
                self.skipped.append(self.base(workers))
                deadline_hit = True
                continue
            self.grid.append(self._measure("grid", None, self.base(workers), self.mode.grid, part="sweep"))
        # Best two worker counts of the sweep, then one-at-a-time variants there, in priority order.
        sweep_ok = [r for r in self._ok_grid() if r.config == self.base(r.config.num_workers)]
        best_counts: list[int] = []
        for r in sweep_ok:
            if r.config.num_workers not in best_counts:
                best_counts.append(r.config.num_workers)
        variants: list[LoaderConfig] = []
        seen = {r.config for r in self.grid}
        for workers in best_counts[:2]:
            base = self.base(workers)
            options = [base.replace(prefetch_factor=4)]
            if self.cuda:
                options.append(base.replace(pin_memory=False))
            options += [base.replace(prefetch_factor=8), base.replace(persistent_workers=False)]
            for config in options:
                if config not in seen:
                    seen.add(config)
                    variants.append(config)
        for config in variants:
            cost = self._trial_estimate(self.base(config.num_workers), self.mode.grid)
            need = cost + self.mode.rounds * self._round_estimate() + self.mode.ceiling_estimate_s
            past_deadline = need > self.mode.seconds_left()
            deadline_hit |= past_deadline
            if past_deadline or self.elapsed() + need > self.mode.workload_seconds:
                self.skipped.append(config)
                continue
            self.grid.append(self._measure("grid", None, config, self.mode.grid, part="variant"))
        if self.skipped:
            left = f" and the {max(0.0, self.mode.seconds_left()):.0f} s left of --deadline-seconds"
            limit = f"{self.mode.workload_seconds:.0f} s" + (left if deadline_hit else "")
            log(f"[{self.name}] grid: {len(self.skipped)} config(s) skipped to keep within "
                f"{limit}: {', '.join(short(c) for c in self.skipped)}")
            self.records.write(workload=self.name, phase="grid", round=None,
                               skipped=[c.loader_kwargs() for c in self.skipped], reason=f"workload budget {limit}")
        self.phase_s["grid"] = time.monotonic() - t

    # phase 3 ------------------------------------------------------------------------------------
    def run_final(self) -> None:
        t = time.monotonic()
        order: list[LoaderConfig] = []
        for config, role in self.final_candidates():
            if config not in self.final_roles:
                order.append(config)
                self.final_roles[config] = []
            self.final_roles[config].append(role)
        self.final = {c: [] for c in order}
        log(f"[{self.name}] final: {len(order)} configs x {self.mode.rounds} rounds, interleaved: "
            + "; ".join(f"{short(c)} ({'/'.join(self.final_roles[c])})" for c in order))
        for round_ in range(1, self.mode.rounds + 1):
            # A round the deadline cannot hold is not begun: fewer rounds, but a summary written,
            # rather than a run killed mid-round (NOTE in the module docstring, "Time").
            need = self._round_estimate() + self.mode.ceiling_estimate_s
            if need > self.mode.seconds_left():
                self.interrupted = (f"final cut to {round_ - 1} of {self.mode.rounds} rounds: the next needed "
                                    f"about {need:.0f} s, {max(0.0, self.mode.seconds_left()):.0f} s were left "
                                    "of --deadline-seconds")
                log(f"[{self.name}] {self.interrupted}")
                break
            for config in order:
                self.final[config].append(self._measure("final", round_, config, self.mode.final,
                                                        roles=self.final_roles[config]))
        self.phase_s["final"] = time.monotonic() - t

    # phase 4 ------------------------------------------------------------------------------------
    def run_ceiling(self) -> None:
        if self._ceiling_conn is None:
            return
        t = time.monotonic()
        t_start = time.time()
        try:
            self._ceiling_conn.send("go")
            kind, payload = self._ceiling_recv(300.0)
        except (RuntimeError, EOFError, OSError) as exc:
            kind, payload = "error", str(exc)
        if kind == "result":
            self.ceiling = payload
            c = payload
            consumer = fmt_rate(c["consumer_samples_per_s"])
            log(f"[{self.name}] ceiling {fmt_rate(c['ceiling_samples_per_s'])}/s ({c['bound']} bound): consumer "
                f"{consumer}/s, one worker {fmt_rate(c['one_worker_samples_per_s'])}/s x {c['cores']} cores")
        else:
            self.ceiling_error = str(payload).strip().splitlines()[0][:300] if payload else "unknown"
            log(f"[{self.name}] ceiling FAILED: {payload}")
        self.records.write(workload=self.name, phase="ceiling", round=None, config=None, t_start=t_start,
                           t_end=time.time(), ceiling=self.ceiling, facts=self.ceiling_facts, error=self.ceiling_error)
        self._stop_ceiling()
        self.phase_s["ceiling"] = time.monotonic() - t

    def close(self) -> None:
        self._kill_tuner()
        if self.runner is not None:
            self.runner.close()
        self._stop_ceiling()

    def run(self) -> None:
        log(f"[{self.name}] {self.w.description}")
        try:
            self.prepare()
            self.run_tuner()
            self.start()
            self.run_grid()
            self.run_final()
            self.run_ceiling()
        except Interrupted as exc:
            self.interrupted = f"interrupted by {exc}"
            raise
        except SetupError as exc:
            self.interrupted = f"runner set-up failed: {exc}"
            log(f"[{self.name}] {self.interrupted}")
        finally:
            self.close()
            self.phase_s["total"] = self.elapsed()

    # results ------------------------------------------------------------------------------------
    def summary(self) -> dict:
        medians = {c: statistics.median([r.samples_per_s for r in rs if r.status == OK])
                   for c, rs in self.final.items() if any(r.status == OK for r in rs)}
        oracle = max(medians, key=lambda c: (medians[c], -c.num_workers)) if medians else None
        oracle_rate = medians.get(oracle) if oracle else None
        pick_rate = medians.get(self.pick) if self.pick else None
        nw0_rate = medians.get(self.base(0))
        heur_rate = medians.get(self.heuristic())
        estimate = self.tuner.get("samples_per_s") if self.tuner else None
        within = [c for c in medians if oracle_rate and medians[c] >= oracle_rate * (1 - TIE)]
        if self.pick is None or pick_rate is None:
            fewest = None
        else:
            fewest = self.pick in within and self.pick.num_workers == min(c.num_workers for c in within)
        peak = None
        if self.pick in self.final:
            peaks = [r.peak_host_bytes for r in self.final[self.pick] if r.peak_host_bytes]
            peak = max(peaks) if peaks else None
        ceiling = self.ceiling["ceiling_samples_per_s"] if self.ceiling else None
        spreads = {}
        for c, rs in self.final.items():
            rates = [r.samples_per_s for r in rs if r.status == OK]
            if len(rates) > 1 and medians.get(c):
                spreads[c] = (max(rates) - min(rates)) / medians[c]
        # Paired by round (the same minute of machine state), so the noise the oracle's max rides on shows.
        per_round = []
        if self.pick in self.final and oracle in self.final:
            for mine, best in zip(self.final[self.pick], self.final[oracle]):
                if mine.status == OK and best.status == OK and best.samples_per_s:
                    per_round.append(mine.samples_per_s / best.samples_per_s)
        # The grid's best, chosen on the grid's long windows and scored on the final: an oracle
        # the final's noise did not pick, so its ratio is free of the max-of-medians bias.
        grid_best = next((c for c, roles in self.final_roles.items() if "grid#1" in roles), None)
        return {
            "workload": self.name, "batch_size": self.bs, "dataset_length": getattr(self, "length", None),
            "interrupted": self.interrupted,
            "tuned_over_oracle": ratio(pick_rate, oracle_rate),
            "tuned_over_grid_best": ratio(pick_rate, medians.get(grid_best)) if grid_best else None,
            "tuned_over_oracle_by_round": per_round,
            "tune_seconds": self.tuner_wall,
            "tune_seconds_inside": self.tuner.get("tune_seconds") if self.tuner else None,
            "burst_error": (estimate / pick_rate - 1) if estimate and pick_rate else None,
            "vs_torch_default": ratio(oracle_rate, nw0_rate), "vs_heuristic": ratio(pick_rate, heur_rate),
            "ceiling": ceiling, "tuned_over_ceiling": ratio(pick_rate, ceiling),
            "peak_host_bytes": peak, "pick_fewest_workers_within_tie": fewest,
            "pick": self.pick.loader_kwargs() if self.pick else None, "pick_short": short(self.pick),
            "pick_rate": pick_rate, "tuner_estimate": estimate, "tuner_error": self.tuner_error,
            "tuner_trials": len(self.tuner.get("trials", [])) if self.tuner else None,
            "oracle": oracle.loader_kwargs() if oracle else None, "oracle_short": short(oracle),
            "oracle_rate": oracle_rate, "nw0_rate": nw0_rate, "heuristic": self.heuristic().loader_kwargs(),
            "heuristic_rate": heur_rate,
            "final": [{"config": c.loader_kwargs(), "short": short(c), "roles": self.final_roles.get(c, []),
                       "rates": [r.samples_per_s for r in rs if r.status == OK],
                       "failed": [f"{r.status}:{r.cause}" for r in rs if r.status != OK],
                       "median": medians.get(c), "spread": spreads.get(c),
                       "peak_host_bytes": max([r.peak_host_bytes or 0 for r in rs] or [0]) or None,
                       "wait": _median([r.wait_fraction for r in rs if r.status == OK and r.wait_fraction is not None]),
                       "gpu_util": _median([r.gpu_util for r in rs if r.status == OK and r.gpu_util is not None])}
                      for c, rs in self.final.items()],
            "grid": [{"config": t.config.loader_kwargs(), "short": short(t.config), "status": t.status,
                      "cause": t.cause, "samples_per_s": t.samples_per_s, "rel_interval": t.rel_interval,
                      "window_s": t.window_s, "seconds": t.seconds} for t in self.grid],
            "grid_skipped": [short(c) for c in self.skipped],
            "ceiling_detail": self.ceiling, "ceiling_facts": self.ceiling_facts, "ceiling_error": self.ceiling_error,
            "phase_seconds": self.phase_s,
            "trial_seconds": {
                "grid_median": _median([t.seconds for t in self.grid if t.seconds]),
                "final_median": _median([r.seconds for rs in self.final.values() for r in rs if r.seconds])},
        }


def _median(values):
    return statistics.median(values) if values else None


# --- the report --------------------------------------------------------------------------------

def one_line(s: dict) -> str:
    gib = s["peak_host_bytes"] / 2**30 if s["peak_host_bytes"] else None
    return (f"RESULT {s['workload']}: tuned/oracle {fmt_ratio(s['tuned_over_oracle'])}, "
            f"tune {s['tune_seconds'] or 0:.0f} s, "
            f"burst error {fmt_pct(s['burst_error'])}, vs nw=0 {fmt_ratio(s['vs_torch_default'], 2, 'x')}, "
            f"vs heuristic {fmt_ratio(s['vs_heuristic'], 2, 'x')}, ceiling {fmt_rate(s['ceiling'])}/s, "
            f"tuned/ceiling {fmt_ratio(s['tuned_over_ceiling'], 2)}, peak {fmt_ratio(gib, 2)} GiB, "
            f"pick [{s['pick_short']}] oracle [{s['oracle_short']}], fewest-within-2% "
            f"{'n/a' if s['pick_fewest_workers_within_tie'] is None else s['pick_fewest_workers_within_tie']}, "
            f"{s['phase_seconds'].get('total', 0):.0f} s")


def by_round(s: dict) -> str:
    """The pick over the oracle round by round, lowest to highest: how far noise moves the ratio."""
    rounds = s.get("tuned_over_oracle_by_round") or []
    if not rounds:
        return "n/a"
    return f"{min(rounds):.2f}-{max(rounds):.2f}" if len(rounds) > 1 else f"{rounds[0]:.2f}"


def table(summaries: list[dict]) -> str:
    head = ("| workload | tuned/oracle | by round | vs grid#1 | tune s | burst error | vs nw=0 | vs heuristic | "
            "ceiling /s | tuned/ceiling | peak host GiB | fewest within 2% | pick | oracle |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for s in summaries:
        gib = s["peak_host_bytes"] / 2**30 if s["peak_host_bytes"] else None
        fewest = s["pick_fewest_workers_within_tie"]
        lines.append(
            f"| {s['workload']}{' (partial)' if s['interrupted'] else ''} | {fmt_ratio(s['tuned_over_oracle'])} | "
            f"{by_round(s)} | {fmt_ratio(s.get('tuned_over_grid_best'))} | {s['tune_seconds'] or 0:.0f} | "
            f"{fmt_pct(s['burst_error'])} | "
            f"{fmt_ratio(s['vs_torch_default'], 2, 'x')} | {fmt_ratio(s['vs_heuristic'], 2, 'x')} | "
            f"{fmt_rate(s['ceiling'])} | {fmt_ratio(s['tuned_over_ceiling'], 2)} | "
            f"{fmt_ratio(gib, 2)} | {'n/a' if fewest is None else ('yes' if fewest else 'no')} | "
            f"{s['pick_short']} | {s['oracle_short']} |")
    ratios = [s["tuned_over_oracle"] for s in summaries if s["tuned_over_oracle"] is not None and not s["interrupted"]]
    partial = sum(1 for s in summaries if s["interrupted"])
    if ratios:
        lines.append("")
        lines.append(f"tuned/oracle over {len(ratios)} complete workload(s): mean {statistics.mean(ratios):.3f}, "
                     f"min {min(ratios):.3f}" + (f" ({partial} partial, left out)" if partial else ""))
    return "\n".join(lines)


def details(s: dict) -> str:
    out = [f"### {s['workload']}", ""]
    if s["interrupted"]:
        out.append(f"**{s['interrupted']}**\n")
    if s["tuner_error"]:
        out.append(f"tuner failed: `{s['tuner_error']}`\n")
    ph = s["phase_seconds"]
    out.append("time: " + ", ".join(f"{k} {v:.0f} s" for k, v in ph.items())
               + f"; median trial {fmt_ratio(s['trial_seconds']['grid_median'], 1)} s (grid), "
               f"{fmt_ratio(s['trial_seconds']['final_median'], 1)} s (final); tuner ran "
               f"{s['tuner_trials'] if s['tuner_trials'] is not None else 'n/a'} trials, "
               f"estimated its pick at {fmt_rate(s['tuner_estimate'])}/s")
    out.append("")
    out.append("final round (interleaved; rates in samples/s):")
    out.append("")
    out.append("| config | role | median | spread | rounds | waits | GPU busy | peak host GiB |")
    out.append("|---|---|---|---|---|---|---|---|")
    for f in sorted(s["final"], key=lambda f: -(f["median"] or 0)):
        gib = f["peak_host_bytes"] / 2**30 if f["peak_host_bytes"] else None
        rounds = ", ".join(f"{r:,.0f}" for r in f["rates"]) + (f" (+{len(f['failed'])} failed)" if f["failed"] else "")
        spread = "n/a" if f["spread"] is None else f"{f['spread'] * 100:.1f}%"
        out.append(f"| {f['short']} | {'/'.join(f['roles'])} | {fmt_rate(f['median'])} | "
                   f"{spread} | {rounds} | {fmt_share(f.get('wait'))} | {fmt_share(f.get('gpu_util'))} | "
                   f"{fmt_ratio(gib, 2)} |")
    if s.get("tuned_over_oracle_by_round"):
        out.append("")
        out.append("pick / oracle, round by round: "
                   + ", ".join(f"{r:.3f}" for r in s["tuned_over_oracle_by_round"]))
    out.append("")
    grid = "; ".join(f"{g['short']} {fmt_rate(g['samples_per_s']) if g['status'] == OK else g['status']}"
                     for g in s["grid"])
    out.append(f"grid (one long window each): {grid}")
    if s["grid_skipped"]:
        out.append(f"\ngrid configs skipped for time: {', '.join(s['grid_skipped'])}")
    c = s["ceiling_detail"]
    if c:
        out.append(f"\nceiling {fmt_rate(c['ceiling_samples_per_s'])}/s ({c['bound']} bound): consumer on replayed "
                   f"device batches {fmt_rate(c['consumer_samples_per_s'])}/s; one worker (num_workers=0, one torch "
                   f"thread) {fmt_rate(c['one_worker_samples_per_s'])}/s x {c['cores']} cores = "
                   f"{fmt_rate(c['cores_samples_per_s'])}/s")
    elif s["ceiling_error"]:
        out.append(f"\nceiling failed: `{s['ceiling_error']}`")
    out.append("")
    return "\n".join(out)


def write_summary(out: str, summaries: list[dict], meta: dict, state: str) -> str:
    text = [f"# autoloader benchmark{'' if state == 'done' else f' ({state})'}", "",
            "```", meta["command"], "```", "",
            f"- date (UTC): {meta['date']}",
            f"- machine: {meta.get('gpu_torch') or meta['gpu'] or 'no GPU'}; "
            f"{meta['cpus']} usable CPUs ({meta['cpu_model']}); "
            f"{meta['ram_gib']:.0f} GiB RAM; device {meta['device']}",
            f"- versions: python {meta['python']}, torch {meta['torch']}, torchvision {meta['torchvision']}, "
            f"optuna {meta['optuna']}",
            f"- AUTOLOADER_BENCH_SCALE={meta['scale']}; mode {meta['mode']}; workload budget "
            f"{meta.get('workload_seconds_text') or format(meta['workload_seconds'], '.0f') + ' s'}", "",
            table(summaries), ""]
    if meta.get("not_run"):
        text += ["Not run: " + "; ".join(meta["not_run"]) + ".", ""]
    if meta.get("repeats"):
        text += ["Earlier measurements of the same workloads in this merge (the table above holds each "
                 "workload's last):", "", "| workload | part | tuned/oracle | by round | burst error | pick | oracle |",
                 "|---|---|---|---|---|---|---|"]
        text += [f"| {r['workload']} | {r['part']} | {fmt_ratio(r['tuned_over_oracle'])} | {by_round(r)} | "
                 f"{fmt_pct(r['burst_error'])} | {r['pick_short']} | {r['oracle_short']} |" for r in meta["repeats"]]
        text.append("")
    text += [
            "Columns: tuned/oracle = the pick's median over the oracle's in the interleaved final round; "
            "by round = the lowest and highest of the pick's rate over the oracle's within one round; "
            "vs grid#1 = the pick's median over that of the config the grid ranked first (chosen on the "
            "grid's long windows, not by the final's noise, so it may exceed 1); "
            "tune s = wall seconds of `autoloader tune` (default budget); burst error = the tuner's own "
            "estimate of its pick over the pick's final median, minus 1; vs nw=0 = oracle over "
            "num_workers=0; vs heuristic = pick over num_workers=cpus-1 with pinning (on CUDA), kept "
            "workers; ceiling = min(consumer on device-resident replayed batches, cores x one worker's "
            "rate); peak host = max over the pick's final trials of the summed USS of the trial process "
            "and its workers; fewest within 2% = whether the pick is within 2% of the oracle and no config "
            "within 2% of the oracle has fewer workers.", "",
            "Method: " + meta["method"], "",
            "## Per workload", ""]
    text += [details(s) for s in summaries]
    body = "\n".join(text) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(body)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "workloads": summaries}, fh, indent=2, default=str)
    return body


METHOD = (
    "per workload, in one process: (1) `autoloader tune` as a subprocess with {tuner_budget}; "
    "(2) a grid through autoloader's TrialRunner, fresh DataLoader per config, burst windows of {grid_win} "
    "and at least 4 worker cycles "
    "(target ±{grid_target}): num_workers {sweep} with prefetch 2, pinning (CUDA), kept workers, then at the sweep's "
    "best two worker counts prefetch 4 and 8, no pinning, non-persistent workers, one at a time; "
    "(3) the grid's top 3, the tuner's pick, num_workers=0 and the cpus-1 heuristic re-measured "
    "interleaved, {rounds} round(s) of {final_win} windows; the oracle is the best median; (4) the ceiling in a "
    "separate process. The grid is enough because the worker sweep, from none to 1.5x the cores, brackets "
    "the knee, and prefetch, pinning and persistence move the rate only near the knee, where they are "
    "tried; the final round re-judges the top candidates together with the pick. It is the largest grid "
    "that fits the device time (about 3.5 minutes a workload, 2 minutes of which are the tuner's default "
    "budget); variants that did not fit the workload budget are listed as skipped.")


def run_state(summaries: list[dict], not_run: list[str], killed: bool = False) -> str:
    """The summary's title state, one rule for a run, a merge and a rebuild: interrupted when a
    workload was cut short or the run was stopped, incomplete when workloads were left out for
    time, else done."""
    if killed or any(s["interrupted"] for s in summaries):
        return "interrupted"
    return "incomplete" if not_run else "done"


def merge(parts: list[str], out: str) -> str:
    """One summary from runs made in parts (the device time of one call fits two workloads):
    their workloads in order, every part's command and date. The records stay in the parts."""
    if os.path.abspath(out) in {os.path.abspath(p) for p in parts}:
        raise SystemExit(f"--out {out} is one of the parts; its results.json would be overwritten. "
                         "Fix: write the merged summary to another folder")
    metas, measured = [], []
    for part in parts:
        with open(os.path.join(part, "results.json")) as fh:
            data = json.load(fh)
        commit = _commit_of(part)
        label = os.path.basename(os.path.normpath(part)) + (f", at {commit}" if commit else "")
        metas.append(dict(data["meta"], part=label))
        measured += [(label, s) for s in data["workloads"]]
    # A workload measured in several parts: the table holds the last part's (the latest code and
    # the latest run, whatever it read) unless that one was cut short and an earlier one was not;
    # the others are listed as repeats.
    latest: dict[str, dict] = {}
    for _, s in measured:
        if not (s["interrupted"] and s["workload"] in latest and not latest[s["workload"]]["interrupted"]):
            latest[s["workload"]] = s
    summaries = [latest[w] for w in dict.fromkeys(s["workload"] for _, s in measured)]
    for key in ("cpus", "gpu", "device", "mode", "scale", "torch"):
        values = {str(m.get(key)) for m in metas}
        if len(values) > 1:
            raise SystemExit(f"the parts must come from one machine and mode: {key} differs ({', '.join(sorted(values))}). "
                             "Fix: merge only parts run with the same settings on the same machine")
    meta = dict(metas[0])
    meta["command"] = "\n".join(f"{m['command']}   # {m['part']}" for m in metas)
    meta["repeats"] = [dict(s, part=label) for label, s in measured if latest[s["workload"]] is not s]
    if len({m["method"] for m in metas}) > 1:
        meta["method"] += (" The parts differ in these settings (rounds, windows or budget); each part's "
                           "command above and its own summary.md give its own.")
    meta["date"] = f"{metas[0]['date']} to {metas[-1]['date']}" if len(metas) > 1 else metas[0]["date"]
    meta["parts"] = metas
    # A workload one part had no time for may have run in another; listed once, by its first reason.
    ran = {s["workload"] for s in summaries}
    not_run: dict[str, str] = {}
    for entry in (e for m in metas for e in m.get("not_run", [])):
        not_run.setdefault(entry.split(" (", 1)[0], entry)
    meta["not_run"] = [entry for name, entry in not_run.items() if name not in ran]
    budgets = sorted({m["workload_seconds"] for m in metas})
    if len(budgets) > 1:
        meta["workload_seconds_text"] = f"{budgets[0]:.0f}-{budgets[-1]:.0f} s (by part)"
    meta["records"] = [os.path.join(os.path.relpath(part, out), "records.jsonl") for part in parts]
    os.makedirs(out, exist_ok=True)
    return write_summary(out, summaries, meta, run_state(summaries, meta["not_run"]))


def _commit_of(part: str) -> str | None:
    """The commit a part's code was taken from, when its folder says (a file ``commit.txt``; the
    device gets a snapshot of the code without git, so the run itself cannot tell)."""
    path = os.path.join(part, "commit.txt")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return fh.read().strip() or None


def read_records(paths: list[str]) -> list[dict]:
    """The lines of records.jsonl files, in order; a line torn by a kill mid-write is dropped."""
    rows = []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def _workload_from_records(w, rows: list[dict], cpus: int, device: str) -> "Workload":
    """A Workload holding what ``rows`` (one workload's records) measured, for summary()."""
    bench = Workload(w, None, None, "", device, cpus)
    starts, ends = [], []
    for row in rows:
        if row.get("t_start"):
            starts.append(row["t_start"])
        if row.get("t_end"):
            ends.append(row["t_end"])
        phase = row["phase"]
        if phase == "tuner":
            bench.tuner, bench.tuner_error, bench.tuner_wall = row.get("tuner"), row.get("error"), row.get("wall_s")
            bench.pick = config_from_kwargs(row["config"]) if row.get("config") else None
            bench.phase_s["tuner"] = row.get("wall_s") or 0.0
        elif phase == "grid" and row.get("skipped"):
            bench.skipped = [config_from_kwargs(k) for k in row["skipped"]]
        elif phase == "grid" and row.get("result"):
            bench.grid.append(TrialResult.from_dict(row["result"]))
        elif phase == "final" and row.get("result"):
            result = TrialResult.from_dict(row["result"])
            bench.final.setdefault(result.config, []).append(result)
            bench.final_roles[result.config] = list(row.get("roles") or [])
        elif phase == "ceiling":
            bench.ceiling, bench.ceiling_facts = row.get("ceiling"), row.get("facts")
            bench.ceiling_error = row.get("error")
    for phase in ("grid", "final"):
        times = [(r["t_start"], r["t_end"]) for r in rows if r["phase"] == phase and r.get("t_end")]
        if times:
            bench.phase_s[phase] = max(e for _, e in times) - min(b for b, _ in times)
    if starts and ends:
        bench.phase_s["total"] = max(ends) - min(starts)
    return bench


def rebuild(source: str, out: str) -> str:
    """Summaries from a run's records.jsonl alone. A run killed outright (SIGKILL at the device's
    time limit leaves no moment to write) keeps its records line by line: every workload that
    finished is taken from its summary record, and the one cut short is summarised from its
    measurements and marked partial, saying what it lacks."""
    from bench_workloads import WORKLOADS

    path = os.path.join(source, "records.jsonl")
    if not os.path.isfile(path):
        raise SystemExit(f"--rebuild needs a bench run's records, and {path} does not exist. "
                         "Fix: pass the --out folder of a scripts/bench.py run")
    rows = read_records([path])
    meta = next((r["meta"] for r in rows if r["phase"] == "meta"), None)
    if meta is None:
        raise SystemExit(f"{path} has no meta record, so it is not a bench run's. "
                         "Fix: pass the --out folder of a scripts/bench.py run")
    meta = dict(meta, not_run=list(meta.get("not_run", [])))
    by_workload: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("phase") == "skipped":
            meta["not_run"].append(f"{row['workload']} ({row.get('reason')})")
        elif row.get("workload"):
            by_workload.setdefault(row["workload"], []).append(row)
    unknown = [name for name in by_workload if name not in WORKLOADS]
    if unknown:
        raise SystemExit(f"{path} has workloads this checkout does not define: {', '.join(unknown)}. "
                         "Fix: rebuild with the commit that made the run (scripts/bench_workloads.py)")
    summaries = []
    for name, mine in by_workload.items():
        done = next((r["summary"] for r in mine if r["phase"] == "summary"), None)
        if done is not None:
            summaries.append(done)
            continue
        bench = _workload_from_records(WORKLOADS[name], mine, meta["cpus"], meta["device"])
        last = max(mine, key=lambda r: r.get("t_end") or 0)
        missing = [p for p in ("tuner", "grid", "final", "ceiling") if not any(r["phase"] == p for r in mine)]
        per_round = Counter(r["round"] for r in mine if r["phase"] == "final")
        finalists = max(per_round.values(), default=0)
        short_rounds = [f"round {n} has {k} of {finalists} configs" for n, k in sorted(per_round.items())
                        if k < finalists]
        if len(per_round) == 1 and last["phase"] == "final":
            short_rounds.append("the number of finalists is unknown (killed in round 1)")
        where = f"{last['phase']}" + (f" round {last['round']}" if last.get("round") else "")
        bench.interrupted = (f"killed after its last record ({where})"
                             + (f"; no {', no '.join(missing)}" if missing else "")
                             + (f"; final {', '.join(short_rounds)}" if short_rounds else "")
                             + "; rebuilt from records.jsonl")
        summaries.append(bench.summary())
    # A workload killed during its preparation or its tuner wrote no record at all.
    killed = False
    for name in meta.get("workloads", []):
        if name not in by_workload and not any(entry.startswith(f"{name} (") for entry in meta["not_run"]):
            meta["not_run"].append(f"{name} (no record: killed before its tuner ended, or never begun)")
            killed = True
    meta["rebuilt_from"] = os.path.relpath(path, out)
    os.makedirs(out, exist_ok=True)
    return write_summary(out, summaries, meta, run_state(summaries, meta["not_run"], killed))


# --- main --------------------------------------------------------------------------------------

def gpu_device() -> tuple[str, tuple[str, ...]]:
    """cuda when NVML sees a GPU (as the tuner decides), never through torch.cuda here."""
    gpus = hardware.gpu_names()
    return ("cuda" if gpus else "cpu"), gpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="jpeg,small,large,startup,heavytail,gpubound",
                        help="comma-separated names from scripts/bench_workloads.py WORKLOADS")
    parser.add_argument("--out", default="results/benchmarks", help="folder for records.jsonl and summary.md")
    parser.add_argument("--scale", type=float, default=None,
                        help="AUTOLOADER_BENCH_SCALE for the workloads (default: the environment's, else 1.0)")
    parser.add_argument("--quick", action="store_true",
                        help="CPU smoke test: workers {0,1,2}, 1 round, short windows, tuner --budget 20")
    parser.add_argument("--sweep", default=None, metavar="N,N,...",
                        help=f"worker counts of the grid's sweep (default {','.join(map(str, SWEEP_WORKERS))}; "
                             f"quick {','.join(map(str, QUICK_SWEEP))})")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"rounds of the interleaved final (default {FINAL_ROUNDS}; quick 1)")
    parser.add_argument("--workload-seconds", type=float, default=None,
                        help="wall budget per workload; grid variants that do not fit are skipped "
                             "(default 210, quick 90)")
    parser.add_argument("--deadline-seconds", type=float, default=None,
                        help="wall time the whole run must end within (e.g. a device call's limit less a margin): "
                             "grid variants, final rounds and whole workloads that would not fit are left out "
                             "and the summary says so, instead of the run being killed")
    parser.add_argument("--rebuild", metavar="DIR", default=None,
                        help="write summary.md and results.json into --out from DIR/records.jsonl alone, for "
                             "a run killed before it could write them (a workload cut short is marked partial)")
    parser.add_argument("--merge", nargs="+", metavar="DIR", default=None,
                        help="write one summary into --out from the results.json of earlier runs' output "
                             "folders (their records stay there), measuring nothing")
    args = parser.parse_args(argv)
    t_begin = time.monotonic()  # a device call's limit started a little earlier (interpreter, imports)
    if args.rebuild:
        print(rebuild(os.path.abspath(args.rebuild), os.path.abspath(args.out)))
        return 0
    if args.merge:
        print(merge([os.path.abspath(p) for p in args.merge], os.path.abspath(args.out)))
        return 0

    out = os.path.abspath(args.out)  # before chdir: relative to where the command was given
    os.makedirs(out, exist_ok=True)
    os.chdir(REPO)  # the workload specs are "scripts/bench_workloads.py:..." relative to the root
    if args.scale is not None:
        if not args.scale > 0:
            parser.error("--scale must be > 0")
        os.environ["AUTOLOADER_BENCH_SCALE"] = repr(args.scale)
    scale = os.environ.setdefault("AUTOLOADER_BENCH_SCALE", "1.0")

    from bench_workloads import WORKLOADS

    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")

    if args.quick:
        mode = Mode(QUICK_SWEEP, QUICK_GRID, QUICK_FINAL, 1, QUICK_CEILING, QUICK_TUNER_BUDGET,
                    args.workload_seconds or 90.0, 6.0)
    else:
        mode = Mode(SWEEP_WORKERS, GRID_SETTINGS, FINAL_SETTINGS, FINAL_ROUNDS, CEILING, None,
                    args.workload_seconds or 210.0, 12.0)

    if args.sweep:
        try:
            mode.sweep = tuple(sorted({int(n) for n in args.sweep.split(",") if n.strip()}))
        except ValueError:
            parser.error("--sweep takes comma-separated worker counts, e.g. 0,2,4,8")
        if not mode.sweep or min(mode.sweep) < 0:
            parser.error("--sweep needs worker counts >= 0")
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be 1 or more")
        mode.rounds = args.rounds
    if args.deadline_seconds is not None:
        if not args.deadline_seconds > 0:
            parser.error(f"--deadline-seconds must be > 0, got {args.deadline_seconds}; "
                         "pass the device call's limit less a margin, e.g. 570")
        mode.deadline = t_begin + args.deadline_seconds

    device, gpus = gpu_device()
    machine = hardware.detect()
    import psutil

    machine_ram = psutil.virtual_memory().total
    cpus = hardware.usable_cpus()
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")

    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "absent"

    script = os.path.relpath(os.path.abspath(__file__), REPO)
    meta = {
        "command": " ".join([f"AUTOLOADER_BENCH_SCALE={scale}", "python3"]
                            + [shlex.quote(a) for a in [script] + (sys.argv[1:] if argv is None else list(argv))]),
        "date": utc_now(), "run_id": run_id, "gpu": gpus[0] if gpus else None, "gpus": list(gpus),
        "cpus": cpus, "cpu_model": machine.cpu_model,
        "ram_gib": round(machine_ram / 2**30, 1), "device": device, "python": platform.python_version(),
        "torch": version("torch"), "torchvision": version("torchvision"), "optuna": version("optuna"),
        "scale": scale, "mode": "quick" if args.quick else "full", "workload_seconds": mode.workload_seconds,
        "workloads": names,
        "method": METHOD.format(
            sweep="{" + ", ".join(map(str, mode.sweep)) + "}", rounds=mode.rounds,
            tuner_budget=f"--budget {mode.tuner_budget:.0f}" if mode.tuner_budget else "its default budget",
            grid_win=f"{mode.grid.min_window_s:g}-{mode.grid.max_window_s:g} s",
            grid_target=f"{mode.grid.target_rel_interval * 100:g}%",
            final_win=f"{mode.final.min_window_s:g}-{mode.final.max_window_s:g} s"),
    }
    log(f"bench {run_id}: {', '.join(names)} on {meta['gpu'] or 'CPU'}, {cpus} CPUs, {meta['ram_gib']} GiB, "
        f"scale {scale}, {meta['mode']} mode, {mode.workload_seconds:.0f} s a workload -> {out}")

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    records = Records(os.path.join(out, "records.jsonl"), run_id)
    records.write(workload=None, phase="meta", round=None, meta=meta)
    summaries: list[dict] = []
    interrupted = False
    t_all = time.monotonic()
    for name in names:
        # The least a workload needs to give a result: the tuner, then preparation, set-up, the
        # sweep, one final round and the ceiling (jpeg on the H200: 13 + 16 + 55 + 41 + 8 s, run-2363961).
        floor = 1.1 * (mode.tuner_budget or 120.0) + (30.0 if args.quick else 140.0)
        if mode.seconds_left() < floor:
            reason = (f"not begun: {max(0.0, mode.seconds_left()):.0f} s were left of --deadline-seconds, "
                      f"a workload needs about {floor:.0f} s")
            log(f"[{name}] {reason}")
            records.write(workload=name, phase="skipped", round=None, reason=reason)
            meta.setdefault("not_run", []).append(f"{name} ({reason})")
            continue
        bench = Workload(WORKLOADS[name], mode, records, out, device, cpus)
        try:
            bench.run()
        except Interrupted as exc:
            interrupted = True
            log(f"[{name}] interrupted by {exc}; writing what was measured")
        summary = bench.summary()
        if bench.ceiling_facts and bench.ceiling_facts.get("gpu_name"):
            meta["gpu_torch"] = bench.ceiling_facts["gpu_name"]
            meta["torch_in_child"] = bench.ceiling_facts.get("torch")
        summaries.append(summary)
        records.write(workload=name, phase="summary", round=None, summary=summary)
        log(one_line(summary))
        write_summary(out, summaries, meta, "interrupted" if interrupted else "in progress")
        if interrupted:
            break
    meta["total_seconds"] = time.monotonic() - t_all
    body = write_summary(out, summaries, meta, run_state(summaries, meta.get("not_run", []), interrupted))
    records.close()
    # The short table at the very end, for the log.
    log("")
    log("```")
    log(meta["command"])
    log("```")
    log(table(summaries))
    log(f"\n(total {meta['total_seconds']:.0f} s; full report {os.path.join(out, 'summary.md')}, "
        f"{len(body)} chars)")
    return 1 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
