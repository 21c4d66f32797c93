"""The stages of ``bayespass run``.

Each stage declares the settings it depends on, its output files and what it does;
:func:`bayespass.pipeline.run` loops over them, skipping the completed ones.

Stage         settings              outputs (in the run directory)
-----------   -------------------   ------------------------------------------------
suite         (always)              -
generate      GEN                   samples.jsonl (+ truth.nc for the synthetic coder; rounds.json with until_width)
execute       GEN                   samples.nc, verdicts.sqlite
counts        (always)              counts.nc, counts.csv
fit:<m>-<e>   GEN, draws, models    fits/<m>-<e>.nc          (one stage per fit)
fuzz          GEN, fuzz_n           fuzz/samples.nc
post          (always)              tables/*.csv
figures       (always)              figures/*.png
report        (always)              report.html
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..data.io import write_atomic
from .config import GEN, RunConfig, State, atomic_netcdf, make_coder, say, write_truth

__all__ = ["Stage", "Context", "stages", "truth_passk"]


@dataclass
class Context:
    """What the stages share: settings, run directory, state and the results so far."""

    out: Path
    cfg: RunConfig
    state: State
    echo: Callable | None = None
    timings: dict = field(default_factory=dict)
    suite: object = None
    reuse: list = field(default_factory=list)
    recs: list | None = None
    samples: object = None
    counts: object = None
    idatas: dict = field(default_factory=dict)
    main: str | None = None
    fuzz: object = None
    tables: dict = field(default_factory=dict)
    post: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # what the stage in progress said instead of warning (the report's)

    @property
    def progress(self) -> bool:
        """Whether progress bars are shown."""
        return self.echo is not None


@dataclass(frozen=True)
class Stage:
    """One step of a run: skipped when ``run.json`` records it with the same settings and its outputs exist."""

    name: str
    run: Callable[[Context], None]
    settings: tuple = ()
    outputs: tuple = ()
    load: Callable[[Context], None] | None = None
    always: bool = False
    suffix: str = ""

    def key(self, cfg: RunConfig) -> str:
        """Hash of the settings this stage depends on."""
        return cfg.key(*self.settings) + self.suffix


# -- suite, samples, execution -----------------------------------------------------------------
def _suite(ctx: Context) -> None:
    from ..execution.groundtruth import ground_truth, load_suite

    cfg = ctx.cfg
    say(ctx.echo, f"[1/7] suite {cfg.suite} and samples ({_source_of_samples(cfg)})")
    ctx.suite = load_suite(cfg.suite, cfg.dataset, expected=False)
    if cfg.coder != "samples":  # the canonical solutions of the tasks drawn (samples': execute runs those sampled)
        ground_truth(ctx.suite, workers=cfg.workers, tasks=list(ctx.suite.tasks)[: cfg.tasks] if cfg.tasks else None)
    if ctx.suite.source and cfg.dataset is None:  # from the override variable or evalplus's cache: say which
        say(ctx.echo, f"  {cfg.suite}: {ctx.suite.source}")
    if cfg.coder == "synthetic":
        from ..generate.synthetic import pool_dir

        tasks = sorted(list(ctx.suite.tasks)[: cfg.tasks]) if cfg.tasks else None
        ctx.reuse = [pool_dir(ctx.suite, cfg.max_mutants, 0, tasks)]


def _source_of_samples(cfg) -> str:
    """Say where a run's samples come from: the coder, the served model, or the samples files read."""
    from ..execution.samples_io import sample_paths

    if cfg.coder != "samples":
        return f"{cfg.coder} at {cfg.endpoint}" if cfg.endpoint else cfg.coder
    paths = sample_paths(cfg.samples)
    if paths is None:
        return "given samples"
    return f"read from {', '.join(p.name for p in paths[:3])}" + (f" and {len(paths) - 3} more"
                                                                  if len(paths) > 3 else "")


def _generate_stage(ctx: Context) -> None:
    if ctx.cfg.until_width is not None:
        from .adaptive import generate_until_width

        say(ctx.echo, f"  generating in rounds until the band of pass@{ctx.cfg.width_k} is at most "
                      f"{ctx.cfg.until_width:g} wide")
        generate_until_width(ctx)
        return
    ctx.recs, _ = _generate(ctx.cfg, ctx.suite, ctx.out, ctx.echo)


def _load_samples_jsonl(ctx: Context) -> None:
    with open(ctx.out / "samples.jsonl") as fh:
        ctx.recs = [json.loads(line) for line in fh if line.strip()]


def _execute(ctx: Context) -> None:
    from ..execution.engine import execute

    say(ctx.echo, f"[2/7] executing {len(ctx.recs)} samples in the sandbox")
    ctx.samples = execute(ctx.recs, ctx.suite, out=ctx.out, workers=ctx.cfg.workers, progress=ctx.progress,
                          reuse=ctx.reuse)
    ran, kept = (int(ctx.samples.attrs.get(a, len(ctx.recs))) for a in ("n_run", "n_samples"))  # kept: in the suite
    if ran < kept:
        say(ctx.echo, f"  {ran} of {kept} samples run; the others' verdicts reused (judged before, duplicate "
                      "programs or behavioural twins)")


