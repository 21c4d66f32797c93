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


@app.command("fit")
def fit_cmd(
    counts: Annotated[Path, typer.Argument(help="Counts file (see 'estimate').")],
    model: Annotated[str, typer.Option(help="bb, zoibb or hier.")] = "bb",
    method: Annotated[str, typer.Option(help="mcmc or eb.")] = "mcmc",
    out: Annotated[Path, typer.Option(help="Where to write the InferenceData (netCDF).")] = Path("fit.nc"),
    draws: Annotated[int, typer.Option(help="Draws per chain.")] = 1000,
    tune: Annotated[int, typer.Option(help="Tuning steps per chain (mcmc).")] = 1000,
    chains: Annotated[int, typer.Option(help="Chains (mcmc).")] = 4,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 42,
    correctness: Annotated[str, typer.Option(help="For evalplus results: base or plus.")] = "plus",
) -> None:
    """Fit a PyMC model (MCMC) or an empirical-Bayes approximation and save InferenceData."""
    from .data.io import read_counts
    from .models.fit import fit
    from .stats.curve import passk_curve

    try:
        ds = read_counts(counts, correctness=correctness)
        idata = fit(ds, model, method, draws=draws, tune=tune, chains=chains, seed=seed)
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(str(err))
    idata.to_netcdf(str(out))
    conv = idata.posterior.attrs.get("convergence", "")
    typer.echo(f"wrote {out} (model={model}, method={method}, convergence: {conv})")
    curve = passk_curve(idata, [1, 10, 100])
    emit(curve.to_dataframe().reset_index()[["config", "k", "mean", "eti_lower", "eti_upper"]], "table")


@app.command()
def curve(
    fit_path: Annotated[Path, typer.Argument(metavar="FIT", help="InferenceData netCDF from 'bayespass fit'.")],
    k: Annotated[str, typer.Option(help="Comma-separated k values (any k, also > n).")] = "1,10,100",
    ci_prob: Annotated[float, typer.Option(help="Credible interval probability.")] = 0.9,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of the curves with bands.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json or csv.")] = "table",
) -> None:
    """pass@k with credible intervals from a saved fit; optional plot."""
    import arviz as az

    from .stats.curve import passk_curve, plot_passk_curve

    if format not in FORMATS:
        fail(f"--format {format!r} is not supported; choose one of {sorted(FORMATS)}")
    if not fit_path.exists():
        fail(f"fit file {str(fit_path)!r} does not exist")
    try:
        idata = az.from_netcdf(str(fit_path))
        res = passk_curve(idata, k, ci_prob=ci_prob)
    except (ValueError, TypeError, OSError) as err:
        fail(str(err))
    emit(res.to_dataframe().reset_index(), format)
    if plot is not None:
        import matplotlib.pyplot as plt
        import numpy as np

        from .data.counts import make_counts

        k_max = max(int(x) for x in k.split(","))
        grid = np.unique(np.concatenate([idata.passk.k.values[idata.passk.k.values <= max(k_max, 1)],
                                         np.round(np.logspace(0, np.log10(max(k_max, 2)), 30)).astype(int)]))
        full = passk_curve(idata, grid, ci_prob=ci_prob)
        counts = make_counts(idata.constant_data["n"].values, idata.observed_data["c"].values,
                             task=idata.observed_data.task.values, config=idata.observed_data.config.values)
        ax = plot_passk_curve(full, counts=counts)
        ax.figure.savefig(plot, dpi=120, bbox_inches="tight")
        plt.close(ax.figure)
        typer.echo(f"wrote {plot}", err=True)


@app.command("execute")
def execute_cmd(
    samples: Annotated[Path, typer.Argument(help="evalplus-format samples: .jsonl or a samples directory.")],
    suite: Annotated[str, typer.Option(help="humaneval, humaneval+ or mbpp+.")] = "humaneval",
    dataset: Annotated[Path | None, typer.Option(help="evalplus dataset file for humaneval+/mbpp+.")] = None,
    out: Annotated[Path, typer.Option(help="Run directory (verdict store, samples.nc, counts).")] = Path("run"),
    workers: Annotated[int | None, typer.Option(help="Sandbox slots (default: cores).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address, e.g. tcp://host:8786.")] = None,
    fast_check: Annotated[bool, typer.Option(help="Stop each program at its first failing test.")] = False,
    layer: Annotated[str, typer.Option(help="Sandbox layer: auto, bwrap, seccomp+uid, seccomp, rlimit.")] = "auto",
) -> None:
    """Run every sample in the sandbox; write per-test verdicts and counts to the run directory."""
    from .data.io import write_counts
    from .data.suites import load_suite
    from .execute.engine import execute, to_counts

    try:
        s = load_suite(suite, dataset, workers=workers)
        ds = execute(samples, s, out=out, workers=workers, scheduler=scheduler, fast_check=fast_check,
                     layer=layer)
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(str(err))
    counts = to_counts(ds)
    write_counts(counts, out / "counts.nc")
    write_counts(counts, out / "counts.csv")
    typer.echo(f"sandbox layer: {ds.attrs['sandbox_layer']}; {ds.attrs['n_samples']} samples, "
               f"{ds.attrs['n_unique_programs']} distinct programs; wrote {out}/samples.nc, counts.nc, counts.csv")
    import pandas as pd

    drawn = ds.exists.sum(("task", "sample"))
    rows = pd.DataFrame({"config": ds.config.values, "samples": drawn.values,
                         "pass@1 (plus)": (ds.correct.sum(("task", "sample")) / drawn).values,
                         "pass@1 (base)": (ds.base_correct.sum(("task", "sample")) / drawn).values})
    emit(rows, "table")


def main() -> None:
    """Entry point of the ``bayespass`` console script."""
    app(prog_name="bayespass")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
