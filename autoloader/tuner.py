"""``tune()`` and ``best_loader()``: the public entry points over the search, probe and store.

Data flows one way: space -> strategy -> probe (runner, guard) -> results -> knee -> config ->
store. Only ``report`` prints; progress reaches it through the ``progress`` callback.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import hardware
from .changes import Comparison, compare, previous_result
from .config import TunedConfig
from .errors import AutoloaderError, NoFeasibleConfig, UsageError, usage
from .knee import Knee, find_knee
from .knee_first import KneeFirst, best_of
from .probe.burst import BurstSettings, expected_window_s
from .probe.guard import predict_peak
from .probe.driver import RunnerSetup, SetupError, TrialRunner
from .results import CONSTRAINT, OK, TrialResult, keeps_up_at
from .source import Source
from .space import MAX_WORKERS_PER_CPU, TUNED_SETTINGS, LoaderConfig, SearchSpace
from .store import Limits, StudyStore, atomic_write, dataset_key, read_json

DEFAULT_BATCH_SIZE = 128
DEFAULT_BUDGET_S = 120.0
DEFAULT_TRIAL_TIMEOUT_S = 60.0
MIN_BUDGET_S = 10.0
# Share of available RAM the loader's processes may use when --max-memory is not given.
DEFAULT_MEMORY_SHARE = 0.6
# Below this no trial fits (the trial process alone is 0.4-0.6 GB); "16" meant as 16G is 16 bytes.
MIN_MAX_MEMORY = 256 * 2**20
FINAL_ROUNDS = 3
MAX_FINALISTS = 4
# In the interleaved final, a config within this share of the best median is a tie and the
# cheaper config wins (BENCHMARK.md: a tie goes to fewer workers, less memory, no pinning).
FINAL_TIE = 0.02
# A config that keeps up ties a best up to this share ahead: NOTE [ Keeping up ]. On gpubound the
# medians of such configs lay 3-6% apart in one final, in no order from run to run.
KEEPS_UP_TIE = 0.05
# Windows of at least 3 worker cycles in the search and 4 in the final: NOTE [ Honest burst ].
SEARCH_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=4.0, min_cycles=3.0)
# A search trial stops early once clearly below this share of the best rate so far.
PRUNE_SHARE = 0.75
FINAL_SETTINGS = BurstSettings(min_window_s=1.0, max_window_s=3.0, min_cycles=4.0)
# Up to half the budget for the final: two rounds of three slow finalists (7-10 s each on the H200,
# more now that a final window holds 4 worker cycles) need it.
FINAL_RESERVE_SHARE = 0.5
FINALIST_SHARE = 0.9

Progress = Callable[[str, dict], None]


@dataclass(frozen=True)
class FinalRound:
    """The interleaved re-measurement of the finalists (same process, A B C A B C ...)."""

    config: LoaderConfig
    rates: tuple[float, ...]
    waits: tuple[float, ...] = ()   # the consumer's wait fraction in each round

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def keeps_up(self) -> bool:
        """The consumer's median wait in the rounds is at most KEEPS_UP_WAIT: NOTE [ Keeping up ]."""
        return bool(self.waits) and keeps_up_at(statistics.median(self.waits))

    @property
    def spread(self) -> float:
        return (max(self.rates) - min(self.rates)) / self.median if len(self.rates) > 1 and self.median else 0.0


@dataclass(frozen=True)
class TuneResult:
    """What ``tune()`` returns: the pick, every trial, the final round and where it was saved."""

    tuned: TunedConfig
    trials: tuple[TrialResult, ...]
    finals: tuple[FinalRound, ...]
    path: str
    snippet_path: str
    storage: str
    tune_seconds: float
    resumed_trials: int
    orphans: int
    shm_leaks: int = 0
    since: Comparison | None = None   # against the previous result for this problem, if any

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

    def faults(self) -> dict[str, int]:
        """Failed or infeasible trials by cause."""
        return dict(Counter(t.cause for t in self.trials if t.status != OK))

    def to_dict(self) -> dict:
        return {**self.tuned.to_dict(), "path": self.path, "snippet_path": self.snippet_path,
                "storage": self.storage, "tune_seconds": self.tune_seconds,
                "resumed_trials": self.resumed_trials, "orphans": self.orphans, "shm_leaks": self.shm_leaks,
                "faults": self.faults(), "since": self.since.to_dict() if self.since else None,
                "trials": [t.to_dict() for t in self.trials],
                "finals": [{"config": f.config.loader_kwargs(), "rates": list(f.rates), "median": f.median,
                            "waits": list(f.waits)} for f in self.finals]}


