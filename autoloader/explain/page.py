"""The report a person opens: one self-contained HTML page (its plots inline, nothing loaded from
the network) and its markdown twin (linking the PNGs written beside it). Every text from the
record is escaped in both: most viewers render markdown as HTML. ``write_report`` writes them
beside the result: ``<key>.html``, ``<key>.md`` and ``<key>.plots/``.

# NOTE [ A report writes what it can ]
# A report is written from a result already stored, so nothing it does may cost the result: each
# file is written on its own, atomically, and one that cannot be written is said, by name and
# reason, while the others are still written. The page is self-contained (its plots inline), so
# it is written whatever became of the PNGs; the markdown twin links them only when they were
# written. Nothing is written through a symbolic link out of the result's folder: a
# ``<key>.plots`` that is a link is not followed, and a page or PNG that is a link is replaced.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import statistics
from dataclasses import dataclass

from ..events.lines import cpus, provisional_text
from ..search.results import OK
from ..search.settings import knobs_of
from ..store.durable import atomic_write_all, write_failure
from . import Explanation, explain
from .verdict import NOT_PREDICTED, caveats
from .evidence import pct, rate
from .thresholds import WORTH_CHANGING
from .whatif import how_sure, top

_GAINS = ("Each gain is the model's: it simulates the loader from the profile, with the efficiency terms the "
          "bursts fitted, under the change, over its rate for the pick; <i>measured</i> where this run also "
          "measured the changed config (the measured gain beside it).")

STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; max-width: 1180px;
       margin: 2em auto; padding: 0 1.2em; }
h1 { font-size: 1.6em; margin-bottom: 0.1em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta { color: #666; font-size: 0.9em; }
.verdict { font-size: 1.08em; background: #fff6e0; border-left: 5px solid #f2a900; padding: 0.8em 1em; }
.kind { font-family: ui-monospace, monospace; background: #eee; padding: 0 0.3em; border-radius: 3px; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.55em; text-align: left; vertical-align: top; }
th { background: #f4f4f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.pick td { background: #fff6e0; } tr.rule td { background: #eef5e6; }
.badge { font-size: 0.75em; padding: 0.05em 0.45em; border-radius: 8px; color: #fff; white-space: nowrap; }
.measured { background: #2b2b2b; } .profiled { background: #1f5fa8; } .predicted { background: #8a2be2; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; white-space: pre-wrap; }
code { white-space: nowrap; font-size: 0.92em; }
.wide { overflow-x: auto; } .wide table { font-size: 0.8em; } .wide th { white-space: normal; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.gap { height: 14px; background: #eee; width: 100%; max-width: 480px; border-radius: 7px; overflow: hidden; }
.gap > div { height: 100%; background: #1f5fa8; }
"""


def _e(value) -> str:
    return html.escape(str(value))


def _prose(value) -> str:
    """Escaped text with its command-line flags as code, so that a line never breaks inside one."""
    return re.sub(r"(?<![\w-])(--[a-z][a-z-]*)", r"<code>\1</code>", _e(value))


def _badge(source: str) -> str:
    return f'<span class="badge {_e(source)}">{_e(source)}</span>'


def _usage(result) -> str:
    kwargs = ",\n                    ".join(f"{k}={v!r}" for k, v in result.config.loader_kwargs().items())
    seeded = "worker_init_fn=seed_worker,\n                    " if result.config.num_workers else ""
    return (f"# the snippet beside the result needs torch and numpy only:\n"
            f"#   {result.snippet_path or '<key>.py'}\n"
            f"from torch.utils.data import DataLoader\n"
            f"from autoloader import seed_worker   # or the snippet's own copy of it\n\n"
            f"loader = DataLoader(dataset, shuffle=True, {seeded}{kwargs})\n"
            f"# or, with the snippet's file on your path: loader = make_loader(dataset)")


