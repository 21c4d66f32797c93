"""The main job: generate -> execute -> counts -> fits -> post-processors -> figures and report.

:func:`run` is a short driver over the stages of :mod:`bayespass.pipeline.stages`:
every stage writes its result into the run directory before the next one
starts and is skipped when ``run.json`` records it with the same settings
(so an interrupted ``bayespass run`` resumes where it stopped; execution
itself resumes program by program from ``verdicts.sqlite``, generation sample
by sample from ``samples.jsonl``).  :func:`load_run` reads a run directory
back as one ``xarray.DataTree``.

Run directory::

    run.json              settings, the stages completed (with the key of their settings), timings
    samples.jsonl         generated (or imported) samples, evalplus format
    rounds.json           with until_width: each round's targets per config and task, band widths, why it stopped
    truth.nc              synthetic coder only: true p_i per config
    verdicts.sqlite       execution store (resume)
    samples.nc            executed samples (config x task x sample x test)
    counts.nc, counts.csv n and c per config x task
    fits/<model>-<method>.nc   InferenceData per fit (the main one: rcParams["stats.model"], by EB)
    fuzz/                 samples executed on fuzzed inputs (samples.nc, verdicts.sqlite)
    tables/*.csv          every printed table
    figures/*.png         pass@k curves, PPC, risk-coverage, set size, incoherence
    report.html           one self-contained page embedding the figures
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .._run import read_run_json
from .config import GEN, INTERRUPTED, RunConfig, State, _interrupt_unraisable, _on_sigint, say
from .stages import Context, Stage, fit_plan, stages

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

__all__ = ["RunConfig", "run", "load_run", "fits_of", "Stage", "stages", "GEN"]


def run(out: str | os.PathLike, cfg: RunConfig | None = None, *, echo=print) -> dict:
    """Run the whole job into the run directory ``out`` and return the tables (also written to disk).

    Parameters
    ----------
    out : path
        Run directory (created; re-running resumes).
    cfg : RunConfig, optional
        Settings (default: the synthetic coder on HumanEval, K = 10 at T = 0.4, 0.8, 1.2).
    echo : callable or None
        Where progress messages go (``None``: silent, no progress bars).

    Ctrl-C stops the run; stages already recorded in ``run.json`` are kept and
    the stage in progress is redone on the next call (also when a library such
    as PyMC catches the interrupt itself and returns early).
    """
    if threading.current_thread() is threading.main_thread():
        previous, unraisable = signal.signal(signal.SIGINT, _on_sigint), sys.unraisablehook
        sys.unraisablehook = _interrupt_unraisable(unraisable)
        try:
            return _drive_alone(out, cfg, echo)
        finally:
            signal.signal(signal.SIGINT, previous)
            sys.unraisablehook = unraisable
            INTERRUPTED.clear()
    return _drive_alone(out, cfg, echo)


def _drive_alone(out, cfg, echo) -> dict:
    """Drive the run holding its directory: a second process given it is refused (``_busy``)."""
    from .._busy import exclusive

    with exclusive(out, name="out"):  # also refuses an out that is a file
        return _drive(out, cfg, echo)


def _drive(out, cfg, echo) -> dict:
    from ..defaults import rc_context

    cfg = cfg or RunConfig()
    with rc_context({} if cfg.ci_prob is None else {"stats.ci_prob": cfg.ci_prob}):  # every band of the run
        return _drive_stages(out, cfg, echo)


def _drive_stages(out, cfg: RunConfig, echo) -> dict:
    from ..defaults import rcParams

    out = Path(out)
    for sub in ("", "fits", "tables", "figures", "fuzz"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    ctx = Context(out=out, cfg=cfg, state=State(out, cfg), echo=echo)
    if ctx.state.note:
        say(echo, f"  warning: {ctx.state.note}")
    ctx.timings = ctx.state.data.setdefault("timings", {})
    ctx.main = f"{cfg.main_model or rcParams['stats.model']}-eb"
    t0 = time.perf_counter()
    loaded: list[str] = []  # stages done before with these settings, read back: said before the next one runs
    for stage in stages(cfg):
        key = stage.key(cfg) + _found_dataset(ctx, stage)
        t = time.perf_counter()
        if not stage.always and ctx.state.done(stage.name, key, *stage.outputs) and _read_back(ctx, stage, loaded):
            continue
        _say_loaded(ctx, loaded)
        with _kept_warnings(ctx, stage.name):
            stage.run(ctx)
        ctx.timings[stage.name] = round(time.perf_counter() - t, 2)
        ctx.timings["total"] = round(time.perf_counter() - t0, 1)
        ctx.state.mark(stage.name, key)
    _say_loaded(ctx, loaded)
    return ctx.tables


def _read_back(ctx: Context, stage, loaded: list[str]) -> bool:
    """Read back what a stage done before wrote (and add it to ``loaded``), or say why not and return False.

    A file that cannot be read is said (after the stages read back before it), and the stage is done again.

    Files are written whole (through a temporary file), so this is a file damaged since: a truncated copy of the
    run directory, a disk error. As a missing file, it costs its stage only.
    """
    try:
        stage.load(ctx)
    except (OSError, ValueError, KeyError) as err:
        from ..data.io import first_line

        _say_loaded(ctx, loaded)
        said = first_line(err)
        say(ctx.echo, f"  {stage.name}: could not read back {', '.join(stage.outputs)} from {ctx.out} ({said}); "
                      "doing it again")
        return False
    loaded.append(stage.name)
    return True


def _say_loaded(ctx: Context, loaded: list[str]) -> None:
    """Say which stages a resumed run read from its directory instead of running them (and forget them)."""
    if loaded:
        say(ctx.echo, f"  done before with these settings, read from {ctx.out}: {', '.join(loaded)}")
        loaded.clear()


@contextlib.contextmanager
def _kept_warnings(ctx: Context, name: str):
    """Keep what a stage warned (and said in ``ctx.notes``) in ``run.json``, for the report; show it as before.

    Each warning that passes the filters in force is shown where it would have been (the CLI, pytest, stderr) when
    it is raised, and kept; the report lists those of every stage of the run, also of stages a resumed run skipped.
    """
    import warnings

    ctx.notes, said = [], []
    with warnings.catch_warnings():  # restores showwarning on the way out
        shown = warnings.showwarning
        orig, impl = getattr(warnings, "_showwarning_orig", None), getattr(warnings, "_showwarnmsg_impl", None)

        def keep(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, UserWarning):
                said.append(str(message))
            if shown is orig and impl is not None:  # as warnings._showwarnmsg does: pytest's log, or stderr
                impl(warnings.WarningMessage(message, category, filename, lineno, file, line))
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = keep
        yield
    ctx.state.data.setdefault("warnings", {})[name] = list(dict.fromkeys(said + ctx.notes))


def _found_dataset(ctx: Context, stage: Stage) -> str:
    """Return the dataset's hash for a stage that depends on the dataset, where none was given (else "").

    A HumanEval+/MBPP+ file found by the override variable or in evalplus's cache can change between two runs into
    one directory (another release, another variable); a stage done on the other file is done again.
    """
    suite = ctx.suite
    if suite is None or not suite.source or ctx.cfg.dataset is not None or "dataset" not in stage.settings:
        return ""
    return ":" + suite.source_hash[:16]


def load_run(rundir: str | os.PathLike) -> xr.DataTree:
    """Read a run directory as one ``xarray.DataTree``.

    Nodes: ``samples`` (executed samples), ``fuzz_samples`` (when fuzzed),
    ``counts``, ``fits/<model>-<method>/<group>`` (each fit's InferenceData
    groups) and ``tables/<name>``; the settings and stage records of
    ``run.json`` are in the root's attrs (``config``, ``stages``,
    ``main_fit``).
    """
    import xarray as xr

    rundir = Path(rundir)
    if not (rundir / "samples.nc").exists():
        raise FileNotFoundError(f"{str(rundir)!r} is not a run directory (no samples.nc); "
                                "make one with 'bayespass run' or 'bayespass execute'")
    nodes = {"samples": _open(rundir / "samples.nc")}
    if (rundir / "fuzz" / "samples.nc").exists():
        nodes["fuzz_samples"] = _open(rundir / "fuzz" / "samples.nc")
    if (rundir / "counts.nc").exists():
        nodes["counts"] = _open(rundir / "counts.nc")
    for path in sorted((rundir / "fits").glob("*.nc")):
        nodes |= {f"fits/{path.stem}/{g}": ds for g, ds in _fit_groups(path).items()}
    for path in sorted((rundir / "tables").glob("*.csv")):
        import pandas as pd

        nodes[f"tables/{path.stem}"] = xr.Dataset.from_dataframe(pd.read_csv(path))
    tree = xr.DataTree.from_dict(nodes)
    meta = read_run_json(rundir)
    tree.attrs.update(config=json.dumps(meta.get("config", {})), stages=json.dumps(meta.get("stages", {})),
                      main_fit=_main_fit(meta), rundir=str(rundir))
    return tree


def _open(path: Path):
    from ..data.io import read_netcdf

    return read_netcdf(path)


def _fit_groups(path: Path) -> dict:
    from ..data.io import read_fit

    idata = read_fit(path)
    return {g: idata[g] for g in idata.groups()}


def _main_fit(meta: dict) -> str:
    from ..defaults import rcParams

    cfg = meta.get("config", {})
    return f"{cfg.get('main_model') or rcParams['stats.model']}-eb"


def fits_of(tree) -> dict:
    """Return the fits of a run tree as ``{name: arviz.InferenceData}``."""
    from ..validate import fit_of_node

    if "fits" not in tree.children:
        return {}
    return {name: fit_of_node(fit) for name, fit in tree["fits"].children.items()}


del fit_plan  # re-exported through stages only
