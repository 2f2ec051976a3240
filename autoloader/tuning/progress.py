"""Everything autoloader prints: progress lines and the final table. Nothing else prints.

The CLI prints progress lines to stderr (``ProgressPrinter``); the Python API sends the same
lines through the ``logging`` module (``LogProgress``, logger ``"autoloader"``, level INFO), so an
application's own logging configuration decides where they go. Without one, they go to stderr,
as Lightning's do; ``progress=False`` silences them, and so does
``logging.getLogger("autoloader").setLevel(logging.WARNING)``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from typing import Callable, TextIO

from ..errors import clip, one_line
from ..search.growth import growth_finding
from ..search.memory import KEPT_WORKERS
from ..search.policy import BUSY_SHARE, busy_at
from ..search.results import OK


def _gib(n: int | None) -> str:
    return "-" if not n else f"{n / 2**30:.2f} GiB"


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:,.0f}/s"


def _known(x: float | None) -> bool:
    """An interval was estimated: a trial stopped early has none (inf, or None once stored)."""
    return x is not None and math.isfinite(x)


def others_text(others: float, usable: float) -> str:
    return f"other processes used {others:.1f} of {usable:g} CPUs"


def _trials(first: int, last: int) -> str:
    return f"trial {first}" if first == last else f"trials {first}-{last}"


def load_lines(load) -> list[str]:
    """What the machine's load (a search.load.MachineLoad) says, in words: NOTE [ Others on the machine ]."""
    if load is None or load.others_cpus is None:
        return []
    steal = f", steal {load.steal_cpus:.2f}" if load.steal_cpus else ""
    lines = [f"{others_text(load.others_cpus, load.usable_cpus)} on average while the run measured{steal}"
             + (f", {load.final_others_cpus:.1f} during the final" if load.final_others_cpus is not None else "")]
    for span in load.busy_spans:
        lines.append(f"{others_text(span.others_cpus, load.usable_cpus)} during {_trials(span.first, span.last)}: "
                     "these figures are what the machine gives while they run")
    if load.busy:
        widened = (f"the final's ties widened by {load.widen * 100:.0f} points where its rounds disagree; "
                   if load.final_others_cpus is not None else "")
        lines.append(f"a busy machine (others past {load.threshold:.0%} of the CPUs): {widened}a nightly comparison "
                     "of this run is inconclusive, and it is no baseline for the next")
    return lines


LOGGER = logging.getLogger("autoloader")