def _pick_rows(result, ex: Explanation) -> list[tuple[str, str]]:
    ev, tuned = ex.evidence, result.tuned
    rows = [(k, repr(v)) for k, v in result.config.loader_kwargs().items()]
    interval = tuned.rel_interval
    rows.append(("samples/s (measured)", rate(tuned.samples_per_s)
                 + (f" ±{interval * 100:.1f}%" if interval and math.isfinite(interval) else "")))
    rows.append(("samples/s (the model's)", rate(ev.predicted.samples_per_s * ev.ranks) if ev.profiled
                 else NOT_PREDICTED))
    # The table's own caveats (verdict.py): the rule's words, never a bare ratio.
    if tuned.provisional:
        rows.append(("provisional", provisional_text(tuned.provisional)))
    rows += caveats(result)
    if tuned.baseline_samples_per_s:
        words = "the pick itself" if result.config.num_workers == 0 else f"the pick: {result.baseline_verdict}"
        rows.append(("num_workers=0 (measured)", f"{rate(tuned.baseline_samples_per_s)}; {words}"))
    if ev.ranks > 1:
        rows.append(("node", f"{ev.ranks} ranks, each with this config; samples/s is the node's, the rest per rank"))
    return rows


def _trial_rows(ex: Explanation) -> list[dict]:
    ev = ex.evidence
    rows = []
    finals = {f.config: f for f in ev.finals if f.rates}
    columns = [k.name for k in knobs_of(ev.pick.loader)]   # the knobs of the loader tuned
    for index, t in enumerate(ev.trials, 1):
        kw = t.config.to_dict()
        role = [r for r, on in (("pick", t.config == ev.pick), ("rule", t.config == ev.rule),
                                ("final", t.config in finals)) if on]
        outcome = "stopped early" if t.pruned else t.status
        if t.status != OK:
            outcome += f": {t.describe_failure()}"
        predicted = ev.model.predict(t.config, ev.calibration).samples_per_s if ev.profiled else None
        memory = {name: _short_size(x) for name, x in (("host", t.peak_pss_bytes), ("shm", t.peak_shm_bytes),
                                                       ("device", t.gpu_peak_bytes or None))}
        rows.append({
            "#": str(index), "role": ", ".join(role),
            **{k: ("-" if kw.get(k) is None else str(kw[k])) for k in columns},   # a column per knob
            "outcome": outcome, "samples/s": rate(t.samples_per_s) if t.samples_per_s else "-",
            "±95%": (f"{t.rel_interval * 100:.0f}%" if t.rel_interval is not None and math.isfinite(t.rel_interval)
                     else "-"),
            "waited": pct(t.wait_fraction) if t.wait_fraction is not None else "-",
            "predicted": rate(predicted), **{f"peak {k}": v for k, v in memory.items()}, "s": f"{t.seconds:.1f}",
            "_class": "pick" if "pick" in role else "rule" if "rule" in role else ""})
    return rows


def _short_size(nbytes) -> str:
    if nbytes is None:
        return "-"
    # A no-break space: a figure and its unit stay on one line in a narrow column.
    return f"{nbytes / 2**30:.2f}\u00a0G" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f}\u00a0M"


def _header(result) -> tuple[str, str]:
    hw, made = result.hardware, result.provenance
    title = f"autoloader: {(result.dataset.name if result.dataset else None) or result.dataset_key}"
    meta = (f"key {result.dataset_key} on {hw.fingerprint} ({cpus(hw.cpus) if hw.cpus is not None else 'CPUs not recorded'}, "
            f"{', '.join(hw.gpus or []) or 'no GPU'}; device {result.device}); "
            f"tuned {result.finished_at or 'undated'} by autoloader {(made.autoloader_version if made else None) or '?'}"
            f" in {result.tune_seconds or 0:.0f} s")
    return title, meta


