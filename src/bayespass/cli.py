"""Thin command-line interface over the public API (``bayespass --help``)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

app = typer.Typer(
    name="bayespass",
    help="Honest uncertainty for code-LLM evaluation: pass@k with credible bands, "
    "sandboxed execution, conformal gating and incoherence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

FORMATS = ("table", "json", "csv", "markdown", "latex")
MACHINE = ("json", "csv")  # every column, every pair, one table; the others are for people to read
#: the start of ArviZ's once-a-day notice of its refactor (pyproject's test filters name it too)
ARVIZ_NOTICE = r"\s*ArviZ is undergoing a major refactor"



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
    warnings.showwarning = _show_warning
    # ArviZ 0.2x announces its coming 1.0 once a day at import: news about the library, not about the user's data
    warnings.filterwarnings("ignore", message=ARVIZ_NOTICE, category=FutureWarning)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
    """Print a warning as the CLI prints its errors: one line, without the library's source line."""
    (file or sys.stderr).write(f"warning: {message}\n")


def fail(message: str) -> None:
    """Print an error in the CLI's style and exit with status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _check_format(format: str) -> None:
    """Refuse an output format the CLI cannot write, before any work."""
    if format not in FORMATS:
        fail(f"--format {format!r} is not supported; choose one of {sorted(FORMATS)}")


def _check_k(k: str, ci_prob: float | None = None) -> None:
    """Refuse a bad --k or --ci-prob, named as the options, before a fit is read or made."""
    from .validate import as_k

    try:
        as_k(k, name="--k")
    except (ValueError, TypeError) as err:
        fail(str(err))
    _check_ci_prob(ci_prob)


def _check_ci_prob(ci_prob: float | None) -> None:
    """Refuse a bad --ci-prob, named as the option, before any work."""
    from .validate import check_prob

    try:
        if ci_prob is not None:
            check_prob(ci_prob, name="--ci-prob")
    except (ValueError, TypeError) as err:
        fail(str(err))


def _check_plot(plot: Path | None, example: str = "figure.png", *, prefix: bool = False) -> None:
    """Refuse a figure path (or, with ``prefix``, path prefix) that cannot be written, before any work.

    The file's suffix picks the format (any that matplotlib writes: .png, .pdf, .svg, ...; none: PNG).
    """
    if plot is None:
        return
    if plot.is_dir():
        fail(f"--plot {str(plot)!r} is a directory; give a file path in it, e.g. {str(plot / example)!r}")
    if not plot.parent.is_dir():
        fail(f"--plot {str(plot)!r}: directory {str(plot.parent)!r} does not exist")
    _check_writable(plot, "--plot")
    if plot.suffix and not prefix and plot.suffix[1:].lower() not in _figure_formats():
        fail(f"--plot {str(plot)!r}: cannot write {plot.suffix!r} figures; end the name with one of "
             + ", ".join("." + f for f in _figure_formats()) + " (or no suffix: PNG)")


@functools.cache
def _figure_formats() -> list[str]:
    """Return the file formats matplotlib writes here (their suffixes, without the dot)."""
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def _plot_prefix(prefix: Path) -> tuple[Path, str]:
    """Split ``--plot`` of compare into (prefix, suffix): a figure format's suffix is kept for every file."""
    if prefix.suffix and prefix.suffix[1:].lower() in _figure_formats():
        return prefix.with_suffix(""), prefix.suffix  # cmp.pdf writes cmp-forest.pdf, not cmp.pdf-forest.png
    return prefix, ".png"


def _check_exists(path: Path, metavar: str) -> None:
    """Refuse a missing input path, naming the argument as the help shows it."""
    if not path.exists():
        fail(f"{metavar} {str(path)!r} does not exist")


def emit(df, fmt: str, *, floatfmt: str = "{:.4f}", where: str = "--format csv or json") -> None:
    """Print a table as text (a :class:`~bayespass.Table` brings its title and caption), JSON, CSV, Markdown or LaTeX.

    ``where``: where the columns a Table's text leaves out are (the command's other formats, a run's files).
    """
    from .results import Table

    if fmt in ("markdown", "latex"):  # the columns and caption of the text table, for a paper or a README
        table = df if isinstance(df, Table) else Table.of(df, "")
        typer.echo(table.to_markdown_section(floatfmt=floatfmt) if fmt == "markdown"
                   else table.to_latex_section(floatfmt=floatfmt))
    elif fmt == "json":
        typer.echo(df.to_json(orient="records", indent=2))
    elif fmt == "csv":
        typer.echo(df.to_csv(index=False), nl=False)
    elif isinstance(df, Table):  # the caption says what the columns are, and what the model assumed
        typer.echo(df.to_text(floatfmt=floatfmt, note=True, where=where))
    else:
        typer.echo(df.to_string(index=False, float_format=lambda v: floatfmt.format(v), na_rep="—"))


@app.command()
def estimate(
    counts: Annotated[list[Path], typer.Argument(help="Counts file: .csv/.jsonl/.parquet (task,n,c[,config,model,"
                                                 "temperature,benchmark], or one row per sample with a passed "
                                                 "column), evalplus .json, .nc (counts, or a "
                                                 "fit: its counts), or a run directory; several are merged "
                                                 "(their configs on the union of their tasks).")],
    k: Annotated[str, typer.Option(help="Comma-separated k values.")] = "1,10,100",
    method: Annotated[str, typer.Option(help="Comma-separated: naive,unbiased,bb,zoibb,linmix.")]
    = "naive,unbiased,bb,zoibb,linmix",
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    correctness: Annotated[str, typer.Option(help="For evalplus results: base or plus.")] = "plus",
) -> None:
    """Closed-form pass@k estimates, one row per config and method."""
    from .stats.table import estimate_table
    from .validate import as_k

    _check_format(format)
    _check_k(k)
    try:
        ds = _read_counts_of(counts, correctness)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = estimate_table(ds, k, method=method.split(","))
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    one = _one_sample_configs(ds)
    if one and set(method.split(",")) & {"bb", "zoibb", "linmix"}:
        typer.echo(f"note: {', '.join(map(repr, one))} {'has' if len(one) == 1 else 'have'} one sample per task, "
                   "where only pass@1 is identified, so the closed-form bb/zoibb/linmix estimates beyond it are "
                   f"undefined (—); 'bayespass fit {_shown_paths(counts)}' gives pass@k with a band as wide as "
                   "the data warrant", err=True)
    if "unbiased" in method.split(","):
        _note_short_tasks(ds, as_k(k), _shown_paths(counts))
    emit(df, format)


def _one_sample_configs(ds) -> list[str]:
    """Return the configs whose every task has at most one sample (the EB fit's status 'mean_only')."""
    n = ds["n"].transpose("config", "task").values
    return [str(c) for c, row in zip(ds["config"].values, n, strict=True) if row.max() <= 1]


def _shown_paths(paths: list[Path]) -> str:
    return " ".join(map(str, paths))


def _read_counts_of(paths: list[Path], correctness: str = "plus", *, metavar: str = "COUNTS"):
    """Return the counts of one input, or of several merged (a config held by two of them is refused)."""
    from .data.counts import merge_counts
    from .data.io import read_counts

    if len(paths) == 1:
        return read_counts(paths[0], correctness=correctness)
    return merge_counts([read_counts(p, correctness=correctness) for p in paths],
                        names=[f"{metavar} {str(p)!r}" for p in paths])


def _note_short_tasks(ds, ks, counts) -> None:
    """Say why the unbiased estimate is '—': some task of the config has fewer samples than k."""
    n = ds["n"].transpose("config", "task").values
    k = int(ks.max())
    short = ((n > 0) & (n < k)).sum(1)
    if not short.any():
        return
    parts = [f"{cfg} smallest n {int(row[row > 0].min())} ({int(s)} of {int((row > 0).sum())} tasks below {k})"
             for cfg, s, row in zip(ds.config.values, short, n, strict=True) if s]
    smallest = [int(row[row > 0].min()) for row in n if (row > 0).any()]
    span = f"{min(smallest)}" + (f" to {max(smallest)}" if max(smallest) > min(smallest) else "")
    more = len(parts) - 4
    said = (f"every config's (smallest n {span})" if len(parts) == n.shape[0] > 4
            else "; ".join(parts[:4]) + (f"; and {more} more config{'s' * (more > 1)}" if more > 0 else ""))
    typer.echo(f"note: the unbiased estimate of pass@k needs k <= n on every task, so it is undefined (—) for k "
               f"above a config's smallest n: {said}. "
               f"'bayespass fit {counts}' "
               "gives pass@k with a band that covers those tasks too, and 'bayespass curve FIT --bounds' the "
               "bounds that assume no prior", err=True)


