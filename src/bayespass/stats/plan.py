"""How many samples to draw next: the pass@k band width to expect from more samples per task.

:func:`plan` answers "how many samples per task until the band of pass@k is W wide" by preposterior
simulation: it draws plausible per-task success probabilities from the current fit (a posterior draw of
the hyperparameters, then each task's p given its counts), adds simulated samples up to each candidate
n per task, refits the same model and measures the band.  The expected width at each n, averaged over
the simulations, is returned with the smallest n that reaches the target.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ..defaults import rcParams
from ..validate import as_k, check_positive_int, check_prob

__all__ = ["plan"]


def _posterior_p(idata, rng, pool: int = 4000) -> np.ndarray:
    """One draw of every task's p (config, task) from the fit: hyperparameters, then p given the counts."""
    from ..models.predictive import _model

    model = _model(idata)
    if model.joint:
        raise ValueError(f"plan() supports the per-config models and their stack; model {model.name!r} is joint")
    post = idata.posterior
    ch, dr = rng.integers(post.sizes["chain"]), rng.integers(post.sizes["draw"])
    theta = post["theta"].isel(chain=ch, draw=dr).transpose("config", "param").values
    n = idata.constant_data["n"].transpose("config", "task").values
    c = idata.observed_data["c"].transpose("config", "task").values
    out = np.zeros(n.shape)
    for j in range(n.shape[0]):
        cand = np.clip(model.draw_p(theta[j], pool, rng), 0.0, 1.0)  # the fitted population
        with np.errstate(divide="ignore"):
            logp, log1p = np.log(cand), np.log1p(-cand)
        lw = c[j][:, None] * logp[None, :] + (n[j] - c[j])[:, None] * log1p[None, :]  # (task, pool)
        lw = np.where(np.isnan(lw), -np.inf, lw)
        w = np.exp(lw - lw.max(1, keepdims=True))
        cdf = np.cumsum(w, axis=1)
        u = rng.random(n.shape[1]) * cdf[:, -1]
        out[j] = cand[np.minimum((cdf < u[:, None]).sum(1), pool - 1)]
    return out


def plan(fit, *, k, target_width: float, n_grid=None, n_sims: int = 5, ci_prob: float | None = None,
         seed: int = 0) -> xr.Dataset:
    """Plan samples per task (uniform) for the pass@k band to reach ``target_width`` (preposterior simulation).

    Parameters
    ----------
    fit : arviz.InferenceData
        A fit of a per-config model or ``"auto"`` (:func:`bayespass.fit`); it is refitted, with the same
        model and method, once per simulation and candidate n.
    k : int
        The pass@k whose band is planned.
    target_width : float
        Width of the ``ci_prob`` band to reach (in pass@k units, e.g. 0.05).
    n_grid : sequence of int, optional
        Candidate samples per task (default: 1, 1.5, 2, 3, 5, 8 times the current maximum).
    n_sims : int
        Simulated futures per candidate.
    ci_prob : float, optional
        Band probability (default ``rcParams["stats.ci_prob"]``).
    seed : int
        Seed of the simulations.

    Returns
    -------
    xarray.Dataset
        Over ``(config, n)``: ``expected_width`` (mean over simulations) and ``width_sd``; over
        ``config``: ``current_width`` and ``n_needed`` (the smallest n of the grid whose expected width is
        at most the target; NaN when none is).
    """
    from ..data.counts import make_counts
    from ..models.fit import fit as fit_model
    from .curve import passk_curve

    kk = as_k(k)
    if kk.size != 1:
        raise ValueError(f"k must be one value for plan(); got {k!r}")
    if not isinstance(target_width, int | float) or not 0 < target_width < 1:
        raise ValueError(f"target_width must be in (0, 1); got {target_width!r}")
    n_sims = check_positive_int(n_sims, name="n_sims")
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    n_now = fit.constant_data["n"].transpose("config", "task").values.astype(np.int64)
    c_now = fit.observed_data["c"].transpose("config", "task").values.astype(np.int64)
    if n_grid is None:
        n_grid = np.unique(np.round(int(n_now.max()) * np.array([1, 1.5, 2, 3, 5, 8])).astype(int))
    n_grid = np.asarray(sorted(int(check_positive_int(int(x), name="n_grid")) for x in n_grid))
    post = fit.posterior.attrs
    model, method = post.get("bayespass_model"), post.get("bayespass_method", "eb").split("+")[0]
    configs, tasks = fit.observed_data.config.values, fit.observed_data.task.values
    rng = np.random.default_rng(seed)

    def width(idata):
        band = passk_curve(idata, kk, ci_prob=prob)["eti"].sel(k=kk[0])
        return (band.sel(ci_bound="upper") - band.sel(ci_bound="lower")).values

    widths = np.full((n_sims, configs.size, n_grid.size), np.nan)
    for s in range(n_sims):
        p = _posterior_p(fit, rng)
        for g_i, n_target in enumerate(n_grid):
            extra = np.where(n_now > 0, np.maximum(n_target - n_now, 0), 0)
            c_new = c_now + rng.binomial(extra, p)
            counts = make_counts(n_now + extra, c_new, task=tasks, config=configs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                widths[s, :, g_i] = width(fit_model(counts, model, method, seed=int(rng.integers(1 << 30)),
                                                    progressbar=False))
    mean = widths.mean(0)
    ok = mean <= target_width
    needed = np.where(ok.any(1), n_grid[np.argmax(ok, axis=1)], np.nan)
    return xr.Dataset({"expected_width": (("config", "n"), mean), "width_sd": (("config", "n"), widths.std(0)),
                       "current_width": ("config", width(fit)), "n_needed": ("config", needed)},
                      coords={"config": configs, "n": n_grid},
                      attrs={"k": int(kk[0]), "target_width": float(target_width), "ci_prob": prob,
                             "n_sims": n_sims, "model": str(model), "method": str(method)})