def render_html(result, ex: Explanation, plots: dict[str, tuple[str, bytes]]) -> str:
    """The page of ``result`` (a ``TuneResult``) explained as ``ex``."""
    title, meta = _header(result)
    v = ex.verdict
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>",
           f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1><p class='meta'>{_e(meta)}</p>",
           "<h2 id='pick'>The pick, and how to use it</h2><table>"]
    out += [f"<tr><th>{_e(k)}</th><td>{_e(val)}</td></tr>" for k, val in _pick_rows(result, ex)]
    out.append(f"</table><pre>{_e(_usage(result))}</pre>")
    out += ["<h2 id='verdict'>What limits the run</h2>",
            f"<p class='verdict' id='verdict-text'><span class='kind'>{_e(v.kind)}</span> {_prose(v.paragraph)}</p>",
            "<ol>"]
    out += [f"<li><b>{_e(f.title)}</b> {_badge(f.source)}{' <b>(limits)</b>' if f.limits else ''}: "
            f"{_prose(f.text)}</li>" for f in v.findings]
    out.append("</ol>")
    out += ["<h2 id='whatifs'>What would help</h2>", _whatif_table_html(ex)]
    c = ex.ceiling
    out += ["<h2 id='ceiling'>The ceiling and the gap</h2>", f"<p>{_prose(c.sentence())}</p>"]
    if c.gap is not None:
        out.append(f"<div class='gap' title='tuned / ceiling'><div style='width:{min(1.0, c.gap) * 100:.0f}%'>"
                   f"</div></div>")
    out.append("<h2 id='plots'>Plots</h2>")
    for name, (caption, png) in plots.items():
        encoded = base64.b64encode(png).decode("ascii")
        out.append(f"<figure id='plot-{_e(name)}'><img alt='{_e(caption)}' src='data:image/png;base64,{encoded}'>"
                   f"<figcaption>{_e(caption)}</figcaption></figure>")
    rows = _trial_rows(ex)
    out += ["<h2 id='trials'>Every trial</h2>",
            "<p>DataLoader's own argument names; <i>predicted</i> is the model's rate for the config under the "
            "efficiency terms the bursts fitted, every other figure was measured (peak memory in MiB, M, or "
            "GiB, G: host PSS, /dev/shm growth, device). Role: the pick, the cpus-1 rule, and who was in the "
            "final.</p>",
            "<div class='wide'><table id='trials-table'>"]
    columns = [k for k in (rows[0] if rows else {}) if not k.startswith("_")]
    # DataLoader's names may break after an underscore, so the table fits a page's width.
    out.append("<tr>" + "".join(f"<th>{_e(k).replace('_', '_<wbr>')}</th>" for k in columns) + "</tr>")
    numeric = {"#", "samples/s", "±95%", "waited", "predicted", "s", "peak host", "peak shm", "peak device"}
    for row in rows:
        cells = "".join(f"<td class='num'>{_e(row[k])}</td>" if k in numeric else f"<td>{_e(row[k])}</td>"
                        for k in columns)
        out.append(f"<tr class='{row['_class']}'>{cells}</tr>")
    out.append("</table></div>")
    out.append(_finals_html(ex))
    out.append(f"<p class='meta'>Written by autoloader report from {_e(result.path or 'the result')}; "
               "self-contained: it loads nothing from the network.</p></body></html>")
    return "\n".join(out) + "\n"


def _whatif_rows(ex: Explanation) -> list[tuple[str, list[dict]]]:
    """The what-ifs' rows, under their heading: those predicted to help, then the rest (if any)."""
    rows = [(w.helps, {"change": w.title, "rate": rate(w.rate * ex.evidence.ranks), "gain": w.gain_text(),
                       "source": w.source, "sure": how_sure(ex.evidence, w)["sure"], "how": w.change,
                       "code": "your code" if w.needs_code else "settings"}) for w in ex.whatifs]
    groups = (("Predicted to help", [r for helps, r in rows if helps]),
              ("Considered, not predicted to help", [r for helps, r in rows if not helps]))
    return [(title, group) for title, group in groups if group]