def _load_samples(ctx: Context) -> None:
    import xarray as xr

    ctx.samples = xr.open_dataset(ctx.out / "samples.nc", engine="h5netcdf").load()


def _counts(ctx: Context) -> None:
    from ..data.io import samples_to_counts, write_counts

    ctx.counts = samples_to_counts(ctx.samples)
    write_counts(ctx.counts, ctx.out / "counts.nc")
    write_counts(ctx.counts, ctx.out / "counts.csv")


# -- fits -------------------------------------------------------------------------------------
def fit_plan(cfg: RunConfig) -> list[tuple[str, str]]:
    """(model, method) of every fit: the candidates by EB, the main model by EB and MCMC."""
    from ..defaults import rcParams

    main = cfg.main_model or rcParams["stats.model"]
    plan = [(m, "eb") for m in cfg.models]
    if main not in cfg.models:
        plan.append((main, "eb"))
    if "mcmc" in cfg.methods:
        plan += [(main if m == "main" else m, "mcmc") for m in cfg.mcmc_methods_models]
    return plan


def _fit_stage(model: str, method: str) -> Stage:
    name = f"{model}-{method}"
    path = f"fits/{name}.nc"

    def run(ctx: Context) -> None:
        from ..models.fit import fit, stack_fits

        cfg = ctx.cfg
        say(ctx.echo, f"[3/7] fitting {model} by {method}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if model == "auto" and method == "eb" and all(f"{m}-eb" in ctx.idatas for m in cfg.models):
                idata = stack_fits({m: ctx.idatas[f"{m}-eb"] for m in cfg.models}, ctx.counts, seed=cfg.seed)
            else:
                kw = dict(draws=cfg.draws, tune=cfg.tune, chains=cfg.chains) if method == "mcmc" else {}
                idata = fit(ctx.counts, model, method, seed=cfg.seed, progressbar=ctx.progress,
                            candidates=cfg.models if model == "auto" else None, **kw)
        for w in caught:
            if issubclass(w.category, UserWarning):
                say(ctx.echo, f"  warning ({name}): {w.message}")
                ctx.notes.append(str(w.message))
        atomic_netcdf(idata, ctx.out / path)
        ctx.idatas[name] = idata

    def load(ctx: Context) -> None:
        import arviz as az

        ctx.idatas[name] = az.from_netcdf(str(ctx.out / path)).load()

    return Stage(f"fit:{name}", run, settings=GEN + ("draws", "tune", "chains", "models"), outputs=(path,),
                 load=load, suffix=model + method)


# -- fuzzed inputs ----------------------------------------------------------------------------
def _fuzz(ctx: Context) -> None:
    from ..execution.engine import execute
    from ..execution.fuzz import fuzzed_suite

    cfg = ctx.cfg
    say(ctx.echo, f"[4/7] fuzzing {cfg.fuzz_n} inputs per task and executing the samples on them")
    tasks = [str(t) for t in ctx.samples.task.values]
    fsuite = fuzzed_suite(ctx.suite, cfg.fuzz_n, seed=0, workers=cfg.workers, tasks=tasks)
    if len(fsuite.tasks) < len(tasks):
        msg = (f"fuzzing: {len(tasks) - len(fsuite.tasks)} of {len(tasks)} tasks have no fuzzed input that the "
               "task's contract and canonical solution accept")
        msg += "; " + ("incoherence uses the others" if fsuite.tasks else "no incoherence")
        if ctx.echo is not None:  # the CLI's progress says it once; a warning would say it again
            say(ctx.echo, f"      {msg}")
            ctx.notes.append(msg)
        else:
            warnings.warn(msg, stacklevel=2)
    if not fsuite.tasks:
        ctx.fuzz = None
        return
    frecs = [r for r in ctx.recs if r["task_id"] in fsuite.tasks]
    ctx.fuzz = execute(frecs, fsuite, out=ctx.out / "fuzz", workers=cfg.workers, progress=ctx.progress)


def _load_fuzz(ctx: Context) -> None:
    import xarray as xr

    ctx.fuzz = xr.open_dataset(ctx.out / "fuzz" / "samples.nc", engine="h5netcdf").load()


# -- post-processors, figures, report ----------------------------------------------------------
def _post(ctx: Context) -> None:
    from .tables import all_tables

    say(ctx.echo, "[5/7] post-processing: pass@k, PPC, LOO, gating, reliability, incoherence")
    ctx.tables, ctx.post = all_tables(ctx, truth_passk)
    for name, df in ctx.tables.items():
        df.to_csv(ctx.out / "tables" / f"{name}.csv", index=False)
    if "cmp" in ctx.post:  # the screen and the report list neighbours in the ranking above 4 configs; every pair here
        from ..stats.ranking import prob_better_table

        prob_better_table(ctx.post["cmp"], pairs="all").to_csv(ctx.out / "tables" / "prob_better_all.csv", index=False)


def _figures(ctx: Context) -> None:
    from ..report.figures import make_figures
    from ..stats.gating import risk_coverage

    say(ctx.echo, "[6/7] figures")
    ctx.figures = make_figures(ctx.out / "figures", counts=ctx.counts, idatas=ctx.idatas, main=ctx.main,
                               gated=ctx.post["gated"], curve=risk_coverage(ctx.samples), rel=ctx.post["rel"],
                               inc=ctx.post.get("inc"), truth=lambda kk: truth_passk(ctx.out, ctx.counts, kk),
                               cmp=ctx.post.get("cmp"))


def _report(ctx: Context) -> None:
    from ..report.html import write_report

    say(ctx.echo, "[7/7] report")
    kept = ctx.state.data.get("warnings", {})
    said = {s.name: kept[s.name] for s in stages(ctx.cfg) if kept.get(s.name)}
    write_report(ctx.out / "report.html", cfg=ctx.cfg, tables=ctx.tables, figures=ctx.figures,
                 samples=ctx.samples, main=ctx.main, timings=ctx.timings, warnings=said)


def stages(cfg: RunConfig) -> list[Stage]:
    """Return the stages of a run with these settings, in order."""
    out = [Stage("suite", _suite, always=True),
           Stage("generate", _generate_stage, GEN, ("samples.jsonl",), _load_samples_jsonl),
           Stage("execute", _execute, GEN, ("samples.nc",), _load_samples),
           Stage("counts", _counts, always=True)]
    out += [_fit_stage(model, method) for model, method in fit_plan(cfg)]
    if cfg.fuzz_n > 0:
        out.append(Stage("fuzz", _fuzz, GEN + ("fuzz_n",), ("fuzz/samples.nc",), _load_fuzz))
    out += [Stage("post", _post, always=True), Stage("figures", _figures, always=True),
            Stage("report", _report, settings=GEN, always=True)]
    return out


def _generate(cfg: RunConfig, suite, out: Path, echo):
    """Write samples.jsonl (append-only, resumable) and, for the synthetic coder, truth.nc."""
    path = out / "samples.jsonl"
    tasks = list(suite.tasks)[: cfg.tasks] if cfg.tasks else None
    if cfg.coder == "samples":
        from ..execution.samples_io import read_samples

        table = read_samples(cfg.samples, suite=suite)
        if tasks is not None:
            table = table[table["task"].isin(tasks)]
        recs = [{k: v for k, v in r.items() if k not in ("sample", "task") and not (isinstance(v, float) and v != v)}
                for r in table.to_dict("records")]
        write_atomic(path, lambda tmp: tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in recs)))
        return recs, None
    if cfg.coder == "synthetic":
        coder = make_coder(cfg, suite, tasks, echo)
        recs = [r for T in cfg.temperatures for r in coder.generate(k=cfg.k, temperature=T, seed=cfg.seed)]
        write_truth(coder, cfg, out)
        write_atomic(path, lambda tmp: tmp.write_text("".join(json.dumps(r) + "\n" for r in recs)))
        return recs, coder.run_dir
    from ..generate.hf import generate_to_jsonl

    coder = make_coder(cfg, suite, tasks, echo)
    for T in cfg.temperatures:
        generate_to_jsonl(coder, suite, path, k=cfg.k, temperature=T, seed=cfg.seed, tasks=tasks,
                          progress=echo is not None)
    if cfg.endpoint is not None:
        say(echo, endpoint_summary(coder))
        (out / "requests.json").write_text(json.dumps({"endpoint": cfg.endpoint, "model": cfg.coder,
                                                       "api": coder.api, "n_supported": coder.n_supported,
                                                       "stats": dict(coder.stats), "notes": coder.notes},
                                                      indent=2))
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()], None


