"""Model comparison: PSIS-LOO via ArviZ and K-fold cross-validated ELPD of EB fits."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr

from ..data.counts import validate_counts
from ..testing import rng as _rng
from ..validate import check_choice, check_positive_int
from .kernels import bb_logpmf, zoibb_logpmf

__all__ = ["compare", "cv_elpd"]


def _config_view(idata, cfg):
    n = idata.constant_data["n"].sel(config=cfg)
    tasks = n.task.values[n.values > 0]
    return idata.sel(config=cfg, task=tasks)


def compare(idatas: dict, *, per_config: bool = True) -> pd.DataFrame:
    """Compare fits by PSIS-LOO with Pareto-k diagnostics surfaced.

    Parameters
    ----------
    idatas : dict of str -> arviz.InferenceData
        Fits of the same counts (e.g. ``{"bb": ..., "zoibb": ...}``).
    per_config : bool
        Compare within each config (the literature's choice of BB vs ZOIBB
        differs per config); otherwise over all (config, task) pairs.

    Returns
    -------
    pandas.DataFrame
        ``az.compare`` columns (``rank``, ``elpd_loo``, ``p_loo``,
        ``elpd_diff``, ``weight``, ``se``, ``dse``, ``warning``) plus
        ``pareto_k_max`` and ``n_bad_k`` (k > 0.7), indexed by (config, model).
    """
    import arviz as az

    if not isinstance(idatas, dict) or len(idatas) < 2:
        raise ValueError("idatas must be a dict of at least two named InferenceData fits")
    first = next(iter(idatas.values()))
    configs = first.observed_data.config.values if per_config else [None]
    frames = []
    for cfg in configs:
        views = {name: (_config_view(d, cfg) if cfg is not None else d) for name, d in idatas.items()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = az.compare(views, ic="loo")
            ks = {name: az.loo(v, pointwise=True).pareto_k.values for name, v in views.items()}
        table["pareto_k_max"] = [float(np.nanmax(ks[m])) for m in table.index]
        table["n_bad_k"] = [int(np.sum(ks[m] > 0.7)) for m in table.index]
        table["warning"] = table["warning"] | bool([w for w in caught if "Pareto" in str(w.message)])
        table.index = pd.MultiIndex.from_product([[cfg if cfg is not None else "all"], table.index],
                                                 names=["config", "model"])
        frames.append(table)
    return pd.concat(frames)


def _eb_params(n, c, w, prior):
    from ..models.eb import _fit_one, theta_to_params

    p = theta_to_params(_fit_one(n, c, w, prior).x, prior)
    return p["a"], p["b"], p["pi0"], p["pi1"]


def cv_elpd(counts: xr.Dataset, models=("bb", "zoibb"), *, folds: int = 10, seed=0) -> xr.Dataset:
    """K-fold cross-validated ELPD of EB fits, per config (tasks are the folds' units).

    For each fold, hyperparameters are fitted by evidence maximisation on the
    other folds' tasks and the held-out tasks are scored by their marginal
    log-likelihood ``log P(c_i | n_i, a, b[, pi0, pi1])``.

    Returns
    -------
    xarray.Dataset
        Over ``(config, model)``: ``elpd``, ``se``, ``elpd_diff`` (vs the best
        model of the config), ``dse`` (s.e. of the paired difference), and
        ``best`` (over ``config``).
    """
    counts = validate_counts(counts)
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
    dims = ("config", "model")
    return xr.Dataset({"elpd": (dims, elpd), "se": (dims, se), "elpd_diff": (dims, diff), "dse": (dims, dse),
                       "best": ("config", best)},
                      coords={"config": counts.config.values, "model": models},
                      attrs={"folds": folds, "seed": str(seed)})