class ProgressPrinter:
    """The ``progress`` callback of ``tune()`` that writes one line per event to stderr."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __call__(self, event: str, data: dict) -> None:
        line = self.line(event, data)
        if line:
            print(line, file=self.stream, flush=True)

    def line(self, event: str, data: dict) -> str | None:
        """The words for one progress event (None: the event says nothing)."""
        return getattr(self, "_" + event, lambda d: None)(data)


    def _start(self, d: dict) -> str:
        info = d["info"]
        resumed = f", resuming {d['resumed']} finished trials" if d["resumed"] else ""
        stale = f" ({d['stale']} interrupted trials marked failed)" if d["stale"] else ""
        retried = f" ({d['retried']} stopped by a limit since raised, measured again)" if d.get("retried") else ""
        retried += _start_retries(d)
        length = "iterable" if info.length is None else f"{info.length:,} samples"
        # A node's tune (node/__init__.py): the CPUs are one rank's; trial lines give the slowest rank's rate.
        where = (f"{d['ranks']} ranks at once ({d['cpus']} CPUs and {_gib(d['max_memory'] // d['ranks'])} each; "
                 f"trial rates are the slowest rank's, the node's is {d['ranks']}x), budget {d['budget']:.0f} s"
                 if d.get("ranks", 1) > 1 else f"{d['cpus']} CPUs, budget {d['budget']:.0f} s")
        return (f"autoloader: tuning {d['key']} on {d['device']} ({where}, "
                f"memory ceiling {_gib(d['max_memory'])}): {length}, {info.sample_seconds * 1e3:.2f} ms and "
                f"{info.sample_bytes / 2**10:.1f} KiB a sample{resumed}{stale}{retried}")

    def _retune(self, d: dict) -> str:
        return f"autoloader retune [{d['n']}/{d['of']}] {d['name']}"

    def _warm(self, d: dict) -> str:
        return f"  {d['key']}: warm start {d['warm'].describe()}"

    def _retuned(self, d: dict) -> str:
        o = d["outcome"]
        if o.error:
            return f"  {o.name}: FAILED {clip(one_line(o.error), 500)}"
        why = f" ({'; '.join(o.drift.reasons)})" if o.drift is not None and o.drift.reasons else ""
        load = o.drift.load if o.drift is not None else None
        if o.drift is not None and o.drift.inconclusive and load is not None and load.others_cpus is not None:
            why = f" ({others_text(load.others_cpus, load.usable_cpus)}: not judged)"
        return f"  {o.name}: {o.status}{why}" + (", the pick held (stopped early)" if o.early_stop else "")

    def _reused(self, d: dict) -> str:
        t = d["tuned"]
        return (f"autoloader: using the stored result {d['path']}: {t.config.key} at {_rate(t.samples_per_s)} "
                f"(tuned on {t.device}; delete it, or pass version=, to tune again)")

    def _not_reused(self, d: dict) -> str:
        return f"autoloader: tuning again: {d['why']}"

    def _profile(self, d: dict) -> str:
        p = d["profile"]
        if d.get("error"):
            return f"  profile: not measured ({clip(one_line(d['error']), 500)}); the bursts will correct a rough one"
        q = p.sample_quantiles()
        pin = f", pin {p.pin_s * 1e3:.1f} ms, copy {(p.h2d_pinned_s or 0) * 1e3:.1f} ms" if p.pin_s is not None else ""
        cpus = d.get("cpus") or p.cpus
        busy = (f"; {others_text(p.others_cpus, cpus)} meanwhile"
                if p.others_cpus is not None and busy_at(p.others_cpus / cpus, d.get("busy", BUSY_SHARE)) else "")
        g = getattr(p, "growth", None)
        grows = (f"; a worker copies {g.per_sample_bytes / 2**10:.1f} KiB a sample it reads, up to "
                 f"{_mib(g.ceiling_bytes)}" if g is not None and g.found else "")
        return (f"  profile [{p.seconds:.1f}s]: a sample {q['median'] * 1e3:.2f} ms (p99 {q['p99'] * 1e3:.2f}, "
                f"max {q['max'] * 1e3:.2f}; {p.sample_cpu_share:.0%} on a CPU), a batch of {p.batch_size} "
                f"{p.batch_bytes / 2**20:.1f} MiB: receive {p.recv_s * 1e3:.1f} ms{pin}, step {p.step_s * 1e3:.1f} ms, "
                f"worker start {p.startup_s:.2f} s, {p.cpus:g} CPUs{grows}{busy}")

    def _trial(self, d: dict) -> str:
        r = d["result"]
        best = d["best"]
        interval = f"±{r.rel_interval * 100:.0f}%" if _known(r.rel_interval) else "±?"
        if r.pruned:
            interval = "(stopped early: clearly behind the best)"
        gpu = f" gpu {r.gpu_util * 100:.0f}%" if _known(r.gpu_util) else ""
        what = (f"{_rate(r.samples_per_s)} {interval} wait {(r.wait_fraction or 0) * 100:.0f}%{gpu}"
                if r.status == OK else f"{r.status.upper()} {r.describe_failure()}")
        best_text = f" | best {best.config.key} {_rate(best.samples_per_s)}" if best else ""
        again = " (a crash can be a one-off: trying it once more)" if d.get("again") else ""
        cpus = d.get("cpus")
        busy = (f" | {others_text(r.others_cpus, cpus)}: the figure is what the machine gives beside them"
                if cpus and r.others_cpus is not None and busy_at(r.others_cpus / cpus, d.get("busy", BUSY_SHARE))
                else "")
        return f"  trial {d['n']} of ~{d['expected']} [{d['elapsed']:.0f}s] {r.config.key}: {what}{again}{best_text}{busy}"

    def _recheck(self, d: dict) -> str:
        load = d["load"]
        return (f"  a busy machine ({others_text(load.others_cpus, load.usable_cpus)}): the configs that decide "
                f"the pick measured again, interleaved: {', '.join(d['configs'])}")

    def _waiting(self, d: dict) -> str:
        """A long wait, said while it lasts (probe/waiting.py): for the trial process's start-up,
        another process's tune of the same dataset, or a rank of a node's tune."""
        what = d["what"]
        if what == "lock":
            holder = f" (pid {d['holder']})" if d.get("holder") else ""
            return (f"autoloader: another process{holder} is tuning this dataset into {d['out']}; waiting for "
                    f"it to finish, then {d.get('then', 'using its result')} (tunes of one problem take turns, so "
                    "neither measures on cores the other is using)")
        if what == "trial_start":
            clipped = ", clipped to the budget" if d.get("clipped") else ""
            return (f"  waiting for the trial process to start and build the dataset and step "
                    f"({d['waited_s']:.0f} s of at most {d['allowed_s']:.0f} s{clipped})")
        if what == "rank":
            task = {"start": "start its trial process", "trial": "finish the trial", "command": "take the command",
                    "reply": "take this rank's reply", "next": "send its next command"}.get(d["task"], d["task"])
            state = f"; its process is {d['state']}" if d.get("state") else ""
            return (f"  waiting for rank {d['rank']} of {d['world']} to {task} ({d['waited_s']:.0f} s{state}; "
                    f"given up after {d['bound_s']:.0f} s)")
        return f"  waiting for {what} ({d.get('waited_s', 0):.0f} s)"

    def _control_again(self, d: dict) -> str:
        r = d["result"]
        return (f"  the cpus-1 rule's config {r.config.key} failed in the run resumed here ({clip(r.describe_failure(), 500)}); "
                "measuring it again, since the pick is held against it")

    def _fleet(self, d: dict) -> str:   # NOTE [ Local first ] in store/push.py
        return f"autoloader: {d['message']}"

    def _unstored(self, d: dict) -> str:
        return f"autoloader: {d['message']}; the search goes on without storing its trials"

    def _final(self, d: dict) -> str:
        rates = ", ".join(f"{k} {_rate(v[-1]) if v else '-'}" for k, v in d["rates"].items())
        return f"  final round {d['round']} of {d['rounds']} (interleaved): {rates}"


class LogProgress(ProgressPrinter):
    """The Python API's default progress: the same lines as the CLI's, logged at INFO."""

    def __call__(self, event: str, data: dict) -> None:
        line = self.line(event, data)
        if line:
            LOGGER.info(line)


def api_progress(progress: Callable[[str, dict], None] | bool | None) -> Callable[[str, dict], None] | None:
    """What ``tune()``/``best_loader()`` report through: ``None`` (the default) logs each line;
    ``False`` says nothing; a callable ``progress(event, data)`` gets every event. The logger gets
    a handler to stderr of its own only when the application configured no logging at all."""
    if progress is False:
        return None
    if progress is None or progress is True:
        if not LOGGER.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            LOGGER.addHandler(handler)
            LOGGER.propagate = False
            if LOGGER.level == logging.NOTSET:
                LOGGER.setLevel(logging.INFO)
        return LogProgress()
    return progress


def _start_retries(d: dict) -> str:
    """What the start line says about stored trials measured again or left out (store/retry.py)."""
    parts = []
    if d.get("code_changed"):
        parts.append(f"{d['code_changed']} failed under code since changed, measured again")
    if d.get("crashed_once"):
        parts.append(f"{d['crashed_once']} crashed once, tried once more")
    if d.get("environment"):
        parts.append(f"{d['environment']} failed on an OSError (a file, a mount, a permission: fixed outside the "
                     "code, maybe), measured again")
    if d.get("invalid"):
        parts.append(f"{d['invalid']} stored records invalid, ignored")
    return "".join(f" ({p})" for p in parts)


def table(result, saved: bool = True, stored: tuple[str, ...] = ()) -> str:
    """The human summary of a TuneResult; ``saved=False`` when not all of it could be stored, and
    then ``stored``: what happened to each thing the run stores (NotSaved.stored), a line each."""
    t = result.tuned
    kw = t.config.loader_kwargs()
    lines = ["", "autoloader: tuned DataLoader config", ""]
    lines += [f"  {k:<20} {v}" for k, v in kw.items()]
    lines += ["", f"  {'samples/s':<20} {_rate(t.samples_per_s)}"
                  + (f" (±{t.rel_interval * 100:.1f}% in its burst)" if _known(t.rel_interval) and t.rel_interval else "")]
    ranks = getattr(result, "ranks", 1)
    if ranks > 1:   # NOTE [ Tuning a node's ranks ] in node/__init__.py
        lines.append(f"  {'node':<20} {ranks} ranks, each with this config on its shard; samples/s is the node's, "
                     f"{ranks} x the slowest rank's")
    if getattr(result, "predicted", None) is not None:
        lines.append(f"  {'predicted':<20} {_rate(result.predicted.samples_per_s)} by the model"
                     f"{' for one rank' if ranks > 1 else ''} "
                     f"(capped by the {result.predicted.bound}, waits {result.predicted.wait_share * 100:.0f}%)")
    line = _verdict_line(result)
    if line:
        lines.append(f"  {'verdict':<20} {line}")
    lines.append(f"  {'cpus-1 rule':<20} {rule_line(result)}")
    if t.baseline_samples_per_s:
        lines.append(f"  {'num_workers=0':<20} {_rate(t.baseline_samples_per_s)} ({t.speedup:.2f}x with the tuned config)")
    gain = getattr(result, "reorder_gain", None)
    if gain is not None and gain > 0.02:
        lines.append(f"  {'out of order':<20} in_order=False is predicted {gain * 100:+.0f}%; "
                     "pass --allow-reorder to let the tuner use it (batches then come in another order)")
    if t.knee:
        hurt = f", falls from {t.knee.starts_hurting}" if t.knee.starts_hurting is not None else ""
        lines.append(f"  {'worker knee':<20} stops paying at {t.knee.stops_paying} workers, peak at "
                     f"{t.knee.peak}{hurt} (the model's curve, corrected by the bursts)")
        lines.append(f"  {'curve':<20} " + ", ".join(f"{w}:{r:,.0f}" for w, r in t.knee.curve))
    memory = memory_line(getattr(result, "memory", None), getattr(result, "control_memory", None))
    if memory:
        lines.append(f"  {'memory':<20} {memory}")
    threads = getattr(result, "threads", None)
    if threads is not None:
        lines.append(f"  {'main threads':<20} {threads_line(threads)}")
    lines += [f"  {'machine load' if i == 0 else '':<20} {text}"
              for i, text in enumerate(load_lines(getattr(result, "load", None)))]
    faults = result.faults()
    ok = sum(1 for tr in result.trials if tr.status == OK)
    lines.append(f"  {'trials':<20} {len(result.trials)} ({ok} measured"
                 + ("".join(f", {n} {c}" for c, n in faults.items()) if faults else "") + ")")
    lines.append(f"  {'tuning time':<20} {result.tune_seconds:.0f} s")
    if result.since is not None:
        lines.append(f"  {'since last':<20} {since(result.since)}")
    if saved:
        lines += ["", f"  saved {result.path}", f"  snippet {result.snippet_path}", ""]
    elif stored:
        lines += ["", *(f"  {line}" for line in stored), "  (the error below says why)", ""]
    else:
        lines += ["", f"  not saved (the error below says why): {result.path}", ""]
    return "\n".join(lines)


def _verdict_line(result) -> str | None:
    """What limits the run, in one line (explain/verdict.py), for a result that has a profile."""
    if getattr(result, "profile", None) is None or getattr(result, "calibration", None) is None:
        return None
    from ..explain import headline

    return headline(result)


def report_written(written) -> str:
    """What of a report was written (explain/files.Written), and one line for each file that
    could not be (NOTE [ A report writes what it can ])."""
    pages = [p for p in (written.html, written.markdown) if p in written.written]
    if pages == [written.html, written.markdown]:
        head = f"autoloader: report written: {written.html} (markdown twin {written.markdown})"
    elif pages:
        head = f"autoloader: report partly written: {pages[0]}"
    else:
        head = f"autoloader: report not written (beside {os.path.dirname(written.html) or '.'})"
    return "\n".join([head] + [f"  not written: {one_line(f)}" for f in written.failed])


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def memory_line(pick, control=None) -> str | None:
    """One line on the workers' copy-on-read growth (NOTE [ Copy on read ] in search/growth.py),
    when the profile found it; None otherwise."""
    shown = pick if pick is not None and pick.workers else control
    if shown is None or shown.growth is None or not shown.growth.found or not shown.workers:
        return None
    finding = growth_finding(shown)
    who = "" if shown is pick else "the pick reads in the main process, which copies nothing; the cpus-1 rule's "
    each = f"each of its {shown.workers}" if shown.workers > 1 else "its one"
    if shown.basis == KEPT_WORKERS:
        what = (f"{_gib(shown.host_bytes)} over the run, forecast: {each} kept worker{'s' * (shown.workers > 1)} "
                f"copies up to {_mib(shown.copied_bytes)} of the dataset's pages (a full copy) as it reads")
    else:
        what = (f"{_gib(shown.host_bytes)} at the end of an epoch, forecast: {each} worker{'s' * (shown.workers > 1)} "
                f"copies {_mib(shown.copied_bytes)} of the dataset's pages as it reads its "
                f"{shown.samples_per_worker:,} samples")
    seen = f"; its bursts peaked at {_gib(shown.measured_peak_bytes)}" if shown.measured_peak_bytes else ""
    saved = f", and save ~{_gib(finding.saved_bytes)}" if finding is not None else ""
    return (f"{who}{what} ({shown.growth.per_sample_bytes / 2**10:.1f} KiB a sample at first{seen}). The rows are "
            "Python objects (reading one writes its reference count): hold them as numpy arrays, Arrow or one "
            f"bytes buffer with offsets{saved}")


def rule_line(result) -> str:
    """The table's line on the rule the tuner replaces (NOTE [ Model first ]): the measured ratio,
    or why there is none."""
    control, tuned = getattr(result, "control", None), result.tuned
    if control is None:
        return "not measured: this search holds no control"
    rule = f"num_workers={control.num_workers}, pin_memory={control.pin_memory}, persistent"
    if control == tuned.config:
        return f"the pick is the rule ({rule}): 1.00x by identity, nothing measured beat it"
    median = getattr(result, "control_samples_per_s", None)
    if median:
        return (f"{_rate(median)} ({rule}) in the interleaved final: the tuned config reads "
                f"{tuned.samples_per_s / median:.2f}x")
    trials = [tr for tr in result.trials if tr.config == control]
    failed = next((tr for tr in trials if tr.status != OK), None)
    if failed is not None:
        return f"could not run here ({rule}): {clip(failed.describe_failure(), 500)}"
    burst = next((tr for tr in trials if tr.status == OK and tr.samples_per_s), None)
    forecast, inputs = getattr(result, "control_memory", None), getattr(result, "inputs", None)
    ceiling = inputs.max_memory if inputs is not None else None
    if forecast is not None and ceiling and forecast.host_bytes > ceiling:   # kept out of the final: final.py
        seen = f"; its burst read {_rate(burst.samples_per_s)}" if burst is not None else ""
        return (f"the rule's forecast {_gib(forecast.host_bytes)} is past the {_gib(ceiling)} ceiling: not measured "
                f"in the final ({rule}){seen}")
    if burst is not None:
        rough = " (stopped early: a rough figure)" if burst.pruned else ""
        return (f"not in an interleaved final ({rule}): no round of it fit in the budget; its burst read "
                f"{_rate(burst.samples_per_s)}{rough}")
    return f"not measured ({rule}): the budget ended before it"


def threads_line(threads) -> str:
    """The main process's intra-op threads, and what to set when one thread was clearly faster
    (NOTE [ The main process's threads ])."""
    text = f"{threads.threads} torch intra-op thread{'s' if threads.threads != 1 else ''} in the main process"
    if threads.advise:
        text += (f": its share of a batch of {threads.batch_size} (collate and step) took "
                 f"{threads.default_s * 1e3:.2f} ms with them against {threads.one_thread_s * 1e3:.2f} ms with one "
                 f"({threads.slower:.1f}x): set torch.set_num_threads(1) in the training process")
    elif threads.slower is not None:
        text += (f" (collate and step {threads.default_s * 1e3:.2f} ms a batch, {threads.one_thread_s * 1e3:.2f} ms "
                 "with one: no reason to change it)")
    return text


def since(c) -> str:
    """One line on what changed against the previous result (a ``tuning.compare.Comparison``)."""
    where = "this hardware" if c.same_hardware else c.previous_hardware
    settings = ", ".join(f"{x.setting} {x.before} -> {x.after}" for x in c.changes)
    ratio = c.rate_ratio
    rate = f"samples/s {_rate(c.pick_rate_before)} -> {_rate(c.pick_rate_after)}"
    if ratio is not None:
        basis = "" if c.old_pick_now is None else f"the previous settings read {_rate(c.old_pick_now)} here, "
        rate += f" ({basis}{(ratio - 1) * 100:+.0f}%" + (", past the noise)" if c.rate_shifted else ")")
    tie = (f" (a tie: the rounds of this run cannot separate them; the previous settings read "
           f"{_rate(c.old_pick_now)} here)" if c.settings_tie else "")
    differently = f"; not comparable: {c.not_comparable}" if c.not_comparable else ""
    if getattr(c, "inconclusive", False):
        load = c.load
        why = (others_text(load.others_cpus, load.usable_cpus) if load is not None and load.others_cpus is not None
               else "other processes took much of the CPUs")
        aside = f" (would have been: {'; '.join(c.set_aside)})" if c.set_aside else ""
        head = f"INCONCLUSIVE: {why} while this run measured, so nothing is said changed or unchanged{aside}"
        return head if c.previous_path is None else f"{head}; against {where} ({c.previous_path}): {rate}"
    return (f"{'CHANGED' if c.changed else 'unchanged'} since {where} ({c.previous_path}): "
            + (f"{settings}{tie}; " if settings else "same settings; ") + rate + differently)


def json_text(data: dict) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def as_json(result, saved: bool = True, stored: tuple[str, ...] = ()) -> str:
    """The whole TuneResult as one JSON object: the same shape the result file stores, with
    ``"saved": false`` when not all of it could be stored (and ``"stored"``: what was, a line each)."""
    extra = {"saved": False, **({"stored": list(stored)} if stored else {})}
    return json.dumps(result.to_dict() if saved else {**result.to_dict(), **extra}, default=str)