@app.command("fit")
def fit_cmd(
    counts: Annotated[list[Path], typer.Argument(help="Counts file (see 'estimate') or a run directory (of "
                                                 "'execute' or 'run'); several are merged (their configs on the "
                                                 "union of their tasks).")],
    model: Annotated[str | None, typer.Option(
        help="bb, zoibb, flex, lnorm, shared, hier or auto (stacking); default: the calibration benchmark's "
             "winner (rcParams['stats.model']).")] = None,
    method: Annotated[str | None, typer.Option(
        help="eb (fast: short chains, importance-corrected) or mcmc (long chains, gated on R-hat and ESS); "
             "default eb.")] = None,
    sampler: Annotated[str | None, typer.Option(
        help="Sampler of --method mcmc: hmc (bayespass's, the default; not hier) or a NUTS implementation: "
             "pymc, nutpie, numpyro, blackjax.")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the InferenceData (netCDF).")] = Path("fit.nc"),
    draws: Annotated[int | None, typer.Option(help="Draws per chain (default per method).")] = None,
    tune: Annotated[int | None, typer.Option(help="Warm-up steps per chain (default per method).")] = None,
    chains: Annotated[int | None, typer.Option(help="Chains (default per method).")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (default rcParams['stats.seed']).")] = None,
    correctness: Annotated[str, typer.Option(help="For evalplus results: base or plus.")] = "plus",
    k: Annotated[str, typer.Option(help="Comma-separated k values of the printed table (any k, also > n; "
                                   "'bayespass curve' gives others from the saved fit).")] = "1,10,100",
    ci_prob: Annotated[float | None, typer.Option(
        help="Credible interval probability of the table (default rcParams['stats.ci_prob']).")] = None,
) -> None:
    """Fit a model of per-task success probability and save InferenceData; print pass@k with bands."""
    from .models.fit import fit
    from .stats.curve import curve_table, passk_curve
    from .validate import as_k

    _check_out(out)
    _check_k(k, ci_prob)
    ks = as_k(k)
    try:
        ds = _read_counts_of(counts, correctness)
        idata = fit(ds, model, method, draws=draws, tune=tune, chains=chains, seed=seed, sampler=sampler)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    from .data.io import atomic_netcdf

    atomic_netcdf(idata, out)
    post = idata.posterior.attrs
    typer.echo(f"wrote {out} (model={post['bayespass_model']}, method={post['bayespass_method']}, "
               f"sampler={post.get('sampler', '?')}, convergence: {post.get('convergence', '')})")
    from .models.fit import stacking_table

    if (weights := stacking_table(idata)) is not None:
        typer.echo(str(weights) + "\n")
    emit(curve_table(passk_curve(idata, ks, ci_prob=ci_prob), counts=ds), "table")
    _note_misfit(idata)


def _note_misfit(idata) -> None:
    """Say (on stderr) which configs and statistics the fit's posterior predictive check flags, if any."""
    import textwrap

    from .stats.ppc import misfit_note

    try:
        note = misfit_note(idata)
    except ValueError:  # a fit saved without replicated counts: nothing to check
        return
    if note:
        typer.echo(textwrap.fill(note, 100, initial_indent="note: ", subsequent_indent="      ",
                                 break_on_hyphens=False), err=True)


def _check_out(out: Path) -> None:
    """Fail before any work when ``out`` cannot be written."""
    if out.is_dir():
        fail(f"--out {str(out)!r} is a directory; give a file path")
    if not out.parent.exists():
        fail(f"--out {str(out)!r}: the directory {str(out.parent)!r} does not exist")
    _check_writable(out, "--out")


def _check_target(out: Path, *, directory: bool = True) -> None:
    """Fail before any work where ``--out`` (a run directory, else a file) cannot be written."""
    from ._busy import check_target

    try:
        check_target(out, directory=directory, name="--out", make=False)
    except ValueError as err:
        fail(str(err).replace("--out=", "--out ", 1))


def _check_writable(path: Path, option: str) -> None:
    """Fail before any work where no file can be written beside ``path`` (read-only, no permission)."""
    from .validate import check_writable_dir

    try:
        check_writable_dir(path.parent, name=option, value=path)
    except ValueError as err:
        fail(str(err).replace(f"{option}=", f"{option} ", 1))


@app.command()
def curve(
    fit_path: Annotated[Path, typer.Argument(metavar="FIT_OR_RUN", help="InferenceData netCDF from 'bayespass "
                                             "fit', or a run directory (its main fit, or --fit).")],
    k: Annotated[str, typer.Option(help="Comma-separated k values (any k, also > n).")] = "1,10,100",
    ci_prob: Annotated[float | None, typer.Option(
        help="Credible interval probability (default: a run's own, else rcParams['stats.ci_prob']).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write the curves with bands: a PNG, or PDF, SVG, ... by the "
                                                   "file's suffix.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    fit: Annotated[str | None, typer.Option("--fit", help="With a run directory: which of its fits (fits/NAME.nc, "
                                            "e.g. auto-mcmc); default its main fit.")] = None,
    bounds: Annotated[bool, typer.Option("--bounds", help="Add the assumption-free bounds (bp.passk_bounds: what "
                                         "the counts allow under any spread of p, no prior) beside the band.")]
    = False,
) -> None:
    """pass@k with credible intervals from a saved fit or a run's fit; optional plot."""
    from .data.counts import counts_of_fit
    from .data.io import read_fit
    from .stats.curve import curve_table, passk_curve, plot_passk_curve

    _check_format(format)
    _check_plot(plot)
    _check_k(k, ci_prob)
    ci_prob = _run_own(fit_path, ci_prob=ci_prob)["ci_prob"]  # a run's own: its table again
    fit_path = _fit_file(fit_path, fit)
    try:
        idata = read_fit(fit_path)
        res = passk_curve(idata, k, ci_prob=ci_prob)
    except (ValueError, TypeError, OSError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    from .models.fit import stacking_table

    if (weights := stacking_table(idata)) is not None:
        typer.echo(str(weights), err=True)
    import numpy as np

    counts = counts_of_fit(idata)
    grid = None
    if plot is not None:
        k_max = max(int(x) for x in k.split(","))
        grid = np.unique(np.concatenate([idata.passk.k.values[idata.passk.k.values <= max(k_max, 1)],
                                         np.round(np.logspace(0, np.log10(max(k_max, 2)), 30)).astype(int)]))
    table, free = curve_table(res, hdi=True, bounds_shown=bounds, counts=counts), None
    if bounds:  # one set of linear programs for the table's k and the plot's
        from .stats.bounds import passk_bounds

        free = passk_bounds(counts, res.k.values if grid is None else np.union1d(res.k.values, grid),
                            ci_prob=res.attrs.get("ci_prob"))
        cols = free.sel(k=res.k.values).to_dataframe().unstack("ci_bound")["passk_bounds"]
        cols = cols.rename(columns={"lower": "no-prior lower", "upper": "no-prior upper"})
        table = type(table).of(table.merge(cols.reset_index(), on=["config", "k"]), table.title,
                               note=table.note + " no-prior: bp.passk_bounds, which hold under any spread of p over "
                               "the tasks; where the band is narrower, the model's prior on that spread narrows it.")
    emit(table, format)
    _note_misfit(idata)
    if plot is not None:
        full = passk_curve(idata, grid, ci_prob=ci_prob)
        written = _save_png(plot_passk_curve(full, counts=counts, bounds=None if free is None else free.sel(k=grid)),
                            plot)
        typer.echo(f"wrote {written}", err=True)


@app.command("compare")
def compare_cmd(
    data: Annotated[list[Path], typer.Argument(metavar="RUN_OR_COUNTS...", help="Run directory or counts file "
                                               "(its counts, fitted here), or a fit (.nc from 'bayespass fit'); "
                                               "several runs or counts files (e.g. executed apart) are fitted "
                                               "together, on the union of their tasks.")],
    k: Annotated[str, typer.Option(help="Comma-separated k values (any k, also > n).")] = "1,10,100",
    pairs: Annotated[str | None, typer.Option(help="Only these pairs: 'A:B,C:D' (config names).")] = None,
    model: Annotated[str | None, typer.Option(help="Model when fitting counts (default: the joint model "
                                                   "'shared').")] = None,
    method: Annotated[str | None, typer.Option(help="eb or mcmc when fitting counts.")] = None,
    ci_prob: Annotated[float | None, typer.Option(help="Band probability (default: a run's own, else "
                                                       "rcParams['stats.ci_prob']).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Path prefix: writes PREFIX-forest.png, "
                                                   "PREFIX-prob_better.png and PREFIX-diff.png (the top two at "
                                                   "the first --k, or the first of --pairs, over k up to the "
                                                   "largest --k); "
                                                   "PREFIX.pdf (.svg, ...) writes PDFs (SVGs, ...).")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex (json: one object, "
                                        "'leaderboard', 'prob_better' and the bands' 'ci_prob'; csv: the two "
                                        "tables, a blank line between).")] = "table",
    all_pairs: Annotated[bool, typer.Option("--all-pairs", help="List P(better) for every ordered pair. Default: "
                                            "every pair up to 4 configs; above, in --format table, each config "
                                            "against the next one down the ranking (json and csv list every pair).")]
    = False,
    common_tasks: Annotated[bool, typer.Option("--common-tasks", help="Compare on the tasks every config ran "
                                               "(counts or a run directory; fitted here on those tasks).")] = False,
    benchmark: Annotated[str | None, typer.Option(help="Compare only the configs of this benchmark (the counts' "
                                                  "benchmark column), on its tasks.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the fit, the posterior draws and the ranks' tie-breaks "
                                                  "(bp.compare_configs' seed; default: a run's own, which gives "
                                                  "its leaderboard again, else 0).")] = None,
) -> None:
    """Which config is better, and how sure: leaderboard with rank probabilities and P(better) for every pair."""
    from .stats.ranking import _pairs, _resolve, compare_configs, default_band_fit
    from .validate import split_pair

    _compare_checks(data, format, plot, k, ci_prob, seed)
    own = _run_own(data, seed=seed, ci_prob=ci_prob)  # a run's own: its leaderboard again
    seed, ci_prob = 0 if own["seed"] is None else own["seed"], own["ci_prob"]
    try:
        raw = None if pairs is None else pairs.split(",")
        if raw is not None and any(":" not in p for p in raw):
            fail(f"--pairs must look like 'A:B,C:D'; got {pairs!r}")
        # the fit once: the tables' k and, with --plot, the difference curve's denser k come from it
        idata = _resolve(_compare_input(data, common_tasks, benchmark), model, method, seed,
                         check=lambda cfgs: _pairs(raw, cfgs), progressbar=True)
        saved = None if common_tasks or benchmark else _run_default_fit(data)  # a run's own: not fitted again
        band = default_band_fit(idata, k, seed=seed, progressbar=True, saved=saved)  # once, for tables and plots
        cmp = compare_configs(idata, k=k, pairs=raw, ci_prob=ci_prob, band_fit=band, seed=seed)
        names = {str(x) for x in (*cmp.config.values, *cmp.config_b.values)}
        pair_list = None if raw is None else [split_pair(p, names, name="--pairs") for p in raw]
    except (ValueError, TypeError, OSError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    _say_compared(cmp, reused=band is not None and band is saved)
    _print_comparison(cmp, format, pair_list, all_pairs)
    if plot is not None:
        _compare_plots(cmp, plot, pair_list, idata, band, seed)


def _say_compared(cmp, reused: bool) -> None:
    """Say on stderr which model compared the configs, from how many draws, and whose band was joined."""
    joined = cmp.attrs["band_beyond_samples"]
    whose = f"EB, the run's fits/{joined}-eb.nc" if reused else "EB"
    typer.echo(f"model {cmp.attrs['model']} by {cmp.attrs['method']}; {cmp.attrs['n_draws']} posterior draws"
               + (f"; bands past half the samples drawn also hold the {joined} fit's ({whose})" if joined else ""),
               err=True)


#: options a run directory's own settings (run.json's config) give by default: option -> RunConfig field
_RUN_OWN = {"alpha": "alpha", "splits": "n_splits", "seed": "seed", "tie_break": "tie_break", "ci_prob": "ci_prob"}


def _run_own(path: Path | list[Path], **given) -> dict:
    """Return the options as given, those not given (None) taken from a run directory's own settings.

    A run's tables, figures and report were made with its seed, alpha, splits, tie-break and band probability;
    'gate', 'reliability', 'incoherence', 'curve', 'compare' and 'plan' of its directory use them unless told
    otherwise, so that they print the run's tables again. Says on stderr which it took. Anything else (counts,
    a fit, 'execute''s directory): the options as given.
    """
    from ._run import settings_of

    paths = path if isinstance(path, list) else [path]
    try:
        own = settings_of(paths[0]) if len(paths) == 1 else {}
    except ValueError as err:  # a damaged run.json
        fail(str(err))
    taken = {name: own[_RUN_OWN[name]] for name, v in given.items()
             if v is None and own.get(_RUN_OWN[name]) is not None}
    if taken:
        said = ", ".join(f"--{name.replace('_', '-')} {v}" for name, v in taken.items())
        typer.echo(f"{paths[0]}: the run's own {said} (give the option to change it)", err=True)
    return given | taken


def _run_default_fit(data: list[Path]):
    """Return the default model's EB fit saved in a run directory (``fits/auto-eb.nc``), or None."""
    from ._run import default_fit_of

    return default_fit_of(data[0]) if len(data) == 1 else None


def _compare_checks(data: list[Path], format: str, plot: Path | None, k: str, ci_prob: float | None,
                    seed: int | None) -> None:
    """Refuse compare's bad options and missing inputs before any fit."""
    from .validate import check_seed

    _check_format(format)
    _check_plot(plot, example="compare", prefix=True)  # a prefix: compare-forest.png, ...
    _check_k(k, ci_prob)
    try:
        if seed is not None:
            check_seed(seed, name="--seed")
    except ValueError as err:
        fail(str(err))
    for path in data:
        _check_exists(path, "RUN_OR_COUNTS")


@app.command("allocate")
def allocate_cmd(
    data: Annotated[Path, typer.Argument(metavar="FIT_OR_COUNTS", help="A fit (.nc from 'bayespass fit'), a run "
                                         "directory (its main fit) or counts (fitted with the default model).")],
    k: Annotated[int, typer.Option(help="The pass@k whose band should shrink.")] = 10,
    budget: Annotated[int, typer.Option(help="Samples to give out.")] = 100,
    step: Annotated[int, typer.Option(help="Samples per unit (a task gets a multiple of it).")] = 1,
    pair: Annotated[str | None, typer.Option(help="'A:B': shrink the uncertainty of pass@k[A] - pass@k[B].")] = None,
    max_n: Annotated[int | None, typer.Option(help="Most samples a task may have in all (e.g. those on disk); "
                                                   "fewer than --budget may then be given out.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the candidate draws.")] = 0,
    out: Annotated[Path | None, typer.Option(help="CSV of (config, task, n, c, n_more, gain) for every task.")]
    = None,
) -> None:
    """Say which tasks (and configs) to sample next so the pass@k band shrinks fastest."""
    from .stats.plan import _check_pair, allocate
    from .validate import check_positive_int, check_seed, split_pair

    if out is not None:
        _check_out(out)
    _check_k(k)
    _check_exists(data, "FIT_OR_COUNTS")
    try:
        check_positive_int(budget, name="--budget"), check_positive_int(step, name="--step")  # before a fit
        check_seed(seed, name="--seed")
        if max_n is not None and max_n < 0:
            fail(f"--max-n must be a non-negative integer; got {max_n}")
        if pair is not None and ":" not in pair:
            fail(f"--pair must look like 'A:B'; got {pair!r}")
        idata, configs = _fit_or_counts(data, check=lambda cfgs: _check_pair(pair, cfgs))
        pair_t = None if pair is None else split_pair(pair, configs, name="--pair")
        a = allocate(idata, k=k, budget=budget, step=step, pair=pair_t, max_n=max_n, seed=seed)
    except (ValueError, TypeError, OSError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    df = a[["n_more", "gain"]].to_dataframe().reset_index()
    df.insert(2, "n", idata.constant_data["n"].transpose("config", "task").values.ravel())
    df.insert(3, "c", idata.observed_data["c"].transpose("config", "task").values.ravel())
    top = df[df.n_more > 0].sort_values(["n_more", "gain"], ascending=False)
    now, cut = a.attrs["task_variance"], a.attrs["expected_variance_reduction"]
    typer.echo(f"{int(a.n_more.sum())} samples to {len(top)} (config, task) pairs for pass@{k}"
               f"{' of ' + a.attrs['pair'] if a.attrs['pair'] else ''}; expected variance reduction {cut:.3g}: "
               f"the tasks' part of its standard deviation from {now ** 0.5:.4f} to {max(now - cut, 0) ** 0.5:.4f}",
               err=True)
    _note_to_identify(idata, k)
    from .results import Table

    _print_table(Table.of(top.head(20).assign(gain=[f"{g:.2e}" for g in top.head(20).gain]),
                          "Sample next (top 20; gain: expected reduction of the variance of the dataset pass@k)"))
    if out is not None:
        df.to_csv(out, index=False)
        typer.echo(f"wrote {out}", err=True)


def _note_to_identify(idata, k: int) -> None:
    """Say, for a stack, which configs' pass@k is beyond the samples drawn and what topping up to k would cost."""
    from .stats.plan import identify_note

    note = identify_note(idata, k)
    if note is not None:
        typer.echo(note, err=True)


def _compare_input(data: list[Path], common_tasks: bool, benchmark: str | None = None):
    """Return what 'bayespass compare' fits: a saved fit, a path (its counts), or counts merged from several."""
    fits = [_saved_fit(p) for p in data]
    given = [p for p, f in zip(data, fits, strict=True) if f is not None]
    option = "--common-tasks" if common_tasks else "--benchmark"
    if given and (len(data) > 1 or common_tasks or benchmark is not None):
        fail(f"RUN_OR_COUNTS {str(given[0])!r} is a fit; "
             + ("several inputs must be run directories or counts files (their counts are fitted together)"
                if len(data) > 1 else f"{option} needs counts or a run directory (the comparison is fitted "
                "again on the tasks it keeps)"))
    if len(data) == 1 and not common_tasks and benchmark is None:
        return data[0] if fits[0] is None else fits[0]
    counts = _read_counts_of(data, metavar="RUN_OR_COUNTS")
    if benchmark is not None:
        counts = _of_benchmark(counts, benchmark, _shown_paths(data))
    return _common_tasks(counts, _shown_paths(data)) if common_tasks else counts


def _of_benchmark(counts, name: str, label: str) -> xr.Dataset:
    """Return the configs of one benchmark (``--benchmark``) on the tasks they ran, or exit naming those there are."""
    from .data.counts import benchmarks_of

    named = benchmarks_of(counts)
    if name not in named:
        fail(f"--benchmark {name!r} is not a benchmark of {label!r}; "
             + (f"its configs come from {named}" if named else "its counts name no benchmark (a benchmark column "
                "in a counts file, or the suite of a run)"))
    counts = counts.sel(config=counts.benchmark == name)
    return counts.isel(task=(counts.n > 0).any("config").values)


def _common_tasks(counts, label: str) -> xr.Dataset:
    """Return the counts on the tasks every config ran (``--common-tasks``), or exit saying why."""
    keep = (counts.n > 0).all("config").values
    if not keep.any():
        from .data.counts import benchmarks_of

        named = benchmarks_of(counts)
        fail(f"--common-tasks: no task of {label!r} was run by every config"
             + (f"; its configs come from the benchmarks {named}: compare one with --benchmark NAME"
                if len(named) > 1 else ""))
    typer.echo(f"--common-tasks: {int(keep.sum())} of {keep.size} tasks, those every config ran", err=True)
    return counts.isel(task=keep)


def _saved_fit(data: Path):
    """Return the InferenceData of a fit file (.nc from 'bayespass fit'), loaded; None for anything else."""
    if not (data.is_file() and data.suffix == ".nc" and _is_fit(data)):
        return None
    from .data.io import read_fit

    return read_fit(data)


def _run_fit_name(run: Path, fit: str | None = None) -> str:
    """Return the name of a run directory's fit: ``fit``, or by default its main fit (from run.json)."""
    from ._run import read_run_json
    from .pipeline import _main_fit

    return fit or _main_fit(read_run_json(run))


def _run_main_fit(data: Path):
    """Return a run directory's main fit (``fits/<main>.nc``), loaded, saying so; None where there is none."""
    if not (data.is_dir() and (data / "run.json").exists()):
        return None
    path = data / "fits" / f"{_run_fit_name(data)}.nc"
    if not path.is_file():
        return None
    from .data.io import read_fit

    typer.echo(f"{data}: fit {path.stem}", err=True)
    return read_fit(path)


def _fit_or_counts(data: Path, check=None) -> tuple:
    """Return ``(fit, configs)`` of FIT_OR_COUNTS: a saved fit, a run directory's main fit, or counts.

    Counts (a file, or a directory without a main fit: ``bayespass execute``'s) are fitted with the default
    model after ``check(configs)`` has vetted the other options.
    """
    from .data.io import read_counts
    from .models.fit import fit

    if (idata := _saved_fit(data)) is not None or (idata := _run_main_fit(data)) is not None:
        return idata, [str(x) for x in idata.posterior.config.values]
    counts = read_counts(data)
    configs = [str(x) for x in counts.config.values]
    if check is not None:
        check(configs)
    return fit(counts), configs  # with its progress bar: the default fits four candidates


@app.command("plan")
def plan_cmd(
    data: Annotated[Path, typer.Argument(metavar="FIT_OR_COUNTS", help="A fit (.nc from 'bayespass fit'), a run "
                                         "directory (its main fit) or counts (fitted with the default model).")],
    width: Annotated[float, typer.Option("--width", "--target-width",
                                         help="Target width of the band of pass@k, e.g. 0.05 (bp.plan's "
                                              "target_width).")],
    k: Annotated[int, typer.Option(help="The pass@k whose band is planned.")] = 10,
    n_grid: Annotated[str | None, typer.Option(help="Comma-separated samples per task to try (default: 1, 1.5, "
                                                    "2, 3, 5, 8 times today's, of the configs with the fewest and "
                                                    "the most).")] = None,
    sims: Annotated[int, typer.Option("--sims", "--n-sims", help="Simulated futures per candidate n.")] = 5,
    ci_prob: Annotated[float | None, typer.Option(help="Probability of the band whose width is planned (default: a "
                                                       "run's own, else rcParams['stats.ci_prob']).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the simulated futures.")] = 0,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    plot: Annotated[Path | None, typer.Option(help="Write the expected width against samples per task, with the "
                                                   "target: a PNG, or PDF, SVG, ... by the file's suffix.")] = None,
) -> None:
    """How many samples per task for the pass@k band to reach a width (simulated futures, refitted)."""
    from .stats.plan import plan, plot_plan
    from .validate import check_positive_int, check_seed

    _check_format(format)
    _check_k(k, ci_prob)
    _check_exists(data, "FIT_OR_COUNTS")
    _check_plot(plot, example="plan.png")
    try:
        check_positive_int(sims, name="--sims")  # before a fit
        check_seed(seed, name="--seed")
        if not 0 < width < 1:
            fail(f"--width must be a band width in (0, 1), e.g. 0.05; got {width}")
        try:
            grid = None if n_grid is None else [int(x) for x in n_grid.split(",")]
        except ValueError:
            fail(f"--n-grid must be comma-separated samples per task, e.g. 10,20,50; got {n_grid!r}")
        for x in grid or ():
            check_positive_int(x, name="--n-grid")
        idata, _ = _fit_or_counts(data)
        p = plan(idata, k=k, target_width=width, n_grid=grid, n_sims=sims, seed=seed,
                 ci_prob=_run_own(data, ci_prob=ci_prob)["ci_prob"])  # a run's own: the band --until-width narrowed
    except (ValueError, TypeError, OSError) as err:
        fail(_as_option(str(err), _STATS_OPTIONS))
    if plot is not None:
        typer.echo(f"wrote {_save_png(plot_plan(p), plot)}", err=True)
    if not p.attrs["simulated"] and format == "table":
        now = ", ".join(f"{c} {w:.4f}" for c, w in zip(p.config.values, p.current_width.values, strict=True))
        typer.echo(f"The {p.attrs['ci_prob']:.0%} band of pass@{k} is already at most {width:g} wide ({now}): "
                   "no more samples needed; nothing was simulated (give --n-grid to forecast narrower bands).")
        return
    _print_plan(p, k, width, sims, format)


def _print_plan(p, k: int, width: float, sims: int, fmt: str) -> None:
    """Print a plan: as text, the forecast per n and then, per config, the band today and the samples it needs.

    As CSV or JSON it is one table (the per-config columns on each of a config's rows).
    """
    from .results import Table

    df = p[["expected_width", "width_sd"]].to_dataframe().reset_index()
    per_config = p[["current_width", "reached", "n_needed"]].to_dataframe().reset_index()
    per_config["n_needed"] = per_config["n_needed"].round().astype("Int64")  # <NA>: no n of the grid reaches it
    title = (f"Samples per task for the {p.attrs['ci_prob']:.0%} band of pass@{k} to reach {width:g} (model "
             f"{p.attrs['model']} by {p.attrs['method']}; {sims} simulated futures per n; a forecast: on real data "
             "it has been conservative, benchmarks/RESULTS.md)")
    if fmt in MACHINE:
        _print_table(Table.of(df.merge(per_config, on="config"), title), fmt)
        return
    _print_table(Table.of(df, title, note="expected_width: the band's mean width over futures in which every task "
                          "observed so far has n samples (those drawn, then draws from the fit), refitted; "
                          "width_sd: its standard deviation over them."), fmt)
    _print_table(Table.of(per_config, f"Per config: the band of pass@{k} today and the samples per task it needs",
                          note=f"current_width: the band's width now; reached: it is at most {width:g} wide already; "
                          f"n_needed: the fewest samples per task of those tried whose expected width is at most "
                          f"{width:g} (— where none is: try a larger --n-grid)."), fmt)


def _fit_file(path: Path, fit: str | None) -> Path:
    """Return the fit file of FIT_OR_RUN: the file itself, or a run directory's main fit (or ``fit``)."""
    if not path.exists():
        fail(f"FIT_OR_RUN {str(path)!r} does not exist")
    if path.is_dir():
        if not (path / "run.json").exists():
            hint = (f" ('bayespass execute' wrote its counts: fit them with 'bayespass fit {path}' and pass the fit)"
                    if (path / "counts.nc").exists() else "")
            fail(f"{str(path)!r} is a directory without run.json: pass a fit file or a run directory{hint}")
        name = _run_fit_name(path, fit)
        have = sorted(p.stem for p in (path / "fits").glob("*.nc"))
        if name not in have:
            fail(f"--fit {name!r}: the run directory has no fits/{name}.nc; it has {have}")
        typer.echo(f"{path}: fit {name}", err=True)
        return path / "fits" / f"{name}.nc"
    if fit is not None:
        fail("--fit applies to a run directory; FIT_OR_RUN is a file")
    try:
        ok = _is_fit(path)
    except OSError:
        ok = False
    if not ok:
        fail(f"{str(path)!r} is not a fit (an InferenceData netCDF from 'bayespass fit'); for counts use "
             "'bayespass fit' first, or pass a run directory")
    return path


def _is_fit(path: Path) -> bool:
    """Whether a .nc file holds a fit (a posterior group); a file HDF5 cannot open is left to the counts reader."""
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            return "posterior" in fh
    except OSError:
        return False


def _save_png(ax, path: Path, dpi: int = 120) -> Path:
    """Write the figure of ``ax``, an Axes or an array of them, and close it (PNG, or the path's suffix: .pdf, ...)."""
    import matplotlib.pyplot as plt

    from .stats.panels import figure_of

    if not path.suffix:  # matplotlib writes PATH.png
        path = path.with_name(path.name + ".png")
    fig = figure_of(ax)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path


def _compare_plots(cmp, prefix: Path, pair_list, idata, band_fit=None, seed: int = 0) -> None:
    import numpy as np

    from .stats.ranking import compare_configs, plot_diff_curve, plot_forest, plot_prob_better, ranking_order

    prefix, ext = _plot_prefix(prefix)
    written = []
    if pair_list is None:
        for name, plot in (("forest", plot_forest), ("prob_better", plot_prob_better)):
            written.append(_save_png(plot(cmp), prefix.parent / f"{prefix.name}-{name}{ext}"))
        order = ranking_order(cmp.isel(k=0))
        a, b = (str(cmp.config.values[i]) for i in order[:2])
    else:
        a, b = pair_list[0]
    kmax = max(int(cmp.k.max()), 10)
    grid = np.union1d(cmp.k.values, np.unique(np.round(np.geomspace(1, kmax, 12))).astype(int))
    curve = compare_configs(idata, k=grid, pairs=[(a, b)], ci_prob=cmp.attrs["ci_prob"],  # a curve, not 2 points
                            band_fit=band_fit, seed=seed)
    written.append(_save_png(plot_diff_curve(curve, a, b), prefix.parent / f"{prefix.name}-diff{ext}"))
    typer.echo("wrote " + ", ".join(map(str, written)), err=True)


@app.command("execute")
def execute_cmd(
    samples: Annotated[list[Path], typer.Argument(help="evalplus-format samples: .jsonl files, samples "
                                                       "directories or .parquet/.csv tables, or bigcode- or "
                                                       "lm-evaluation-harness generations files (several: each its "
                                                       "own config, named by its records' model or config, else "
                                                       "by the file).")],
    suite: Annotated[str, typer.Option(help="humaneval, humaneval+ or mbpp+.")] = "humaneval",
    dataset: Annotated[Path | None, typer.Option(help="evalplus dataset file for humaneval+/mbpp+.")] = None,
    out: Annotated[Path, typer.Option(help="Run directory (verdict store, samples.nc, counts).")] = Path("run"),
    workers: Annotated[int | None, typer.Option(help="Sandbox slots (default: cores).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address, e.g. tcp://host:8786.")] = None,
    fast_check: Annotated[bool, typer.Option(help="Stop each program at its first failing test.")] = False,
    layer: Annotated[str, typer.Option(help="Sandbox layer: auto, seccomp+uid (root), seccomp+userns, bwrap.")]
    = "auto",
    max_timeouts: Annotated[int | None, typer.Option(
        help="Timeouts after which a program's remaining tests share one short budget (default 1).")] = None,
    fresh_interpreter: Annotated[bool, typer.Option(help="A fresh interpreter per program (slower).")] = False,
    dedup: Annotated[str, typer.Option(
        help="behaviour: run once the programs that differ only in docstrings, no-op strings or a "
             "__main__ block; text: only textually identical ones.")] = "behaviour",
) -> None:
    """Run every sample in the sandbox; write per-test verdicts and counts to the run directory."""
    from .data.io import write_counts
    from .execution.engine import execute, to_counts
    from .execution.groundtruth import load_suite
    from .execution.harness import check_workers
    from .execution.sandbox import LAYERS, SandboxError, check_layer

    if workers is not None and workers < 1:
        fail(f"--workers must be a positive integer; got {workers}")
    if layer not in LAYERS:
        fail(f"--layer {layer!r} is not supported; choose one of {list(LAYERS)}")
    if dedup not in ("behaviour", "text"):
        fail(f"--dedup {dedup!r} is not supported; choose 'behaviour' or 'text'")
    _check_target(out)
    try:
        check_layer(layer) if scheduler is None else None
        check_workers(workers) if workers is not None else None  # at most one sandbox uid each
        # expected outputs (seconds to load for HumanEval+/MBPP+) after the samples are read and checked
        s = load_suite(suite, dataset, expected=False)
        ds = execute(samples[0] if len(samples) == 1 else samples, s, out=out, workers=workers,
                     scheduler=scheduler, fast_check=fast_check, layer=layer, fresh_interpreter=fresh_interpreter,
                     dedup=dedup,
                     **({} if max_timeouts is None else {"max_timeouts": max_timeouts}))
    except (ValueError, TypeError, FileNotFoundError, ConnectionError, SandboxError) as err:
        fail(_as_option(str(err), {"scheduler": "--scheduler"}))
    counts = to_counts(ds)
    write_counts(counts, out / "counts.nc")
    write_counts(counts, out / "counts.csv")
    if s.source and dataset is None:  # read from MBPP_OVERRIDE_PATH or evalplus's cache: say which file
        typer.echo(f"suite {suite}: {s.source}")
    typer.echo(f"sandbox layer: {ds.attrs['sandbox_layer']}; {ds.attrs['n_samples']} samples, "
               f"{ds.attrs['n_unique_programs']} distinct programs ({ds.attrs['n_run']} run now, "
               f"{ds.attrs['n_twins']} given a behavioural twin's results); "
               f"wrote {out}/samples.nc, counts.nc, counts.csv")
    import pandas as pd

    emit(pd.DataFrame(_execute_summary(ds)), "table")


def _execute_summary(ds) -> dict:
    """Return ``execute``'s table: per config, samples, tasks and pass@1 as ``bayespass estimate`` gives it.

    pass@1 is the mean over the tasks with samples of each task's fraction correct, not the fraction of all
    samples: with more samples on some tasks than others, the pooled fraction weighs those tasks more.
    """
    drawn = ds.exists.sum("sample")
    has = drawn > 0

    def rate(ok):
        return ((ok.sum("sample") / drawn.where(has)).mean("task")).values

    return {"config": ds.config.values, "samples": drawn.sum("task").values, "tasks": has.sum("task").values,
            "pass@1 (plus)": rate(ds.correct), "pass@1 (base)": rate(ds.base_correct)}


def _print_comparison(cmp, fmt: str, pair_list, all_pairs: bool) -> None:
    """Print compare's leaderboard (unless pairs were asked for) and P(better); as JSON, one document of both."""
    from .stats.ranking import leaderboard, prob_better_table

    pb = prob_better_table(cmp, pairs="all" if all_pairs or fmt in MACHINE or pair_list else "auto")
    if fmt == "json" and pair_list is None:  # one JSON document (two arrays one after the other were not)
        doc = {name: json.loads(t.to_dataframe().to_json(orient="records"))
               for name, t in (("leaderboard", leaderboard(cmp)), ("prob_better", pb))}
        # what the tables' titles say: the bands' probability and the model behind them
        doc.update(ci_prob=cmp.attrs["ci_prob"], model=cmp.attrs["model"], method=cmp.attrs["method"])
        typer.echo(json.dumps(doc, indent=2))
        return
    if pair_list is None:
        _print_table(leaderboard(cmp), fmt)
        if fmt == "csv":
            typer.echo("")  # the two CSV tables apart
    _print_table(pb, fmt)


def _print_table(table, fmt: str = "table", *, where: str = "--format csv or json") -> None:
    """Print a :class:`~bayespass.Table` after a blank line (it brings its own title); CSV and JSON without one."""
    if fmt not in MACHINE:
        typer.echo("")
    emit(table, fmt, where=where)


def _temperatures(text: str) -> tuple[float, ...]:
    """Parse ``--temperatures`` (comma-separated numbers)."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        fail(f"--temperatures must be comma-separated numbers; got {text!r}")


def _samples_and_extra(samples: list[Path] | None, extra: list[str]) -> list[Path] | None:
    """Take ``--samples a b`` as ``--samples a --samples b``; 'run' has no arguments of its own."""
    if not extra:
        return samples
    if not samples:
        fail(f"run takes no arguments; got {' '.join(extra)!r} (existing generations: --samples FILE, once per "
             f"file or followed by several files)")
    if len(samples) > 1:  # click keeps no order between repeated options and the files after them
        fail(f"give the sample files either after one --samples (--samples A B C) or with --samples before each; "
             f"got --samples {' --samples '.join(map(str, samples))} and {' '.join(extra)!r}")
    return [*samples, *(Path(a) for a in extra)]


#: the options of a served model, the same in 'bayespass run' and 'bayespass generate'
_Endpoint = Annotated[str | None, typer.Option(help="OpenAI-compatible API root (vLLM, TGI, llama.cpp, hosted), "
                                                    "e.g. http://127.0.0.1:8000/v1.")]
_Api = Annotated[str, typer.Option(help="With --endpoint: completions, chat, or auto (models/*.json).")]
_Concurrency = Annotated[int, typer.Option(help="With --endpoint: requests in flight.")]
_ApiKeyEnv = Annotated[str, typer.Option(help="With --endpoint: environment variable holding the API key.")]
_MaxRetries = Annotated[int, typer.Option(help="With --endpoint: retries per request (429, 5xx, time-outs, refused "
                                               "connections).")]
_Timeout = Annotated[float, typer.Option(help="With --endpoint: seconds per request.")]
_WaitForServer = Annotated[float, typer.Option(help="With --endpoint: seconds to keep asking a server that refuses "
                                                    "connections (one still loading its model) before the first "
                                                    "sample; 0: say at once.")]


def _coder_of(model, samples, endpoint) -> str:
    samples = samples or None  # typer gives an empty list for a repeatable option not given
    if model is not None and samples is not None:
        fail("give --model or --samples, not both")
    if endpoint is not None and model is None:
        fail(f"--endpoint {endpoint} needs --model NAME, the model name the server serves")
    return "samples" if samples is not None else (model or "synthetic")


@app.command("run", context_settings={"allow_extra_args": True})
def run_cmd(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help="Run directory (re-running resumes).")] = Path("runs/demo"),
    suite: Annotated[str, typer.Option(help="humaneval, humaneval+ or mbpp+.")] = "humaneval",
    dataset: Annotated[Path | None, typer.Option(help="evalplus dataset file for humaneval+/mbpp+.")] = None,
    model: Annotated[str | None, typer.Option(help="transformers model id or local path, or with --endpoint the "
                                                   "served model's name (default: the synthetic coder).")] = None,
    endpoint: _Endpoint = None,
    api: _Api = "auto",
    concurrency: _Concurrency = 8,
    api_key_env: _ApiKeyEnv = "OPENAI_API_KEY",
    max_retries: _MaxRetries = 8,
    timeout: _Timeout = 120.0,
    wait_for_server: _WaitForServer = 0.0,
    samples: Annotated[list[Path] | None, typer.Option(help="Start from existing generations (evalplus JSONL, "
                                                           "Parquet or CSV, bigcode or lm-eval samples; several "
                                                           "files: repeat the option or list them after it, each "
                                                           "its own config).")] = None,
    k: Annotated[int, typer.Option(help="Samples per task and temperature.")] = 10,
    temperatures: Annotated[str, typer.Option(help="Comma-separated temperatures.")] = "0.4,0.8,1.2",
    top_p: Annotated[float, typer.Option(help="Nucleus sampling (transformers or endpoint coder).")] = 0.95,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens per sample (transformers or endpoint coder).")] = 512,
    device: Annotated[str, typer.Option(help="Transformers model: auto, cpu, cuda, cuda:N or mps.")] = "auto",
    dtype: Annotated[str, typer.Option(help="Transformers model: auto (bf16/fp16 on a GPU, fp32 on a CPU), "
                                            "float32, bfloat16 or float16.")] = "auto",
    tasks: Annotated[int | None, typer.Option(help="Only the first N tasks of the suite.")] = None,
    fuzz_n: Annotated[int, typer.Option(help="Fuzzed inputs per task for incoherence (0: skip).")] = 100,
    alpha: Annotated[float, typer.Option(help="Target silent-failure rate / miscoverage.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 42,
    workers: Annotated[int | None, typer.Option(help="Sandbox slots (default: cores).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small settings: 30 tasks, K=5, 2 temperatures, short "
                                                       "MCMC (under 2 minutes); --tasks, --k, --temperatures and "
                                                       "--fuzz-n given beside it replace its own.")] = False,
    until_width: Annotated[float | None, typer.Option(help="Generate in rounds (K per task first, then where "
                                                           "the band shrinks most) until the band of "
                                                           "pass@WIDTH_K is at most this wide, e.g. 0.05.")] = None,
    max_samples: Annotated[int | None, typer.Option(help="With --until-width: stop after this many samples in "
                                                         "all (default: 10x the first round).")] = None,
    width_k: Annotated[int, typer.Option(help="With --until-width: the k whose band is narrowed.")] = 10,
    round_size: Annotated[int | None, typer.Option(help="With --until-width: samples per round (default: one "
                                                        "per config and task).")] = None,
    ci_prob: Annotated[float | None, typer.Option(help="Probability of the bands in the tables, figures and report "
                                                       "(and of --until-width's band; default 0.9).")] = None,
    tie_break: Annotated[str, typer.Option(help="Gating: none or random (answer a share of the tasks tied at one "
                                                "score, as 'bayespass gate --tie-break').")] = "none",
) -> None:
    """Run the main job: generate, execute, fit, post-process; tables on screen, report in the run directory."""
    from .pipeline import run

    samples, temps = _samples_and_extra(samples, ctx.args), _temperatures(temperatures)
    kw = dict(suite=suite, dataset=None if dataset is None else str(dataset), coder=_coder_of(model, samples, endpoint),
              samples=None if not samples else str(samples[0]) if len(samples) == 1 else [str(p) for p in samples],
              top_p=top_p, max_new_tokens=max_new_tokens, alpha=alpha, seed=seed, workers=workers, endpoint=endpoint,
              api=api, concurrency=concurrency, api_key_env=api_key_env, max_retries=max_retries, timeout=timeout,
              wait_for_server=wait_for_server, until_width=until_width, max_samples=max_samples, width_k=width_k,
              round_size=round_size, device=device, dtype=dtype, ci_prob=ci_prob, tie_break=tie_break)
    cfg = _run_config(ctx, quick, kw, k=k, temperatures=temps, tasks=tasks, fuzz_n=fuzz_n)
    _print_run(_run_or_fail(run, out, cfg), out)


def _run_config(ctx: typer.Context, quick: bool, kw: dict, **sizes: Any) -> Any:
    """Return the run's RunConfig of ``sizes`` (k, temperatures, tasks, fuzz_n) and ``kw`` (bad values: fail).

    With ``--quick``: its small settings, replaced by those of ``sizes`` given on the command line
    (``--quick --tasks 5``: 5 tasks).
    """
    from .pipeline import RunConfig

    if quick:  # by name: typer may bring its own copy of click's ParameterSource
        sizes = {name: value for name, value in sizes.items()
                 if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"}
    try:
        return RunConfig.quick(**sizes, **kw) if quick else RunConfig(**sizes, **kw)
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(_as_option(str(err)))


def _run_or_fail(run, out: Path, cfg) -> dict:
    """Run the pipeline; bad input, a broken sandbox or endpoint end the command with a clear message."""
    from .execution.sandbox import SandboxError
    from .generate.endpoint import EndpointError

    _check_target(out)
    try:
        return run(out, cfg, echo=lambda m: typer.echo(m, err=True))
    except (ValueError, TypeError, FileNotFoundError, SandboxError) as err:
        fail(str(err))
    except EndpointError as err:
        fail(f"{err}\n(samples received so far are in {out}/samples.jsonl; the same command resumes)")
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: kept in {out} are {_run_left(out)}; run the same command again to resume",
                   err=True)
        _INTERRUPT_SAID.set()
        raise typer.Exit(130) from None
    except Exception as err:
        if not disk_full(err):
            raise
        fail(f"{_full_disk_said(err)}; kept in {out} are {_run_left(out)}: free some space and run the same "
             "command again to resume")


def _run_left(out: Path) -> str:
    """Say what an interrupted run's unfinished stages left that the same command reuses (samples, programs)."""
    import sqlite3

    left = ["the completed stages (run.json)"]
    if (f := out / "samples.jsonl").is_file():
        with open(f, "rb") as fh:
            left.append(f"{sum(1 for line in fh if line.strip()):,} samples (samples.jsonl)")
    for store in (out / "verdicts.sqlite", out / "fuzz" / "verdicts.sqlite"):
        if store.is_file():
            try:
                with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
                    judged = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                continue
            left.append(f"{judged:,} judged programs ({store.relative_to(out)})")
    return ", ".join(left[:-1]) + " and " + left[-1] if len(left) > 1 else left[0]


#: RunConfig fields as the options of 'bayespass run' that set them
_RUN_OPTIONS = {name: f"--{name.replace('_', '-')}" for name in (
    "alpha", "k", "temperatures", "top_p", "fuzz_n", "tasks", "until_width", "max_samples", "width_k", "round_size",
    "ci_prob", "tie_break", "max_new_tokens", "concurrency", "max_retries", "timeout", "wait_for_server", "workers",
    "device", "dtype")}


#: parameters of bp.fit, bp.compare_configs, bp.plan and bp.allocate as the options of the commands that set them
_STATS_OPTIONS = {name: f"--{name.replace('_', '-')}" for name in (
    "model", "method", "sampler", "draws", "tune", "chains", "seed", "correctness", "pairs", "budget", "step",
    "pair")} | {"target_width": "--width", "n_sims": "--sims", "n_grid": "--n-grid"}


def _as_option(msg: str, names: dict = _RUN_OPTIONS) -> str:
    """Name a library parameter in an error message as the command-line option that sets it (``{name: option}``)."""
    import re

    for name, option in names.items():
        msg = msg.replace(f"{name} ({option})", option)
        msg = re.sub(rf"(?<![\w-]){name}=", f"{option} ", msg)
        msg = re.sub(rf"(?<![\w-]){name}(?= must)", option, msg)
    return msg


def _print_run(tables: dict, out: Path) -> None:
    """Print the tables of a run (what 'bayespass run' shows), in the report's order; each brings its title."""
    from .report.html import SECTION_ORDER

    for key in SECTION_ORDER:
        if key in tables and key not in ("prob_better", "gating_diagnostics") and len(tables[key]):
            _print_table(tables[key], where=f"{out}/tables/{key}.csv and the report")
    meta = json.loads((out / "run.json").read_text())
    typer.echo(f"\nwrote {out}/report.html (total {meta.get('timings', {}).get('total', '?')} s)")


def _load(rundir: Path):
    from .pipeline import load_run

    try:
        return load_run(rundir)
    except (FileNotFoundError, ValueError) as err:  # not a run directory, or a damaged file in it
        fail(str(err))


@app.command("gate")
def gate_cmd(
    rundir: Annotated[Path, typer.Argument(help="Run directory (from 'run' or 'execute').")],
    alpha: Annotated[float | None, typer.Option(help="Target silent-failure rate (default: a run's own, else "
                                                     "rcParams['gating.alpha']).")] = None,
    splits: Annotated[int | None, typer.Option(
        "--splits", "--n-splits", help="Random calibration/test splits (default: a run's own, else "
                                       "rcParams['gating.n_splits']).")] = None,
    calib_fraction: Annotated[float | None, typer.Option(
        help="Calibration share of the tasks (default rcParams['gating.calib_fraction']).")] = None,
    signature: Annotated[str, typer.Option(help="verdict, digest or coarse.")] = "verdict",
    variant: Annotated[str, typer.Option(help="crc or conservative.")] = "crc",
    diversity_floor: Annotated[float, typer.Option(help="Min share of distinct programs to answer.")] = 0.0,
    tie_break: Annotated[str | None, typer.Option(help="none or random: break ties between tasks' scores at random "
                                                       "(fixed by --seed), so that the gate can answer a share of "
                                                       "the tasks whose samples all agree instead of all or none "
                                                       "(default: a run's own, else none).")] = None,
    seed: Annotated[int | None, typer.Option(help="Split (and tie-break) seed (default: a run's own, else "
                                                  "rcParams['stats.seed']).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write the risk-coverage figure here (PNG; .pdf, .svg, ...: "
                                                   "by the suffix).")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
) -> None:
    """CRC gating from behavioural clusters vs pass@1, best-of-K and logprob-CRC."""
    from .stats.gating import gate, gate_diagnostics, gate_table, plot_risk_coverage, risk_coverage

    _check_format(format)
    _check_plot(plot)
    samples = _load(rundir)
    own = _run_own(rundir, alpha=alpha, splits=splits, seed=seed, tie_break=tie_break)
    try:
        g = gate(samples, alpha=own["alpha"], n_splits=own["splits"], calib_fraction=calib_fraction,
                 signature=signature, variant=variant, diversity_floor=diversity_floor, seed=own["seed"],
                 tie_break=own["tie_break"] or "none")
    except (ValueError, TypeError) as err:
        fail(_as_option(str(err), {"alpha": "--alpha", "n_splits": "--splits", "calib_fraction": "--calib-fraction",
                                 "signature": "--signature", "variant": "--variant",
                                 "diversity_floor": "--diversity-floor", "tie_break": "--tie-break"}))
    emit(gate_table(g), format)
    if format not in MACHINE:
        _print_table(gate_diagnostics(samples, signature=signature), format)
    if plot is not None:
        ax = plot_risk_coverage(risk_coverage(samples, signature=signature), g)
        typer.echo(f"wrote {_save_png(ax, plot, dpi=110)}", err=True)


@app.command("reliability")
def reliability_cmd(
    rundir: Annotated[Path, typer.Argument(help="Run directory.")],
    alpha: Annotated[float | None, typer.Option(
        help="Miscoverage of the conformal sets (default: a run's own, else rcParams['reliability.alpha']).")] = None,
    splits: Annotated[int | None, typer.Option("--splits", "--n-splits", help="Random splits (default: a run's "
                                               "own, else rcParams['reliability.n_splits']).")] = None,
    delta: Annotated[float | None, typer.Option(
        help="Failure probability of Hoeffding stopping (default rcParams['reliability.delta']).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default: a run's own, else rcParams['stats.seed']).")]
    = None,
    ci_prob: Annotated[float | None, typer.Option(help="Probability of the level's Wilson bounds (default: a run's "
                                                       "own, else rcParams['stats.ci_prob']).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write the set-size vs entropy figure here (PNG; .pdf, "
                                                   ".svg, ...: by the suffix).")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
) -> None:
    """Conformal reliability level, prediction-set coverage and sequential-stopping savings."""
    from .defaults import rc_context
    from .stats.reliability import plot_set_size, reliability, reliability_table

    _check_format(format)
    _check_plot(plot)
    _check_ci_prob(ci_prob)
    samples = _load(rundir)
    own = _run_own(rundir, alpha=alpha, splits=splits, seed=seed, ci_prob=ci_prob)
    try:
        with rc_context({} if own["ci_prob"] is None else {"stats.ci_prob": own["ci_prob"]}):
            r = reliability(samples, alpha=own["alpha"], n_splits=own["splits"], delta=delta, seed=own["seed"])
    except (ValueError, TypeError) as err:
        fail(_as_option(str(err), {"alpha": "--alpha", "n_splits": "--splits", "delta": "--delta"}))
    emit(reliability_table(r), format)
    if plot is not None:
        ax = plot_set_size(r)
        typer.echo(f"wrote {_save_png(ax, plot, dpi=110)}", err=True)


@app.command("incoherence")
def incoherence_cmd(
    rundir: Annotated[Path, typer.Argument(help="Run directory with fuzz/samples.nc (from 'run').")],
    n_mc: Annotated[int | None, typer.Option(
        help="Monte-Carlo (pair, input) draws per task (default rcParams['incoherence.n_mc']).")] = None,
    delta: Annotated[float | None, typer.Option(
        help="Confidence parameter of the PAC half-width (default rcParams['incoherence.delta']).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default: a run's own, else rcParams['stats.seed']).")]
    = None,
    plot: Annotated[Path | None, typer.Option(help="Write the incoherence vs error figure here (PNG; .pdf, "
                                                   ".svg, ...: by the suffix).")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
) -> None:
    """Incoherence and error on fuzzed inputs (exact and Monte-Carlo), with the I <= 2E bound."""
    from .stats.incoherence import incoherence, incoherence_summary, pac_n_estimate, plot_incoherence

    _check_format(format)
    _check_plot(plot)
    tree = _load(rundir)
    samples, fuzz = tree, tree if "fuzz_samples" in tree.children else None
    if fuzz is None:
        fail(f"{str(rundir)!r} has no fuzz/samples.nc; run 'bayespass run' with --fuzz-n > 0")
    try:
        inc = incoherence(fuzz, samples=samples, n_mc=n_mc, delta=delta, seed=_run_own(rundir, seed=seed)["seed"])
    except (ValueError, TypeError) as err:
        fail(_as_option(str(err), {"n_mc": "--n-mc", "delta": "--delta"}))
    df = incoherence_summary(inc)
    emit(df, format)
    if format == "table":
        rank = df.attrs.get("rank_agreement")
        if rank is not None:
            typer.echo(f"rank agreement (Spearman, configs) of pass@1 and zero-incoherence rate: {rank:.3f}")
        n_mc, delta = inc.attrs["n_mc"], inc.attrs["delta"]
        typer.echo(f"Monte-Carlo half-width at n={n_mc}, delta={delta}: {inc.attrs['eps']:.4f}; "
                   f"draws for eps=0.05: {pac_n_estimate(0.05, delta)}")
    if plot is not None:
        ax = plot_incoherence(inc)
        typer.echo(f"wrote {_save_png(ax, plot, dpi=110)}", err=True)


@app.command("generate")
def generate_cmd(
    model: Annotated[str, typer.Option(help="transformers model id or local path, 'synthetic', or with "
                                            "--endpoint the served model's name.")],
    endpoint: _Endpoint = None,
    api: _Api = "auto",
    concurrency: _Concurrency = 8,
    api_key_env: _ApiKeyEnv = "OPENAI_API_KEY",
    max_retries: _MaxRetries = 8,
    timeout: _Timeout = 120.0,
    wait_for_server: _WaitForServer = 0.0,
    suite: Annotated[str, typer.Option(help="humaneval, humaneval+ or mbpp+.")] = "humaneval",
    dataset: Annotated[Path | None, typer.Option(help="evalplus dataset file for humaneval+/mbpp+.")] = None,
    k: Annotated[int, typer.Option(help="Samples per task.")] = 8,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.8,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling.")] = 0.95,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens per sample.")] = 512,
    seed: Annotated[int, typer.Option(help="Seed (per task: same seed, same samples).")] = 42,
    tasks: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    device: Annotated[str, typer.Option(help="Transformers model: auto, cpu, cuda, cuda:N or mps.")] = "auto",
    dtype: Annotated[str, typer.Option(help="Transformers model: auto (bf16/fp16 on a GPU, fp32 on a CPU), "
                                            "float32, bfloat16 or float16.")] = "auto",
    out: Annotated[Path, typer.Option(help="Samples JSONL (appended; re-running resumes).")] = Path("samples.jsonl"),
) -> None:
    """Sample K programs per task (resumable JSONL, evalplus format plus logprobs)."""
    from .execution.groundtruth import ground_truth, load_suite
    from .generate.coders import make_coder
    from .generate.endpoint import EndpointError
    from .generate.hf import generate_to_jsonl

    _check_generate_options(k=k, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, tasks=tasks,
                            greedy_ok=endpoint is not None, coder=model, concurrency=concurrency,
                            max_retries=max_retries, timeout=timeout, device=device, dtype=dtype,
                            local=endpoint is None and model != "synthetic", wait_for_server=wait_for_server)
    _check_target(out, directory=False)  # before a model is loaded or expected outputs computed
    coder = None
    try:
        s = load_suite(suite, dataset, expected=False)
        ids = list(s.tasks)[:tasks] if tasks else None
        if model == "synthetic":  # its programs are drawn from pools judged against the expected outputs
            ground_truth(s, tasks=ids)
        coder = make_coder(model, s, tasks=ids, endpoint=endpoint, api=api, concurrency=concurrency, top_p=top_p,
                           max_new_tokens=max_new_tokens, api_key_env=api_key_env, max_retries=max_retries,
                           timeout=timeout, device=device, dtype=dtype, wait_for_server=wait_for_server)
        generate_to_jsonl(coder, s, out, k=k, temperature=temperature, seed=seed, tasks=ids)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as err:
        fail(str(err))
    except EndpointError as err:
        fail(f"{err}\n(samples received so far are in {out})")
    finally:
        if endpoint is not None and coder is not None:
            from .pipeline.stages import endpoint_summary

            typer.echo(endpoint_summary(coder), err=True)
    typer.echo(f"wrote {out}")


#: parameters of 'bayespass generate' as its options, for the messages of the shared checks
_GENERATE_OPTIONS = {"k": "--k", "concurrency": "--concurrency", "tasks": "--tasks", "temperature": "--temperature",
                     "top_p": "--top-p", "max_new_tokens": "--max-new-tokens"}


def _check_generate_options(*, k: int, temperature: float, top_p: float, max_new_tokens: int, tasks: int | None,
                            greedy_ok: bool, coder: str, concurrency: int, max_retries: int, timeout: float,
                            device: str = "auto", dtype: str = "auto", local: bool = True,
                            wait_for_server: float = 0.0) -> None:
    """Refuse generation settings no coder accepts, before a suite or a model is loaded."""
    from .generate.hf import check_local_options
    from .validate import check_decoding, check_positive_int, check_wait

    try:
        check_local_options(device, dtype, local=local, coder=repr(coder) if local or coder == "synthetic"
                            else f"the endpoint serving {coder!r}")
    except ValueError as err:
        fail(_as_option(str(err), {"device": "--device", "dtype": "--dtype"}))
    if max_retries < 0:
        fail(f"--max-retries must be >= 0; got {max_retries}")
    if not timeout > 0:
        fail(f"--timeout must be > 0 seconds; got {timeout}")
    try:
        check_wait(wait_for_server)
    except ValueError as err:
        fail(_as_option(str(err), {"wait_for_server": "--wait-for-server"}))
    try:
        for name, value in (("k", k), ("concurrency", concurrency), ("tasks", tasks)):
            if value is not None:
                check_positive_int(value, name=name)
        check_decoding(top_p=top_p, max_new_tokens=max_new_tokens, temperature=temperature, greedy_ok=greedy_ok,
                       coder=coder, name="temperature")
    except (ValueError, TypeError) as err:
        fail(_as_option(str(err), _GENERATE_OPTIONS))


#: what an interrupted command leaves (Typer ends a command on Ctrl-C with exit status 130 and no message)
_INTERRUPT_LEFT = {"execute": "the verdicts recorded so far are kept in the run directory; the same command resumes",
                   "generate": "the samples written so far are kept in the JSONL file; the same command resumes"}
#: set once a command has said what its interruption left ('run' does)
_INTERRUPT_SAID = threading.Event()


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a full disk or an exhausted quota, as an OS call or SQLite reports it."""
    import errno
    import sqlite3

    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(err, sqlite3.OperationalError) and "disk is full" in str(err)


def _full_disk_said(err: BaseException) -> str:
    """One line for a full disk: what could not be written, where known."""
    if isinstance(err, OSError):
        return "no space left on the device" + (f" writing {str(err.filename)!r}" if err.filename else "")
    return f"no space left on the device writing the verdict store (SQLite: {err})"


def main() -> None:
    """Entry point of the ``bayespass`` console script."""
    cmd = next((a for a in sys.argv[1:] if not a.startswith("-")), "the command")
    try:
        app(prog_name="bayespass")
    except SystemExit as exc:
        if exc.code == 130 and not _INTERRUPT_SAID.is_set():
            left = _INTERRUPT_LEFT.get(cmd, f"{cmd} did not finish; a file it writes is written whole or not at all")
            typer.echo(f"\ninterrupted: {left}", err=True)
        raise
    except Exception as err:  # a full disk is the machine's state, not a bug: said in one line, as an error
        if not disk_full(err):
            raise
        left = _INTERRUPT_LEFT.get(cmd, "a file it writes is written whole or not at all")
        typer.echo(f"error: {_full_disk_said(err)}; free some space and run the same command again ({left})",
                   err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
