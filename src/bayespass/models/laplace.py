"""Importance-corrected Laplace approximation for ``fit(method="eb")``.

Empirical Bayes maximises the marginal likelihood ``p(c | theta)``; its
point estimate ignores hyperparameter uncertainty.  To give EB fits the same
layout as MCMC fits (draws, log-likelihood, predictive) without pretending,
draws come from the posterior ``p(theta | c) ∝ p(c | theta) p(theta)`` under
the *same hyperpriors as the PyMC models* (``mu ~ Beta(1, 1)``,
``log kappa ~ Normal(log 2, 1.5)``, ``(pi_B, pi0, pi1) ~ Dirichlet(1, 1, 1)``),
approximated as follows, in the unconstrained space
``theta = (logit mu, log kappa[, z0, z1])`` (softmax logits, beta fixed at 0):

1. start at the evidence-maximising point and find the posterior mode;
2. proposal: a defensive mixture of multivariate Student-t's (5 dof at the
   inverse-Hessian scale, 3 dof at 2.5x that scale);
3. importance weights ``p(c|theta) p(theta) / q(theta)``, Pareto-smoothed
   (PSIS), resampling ``draws`` particles; the Pareto k-hat is recorded;
4. rejuvenation: 25 vectorised random-walk Metropolis steps per particle
   (which leave the exact posterior invariant, so they only reduce the
   importance-sampling error); the acceptance rate is recorded.

A k-hat above 1 means importance sampling failed outright; the fit warns
then (and :func:`bayespass.fit` suggests ``method="mcmc"``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit, softmax

from . import eb

__all__ = ["laplace_draws"]

_LOG2 = np.log(2.0)
_SD = 1.5


def _neg_log_post(theta, n, c, w, prior):
    obj = eb._bb_objective if prior == "bb" else eb._zoibb_objective
    f, g = obj(theta, n, c, w)
    mu = expit(theta[0])
    lp = np.log(mu) + np.log1p(-mu) - 0.5 * ((theta[1] - _LOG2) / _SD) ** 2
    glp = [1 - 2 * mu, -(theta[1] - _LOG2) / _SD**2]
    if prior == "zoibb":
        p = softmax([0.0, theta[2], theta[3]])
        lp += np.sum(np.log(p))
        glp += [1 - 3 * p[1], 1 - 3 * p[2]]
    return f - lp, g - np.asarray(glp)


def _hessian(theta, args, h=1e-5):
    d = theta.size
    H = np.empty((d, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = h
        H[:, i] = (_neg_log_post(theta + e, *args)[1] - _neg_log_post(theta - e, *args)[1]) / (2 * h)
    return 0.5 * (H + H.T)


def _bounds(prior):
    return [eb._LOGIT_MU, eb._LOG_KAPPA] + ([eb._Z, eb._Z] if prior == "zoibb" else [])


def _log_post_batch(th, n, c, w, prior):
    """Vectorised log posterior (up to a constant) for particles ``th`` of shape (B, P)."""
    from scipy.special import betaln, logsumexp

    th = np.atleast_2d(th)
    with np.errstate(all="ignore"):
        mu = expit(th[:, :1])
        kappa = np.exp(th[:, 1:2])
        a, b = mu * kappa, (1 - mu) * kappa
        ll = betaln(a + c, b + n - c) - betaln(a, b)
        lp = np.log(mu[:, 0]) + np.log1p(-mu[:, 0]) - 0.5 * ((th[:, 1] - _LOG2) / _SD) ** 2
        if prior == "zoibb":
            logits = np.column_stack([np.zeros(len(th)), th[:, 2], th[:, 3]])
            logp = logits - logsumexp(logits, axis=1, keepdims=True)
            lbin = eb.log_binom(n, c)
            comps = np.stack([logp[:, :1] + ll + lbin,
                              np.where(c == 0, logp[:, 1:2], -np.inf),
                              np.where(c == n, logp[:, 2:3], -np.inf)])
            ll = logsumexp(comps, axis=0) - lbin
            lp = lp + logp.sum(1)
        out = ll @ w + lp
    lo, hi = np.array(_bounds(prior)).T
    inside = np.all((th > lo) & (th < hi), axis=1)
    return np.where(np.isfinite(out) & inside, out, -np.inf)


def laplace_draws(n, c, w, prior, *, draws, rng, oversample=4, moves=25):
    """Draws of the hyperparameters of one config: (dict of arrays, diagnostics, log evidence)."""
    import arviz as az

    args = (n, c, w, prior)
    start = eb._fit_one(n, c, w, prior)
    mode = minimize(_neg_log_post, start.x, args=args, jac=True, method="L-BFGS-B",
                    bounds=_bounds(prior)).x
    H = _hessian(mode, args)
    evals, evecs = np.linalg.eigh(H)
    cov = (evecs / np.maximum(evals, 1e-6)) @ evecs.T  # regularised inverse of a near-flat direction
    q1 = stats.multivariate_t(loc=mode, shape=cov, df=5, seed=rng)
    q2 = stats.multivariate_t(loc=mode, shape=6.25 * cov, df=3, seed=rng)
    m = oversample * draws
    thetas = np.vstack([np.atleast_2d(q1.rvs(m // 2)), np.atleast_2d(q2.rvs(m - m // 2))])
    logq = np.logaddexp(q1.logpdf(thetas), q2.logpdf(thetas)) - np.log(2.0)
    logw = _log_post_batch(thetas, n, c, w, prior) - logq
    smoothed, khat = az.psislw(logw - np.max(logw))
    prob = np.exp(smoothed - np.max(smoothed))
    th = thetas[rng.choice(m, size=draws, replace=True, p=prob / prob.sum())]
    # rejuvenation moves: random-walk Metropolis with the Laplace covariance
    chol = np.linalg.cholesky((2.38**2 / th.shape[1]) * cov)
    cur = _log_post_batch(th, n, c, w, prior)
    accepted = 0
    for _ in range(moves):
        prop_th = th + rng.standard_normal(th.shape) @ chol.T
        new = _log_post_batch(prop_th, n, c, w, prior)
        acc = np.log(rng.random(draws)) < new - cur
        th[acc], cur[acc] = prop_th[acc], new[acc]
        accepted += int(acc.sum())
    return eb.theta_to_params(th, prior), {"khat": float(khat), "acceptance": accepted / (moves * draws)}, -start.fun
