"""The ``autoloader`` command: a thin layer that turns library errors into click errors."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings

import click

from .store.versions import DISTRIBUTION

from .api import DEFAULT_BUDGET_S, DEFAULT_TRIAL_TIMEOUT_S, tune
from .inputs.options import counted_from
from .errors import AutoloaderError, AutoloaderWarning, InputError, NotSaved, UsageError, usage
from .integrations import formats
from .search.settings import ORDER, START
from .search.space import parse_batch_sizes
from .tuning import progress as report

OUT_HELP = ("Where results are written and looked up (default: $AUTOLOADER_HOME, else the per-user cache "
            "folder, ~/.cache/autoloader on Linux).")


# --fail-if-changed: the run succeeded and its result is saved, but differs from the last one.
CHANGED_EXIT_CODE = 3
# --fail-if-changed and retune: a busy machine, or a rate interval across the threshold band
# (NOTE [ Drift ]): nothing can be said changed or unchanged; the result is saved, marked.
INCONCLUSIVE_EXIT_CODE = 5
INTERRUPTED_EXIT_CODE = 130   # Ctrl-C: the shell's 128 + SIGINT
REPORT_NOT_WRITTEN_EXIT_CODE = 4   # as a run that could not save (NotSaved) and a retune's unwritten report
# --report: the seconds of --budget kept for writing the page after the run (matplotlib's import
# and the plots take seconds), so the command still ends within it.
REPORT_PAGE_S = 6.0


FORMAT_HELP = ("Print the pick as a framework takes it: kwargs (DataLoader keyword arguments), hf "
               "(TrainingArguments' dataloader_* fields) or lightning (a train_dataloader method).")
FORMATS = click.Choice(list(formats.FORMATS))   # one list of the forms: integrations/formats.py


def _one_form(form: str | None, as_json: bool) -> None:
    if form is not None and as_json:
        raise click.UsageError(str(usage("--format and --json each choose what is printed", f"--format {form} --json",
                                         "pass one of them")))


def _print_result(result, form: str | None, as_json: bool, saved: bool = True, stored: tuple[str, ...] = ()) -> None:
    """A tune's result in ``form``, as JSON, or as the table (``stored``: NotSaved.stored)."""
    if form is not None:
        _print_form(result, form)
    else:
        click.echo(report.as_json(result, saved, stored) if as_json else report.table(result, saved, stored))


def _print_form(result, form: str) -> None:
    """``result`` in ``form`` on stdout (the line to paste), and a provisional one's line on stderr."""
    click.echo(formats.render(result, form), nl=False)
    if getattr(result.tuned, "provisional", None):
        from .events.lines import provisional_text

        click.echo(f"autoloader: {provisional_text(result.tuned.provisional)}", err=True)


class _Failure(click.ClickException):
    exit_code = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name=DISTRIBUTION, prog_name="autoloader")
def main() -> None:
    """Measure DataLoader settings on this machine and emit the fastest."""


@main.command("tune", short_help="Tune the DataLoader for a dataset on this machine.")
@click.option("--dataset", required=True, metavar="MODULE:ATTR",
              help="A Dataset, or a zero-argument callable returning one; MODULE may be path/to/file.py.")
@click.option("--step", metavar="MODULE:ATTR", help="step(batch), or a zero-argument factory of it.")
@click.option("--batch-size", type=int, help="Batch size, honoured exactly (default 128).")
@click.option("--batch-sizes", metavar="N,N,...", help="Search only these batch sizes.")
@click.option("--budget", type=float, default=DEFAULT_BUDGET_S, show_default=True, help="Wall seconds for the search.")
@click.option("--max-memory", metavar="SIZE", help="Host memory ceiling for the loader's processes, e.g. 16G.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Default: cuda when a GPU is visible.")
@click.option("--out", metavar="DIR", help=OUT_HELP)
@click.option("--storage", metavar="URL",
              help="Optuna storage URL, e.g. postgresql://user@host/db for a fleet "
                   "(default: SQLite beside the result).")
