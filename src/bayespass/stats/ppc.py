"""Posterior predictive checks on dataset-level statistics of the counts."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .attach import attach_fit
from .panels import panel_grid

__all__ = ["ppc", "plot_ppc", "misfit_note", "STATISTICS"]

STATISTICS = ("frac_zero", "frac_full", "mean_rate", "var_rate", "hist_distance")
_BINS = np.linspace(0, 1, 11)
#: Up to this many samples per task, a config with the same n on every observed task gets one bin (and one bar)
#: per c: 10 bins of c / n put c = 0 and c = 1 of 20 together, where a misfit of the shape near p = 0 shows
EXACT_MAX_N = 25


def _shares(idx: np.ndarray, obs: np.ndarray, bins: int) -> np.ndarray:
    """Fraction of the observed tasks in each of ``bins`` bins (task index ``idx``) along the last axis."""
    onehot = (idx[..., None] == np.arange(bins)) & obs[..., None]
    return onehot.sum(-2) / np.maximum(obs.sum(-1), 1)[..., None]


def exact_levels(n: np.ndarray) -> np.ndarray:
    """Per config (rows of ``n``), its one number of samples per observed task if at most :data:`EXACT_MAX_N`, else 0.

    Such a config's histogram has one bin per number of successes c = 0..n (:func:`ppc`, :func:`plot_ppc`).
    """
    out = np.zeros(n.shape[0], dtype=np.int64)
    for j, row in enumerate(n):
        levels = np.unique(row[row > 0])
        if levels.size == 1 and levels[0] <= EXACT_MAX_N:
            out[j] = int(levels[0])
    return out


def _stats(c: np.ndarray, n: np.ndarray, exact: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Return the statistics of counts ``c`` (..., config, task).

    ``exact`` (config,) is :func:`exact_levels`, or None for 10 bins of c / n everywhere.
    """
    obs = np.broadcast_to(n > 0, c.shape)
    m = np.maximum(obs.sum(-1), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(obs, c / np.where(n > 0, n, 1), 0.0)
    mean = rate.sum(-1) / m
    idx, bins = np.clip(np.digitize(rate, _BINS[1:-1]), 0, len(_BINS) - 2), len(_BINS) - 1
    if exact is not None and exact.any():  # one bin per c where a config has one n <= EXACT_MAX_N
        idx, bins = np.where(exact[:, None] > 0, c, idx), max(int(exact.max()) + 1, bins)
    return {
        "frac_zero": ((c == 0) & obs).sum(-1) / m,
        "frac_full": ((c == n) & obs).sum(-1) / m,
        "mean_rate": mean,
        "var_rate": (np.where(obs, (rate - mean[..., None]) ** 2, 0.0)).sum(-1) / m,
        "hist": _shares(idx, obs, bins),
    }


def _p_values(idata, exact: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observed statistics (config, statistic), replicated ones (draw, config, statistic) and mid-p values.

    ``exact``: :func:`exact_levels` of the fit's n, or None for the histogram of 10 bins of c / n everywhere.
    """
    n = idata.constant_data["n"].values
    c = idata.observed_data["c"].values
    rep_da = idata.posterior_predictive["c"]
    rep = rep_da.stack(s=("chain", "draw")).transpose("s", "config", "task").values
    n_rep = idata.constant_data["n"].sel(task=rep_da.task).values  # all tasks, or the replicated subset
    t_obs, t_rep = _stats(c, n, exact), _stats(rep, n_rep, exact)
    expected = t_rep["hist"].mean(0)

    def dist(h):
        return (((h - expected) ** 2) / (expected + 1e-3)).sum(-1)

    t_obs["hist_distance"], t_rep["hist_distance"] = dist(t_obs["hist"]), dist(t_rep["hist"])
    obs_v = np.stack([t_obs[s] for s in STATISTICS], -1)
    rep_v = np.stack([t_rep[s] for s in STATISTICS], -1)
    return obs_v, rep_v, (rep_v > obs_v).mean(0) + 0.5 * (np.isclose(rep_v, obs_v)).mean(0)


def ppc(idata, *, extend_inferencedata: bool = False) -> xr.Dataset:
    """Bayesian p-values for dataset-level statistics, per config.

    Statistics (over observed tasks): fraction with ``c = 0``, fraction with
    ``c = n``, mean and variance of ``c/n``, and a chi-square distance
    between the histogram of the counts and its posterior-predictive
    expectation: one bin per c = 0..n where a config has the same n on every
    observed task, at most :data:`EXACT_MAX_N`, else 10 bins of ``c/n``.
    ``p_value = P(T_rep > T_obs) + 0.5 P(T_rep = T_obs)`` (mid-p, since the
    statistics are discrete); values near 0 or 1 flag a misfit (for
    ``hist_distance`` only small p-values do).

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A fit from :func:`bayespass.fit` (with ``posterior_predictive``), or a run (``bp.load_run``: its
        main fit).
    extend_inferencedata : bool
        Also attach the result as group ``ppc`` of ``idata``.

    Returns
    -------
    xarray.Dataset
        Over ``(config, statistic)``: ``observed``, ``replicated_mean``,
        ``p_value``, and ``extreme`` (p < 0.025 or p > 0.975; p < 0.05 for
        the histogram distance).
    """
    from ..validate import as_fit

    target, idata = idata, as_fit(idata, what="ppc")  # a run: its main fit
    if "posterior_predictive" not in idata.groups():
        raise ValueError("idata has no posterior_predictive group; fit it with bayespass.fit")
    obs_v, rep_v, p = _p_values(idata, exact_levels(idata.constant_data["n"].values))
    one_sided = np.array([s == "hist_distance" for s in STATISTICS])
    extreme = np.where(one_sided, p < 0.05, (p < 0.025) | (p > 0.975))
    dims = ("config", "statistic")
    out = xr.Dataset({"observed": (dims, obs_v), "replicated_mean": (dims, rep_v.mean(0)),
                      "p_value": (dims, p), "extreme": (dims, extreme)},
                     coords={"config": idata.observed_data.config.values, "statistic": list(STATISTICS)},
                     attrs={"model": idata.posterior.attrs.get("bayespass_model", "")})
    if extend_inferencedata:
        attach_fit(target, "ppc", out)
    return out


def misfit_note(idata, checked: xr.Dataset | None = None) -> str:
    """Return a sentence naming the configs and statistics :func:`ppc` flags as ``extreme``, or "" if none.

    ``checked``: the fit's :func:`ppc`, if made already.  Beyond the samples drawn a fit's band rests on its
    shape of p near 0 and 1; a flagged check says the counts contradict that shape, where the assumption-free
    bounds (:func:`bayespass.passk_bounds`) still hold.
    """
    out = ppc(idata) if checked is None else checked
    ext = out["extreme"].transpose("config", "statistic")
    parts = [f"{cfg} ({', '.join(str(s) for s, x in zip(ext.statistic.values, row, strict=True) if x)})"
             for cfg, row in zip(ext.config.values, ext.values, strict=True) if row.any()]
    if not parts:
        return ""
    more = f" and {len(parts) - 4} more" if len(parts) > 4 else ""
    return (f"the posterior predictive check (bp.ppc) flags {'; '.join(parts[:4])}{more}: these counts are not "
            "what the fit predicts, so beyond the samples drawn its band rests on a shape of p that they "
            "contradict; the bounds that assume no prior (bp.passk_bounds, 'bayespass curve FIT --bounds') hold "
            "under any shape")


def plot_ppc(idata, *, ax=None) -> np.ndarray:
    """Observed histogram of the counts against the replicated band (``rcParams["stats.ci_prob"]``), per config.

    A config with the same number of samples n on every observed task (at most :data:`EXACT_MAX_N`) gets one
    bar per number of successes c = 0..n, so that all-pass and all-fail tasks have bars of their own; other
    configs get 10 bins of c / n.
    """
    from matplotlib.ticker import MaxNLocator

    from ..defaults import rcParams
    from ..validate import as_fit

    if not (hasattr(idata, "groups") and callable(idata.groups)):
        idata = as_fit(idata, what="plot_ppc")  # not an InferenceData: a TypeError naming what it is
    lacking = sorted({"posterior_predictive", "observed_data", "constant_data"} - set(idata.groups()))
    if lacking:
        raise ValueError(f"plot_ppc needs a fit's replicated and observed counts (groups posterior_predictive, "
                         f"observed_data, constant_data, which bp.fit makes); this one lacks {lacking}")
    prob = rcParams["stats.ci_prob"]
    n = idata.constant_data["n"].values
    c = idata.observed_data["c"].values
    rep = idata.posterior_predictive["c"].stack(s=("chain", "draw")).transpose("s", "config", "task").values
    configs = idata.observed_data.config.values
    if ax is None:  # a row of up to four panels, else a square-ish grid (34 configs in a row: 109 inches wide)
        ncols = len(configs) if len(configs) <= 4 else int(np.ceil(np.sqrt(len(configs))))
        axes = panel_grid(len(configs), size=(3.2, 3), ncols=ncols, sharex=False, sharey=False)
    else:
        axes = np.atleast_1d(ax)
        ncols = axes.size
    levels = exact_levels(n)
    for j, a in enumerate(axes):
        obs = n[j] > 0
        n0 = int(levels[j])
        if n0:
            x, ho, hr, width = (np.arange(n0 + 1), _shares(c[j], obs, n0 + 1), _shares(rep[:, j], obs, n0 + 1),
                                0.8)
            a.set_xlabel(f"c, successes of n = {n0}")
            a.xaxis.set_major_locator(MaxNLocator(integer=True))  # counts, not 2.5 successes
        else:  # the binned histogram, of this config alone
            x, ho, hr, width = (0.5 * (_BINS[1:] + _BINS[:-1]), _stats(c[j], n[j])["hist"],
                                _stats(rep[:, j], n[j])["hist"], 0.09)
            a.set_xlabel("c / n")
        lo, hi = np.quantile(hr, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        a.bar(x, ho, width=width, color="0.6", label="observed")
        mean = hr.mean(0)
        # a bin that every replicate fills alike has a mean a rounding error outside its own quantiles
        yerr = np.clip([mean - lo, hi - mean], 0.0, None)
        a.errorbar(x, mean, yerr=yerr, fmt="o", color="C3", ms=3, label=f"replicated ({prob:.0%})")
        a.set_title(str(configs[j]), fontsize=8)
    for a in axes[::ncols]:  # the first of each row
        a.set_ylabel("fraction of tasks")
    axes[0].legend(fontsize=7)
    return axes
