"""``bb``: Beta-Binomial.  ``p_i ~ Beta(a, b)`` per config, p integrated out.

Priors (per config): ``mu = a / (a + b) ~ Beta(1, 1)``, ``log kappa ~ Normal(log 2, 1.5)``
with ``kappa = a + b``; ``theta = (logit mu, log kappa)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, expit

from ..stats import kernels
from ..stats.kernels import bb_loglik
from .base import NP, Model, PairData, register

LOG_KAPPA_MU, LOG_KAPPA_SD = float(np.log(2.0)), 1.5


def beta_params(theta, xp):
    """``(mu, kappa, a, b)`` from ``theta = (logit mu, log kappa, ...)``."""
    mu = xp.sigmoid(theta[..., 0])
    kappa = xp.exp(theta[..., 1])
    return mu, kappa, mu * kappa, (1 - mu) * kappa


def beta_logprior(theta, xp):
    """``mu ~ Beta(1, 1)`` (in logit coordinates) and ``log kappa ~ Normal(log 2, 1.5)``."""
    mu = xp.sigmoid(theta[..., 0])
    return xp.log(mu) + xp.log1p(-mu) - 0.5 * xp.square((theta[..., 1] - LOG_KAPPA_MU) / LOG_KAPPA_SD)


def bb_grad(theta, n, c, w):
    """Gradient of ``sum_u w_u bb_loglik`` wrt (logit mu, log kappa); theta (..., P), n/c/w (config, U)."""
    mu, kappa, a, b = beta_params(theta[..., None, :], NP)
    dab = digamma(a + b) - digamma(a + b + n)
    da = digamma(a + c) - digamma(a) + dab
    db = digamma(b + n - c) - digamma(b) + dab
    g_mu = np.sum(w * (da * a * (1 - mu) - db * b * mu), axis=-1)
    g_k = np.sum(w * (da * a + db * b), axis=-1)
    return g_mu, g_k


def beta_prior_grad(theta):
    """Gradient of :func:`beta_logprior`."""
    mu = expit(theta[..., 0])
    return 1 - 2 * mu, -(theta[..., 1] - LOG_KAPPA_MU) / LOG_KAPPA_SD**2


def beta_prior_draws(size: int, rng) -> np.ndarray:
    """(logit mu, log kappa) from their priors, shape (size, 2)."""
    mu = rng.beta(1.0, 1.0, size)
    return np.column_stack([np.log(mu / (1 - mu)), rng.normal(LOG_KAPPA_MU, LOG_KAPPA_SD, size)])


def mean_rate_start(data: PairData) -> np.ndarray:
    """Logit of each config's pooled success rate (clipped to [0.02, 0.98])."""
    rate = np.clip((data.w * data.c).sum(1) / np.maximum((data.w * data.n).sum(1), 1), 0.02, 0.98)
    return np.log(rate / (1 - rate))


@register
class BB(Model):
    """Beta-Binomial."""

    name = "bb"

    coords = ("logit_mu", "log_kappa")
    description = "p ~ Beta(a, b); mu = a/(a+b) ~ Beta(1, 1), log(a+b) ~ N(log 2, 1.5)"

    def bounds(self):
        return np.array([[-15.0, 15.0], [-7.0, 12.0]])

    def logprior(self, theta, xp):
        return beta_logprior(theta, xp)

    def loglik(self, theta, aux, xp):
        _, _, a, b = beta_params(theta, xp)
        return bb_loglik(a, b, aux["n"], aux["c"], xp)

    def logp_grad(self, theta, aux, w):
        lp = self.logp(theta, aux, w)
        g_mu, g_k = bb_grad(theta, aux["n"], aux["c"], w)
        p_mu, p_k = beta_prior_grad(theta)
        grad = np.stack([g_mu + p_mu, g_k + p_k], axis=-1)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def logprior_grad(self, theta):
        return beta_logprior(theta, NP), np.stack(beta_prior_grad(theta), axis=-1)

    def q(self, theta, n, c, k):
        _, _, a, b = beta_params(theta, NP)
        k = np.asarray(k)
        return 1.0 - kernels.passk_bb_predictive(n[..., None], c[..., None], k, a[..., None], b[..., None])

    def draw_p(self, theta, size, rng):
        _, _, a, b = beta_params(theta, NP)
        shape = a.shape + (size,)
        return rng.beta(np.broadcast_to(a[..., None], shape), np.broadcast_to(b[..., None], shape))

    def named(self, theta):
        mu, kappa, a, b = beta_params(theta, NP)
        return {"mu": mu, "kappa": kappa, "a": a, "b": b}

    def start(self, data):
        return np.column_stack([mean_rate_start(data), np.full(data.n_config, LOG_KAPPA_MU)])

    def sample_prior(self, size, rng):
        return beta_prior_draws(size, rng)
