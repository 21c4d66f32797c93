"""Closed-form pass@k estimators over a counts dataset (the xarray layer)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from scipy.stats import hypergeom

from ..data.counts import validate_counts
from ..defaults import rcParams
from ..validate import as_k, check_choice, parse_list
from . import kernels
from .pairs import PairTable, pair_table

__all__ = ["passk", "avg_at_n", "cons_at_k", "METHODS"]

METHODS = ("naive", "unbiased", "bb", "zoibb", "linmix")


def _config_coords(counts: xr.Dataset) -> dict:
    return {k: v for k, v in counts.coords.items() if "task" not in v.dims}


def _pair_values(method: str, table: PairTable, k: np.ndarray, fits: dict,
                 m_low: float, m_high: float) -> np.ndarray:
    n, c = table.n, table.c
    if method == "naive":
        return kernels.passk_naive(n[:, None], c[:, None], k[None, :])
    if method == "unbiased":
        return kernels.passk_unbiased_grid(n, c, k)

    def par(fit, name):
        return fit[name].values[table.cfg]

    if method == "bb":
        f = fits["bb"]
        return kernels.passk_bb_predictive_grid(n, c, k, par(f, "a"), par(f, "b"))
    f = fits["zoibb"]
    z = kernels.passk_zoibb_predictive_grid(n, c, k, par(f, "a"), par(f, "b"), par(f, "pi0"), par(f, "pi1"))
    if method == "zoibb":
        return z
    bb = _pair_values("bb", table, k, fits, m_low, m_high)
    w = kernels.linmix_weight(table.n, m_low, m_high)[:, None]
    return w * z + (1 - w) * bb


def _mean_only_pass1(vals: np.ndarray, method: str, k: np.ndarray, fits: dict, counts: xr.Dataset) -> np.ndarray:
    """Fill the dataset pass@1 of a Bayesian method for configs whose EB fit identifies only the mean.

    With one sample per task the prior's shape is not identified, but the dataset mean of the posterior
    predictive pass@1 is: for any prior G with mean mu, averaging E[p | c_i] over tasks gives
    c_bar E_G[p^2] / mu + (1 - c_bar) (mu - E_G[p^2]) / (1 - mu), which is c_bar when mu = c_bar (the EB
    mean there).  So pass@1 is the observed mean; pass@k for k > 1 stays NaN (it depends on the shape).
    """
    if method not in ("bb", "zoibb", "linmix") or not np.any(k == 1):
        return vals
    priors = ("bb", "zoibb") if method == "linmix" else (method,)
    mean_only = np.all([fits[p]["status"].values == "mean_only" for p in priors], axis=0)
    if not mean_only.any():
        return vals
    vals = vals.copy()
    vals[np.ix_(mean_only, k == 1)] = avg_at_n(counts).values[mean_only, None]
    return vals


def passk(
    counts: xr.Dataset,
    k: int | Sequence[int] | str = (1, 10, 100),
    *,
    method: str | Sequence[str] = "unbiased",
    per_task: bool = False,
    fits: dict[str, xr.Dataset] | None = None,
    m_low: float | None = None,
    m_high: float | None = None,
) -> xr.DataArray:
    """Estimate pass@k per config (dataset level = mean over observed tasks).

    Parameters
    ----------
    counts : xarray.Dataset
        Counts dataset with ``n`` and ``c`` over ``(config, task)``.
    k : int, sequence of int, or str like ``"1,10,100"``
        Values of k.
    method : str or sequence of str
        ``"naive"`` (plug-in ``1-(1-c/n)^k``), ``"unbiased"`` (Chen et al.
        2021; NaN where ``n < k``), ``"bb"`` and ``"zoibb"`` (empirical-Bayes
        posterior predictive), ``"linmix"`` (per-task mixture
        ``w(n) ZOIBB + (1-w(n)) BB`` with ``w = clip((n-m_low)/(m_high-m_low), 0, 1)``).
        A sequence adds an ``estimator`` dimension (not ``method``, which
        would clash with ``DataArray.sel(method=...)``).
    per_task : bool
        Return per-task values over ``(config, task, k)`` instead of the mean.
        Unobserved tasks (n = 0) are NaN for plug-in methods and the prior
        predictive for Bayesian ones.
    fits : dict, optional
        Precomputed :func:`bayespass.fit_eb` results keyed ``"bb"``/``"zoibb"``.
    m_low, m_high : float, optional
        LinMix ramp; defaults from ``rcParams`` (5 and 50).

    Returns
    -------
    xarray.DataArray
        Dims ``(config, k)`` (or ``(config, task, k)``), plus ``estimator`` when
        several methods are asked for.

    Examples
    --------
    >>> import bayespass as bp
    >>> float(bp.passk(bp.make_counts([5], [3]), 2).item())
    0.9
    """
    counts = validate_counts(counts)
    k = as_k(k)
    methods = parse_list(method, name="method")
    for m in methods:
        check_choice(m, METHODS, name="method")
    m_low = rcParams["stats.linmix_m_low"] if m_low is None else float(m_low)
    m_high = rcParams["stats.linmix_m_high"] if m_high is None else float(m_high)
    if not m_high > m_low:
        raise ValueError(f"m_high must be > m_low; got m_low={m_low}, m_high={m_high}")
    fits = dict(fits or {})
    from ..models.eb import fit_eb

    for prior in ("bb", "zoibb"):
        needed = prior in methods or "linmix" in methods
        if needed and prior not in fits:
            fits[prior] = fit_eb(counts, prior)
    table = pair_table(counts.n.values, counts.c.values)
    arrays = []
    for m in methods:
        vals = _pair_values(m, table, k, fits, m_low, m_high)
        if per_task:
            vals = table.per_task(vals)
            if m in ("naive", "unbiased"):
                vals = np.where((counts.n.values > 0)[..., None], vals, np.nan)
        else:
            vals = _mean_only_pass1(table.dataset_mean(vals), m, k, fits, counts)
        arrays.append(vals)
    dims = ("config", "task", "k") if per_task else ("config", "k")
    coords = dict(counts.coords) if per_task else _config_coords(counts)
    coords["k"] = k
    da = xr.DataArray(np.stack(arrays), dims=("estimator",) + dims,
                      coords=coords | {"estimator": methods}, name="passk")
    if isinstance(method, str) and "," not in method:
        da = da.isel(estimator=0, drop=True)
    return da


def avg_at_n(counts: xr.Dataset) -> xr.DataArray:
    """Return avg@n = mean over observed tasks of ``c / n``, per config."""
    counts = validate_counts(counts)
    n, c = counts.n.where(counts.n > 0), counts.c.where(counts.n > 0)
    return (c / n).mean("task").rename("avg_at_n")


def cons_at_k(counts: xr.Dataset, k: int | Sequence[int] | str) -> xr.DataArray:
    """Return cons@k: the fraction of tasks whose majority of k samples is correct.

    With ``n == k`` this is the fraction of tasks with ``c > k/2``.  For
    ``n > k`` it is the unbiased estimate ``P(X > k/2)`` with ``X`` the number
    correct among k samples drawn without replacement from the n
    (hypergeometric); NaN where ``n < k``.
    """
    counts = validate_counts(counts)
    k = as_k(k)
    table = pair_table(counts.n.values, counts.c.values)
    n, c, kk = table.n[:, None], table.c[:, None], k[None, :]
    vals = hypergeom.sf(np.floor(kk / 2), np.maximum(n, 1), c, np.minimum(kk, np.maximum(n, 1)))
    vals = np.where(n >= kk, vals, np.nan)
    coords = _config_coords(counts) | {"k": k}
    return xr.DataArray(table.dataset_mean(vals), dims=("config", "k"), coords=coords, name="cons_at_k")
