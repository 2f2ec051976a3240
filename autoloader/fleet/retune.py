"""``autoloader retune REGISTRY``: re-tune every dataset a registry lists and report the drift
(``markdown``: one table for the run, then a section per dataset).

Each dataset's key is read in a process of its own (NOTE [ A dataset's key is read in a process
of its own ]); its run starts from its previous result (``warm_plan``, store/history.py, NOTE
[ Warm start ] in search/model_first.py); the new result is kept in the dated history and its drift
judged (NOTE [ Drift ] in tuning/compare.py). One dataset failing does not stop the others. The
report is written dated (a name no other run's has, even one started in the same second) and as
``latest``; the folders are checked before anything is tuned, and a report that still cannot be
written is printed all the same.

Exit codes (``RetuneReport.exit_code``): 0 nothing drifted, 3 a dataset drifted (its 95% interval
wholly past a threshold), 5 one is inconclusive (a busy machine, or its interval across the band;
drift elsewhere wins), 1 one failed (wins over both), 4 the report could not be written (wins over
the rest); 2, a bad registry or folder, is a UsageError raised before anything runs.
"""

from __future__ import annotations

import json
import os
import signal
import warnings
from dataclasses import dataclass, field, fields

from ..api import built_problem
from ..errors import AutoloaderError, AutoloaderWarning, Inconclusive, NotSaved, clip, one_line
from ..events import Progress, Retuned, RetuneStarted, WarmStarted, subscriber
from ..events.lines import cpus, rate
from ..inputs import hardware
from ..inputs.home import resolve_out, writable
from ..inputs.source import resolve_dataset
from ..search.policy import SETTINGS_TIE, Thresholds
from ..search.settings import SETTINGS
from ..search.model_first import WarmStart, scaled
from ..store.durable import (
    atomic_write_all,
    is_disk_full,
    open_reader,
    write_failure,
    write_new,
)
from ..store.history import previous, record
from ..store.paths import held, result_path
from ..store.result import TuneResult
from ..store.storage import masked
from ..store.versions import MEASUREMENT_FORMAT, autoloader_version, now_iso
from ..tuning.compare import BASELINE, DRIFTED, INCONCLUSIVE, Comparison, compare
from ..tuning.progress import others_text
from ..tuning.run import Run
from .registry import Entry, Registry

OK_EXIT, FAILED_EXIT, DRIFTED_EXIT, UNWRITTEN_EXIT, INCONCLUSIVE_EXIT = 0, 1, 3, 4, 5
FAILED = "failed"


@dataclass(frozen=True)
class Outcome:
    """One dataset's re-tune."""
    name: str
    status: str                      # a comparison's status (tuning/compare.py) or FAILED
    key: str | None = None
    error: str | None = None
    result_path: str | None = None
    history_path: str | None = None
    warm_start: str | None = None    # where the run started from, in words
    pick: dict | None = None
    samples_per_s: float | None = None
    trials: int = 0
    early_stop: bool = False
    tune_seconds: float | None = None
    history_error: str | None = None   # why the result's dated copy could not be written
    report: str | None = None          # its page (explain/page.py), with --report
    drift: Comparison | None = None

    def to_dict(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "drift": self.drift.to_dict() if self.drift else None}


