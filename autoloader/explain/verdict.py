"""What limits the run, in the order people who tune by hand reason: NOTE [ The verdict ]. Pure.

# NOTE [ The verdict ]
# 1. Data supply: the share of the loop spent waiting for its next batch (the pick's, measured in
#    the final or its burst; else the model's), against TensorFlow's input-pipeline analyzer's
#    HIGHLY_INPUT_BOUND and MODERATELY_INPUT_BOUND. Without --step the loop only moves each batch
#    to the device: the share is the loader's alone.
# 2. Which part of supply caps the pick, named for what a person can change: the workers filling
#    the cores ("cores"), too few workers ("workers"), the main process's receive and pin ("main":
#    the pin thread, else the loop itself), the copy to the device ("copy").
# 3. Memory: a config kept out by a limit (host ceiling, /dev/shm, CUDA memory) that the model
#    predicts MEMORY_COSTS faster than the pick: the limit, not the loader, holds the run.
# 4. Loader, compute or balanced: NOTE [ One bound ].
# 5. Without a measured profile no stage was timed: the measured wait share alone ("unprofiled").
# Each figure says how sure it is: measured, profiled (scaled by the terms the bursts fitted) or
# predicted. A part's cap is never shown below the rate the run measured without saying the
# profile under-timed it; a step's time is the profile's, with the bursts' correction beside it; a
# verdict of too few workers gives what the run measured of more, never calling its own pick short.

# NOTE [ One bound ]
# What holds the run is decided once (``bound``), so that the verdict and the ceiling's sentence
# cannot name different limits. The measured wait share comes first: it is what the run saw.
# 1. The loop waits HIGHLY_INPUT_BOUND or more, or MODERATELY_INPUT_BOUND or more with the
#    limiting supply part clearly slower than the step (past BALANCED_WITHIN): the loader holds it.
# 2. The loop is fed, but spends more of its time on its own receive or copy than in the step:
#    the loader holds it, in that part (the main process's receive, or the copy).
# 3. The loop waits MODERATELY_INPUT_BOUND or more and the supply part and the step are within
#    BALANCED_WITHIN of each other: both hold it (balanced), and speeding either alone gains little.
# 4. Otherwise the loop is fed (it waits under MODERATELY_INPUT_BOUND) and the step is most of its
#    time: the step holds it, however close the loader's predicted supply is (that a faster step
#    would soon meet the loader is the what-ifs' to say).

And what qualifies a run's figures (``caveats``), in the words the table (tuning/progress.py), the
report page, ``show`` and the JSON share: where the pick's rate is from, the rule it replaces, the
machine's load, and "not predicted" where the profile was not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..errors import clip
from ..events.lines import cpus, gib, others_text
from ..search.results import OK
from ..search.settings import DATALOADER, SETTINGS
from ..search.shards import stream_lines
from ..search.profile import threads_of
from .evidence import MEASURED, PREDICTED, PROFILED, Evidence, Stages, ms, pct, rate, size, stages
from .thresholds import (BALANCED_WITHIN, BUSY_RECEIVE, CONTENDED, CORRECTED, HIGHLY_INPUT_BOUND, MEMORY_CLOSE,
                         MEMORY_COSTS, MODERATELY_INPUT_BOUND, PARTS_TIE)

STEP, LOADER, BOTH = "step", "loader", "both"


@dataclass(frozen=True)
class Bound:
    """What holds the run and the figures it was decided from. ``part``: the part that holds it when
    the loader does (the supply part, or the loop's own receive or copy when it does not wait)."""

    holds: str
    part: str
    supply_part: str
    wait: float
    wait_source: str          # measured or predicted
    where: str                # "final", "burst", or "" where predicted
    supply_rate: float
    step_rate: float
    stages: Stages

    @property
    def kind(self) -> str:
        """The verdict's class, memory aside (verdict.py's to say)."""
        return {STEP: "compute", BOTH: "balanced"}.get(self.holds, f"input/{self.part}")


def bound(ev: Evidence) -> Bound:
    """What holds ``ev``'s pick (NOTE [ One bound ])."""
    st = stages(ev)
    measured, where = ev.measured_wait()
    wait, source = (measured, MEASURED) if measured is not None else (ev.predicted.wait_share, PREDICTED)
    capping = supply_part(st)
    part, supply = capping, supply_rate(st, capping)
    close = (math.isfinite(st.step_rate) and supply > 0
             and abs(math.log(supply / st.step_rate)) <= math.log(1.0 + BALANCED_WITHIN))
    if wait >= HIGHLY_INPUT_BOUND or (wait >= MODERATELY_INPUT_BOUND and not close):
        holds = LOADER
    elif st.loop_host_s > st.step_s:
        # Fed, but the loop spends more of its time on its own receive or copy than in the step.
        holds, part = LOADER, "copy" if st.copy_s >= st.loop_host_s - st.copy_s else "main"
    elif wait >= MODERATELY_INPUT_BOUND:
        holds = BOTH
    else:
        holds = STEP
    return Bound(holds, part, capping, wait, source, where, supply, st.step_rate, st)


def supply_part(st: Stages) -> str:
    """Which part of supply caps the pick (NOTE [ The verdict ], 2): the slowest of the workers, the
    main process's receive and pin (without a pin thread, the loop) and the copy to the device."""
    if st.workers == 0:
        return "main"
    caps = {"workers": st.supply_rate, "main": st.main_rate if st.pin_thread else st.loop_rate}
    if st.pin_thread:
        caps["copy"] = st.copy_rate
    part = min(caps, key=caps.get)
    if part != "workers" and st.cores_full and caps["workers"] <= caps[part] * (1.0 + PARTS_TIE):
        part = "workers"   # level with the cores full: the cores hold both (PARTS_TIE)
    if part == "main" and not st.pin_thread and st.copy_s > st.receive_s:
        part = "copy"
    return "cores" if part == "workers" and st.cores_full else part


def supply_rate(st: Stages, part: str) -> float:
    """The rate the limiting supply part alone allows."""
    if st.workers == 0:
        per_batch = st.worker_s + st.pin_s + st.copy_s
        return st.batch_size / per_batch if per_batch > 0 else math.inf
    if part in ("cores", "workers"):
        return st.supply_rate
    if st.pin_thread:
        return st.main_rate if part == "main" else st.copy_rate
    return st.loop_rate


KINDS = ("input/cores", "input/workers", "input/main", "input/copy", "memory/host", "memory/shm", "memory/device",
         "compute", "balanced")
# The what-ifs that change only the loader's settings: the knobs' proposals, and the worker counts.
LOADER_CHANGES = (*(k.proposal.name for k in SETTINGS if k.proposal is not None), "workers", "workers_past_cores")


@dataclass(frozen=True)
class Finding:
    """One step of the reasoning: its topic, what it found, how sure, and whether it is what limits."""

    topic: str
    title: str
    text: str
    source: str
    limits: bool = False


@dataclass(frozen=True)
class Verdict:
    kind: str                     # one of KINDS
    level: str                    # "highly input-bound", "moderately input-bound" or "not input-bound"
    wait_share: float
    wait_source: str              # measured or predicted
    headline: str                 # one line
    paragraph: str                # what limits and what to do, a person can act on
    findings: tuple[Finding, ...]
    stages: Stages
    step_given: bool | None
    lost_to_memory: float | None = None   # the predicted gain a memory limit kept out


def level_of(wait: float) -> str:
    return ("highly input-bound" if wait >= HIGHLY_INPUT_BOUND else
            "moderately input-bound" if wait >= MODERATELY_INPUT_BOUND else "not input-bound")


def verdict(ev: Evidence, whatifs: Sequence = ()) -> Verdict:
    """The verdict on ``ev``'s pick; ``whatifs`` (whatif.py) close the paragraph with what to change."""
    if not ev.profiled:
        return _unprofiled(ev)
    b = bound(ev)
    st, wait, wait_source, where = b.stages, b.wait, b.wait_source, b.where
    level = level_of(wait)
    memory_kind, memory_finding, lost = _memory(ev)
    kind = memory_kind or b.kind
    findings = (_supply_finding(ev, st, wait, wait_source, where, level),
                _part_finding(ev, st, b.supply_part, kind.startswith("input/")),
                memory_finding,
                _compute_finding(ev, st, kind in ("compute", "balanced")), *_stream(ev))
    headline = _headline(ev, st, kind, level, wait, wait_source, b.supply_rate, lost)
    # The headline has the wait already; the supply finding adds only what qualifies it.
    told = [_no_step(ev).strip()] + [f.text for f in findings[1:] if f.limits]
    paragraph = " ".join(t for t in [headline, *told, _advice(kind, whatifs)] if t)
    return Verdict(kind, level, wait, wait_source, headline, paragraph, findings, st, ev.step_given, lost)


UNPROFILED = "unprofiled"


def _unprofiled(ev: Evidence) -> Verdict:
    """The verdict where the profile was not measured: the measured wait share alone is said."""
    st = stages(ev)
    wait, where = ev.measured_wait()
    how = _HOW.get(where, "")
    if wait is None:
        headline = ("Not told: the profile was not measured and no wait share was measured, so nothing says what "
                    "holds the run.")
        level, wait = "not measured", 0.0
    else:
        level = level_of(wait)
        headline = (f"{level.capitalize()} ({pct(wait)} waiting, {how}): the profile was not measured, so which "
                    "part holds the run is not told apart.")
    text = ("The profile was not measured: no stage was timed, so the model has no curve, no knee and no "
            "prediction; the figures here are the bursts' and the final's. Tune again to profile it.")
    findings = (Finding("supply", "Data supply", headline, MEASURED, limits=wait >= MODERATELY_INPUT_BOUND),
                Finding("part", "The profile", text, MEASURED), *_stream(ev))
    paragraph = " ".join(t for t in (headline, text, _no_step(ev).strip()) if t)
    return Verdict(UNPROFILED, level, wait, MEASURED, headline, paragraph, findings, st, ev.step_given)


_HOW = {"final": "measured over the final's rounds", "burst": "measured in its burst"}


def _stream(ev: Evidence) -> tuple[Finding, ...]:
    return tuple(Finding("stream", "The stream's shards and workers", line, MEASURED)
                 for line in stream_lines(ev.stream))


def _at_most(ev: Evidence, r: float) -> str:
    """A part's cap, never below what the run measured without saying so."""
    measured = ev.samples_per_s
    if measured and r < measured * 0.99:
        return (f"{rate(r)} at most as profiled, below the {rate(measured)} the run measured (the profile "
                "under-timed it)")
    return f"{rate(r)} at most"


def _capping(ev: Evidence, r: float) -> str:
    """The headline's cap of the part that holds the run, beside what the run measured where the two part."""
    measured = ev.samples_per_s
    if not measured or abs(r / measured - 1.0) <= 0.1:
        return rate(r)
    if r < measured:
        return f"{rate(measured)} (measured; the profile's {rate(r)} for this part under-timed it)"
    return f"{rate(r)} by the model (the run measured {rate(measured)})"


def _more_workers(ev: Evidence) -> str:
    """What the run measured of more workers than its pick (the best such burst), so that a verdict of
    workers never calls its own pick short of them without the figures."""
    more = [t for t in ev.ok_trials if t.config.num_workers > ev.pick.num_workers]
    if not more:
        return "no config of more workers was measured"
    best = max(more, key=lambda t: t.samples_per_s)
    if best.samples_per_s <= ev.samples_per_s:
        return f"more workers measured no faster ({best.config.key} read {rate(best.samples_per_s)})"
    return (f"{best.config.key} read {rate(best.samples_per_s)} in its burst, which the pick's "
            f"{rate(ev.samples_per_s)} was kept over (the rule's line says how sure)")


def _step_text(ev: Evidence, st: Stages, of: bool = False) -> str:
    """The step's time a batch (``of``: "a batch of N"): the profile's, and where the bursts moved it
    the corrected one, so that no surface gives another step."""
    p = ev.profile
    profiled = p.step_s * st.batch_size / p.batch_size
    batch = f"a batch of {st.batch_size}" if of else "a batch"
    if profiled > 0 and abs(st.step_s / profiled - 1.0) > 0.005:
        return (f"{ms(profiled)} {batch} as profiled, {ms(st.step_s)} as the bursts corrected it "
                f"(x{st.step_s / profiled:.2f})")
    return f"{ms(profiled)} {batch}"


def _term_note(ev: Evidence, term: str, bare: bool = False) -> str:
    """How the bursts corrected a profiled figure, where they moved it past CORRECTED."""
    factor = getattr(ev.calibration, term)
    fits = getattr(ev.calibration, f"{term}_fits", 0)
    if term == "local":
        fits = 1 if factor != 1.0 else 0
    if fits and (factor >= CORRECTED or factor <= 1 / CORRECTED):
        bursts = (f"as {fits} burst{'s' if fits > 1 else ''} corrected it" if term != "local"
                  else "as its burst corrected it")
        note = f"the profile's figure x{factor:.2f}, {bursts}"
        return note if bare else f" ({note})"
    return ""


def _no_step(ev: Evidence) -> str:
    if ev.step_given is False:
        return (" No --step was given: the loop only moved each batch to the device, so this is the loader "
                "alone, against a step that costs nothing; pass --step to weigh it against your training.")
    if ev.step_given is None:
        return " (This result does not record whether a --step was given.)"
    return ""


def _supply_finding(ev, st, wait, source, where, level) -> Finding:
    how = _HOW.get(where, "predicted")
    own = (" It includes the loop's own receive: without a pin thread the loop takes each batch from its worker "
           "inside next()." if st.workers and not st.pin_thread else "")
    return Finding("supply", "Data supply",
                   f"The loop waited for data {pct(wait)} of the time ({how}): {level} (TensorFlow's convention: "
                   f"highly at {pct(HIGHLY_INPUT_BOUND)} or more, moderately at {pct(MODERATELY_INPUT_BOUND)}).{own}"
                   + _no_step(ev), source, limits=wait >= MODERATELY_INPUT_BOUND)


def _contention(st: Stages) -> str:
    if st.share < CONTENDED:
        return ""
    return (f" ({st.workers} workers want {st.cpu_demand:.1f} of the {cpus(st.cpus)} the pipeline gets, so every "
            f"thread runs at 1/{st.share:.1f} of a core, this one too)")


def _part_finding(ev: Evidence, st: Stages, part: str, limits: bool) -> Finding:
    p, n, bs = ev.profile, st.workers, st.batch_size
    others = ("the step costs nothing (no --step)" if ev.step_given is False
              else f"the step could take {rate(st.step_rate)}")
    if n == 0:
        steps = [f"{ms(st.worker_s)} for its samples and collate"]
        steps += [f"{ms(st.pin_s)} to pin"] if st.pin_s else []
        steps += [f"{ms(st.copy_s)} to copy to the device"] if st.copy_s else []
        text = (f"With num_workers=0 the main process makes every {size(st.batch_bytes)} batch of {bs} itself: "
                f"{', '.join(steps)}, so {_at_most(ev, supply_rate(st, 'main'))}{_term_note(ev, 'local')}, while "
                f"{others}.")
        if p.recv_s:
            pin = (f" and {ms(p.pin_s * bs / p.batch_size)} to pin it" if ev.cuda and p.pin_s and ev.pick.pin_memory
                   else "")
            text += (f" Workers would not lift it: the main process would instead spend "
                     f"{ms(p.recv_s * bs / p.batch_size)} receiving each of their batches{pin} (profiled).")
        return Finding("part", "The main process", text, PROFILED, limits)
    if part in ("cores", "workers"):
        one = bs / st.worker_s if st.worker_s else math.inf
        share = f" (a sample is {pct(p.sample_cpu_share)} CPU time)" if p.sample_cpu_share < 0.99 else ""
        note = _term_note(ev, "worker", bare=True)
        each = f"{rate(one)}" + (f"; {note}" if note else "")
        many = n != 1
        who = f"{n} workers each make" if many else "1 worker makes"
        # The CPUs the pipeline gets, and where that figure is from when the bursts revised it.
        revised = ev.calibration.cpus is not None and abs(st.cpus - p.cpus) > 0.01
        gets = cpus(st.cpus) + (f" the pipeline really gets (the bursts' fit; {p.cpus:g} are usable)"
                                if revised else "")
        text = (f"{who} a batch of {bs} in {ms(st.worker_s)} ({each}) and want{'' if many else 's'} "
                f"{st.cpu_demand:.1f} of the {gets}{share}; {'together they' if many else 'so it'} "
                f"make{'' if many else 's'} {rate(st.supply_rate)} (predicted), while the main process could take "
                f"{rate(st.main_rate)} and {others}.")
        text += (" The cores are full: more workers only share them." if part == "cores" else
                 f" The cores are not full: by the model more workers would make more; {_more_workers(ev)}.")
        return Finding("part", "Workers and cores", text, PREDICTED, limits)
    if part == "main":
        busy = (f" ({ms(st.receive_idle_s)} from an idle worker: taking a batch from a worker busy in Python waits "
                f"for its interpreter)" if st.receive_s > BUSY_RECEIVE * st.receive_idle_s else "")
        if st.pin_thread:
            pin = f" and {ms(st.pin_s)} pinning it" if st.pin_s >= 1e-4 else ""
            text = (f"The main process caps it: the pin thread spends {ms(st.receive_s)} receiving each "
                    f"{size(st.batch_bytes)} batch{busy}{pin}{_contention(st)}: {_at_most(ev, st.main_rate)}"
                    f"{_term_note(ev, 'pin')}, while the workers could make {rate(st.supply_rate)} and {others}.")
        else:
            copy = f", {ms(st.copy_s)} copying it to the device" if st.copy_s else ""
            text = (f"The main process caps it: without a pin thread the training loop takes each "
                    f"{size(st.batch_bytes)} batch itself, {ms(st.receive_s)} receiving it{busy}{copy} and "
                    f"{ms(st.step_s)} in the step{_contention(st)}: {_at_most(ev, st.loop_rate)}"
                    f"{_term_note(ev, 'main')}, while the workers could make {rate(st.supply_rate)}.")
        return Finding("part", "The main process's receive and pin", text, PROFILED, limits)
    kind = "pinned" if ev.pick.pin_memory else "pageable"
    text = (f"The copy to the device caps it: {ms(st.copy_s)} for each {size(st.batch_bytes)} batch from {kind} "
            f"memory{_contention(st)}, {_at_most(ev, st.copy_rate)}{_term_note(ev, 'main')}, while the workers "
            f"could make {rate(st.supply_rate)} and {others}.")
    return Finding("part", "The copy to the device", text, PROFILED, limits)


def _memory(ev: Evidence) -> tuple[str | None, Finding, float | None]:
    base = ev.predicted.samples_per_s
    gains = [(ev.model.predict(t.config, ev.calibration).samples_per_s / base - 1.0, t) for t in ev.kept_out()]
    lost, worst = max(gains, key=lambda g: g[0], default=(None, None)) if base > 0 else (None, None)
    pick_trial = next((t for t in ev.ok_trials if t.config == ev.pick), None)
    parts = []
    if pick_trial is not None:
        host = pick_trial.peak_pss_bytes or pick_trial.peak_host_bytes
        if host:
            of = f" of the {size(ev.max_memory)} ceiling" if ev.max_memory else ""
            close = " (close to it)" if ev.max_memory and host >= MEMORY_CLOSE * ev.max_memory else ""
            parts.append(f"host {size(host)}{of}{close}")
        if pick_trial.peak_shm_bytes is not None:
            of = f" of {size(ev.shm_free)} free" if ev.shm_free else ""
            parts.append(f"/dev/shm {size(pick_trial.peak_shm_bytes)}{of}")
        if pick_trial.gpu_peak_bytes:
            parts.append(f"device {size(pick_trial.gpu_peak_bytes)}")
    peaks = f"The pick's peaks: {', '.join(parts)} (measured)." if parts else "The pick's memory was not measured."
    if worst is None or lost is None or lost < MEMORY_COSTS:
        kept = (f" {len(ev.kept_out())} config(s) were kept out by memory, none predicted "
                f"{pct(MEMORY_COSTS)} faster than the pick." if ev.kept_out() else " Nothing was kept out by memory.")
        return None, Finding("memory", "Memory", peaks + kept, MEASURED), lost
    shm = worst.cause == "shm_exhausted" or "/dev/shm" in (worst.error or "")
    where = "device" if worst.cause == "cuda_oom" else "shm" if shm else "host"
    fix = {"host": "raise --max-memory (or free host memory), or cut per-worker memory (copy-on-read Python "
                   "objects: keep samples in numpy arrays)",
           "shm": "enlarge /dev/shm (docker run --shm-size=16g), or fewer bytes a batch",
           "device": "a smaller batch, or free device memory in the step"}[where]
    text = (f"{worst.config.key} was kept out ({worst.describe_failure()}); the model predicts it {lost * 100:+.0f}% "
            f"over the pick. The fix: {fix}. " + peaks)
    return f"memory/{where}", Finding("memory", "Memory", text, PREDICTED, limits=True), lost


def _compute_finding(ev: Evidence, st: Stages, limits: bool) -> Finding:
    if ev.step_given is False:
        text = ("No step was timed: without --step the loop's step only moves a batch to the device, so this run "
                "says nothing about your training's compute.")
    else:
        text = (f"The step takes {_step_text(ev, st, of=True)}, on resident data: "
                f"{_at_most(ev, st.step_rate)}.") + _threads_note(ev)
    return Finding("compute", "Compute (the step)", text, PROFILED, limits)


def _threads_note(ev: Evidence) -> str:
    """What to set where one intra-op thread ran clearly faster (NOTE [ The main process's threads ])."""
    threads = threads_of(ev.profile, None)
    if threads is None or not threads.advise:
        return ""
    return (f" Part of it is the main process's {threads.threads} intra-op threads waiting for each other: in "
            f"the profile its share of a batch (collate and step) took {ms(threads.default_s)} with them against "
            f"{ms(threads.one_thread_s)} with one ({threads.slower:.1f}x); set torch.set_num_threads(1) in the "
            "training process.")


# The part of supply that holds a run, in the headline's words (watching.py says them too).
PART_WORDS = {"cores": "in the workers: the cores are full", "workers": "in the workers, the cores not full",
               "main": "in the main process's receive and pin", "copy": "in the copy to the device"}


def _headline(ev, st, kind, level, wait, source, supply, lost) -> str:
    waits = f"{pct(wait)} waiting, {source}" + ("; no --step" if ev.step_given is False else "")
    if kind.startswith("memory/"):
        where = {"memory/host": "host memory", "memory/shm": "/dev/shm", "memory/device": "device memory"}[kind]
        return (f"Held by {where}: a config it kept out is predicted {lost * 100:+.0f}% over the pick "
                f"({waits}).")
    if kind.startswith("input/"):
        part = "main" if st.workers == 0 else kind.split("/", 1)[1]
        words = ("in the main process: with num_workers=0 it makes every batch itself" if st.workers == 0
                 else PART_WORDS[part])
        if level == "not input-bound":
            doing = "copying" if part == "copy" else "receiving"
            return (f"Input-bound {words}, capping it at {_capping(ev, supply)}: the loop does not wait for data "
                    f"({waits}) but spends more of its time {doing} each batch than in the step.")
        if st.workers == 0 and level != "not input-bound":
            # Made in the loop between steps: the wait share is the figure, not a rate.
            return f"{level.capitalize()} {words}, between steps ({waits})."
        more = f"; {_more_workers(ev)}" if part == "workers" else ""
        return f"{level.capitalize()} {words}, capping it at {_capping(ev, supply)} ({waits}{more})."
    if kind == "balanced":
        return (f"Balanced: the loader can supply {rate(supply)} and the step take {rate(st.step_rate)}; neither "
                f"alone limits ({waits}).")
    return f"Compute-bound: the step ({_step_text(ev, st)}) is the limit and the loader keeps up ({waits})."


def _advice(kind: str, whatifs: Sequence) -> str:
    helping = [w for w in whatifs if w.helps]
    if not whatifs:
        return ""
    loader = [w for w in helping if w.name in LOADER_CHANGES]
    text = ""
    if kind.startswith("input/") and kind != "input/workers" and not loader:
        text = "No setting of the loader's knobs lifts this."
    if helping:
        best = sorted(helping, key=lambda w: -w.best_gain)[:2]
        text += " " + "; ".join(f"{w.title}: {w.best_gain * 100:+.0f}% ({w.source})" for w in best) + "."
    elif kind in ("compute", "balanced"):
        text += " Nothing the what-ifs tried is predicted to gain more than the noise."
    return text.strip()


def beaten(result) -> tuple[str, float] | None:
    """The measurement that read highest over the pick's own rate, as (what, ratio): num_workers=0's
    or another config's full burst; None when nothing did. A claim that nothing beat the pick must
    hold against every figure the run printed."""
    tuned = result.tuned
    if not tuned.samples_per_s:
        return None
    found = [("num_workers=0", tuned.baseline_samples_per_s)] if tuned.baseline_samples_per_s else []
    found += [(f"{tr.config.key}'s burst", tr.samples_per_s) for tr in result.trials
              if tr.status == OK and tr.samples_per_s and not tr.pruned and tr.config != tuned.config]
    if not found:
        return None
    what, best = max(found, key=lambda f: f[1])
    return (what, best / tuned.samples_per_s) if best > tuned.samples_per_s else None


def beaten_words(result) -> str:
    over = beaten(result)
    if over is None:
        return ", nothing measured beat it"
    return f"; {over[0]} read {over[1]:.2f}x of its rate"


# What the table, the page and the JSON say for the model's figure when no profile was measured.
NOT_PREDICTED = ("not predicted: the profile was not measured, so the model has no curve and no knee "
                 "(every figure here is measured)")


def profiled(result) -> bool:
    """Whether the run measured its profile (a stand-in from one batch is not one)."""
    profile = getattr(result, "profile", None)
    return profile is not None and getattr(profile, "measured", True)


def load_lines(load) -> list[str]:
    """What the machine's load (a search.load.MachineLoad) says, in words: NOTE [ Others on the machine ]."""
    if load is None or load.others_cpus is None:
        return []
    steal = f", steal {load.steal_cpus:.2f}" if load.steal_cpus else ""
    lines = [f"{others_text(load.others_cpus, load.usable_cpus)} on average while the run measured{steal}"
             + (f", {load.final_others_cpus:.1f} during the final" if load.final_others_cpus is not None else "")]
    lines += [f"{others_text(span.others_cpus, load.usable_cpus)} during "
              + (f"trial {span.first}" if span.first == span.last else f"trials {span.first}-{span.last}")
              + ": these figures are what the machine gives while they run" for span in load.busy_spans]
    if load.busy:
        widened = (f"the final's ties widened by {load.widen * 100:.0f} points where its rounds disagree; "
                   if load.final_others_cpus is not None else "")
        lines.append(f"a busy machine (others past {load.threshold:.0%} of the CPUs): {widened}a nightly comparison "
                     "of this run is inconclusive, and it is no baseline for the next")
    return lines


# The share of the profile's sample stage spent waiting for a CPU past which the table says so.
PROFILE_WAIT_SAID = 0.05


def profile_load_line(profile) -> str | None:
    """What the others' load did to the profile (NOTE [ A profile read under load ]), where it did."""
    share = getattr(profile, "sample_delay_share", None)
    if share is None or share < PROFILE_WAIT_SAID:
        return None
    others = profile.others_cpus
    took = f" (others took {others:.1f} of {cpus(profile.cpus)})" if others is not None else ""
    return (f"the profile's samples waited {share:.0%} of their time for a CPU{took}: their costs are read "
            "without the waits, and the model shares the CPUs with the others' demand")


def rate_basis(result) -> str | None:
    """Where the pick's rate is from when no interleaved final measured it; None where the final did."""
    if getattr(result, "partial", False) or any(f.config == result.tuned.config and f.rates
                                                 for f in getattr(result, "finals", ())):
        return None
    return ("from one burst, no final: no interleaved round measured the pick beside another, so its rate has "
            "no paired comparison")


def caveats(result) -> list[tuple[str, str]]:
    """What qualifies the pick's figures, as (label, text) rows."""
    rows = [("samples/s from", basis) for basis in [rate_basis(result)] if basis]
    rows.append((rule_label(result), rule_line(result)))
    said = profile_load_line(getattr(result, "profile", None))
    rows += [("machine load", text) for text in load_lines(getattr(result, "load", None)) + ([said] if said else [])]
    return rows


def rule_label(result) -> str:
    """The rule's row's label: the cpus-1 rule, or a torchdata.nodes graph as it was given."""
    rule = getattr(result, "rule", None)
    return "graph as given" if rule is not None and rule.loader != DATALOADER else "cpus-1 rule"


def _ranked_otherwise(result) -> str:
    """Where the final's own medians put the pick and the rule in the other order than their medians
    over every paired round, which the choice ranks by (NOTE [ The opening round ]): those medians,
    so that a pick shown below the rule's rate says why it was kept."""
    finals = {f.config: f for f in getattr(result, "finals", ())}
    pick, rule = finals.get(result.tuned.config), finals.get(getattr(result, "rule", None))
    if pick is None or rule is None or pick is rule:
        return ""
    if (pick.median < rule.median) == (pick.round_median < rule.round_median):
        return ""
    ranks = getattr(result, "ranks", 1)
    return (f" (over every paired round, the opening's too, which the choice ranks by: the pick "
            f"{rate(pick.round_median * ranks)}, the rule {rate(rule.round_median * ranks)})")


def rule_line(result) -> str:
    """The line on the rule the tuner replaces: the verdict its paired rounds support, or why none."""
    rule, tuned = getattr(result, "rule", None), result.tuned
    if rule is None:
        return "not measured: this search holds no rule"
    settings = f"num_workers={rule.num_workers}, pin_memory={rule.pin_memory}, persistent"
    if rule.loader != DATALOADER:   # a torchdata.nodes graph's own settings (search/nodes.py)
        settings = "the graph as given: " + ", ".join(f"{k}={v!r}" for k, v in rule.loader_kwargs().items()
                                                      if k not in ("loader", "batch_size"))
    verdict = getattr(result, "verdict", None) or "the pick is the rule's config"
    if rule == tuned.config:
        return f"{verdict} ({settings}){beaten_words(result)}"
    median = getattr(result, "rule_samples_per_s", None)
    if median:
        return f"{rate(median)} ({settings}) in the interleaved final; the pick: {verdict}{_ranked_otherwise(result)}"
    trials = [tr for tr in result.trials if tr.config == rule]
    failed = next((tr for tr in trials if tr.status != OK), None)
    if failed is not None:
        return f"could not run here ({settings}): {clip(failed.describe_failure(), 500)}"
    burst = next((tr for tr in trials if tr.status == OK and tr.samples_per_s), None)
    forecast, inputs = getattr(result, "rule_memory", None), getattr(result, "inputs", None)
    ceiling = inputs.max_memory if inputs is not None else None
    if forecast is not None and ceiling and forecast.host_bytes > ceiling:   # kept out of the final: final.py
        seen = f"; its burst read {rate(burst.samples_per_s)}" if burst is not None else ""
        return (f"the rule's forecast {gib(forecast.host_bytes)} is past the {gib(ceiling)} ceiling: not measured "
                f"in the final ({settings}){seen}")
    if burst is not None:
        rough = " (stopped early: a rough figure)" if burst.pruned else ""
        return (f"not in an interleaved final ({settings}): no round of it fit in the budget, so no interval; its burst "
                f"read {rate(burst.samples_per_s)}{rough}")
    return f"not measured ({settings}): the budget ended before it"
