"""Model comparison: PSIS-LOO via ArviZ and K-fold cross-validated ELPD of EB fits."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from ..data.counts import validate_counts
from ..simulate import rng as _rng
from ..validate import as_fit, check_choice, check_positive_int, is_run_with_fits
from .kernels import bb_logpmf, zoibb_logpmf

if TYPE_CHECKING:  # pragma: no cover
    from arviz import ELPDData

__all__ = ["compare", "cv_elpd", "loo"]


def _weighted_se(values: np.ndarray, weight: np.ndarray) -> float:
    total = weight.sum()
    if total <= 1:
        return float("nan")
    mean = np.sum(weight * values) / total
    var = np.sum(weight * (values - mean) ** 2) / (total - 1)
    return float(np.sqrt(total * var))


def compare(idatas: dict, *, per_config: bool = True, extend_inferencedata: bool = False) -> pd.DataFrame:
    """Compare fits by PSIS-LOO with Pareto-k diagnostics surfaced.

    Parameters
    ----------
    idatas : dict of str -> arviz.InferenceData
        Fits of the same counts (e.g. ``{"bb": ..., "zoibb": ...}``), with
        log-likelihoods per task or per distinct (n, c) pair (see
        :mod:`bayespass.stats.loo`).
    per_config : bool
        Compare within each config (the choice of model differs per config);
        otherwise over all (config, task) pairs.
    extend_inferencedata : bool
        Also attach the table, as a Dataset over ``(config, candidate)``, as group ``loo_compare`` of every
        fit compared.

    Returns
    -------
    pandas.DataFrame
        The columns of ``arviz.compare`` (``rank``, ``elpd_loo``, ``p_loo``,
        ``elpd_diff``, ``weight`` (stacking), ``se``, ``dse``, ``warning``)
        plus ``pareto_k_max`` and ``n_bad_k`` (tasks with k > 0.7), indexed by
        (config, model).
    """
    from .attach import attach, check_target
    from .loo import pointwise_loo, stacking_weights

    if not isinstance(idatas, dict) or len(idatas) < 2:
        run = "; a run's fits are bp.pipeline.fits_of(run), a dict" if is_run_with_fits(idatas) else ""
        raise ValueError(f"idatas must be a dict of at least two named InferenceData fits; got "
                         f"{type(idatas).__name__}{run}")
    if extend_inferencedata:
        for d in idatas.values():
            check_target(d)
    from ..data.counts import check_same_counts

    check_same_counts(idatas, what="compare")
    names = list(idatas)
    _warn_laplace_shared(idatas)
    pw = {name: pointwise_loo(d) for name, d in idatas.items()}
    first = next(iter(idatas.values()))
    configs = list(first.observed_data.config.values)
    groups = [(cfg, [j]) for j, cfg in enumerate(configs)] if per_config else [("all", list(range(len(configs))))]
    frames = []
    for label, idx in groups:
        e = {m: pw[m]["elpd"][idx].ravel() for m in names}
        lppd = {m: pw[m]["lppd"][idx].ravel() for m in names}
        w = {m: pw[m]["weight"][idx].ravel() for m in names}
        k = {m: pw[m]["pareto_k"][idx].ravel() for m in names}
        elpd = {m: float(np.sum(w[m] * e[m])) for m in names}
        best = max(names, key=elpd.get)
        stack_w = stacking_weights(np.stack([e[m] for m in names]), w[best])
        rows = []
        for i, m in enumerate(names):
            rows.append({"model": m, "elpd_loo": elpd[m], "p_loo": float(np.sum(w[m] * (lppd[m] - e[m]))),
                         "elpd_diff": elpd[best] - elpd[m], "weight": float(stack_w[i]),
                         "se": _weighted_se(e[m], w[m]),
                         "dse": 0.0 if m == best else _weighted_se(e[best] - e[m], w[m]),
                         "pareto_k_max": float(np.nanmax(k[m])) if np.isfinite(k[m]).any() else float("nan"),
                         "n_bad_k": int(np.sum(w[m] * (k[m] > 0.7)))})
        table = pd.DataFrame(rows).sort_values("elpd_loo", ascending=False)
        table.insert(0, "rank", np.arange(len(table)))
        table["warning"] = table["n_bad_k"] > 0
        table.index = pd.MultiIndex.from_product([[label], table.pop("model")], names=["config", "model"])
        frames.append(table)
    out = pd.concat(frames)
    if extend_inferencedata:
        ds = xr.Dataset.from_dataframe(out.rename_axis(index={"model": "candidate"}))
        for d in idatas.values():
            attach(d, "loo_compare", ds)
    return out


def loo(idata, *, config: str | list[str] | None = None) -> ELPDData:
    """PSIS-LOO of one fit as :func:`arviz.loo` reports it, over the (config, task) cells that have samples.

    ``arviz.loo(fit)`` reads a bayespass fit's ``log_likelihood`` group as it is stored, which misleads in two
    cases: a fit of large data keeps one term per distinct (n, c) pair (``attrs["layout"] == "pair"``, with
    ``pair_weight``), where ``arviz.loo`` refuses ("several log likelihood arrays") and ``var_name="c"``
    counts each distinct pair once; and a task a config has no samples of (configs run on different tasks)
    holds log-likelihood 0, which ``arviz.loo`` scores Pareto k = inf. Here every task with samples is one
    data point, whatever the layout, and the others are left out.

    Parameters
    ----------
    idata : arviz.InferenceData or DataTree
        A fit (``bp.fit``, ``bp.stack``), or a run (``bp.load_run``): its main fit.
    config : str or list of str, optional
        The configs whose tasks are scored (default all).

    Returns
    -------
    arviz.ELPDData
        As ``arviz.loo(..., pointwise=True)``: ``elpd_loo``, ``se``, ``p_loo``, ``n_samples``,
        ``n_data_points``, ``warning``, ``loo_i`` and ``pareto_k`` over dimension ``cell`` (coordinates
        ``config`` and ``task``), ``scale`` ("log") and ``good_k``. ``arviz.compare`` takes a dict of them
        (fits of the same counts).
    """
    from arviz import ELPDData

    from .loo import pointwise_loo

    idata = as_fit(idata, what="loo")
    _warn_laplace_shared({"given": idata})
    n = idata.constant_data["n"].transpose("config", "task")
    keep = _configs_kept(n["config"].values, config)
    pw = pointwise_loo(idata)
    j, t = np.nonzero((n.values > 0) & keep[:, None])
    if idata.log_likelihood.attrs.get("layout") == "pair":  # the fit's own pairs: its counts', as stored
        from ..data.counts import counts_of_fit
        from ..models.base import PairData

        obs = PairData.from_counts(counts_of_fit(idata)).task_slots()[j, t]
    else:
        obs = t
    elpd, lppd, khat = (pw[key][j, obs] for key in ("elpd", "lppd", "pareto_k"))
    post = idata.posterior
    draws = post.sizes["chain"] * post.sizes["draw"]
    good_k = min(1 - 1 / np.log10(draws), 0.7)
    cell = {"config": ("cell", n["config"].values[j]), "task": ("cell", n["task"].values[t])}
    loo_i = xr.DataArray(elpd, dims="cell", coords=cell, name="loo_i")
    pareto = xr.DataArray(khat, dims="cell", coords=cell, name="pareto_shape")
    return ELPDData(data=[float(elpd.sum()), float(np.sqrt(elpd.size * np.var(elpd))), float(np.sum(lppd - elpd)),
                          draws, int(elpd.size), bool(np.any(khat > good_k)), loo_i, pareto, "log", good_k],
                    index=["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning", "loo_i", "pareto_k",
                           "scale", "good_k"])


def _configs_kept(configs: np.ndarray, config) -> np.ndarray:
    """Return which of ``configs`` ``config`` (None, a label or a list of labels) selects; unknown ones are an error."""
    if config is None:
        return np.ones(configs.size, bool)
    wanted = [config] if isinstance(config, str) else list(config)
    unknown = [c for c in wanted if c not in set(configs.tolist())]
    if unknown or not wanted:
        raise ValueError(f"config={config!r}: {'no config given' if not wanted else f'not in this fit: {unknown}'}; "
                         f"its configs are {configs.tolist()[:10]}")
    return np.isin(configs, wanted)


def laplace_shared(idatas: dict) -> list[str]:
    """Return the names of the fits of ``shared`` by EB (Laplace draws), whose elpd_loo is biased low."""
    return [name for name, d in idatas.items() if d.posterior.attrs.get("bayespass_model") == "shared"
            and d.posterior.attrs.get("sampler") == "laplace"]


def _warn_laplace_shared(idatas: dict) -> None:
    """Warn where a fit of ``shared`` by EB is compared: its elpd_loo is biased low (use MCMC)."""
    laplace = laplace_shared(idatas)
    if laplace:
        warnings.warn(f"fit(s) {laplace} of model 'shared' by EB draw from a Laplace approximation whose per-config "
                      "log-likelihoods spread far wider than the exact posterior's: on real MBPP their elpd_loo came "
                      "out 54-71 nats below the same model's by MCMC, without a Pareto-k warning. Fit 'shared' with "
                      "method='mcmc' to compare it by LOO (benchmarks/RESULTS.md, thirty-eighth session).",
                      UserWarning, stacklevel=3)


def _eb_params(n, c, w, prior):
    from ..models.eb import _fit_one, theta_to_params

    p = theta_to_params(_fit_one(n, c, w, prior).x, prior)
    return p["a"], p["b"], p["pi0"], p["pi1"]


def cv_elpd(counts, models=("bb", "zoibb"), *, folds: int = 10, seed=0,
            extend_inferencedata: bool = False) -> xr.Dataset:
    """K-fold cross-validated ELPD of EB fits, per config (tasks are the folds' units).

    ``counts`` is a counts Dataset, a fit (its observed counts) or a run tree (its ``counts`` node); with
    ``extend_inferencedata=True`` (a fit or a run tree) the result is attached as group ``cv_elpd``.

    For each fold, hyperparameters are fitted by evidence maximisation on the
    other folds' tasks and the held-out tasks are scored by their marginal
    log-likelihood ``log P(c_i | n_i, a, b[, pi0, pi1])``.

    Returns
    -------
    xarray.Dataset
        Over ``(config, candidate)`` (the models compared; not ``model``, which
        counts datasets use as a coordinate of ``config``): ``elpd``, ``se``,
        ``elpd_diff`` (vs the best model of the config), ``dse`` (s.e. of the
        paired difference), and ``best`` (over ``config``).
    """
    from .attach import attach, check_target

    target = counts
    if extend_inferencedata:
        check_target(target)
    counts = _counts_of(counts)
    models = list(models)
    for m in models:
        check_choice(m, ("bb", "zoibb"), name="models")
    folds = check_positive_int(folds, name="folds")
    if folds < 2:
        raise ValueError(f"folds must be >= 2; got {folds}")
    g = _rng(seed)
    J = counts.sizes["config"]
    elpd = np.full((J, len(models)), np.nan)
    se = np.full_like(elpd, np.nan)
    diff = np.full_like(elpd, np.nan)
    dse = np.full_like(elpd, np.nan)
    best = []
    for j in range(J):
        n_all, c_all = counts.n.values[j], counts.c.values[j]
        obs = np.flatnonzero(n_all > 0)
        if obs.size < folds:
            raise ValueError(f"config {str(counts.config.values[j])!r} has {obs.size} observed tasks; "
                             f"folds={folds} needs at least that many")
        fold_of = g.permutation(np.arange(obs.size) % folds)
        point = np.zeros((len(models), obs.size))
        for f in range(folds):
            tr, te = obs[fold_of != f], obs[fold_of == f]
            for im, m in enumerate(models):
                a, b, pi0, pi1 = _eb_params(n_all[tr].astype(float), c_all[tr].astype(float),
                                            np.ones(tr.size), m)
                ll = (bb_logpmf(c_all[te], n_all[te], a, b) if m == "bb"
                      else zoibb_logpmf(c_all[te], n_all[te], a, b, pi0, pi1))
                point[im, fold_of == f] = ll
        elpd[j] = point.sum(1)
        se[j] = np.sqrt(obs.size * point.var(1, ddof=1))
        ib = int(np.argmax(elpd[j]))
        best.append(models[ib])
        d = point - point[ib]
        diff[j] = d.sum(1)
        dse[j] = np.sqrt(obs.size * d.var(1, ddof=1))
    dims = ("config", "candidate")
    ds = xr.Dataset({"elpd": (dims, elpd), "se": (dims, se), "elpd_diff": (dims, diff), "dse": (dims, dse),
                     "best": ("config", best)},
                    coords={"config": counts.config.values, "candidate": models},
                    attrs={"folds": folds, "seed": str(seed)})
    if extend_inferencedata:
        attach(target, "cv_elpd", ds)
    return ds


def _counts_of(data) -> xr.Dataset:
    """Return the counts of a counts Dataset, a fit (observed c, constant n) or a run tree."""
    if isinstance(data, xr.Dataset | pd.DataFrame | xr.DataTree):
        return validate_counts(data)  # a run tree (bp.load_run): its counts
    if hasattr(data, "groups") and "observed_data" in data.groups() and "constant_data" in data.groups():
        from ..data.counts import counts_of_fit

        return counts_of_fit(data)
    path = f" {os.fspath(data)!r}: read it with bp.read_counts(path)" if isinstance(data, str | os.PathLike) else ""
    raise TypeError(f"counts must be a counts Dataset, a fit (InferenceData) or a run tree; got "
                    f"{type(data).__name__}{path}")