@dataclass(frozen=True)
class RetuneReport:
    registry: str
    started_at: str
    finished_at: str
    hardware: dict
    thresholds: Thresholds
    outcomes: tuple[Outcome, ...]
    out: str
    storage: str | None = None
    paths: dict = field(default_factory=dict)   # where the report itself was written
    write_error: str | None = None              # why it could not be (printed all the same)

    @property
    def exit_code(self) -> int:
        if self.write_error is not None:
            return UNWRITTEN_EXIT
        statuses = {o.status for o in self.outcomes}   # a failure wins over drift, drift over inconclusive
        return next((code for status, code in ((FAILED, FAILED_EXIT), (DRIFTED, DRIFTED_EXIT),
                                               (INCONCLUSIVE, INCONCLUSIVE_EXIT)) if status in statuses),
                    OK_EXIT)

    @property
    def verdict(self) -> str:
        return {OK_EXIT: "unchanged", FAILED_EXIT: "a dataset failed", DRIFTED_EXIT: "drifted",
                UNWRITTEN_EXIT: "the report could not be written",
                INCONCLUSIVE_EXIT: "inconclusive: a busy machine, or noise across a threshold"}[self.exit_code]

    def to_dict(self) -> dict:
        return {"registry": self.registry, "started_at": self.started_at, "finished_at": self.finished_at,
                "hardware": self.hardware, "autoloader_version": autoloader_version(),
                "measurement_format": MEASUREMENT_FORMAT, "thresholds": self.thresholds.to_dict(),
                "out": self.out, "storage": masked(self.storage) if self.storage else None,
                "verdict": self.verdict, "exit_code": self.exit_code,
                "datasets": [o.to_dict() for o in self.outcomes], "report": self.paths,
                "report_error": self.write_error}


def retune(registry: Registry, *, out: str | None = None, storage: str | None = None, reports: str | None = None,
           progress: Progress | None = None, pages: bool = False) -> RetuneReport:
    """Re-tune every dataset of ``registry``, each from where it left off (``warm_plan``), and
    write the report of what drifted; the options given here win over its [fleet] table. A
    dataset whose re-tune fails is a failed entry of the report, never the end of the others.

    Args:
        registry: the parsed registry (``fleet.registry.load``).
        out: where results are read and written (default: the registry's, else the results home).
        storage: an Optuna storage URL for the studies (default: the registry's, else SQLite files).
        reports: the folder the report is written to (default: ``OUT/retune/NAME``).
        progress: None (nothing), or a callable of one event (``autoloader.events``): each entry
            reports ``RetuneStarted``, ``WarmStarted``, its run's events and ``Retuned``. A
            callable of the old ``(event, data)`` form works, with a DeprecationWarning.
        pages: also write each dataset's report page beside its result (explain/page.py).

    Returns:
        The ``RetuneReport`` written (its ``exit_code``, ``verdict`` and per-dataset outcomes).

    Raises:
        UsageError: a folder is not writable, or the storage cannot be opened.
    """
    progress = subscriber(progress) or (lambda event: None)
    out = resolve_out(out or registry.fleet.get("out"))
    storage = storage or registry.fleet.get("storage")
    named = os.path.splitext(os.path.basename(registry.path))[0]
    folder = reports or registry.fleet.get("reports") or os.path.join(out, "retune", named)
    # Every folder and the storage checked before the first dataset is tuned: found bad after
    # the last one, they would cost the whole run's report.
    writable(out)
    writable(folder, "the reports folder (--reports, or [fleet] reports)", "--reports")
    if storage is not None:
        open_reader(storage, must_exist=False, read_only=False).engine.dispose()
    started = now_iso()
    outcomes = []
    for index, entry in enumerate(registry.entries):
        progress(RetuneStarted(index + 1, len(registry.entries), entry.name))
        outcomes.append(_one(entry, out, storage, registry.thresholds, progress, pages))
        progress(Retuned(outcomes[-1]))
    report = RetuneReport(registry.path, started, now_iso(), hardware.detect().to_dict(), registry.thresholds,
                          tuple(outcomes), out, storage)
    return write(report, folder)


