"""Everything autoloader prints: the progress subscribers and the final table. Nothing else prints.

The CLI prints each event's line to stderr (``ProgressPrinter``); the Python API sends the same
lines through the ``logging`` module (logger ``"autoloader"``, INFO, the event on the record as
``record.event``), so an application's own logging configuration decides where they go.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Callable, TextIO

from ..errors import one_line
from ..events import Event, Progress, subscriber
from ..events.lines import gib as _gib, known as _known, mib as _mib, others_text, provisional_text, rate as _rate
from ..search.growth import growth_finding
from ..search.memory import KEPT_WORKERS
from ..search.results import OK
from ..search.settings import ORDER
from ..search.shards import stream_lines
# The caveats' words are explain's, shared with the page and show: NOTE in explain/verdict.py.
from ..explain.verdict import (NOT_PREDICTED, caveats, load_lines, profile_load_line, profiled,  # noqa: F401
                               rate_basis, rule_label, rule_line)


LOGGER = logging.getLogger("autoloader")


class ProgressPrinter:
    """The CLI's subscriber: each event's line, if it has one, to stderr."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        line = event.line
        if line:
            print(line, file=self.stream, flush=True)


def log_event(event: Event) -> None:
    """The logging subscriber: the event's line at INFO (a line-less one, its kind at DEBUG)."""
    line = event.line
    if line:
        LOGGER.info(line, extra={"event": event})
    else:
        LOGGER.debug("autoloader: %s", event.kind, extra={"event": event})


class _Logged:
    """A user's callback, then the logging subscriber: API progress goes to both."""

    def __init__(self, callback: Progress):
        self.callback = callback

    def __call__(self, event: Event) -> None:
        self.callback(event)
        log_event(event)


def api_progress(progress: Callable | bool | None, stacklevel: int = 3) -> Progress | None:
    """What ``tune()``/``best_loader()`` report through: ``None`` logs each line; ``False`` says
    nothing; a callable gets every event, and the log gets it too. The logger gets a handler to
    stderr of its own only when the application configured no logging at all. ``stacklevel``:
    where a deprecation points, from the caller (3: the caller of ``tune()``)."""
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
        return log_event
    return _Logged(subscriber(progress, stacklevel=stacklevel))


def table(result, saved: bool = True, stored: tuple[str, ...] = ()) -> str:
    """The human summary of a TuneResult (``saved=False``: not all stored; ``stored``: NotSaved.stored)."""
    t = result.tuned
    kw = t.config.loader_kwargs()
    what = "torchdata.nodes graph" if getattr(result, "nodes", None) is not None else "DataLoader config"
    lines = ["", f"autoloader: tuned {what}", ""]
    lines += [f"  {k:<20} {v}" for k, v in kw.items()]
    if getattr(t, "provisional", None):
        lines += ["", f"  {provisional_text(t.provisional)}"]
    lines += ["", f"  {'samples/s':<20} {_rate(t.samples_per_s)}"
                  + (f" (±{t.rel_interval * 100:.1f}% in its burst)" if _known(t.rel_interval) and t.rel_interval else "")]
    lines += _rows("", rate_basis(result))
    ranks = getattr(result, "ranks", 1)
    if ranks > 1:   # NOTE [ Tuning a node's ranks ] in node/__init__.py
        lines.append(f"  {'node':<20} {ranks} ranks, each with this config on its shard; samples/s is the node's, "
                     f"{ranks} x the slowest rank's")
    if getattr(result, "predicted", None) is not None:
        lines.append(f"  {'predicted':<20} {_rate(result.predicted.samples_per_s)} by the model"
                     f"{' for one rank' if ranks > 1 else ''} "
                     f"(waits {result.predicted.wait_share * 100:.0f}%)")
    elif not profiled(result) and getattr(result, "profile", None) is not None:
        lines.append(f"  {'predicted':<20} {NOT_PREDICTED}")
    lines += _rows("verdict", _verdict_line(result))
    lines.append(f"  {rule_label(result):<20} {rule_line(result)}")
    if t.baseline_samples_per_s:
        words = getattr(result, "baseline_verdict", None)
        words = "the pick itself" if t.config.num_workers == 0 else f"the pick: {words}" if words else ""
        lines.append(f"  {'num_workers=0':<20} {_rate(t.baseline_samples_per_s)}" + (f"; {words}" if words else ""))
    gain = getattr(result, "reorder_gain", None)
    if gain is not None and gain > 0.02:
        gate, proposal = ORDER.gate, ORDER.proposal
        said = (f"is predicted {gain * 100:+.0f}%; pass {gate.flag} to let the tuner use it" if proposal.unpredicted is None
                else f"{proposal.unpredicted} (the model sees {gain * 100:+.0f}% from a slow batch no longer "
                     "holding up the rest, not what delivering out of order costs)")
        lines.append(f"  {gate.label:<20} {ORDER.setting(proposal.value)} {said} ({gate.consequence})")
    if t.knee and profiled(result):
        hurt = f", falls from {t.knee.starts_hurting}" if t.knee.starts_hurting is not None else ""
        lines.append(f"  {'worker knee':<20} stops paying at {t.knee.stops_paying} "
                     f"worker{'' if t.knee.stops_paying == 1 else 's'}, peak at "
                     f"{t.knee.peak}{hurt} (the model's curve, corrected by the bursts)")
        lines.append(f"  {'curve':<20} " + ", ".join(f"{w}:{_rate(r, '')}" for w, r in t.knee.curve))
    lines += _rows("memory", memory_line(getattr(result, "memory", None), getattr(result, "rule_memory", None)))
    start = getattr(result, "start", None)   # NOTE [ What a start method costs ] in search/methods.py
    lines += _rows("start method", *(start.lines() if start else []))
    lines += _rows("stream", *stream_lines(getattr(result, "stream", None)))
    threads = getattr(result, "threads", None)
    lines += _rows("main threads", threads_line(threads) if threads is not None else None)
    lines += _rows("machine load", *load_lines(getattr(result, "load", None)),
                   profile_load_line(getattr(result, "profile", None)))
    faults = result.faults()
    ok = sum(1 for tr in result.trials if tr.status == OK)
    lines.append(f"  {'trials':<20} {len(result.trials)} ({ok} measured"
                 + ("".join(f", {n} {c}" for c, n in faults.items()) if faults else "") + ")")
    lines.append(f"  {'tuning time':<20} {result.tune_seconds:.0f} s")
    lines += _rows("since last", since(result.since) if result.since is not None else None)
    if saved:
        lines += ["", f"  saved {result.path}", f"  snippet {result.snippet_path}", ""]
    elif stored:
        lines += ["", *(f"  {line}" for line in stored), "  (the error below says why)", ""]
    else:
        lines += ["", f"  not saved (the error below says why): {result.path}", ""]
    return "\n".join(lines)