def _whatif_table_html(ex: Explanation) -> str:
    out = [] if top(ex.whatifs) else [f"<p>No change the model was asked about is predicted to gain "
                                      f"{pct(WORTH_CHANGING)} or more.</p>"]
    out.append(f"<p>{_GAINS}</p>")
    for title, rows in _whatif_rows(ex):
        out.append(f"<h3>{_e(title)}</h3><table class='whatifs'><tr><th>change</th><th>rate</th><th>gain</th>"
                   "<th>how sure</th><th>what to change</th></tr>")
        out += [f"<tr><td>{_e(r['change'])}</td><td class='num'>{_e(r['rate'])}</td><td class='num'>{_e(r['gain'])}"
                f"</td><td>{_badge(r['source'])} {_e(r['sure'])}</td>"
                f"<td>{_prose(r['how'])} <i>({_e(r['code'])})</i></td></tr>"
                for r in rows]
        out.append("</table>")
    return "\n".join(out)


def _finals_html(ex: Explanation) -> str:
    finals = [f for f in ex.evidence.finals if f.rates]
    if not finals:
        return "<p>No interleaved final ran (the budget left no time for one): the pick rests on the bursts.</p>"
    out = ["<h3>The interleaved final</h3><table><tr><th>config</th><th>rates per round</th><th>median</th>"
           "<th>median over every round</th><th>waited (median)</th></tr>"]
    for f in finals:
        waits = pct(statistics.median(f.waits)) if f.waits else "-"
        out.append(f"<tr><td>{_e(f.config.key)}</td><td>{_e(_rounds(f))}</td>"
                   f"<td class='num'>{_e(rate(f.median))}</td><td class='num'>{_e(rate(f.round_median))}</td>"
                   f"<td class='num'>{_e(waits)}</td></tr>")
    return "\n".join(out) + f"</table><p>{_e(_MEDIANS)}</p>"


# Both medians: the final's own (the rate reported) and the one the choice ranks by (NOTE [ The
# opening round ] in search/choice.py).
_MEDIANS = ("median: of the final's own rounds (the rate reported); median over every round: the opening "
            "round's too (the search's burst), which is what the choice ranks by.")


