"""The words of each progress event: the lines the CLI prints and the API logs.

``line(event)`` dispatches on the event's type (a subclass without words of its own gets its
base's); an event with no words gives None. The number formats are every printed figure's.
"""

from __future__ import annotations

import math
from functools import singledispatch

from ..search.paired import compared
from ..search.policy import busy_at
from ..search.results import BUDGET_ENDED, OK
from ..search.shards import profile_note, shards_text, trial_note
from ..errors import clip, one_line
from .kinds import (BusyRecheck, Event, FinalRound, FleetPushed, InRunAdopted, InRunDone, InRunExploring,
                    InRunFollowing, InRunNotAdopted, InRunStarted, NotInRun,
                    Profiled, ResultNotReused, ResultReused, RuleRetried, Retuned, RetuneStarted, SettingsApplied,
                    TrialDone, TrialsUnstored, TuneStarted, WaitingForLock, WaitingForRank, WaitingForTrialStart,
                    WarmStarted)


def gib(n: int | None) -> str:
    return "-" if not n else f"{n / 2**30:.2f} GiB"


def size(nbytes: float | None) -> str:
    """Bytes as people read them: GiB, MiB or KiB to a tenth, whole bytes below; "-" for none."""
    if nbytes is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def rate(r: float | None, unit: str = "/s") -> str:
    """A rate as people read it, the one formatter of every rate autoloader prints: whole numbers
    with thousands separators from 100/s (1,070/s), 3 significant figures below (5.3/s, 0.42/s);
    "-" for none, "unbounded" for infinity. ``unit``: what follows the figure."""
    if r is None:
        return "-"
    if math.isinf(r):
        return "unbounded"
    if abs(r) >= 99.95 or r == 0:
        return f"{r:,.0f}{unit}"
    digits = max(0, 2 - math.floor(math.log10(abs(r))))
    return f"{r:.{digits}f}".rstrip("0").rstrip(".") + unit


def known(x: float | None) -> bool:
    """An interval was estimated: a trial stopped early has none (inf, or None once stored)."""
    return x is not None and math.isfinite(x)


def cpus(n: float) -> str:
    """A count of CPUs with its plural right: "1 CPU", "2 CPUs", "1.5 CPUs"."""
    return f"{n:g} CPU{'' if n == 1 else 's'}"


def provisional_text(why: str) -> str:
    """What every place that hands out or shows a provisional result says (NOTE [ A provisional pick ])."""
    return (f"provisional, not judged ({why}): reused only with this line; a call on a quieter machine "
            "tunes again")


def others_text(others: float, usable: float) -> str:
    return f"other processes used {others:.1f} of {cpus(usable)}"


@singledispatch
def line(event: Event) -> str | None:
    """The words for one progress event (None: the event says nothing)."""
    return None


@line.register(TuneStarted)
def _start(e: TuneStarted) -> str:
    info = e.info
    resumed = f", resuming {e.resumed} finished trials" if e.resumed else ""
    stored = "".join(f" ({getattr(e, name)} {words})" for name, words in _STORED if getattr(e, name))
    length = "iterable" if info.length is None else f"{info.length:,} samples"
    length += shards_text(getattr(info, "shards", None), getattr(info, "shards_from", None), e.max_workers, e.uncapped)
    # A node's tune (node/__init__.py): the CPUs are one rank's; trial lines give the slowest rank's rate.
    where = (f"{e.ranks} ranks at once ({cpus(e.cpus)} and {gib(e.max_memory // e.ranks)} each; "
             f"trial rates are the slowest rank's, the node's is {e.ranks}x), budget {e.budget:.0f} s"
             if e.ranks > 1 else f"{cpus(e.cpus)}, budget {e.budget:.0f} s")
    return (f"autoloader: tuning {e.key} on {e.device} ({where}, "
            f"memory ceiling {gib(e.max_memory)}{ceiling_words(e.ceiling_by, e.cgroup_limit)}): {length}, {info.sample_seconds * 1e3:.2f} ms and "
            f"{info.sample_bytes / 2**10:.1f} KiB a sample{resumed}{stored}")


def ceiling_words(by: str | None, cgroup_limit: int | None) -> str:
    """What set the memory ceiling, as the start line and ``show`` say it ("" where not recorded)."""
    if by == "cgroup":
        return f", set by the cgroup's limit{f' of {gib(cgroup_limit)}' if cgroup_limit else ''}"
    return {"given": ", set by --max-memory", "ram": ", set by the RAM available"}.get(by or "", "")