def _rows(label: str, *texts: str | None) -> list[str]:
    """A row each text said (not None nor empty), the label on the first."""
    return [f"  {label if i == 0 else '':<20} {text}" for i, text in enumerate(t for t in texts if t)]


def _verdict_line(result) -> str | None:
    """What limits the run, in one line, for a result that has a profile."""
    if getattr(result, "profile", None) is None or getattr(result, "calibration", None) is None:
        return None
    from ..explain import headline

    return headline(result)


def report_written(written) -> str:
    """What of a report was written, and one line for each file that could not be."""
    pages = [p for p in (written.html, written.markdown) if p in written.written]
    if pages == [written.html, written.markdown]:
        head = f"autoloader: report written: {written.html} (markdown twin {written.markdown})"
    elif pages:
        head = f"autoloader: report partly written: {pages[0]}"
    else:
        head = f"autoloader: report not written (beside {os.path.dirname(written.html) or '.'})"
    return "\n".join([head] + [f"  not written: {one_line(f)}" for f in written.failed])


def memory_line(pick, rule=None) -> str | None:
    """One line on the workers' copy-on-read growth (NOTE [ Copy on read ]), where the profile found it."""
    shown = pick if pick is not None and pick.workers else rule
    if shown is not None and shown.growth is not None and not shown.growth.found and shown.growth.maps_file:
        return f"no copy-on-read growth: {shown.growth.mapped_text()}"   # NOTE [ Memory by kind ]
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
    why = ("The rows are Python objects (reading one writes its reference count): hold them as numpy arrays, "
           "Arrow or one bytes buffer with offsets" if not shown.growth.maps_file
           else f"Cause: {finding.cause}. Fix: {finding.fix}" if finding is not None else "")
    return f"{who}{what} ({shown.growth.per_sample_bytes / 2**10:.1f} KiB a sample at first{seen}). {why}{saved}"


def threads_line(threads) -> str:
    """The main process's intra-op threads, and what to set when one thread was clearly faster."""
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
        busy = load is None or load.busy or not getattr(c, "undecided", None)
        why = ((others_text(load.others_cpus, load.usable_cpus) if load is not None and load.others_cpus is not None
                else "other processes took much of the CPUs") + " while this run measured") if busy else c.undecided
        aside = f" (would have been: {'; '.join(c.set_aside)})" if c.set_aside else ""
        head = f"INCONCLUSIVE: {why}, so nothing is said changed or unchanged{aside}"
        return head if c.previous_path is None else f"{head}; against {where} ({c.previous_path}): {rate}"
    return (f"{'CHANGED' if c.changed else 'unchanged'} since {where} ({c.previous_path}): "
            + (f"{settings}{tie}; " if settings else "same settings; ") + rate + differently)


def json_text(data: dict) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def as_json(result, saved: bool = True, stored: tuple[str, ...] = ()) -> str:
    """The whole TuneResult as one JSON object, the result file's shape, with ``"saved": false``
    (and ``"stored"``) when not all of it could be stored."""
    extra = {"saved": False, **({"stored": list(stored)} if stored else {})}
    data = {**result.to_dict(), **explained(result)}
    return json.dumps(data if saved else {**data, **extra}, default=str)


def explained(result) -> dict:
    """The figures the table and the report page say of the run beyond its record (the verdict,
    the ceiling, the caveats). Empty for a record without a profile."""
    if getattr(result, "partial", False) or getattr(result, "profile", None) is None:
        return {}
    from ..explain import figures

    return {"explained": {**figures(result), "caveats": [[label, text] for label, text in caveats(result)]}}