def _rate_here(config: LoaderConfig, finals: Sequence[FinalRound], history: Sequence[TrialResult]) -> float | None:
    """``config``'s rate in this run: its final median, else its best burst; None if not measured."""
    final = next((f.median for f in finals if f.config == config), None)
    if final:
        return final
    bursts = [t.samples_per_s for t in history if t.config == config and t.status == OK and t.samples_per_s]
    return max(bursts) if bursts else None


def search_space(batch_sizes: Sequence[int], cpus: int, device: str) -> SearchSpace:
    """What a tuning run may vary on this machine: workers up to MAX_WORKERS_PER_CPU per CPU, and
    pinning both ways on CUDA (it only matters there)."""
    return SearchSpace(batch_sizes=tuple(batch_sizes), max_workers=MAX_WORKERS_PER_CPU * cpus,
                       pin_choices=(True, False) if device.startswith("cuda") else (False,))


def _resolve_device(device: str | None, gpus: Sequence[str]) -> str:
    if device is None:
        return "cuda" if gpus else "cpu"
    if device not in ("cuda", "cpu") and not device.startswith("cuda:"):
        raise usage("--device is cuda or cpu", device, "pass --device cuda or --device cpu")
    if device.startswith("cuda") and not gpus:
        raise usage("--device cuda needs an NVIDIA GPU with its driver", "no GPU found by NVML",
                    "pass --device cpu, or run where a GPU is visible (check nvidia-smi)")
    if device.startswith("cuda:"):
        index = device[len("cuda:"):]
        if not index.isdigit() or int(index) >= len(gpus):
            raise usage(f"device cuda:N names one of this machine's {len(gpus)} GPU(s), N from 0 to {len(gpus) - 1}",
                        device, "pass device='cuda' (the first GPU) or a cuda:N that exists (see nvidia-smi)")
    return device


def _batch_sizes(batch_size: int | None, batch_sizes: Sequence[int] | None) -> tuple[int, ...]:
    if batch_size is not None and batch_sizes:
        raise usage("give --batch-size or --batch-sizes, not both", (batch_size, batch_sizes),
                    "drop one of them")
    sizes = tuple(batch_sizes) if batch_sizes else (DEFAULT_BATCH_SIZE if batch_size is None else batch_size,)
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise usage("the batch size must be a positive integer", size, "pass --batch-size 1 or more, e.g. 128")
    return tuple(sorted(set(sizes)))


def _source(obj: Any, what: str) -> Source:
    if isinstance(obj, str):
        return Source.from_spec(obj)
    return Source.from_object(obj, what)


