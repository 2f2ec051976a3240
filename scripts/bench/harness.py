"""One workload, measured: the tuner as a user runs it, the grid, the interleaved final and the
ceiling, in this order and in one process (NOTE [ The grid ] in plan.py for what they hold).

1. tuner   ``autoloader tune --json --quiet`` (tuner_run.py), timed; its pick and its own
           estimates are kept. Under --stability, two more fresh tunes follow.
2. grid    configs measured with long windows, fresh DataLoader each, through autoloader's own
           TrialRunner: the worker sweep, then variants at the sweep's best worker counts.
3. final   the grid's top few, the tuner's pick(s), num_workers=0 and the cpus-1 heuristic
           re-measured interleaved (A B C A B C ...), ``rounds`` runs each, same runner; the best
           median is the best of the round.
4. ceiling min(consumer on device-resident replayed batches, cores x one worker's rate), in a
           spawned child (ceiling.py), with the main process's pin and copy beside it.

A stability check alone (a --stability workload not in --workloads) runs the tunes and a final of
the picks only. Time: variants run only while what must still follow fits the workload budget;
tunes, variants, final rounds that the run's deadline cannot hold are not begun. The main process
never initialises CUDA: the runner and the ceiling child own it, the GPU is found through NVML
(NOTE [ No CUDA in the driver ] in autoloader/inputs/hardware.py).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

from autoloader.inputs import hardware
from autoloader.inputs.source import Source
from autoloader.probe.driver import TrialRunner
from autoloader.probe.protocol import RunnerSetup, SetupError
from autoloader.search.budget import measure_seconds
from autoloader.search.policy import BurstSettings
from autoloader.search.model_first import heuristic_config
from autoloader.search.results import OK, TrialResult
from autoloader.search.space import LoaderConfig, SearchSpace, search_space
from scripts.bench import figures, plan
from scripts.bench.ceiling import CeilingChild
from scripts.bench.common import fmt_rate, log, short
from scripts.bench.records import Records
from scripts.bench.tuner_run import Tuner, shown


class Interrupted(BaseException):
    """SIGTERM (the device's time limit) or Ctrl-C: stop measuring, keep what was measured."""


def on_signal(signum, frame):  # noqa: ARG001
    signal.signal(signum, signal.SIG_IGN)  # once: the clean-up that follows must not be cut short
    raise Interrupted(signal.Signals(signum).name)


def begin_run(out: str, run_id: str, meta: dict) -> Records:
    """A run's records, opened with its meta line, and SIGTERM/SIGINT turned into Interrupted so
    that the run can write what it finished before it ends."""
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    records = Records(os.path.join(out, "records.jsonl"), run_id)
    records.write(workload=None, phase="meta", round=None, meta=meta)
    return records


@dataclasses.dataclass
class Mode:
    sweep: tuple[int, ...]
    grid: BurstSettings
    final: BurstSettings
    rounds: int
    ceiling: dict
    tuner_budget: float | None          # passed to the tuner as --budget; None: its own default
    workload_seconds: float
    ceiling_estimate_s: float
    deadline: float | None = None       # time.monotonic() by which the whole run must have ended
    name: str = "full"                  # the grid profile: full, lean or quick
    variants: str = "full"              # which variants at the sweep's best: full or lean
    top_from_grid: int = 3
    budget_s: float = 120.0             # the tuner's budget in effect (--budget, else its default)
    floor_extra_s: float = 140.0        # the least a workload needs beyond its tuner

    def seconds_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def floor_s(self, tunes: int = 1) -> float:
        """The least a workload with ``tunes`` tuner runs needs to give a result."""
        return 1.1 * self.budget_s * tunes + self.floor_extra_s


class Workload:
    """Runs the phases of one workload and holds what they measured. ``tunes``: 1, or 3 for a
    stability check; ``grid=False``: the stability check alone (no grid, heuristic or ceiling)."""

    def __init__(self, w, mode: Mode | None, records: Records | None, out: str, device: str, cpus: int,
                 tunes: int = 1, grid: bool = True):
        self.w = w
        self.name = w.name
        self.bs = w.batch_size
        self.mode = mode
        self.records = records
        self.out = out
        self.device = device
        self.cuda = device.startswith("cuda")
        self.cpus = cpus
        self.tunes = tunes
        self.with_grid = grid
        self.t0 = time.monotonic()
        self.phase_s: dict[str, float] = {}
        self.tuner: dict | None = None
        self.tuner_error: str | None = None
        self.tuner_wall: float | None = None
        self.pick: LoaderConfig | None = None
        # The stability check's tunes, the first included: {"index", "pick", "wall_s", "error", "tuner"}.
        self.stability_runs: list[dict] = []
        self.stability_note: str | None = None
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
        self.estimate_s: float | None = None
        self.estimate_after_grid_s: float | None = None
        self._tuner = Tuner()
        self._ceiling: CeilingChild | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    # phase 0: build the dataset once in this process so one-time data generation (the jpeg
    # workload writes its JPEGs on first use) is not charged to the tuner. No CUDA: datasets only.
    def prepare(self) -> None:
        from autoloader.inputs.source import load_spec, resolve_dataset

        t = time.monotonic()
        dataset = resolve_dataset(load_spec(self.w.dataset_spec), self.w.dataset_spec)
        self.length = len(dataset)
        del dataset
        self.phase_s["prepare"] = time.monotonic() - t

    # phase 1 ------------------------------------------------------------------------------------
    def run_tuners(self) -> None:
        t = time.monotonic()
        for index in range(1, self.tunes + 1):
            if index > 1:
                # The next tune, then what a result still needs (the sweep, one round, the ceiling).
                need = 1.1 * self.mode.budget_s + (self.mode.floor_extra_s if self.with_grid else 30.0)
                if need > self.mode.seconds_left():
                    self.stability_note = (f"tunes {index}-{self.tunes} not begun: {max(0.0, self.mode.seconds_left()):.0f} s "
                                           f"were left of --deadline-seconds, a tune and the rest needed about {need:.0f} s")
                    log(f"[{self.name}] {self.stability_note}")
                    break
            self._run_tuner(index)
        self.phase_s["tuner"] = time.monotonic() - t

    def _run_tuner(self, index: int) -> None:
        label = self.name if index == 1 else f"{self.name}-{index}"
        budget = self.mode.tuner_budget
        log(f"[{self.name}] tuner{'' if self.tunes == 1 else f' {index}/{self.tunes}'}: "
            f"autoloader.cli tune --dataset {self.w.dataset_spec} ... --batch-size {self.bs}"
            + (f" --budget {budget:g}" if budget is not None else " (its default budget)"))
        # Interrupted meanwhile, the tune is lost (close() kills it); what came before is kept.
        outcome = self._tuner.run(self.w.dataset_spec, self.w.step_spec, self.bs, budget, self.mode.budget_s, label)
        outcome.keep_stderr(self.out, label)
        data, pick = outcome.data, outcome.pick
        if data is None:
            log(f"[{self.name}] tuner FAILED ({outcome.error})")
        else:
            result = outcome.result
            log(f"[{self.name}] tuner: {outcome.wall_s:.0f} s wall ({result.tune_seconds:.0f} s inside), "
                f"{len(result.trials)} trials, pick {short(pick)} at {fmt_rate(result.samples_per_s)}/s (its estimate)")
        if index == 1:
            self.tuner, self.tuner_error, self.tuner_wall, self.pick = data, outcome.error, outcome.wall_s, pick
        if self.tunes > 1:
            self.stability_runs.append({"index": index, "pick": pick, "wall_s": outcome.wall_s,
                                        "error": outcome.error, "tuner": data})
        self.records.write(workload=self.name, phase="tuner" if index == 1 else "stability_tuner",
                           round=None, index=index, config=data["config"] if data else None,
                           t_start=outcome.t_start, t_end=outcome.t_end, wall_s=outcome.wall_s,
                           returncode=outcome.returncode, error=outcome.error, tuner=data,
                           command=shown(outcome.command), **({"estimate_s": self.estimate_s} if index == 1 else {}))

    # set-up of phases 2-4: the trial runner and the ceiling child start side by side -----------
    def start(self) -> None:
        t = time.monotonic()
        setup = RunnerSetup(Source.from_spec(self.w.dataset_spec), Source.from_spec(self.w.step_spec),
                            self.device, {}, self.bs)
        if self.with_grid:
            self._ceiling = CeilingChild(self.w.dataset_spec, self.w.step_spec, self.bs, self.mode.ceiling,
                                         setup.worker_start_method)
        self.runner = TrialRunner(setup, max_memory=int(plan.MEMORY_SHARE * hardware.available_memory()),
                                  hang_timeout_s=plan.HANG_TIMEOUT_S)
        self.runner_info = self.runner.start()
        if self._ceiling is not None:
            kind, payload = self._ceiling.ready()
            if kind == "ready":
                self.ceiling_facts = payload
            else:
                self.ceiling_error = str(payload).strip().splitlines()[0][:300] if payload else "unknown"
                log(f"[{self.name}] ceiling set-up FAILED: {payload}")
                self._stop_ceiling()
        self.phase_s["setup"] = time.monotonic() - t

    def _stop_ceiling(self) -> None:
        if self._ceiling is not None:
            self._ceiling.stop()
            self._ceiling = None

    # phase 2 ------------------------------------------------------------------------------------
    def _measure(self, phase: str, round_: int | None, config: LoaderConfig, settings: BurstSettings,
                 **extra) -> TrialResult:
        t_start = time.time()
        result = self.runner.measure(config, settings)
        self.records.trial(self.name, phase, round_, result, t_start, time.time(), **extra)
        where = f"{phase:5s}{'' if round_ is None else ' r' + str(round_)} {short(config):22s}"
        if result.status == OK:
            log(f"[{self.name}] {where} {result.samples_per_s:>10,.0f}/s ±{(result.rel_interval or 0) * 100:4.1f}% "
                f"{result.window_s:4.1f}s win {result.seconds:4.1f}s")
        else:
            log(f"[{self.name}] {where} {result.status}: {result.cause} {(result.error or '')[:80]}")
        return result

    def space(self) -> SearchSpace:
        """The tuner's space at this workload's batch size (pinning only offered on CUDA)."""
        return search_space((self.bs,), self.cpus, "cuda" if self.cuda else "cpu")

    def base(self, workers: int) -> LoaderConfig:
        """The sweep's config: the tuner's own worker-sweep default (DataLoader's prefetch, kept
        workers, pinning on CUDA)."""
        return self.space().default_config(workers)

    def heuristic(self) -> LoaderConfig:
        """The rule the tuner replaces, as the tuner's own final holds it."""
        return heuristic_config(self.space(), self.cpus)

    def _ok_grid(self) -> list[TrialResult]:
        return sorted((t for t in self.grid if t.status == OK and t.samples_per_s), key=lambda t: -t.samples_per_s)

    def _trial_estimate(self, config: LoaderConfig, settings: BurstSettings) -> float:
        """Seconds one trial of config takes under settings, from the trial nearest in workers
        (the grid's, then the final's: a stability check alone has only those)."""
        ok = [t for t in self.grid + [r for rs in self.final.values() for r in rs] if t.status == OK and t.seconds]
        if not ok:
            return 2.0 + settings.max_window_s
        near = min(ok, key=lambda t: (t.config != config, abs(t.config.num_workers - config.num_workers)))
        return measure_seconds(near, settings, config.num_workers)

    def picks(self) -> list[tuple[LoaderConfig, str]]:
        """The tuner's pick(s) and their roles: pick, then pick#2 and pick#3 of a stability check."""
        if self.tunes == 1:
            return [(self.pick, "pick")] if self.pick is not None else []
        return [(r["pick"], "pick" if r["index"] == 1 else f"pick#{r['index']}")
                for r in self.stability_runs if r["pick"] is not None]

    def final_candidates(self) -> list[tuple[LoaderConfig, str]]:
        if not self.with_grid:
            return self.picks()
        out = [(t.config, f"grid#{i + 1}") for i, t in enumerate(self._ok_grid()[:self.mode.top_from_grid])]
        out += self.picks()
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
        # The sweep's best worker counts (two, or one for the lean grid), then one-at-a-time
        # variants there, in priority order.
        sweep_ok = [r for r in self._ok_grid() if r.config == self.base(r.config.num_workers)]
        best_counts: list[int] = []
        for r in sweep_ok:
            if r.config.num_workers not in best_counts:
                best_counts.append(r.config.num_workers)
        variants: list[LoaderConfig] = []
        seen = {r.config for r in self.grid}
        for workers in best_counts[:1 if self.mode.variants == "lean" else 2]:
            for config in plan.variant_options(self.mode, workers, self.cuda, self.base(workers)):
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
        if not order:
            log(f"[{self.name}] final: nothing to measure")
            return
        self.estimate_after_grid_s = (self.elapsed() + self.mode.rounds * self._round_estimate()
                                      + (self.mode.ceiling_estimate_s if self.with_grid else 0.0))
        log(f"[{self.name}] final: {len(order)} configs x {self.mode.rounds} rounds, interleaved "
            f"(done in about {self.estimate_after_grid_s - self.elapsed():.0f} s): "
            + "; ".join(f"{short(c)} ({'/'.join(self.final_roles[c])})" for c in order))
        for round_ in range(1, self.mode.rounds + 1):
            # A round the deadline cannot hold is not begun: fewer rounds, but a summary written,
            # rather than a run killed mid-round.
            need = self._round_estimate() + (self.mode.ceiling_estimate_s if self.with_grid else 0.0)
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
        if self._ceiling is None:
            return
        t = time.monotonic()
        t_start = time.time()
        kind, payload = self._ceiling.measure()
        if kind == "result":
            self.ceiling = c = payload
            main = f", main process's pin/copy {fmt_rate(c['main_samples_per_s'])}/s" if c.get("main_samples_per_s") else ""
            log(f"[{self.name}] ceiling {fmt_rate(c['ceiling_samples_per_s'])}/s ({c['bound']} bound): consumer "
                f"{fmt_rate(c['consumer_samples_per_s'])}/s, one worker {fmt_rate(c['one_worker_samples_per_s'])}/s "
                f"x {c['cores']} cores{main}")
        else:
            self.ceiling_error = str(payload).strip().splitlines()[0][:300] if payload else "unknown"
            log(f"[{self.name}] ceiling FAILED: {payload}")
        self.records.write(workload=self.name, phase="ceiling", round=None, config=None, t_start=t_start,
                           t_end=time.time(), ceiling=self.ceiling, facts=self.ceiling_facts, error=self.ceiling_error)
        self._stop_ceiling()
        self.phase_s["ceiling"] = time.monotonic() - t

    def close(self) -> None:
        self._tuner.kill()
        if self.runner is not None:
            self.runner.close()
        self._stop_ceiling()

    def run(self) -> None:
        log(f"[{self.name}] {self.w.description}")
        self.estimate_s = plan.estimate(self.mode, self.cpus, self.tunes, self.with_grid).total
        try:
            self.prepare()
            self.run_tuners()
            if not self.picks() and not self.with_grid:
                self.interrupted = "no tune gave a pick: nothing to compare"
                return
            self.start()
            if self.with_grid:
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

    def summary(self) -> dict:
        return figures.summarise(self)