@click.option("--dataset-version", metavar="TEXT", help="Your label for this data, part of its key.")
@click.option("--trial-timeout", type=float, default=DEFAULT_TRIAL_TIMEOUT_S, show_default=True,
              help="Seconds a trial may go without progress (no batch, no start) before it is ended as a hang.")
@click.option(ORDER.gate.flag, ORDER.gate.option, is_flag=True, help=ORDER.gate.help)
@click.option(START.gate.flag, START.gate.option, is_flag=True, help=START.gate.help)
@click.option("--nproc-per-node", type=int, default=1, show_default=True, metavar="N",
              help="Tune N ranks of one node together (as torchrun --nproc-per-node N trains): every trial runs "
                   "on all of them at once, each on its own GPU and DistributedSampler shard; the pick is per "
                   "rank, its rate the node's.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--format", "form", type=FORMATS, help=FORMAT_HELP + " Instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--fail-if-changed", is_flag=True,
              help="Exit 3 when the pick or its rate changed since the last result for this dataset (on this "
                   "hardware, else the nearest other hardware's): its 95% interval wholly past the threshold; "
                   "exit 5 when the run cannot tell (other processes took so much of the CPUs, or the interval "
                   "stayed across the threshold). For nightly re-tunes.")
@click.option("--report", "write_page", is_flag=True,
              help="Also write the report beside the result: an HTML page and its markdown twin (needs the "
                   "[report] extra).")
def tune_command(dataset, step, batch_size, batch_sizes, budget, max_memory, device, out, storage,
                 dataset_version, trial_timeout, allow_reorder, search_start_method, nproc_per_node, as_json,
                 form, quiet, fail_if_changed, write_page) -> None:
    """Tune the DataLoader for --dataset and write DIR/<hardware>/<dataset>.json."""
    from .inputs import hardware
    from .inputs.problem import resolve_device
    from .node import group, launch

    started = _command_start()
    _one_form(form, as_json)
    with _library_errors():
        if write_page:
            from .explain.plots import require

            require()   # before the run, not after it: a missing extra is bad input
        # An empty --batch-sizes is bad input, not an absent option: parse it and say so.
        sizes = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
        gpus = hardware.gpu_names()
        nproc = group.check_nproc(nproc_per_node, resolve_device(device, gpus), len(gpus), hardware.usable_cpus())
        ranks = launch.launched(nproc) if nproc > 1 else contextlib.nullcontext()
        try:
            with ranks, counted_from(started, REPORT_PAGE_S if write_page else 0.0):
                result = tune(dataset, step=step, batch_size=batch_size, batch_sizes=sizes, budget=budget,
                              max_memory=max_memory, device=device, out=out, storage=storage,
                              progress=False if quiet else report.ProgressPrinter(), trial_timeout=trial_timeout,
                              allow_reorder=allow_reorder, version=dataset_version,
                              search_start_method=search_start_method)
        except NotSaved as exc:
            # The pick is printed all the same: a full disk must not cost the run's answer.
            if exc.result is not None:
                _print_result(exc.result, form, as_json, saved=False, stored=exc.stored)
            raise
    _print_result(result, form, as_json)
    if write_page:
        # stderr under --json or --format, whose stdout is meant to be read by a program or pasted.
        _page_of_a_tune(result, err=as_json or form is not None)
    if fail_if_changed and (result.busy or (result.since is not None and result.since.inconclusive)):
        click.get_current_context().exit(INCONCLUSIVE_EXIT_CODE)
    if fail_if_changed and result.since is not None and result.since.changed:
        click.get_current_context().exit(CHANGED_EXIT_CODE)


def _command_start() -> float:
    """When the command started, for --budget to count from (NOTE [ The budget is a wall bound ]
    in search/budget.py): the process's start when this process is the ``autoloader`` command,
    so the interpreter's start and the imports are spent from it too; else now (``main()`` called
    from Python, in a process that started long before)."""
    argv0 = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.splitext(os.path.basename(argv0))[0] != "autoloader" and argv0 != os.path.abspath(__file__):
        return time.monotonic()
    age = _process_age()
    if age is None:
        import psutil

        try:
            age = time.time() - psutil.Process().create_time()
        except psutil.Error:
            return time.monotonic()
    # At most a minute: a wall clock set back or forth meanwhile must not spend the whole budget.
    return time.monotonic() - min(max(0.0, age), 60.0)


