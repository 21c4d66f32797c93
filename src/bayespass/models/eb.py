"""Empirical-Bayes (type-II maximum likelihood) fits of BB and ZOIBB priors.

For each config, the marginal likelihood

    sum_i log[ C(n_i, c_i) B(a + c_i, b + n_i - c_i) / B(a, b) ]         (bb)
    sum_i log[ pi0 1[c_i=0] + pi1 1[c_i=n_i] + (1-pi0-pi1) BB(c_i|n_i,a,b) ]   (zoibb)

is maximised over ``(logit mu, log kappa)`` with ``mu = a/(a+b)``,
``kappa = a + b`` (and softmax logits for the boundary masses) by L-BFGS-B
with analytic gradients, evaluated on distinct (n, c) pairs only.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from scipy.optimize import minimize
from scipy.special import betaln, digamma, expit, logsumexp, softmax

from ..data.counts import validate_counts
from ..stats.kernels import log_binom
from ..stats.pairs import pair_table
from ..validate import check_choice

__all__ = ["fit_eb", "FitWarning"]

PRIORS = ("bb", "zoibb")
_LOGIT_MU = (-15.0, 15.0)
_LOG_KAPPA = (-7.0, 12.0)
_Z = (-25.0, 25.0)


class FitWarning(UserWarning):
    """A fit is non-identified, at a boundary, or failed its convergence gates."""


def theta_to_params(theta, prior: str) -> dict:
    """Map unconstrained ``(logit mu, log kappa[, z0, z1])`` (last axis) to named parameters.

    Works on one vector or on draws of shape (..., P); the boundary masses
    are a softmax of ``(0, z0, z1)`` for zoibb and 0 for bb.
    """
    theta = np.asarray(theta, dtype=float)
    mu, kappa = expit(theta[..., 0]), np.exp(theta[..., 1])
    if prior == "zoibb":
        logits = np.stack([np.zeros_like(mu), theta[..., 2], theta[..., 3]], axis=-1)
        probs = softmax(logits, axis=-1)
        pi0, pi1 = probs[..., 1], probs[..., 2]
    else:
        pi0 = pi1 = np.zeros_like(mu)
    return {"mu": mu, "kappa": kappa, "a": mu * kappa, "b": (1 - mu) * kappa, "pi0": pi0, "pi1": pi1}


def _bb_terms(theta, n, c):
    """Per-pair BB log-lik (without log C(n,c)) and its gradient wrt (logit mu, log kappa)."""
    mu = expit(theta[0])
    kappa = np.exp(theta[1])
    a, b = mu * kappa, (1 - mu) * kappa
    ll = betaln(a + c, b + n - c) - betaln(a, b)
    dab = digamma(a + b) - digamma(a + b + n)
    da = digamma(a + c) - digamma(a) + dab
    db = digamma(b + n - c) - digamma(b) + dab
    g_mu = da * a * (1 - mu) - db * b * mu
    g_k = da * a + db * b
    return ll, np.stack([g_mu, g_k])


def _bb_objective(theta, n, c, w):
    ll, g = _bb_terms(theta, n, c)
    return -np.sum(w * ll), -(g @ w)


def _zoibb_objective(theta, n, c, w):
    ll_b, g_b = _bb_terms(theta[:2], n, c)
    logits = np.array([0.0, theta[2], theta[3]])  # beta, zero, one
    logp = logits - logsumexp(logits)
    with np.errstate(divide="ignore"):
        comps = np.stack([
            logp[0] + ll_b + log_binom(n, c),
            np.where(c == 0, logp[1], -np.inf),
            np.where(c == n, logp[2], -np.inf),
        ])
    ll = logsumexp(comps, axis=0)
    resp = np.exp(comps - ll)
    p = np.exp(logp)
    grad = np.concatenate([
        (resp[0] * g_b) @ w,
        [np.sum(w * (resp[1] - p[1])), np.sum(w * (resp[2] - p[2]))],
    ])
    return -np.sum(w * (ll - log_binom(n, c))), -grad


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
    obj = _bb_objective if prior == "bb" else _zoibb_objective
    bounds = [_LOGIT_MU, _LOG_KAPPA] + ([_Z, _Z] if prior == "zoibb" else [])
    best = None
    for theta0 in (_start(n, c, w, prior), np.array([0.0, 0.0, 0.0, 0.0][: len(bounds)])):
        res = minimize(obj, theta0, args=(n, c, w), jac=True, method="L-BFGS-B", bounds=bounds,
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
        out["log_marginal"][j] = -res.fun + np.sum(w * log_binom(n, c))
        converged[j] = bool(res.success)
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
        bad = [f"{cfg!r}: {st}" for cfg, st in zip(ds.config.values, ds.status.values, strict=True)
               if st != "ok"]
        if bad:
            warnings.warn(f"EB {prior} fit is not fully identified for {len(bad)} config(s): "
                          f"{'; '.join(bad[:5])}. 'mean_only' means every task has n <= 1 (only "
                          "the mean is identified); 'all_zero'/'all_one'/'boundary' mean the "
                          "optimum is at the edge of the parameter space.", FitWarning, stacklevel=2)
    return ds