class _Tuning:
    """One tuning run: owns the runner, the study and the clock. ``tune()`` wraps it."""

    def __init__(self, dataset, step, batch_sizes, budget, max_memory, device, out, storage, progress,
                 trial_timeout, fixed_kwargs):
        self.t0 = time.monotonic()
        self.budget = float(budget)
        if isinstance(trial_timeout, bool) or not isinstance(trial_timeout, (int, float)) or not trial_timeout > 0:
            raise usage("the trial timeout must be a positive number of seconds", trial_timeout,
                        "pass e.g. trial_timeout=60 (--trial-timeout 60)")
        if not math.isfinite(self.budget) or self.budget < MIN_BUDGET_S:
            raise usage(f"the budget must leave time for at least one trial ({MIN_BUDGET_S:.0f} s or more)",
                        budget, "pass --budget 60 or more (the default is 120)")
        self.hardware = hardware.detect()
        self.device = _resolve_device(device, self.hardware.gpus)
        self.space = search_space(batch_sizes, self.hardware.cpus, self.device)
        self.max_memory = (hardware.parse_size(max_memory) if max_memory is not None
                           else int(DEFAULT_MEMORY_SHARE * hardware.available_memory()))
        if self.max_memory < MIN_MAX_MEMORY and max_memory is not None:
            raise usage(f"the memory ceiling must hold the trial process and its batches, so "
                        f"{MIN_MAX_MEMORY // 2**20} MiB or more (a number without a unit counts bytes)",
                        max_memory, "write the unit, e.g. --max-memory 16G (max_memory='16G')")
        elif self.max_memory < MIN_MAX_MEMORY:
            raise usage(f"the default memory ceiling, {DEFAULT_MEMORY_SHARE:.0%} of the RAM available now, must be "
                        f"{MIN_MAX_MEMORY // 2**20} MiB or more to hold the trial process and its batches",
                        f"{self.max_memory / 2**20:.0f} MiB", "free memory, or pass --max-memory (e.g. 2G)")
        if os.path.exists(out) and not os.path.isdir(out):
            raise usage("--out is the folder results are written to", out,
                        "pass a folder (it is made if missing), not a file")
        self.limits = Limits(self.max_memory, float(trial_timeout))
        self.fixed_kwargs = dict(fixed_kwargs or {})
        for key in TUNED_SETTINGS:
            if key in self.fixed_kwargs:
                raise usage(f"{key} is what autoloader tunes, so it cannot be fixed", key,
                            "drop it (use batch_size=/--batch-size for the batch size)")
        self.dataset_source = _source(dataset, "dataset")
        self.step_source = _source(step, "step") if step is not None else None
        Source.from_object(self.fixed_kwargs, "DataLoader arguments")  # picklable, or a clear error
        self.out = out
        self.storage = storage
        self.progress = progress or (lambda event, data: None)
        self.runner = TrialRunner(RunnerSetup(self.dataset_source, self.step_source, self.device,
                                              self.fixed_kwargs, batch_sizes[0]),
                                  max_memory=self.max_memory, hang_timeout_s=trial_timeout)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> TuneResult:
        try:
            try:
                info = self.runner.start()
            except SetupError as exc:
                raise (UsageError(str(exc)) if exc.usage else AutoloaderError(str(exc))) from None
            self._check_shm(info)
            key = dataset_key(self.dataset_source.name, info.length, self.space.batch_sizes,
                              self.step_source.name if self.step_source else None, self.device, self.fixed_kwargs)
            folder = os.path.join(self.out, self.hardware.fingerprint)
            url = self.storage or f"sqlite:///{os.path.abspath(os.path.join(folder, key + '.db'))}"
            store = StudyStore(url, key, self.space)
            history, retried = store.history(self.limits)
            resumed = len(history)
            strategy = KneeFirst(self.space, self.hardware.cpus)
            self.progress("start", {"key": key, "info": info, "resumed": resumed, "retried": retried, "stale": store.stale_repaired,
                                    "device": self.device, "cpus": self.hardware.cpus, "budget": self.budget,
                                    "max_memory": self.max_memory, "storage": url})
            self._search(strategy, store, history, info)
            finals = self._finals(history)
            pick = _choose(finals, history)
            # The knee from the best figures there are: a finalist's final median replaces its burst.
            medians = {f.config: f.median for f in finals}
            knee_curve = strategy.curve([dataclasses.replace(t, samples_per_s=medians.get(t.config, t.samples_per_s))
                                         for t in history])
            knee = find_knee(knee_curve) if knee_curve else None
            final_of_pick = next((f for f in finals if f.config == pick.config), None)
            # The baseline in the same protocol as the pick: the final round's when it was there.
            baseline = next((f.median for f in finals if f.config.num_workers == 0), None) or next(
                (t.samples_per_s for t in history if t.status == OK and t.config.num_workers == 0), None)
            tuned = TunedConfig(config=pick.config,
                                samples_per_s=final_of_pick.median if final_of_pick else pick.samples_per_s,
                                rel_interval=pick.rel_interval, baseline_samples_per_s=baseline, knee=knee,
                                hardware=self.hardware.to_dict(), dataset_key=key, device=self.device)
            path = os.path.join(folder, key + ".json")
            snippet_path = os.path.join(folder, key + ".py")
            previous = previous_result(self.out, self.hardware.fingerprint, key)  # before it is replaced
            result = TuneResult(tuned, tuple(history), tuple(finals), path, snippet_path, url,
                                self.elapsed(), resumed, self.runner.orphans, self.runner.shm_leaks,
                                since=compare(previous[1], tuned, previous[0],
                                              _rate_here(previous[1].config, finals, history)) if previous else None)
            atomic_write(snippet_path, tuned.snippet())
            atomic_write(path, _json(result.to_dict()))
            self.progress("done", {"result": result})
            return result
        finally:
            self.runner.close()

    def _check_shm(self, info) -> None:
        free = hardware.shm_free()
        need = info.sample_bytes * min(self.space.batch_sizes)
        if free is not None and free < need:
            raise usage("/dev/shm must hold at least one batch, since DataLoader workers pass batches through it",
                        f"{free / 2**20:.1f} MiB free, one batch is {need / 2**20:.1f} MiB",
                        "raise the shared-memory size (docker run --shm-size=8g, or a larger /dev/shm "
                        "mount), or use a smaller --batch-size")

    def _predicted_breach(self, config: LoaderConfig, info, history) -> str | None:
        host, shm = predict_peak(config, info.runner_uss, info.runner_pss, info.sample_bytes, history)
        if host > self.max_memory:
            return f"predicted {host / 2**30:.2f} GiB host memory > {self.max_memory / 2**30:.2f} GiB ceiling"
        free = hardware.shm_free()
        if free is not None and config.num_workers and shm > free:
            return f"predicted {shm / 2**30:.2f} GiB in /dev/shm > {free / 2**30:.2f} GiB free"
        return None

    def _trial_seconds(self, history: Sequence[TrialResult]) -> float:
        spent = [t.seconds for t in history if t.seconds]
        return statistics.median(spent) if spent else 6.0

    def _final_measure_seconds(self, config: LoaderConfig, history) -> float:
        """One final measurement of ``config``, from its search trial: the same start-up and skip,
        and a window of FINAL_SETTINGS' cap or, when batches are slow, the min_cycles x num_workers
        batches the burst waits for (at most its hard cap of 3x). See NOTE [ Honest burst ]."""
        trial = next((t for t in history if t.config == config and t.status == OK and t.seconds), None)
        if trial is None:
            return max(1.5, min(self._trial_seconds(history), FINAL_SETTINGS.max_window_s + 2.0))
        overhead = max(0.3, trial.seconds - trial.window_s)
        per_batch = trial.window_s / trial.batches if trial.batches else 0.0
        return overhead + expected_window_s(FINAL_SETTINGS, config.num_workers, per_batch)

    def _round_seconds(self, finalists: Sequence[LoaderConfig], history) -> float:
        return sum(self._final_measure_seconds(c, history) for c in finalists)

    def _finals_reserve(self, history) -> float:
        """Time kept back for the final round, at most FINAL_RESERVE_SHARE of the budget."""
        finalists = _finalists(history)
        if len(finalists) < 2:
            return 0.0
        return min(FINAL_ROUNDS * self._round_seconds(finalists, history), FINAL_RESERVE_SHARE * self.budget)

    def _search(self, strategy: KneeFirst, store: StudyStore, history: list[TrialResult], info) -> None:
        while True:
            left = self.budget - self.elapsed() - self._finals_reserve(history)
            if left < self._trial_seconds(history) and any(t.status == OK for t in history):
                break
            config = strategy.propose(history)
            if config is None:
                break
            trial = store.begin(config, self.limits)
            breach = self._predicted_breach(config, info, history)
            if breach is not None:
                result = TrialResult(config, CONSTRAINT, cause="predicted_memory", error=breach)
            else:
                best = best_of(history, tolerance=0.0)
                settings = dataclasses.replace(
                    SEARCH_SETTINGS, prune_below=best.samples_per_s * PRUNE_SHARE if best else None)
                result = self.runner.measure(config, settings)
            store.finish(trial, result)
            history.append(result)
            best = best_of(history)
            self.progress("trial", {"n": len(history), "expected": max(len(history), strategy.expected_trials()),
                                    "result": result, "best": best, "elapsed": self.elapsed()})
            if self.elapsed() > self.budget and any(t.status == OK for t in history):
                break
        if not any(t.status == OK for t in history):
            causes = Counter(t.describe_failure() for t in history)
            listing = "; ".join(f"{n}x {c}" for c, n in causes.most_common(5))
            raise NoFeasibleConfig(f"no config ran: every trial failed or broke a limit ({listing or 'none ran'}). "
                                   "Fix: what broke is named above; fix the dataset or step if they raised, "
                                   "or raise --max-memory, --trial-timeout or --budget if a limit stopped them")

    def _finals(self, history: Sequence[TrialResult]) -> list[FinalRound]:
        finalists = _finalists(history)
        if len(finalists) < 2:
            return []
        # As many rounds as the budget has left, up to FINAL_ROUNDS. When not even one fits (slow
        # finalists on a small budget), the top two by burst alone: a pick still needs a final,
        # and two measurements overrun the budget least.
        left = self.budget - self.elapsed()
        per_round = self._round_seconds(finalists, history)
        if per_round > left and len(finalists) > 2:
            finalists = finalists[:2]
            per_round = self._round_seconds(finalists, history)
        rounds = max(1, min(FINAL_ROUNDS, int(left / per_round)))
        rates: dict[LoaderConfig, list[float]] = {c: [] for c in finalists}
        waits: dict[LoaderConfig, list[float]] = {c: [] for c in finalists}
        for round_index in range(rounds):
            for config in finalists:
                measured = self.runner.measure(config, FINAL_SETTINGS)
                if measured.status == OK:
                    rates[config].append(measured.samples_per_s)
                    if measured.wait_fraction is not None:
                        waits[config].append(measured.wait_fraction)
            self.progress("final", {"round": round_index + 1, "rounds": rounds,
                                    "rates": {c.key: list(r) for c, r in rates.items()}})
        return [FinalRound(c, tuple(r), tuple(waits[c])) for c, r in rates.items() if r]


