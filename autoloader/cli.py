"""The ``autoloader`` command: a thin layer that turns library errors into click errors."""

from __future__ import annotations

import sys

import click

from . import report
from .errors import AutoloaderError, UsageError
from .space import parse_batch_sizes
from .tuner import DEFAULT_BUDGET_S, DEFAULT_TRIAL_TIMEOUT_S, tune


# --fail-if-changed: the run succeeded and its result is saved, but differs from the last one.
CHANGED_EXIT_CODE = 3


class _Failure(click.ClickException):
    exit_code = 1


@click.group()
def main() -> None:
    """Measure DataLoader settings on this machine and emit the fastest."""


@main.command("tune")
@click.option("--dataset", required=True, metavar="MODULE:ATTR",
              help="A Dataset, or a zero-argument callable returning one; MODULE may be path/to/file.py.")
@click.option("--step", metavar="MODULE:ATTR", help="step(batch), or a zero-argument factory of it.")
@click.option("--batch-size", type=int, help="Batch size, honoured exactly (default 128).")
@click.option("--batch-sizes", metavar="N,N,...", help="Search only these batch sizes.")
@click.option("--budget", type=float, default=DEFAULT_BUDGET_S, show_default=True, help="Wall seconds for the search.")
@click.option("--max-memory", metavar="SIZE", help="Host memory ceiling for the loader's processes, e.g. 16G.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Default: cuda when a GPU is visible.")
@click.option("--out", default="results", show_default=True, metavar="DIR", help="Where results are written.")
@click.option("--storage", metavar="URL", help="Optuna storage URL (default: SQLite beside the result).")
@click.option("--trial-timeout", type=float, default=DEFAULT_TRIAL_TIMEOUT_S, show_default=True,
              help="Seconds a trial may go without progress (no batch, no start) before it is ended as a hang.")
@click.option("--allow-reorder", is_flag=True,
              help="Let the pick deliver batches out of order (DataLoader in_order=False) when that is faster.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--fail-if-changed", is_flag=True,
              help="Exit 3 when the pick or its rate changed since the last result for this dataset under --out "
                   "(on this hardware, else the newest from other hardware). For nightly re-tunes.")
def tune_command(dataset, step, batch_size, batch_sizes, budget, max_memory, device, out, storage,
                 trial_timeout, allow_reorder, as_json, quiet, fail_if_changed) -> None:
    """Tune the DataLoader for --dataset and write DIR/<hardware>/<dataset>.json."""
    try:
        # An empty --batch-sizes is bad input, not an absent option: parse it and say so.
        sizes = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
        result = tune(dataset, step=step, batch_size=batch_size, batch_sizes=sizes, budget=budget,
                      max_memory=max_memory, device=device, out=out, storage=storage,
                      progress=None if quiet else report.ProgressPrinter(), trial_timeout=trial_timeout,
                      allow_reorder=allow_reorder)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except AutoloaderError as exc:
        failure = _Failure(str(exc))
        failure.exit_code = exc.exit_code
        raise failure from None
    click.echo(report.as_json(result) if as_json else report.table(result))
    if fail_if_changed and result.since is not None and result.since.changed:
        click.get_current_context().exit(CHANGED_EXIT_CODE)


if __name__ == "__main__":
    sys.exit(main())
