"""``zoibb``: zero-one-inflated Beta-Binomial.

``p_i = 0`` w.p. ``pi0``, ``1`` w.p. ``pi1``, else ``Beta(a, b)``; p integrated out:
``P(c) = pi0 1[c=0] + pi1 1[c=n] + (1 - pi0 - pi1) BB(c | n, a, b)``.
Priors: those of ``bb`` and ``(1 - pi0 - pi1, pi0, pi1) ~ Dirichlet(1, 1, 1)``;
``theta = (logit mu, log kappa, z0, z1)`` with the masses ``softmax(0, z0, z1)``.
"""

from __future__ import annotations

import numpy as np

from ..stats import kernels
from ..stats.kernels import bb_loglik, zoibb_loglik
from .base import NP, Model, register
from .bb import LOG_KAPPA_MU, bb_grad, beta_logprior, beta_params, beta_prior_draws, beta_prior_grad, mean_rate_start


def masses(theta, xp, first: int = 2):
    """``(pi_B, pi0, pi1)`` as ``softmax(0, z0, z1)`` of coordinates ``first``, ``first + 1``."""
    z = xp.stack([xp.zeros_like(theta[..., first]), theta[..., first], theta[..., first + 1]], axis=-1)
    return xp.softmax(z, axis=-1)


@register
class ZOIBB(Model):
    """Zero-one-inflated Beta-Binomial."""

    name = "zoibb"

    coords = ("logit_mu", "log_kappa", "z0", "z1")
    description = "p = 0 w.p. pi0, 1 w.p. pi1, else Beta(a, b); bb's priors, (pi_B, pi0, pi1) ~ Dirichlet(1, 1, 1)"

    def bounds(self):
        return np.array([[-15.0, 15.0], [-7.0, 12.0], [-25.0, 25.0], [-25.0, 25.0]])

    def logprior(self, theta, xp):
        return beta_logprior(theta, xp) + xp.sum(xp.log(masses(theta, xp)), axis=-1)

    def loglik(self, theta, aux, xp):
        _, _, a, b = beta_params(theta, xp)
        pi = masses(theta, xp)
        return zoibb_loglik(a, b, pi[..., 0], pi[..., 1], pi[..., 2], aux["n"], aux["c"], xp)

    def logp_grad(self, theta, aux, w):
        """Analytic gradient: responsibilities of the three components times their gradients."""
        n, c = aux["n"], aux["c"]
        t = theta[..., None, :]
        _, _, a, b = beta_params(t, NP)
        pi = masses(t, NP)
        with np.errstate(all="ignore"):
            # the components' log terms once: the log-likelihood (as in zoibb_loglik, by log-sum-exp) and the
            # responsibilities come from the same Beta-Binomial evaluation
            logs = np.stack([np.log(pi[..., 0]) + bb_loglik(a, b, n, c, NP),
                             np.where(c == 0, np.log(pi[..., 1]), -np.inf),
                             np.where(c == n, np.log(pi[..., 2]), -np.inf)])
            ll = NP.logsumexp(logs, axis=0)
            resp = np.exp(logs - ll)
        lp = self.logp_of(theta, ll, w)
        g_mu, g_k = bb_grad(theta, n, c, w * np.nan_to_num(resp[0]))
        p_mu, p_k = beta_prior_grad(theta)
        pm = pi[..., 0, :]  # (..., 3)
        wr = np.nan_to_num(resp) * np.where(w > 0, w, 0.0)
        tot = w.sum(-1)
        g_z = [np.sum(wr[j + 1], -1) - tot * pm[..., j + 1] + 1.0 - 3.0 * pm[..., j + 1] for j in range(2)]
        grad = np.stack([g_mu + p_mu, g_k + p_k, g_z[0], g_z[1]], axis=-1)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def logprior_grad(self, theta):
        pi = masses(theta, NP)
        p_mu, p_k = beta_prior_grad(theta)
        return self.logprior(theta, NP), np.stack([p_mu, p_k, 1 - 3 * pi[..., 1], 1 - 3 * pi[..., 2]], axis=-1)

    def q(self, theta, n, c, k):
        _, _, a, b = beta_params(theta, NP)
        pi = masses(theta, NP)
        k = np.asarray(k)
        return 1.0 - kernels.passk_zoibb_predictive(n[..., None], c[..., None], k, a[..., None], b[..., None],
                                                    pi[..., 1:2], pi[..., 2:3])

    def draw_p(self, theta, size, rng):
        _, _, a, b = beta_params(theta, NP)
        pi = masses(theta, NP)
        shape = a.shape + (size,)
        p = rng.beta(np.broadcast_to(a[..., None], shape), np.broadcast_to(b[..., None], shape))
        u = rng.random(shape)
        return np.where(u < pi[..., 1:2], 0.0, np.where(u < pi[..., 1:2] + pi[..., 2:3], 1.0, p))

    def named(self, theta):
        mu, kappa, a, b = beta_params(theta, NP)
        pi = masses(theta, NP)
        return {"mu": mu, "kappa": kappa, "a": a, "b": b, "pi0": pi[..., 1], "pi1": pi[..., 2]}

    def sample_prior(self, size, rng):
        pi = rng.dirichlet(np.ones(3), size)
        return np.column_stack([beta_prior_draws(size, rng), np.log(pi[:, 1:] / pi[:, :1])])

    def start(self, data):
        k = data.n_config
        return np.column_stack([mean_rate_start(data), np.full(k, LOG_KAPPA_MU), np.full(k, -1.0),
                                np.full(k, -1.0)])
