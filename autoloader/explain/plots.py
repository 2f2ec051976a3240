"""The report's plots, as PNG bytes: matplotlib's Agg backend, one Figure each, no pyplot state.
Every plot's legend says which of its marks are measured and which predicted.
"""

from __future__ import annotations

import io
import math
import statistics

from ..errors import usage
from ..search.results import OK
from ..search.settings import SETTINGS, WORKERS
from . import Explanation
from .evidence import pct, rate
from .thresholds import HIGHLY_INPUT_BOUND, MODERATELY_INPUT_BOUND
from .whatif import ladder

MODEL, MEASURED, FINAL, PICK, RULE, LIMIT = "#1f5fa8", "#2b2b2b", "#d1495b", "#f2a900", "#6a8d3a", "#8a2be2"
GREY = "#8c8c8c"
WIDTH, HEIGHT, DPI = 7.2, 4.3, 110


def require():
    """matplotlib, or a UsageError with the install line (the ``[report]`` extra)."""
    try:
        import matplotlib
    except ImportError:
        raise usage("the report draws its plots with matplotlib, which is not installed", "no module matplotlib",
                    "pip install 'torch-autoloader[report]' (or pip install matplotlib)") from None
    matplotlib.use("Agg", force=True)
    return matplotlib


def _figure():
    require()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def _png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _done(fig, ax, xlabel: str, ylabel: str | None, title: str, ncol: int = 3, handles=None, grid: str = "both"):
    """The plot's labels, title and grid, its legend under it (where it covers no mark), as PNG."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    handles = handles or ax.get_legend_handles_labels()[0]
    fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncol=ncol, fontsize=7,
               frameon=False)
    ax.grid(alpha=0.25, axis=grid)
    return _png(fig)


def _curve(ex: Explanation):
    ev = ex.evidence
    configs = ladder(ev.pick, ev.search_cpus, ev.max_workers)
    return configs, [ev.model.predict(c, ev.calibration) for c in configs]


def worker_curve(ex: Explanation) -> bytes:
    """The model's rate along the worker ladder at the pick's settings, and what the run measured."""
    ev = ex.evidence
    fig, ax = _figure()
    configs, predicted = _curve(ex)
    xs = [c.num_workers for c in configs]
    ax.plot(xs, [p.samples_per_s for p in predicted], color=MODEL, lw=2, label="model (predicted)")
    bands = [ev.model.rate_range(c, ev.calibration) for c in configs]
    if any(high > low * 1.01 for low, high in bands):
        ax.fill_between(xs, [b[0] for b in bands], [b[1] for b in bands], color=MODEL, alpha=0.12,
                        label="model's doubt (terms no burst corrected)")
    same = [t for t in ev.ok_trials if _same_settings(t.config, ev.pick)]
    other = [t for t in ev.ok_trials if not _same_settings(t.config, ev.pick)]
    for group, face, label in ((same, MEASURED, "bursts at the pick's settings"),
                               (other, "white", "bursts at other settings")):
        if group:
            ax.errorbar([t.config.num_workers for t in group], [t.samples_per_s for t in group],
                        yerr=[(t.rel_interval or 0.0) * t.samples_per_s for t in group], fmt="o", ms=6,
                        mfc=face, mec=MEASURED, ecolor=MEASURED, capsize=3, label=f"{label} (measured, 95%)")
    rough = ev.pruned_trials
    if rough:
        ax.plot([t.config.num_workers for t in rough], [t.samples_per_s for t in rough], "o", ms=6, mfc="white",
                mec=GREY, label="bursts stopped early (measured, rough)")
    finals = [f for f in ev.finals if f.rates]
    if finals:
        ax.errorbar([f.config.num_workers for f in finals], [f.median for f in finals],
                    yerr=[[f.median - min(f.rates) for f in finals], [max(f.rates) - f.median for f in finals]],
                    fmt="D", ms=7, color=FINAL, capsize=3, label="final medians (measured, min-max)")
    ax.plot([ev.pick.num_workers], [ev.samples_per_s], marker="*", ms=16, color=PICK, mec=MEASURED,
            ls="none", label=f"pick: {rate(ev.samples_per_s)}", zorder=5)
    marks = [(ev.knee.stops_paying, f"knee: {ev.knee.stops_paying}", 0.02, MODEL, "--", 1)] if ev.knee else []
    marks += [(ev.rule.num_workers, "cpus-1 rule", 0.10, RULE, ":", 1.5)] if ev.rule is not None else []
    for x, label, y, color, ls, lw in marks:
        ax.axvline(x, color=color, ls=ls, lw=lw)
        ax.annotate(label, (x, y), xycoords=("data", "axes fraction"), color=color, fontsize=8, xytext=(3, 0),
                    textcoords="offset points")
    top = max([p.samples_per_s for p in predicted] + [t.samples_per_s for t in ev.ok_trials + rough]
              + [ev.samples_per_s])
    ceiling = ex.ceiling.value
    if math.isfinite(ceiling) and ceiling <= 2.5 * top:
        ax.axhline(ceiling, color=LIMIT, ls="-.", lw=1.2, label=f"ceiling ({ex.ceiling.binding}): {rate(ceiling)}")
        top = max(top, ceiling)
    elif math.isfinite(ceiling):
        ax.annotate(f"ceiling {rate(ceiling)} ({ex.ceiling.binding}), off the chart", (0.99, 0.97),
                    xycoords="axes fraction", ha="right", va="top", fontsize=8, color=LIMIT)
    ax.set_ylim(0, top * 1.15)
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    return _done(fig, ax, "num_workers", "samples/s", "Throughput against workers", ncol=2)


def _same_settings(a, b) -> bool:
    """The same config but for the worker count: every other knob equal where it applies to both."""
    return all(a[k] == b[k] for k in SETTINGS
               if k is not WORKERS and (k.when is None or a.applies(k) and b.applies(k)))


def wait_share(ex: Explanation) -> bytes:
    """The loop's share waiting for data against workers, with TensorFlow's input-bound bands."""
    ev = ex.evidence
    fig, ax = _figure()
    configs, predicted = _curve(ex)
    ax.axhspan(HIGHLY_INPUT_BOUND * 100, 100, color=FINAL, alpha=0.07)
    ax.axhspan(MODERATELY_INPUT_BOUND * 100, HIGHLY_INPUT_BOUND * 100, color=PICK, alpha=0.10)
    ax.text(0.99, (HIGHLY_INPUT_BOUND + 0.02) * 100, f"highly input-bound (>= {pct(HIGHLY_INPUT_BOUND)})",
            transform=ax.get_yaxis_transform(), ha="right", fontsize=7, color=FINAL)
    ax.text(0.99, (MODERATELY_INPUT_BOUND + 0.01) * 100, f"moderately (>= {pct(MODERATELY_INPUT_BOUND)})",
            transform=ax.get_yaxis_transform(), ha="right", fontsize=7, color="#9a6a00")
    ax.plot([c.num_workers for c in configs], [p.wait_share * 100 for p in predicted], color=MODEL, lw=2,
            label="model (predicted)")
    bursts = [(t, t.wait_fraction) for t in ev.ok_trials if t.wait_fraction is not None]
    rough = [(t, t.wait_fraction) for t in ev.pruned_trials if t.wait_fraction is not None]
    finals = [(f, statistics.median(f.waits)) for f in ev.finals if f.waits]
    for points, marker, style, label in ((bursts, "o", dict(ms=6, color=MEASURED), "bursts (measured)"),
                                         (rough, "o", dict(ms=6, mfc="white", mec=GREY),
                                          "bursts stopped early (rough)"),
                                         (finals, "D", dict(ms=7, color=FINAL), "final medians (measured)")):
        if points:
            ax.plot([x.config.num_workers for x, _ in points], [y * 100 for _, y in points], marker, label=label,
                    **style)
    ax.axvline(ev.pick.num_workers, color=PICK, lw=1.5, label=f"pick ({ev.pick.num_workers} workers)")
    ax.set_ylim(0, 105)
    alone = " (no --step: the loader alone)" if ev.step_given is False else ""
    return _done(fig, ax, "num_workers", "% of the loop waiting for data",
                 f"The step's wait for data against workers{alone}")


def memory(ex: Explanation) -> bytes:
    """Every measured trial's peak host (PSS), /dev/shm and device memory against workers, the host
    line the bursts imply (least squares), the limits (named, not drawn, far above everything), and
    the configs a limit kept out."""
    ev = ex.evidence
    fig, ax = _figure()
    gib = 2**30
    trials = ev.ok_trials + ev.pruned_trials
    series = (("peak_pss_bytes", "host (PSS)", MEASURED, "o"), ("peak_shm_bytes", "/dev/shm", MODEL, "s"),
              ("gpu_peak_bytes", "device", RULE, "^"))
    top = 0.0
    for field, label, color, marker in series:
        points = [(t.config.num_workers, getattr(t, field) / gib) for t in trials if getattr(t, field)]
        if points:
            ax.plot(*zip(*sorted(points)), marker=marker, ls="none", ms=6, color=color, label=f"{label} (measured)")
            top = max(top, max(y for _, y in points))
    host = [(t.config.num_workers, t.peak_pss_bytes / gib) for t in trials if t.peak_pss_bytes]
    if len({n for n, _ in host}) >= 2:
        slope, intercept = statistics.linear_regression(*zip(*host))
        xs = [0, ev.max_workers]
        ys = [intercept + slope * x for x in xs]
        ax.plot(xs, ys, color=MEASURED, ls="--", lw=1, alpha=0.6,
                label=f"host line through the bursts: {slope * 1024:,.0f} MiB a worker")
        top = max(top, max(ys))
    notes = []
    for value, label, style, color in ((ev.max_memory, "host ceiling", "--", FINAL),
                                       (ev.shm_free, "/dev/shm free", ":", MODEL)):
        if not value:
            continue
        if value / gib <= 2.0 * max(top, 0.05):
            ax.axhline(value / gib, color=color, ls=style, lw=1.2, label=f"{label} {value / gib:.1f} GiB")
            top = max(top, value / gib)
        else:
            notes.append(f"{label} {value / gib:.1f} GiB (off the chart)")
    if notes:
        ax.annotate("; ".join(notes), (0.99, 0.97), xycoords="axes fraction", ha="right", va="top", fontsize=8,
                    color=FINAL)
    kept = ev.kept_out()
    if kept:
        level = (ev.max_memory / gib) if ev.max_memory and ev.max_memory / gib <= 2.0 * max(top, 0.05) else top
        ax.plot([t.config.num_workers for t in kept], [level] * len(kept), "X", ms=9, color=FINAL,
                label="kept out by memory (not run)")
    ax.axvline(ev.pick.num_workers, color=PICK, lw=1.5, label="pick")
    ax.set_ylim(0, max(top, 0.1) * 1.18)
    return _done(fig, ax, "num_workers", "GiB", "Peak memory against workers")


def predicted_vs_measured(ex: Explanation) -> bytes:
    """The model's rate (under the fitted terms) against every burst's and final's measured rate."""
    ev = ex.evidence
    fig, ax = _figure()
    points = [(t.samples_per_s, ev.model.predict(t.config, ev.calibration).samples_per_s, t.config,
               "burst stopped early" if t.pruned else "burst") for t in ev.ok_trials + ev.pruned_trials]
    points += [(f.median, ev.model.predict(f.config, ev.calibration).samples_per_s, f.config, "final")
               for f in ev.finals if f.rates]
    if not points:
        ax.text(0.5, 0.5, "nothing measured", ha="center", transform=ax.transAxes)
        return _png(fig)
    values = [v for m, p, _, _ in points for v in (m, p)]
    low, high = min(values) * 0.8, max(values) * 1.2
    wide = high / max(low, 1e-9) > 20
    line = [low, high]
    ax.plot(line, line, color=MEASURED, lw=1, label="predicted = measured")
    ax.fill_between(line, [x * 0.9 for x in line], [x * 1.1 for x in line], color=MODEL, alpha=0.10,
                    label="within 10%")
    for kind, plural, marker, color in (("burst", "bursts", "o", MEASURED),
                                        ("burst stopped early", "bursts stopped early", "o", GREY),
                                        ("final", "final medians", "D", FINAL)):
        chosen = [(m, p, c) for m, p, c, k in points if k == kind]
        if chosen:
            ax.plot([m for m, _, _ in chosen], [p for _, p, _ in chosen], marker, ls="none", ms=6, color=color,
                    mfc="white" if kind == "burst stopped early" else color, label=f"{plural} (measured)")
            for index, (m, p, c) in enumerate(sorted(chosen, key=lambda x: x[0]) if kind != "final" else ()):
                # Alternately above and below: neighbouring configs often read alike. The finals are
                # the bursts' configs again, named in the table: left unlabelled.
                ax.annotate(_short(c), (m, p), fontsize=7, xytext=(5, 7 if index % 2 else -11),
                            textcoords="offset points")
    errors = [abs(p / m - 1.0) for m, p, _, _ in points if m]
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if wide:
        ax.set_xscale("log")
        ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}")
    for axis in (ax.xaxis, ax.yaxis):
        if wide:
            from matplotlib.ticker import LogLocator

            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    return _done(fig, ax, "measured samples/s", "predicted samples/s",
                 f"Predicted against measured: median error {statistics.median(errors) * 100:.0f}% over {len(errors)}")


