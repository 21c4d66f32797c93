"""The main job: generate -> execute -> counts -> fits -> post-processors -> figures and report.

Every stage writes its result into the run directory before the next one
starts and is skipped when that result is already there with the same
settings, so an interrupted ``bayespass run`` resumes where it stopped
(execution itself resumes program by program from ``verdicts.sqlite``,
generation sample by sample from ``samples.jsonl``).

Run directory::

    run.json              settings and the stages completed
    samples.jsonl         generated (or imported) samples, evalplus format
    truth.nc              synthetic coder only: true p_i per config
    verdicts.sqlite       execution store (resume)
    samples.nc            executed samples (config x task x sample x test)
    counts.nc, counts.csv n and c per config x task
    fits/<model>-<method>.nc   InferenceData per fit
    fuzz/                 samples executed on fuzzed inputs (samples.nc, verdicts.sqlite)
    run.nc                the main fit's InferenceData with ``samples`` and ``fuzz_samples`` groups
    tables/*.csv          every printed table
    figures/*.png         pass@k curves, PPC, risk-coverage, set size, incoherence
    report.html           one self-contained page embedding the figures
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["RunConfig", "run", "load_run"]


@dataclass
class RunConfig:
    """Settings of one ``bayespass run`` (recorded in ``run.json``)."""

    suite: str = "humaneval"
    dataset: str | None = None
    coder: str = "synthetic"  # "synthetic", a transformers model id/path, or "samples"
    samples: str | None = None
    k: int = 10
    temperatures: tuple = (0.4, 0.8, 1.2)
    top_p: float = 0.95
    max_new_tokens: int = 512
    models: tuple = ("bb", "zoibb", "flex")  # fitted by EB and compared (LOO); stacked when main is "auto"
    main_model: str | None = None  # the main fit; None: rcParams["stats.model"] (the calibration winner)
    methods: tuple = ("eb", "mcmc")
    mcmc_methods_models: tuple = ("main",)  # "main": the main model
    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    fuzz_n: int = 100
    alpha: float = 0.1
    n_splits: int = 100
    tasks: int | None = None  # first N tasks only
    max_mutants: int = 20  # synthetic coder: AST mutants tried per task
    seed: int = 42
    workers: int | None = None
    passk_k: tuple = (1, 5, 10, 50, 100)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from .validate import check_positive_int, check_prob

        for name in ("k", "draws", "tune", "chains", "n_splits", "max_mutants"):
            check_positive_int(getattr(self, name), name=name)
        for name in ("tasks", "workers"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name=name)
        if isinstance(self.fuzz_n, bool) or not isinstance(self.fuzz_n, int) or self.fuzz_n < 0:
            raise ValueError(f"fuzz_n must be a non-negative integer (0: skip incoherence); got {self.fuzz_n!r}")
        check_prob(self.alpha, name="alpha")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        temps = tuple(self.temperatures)
        if not temps or any(not isinstance(t, int | float) or t < 0 for t in temps):
            raise ValueError(f"temperatures must be non-negative numbers; got {self.temperatures!r}")
        for k in self.passk_k:
            check_positive_int(int(k), name="passk_k")

    @classmethod
    def quick(cls, **kw) -> RunConfig:
        """Small settings for a run in under two minutes, cold (30 tasks, K = 5, two temperatures)."""
        base = dict(k=5, temperatures=(0.6, 1.2), tasks=30, max_mutants=10, fuzz_n=30, draws=300, tune=300, chains=2,
                    n_splits=50)
        base.update(kw)
        return cls(**base)

    def key(self, *fields_) -> str:
        """Hash of the settings a stage depends on."""
        d = asdict(self)
        return hashlib.sha256(json.dumps([d[f] for f in fields_], default=str).encode()).hexdigest()[:16]


_GEN = ("suite", "dataset", "coder", "samples", "k", "temperatures", "top_p", "max_new_tokens", "tasks", "seed",
        "max_mutants")


_INTERRUPTED = threading.Event()


def _on_sigint(signum, frame):
    _INTERRUPTED.set()
    raise KeyboardInterrupt


class _State:
    """``run.json``: settings and a key per completed stage."""

    def __init__(self, out: Path, cfg: RunConfig):
        self.out, self.cfg = out, cfg
        self.path = out / "run.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.data["config"] = asdict(cfg)
        self.data.setdefault("stages", {})

    def done(self, stage: str, key: str, *paths) -> bool:
        return self.data["stages"].get(stage) == key and all((self.out / p).exists() for p in paths)

    def mark(self, stage: str, key: str) -> None:
        if _INTERRUPTED.is_set():  # a library swallowed Ctrl-C (PyMC keeps a truncated trace)
            raise KeyboardInterrupt(f"interrupted: stage {stage!r} is not recorded and will be redone")
        self.data["stages"][stage] = key
        self.data.setdefault("timings", {})
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        os.replace(tmp, self.path)


def _atomic_netcdf(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if hasattr(obj, "groups") and not hasattr(obj, "data_vars"):
        obj.to_netcdf(str(tmp))
    else:
        obj.to_netcdf(tmp, engine="h5netcdf")
    os.replace(tmp, path)


def _say(echo, msg: str) -> None:
    if echo is not None:
        echo(msg)


def _generate(cfg: RunConfig, suite, out: Path, echo):
    """Write samples.jsonl (append-only, resumable) and, for the synthetic coder, truth.nc."""
    import xarray as xr

    path = out / "samples.jsonl"
    tasks = list(suite.tasks)[: cfg.tasks] if cfg.tasks else None
    if cfg.coder == "samples":
        from .execute.samples_io import read_samples

        table = read_samples(cfg.samples)
        if tasks is not None:
            table = table[table["task"].isin(tasks)]
        recs = [{k: v for k, v in r.items() if k not in ("sample", "task") and not (isinstance(v, float) and v != v)}
                for r in table.to_dict("records")]
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            for r in recs:
                fh.write(json.dumps(r, default=str) + "\n")
        os.replace(tmp, path)
        return recs, None
    if cfg.coder == "synthetic":
        from .generate.synthetic import SyntheticCoder

        coder = SyntheticCoder(suite, seed=0, tasks=tasks, max_mutants=cfg.max_mutants, workers=cfg.workers,
                               progress=echo is not None)
        recs = [r for T in cfg.temperatures for r in coder.generate(k=cfg.k, temperature=T, seed=cfg.seed)]
        truth = xr.concat([coder.truth(T)["p_true"] for T in cfg.temperatures], dim="temperature")
        truth = truth.assign_coords(temperature=list(cfg.temperatures))
        _atomic_netcdf(truth.to_dataset(), out / "truth.nc")
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            for r in recs:
                fh.write(json.dumps(r) + "\n")
        os.replace(tmp, path)
        return recs, coder.run_dir
    from .generate.hf import HFCoder, generate_to_jsonl

    coder = HFCoder(cfg.coder, max_new_tokens=cfg.max_new_tokens, top_p=cfg.top_p)
    for T in cfg.temperatures:
        generate_to_jsonl(coder, suite, path, k=cfg.k, temperature=T, seed=cfg.seed, tasks=tasks,
                          progress=echo is not None)
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()], None


def _truth_passk(out: Path, counts, k):
    """Return the true dataset pass@k per config (synthetic coder), or None."""
    import numpy as np
    import xarray as xr

    from .testing import true_passk

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
        previous = signal.signal(signal.SIGINT, _on_sigint)
        try:
            return _run(out, cfg, echo)
        finally:
            signal.signal(signal.SIGINT, previous)
            _INTERRUPTED.clear()
    return _run(out, cfg, echo)


def _run(out, cfg, echo) -> dict:
    import warnings

    import numpy as np
    import pandas as pd

    from .data.fuzz import fuzzed_suite
    from .data.io import write_counts
    from .data.suites import load_suite
    from .execute.engine import execute, to_counts
    from .stats.compare import compare
    from .stats.curve import passk_curve
    from .stats.gating import gate, gate_diagnostics, gate_table, risk_coverage
    from .stats.incoherence import incoherence, incoherence_summary
    from .stats.metrics import metric_table
    from .stats.ppc import ppc
    from .stats.reliability import reliability, reliability_table

    cfg = cfg or RunConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("fits", "tables", "figures", "fuzz"):
        (out / sub).mkdir(exist_ok=True)
    st = _State(out, cfg)
    progress = echo is not None
    t0 = time.perf_counter()
    timings = st.data.setdefault("timings", {})

    def lap(stage, t):
        timings[stage] = round(time.perf_counter() - t, 2)

    # 1. suite and samples
    t = time.perf_counter()
    _say(echo, f"[1/7] suite {cfg.suite} and samples ({cfg.coder})")
    suite = load_suite(cfg.suite, cfg.dataset, workers=cfg.workers)
    gkey = cfg.key(*_GEN)
    reuse = []
    if cfg.coder == "synthetic":
        from .generate.synthetic import pool_dir

        tasks = sorted(list(suite.tasks)[: cfg.tasks]) if cfg.tasks else None
        reuse = [pool_dir(suite, cfg.max_mutants, 0, tasks)]
    if st.done("generate", gkey, "samples.jsonl"):
        with open(out / "samples.jsonl") as fh:
            recs = [json.loads(line) for line in fh if line.strip()]
    else:
        recs, _ = _generate(cfg, suite, out, echo)
        st.mark("generate", gkey)
    lap("generate", t)

    # 2. execution
    t = time.perf_counter()
    _say(echo, f"[2/7] executing {len(recs)} samples in the sandbox")
    if st.done("execute", gkey, "samples.nc"):
        import xarray as xr

        samples = xr.open_dataset(out / "samples.nc", engine="h5netcdf").load()
    else:
        samples = execute(recs, suite, out=out, workers=cfg.workers, progress=progress, reuse=reuse)
        st.mark("execute", gkey)
    counts = to_counts(samples)
    write_counts(counts, out / "counts.nc")
    write_counts(counts, out / "counts.csv")
    lap("execute", t)

    # 3. fits
    t = time.perf_counter()
    from .defaults import rcParams
    from .models.fit import stack_fits

    main_model = cfg.main_model or rcParams["stats.model"]
    mcmc_models = [main_model if m == "main" else m for m in cfg.mcmc_methods_models]
    plan = [(m, "eb") for m in cfg.models]
    if main_model not in cfg.models:
        plan.append((main_model, "eb"))
    if "mcmc" in cfg.methods:
        plan += [(m, "mcmc") for m in mcmc_models]
    idatas = _fits(plan, counts, cfg, st, out, echo, progress, stack_fits)
    main_name = f"{main_model}-eb"
    lap("fit", t)

    # 4. fuzzed inputs
    t = time.perf_counter()
    fz_key = cfg.key(*_GEN, "fuzz_n")
    fuzz = None
    if cfg.fuzz_n > 0:
        _say(echo, f"[4/7] fuzzing {cfg.fuzz_n} inputs per task and executing the samples on them")
        if st.done("fuzz", fz_key, "fuzz/samples.nc"):
            import xarray as xr

            fuzz = xr.open_dataset(out / "fuzz" / "samples.nc", engine="h5netcdf").load()
        else:
            task_ids = list(samples.task.values)
            fsuite = fuzzed_suite(suite, cfg.fuzz_n, seed=0, workers=cfg.workers, tasks=task_ids)
            frecs = [r for r in recs if r["task_id"] in fsuite.tasks]
            fuzz = execute(frecs, fsuite, out=out / "fuzz", workers=cfg.workers, progress=progress)
            st.mark("fuzz", fz_key)
    lap("fuzz", t)

    # 5. post-processors
    t = time.perf_counter()
    _say(echo, "[5/7] post-processing: pass@k, PPC, LOO, gating, reliability, incoherence")
    tables = {}
    k = np.asarray(cfg.passk_k)
    curves = {name: passk_curve(idata, k) for name, idata in idatas.items()}
    unbiased = None
    from .stats.passk import passk as passk_fn

    unbiased = passk_fn(counts, k, method="unbiased")
    truth = _truth_passk(out, counts, k)
    rows = []
    for cfg_name in counts.config.values:
        for kk in k:
            row = {"config": cfg_name, "k": int(kk), "unbiased": float(unbiased.sel(config=cfg_name, k=kk))}
            for name, cur in curves.items():
                c = cur.sel(config=cfg_name, k=kk)
                row[f"{name}"] = float(c["mean"])
                row[f"{name}_lo"] = float(c["eti_lower"])
                row[f"{name}_hi"] = float(c["eti_upper"])
            if truth is not None:
                row["truth"] = float(truth.sel(config=cfg_name, k=kk))
            rows.append(row)
    tables["passk"] = pd.DataFrame(rows)
    tables["passk"].attrs["main"] = main_name
    if main_name in idatas:
        tables["passk"].attrs["stacking_weights"] = idatas[main_name].posterior.attrs.get("stacking_weights")
    ppc_rows = []
    for name, idata in idatas.items():
        p = ppc(idata)["p_value"].to_pandas()
        p.columns.name = None
        p.insert(0, "fit", name)
        ppc_rows.append(p.reset_index())
    tables["ppc"] = pd.concat(ppc_rows, ignore_index=True) if ppc_rows else pd.DataFrame()
    for method in cfg.methods:
        pair = {m: idatas[f"{m}-{method}"] for m in cfg.models if f"{m}-{method}" in idatas}
        if len(pair) >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tables[f"loo_{method}"] = compare(pair).reset_index()
    gated = gate(samples, alpha=cfg.alpha, n_splits=cfg.n_splits, seed=cfg.seed)
    tables["gating"] = gate_table(gated)
    tables["gating_diagnostics"] = gate_diagnostics(samples)
    rel = reliability(samples, alpha=cfg.alpha, n_splits=cfg.n_splits, seed=cfg.seed)
    tables["reliability"] = reliability_table(rel)
    inc = None
    if fuzz is not None:
        inc = incoherence(fuzz, samples=samples, n_mc=1000, n_repeats=1, seed=cfg.seed)
        tables["incoherence"] = incoherence_summary(inc)
    tables["metrics"] = metric_table(samples, idata=idatas.get(main_name), k=[x for x in (1, 5, 10) if x <= cfg.k])
    for name, df in tables.items():
        df.to_csv(out / "tables" / f"{name}.csv", index=False)
    if main_name is not None:
        main = idatas[main_name].copy()
        groups = {"samples": samples}
        if fuzz is not None:
            groups["fuzz_samples"] = fuzz
        main.add_groups(groups, warn_on_custom_groups=False)
        _atomic_netcdf(main, out / "run.nc")
    lap("post", t)

    # 6. figures and 7. report
    t = time.perf_counter()
    _say(echo, "[6/7] figures")
    from .report.figures import make_figures

    figs = make_figures(out / "figures", counts=counts, idatas=idatas, main=main_name, gated=gated,
                        curve=risk_coverage(samples), rel=rel, inc=inc, truth_dir=out)
    _say(echo, "[7/7] report")
    from .report.html import write_report

    timings["total"] = round(time.perf_counter() - t0, 1)
    write_report(out / "report.html", cfg=cfg, tables=tables, figures=figs, samples=samples, main=main_name,
                 timings=timings)
    lap("report", t)
    st.mark("report", cfg.key(*_GEN))
    return tables


def _fits(plan, counts, cfg, st, out, echo, progress, stack_fits) -> dict:
    """Fit (or load) every (model, method) of the plan; ``auto`` stacks the EB fits of ``cfg.models``."""
    import warnings

    import arviz as az

    from .models.fit import fit

    idatas = {}
    for model, method in plan:
        name = f"{model}-{method}"
        fkey = cfg.key(*_GEN, "draws", "tune", "chains", "models") + model + method
        path = out / "fits" / f"{name}.nc"
        if st.done(f"fit:{name}", fkey, path.relative_to(out)):
            idatas[name] = az.from_netcdf(str(path)).load()
            continue
        _say(echo, f"[3/7] fitting {model} by {method}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if model == "auto" and method == "eb" and all(f"{m}-eb" in idatas for m in cfg.models):
                idata = stack_fits({m: idatas[f"{m}-eb"] for m in cfg.models}, counts, seed=cfg.seed)
            else:
                kw = dict(draws=cfg.draws, tune=cfg.tune, chains=cfg.chains) if method == "mcmc" else {}
                idata = fit(counts, model, method, seed=cfg.seed, progressbar=progress, candidates=cfg.models,
                            **kw)
        for w in caught:
            if issubclass(w.category, UserWarning):
                _say(echo, f"  warning ({name}): {w.message}")
        _atomic_netcdf(idata, path)
        st.mark(f"fit:{name}", fkey)
        idatas[name] = idata
    return idatas


def load_run(rundir: str | os.PathLike):
    """Return ``(samples, fuzz_samples or None, config dict)`` of a run directory."""
    import xarray as xr

    rundir = Path(rundir)
    path = rundir / "samples.nc"
    if not path.exists():
        raise FileNotFoundError(f"{str(rundir)!r} is not a run directory (no samples.nc); "
                                "make one with 'bayespass run' or 'bayespass execute'")
    samples = xr.open_dataset(path, engine="h5netcdf").load()
    fz = rundir / "fuzz" / "samples.nc"
    fuzz = xr.open_dataset(fz, engine="h5netcdf").load() if fz.exists() else None
    meta = json.loads((rundir / "run.json").read_text()) if (rundir / "run.json").exists() else {}
    return samples, fuzz, meta
