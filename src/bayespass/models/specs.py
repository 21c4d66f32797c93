"""PyMC model specifications (built here, sampled in :mod:`bayespass.models.fit`).

Three models of per-task success probability, all vectorised over configs:

``bb``
    Per config j: ``mu_j ~ Beta(1, 1)``, ``log kappa_j ~ Normal(log 2, 1.5)``,
    ``a_j = mu_j kappa_j``, ``b_j = (1 - mu_j) kappa_j`` and
    ``c_ij ~ BetaBinomial(n_ij, a_j, b_j)`` (p_ij integrated out).
``zoibb``
    ``bb`` plus boundary masses ``(pi_B, pi0, pi1)_j ~ Dirichlet(1, 1, 1)``:
    ``P(c_ij) = pi0 1[c=0] + pi1 1[c=n] + pi_B BB(c | n, a_j, b_j)`` written in
    closed form with ``logsumexp`` (p_ij integrated out).
``hier``
    Several configs on the same tasks share task difficulty::

        d_i = sigma_d * z_i,  z ~ ZeroSumNormal(1)     (non-centred, sum_i d_i = 0)
        alpha_j ~ Normal(0, 2),  sigma_d ~ HalfNormal(2)
        m_ij = logistic(alpha_j - d_i)
        log phi_j ~ Normal(log 5, 1.5)                       (overdispersion)
        c_ij ~ BetaBinomial(n_ij, m_ij phi_j, (1 - m_ij) phi_j)

    so a config with few samples borrows strength from the others through d.

Unobserved pairs (n = 0) contribute log-likelihood 0.  ``log_likelihood``
is per (config, task) from the marginal likelihood (valid for LOO in
bb/zoibb; in ``hier`` it is conditional on the shared d_i).  The zoibb
likelihood is a ``pm.Potential`` (see :func:`zoibb_logp_tensor`); its
pointwise log-likelihood is computed from the draws after sampling.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..validate import check_choice

__all__ = ["MODELS", "build_model"]

MODELS = ("bb", "zoibb", "hier")


def _coords(counts: xr.Dataset) -> dict:
    return {"config": counts.config.values.tolist(), "task": counts.task.values.tolist()}


def _bb_hyper(pm, pt):
    mu = pm.Beta("mu", 1.0, 1.0, dims="config")
    log_kappa = pm.Normal("log_kappa", np.log(2.0), 1.5, dims="config")
    kappa = pm.Deterministic("kappa", pt.exp(log_kappa), dims="config")
    a = pm.Deterministic("a", mu * kappa, dims="config")
    b = pm.Deterministic("b", (1 - mu) * kappa, dims="config")
    return a, b


def zoibb_logp_tensor(c, n, a, b, pi0, pi1):
    """Elementwise ZOIBB log-pmf as a pytensor expression (all arguments broadcast).

    Written with plain tensor ops (not ``pm.CustomDist``, which silently uses
    only the first row of (config, 1) parameters) so every config's data
    informs its own parameters.
    """
    import pytensor.tensor as pt

    log_binom = pt.gammaln(n + 1) - pt.gammaln(c + 1) - pt.gammaln(n - c + 1)
    bb = log_binom + pt.gammaln(a + c) + pt.gammaln(b + n - c) - pt.gammaln(a + b + n) \
        - (pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b))
    minus_inf = pt.constant(-np.inf)
    l0 = pt.switch(pt.eq(c, 0), pt.log(pi0), minus_inf)
    l1 = pt.switch(pt.eq(c, n), pt.log(pi1), minus_inf)
    lb = pt.log1p(-pi0 - pi1) + bb
    stacked = pt.stack([l0, l1, lb])
    m = pt.max(stacked, axis=0)
    return m + pt.log(pt.sum(pt.exp(stacked - m), axis=0))


def build_model(counts: xr.Dataset, model: str = "bb"):
    """Return the ``pm.Model`` for ``model`` on a validated counts dataset.

    Parameters
    ----------
    counts : xarray.Dataset
        Validated counts dataset.
    model : {"bb", "zoibb", "hier"}
        Model name (see the module docstring for the formulas).
    """
    import pymc as pm
    import pytensor.tensor as pt

    check_choice(model, MODELS, name="model")
    n = counts.n.values.astype("int64")
    c = counts.c.values.astype("int64")
    with pm.Model(coords=_coords(counts) | {"component": ["beta", "zero", "one"]}) as m:
        n_data = pm.Data("n", n, dims=("config", "task"))
        if model == "bb":
            a, b = _bb_hyper(pm, pt)
            pm.BetaBinomial("c", n=n_data, alpha=a[:, None], beta=b[:, None], observed=c,
                            dims=("config", "task"))
        elif model == "zoibb":
            a, b = _bb_hyper(pm, pt)
            w = pm.Dirichlet("w", np.ones(3), dims=("config", "component"))
            pi0 = pm.Deterministic("pi0", w[:, 1], dims="config")
            pi1 = pm.Deterministic("pi1", w[:, 2], dims="config")
            ll = zoibb_logp_tensor(c, n_data, a[:, None], b[:, None], pi0[:, None], pi1[:, None])
            pm.Potential("c_loglik", pt.switch(pt.gt(n_data, 0), ll, 0.0).sum())
        else:
            alpha = pm.Normal("alpha", 0.0, 2.0, dims="config")
            sigma_d = pm.HalfNormal("sigma_d", 2.0)
            # zero-sum: the mean difficulty is absorbed by alpha (no additive ridge)
            z = pm.ZeroSumNormal("z", sigma=1.0, dims="task")
            d = pm.Deterministic("d", sigma_d * z, dims="task")
            log_phi = pm.Normal("log_phi", np.log(5.0), 1.5, dims="config")
            phi = pm.Deterministic("phi", pt.exp(log_phi), dims="config")
            mean = pm.math.sigmoid(alpha[:, None] - d[None, :])
            pm.BetaBinomial("c", n=n_data, alpha=mean * phi[:, None], beta=(1 - mean) * phi[:, None],
                            observed=c, dims=("config", "task"))
    return m
