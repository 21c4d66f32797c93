"""pass@k curves with credible bands from a fitted InferenceData."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

from ..defaults import rcParams
from ..validate import as_k, check_prob

__all__ = ["passk_curve", "plot_passk_curve", "improvability"]


def _hdi(x: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Narrowest interval containing ``prob`` of the samples along axis 0."""
    s = np.sort(x, axis=0)
    m = s.shape[0]
    width = max(1, int(np.floor(prob * m)))
    if width >= m:
        return s[0], s[-1]
    lengths = s[width:] - s[: m - width]
    idx = np.argmin(lengths, axis=0)
    take = np.take_along_axis
    return take(s, idx[None], 0)[0], take(s, (idx + width)[None], 0)[0]


def passk_curve(idata, k=None, *, ci_prob: float | None = None) -> xr.Dataset:
    """Posterior pass@k per config with equal-tailed and HDI bounds.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`bayespass.fit` (MCMC or EB).
    k : int or sequence of int, optional
        Defaults to the k grid stored in the ``passk`` group; any other k is
        computed from the posterior (Rao-Blackwellised, also k > n).
    ci_prob : float, optional
        Interval probability (default ``rcParams["stats.ci_prob"]`` = 0.9).

    Returns
    -------
    xarray.Dataset
        Over ``(config, k)``: ``mean`` (Rao-Blackwellised posterior mean),
        ``eti_lower``, ``eti_upper``, ``hdi_lower``, ``hdi_upper`` (from draws
        of the dataset pass@k that include the per-task spread; see
        :func:`bayespass.passk_draws`).
    """
    from ..models.predictive import passk_draws

    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    if k is None:
        draws = idata.passk
    else:
        k = as_k(k)
        stored = idata.passk.k.values if "passk" in idata.groups() else np.array([])
        # new k: the same (thinned) draws as the stored group, so both give one posterior
        thin = idata.passk.sizes["draw"] if "passk" in idata.groups() else 1000
        draws = (idata.passk.sel(k=k) if np.isin(k, stored).all()
                 else passk_draws(idata, k, max_draws=thin, seed=idata.posterior.attrs.get("seed", 0)))
    flat = draws["passk"].stack(sample=("chain", "draw")).transpose("sample", "config", "k").values
    point = draws["passk_mean"].mean(("chain", "draw")).transpose("config", "k").values
    lo, hi = _hdi(flat, prob)
    q = np.quantile(flat, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    coords = {"config": draws.config.values, "k": draws.k.values}
    dims = ("config", "k")
    out = xr.Dataset({"mean": (dims, point), "eti_lower": (dims, q[0]), "eti_upper": (dims, q[1]),
                      "hdi_lower": (dims, lo), "hdi_upper": (dims, hi)}, coords=coords)
    out.attrs.update(ci_prob=prob, model=idata.posterior.attrs.get("bayespass_model", ""),
                     method=idata.posterior.attrs.get("bayespass_method", ""))
    return out


def plot_passk_curve(curve: xr.Dataset, *, counts: xr.Dataset | None = None, truth: xr.DataArray | None = None,
                     ax=None, band: str = "eti") -> Axes:
    """Plot pass@k curves with bands per config; overlay the unbiased estimator where n >= k.

    Parameters
    ----------
    curve : xarray.Dataset
        From :func:`passk_curve`.
    counts : xarray.Dataset, optional
        When given, the unbiased estimate is drawn as markers at k <= min n.
    truth : xarray.DataArray, optional
        Known true pass@k over ``(config, k)`` (simulations), drawn dashed.
    ax : matplotlib Axes, optional
    band : {"eti", "hdi"}
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .passk import passk

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    k = curve.k.values
    for i, cfg in enumerate(curve.config.values):
        color = f"C{i % 10}"
        sub = curve.sel(config=cfg)
        ax.plot(k, sub["mean"], color=color, label=str(cfg))
        ax.fill_between(k, sub[f"{band}_lower"], sub[f"{band}_upper"], color=color, alpha=0.2, lw=0)
        if counts is not None:
            kk = k[k <= int(counts.n.sel(config=cfg).where(counts.n.sel(config=cfg) > 0).min())]
            if kk.size:
                est = passk(counts.sel(config=[cfg]), kk, method="unbiased").values[0]
                ax.plot(kk, est, "o", color=color, ms=3.5, mfc="white")
        if truth is not None:
            ax.plot(truth.k.values, truth.sel(config=cfg).values, "--", color=color, lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    prob = curve.attrs.get("ci_prob", 0.9)
    ax.set_title(f"pass@k, posterior mean and {prob:.0%} {band.upper()}"
                 + (" (o: unbiased estimate)" if counts is not None else ""))
    ax.legend(fontsize=8, loc="lower right")
    return ax


def improvability(idata, *, ci_prob: float | None = None) -> xr.Dataset:
    """Posterior summaries of dPass = a + b (concentration) and pass@1 per config.

    At equal pass@1, larger ``a + b`` means larger pass@k for every k >= 2.
    """
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    post = idata.posterior
    if "kappa" in post:
        kappa = post["kappa"]
    elif "phi" in post:
        kappa = post["phi"]
    else:
        raise ValueError("idata.posterior has neither 'kappa' (bb/zoibb) nor 'phi' (hier)")
    p1 = passk_curve(idata, [1], ci_prob=prob).isel(k=0, drop=True)
    qs = kappa.quantile([(1 - prob) / 2, (1 + prob) / 2], dim=("chain", "draw"))
    return xr.Dataset({
        "dpass_mean": kappa.mean(("chain", "draw")),
        "dpass_lower": qs.isel(quantile=0, drop=True), "dpass_upper": qs.isel(quantile=1, drop=True),
        "pass1_mean": p1["mean"], "pass1_lower": p1["eti_lower"], "pass1_upper": p1["eti_upper"],
    }, attrs={"ci_prob": prob})