def _short(config) -> str:
    """The config's label on a plot: each knob's ``mark`` where it applies and has one."""
    marks = (k.mark(config[k]) for k in SETTINGS if config.applies(k))
    return " ".join(m for m in marks if m)


def timeline(ex: Explanation) -> bytes:
    """The run in time, as it recorded it (else from the trials' durations)."""
    ev = ex.evidence
    fig, ax = _figure()
    lanes = {"set-up": 3, "profile": 2, "burst": 1, "final": 0}
    by_key = {t.config.key: t for t in ev.trials}
    if ev.timeline:
        marks = list(ev.timeline)
        note = "as recorded"
    else:
        marks, at = [("profile", 0.0, ev.profile.seconds or 0.0, None)], ev.profile.seconds or 0.0
        for t in ev.trials:
            marks.append(("burst", at, at + (t.seconds or 0.0), t.config.key))
            at += t.seconds or 0.0
        note = "durations end to end: this result does not record when each ran"
    for index, (what, start, end, key) in enumerate(marks):
        width = max(end - start, 0.0)
        colour = {"set-up": GREY, "profile": MODEL}.get(what, MEASURED)
        if what == "burst":
            trial = by_key.get(key)
            colour = (GREY if trial is not None and trial.pruned else
                      {OK: MEASURED, "constraint": LIMIT}.get(trial.status if trial else OK, FINAL))
        elif what == "final":
            colour = PICK if key == ev.pick.key else RULE if ev.rule is not None and key == ev.rule.key else FINAL
        y = lanes.get(what, 0)
        if width > 0:
            ax.barh(y, width, left=start, color=colour, height=0.6, edgecolor="white", linewidth=0.8)
        else:
            ax.plot([start], [y], "X", color=colour, ms=8)
        if what == "burst" and key:
            trial = by_key.get(key)
            label = key.split("-")[1] if "-" in key else key
            if trial is not None and trial.status != OK:
                label += " kept out" if trial.status == "constraint" else f" {trial.status}"
            ax.annotate(label, (start + width / 2, y + 0.36 + 0.2 * (index % 2)), fontsize=7, ha="center")
    total = max([ev.tune_seconds or 0.0] + [m[2] for m in marks])
    ax.set_yticks(list(lanes.values()), list(lanes.keys()))
    ax.set_xlim(0, total * 1.03 or 1.0)
    ax.set_ylim(-0.6, 3.6)
    from matplotlib.patches import Patch

    legend = [Patch(color=MEASURED, label="burst"), Patch(color=GREY, label="stopped early / set-up"),
              Patch(color=LIMIT, label="kept out by a limit"), Patch(color=PICK, label="final: the pick"),
              Patch(color=RULE, label="final: the rule"), Patch(color=FINAL, label="final: other / failed")]
    return _done(fig, ax, f"seconds from the run's start ({note})", None, f"The run: {total:.0f} s",
                 handles=legend, grid="x")