# NOTE [ A dataset's key is read in a process of its own ]
# A dataset's key needs the dataset built and its length and first, middle and last samples read
# (NOTE [ Content fingerprint ] in inputs/content.py): the user's code, which may crash in native
# code, exit the process or hang. ``retune`` reads each key in a spawned child (``read_key``)
# bounded by the dataset's budget, so such a dataset is a FAILED entry naming its cause, the child
# ended, and the other datasets and the report go on. The run's budget starts once the key is
# read, so a dataset takes at most twice its budget. The child sends back the problem (the recipes
# a Run needs, not the dataset) and the warnings the build gave, which are warned here.
def _key_child(entry: Entry, conn) -> None:
    """In the child: build ``entry``'s dataset, read its key, send ("ok", problem, warnings) or
    ("failed", why, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            built = resolve_dataset(entry.dataset.load(), entry.dataset.name)
            answer = ("ok", built_problem(built, entry.dataset, step=entry.step, batch_sizes=entry.batch_sizes,
                                          device=entry.settings.get("device"), fixed_kwargs=entry.options,
                                          version=entry.version))
        except AutoloaderError as exc:
            answer = ("failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - the user's dataset raised while being built
            answer = ("failed", f"building the dataset raised {type(exc).__name__}: {exc}")
    said = [(w.category, str(w.message)) for w in caught if issubclass(w.category, Warning)]
    try:
        conn.send((*answer, said))
    except Exception as exc:  # noqa: BLE001 - a problem that cannot be pickled back
        conn.send(("failed", f"the dataset's recipe could not be sent back ({type(exc).__name__}: {exc})", said))
    conn.close()


def read_key(entry: Entry, within_s: float):
    """``entry``'s problem, its key read in a spawned child bounded by ``within_s`` seconds (NOTE
    [ A dataset's key is read in a process of its own ]); an AutoloaderError saying why not."""
    import multiprocessing as mp

    context = mp.get_context("spawn")
    mine, theirs = context.Pipe(duplex=False)
    child = context.Process(target=_key_child, args=(entry, theirs), name=f"autoloader-key-{entry.name}")
    child.start()
    theirs.close()
    try:
        if not mine.poll(within_s):   # true once it answered, or ended (then recv finds the pipe closed)
            raise AutoloaderError(f"{_READING} did not end within its budget of {within_s:g} s; it was stopped. "
                                "Fix: make the dataset build and read a sample faster, or raise its budget in "
                                "the registry")
        try:
            status, value, said = mine.recv()
        except EOFError:   # closed with no answer: the child ended
            child.join(5)
            raise AutoloaderError(_ended(child.exitcode)) from None
    finally:
        mine.close()
        if child.is_alive():
            child.kill()
        child.join(5)
    for category, message in said:
        warnings.warn(message, category, stacklevel=2)
    if status != "ok":
        raise AutoloaderError(value)
    return value


_READING = "reading the dataset's key (building it, its length and its first, middle and last samples)"


def _ended(code: int | None) -> str:
    """Why the child reading a key ended without an answer, from its exit code."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return (f"the process {_READING} was ended by {name}: a crash in the dataset's code or a library it calls. "
                "Fix: run the dataset alone (len(ds), ds[0], ds[len(ds) - 1]) to find it")
    return (f"the process {_READING} exited with code {code} before it was done: the dataset's code (or its "
            "module) ended the process (sys.exit or os._exit). Fix: let the dataset return, not exit, when it is "
            "built and read")


def _one(entry: Entry, out: str, storage: str | None, thresholds: Thresholds, progress, pages: bool = False) -> Outcome:
    try:
        options = entry.run_options(out, storage, thresholds)
        problem = read_key(entry, options.budget)
    except AutoloaderError as exc:
        return Outcome(entry.name, FAILED, error=str(exc))
    fingerprint, key = problem.hardware.fingerprint, problem.key
    path = result_path(out, fingerprint, key)
    with held(path[:-len(".json")] + ".lock"):
        warm = None
        try:
            # The run compares with the same previous result when it ends (tuning/compare.py).
            warm = warm_plan(previous(out, problem.hardware, key, storage, set_aside=True), problem)
            progress(WarmStarted(entry.name, key, warm))
            result = Run(problem, options, progress, warm_start=warm.start).run()
        except Exception as exc:  # noqa: BLE001 - reported per dataset; the others still run
            if isinstance(exc, NotSaved) and exc.result is not None:
                # Chosen but not stored: a failure of this dataset's re-tune, with its pick kept in the report.
                return _outcome(entry, exc.result, FAILED, warm, error=str(exc))
            # Inconclusive: nothing measured, for the machine's or the clock's reason (exit 5).
            status = INCONCLUSIVE if isinstance(exc, Inconclusive) else FAILED
            error = str(exc) if isinstance(exc, AutoloaderError) else f"{type(exc).__name__}: {exc}"
            return Outcome(entry.name, status, key=key, error=error, warm_start=warm and warm.describe())
    # Saved by the run: what follows is the report of it, and none of it can lose the pick.
    # The first result: a baseline, unless measured on a busy machine (then inconclusive, and no baseline).
    judged = result.since or compare(None, result, thresholds)
    page = None
    if pages:
        from ..explain.page import write_report

        try:
            written = write_report(result.path, result)
            page = written.html if written.html in written.written else None
            for problem in written.failed:
                warnings.warn(AutoloaderWarning(f"{entry.name}: {problem}"), stacklevel=2)
        except Exception as exc:  # noqa: BLE001 - the result stands; only its page is missing
            warnings.warn(AutoloaderWarning(f"{entry.name}: its report page was not written "
                                            f"({type(exc).__name__}: {one_line(exc)})"), stacklevel=2)
    kept = unkept = None
    try:
        kept = record(out, fingerprint, key, result)
    except OSError as exc:   # the result is stored; its dated copy is not, and the report says so
        unkept = write_failure("the result's dated copy", os.path.dirname(path), exc)
    return _outcome(entry, result, judged.status, warm, history_path=kept, history_error=unkept, report=page,
                    judged=judged)


def _outcome(entry: Entry, result, status: str, warm, error: str | None = None, judged=None, **kept) -> Outcome:
    judged = judged or result.since or Comparison(BASELINE)
    return Outcome(entry.name, status, key=result.tuned.dataset_key, drift=judged, error=error,
                   result_path=result.path if error is None else None, warm_start=warm and warm.describe(),
                   pick=result.config.loader_kwargs(), samples_per_s=result.samples_per_s, trials=len(result.trials),
                   early_stop=result.early_stop, tune_seconds=result.tune_seconds, **kept)


def write(report: RetuneReport, folder: str) -> RetuneReport:
    """The report as markdown and JSON, dated (a name no other run's report has: two runs started
    in the same second get ``STAMP`` and ``STAMP-2``) and as ``latest``; the report with its
    paths, or with ``write_error`` saying what could not be written, for the caller to print it
    all the same."""
    stamp = report.started_at.replace(":", "").replace("-", "").replace("+0000", "Z")

    def placed(dated: dict[str, str]) -> RetuneReport:
        return RetuneReport(**{**report.__dict__, "paths": {
            "markdown": dated[".md"], "json": dated[".json"],
            "latest_markdown": os.path.join(folder, "latest.md"), "latest_json": os.path.join(folder, "latest.json")}})

    def texts(placed_report: RetuneReport) -> tuple[str, str]:
        return json.dumps(placed_report.to_dict(), indent=2, default=str) + "\n", markdown(placed_report)

    dated = None
    try:
        dated = write_new(folder, stamp, (".json", ".md"), lambda paths: dict(zip((".json", ".md"), texts(placed(paths)))))
        written = placed(dated)
        data, text = texts(written)
        atomic_write_all({written.paths["latest_json"]: data, written.paths["latest_markdown"]: text})
    except OSError as exc:
        fix = ("free space there, or pass --reports DIR on a disk with room" if is_disk_full(exc)
               else "make the folder writable, or pass --reports DIR elsewhere")
        kept = {k: v for k, v in placed(dated).paths.items() if not k.startswith("latest")} if dated else {}
        return RetuneReport(**{**report.__dict__, "paths": kept,
                               "write_error": f"{write_failure('the report', folder, exc)}. Fix: {fix}"})
    return written


@dataclass(frozen=True)
class WarmPlan:
    """Where a re-tune starts from and why, in words for its report."""
    start: WarmStart | None
    source: str | None = None
    why_not: str | None = None

    def describe(self) -> str:
        if self.start is None:
            return f"none: {self.why_not}"
        kind = "this hardware's last result" if self.start.may_stop else "the nearest other hardware's result"
        return f"{kind} ({self.source}): {self.start.pick.key} at {rate(self.start.rate)}"


def warm_plan(base: TuneResult | None, problem) -> WarmPlan:
    """The warm start from ``base`` (the previous result, by ``store.history.previous``'s rule),
    for ``problem``."""
    if base is None:
        return WarmPlan(None, why_not="no earlier result for this dataset")
    differently = base.measured_differently()
    if differently is not None:
        return WarmPlan(None, base.where, why_not=differently)
    pick, hw = base.config, base.hardware
    same = hw.fingerprint == problem.hardware.fingerprint
    if not same:
        pick = scaled(pick, int(hw.cpus or problem.hardware.cpus), problem.hardware.cpus)
    if pick.batch_size not in problem.batch_sizes:
        pick = pick.replace(batch_size=problem.batch_sizes[0])
    return WarmPlan(WarmStart(pick, base.samples_per_s, base.tuned.rel_interval, may_stop=same,
                              neighbours=same), base.where)


def _mib(value: float | None) -> str:
    """Bytes in MiB; a value not measured, or one that cannot be (a negative cost), as unmeasured."""
    return "unmeasured" if value is None or value < 0 else f"{value / 2**20:,.0f} MiB"


def _pick(kwargs: dict | None) -> str:
    if not kwargs:
        return "-"
    label = {k.name: k.label for k in SETTINGS}
    return " ".join(f"{label.get(k, k)}={int(v) if isinstance(v, bool) else v}" for k, v in kwargs.items())


def _old_pick(drift) -> str:
    if drift is None or drift.pick_rate_before is None:
        return "-"
    said = f"{rate(drift.pick_rate_before)} -> {rate(drift.old_pick_now)}"
    if drift.old_pick_now is None:
        return said
    interval = drift.rate_interval
    within = f", 95% {interval[0] - 1:+.0%}...{interval[1] - 1:+.0%}" if interval else ""
    return f"{said} ({drift.old_pick_now / drift.pick_rate_before - 1:+.0%}{within})"


def _change(drift, name: str, form=lambda v: "-" if v is None else f"{v}") -> str:
    """``drift``'s ``<name>_before -> <name>_after`` in ``form``, or "-" where neither is known."""
    before, after = (getattr(drift, f"{name}_{when}", None) for when in ("before", "after"))
    return "-" if before is None and after is None else f"{form(before)} -> {form(after)}"


def _warm(outcome) -> str:
    if outcome.warm_start is None:
        return "-"
    if outcome.warm_start.startswith("none"):
        return "none"
    kind = "this hardware" if outcome.warm_start.startswith("this hardware") else "other hardware"
    return f"{kind}, held: stopped early" if outcome.early_stop else kind


def markdown(report) -> str:
    hw = report.hardware
    gpus = ", ".join(hw.get("gpus") or []) or "no GPU"
    lines = [f"# autoloader retune: {report.registry}", "",
             f"- when: {report.started_at} to {report.finished_at}",
             f"- hardware: `{hw.get('fingerprint')}` ({cpus(hw['cpus']) if hw.get('cpus') else '? CPUs'}, "
             f"{hw.get('cpu_model')}, {hw.get('memory_gib')} GiB, {gpus})",
             f"- autoloader {autoloader_version()}, measurement format {MEASUREMENT_FORMAT}",
             f"- results: `{report.out}`" + (f", storage `{report.to_dict()['storage']}`" if report.storage else ""),
             f"- thresholds: rate {report.thresholds.rate:.0%}, knee "
             f"{'not judged' if report.thresholds.knee is None else f'{report.thresholds.knee} workers'}, memory per "
             f"worker {report.thresholds.memory_per_worker:.0%}, pick change "
             f"{'counts' if report.thresholds.pick else 'ignored'}, busy past {report.thresholds.busy:.0%} of the CPUs "
             "taken by others (inconclusive)",
             f"- verdict: **{report.verdict}** (exit {report.exit_code})",
             *([f"- this report is not stored: {report.write_error}"] if report.write_error else []),
             "",
             "| dataset | status | pick | samples/s | old pick then -> now | knee | memory per worker | warm start "
             "| trials | time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in report.outcomes:
        time = "-" if o.tune_seconds is None else f"{o.tune_seconds:.0f} s"
        status = f"**{o.status}**" if o.status in (DRIFTED, INCONCLUSIVE, "failed") else o.status
        lines.append(f"| {o.name} | {status} | {_pick(o.pick)} | {rate(o.samples_per_s)} | {_old_pick(o.drift)} | "
                     f"{_change(o.drift, 'knee')} | {_change(o.drift, 'memory_per_worker', _mib)} | {_warm(o)} | "
                     f"{o.trials} | {time} |")
    for o in report.outcomes:
        lines += ["", f"## {o.name}", ""]
        if o.key:
            lines.append(f"- key: `{o.key}`")
        if o.error:
            said = "nothing measured" if o.status == INCONCLUSIVE else "failed"
            lines += [f"- {said}: {clip(o.error.splitlines()[0] if o.error.strip() else o.error, 500)}",
                      "- the last good result, if any, was kept"]
        if o.warm_start:
            held = " (the pick held: the search stopped early)" if o.early_stop else ""
            lines.append(f"- warm start: {o.warm_start}{held}")
        d = o.drift
        load = d.load if d is not None else None
        if load is not None and load.others_cpus is not None:
            lines.append(f"- machine: {others_text(load.others_cpus, load.usable_cpus)} while it measured"
                         + (" (busy: inconclusive, kept but never the baseline)" if load.busy else ""))
        if d is not None and d.inconclusive:
            why = "on a busy machine" if d.load is not None and d.load.busy else (d.undecided or "too noisy")
            lines.append(f"- inconclusive ({why}): nothing can be said changed or unchanged, and this result is "
                         "never the baseline" + (f" (would have been: {'; '.join(d.set_aside)})" if d.set_aside else ""))
        if d is not None and d.status == "baseline":
            lines.append("- the first result for this dataset: nothing to compare with")
        elif d is not None and d.previous_path is not None:
            if d.previous_path:
                lines.append(f"- compared with: `{d.previous_path}` ({d.previous_finished_at or 'undated'})")
            lines.append("- pick: " + (", ".join(f"{c.setting} {c.before} -> {c.after}" for c in d.changes)
                                       if d.changes else "unchanged")
                         + (f" (a tie: the 95% interval of this run's paired rounds does not put the new pick "
                            f"{SETTINGS_TIE:.0%} ahead of the old)" if d.settings_tie else ""))
            lines += [f"- the old pick's rate then -> now: {_old_pick(d)}",
                      f"- knee: {_change(d, 'knee')}; memory per worker: {_change(d, 'memory_per_worker', _mib)}"]
            if d.hardware_changes:
                lines.append("- hardware changed: " + ", ".join(f"{f} {b} -> {a}" for f, b, a in d.hardware_changes))
            lines += [f"- past a threshold: {reason}" for reason in d.reasons]
        if o.result_path:
            kept = f"kept as `{o.history_path}`" if o.history_path else f"not kept in the history: {o.history_error}"
            lines.append(f"- result: `{o.result_path}`; {kept}")
        if o.report:
            lines.append(f"- report: [{o.report}]({o.report})")
    return "\n".join(lines) + "\n"