def _finalists(history: Sequence[TrialResult]) -> list[LoaderConfig]:
    """The top two by burst rate; the cheapest config that keeps up, of the best's kind
    (NOTE [ Keeping up ]), and the cheapest within 5% of the best, so a tie can go to either;
    then the third by burst rate, while there is room. None but the top two far behind the best
    (noise does not reach FINALIST_SHARE)."""
    ok = sorted((t for t in history if t.status == OK and t.samples_per_s),
                key=lambda t: -t.samples_per_s)
    if not ok:
        return []
    floor = ok[0].samples_per_s * FINALIST_SHARE
    # Always the top two: a lucky burst must face at least one rival in the final.
    finalists = [t.config for t in ok[:2]]
    keeping = [t for t in ok if t.keeps_up and t.samples_per_s >= floor and _same_kind(t.config, ok[0].config)]
    extras = [min(keeping, key=lambda t: t.config.cost(), default=None), best_of(history, tolerance=0.05),
              ok[2] if len(ok) > 2 and ok[2].samples_per_s >= floor else None]
    for extra in extras:
        if extra is not None and extra.config not in finalists:
            finalists.append(extra.config)
    return finalists[:MAX_FINALISTS]


def _choose(finals: Sequence[FinalRound], history: Sequence[TrialResult]) -> TrialResult:
    """The cheapest finalist that ties the best median: within FINAL_TIE, or within
    KEEPS_UP_TIE when both keep up and are of one kind (NOTE [ Keeping up ])."""
    by_config = {t.config: t for t in history if t.status == OK}
    if not finals:
        return best_of(history)
    best = max(finals, key=lambda f: f.median)

    def ties(final: FinalRound) -> bool:
        if final.median >= best.median * (1.0 - FINAL_TIE):
            return True
        # Both keep up: only then is the gap the consumer's noise, not a loader that lags.
        return (final.keeps_up and best.keeps_up and _same_kind(final.config, best.config)
                and final.median >= best.median * (1.0 - KEEPS_UP_TIE))

    chosen = min((f for f in finals if ties(f)), key=lambda f: f.config.cost())
    return by_config[chosen.config]


