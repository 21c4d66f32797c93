"""Thin command-line interface over the public API (``bayespass --help``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ._version import __version__

app = typer.Typer(
    name="bayespass",
    help="Honest uncertainty for code-LLM evaluation: pass@k with credible bands, "
    "sandboxed execution, conformal gating and incoherence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

FORMATS = ("table", "json", "csv")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bayespass {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Honest uncertainty for code-LLM evaluation."""


def fail(message: str) -> None:
    """Print an error in the CLI's style and exit with status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def emit(df, fmt: str, *, floatfmt: str = "{:.4f}") -> None:
    """Print a DataFrame as an aligned table, JSON records or CSV."""
    if fmt == "json":
        typer.echo(df.to_json(orient="records", indent=2))
    elif fmt == "csv":
        typer.echo(df.to_csv(index=False), nl=False)
    else:
        typer.echo(df.to_string(index=False, float_format=lambda v: floatfmt.format(v),
                                na_rep="—"))


@app.command()
def estimate(
    counts: Annotated[Path, typer.Argument(help="Counts file: .csv/.jsonl (task,n,c[,model,"
                                           "temperature,benchmark]), evalplus .json, or .nc.")],
    k: Annotated[str, typer.Option(help="Comma-separated k values.")] = "1,10,100",
    method: Annotated[str, typer.Option(help="Comma-separated: naive,unbiased,bb,zoibb,linmix.")]
    = "naive,unbiased,bb,zoibb,linmix",
    format: Annotated[str, typer.Option("--format", help="table, json or csv.")] = "table",
    correctness: Annotated[str, typer.Option(help="For evalplus results: base or plus.")] = "plus",
) -> None:
    """Closed-form pass@k estimates, one row per config and method."""
    import warnings

    from .data.io import read_counts
    from .stats.table import estimate_table

    if format not in FORMATS:
        fail(f"--format {format!r} is not supported; choose one of {sorted(FORMATS)}")
    try:
        ds = read_counts(counts, correctness=correctness)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = estimate_table(ds, k, method=method.split(","))
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(str(err))
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    emit(df, format)


def main() -> None:
    """Entry point of the ``bayespass`` console script."""
    app(prog_name="bayespass")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