# The start line's words for the stored trials marked, measured again or left out (store/study.py).
_STORED = (("stale", "interrupted trials marked failed"),
           ("retried", "stopped by a limit since raised, measured again"),
           ("code_changed", "failed under code since changed, measured again"),
           ("crashed_once", "crashed once, tried once more"),
           ("environment", "failed on an OSError (a file, a mount, a permission: fixed outside the code, maybe), "
                           "measured again"),
           ("invalid", "stored records invalid, ignored"))


@line.register(Retuned)
def _retuned(e: Retuned) -> str:
    o = e.outcome
    if o.error:
        said = "INCONCLUSIVE" if o.status == "inconclusive" else "FAILED"   # nothing measured, for the clock's reason
        return f"  {o.name}: {said} {clip(one_line(o.error), 500)}"
    why = f" ({'; '.join(o.drift.reasons)})" if o.drift is not None and o.drift.reasons else ""
    load = o.drift.load if o.drift is not None else None
    if o.drift is not None and o.drift.inconclusive and load is not None and load.others_cpus is not None:
        why = f" ({others_text(load.others_cpus, load.usable_cpus)}: not judged)"
    return f"  {o.name}: {o.status}{why}" + (", the pick held (stopped early)" if o.early_stop else "")


@line.register(ResultReused)
def _reused(e: ResultReused) -> str:
    t = e.tuned
    said = f"\nautoloader: {provisional_text(t.provisional)}" if getattr(t, "provisional", None) else ""
    return (f"autoloader: using the stored result {e.path}: {t.config.key} at {rate(t.samples_per_s)} "
            f"(tuned on {t.device}; delete it, or pass version=, to tune again){said}")


@line.register(SettingsApplied)
def _applied(e: SettingsApplied) -> str:
    t = e.tuned
    settings = ", ".join(f"{k}={v}" for k, v in t.config.loader_kwargs().items())
    how = "reused" if e.reused else "tuned now"
    where = f"result {e.path}" if e.path else "result not stored"
    said = f"applied {settings} to {e.to}" if e.to else f"picked {settings}"
    provisional = "; provisional" if getattr(t, "provisional", None) else ""
    return f"autoloader: {said} ({how}{provisional}, {rate(t.samples_per_s)}; {where})"


@line.register(Profiled)
def _profile(e: Profiled) -> str:
    p = e.profile
    if e.error:
        return f"  profile: not measured ({clip(one_line(e.error), 500)}); the bursts will correct a rough one"
    q = p.sample_quantiles()
    pin = f", pin {p.pin_s * 1e3:.1f} ms, copy {(p.h2d_pinned_s or 0) * 1e3:.1f} ms" if p.pin_s is not None else ""
    usable = e.cpus or p.cpus
    busy = (f"; {others_text(p.others_cpus, usable)} meanwhile"
            if p.others_cpus is not None and busy_at(p.others_cpus / usable, e.busy) else "")
    g = getattr(p, "growth", None)
    grows = (f"; a worker copies {g.per_sample_bytes / 2**10:.1f} KiB a sample it reads, up to "
             f"{mib(g.ceiling_bytes)}" if g is not None and g.found else
             f"; a worker mapped {mib(g.file_bytes)} of a file's pages (page cache, not copies)"
             if g is not None and g.maps_file else "")
    return (f"  profile [{p.seconds:.1f}s]: a sample {q['median'] * 1e3:.2f} ms (p99 {q['p99'] * 1e3:.2f}, "
            f"max {q['max'] * 1e3:.2f}; {p.sample_cpu_share:.0%} on a CPU), a batch of {p.batch_size} "
            f"{p.batch_bytes / 2**20:.1f} MiB: receive {p.recv_s * 1e3:.1f} ms{pin}, step {p.step_s * 1e3:.1f} ms, "
            f"worker start {p.startup_s:.2f} s, {cpus(p.cpus)}{grows}{profile_note(p)}{busy}{_cut(p)}")


def _cut(p) -> str:
    """A profile cut at its share of the budget says so (NOTE [ A profile within its share ])."""
    cut = getattr(p, "cut_s", None)
    return (f"; cut at its share of the budget ({cut:.0f} s): what did not fit is skipped, for the bursts to "
            "measure" if cut is not None else "")