def _same_kind(a: LoaderConfig, b: LoaderConfig) -> bool:
    """Equal in what changes the step's work or the epoch restarts, so that only loader capacity
    (workers, prefetch depth) tells them apart: NOTE [ Keeping up ]."""
    return (a.batch_size, a.pin_memory, a.persistent_workers) == (b.batch_size, b.pin_memory, b.persistent_workers)


def _json(data: dict) -> str:
    import json

    return json.dumps(data, indent=2, default=str) + "\n"


def tune(dataset: Any, *, step: Any = None, batch_size: int | None = None,
         batch_sizes: Sequence[int] | None = None, budget: float = DEFAULT_BUDGET_S,
         max_memory: int | str | None = None, device: str | None = None, out: str = "results",
         storage: str | None = None, progress: Progress | None = None, trial_timeout: float = DEFAULT_TRIAL_TIMEOUT_S,
         **fixed_loader_kwargs) -> TuneResult:
    """Measure DataLoader configs for ``dataset`` and return the fastest (ties to the cheapest).

    ``dataset``: a Dataset, a zero-argument callable returning one, or a ``"MODULE:ATTR"`` spec.
    ``step``: optional ``step(batch)`` (or a zero-argument factory of one, or a spec); without it
    each batch is moved to the device. Other keyword arguments (``collate_fn``, ``shuffle``, ...)
    are passed to every DataLoader as they are.
    """
    sizes = _batch_sizes(batch_size, batch_sizes)
    return _Tuning(dataset, step, sizes, budget, max_memory, device, out, storage, progress,
                   trial_timeout, fixed_loader_kwargs).run()


