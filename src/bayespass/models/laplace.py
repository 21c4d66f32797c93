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
2. proposal: multivariate Student-t (5 dof) with the inverse Hessian at the
   mode as scale;
3. importance weights ``p(c|theta) p(theta) / q(theta)``, Pareto-smoothed
   (PSIS); the Pareto k-hat is recorded (k > 0.7: the approximation is not
   trustworthy, and a warning says so);
4. resample ``draws`` draws with those weights.
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


def laplace_draws(n, c, w, prior, *, draws, rng, oversample=4):
    """Draws of the hyperparameters of one config; returns (dict of arrays, k-hat, log evidence)."""
    import arviz as az

    args = (n, c, w, prior)
    start = eb._fit_one(n, c, w, prior)
    mode = minimize(_neg_log_post, start.x, args=args, jac=True, method="L-BFGS-B",
                    bounds=_bounds(prior)).x
    H = _hessian(mode, args)
    evals, evecs = np.linalg.eigh(H)
    cov = (evecs / np.maximum(evals, 1e-6)) @ evecs.T  # regularised inverse of a near-flat direction
    prop = stats.multivariate_t(loc=mode, shape=cov, df=5, seed=rng)
    m = oversample * draws
    thetas = np.atleast_2d(prop.rvs(m))
    logw = -np.array([_neg_log_post(t, *args)[0] for t in thetas]) - prop.logpdf(thetas)
    logw = np.where(np.isfinite(logw), logw, -np.inf)
    smoothed, khat = az.psislw(logw - np.max(logw))
    prob = np.exp(smoothed - np.max(smoothed))
    idx = rng.choice(m, size=draws, replace=True, p=prob / prob.sum())
    th = thetas[idx]
    mu, kappa = expit(th[:, 0]), np.exp(th[:, 1])
    if prior == "zoibb":
        probs = softmax(np.column_stack([np.zeros(draws), th[:, 2], th[:, 3]]), axis=1)
    else:
        probs = np.column_stack([np.ones(draws), np.zeros(draws), np.zeros(draws)])
    vals = {"mu": mu, "kappa": kappa, "a": mu * kappa, "b": (1 - mu) * kappa,
            "pi0": probs[:, 1], "pi1": probs[:, 2]}
    return vals, float(khat), -start.fun
