"""Pointwise PSIS-LOO for bayespass fits, in both log-likelihood layouts, and stacking weights.

A task's likelihood depends only on its (n, c), and so does its LOO predictive
density: tasks sharing a pair share a LOO term exactly.  Large fits therefore
store ``log_likelihood`` per distinct pair (``attrs["layout"] == "pair"``, with
the number of tasks of each pair in ``pair_weight``) instead of per task; the
functions here weight each term by its multiplicity, so LOO, model comparison
and stacking give the same numbers in both layouts.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

__all__ = ["pointwise_loo", "stacking_weights"]


def pointwise_loo(idata) -> dict[str, np.ndarray]:
    """PSIS-LOO per observation: ``elpd``, ``lppd``, ``pareto_k``, ``weight`` (config, obs), observed mask.

    Observations are tasks (``layout="task"``, weight 1, unobserved tasks 0) or
    distinct (n, c) pairs (``layout="pair"``, weight = number of tasks).
    """
    import arviz as az

    ll_group = idata.log_likelihood
    ll = ll_group["c"].transpose("chain", "draw", "config", ...).values
    chains, draws = ll.shape[:2]
    flat = ll.reshape(chains * draws, *ll.shape[2:])  # (S, config, obs)
    if ll_group.attrs.get("layout") == "pair":
        weight = ll_group["pair_weight"].values.astype(float)
    else:
        weight = (idata.constant_data["n"].transpose("config", "task").values > 0).astype(float)
    s = flat.shape[0]
    # one memory layout whatever the input's (a fit's own view, or an unpickled copy from a worker process):
    # the sums over draws then run in one order, and LOO and the stacking weights are the same to the bit
    obs = np.ascontiguousarray(np.moveaxis(flat, 0, -1))  # (config, obs, S)
    # tasks of one (n, c) have the same log-likelihood draws, and PSIS treats each row on its own: smoothed once per
    # distinct row (a task layout of 164 tasks holds a dozen), the same numbers to the bit
    rows, inverse = _distinct_rows(obs.reshape(-1, s))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lw, khat = az.psislw(-rows)
    shape = obs.shape[:-1]
    elpd = logsumexp(rows + lw, axis=-1)[inverse].reshape(shape)
    lppd = (logsumexp(rows, axis=-1) - np.log(s))[inverse].reshape(shape)
    khat = np.asarray(khat).reshape(-1)[inverse].reshape(shape)
    return {"elpd": np.where(weight > 0, elpd, 0.0), "lppd": np.where(weight > 0, lppd, 0.0),
            "pareto_k": np.where(weight > 0, khat, np.nan), "weight": weight}


def _distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the distinct rows of ``a`` (2-d; equal bytes) in order of first occurrence, and each row's index there."""
    first: dict[bytes, int] = {}
    inverse = np.fromiter((first.setdefault(row.tobytes(), len(first)) for row in a), dtype=np.intp, count=len(a))
    keep = np.zeros(len(first), dtype=np.intp)
    keep[inverse[::-1]] = np.arange(len(a))[::-1]  # the first row of each (later writes win: reversed)
    return a[keep], inverse


def stacking_weights(elpd: np.ndarray, weight: np.ndarray, *, concentration: float | None = None) -> np.ndarray:
    """Stacking weights of K models from pointwise LOO densities ``elpd`` (K, N) with multiplicities (N,).

    Maximises ``sum_i weight_i log sum_k a_k exp(elpd_ki) + (concentration - 1) sum_k log a_k``
    over the simplex: stacking (Yao, Vehtari, Simpson and Gelman 2018) with a
    symmetric Dirichlet prior on the weights (default
    ``rcParams["stats.stacking_concentration"]`` = 1.5), so that models the
    data cannot tell apart share the weight instead of one taking it all by
    an accident of the optimiser; with 1 it is plain stacking.
    """
    if concentration is None:
        from ..defaults import rcParams

        concentration = rcParams["stats.stacking_concentration"]
    elpd = np.asarray(elpd, float)
    weight = np.asarray(weight, float)
    keep = weight > 0
    elpd, weight = elpd[:, keep], weight[keep]
    n_models = elpd.shape[0]
    if n_models == 1:
        return np.ones(1)
    shift = elpd.max(0)
    dens = np.exp(elpd - shift)  # (K, N)

    prior = concentration - 1.0

    def obj(z):
        a = softmax(np.r_[0.0, z])
        mix = a @ dens
        f = -np.sum(weight * np.log(mix)) - prior * np.sum(np.log(a))
        g_a = -(dens / mix) @ weight - prior / a  # d f / d a
        grad = a * (g_a - a @ g_a)
        return f, grad[1:]

    res = minimize(obj, np.zeros(n_models - 1), jac=True, method="L-BFGS-B")
    return softmax(np.r_[0.0, res.x])
