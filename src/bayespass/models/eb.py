"""Empirical-Bayes (type-II maximum likelihood) fits of BB and ZOIBB priors (the closed-form estimators).

For each config, the marginal likelihood of the ``bb`` or ``zoibb`` model (their
own ``loglik`` and analytic gradient, :mod:`bayespass.models.bb`,
:mod:`bayespass.models.zoibb`) is maximised over ``(logit mu, log kappa[, z0,
z1])`` by L-BFGS-B, evaluated on distinct (n, c) pairs only.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from scipy.optimize import minimize

from ..data.counts import validate_counts
from ..stats.pairs import pair_table
from ..validate import check_choice
from .base import NP, PairData, get_model

__all__ = ["fit_eb", "FitWarning"]

PRIORS = ("bb", "zoibb")
_LOGIT_MU = (-15.0, 15.0)
_LOG_KAPPA = (-7.0, 12.0)
_Z = (-25.0, 25.0)


class FitWarning(UserWarning):
    """A fit is non-identified, at a boundary, or failed its convergence gates."""


def theta_to_params(theta, prior: str) -> dict:
    """Named parameters ``mu, kappa, a, b, pi0, pi1`` of unconstrained ``theta`` (last axis) of bb/zoibb."""
    out = get_model(prior).named(np.asarray(theta, float))
    if prior == "bb":
        out["pi0"] = out["pi1"] = np.zeros_like(out["mu"])
    return out


def _objective(model, n, c, w):
    """Negative log marginal likelihood and its gradient for one config's pairs (the model's own)."""
    ww = w[None]
    aux = model.prepare(PairData(n[None], c[None], ww))

    def f(x):
        th = x[None, None, :]
        _, g = model.logp_grad(th, aux, ww)
        _, pg = model.logprior_grad(th)
        with np.errstate(all="ignore"):
            ll = float(np.sum(ww * model.loglik(th[..., None, :], aux, NP)))
        grad = (g - pg)[0, 0]
        if not np.isfinite(ll):
            return 1e300, np.zeros_like(x)
        return -ll, -grad

    return f


def _start(n, c, w, prior):
    mu = np.clip(np.sum(w * c) / np.sum(w * n), 0.02, 0.98)
    theta = [np.log(mu / (1 - mu)), np.log(2.0)]
    if prior == "zoibb":
        theta += [-2.0, -2.0]
    return np.array(theta)


def _status(theta, n, c, w, prior):
    if np.all(n[w > 0] <= 1):
        return "mean_only"
    if np.all(c == 0):
        return "all_zero"
    if np.all(c == n):
        return "all_one"
    # kappa at its upper bound (no overdispersion) and pi at 0 are legitimate optima;
    # mu at either edge, kappa at its lower edge or no Beta mass left are not.
    edges = [abs(theta[0]) > _LOGIT_MU[1] - 1e-3, theta[1] < _LOG_KAPPA[0] + 1e-3]
    if prior == "zoibb":
        edges.append(max(theta[2], theta[3]) > _Z[1] - 1e-3)
    if any(edges):
        return "boundary"
    return "ok"


def _fit_one(n, c, w, prior):
    model = get_model(prior)
    obj = _objective(model, np.asarray(n, float), np.asarray(c, float), np.asarray(w, float))
    bounds = [_LOGIT_MU, _LOG_KAPPA] + ([_Z, _Z] if prior == "zoibb" else [])
    best = None
    for theta0 in (_start(n, c, w, prior), np.array([0.0, 0.0, 0.0, 0.0][: len(bounds)])):
        res = minimize(obj, theta0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": 500, "ftol": 1e-12, "gtol": 1e-8})
        if best is None or res.fun < best.fun:
            best = res
    return best


def fit_eb(counts: xr.Dataset, prior: str = "bb", *, warn: bool = True) -> xr.Dataset:
    """Fit a BB or ZOIBB prior per config by maximising the marginal likelihood.

    Parameters
    ----------
    counts : xarray.Dataset
        A counts dataset (see :func:`bayespass.make_counts`).
    prior : {"bb", "zoibb"}
        Beta-Binomial or zero-one-inflated Beta-Binomial.
    warn : bool
        Emit a :class:`FitWarning` for configs whose status is not ``"ok"``.

    Returns
    -------
    xarray.Dataset
        Over ``config``: ``a``, ``b``, ``pi0``, ``pi1`` (0 for bb), ``mu``,
        ``kappa`` (= a + b, the improvability dPass), ``log_marginal``
        (maximised log evidence), ``n_tasks``, ``converged``, ``status``
        (``"ok"``, ``"boundary"``, ``"all_zero"``, ``"all_one"`` or
        ``"mean_only"``; for ``"mean_only"``, where every task has n <= 1 and
        only ``mu`` is identified, ``a``, ``b`` and ``kappa`` are NaN).

    Examples
    --------
    >>> import bayespass as bp
    >>> fit = bp.fit_eb(bp.make_counts([10, 10, 10, 10], [0, 3, 7, 10]))
    >>> str(fit.status.item())
    'ok'
    """
    counts = validate_counts(counts)
    check_choice(prior, PRIORS, name="prior")
    table = pair_table(counts.n.values, counts.c.values)
    n_cfg = counts.sizes["config"]
    out = {k: np.full(n_cfg, np.nan) for k in ("a", "b", "pi0", "pi1", "mu", "kappa", "log_marginal")}
    converged = np.zeros(n_cfg, bool)
    status = np.empty(n_cfg, dtype=object)
    n_tasks = table.n_observed().astype(int)
    for j in range(n_cfg):
        sel = (table.cfg == j) & table.observed
        n, c, w = table.n[sel].astype(float), table.c[sel].astype(float), table.weight[sel]
        if w.sum() == 0:
            status[j] = "no_data"
            continue
        res = _fit_one(n, c, w, prior)
        theta = res.x
        for key, value in theta_to_params(theta, prior).items():
            out[key][j] = value
        out["log_marginal"][j] = -res.fun
        # a line search that cannot improve at 1e-12 relative precision at a zero gradient has converged
        converged[j] = bool(res.success) or float(np.max(np.abs(res.jac))) < 1e-3 * max(1.0, abs(res.fun)) ** 0.5
        status[j] = _status(theta, n, c, w, prior)
        if status[j] == "mean_only":
            out["mu"][j] = np.sum(w * c) / np.sum(w * n)
            for key in ("a", "b", "kappa"):
                out[key][j] = np.nan
            if prior == "zoibb":
                out["pi0"][j] = out["pi1"][j] = np.nan
    ds = xr.Dataset(
        {k: ("config", v) for k, v in out.items()}
        | {"n_tasks": ("config", n_tasks), "converged": ("config", converged),
           "status": ("config", status.astype(str))},
        coords={k: v for k, v in counts.coords.items() if "task" not in v.dims},
        attrs={"prior": prior, "method": "eb"},
    )
    if warn:
        bad = [f"{str(cfg)!r}: {st}" for cfg, st in zip(ds.config.values, ds.status.values, strict=True)
               if st != "ok"]
        if bad:
            warnings.warn(f"EB {prior} fit is not fully identified for {len(bad)} config(s): "
                          f"{'; '.join(bad[:5])}. 'mean_only' means every task has n <= 1 (only "
                          "the mean is identified); 'all_zero'/'all_one'/'boundary' mean the "
                          "optimum is at the edge of the parameter space.", FitWarning, stacklevel=2)
    return ds