# Each plot: its title, its drawer, and whether it draws the model's curve (none where the profile
# was not measured).
PLOTS = {"worker_curve": ("Throughput against workers", worker_curve, True),
         "wait_share": ("The step's wait for data", wait_share, True),
         "memory": ("Peak memory", memory, False),
         "predicted_vs_measured": ("Predicted against measured", predicted_vs_measured, True),
         "timeline": ("The run's timeline", timeline, False)}


# Past this many bursts a plot draws every k-th of them (and the pick's first): matplotlib's time
# grows with every mark, and thousands of trials would take minutes. The page's table lists all.
PLOT_TRIALS = 300


def sampled(ex: Explanation) -> Explanation:
    import dataclasses

    ev = ex.evidence
    if len(ev.trials) <= PLOT_TRIALS:
        return ex
    step = math.ceil(len(ev.trials) / PLOT_TRIALS)
    pick = next((i for i, t in enumerate(ev.trials) if t.config == ev.pick), None)   # its first burst
    trials = tuple(t for i, t in enumerate(ev.trials) if i % step == 0 or i == pick)
    bursts = [m for m in ev.timeline if m[0] == "burst"]
    kept = {id(m) for i, m in enumerate(bursts) if i % step == 0}
    timeline = tuple(m for m in ev.timeline if m[0] != "burst" or id(m) in kept)
    return dataclasses.replace(ex, evidence=dataclasses.replace(ev, trials=trials, timeline=timeline))


def draw(ex: Explanation) -> dict[str, tuple[str, bytes]]:
    """Every plot: name -> (title, PNG bytes); the model's left out where the profile was not measured."""
    ex = sampled(ex)
    return {name: (title, fn(ex)) for name, (title, fn, model) in PLOTS.items() if ex.evidence.profiled or not model}