@line.register(TrialDone)
def _trial(e: TrialDone) -> str:
    r, best = e.result, e.best
    interval = f"±{r.rel_interval * 100:.0f}%" if known(r.rel_interval) else "±?"
    if r.pruned:
        interval = "(stopped early: clearly behind the best)"
    gpu = f" gpu {r.gpu_util * 100:.0f}%" if known(r.gpu_util) else ""
    what = (f"{rate(r.samples_per_s)} {interval} wait {(r.wait_fraction or 0) * 100:.0f}%{gpu}"
            if r.status == OK else f"{'CUT' if r.cause == BUDGET_ENDED else r.status.upper()} {r.describe_failure()}")
    best_text = f" | best {best.config.key} {rate(best.samples_per_s)}" if best else ""
    again = " (a crash can be a one-off: trying it once more)" if e.again else ""
    busy = (f" | {others_text(r.others_cpus, e.cpus)}: the figure is what the machine gives beside them"
            if e.cpus and r.others_cpus is not None and busy_at(r.others_cpus / e.cpus, e.busy) else "")
    note = trial_note(r)
    busy += f" | {note}" if note else ""
    return f"  trial {e.n} of ~{e.expected} [{e.elapsed:.0f}s] {r.config.key}: {what}{again}{best_text}{busy}"


@line.register(BusyRecheck)
def _recheck(e: BusyRecheck) -> str:
    load = e.load
    return (f"  a busy machine ({others_text(load.others_cpus, load.usable_cpus)}): the configs that decide "
            f"the pick measured again, interleaved: {', '.join(e.configs)}")


# A long wait, said while it lasts (probe/driver.py): for another process's tune of the same
# dataset, the trial process's start-up, or a rank of a node's tune.

@line.register(WaitingForLock)
def _lock(e: WaitingForLock) -> str:
    holder = f" (pid {e.holder})" if e.holder else ""
    return (f"autoloader: another process{holder} is tuning this dataset into {e.out}; waiting for "
            f"it to finish, then {e.then} (tunes of one problem take turns, so "
            "neither measures on cores the other is using)")


@line.register(WaitingForTrialStart)
def _trial_start(e: WaitingForTrialStart) -> str:
    clipped = ", clipped to the budget" if e.clipped else ""
    waited = f"{e.waited_s:.0f} s of " if e.waited_s >= 1 else ""   # the first notice comes at once
    return (f"  waiting for the trial process to start and build the dataset and step "
            f"({waited}at most {e.allowed_s:.0f} s{clipped})")


_TASKS = {"start": "start its trial process", "trial": "finish the trial", "command": "take the command",
          "reply": "take this rank's reply", "next": "send its next command"}


@line.register(WaitingForRank)
def _rank(e: WaitingForRank) -> str:
    state = f"; its process is {e.state}" if e.state else ""
    return (f"  waiting for rank {e.rank} of {e.world} to {_TASKS.get(e.task, e.task)} ({e.waited_s:.0f} s{state}; "
            f"given up after {e.bound_s:.0f} s)")


@line.register(RuleRetried)
def _rule_again(e: RuleRetried) -> str:
    r = e.result
    return (f"  the cpus-1 rule's config {r.config.key} failed in the run resumed here ({clip(r.describe_failure(), 500)}); "
            "measuring it again, since the pick is held against it")


@line.register(FinalRound)
def _final(e: FinalRound) -> str:
    rates = ", ".join(f"{k} {rate(v[-1]) if v else '-'}" for k, v in e.rates)
    return f"  final round {e.round} of at most {e.rounds} (interleaved): {rates}"


# The events whose words are one template of their fields.
_TEMPLATES = {
    RetuneStarted: "autoloader retune [{e.n}/{e.of}] {e.name}",
    ResultNotReused: "autoloader: tuning again: {e.why}",
    FleetPushed: "autoloader: {e.message}",   # NOTE [ Local first ] in store/study.py
    TrialsUnstored: "autoloader: {e.message}; the search goes on without storing its trials",
}
for _kind, _template in _TEMPLATES.items():
    line.register(_kind, lambda e, template=_template: template.format(e=e))


@line.register(WarmStarted)
def _warm(e: WarmStarted) -> str:
    return f"  {e.key}: warm start {e.warm.describe()}"


# --- a tune in the run (inrun/) ------------------------------------------------------------------