def _process_age() -> float | None:
    """Seconds since this process started, from two clocks that both count from boot: its start
    in clock ticks (/proc/self/stat, field 22) and CLOCK_BOOTTIME now. psutil's create time adds
    the boot time in whole seconds, so its age reads up to a second long. None where either
    clock is not readable."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # after the command's name, which may hold spaces
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _page_of_a_tune(result, err: bool) -> None:
    """``tune --report``: what of the report could not be written is a warning, never the tune's
    failure (NOTE [ A report writes what it can ])."""
    from .errors import one_line
    from .explain.page import write_report

    try:
        with _showing_warnings():
            written = write_report(result.path, result)
    except AutoloaderError as exc:
        click.echo(f"Warning: the report was not written: {exc}", err=True)
        return
    except Exception as exc:  # noqa: BLE001 - the pick is saved; its page must not cost the command's exit
        click.echo(f"Warning: the report was not written ({type(exc).__name__}: {one_line(exc)}); the result "
                   f"is saved at {result.path}", err=True)
        return
    click.echo(report.report_written(written), err=err or not written.complete)



@contextlib.contextmanager
def _library_errors():
    """A library error as click's: usage exits 2, the rest with their own code; autoloader's
    warnings shown meanwhile (``_showing_warnings``)."""
    try:
        with _showing_warnings():
            yield
    except AutoloaderError as exc:
        if isinstance(exc, UsageError) and not isinstance(exc, InputError):   # mistyped: click's usage header
            raise click.UsageError(str(exc)) from None
        failure = _Failure(str(exc))
        failure.exit_code = exc.exit_code
        raise failure from None
    except KeyboardInterrupt:
        click.echo("autoloader: interrupted; the trials finished so far are stored, and the same command "
                   "resumes from them", err=True)
        click.get_current_context().exit(INTERRUPTED_EXIT_CODE)


@main.command("retune", short_help="Re-tune every dataset of a registry; report what drifted.")
@click.argument("registry", type=click.Path(dir_okay=False))
@click.option("--out", metavar="DIR", help=OUT_HELP + " Overrides the registry's [fleet] out.")
@click.option("--storage", metavar="URL", help="Optuna storage URL for every dataset (overrides [fleet] storage).")
@click.option("--reports", metavar="DIR", help="Where the reports go (default: [fleet] reports, else OUT/retune/NAME).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of markdown.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--report", "write_pages", is_flag=True,
              help="Also write each dataset's report page beside its result, linked from the retune report "
                   "(needs the [report] extra).")
def retune_command(registry, out, storage, reports, as_json, quiet, write_pages) -> None:
    """Re-tune every dataset in the TOML REGISTRY and report what drifted.

    Each dataset starts from its last result on this hardware (the stored pick and its neighbours
    first, stopping early when the pick still holds), else from the nearest other hardware's,
    else tunes in full. Results are kept in a dated history; a failed or killed run never
    replaces the last good one. Exit 0 unchanged, 3 drifted (a 95% interval wholly past a
    threshold), 5 inconclusive (a busy machine, or an interval across the threshold), 1 a dataset failed, 2 bad registry (or a
    folder that cannot be written, found before anything runs), 4 the report could not be written
    (it is printed all the same). The registry's format is in autoloader/fleet/registry.py and
    the README."""
    from .fleet import registry as registry_mod
    from .fleet.retune import markdown, retune

    with _library_errors():
        if write_pages:
            from .explain.plots import require

            require()
        loaded = registry_mod.load(registry)
        result = retune(loaded, out=out, storage=storage, reports=reports,
                        progress=None if quiet else report.ProgressPrinter(), pages=write_pages)
    click.echo(report.json_text(result.to_dict()) if as_json else markdown(result), nl=False)
    if result.write_error is not None:   # after the report: stdout has it whatever the disk did
        click.echo(f"Error: {result.write_error}", err=True)
    click.get_current_context().exit(result.exit_code)


@main.command("show", short_help="List the stored results, or print one.")
@click.argument("result", required=False, metavar="[KEY | FINGERPRINT/KEY | FILE]")
@click.option("--out", metavar="DIR", help=OUT_HELP)
@click.option("--storage", metavar="URL", help="Also list the complete runs recorded in this Optuna storage.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@click.option("--format", "form", type=FORMATS, help=FORMAT_HELP + " Needs a RESULT.")
def show_command(result, out, storage, as_json, form) -> None:
    """List the stored results (per hardware and dataset: the pick, its rate, when, by which
    version), or print one."""
    from .fleet import show
    from .inputs.home import resolve_out

    _one_form(form, as_json)
    if form is not None and result is None:
        raise click.UsageError(str(usage("--format prints one result", "no RESULT",
                                         "pass its KEY, FINGERPRINT/KEY or FILE, as autoloader show lists them")))
    with _library_errors():
        if result is None:
            rows = show.listing(resolve_out(out), storage)
            text = show.as_json([r.to_dict() for r in rows]) if as_json else show.listing_text(rows)
            click.echo(text, nl=not as_json)
        else:
            found = show.find(resolve_out(out), result, storage)
            if form is not None:
                _print_form(found, form)
            else:
                # One result's JSON is tune --json's: its record and what the table and page say of it.
                click.echo(show.as_json({**found.to_dict(), **report.explained(found)}) if as_json
                           else show.result_text(found), nl=not as_json)


@main.command("report", short_help="Write a result's report: what limits it, what to change.")
@click.argument("result", metavar="KEY | FINGERPRINT/KEY | FILE")
@click.option("--out", metavar="DIR", help=OUT_HELP)
@click.option("--storage", metavar="URL", help="Also look the result up among the runs recorded in this storage.")
def report_command(result, out, storage) -> None:
    """Write RESULT's report beside it: what limits the run, what to change (with predicted gains),
    the ceiling, plots and every trial, as a self-contained HTML page and a markdown twin. Runs no
    trial. Needs the [report] extra (matplotlib). Exit 4 when a file of it could not be written
    (a read-only or full folder): the others are written, and each one that was not is named."""
    from .explain.page import write_report
    from .explain.plots import require
    from .fleet import show
    from .inputs.home import resolve_out

    with _library_errors():
        require()
        where = resolve_out(out)
        found = show.find(where, result, storage, whole=True)
        written = write_report(show.report_beside(where, found), found)
    click.echo(report.report_written(written))
    if not written.complete:
        failure = _Failure("the report could not be written whole (the lines above say what and why; the result "
                           "is untouched). Fix: make that folder writable or free space there, or move away what "
                           "is in the way, and run the same command again")
        failure.exit_code = REPORT_NOT_WRITTEN_EXIT_CODE
        raise failure


@main.command("dashboard", short_help="Serve optuna-dashboard over the stored studies.")
@click.option("--out", metavar="DIR", help=OUT_HELP)
@click.option("--storage", metavar="URL", help="Serve this Optuna storage (live) instead of the studies under --out.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port to listen on.")
def dashboard_command(out, storage, host, port) -> None:
    """Serve optuna-dashboard over the stored studies (needs the [dashboard] extra)."""
    from .fleet import dashboard
    from .inputs.home import resolve_out

    with _library_errors():
        dashboard.require_dashboard()
        dashboard.check_address(host, port)
        served = dashboard.storage_to_serve(resolve_out(out), storage)
        click.echo(f"autoloader: serving {served.description} at http://{host}:{port}/ (Ctrl-C stops)", err=True)
        dashboard.serve(served, host, port, say=lambda text: click.echo(text, err=True))


@contextlib.contextmanager
def _showing_warnings():
    """autoloader's warnings shown as they come, one "Warning:" line each on stderr."""
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, AutoloaderWarning):
            click.echo(f"Warning: {message}", err=True)
        else:
            original(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", AutoloaderWarning)
        warnings.showwarning = show
        yield


if __name__ == "__main__":
    sys.exit(main())