def _rounds(final) -> str:
    """A finalist's rates, the opening round's first."""
    opening = [f"{rate(final.opening)} (opening)"] if final.opening else []
    return ", ".join(opening + [rate(r) for r in final.rates])


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    clean = lambda x: str(x).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return (["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
            + ["| " + " | ".join(clean(x) for x in row) + " |" for row in rows])


def render_markdown(result, ex: Explanation, plot_files: dict[str, tuple[str, str]],
                    plots_left_out: str | None = None) -> str:
    """The page's twin; ``plot_files``: name -> (title, path relative to the markdown file);
    ``plots_left_out``: the plots folder, when its PNGs could not be written."""
    return _md_escaped(_markdown(result, ex, plot_files, plots_left_out))


def _md_escaped(text: str) -> str:
    """``text`` with ``<``, ``>`` and ``&`` escaped outside its fenced code blocks."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append(line)
        else:
            out.append(line if fenced else html.escape(line, quote=False))
    return "\n".join(out)


def _markdown(result, ex: Explanation, plot_files: dict[str, tuple[str, str]], plots_left_out: str | None) -> str:
    title, meta = _header(result)
    v, c = ex.verdict, ex.ceiling
    lines = [f"# {title}", "", meta, "", "## The pick, and how to use it", ""]
    lines += _md_table(["setting", "value"], [[k, val] for k, val in _pick_rows(result, ex)])
    lines += ["", "```python", _usage(result), "```", "", "## What limits the run", "",
              f"**{v.kind}**: {v.paragraph}", ""]
    lines += [f"{i}. **{f.title}** ({f.source}{', limits' if f.limits else ''}): {f.text}"
              for i, f in enumerate(v.findings, 1)]
    lines += ["", "## What would help", "", _GAINS.replace("<i>", "*").replace("</i>", "*"), ""]
    for heading, rows in _whatif_rows(ex):
        lines += [f"### {heading}", ""]
        lines += _md_table(["change", "rate", "gain", "how sure", "what to change"],
                           [[r["change"], r["rate"], r["gain"], r["sure"] if r["sure"].startswith(r["source"])
                             else f"{r['source']}: {r['sure']}", f"{r['how']} ({r['code']})"] for r in rows])
        lines.append("")
    lines += ["## The ceiling and the gap", "", c.sentence(), "", "## Plots", ""]
    lines += [f"![{caption}]({path})\n" for caption, path in plot_files.values()]
    if plots_left_out:
        lines += [f"(The plots' PNGs could not be written to {plots_left_out}: the HTML page has them inline.)", ""]
    rows = _trial_rows(ex)
    lines += ["## Every trial", "", "DataLoader's own argument names; *predicted* is the model's rate, every other "
              "figure was measured.", ""]
    if rows:
        columns = [k for k in rows[0] if not k.startswith("_")]
        lines += _md_table(columns, [[r[k] for k in columns] for r in rows])
    finals = [f for f in ex.evidence.finals if f.rates]
    if finals:
        lines += ["", "### The interleaved final", ""]
        lines += _md_table(["config", "rates per round", "median", "median over every round"],
                           [[f.config.key, _rounds(f), rate(f.median), rate(f.round_median)] for f in finals])
        lines += ["", _MEDIANS]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Written:
    """Where a result's report goes, what of it was written (paths) and what could not be (one
    sentence each: what, where, why)."""
    html: str
    markdown: str
    plots: str
    written: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.failed


def report_paths(result_path: str) -> dict[str, str]:
    stem = result_path[:-len(".json")] if result_path.endswith(".json") else result_path
    return {"html": stem + ".html", "markdown": stem + ".md", "plots": stem + ".plots"}


def write_report(result_path: str, result) -> Written:
    """Explain ``result`` (the ``TuneResult`` stored at ``result_path``) and write its page, its
    markdown twin and the PNGs beside it, each that can be (NOTE [ A report writes what it can ])."""
    from .plots import draw

    explained = explain(result)
    plots = draw(explained)
    paths = report_paths(result_path)
    written, failed = [], []
    files = _write_plots(paths, plots, written, failed)
    for what, path, render in (("the report page", paths["html"], lambda: render_html(result, explained, plots)),
                               ("its markdown twin", paths["markdown"],
                                lambda: render_markdown(result, explained, files,
                                                        plots_left_out=None if files or not plots
                                                        else os.path.basename(paths["plots"])))):
        problem = _put(path, render().encode(), what)
        (failed.append(problem) if problem else written.append(path))
    return Written(paths["html"], paths["markdown"], paths["plots"], tuple(written), tuple(failed))


def _write_plots(paths: dict[str, str], plots: dict, written: list, failed: list) -> dict[str, tuple[str, str]]:
    """The PNGs into ``<key>.plots/``: name -> (caption, path relative to the markdown), or {}."""
    folder = paths["plots"]
    if not plots:
        return {}
    if os.path.islink(folder):
        failed.append(f"the plots were not written to {folder}: it is a symbolic link (to {os.readlink(folder)}), "
                      "which a report does not follow out of the result's folder; the page has the plots inline")
        return {}
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        failed.append(write_failure("the plots", folder, exc) + "; the page has them inline")
        return {}
    files = {}
    for name, (caption, png) in plots.items():
        target = os.path.join(folder, f"{name}.png")
        problem = _put(target, png, "the plots")
        if problem:
            failed.append(problem + "; the page has them inline")
            return {}   # the twin links all of them or none
        written.append(target)
        files[name] = (caption, os.path.relpath(target, os.path.dirname(paths["markdown"]) or "."))
    return files


def _put(path: str, content: bytes, what: str) -> str | None:
    """``content`` at ``path``; None when written, else what could not be and why."""
    if os.path.isdir(path) and not os.path.islink(path):
        return f"could not write {what} to {path}: a folder is there (move it away to have the file written)"
    try:
        atomic_write_all({path: content})
    except OSError as exc:
        return write_failure(what, path, exc)
    return None