def _dataset_object(dataset: Any) -> Any:
    """The Dataset a ``best_loader`` argument stands for: itself, a factory's result, or a spec's."""
    from .source import load_spec, resolve_dataset

    if isinstance(dataset, str):
        return resolve_dataset(load_spec(dataset), dataset)
    return resolve_dataset(dataset, getattr(dataset, "__name__", type(dataset).__name__))


def stored_result(dataset: Any, *, step: Any = None, batch_size: int | None = None,
                  batch_sizes: Sequence[int] | None = None, device: str | None = None, out: str = "results",
                  **fixed_loader_kwargs) -> TunedConfig | None:
    """The stored tuned config for this dataset on this machine, if one exists. ``dataset`` and
    the other arguments are what was given to ``tune()``: a Dataset, a factory, or a
    ``MODULE:ATTR`` spec."""
    sizes = _batch_sizes(batch_size, batch_sizes)
    return _stored(dataset, _dataset_object(dataset), step, sizes, device, out, fixed_loader_kwargs)


def _stored(dataset: Any, dataset_obj: Any, step: Any, batch_sizes: tuple[int, ...], device: str | None,
            out: str, fixed_loader_kwargs: dict) -> TunedConfig | None:
    """``stored_result`` for a dataset already built (building one can be the slow part)."""
    hw = hardware.detect()
    device = _resolve_device(device, hw.gpus)
    source = _source(dataset, "dataset")
    step_source = _source(step, "step") if step is not None else None
    try:
        length = len(dataset_obj)
    except TypeError:  # an IterableDataset has no length to key on
        length = None
    key = dataset_key(source.name, length, batch_sizes, step_source.name if step_source else None,
                      device, fixed_loader_kwargs)
    data = read_json(os.path.join(out, hw.fingerprint, key + ".json"))
    return TunedConfig.from_dict(data) if data else None


def best_loader(dataset: Any, batch_size: int | None = None, step: Any = None,
                budget: float = DEFAULT_BUDGET_S, *, batch_sizes: Sequence[int] | None = None,
                device: str | None = None, out: str = "results", max_memory: int | str | None = None,
                storage: str | None = None, trial_timeout: float = DEFAULT_TRIAL_TIMEOUT_S, progress: Progress | None = None,
                generator=None, **fixed_loader_kwargs):
    """A ready DataLoader for ``dataset`` (a Dataset, a factory of one, or a ``MODULE:ATTR`` spec)
    with the tuned settings, tuning first unless a stored result for this hardware and dataset
    exists. The named arguments are ``tune()``'s (``batch_sizes`` lets the tuner pick the batch
    size too); ``fixed_loader_kwargs`` go to the DataLoader (and to every trial) unchanged.
    Trials shuffle unless told otherwise, and so does the returned loader.

    A stored result is found by the dataset's name (its spec, or its class's module and name),
    its length, the step, the batch sizes, the device and ``fixed_loader_kwargs``. Two datasets
    of one class and length (say, other transforms) share it: give each its own ``out``."""
    from torch.utils.data import DataLoader, IterableDataset

    sizes = _batch_sizes(batch_size, batch_sizes)
    dataset_obj = _dataset_object(dataset)  # once: for the key and for the loader returned
    tuned = _stored(dataset, dataset_obj, step, sizes, device, out, fixed_loader_kwargs)
    if tuned is None:
        tuned = tune(dataset, step=step, batch_sizes=sizes, budget=budget, device=device, out=out,
                     max_memory=max_memory, storage=storage, progress=progress, trial_timeout=trial_timeout,
                     **fixed_loader_kwargs).tuned
    kwargs = {**tuned.loader_kwargs(), **fixed_loader_kwargs}
    if not isinstance(dataset_obj, IterableDataset) and not {"sampler", "batch_sampler"} & kwargs.keys():
        kwargs.setdefault("shuffle", True)
    return DataLoader(dataset_obj, generator=generator, **kwargs)