def endpoint_summary(coder) -> str:
    """One line on the requests of an endpoint coder: how many, retried why, tokens, notes."""
    st = coder.stats
    why = ", ".join(f"{k[6:]}: {v}" for k, v in sorted(st.items()) if k.startswith("retry_"))
    line = (f"endpoint {coder.url}: {st['requests']} requests (n per request: "
            f"{'K' if coder.n_supported else '1'}), {st['retries']} retried{f' ({why})' if why else ''}, "
            f"{st['prompt_tokens']} prompt and {st['completion_tokens']} completion tokens")
    return "; ".join([line, *coder.notes])


def truth_passk(out: Path, counts, k):
    """Return the true dataset pass@k per config (synthetic coder), or None."""
    import numpy as np
    import xarray as xr

    from ..simulate import true_passk

    if not (out / "truth.nc").exists():
        return None
    truth = xr.open_dataset(out / "truth.nc", engine="h5netcdf").load()["p_true"]
    temps = counts["temperature"].values if "temperature" in counts.coords else None
    if temps is None:
        return None
    rows = []
    for T in temps:
        p = truth.sel(temperature=float(T), task=counts.task.values).values
        rows.append(true_passk(p, k))
    return xr.DataArray(np.array(rows), dims=("config", "k"), coords={"config": counts.config.values,
                                                                      "k": np.asarray(k)})