def loader_args(config, keep_persistent: bool = False) -> str:
    """A config as the run's lines name it: its DataLoader arguments less the batch size (the
    run's own) and, unless ``keep_persistent``, persistent_workers (kept while tuning in any case)."""
    kw = config.loader_kwargs()
    kw.pop("batch_size", None)
    if not keep_persistent:
        kw.pop("persistent_workers", None)
    return ", ".join(f"{k}={v}" for k, v in kw.items())


@line.register(NotInRun)
def _not_in_run(e: NotInRun) -> str:
    return f"autoloader: tuning before the run, not in it: {e.why}"


@line.register(InRunStarted)
def _in_run_start(e: InRunStarted) -> str:
    if e.profile_seconds is None:
        profiled = "the rule, without a profile"
    else:
        took = f"{e.profile_seconds * 1000:.0f} ms" if e.profile_seconds < 1 else f"{e.profile_seconds:.1f} s"
        profiled = f"a {took} profile's guess"
    return (f"autoloader: tuning {e.key} in the run, over the first epoch(s) of the loop: starting from "
            f"{loader_args(e.start, keep_persistent=True)} ({profiled}); one line says what was picked")


@line.register(InRunFollowing)
def _following(e: InRunFollowing) -> str:
    holder = f" (pid {e.holder})" if e.holder else ""
    return (f"autoloader: another process{holder} is tuning {e.key} into {e.out}; this run trains with "
            f"{loader_args(e.start, keep_persistent=True)} without tuning (two tunes of one problem would "
            "measure on each other's cores), and takes that tune's pick at the first epoch after it is stored")


@line.register(InRunAdopted)
def _adopted(e: InRunAdopted) -> str:
    return f"autoloader: from epoch {e.epoch}, this run reads with {loader_args(e.pick)}: the pick the other tune stored in {e.path}"


@line.register(InRunNotAdopted)
def _not_adopted(e: InRunNotAdopted) -> str:
    return (f"autoloader: the other tune stored {loader_args(e.pick)} in {e.path}, but its memory forecast "
            f"({size(e.forecast)}) is past this run's limit ({size(e.limit)}): this run goes on with "
            f"{loader_args(e.kept)}, untuned (pass max_memory= higher where the machine has the room, or "
            "start this run after the other ends)")


@line.register(InRunExploring)
def _exploring(e: InRunExploring) -> str:
    return (f"autoloader: epoch {e.epoch} ended with the tune in the run still exploring ({e.rounds} paired "
            f"round(s) of {e.configs or 1} config(s) read, {loader_args(e.best)} leading); it goes on in the next "
            "epoch(s) and says what it picked once settled")


@line.register(InRunDone)
def _in_run_done(e: InRunDone) -> str:
    tried = "; ".join(f"{loader_args(c)}{' (start)' if c == e.start else ''}{' (the rule)' if c == e.rule else ''}"
                      for c in e.tried)
    words = f"; {compared(e.versus, e.versus_name)}" if e.versus_name is not None else ""
    said = (f"autoloader: tuned in the run over {e.epochs} epoch(s): tried {tried}, climbing from the start "
            f"({e.rounds} pair(s) of readings of {e.segment_s:g} s or more; {e.why}); picked {loader_args(e.pick)}{words}")
    if e.samples_per_s is not None:
        said += (f"; the pick in the loop: {e.samples_per_s:,.0f} samples/s, waiting {e.wait_share * 100:.0f}% "
                 "of the time")
    if e.tuning_cost_s is not None and e.epoch_s:
        if e.tuning_cost_s >= 0:
            said += f"; tuning cost {e.tuning_cost_s:+.1f} s of {e.epoch_s:.1f} s ({e.tuning_cost_s / e.epoch_s * 100:+.0f}%)"
        else:   # the configs read beside the pick were faster than it in those epochs
            said += f"; no tuning cost: the {e.epoch_s:.1f} s took {-e.tuning_cost_s:.1f} s less than the pick's pace would"
    if e.refused:
        refused = list(dict.fromkeys(e.refused))   # a config asked for again is refused again
        named = ", ".join(loader_args(c) for c in refused[:2]) + (f" and {len(refused) - 2} more" if len(refused) > 2 else "")
        said += f"; not started, past the memory forecast: {named}"
    return said + (f"; stored {e.path}" if e.path else "; not stored")
