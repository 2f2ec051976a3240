"""The retune report as markdown: one table for the run, then a section per dataset."""

from __future__ import annotations

from ..errors import clip
from ..search.policy import SETTINGS_TIE
from ..search.settings import SETTINGS
from ..store.versions import MEASUREMENT_FORMAT, autoloader_version
from ..tuning.compare import DRIFTED, INCONCLUSIVE
from ..tuning.progress import others_text
from ..events.lines import cpus, rate


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
