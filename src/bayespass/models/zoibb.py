"""``zoibb``: zero-one-inflated Beta-Binomial.

``p_i = 0`` w.p. ``pi0``, ``1`` w.p. ``pi1``, else ``Beta(a, b)``; p integrated out:
``P(c) = pi0 1[c=0] + pi1 1[c=n] + (1 - pi0 - pi1) BB(c | n, a, b)``.
Priors: those of ``bb`` and ``(1 - pi0 - pi1, pi0, pi1) ~ Dirichlet(1, 1, 1)``;
``theta = (logit mu, log kappa, z0, z1)`` with the masses ``softmax(0, z0, z1)``.
"""

from __future__ import annotations

import numpy as np

from ..stats import kernels
from ..stats.kernels import zoibb_loglik
from . import bb as bb_module
from .base import NP, Model, register, warm_data
from .bb import (
    LOG_KAPPA_MU,
    bb_grad,
    bb_terms,
    beta_logprior,
    beta_params,
    beta_prior_draws,
    beta_prior_grad,
    compiled_logp_grad,
    mean_rate_start,
    pair_arrays,
)

#: Dirichlet prior of (pi_B, pi0, pi1)
ALPHA = np.ones(3)


def masses(theta, xp, first: int = 2):
    """``(pi_B, pi0, pi1)`` as ``softmax(0, z0, z1)`` of coordinates ``first``, ``first + 1``."""
    z = xp.stack([xp.zeros_like(theta[..., first]), theta[..., first], theta[..., first + 1]], axis=-1)
    return xp.softmax(z, axis=-1)


def log_masses(theta, first: int = 2):
    """``log (pi_B, pi0, pi1)`` of :func:`masses` (NumPy, stable), a tuple of three ``batch`` arrays."""
    z0, z1 = theta[..., first], theta[..., first + 1]
    top = np.maximum(np.maximum(z0, z1), 0.0)
    norm = top + np.log(np.exp(-top) + np.exp(z0 - top) + np.exp(z1 - top))
    return -norm, z0 - norm, z1 - norm


def inflate(log_inner, log_pi, n, c):
    """Mix a model's interior with atoms at p = 0 and 1, per pair (NumPy, the fast paths).

    ``log_inner`` (..., U) is the interior's log-likelihood of each pair and ``log_pi`` the log masses
    (:func:`log_masses`).  Returns the mixture's log-likelihood and the responsibilities of the interior,
    the atom at 0 and the atom at 1, each (..., U).  Called inside the callers' ``np.errstate`` (a context
    of its own would cost as much as the arithmetic on these small arrays).
    """
    li = log_pi[0][..., None] + log_inner
    l0 = np.where(c == 0, log_pi[1][..., None], -np.inf)
    l1 = np.where(c == n, log_pi[2][..., None], -np.inf)
    top = np.maximum(np.maximum(li, l0), l1)
    ri, r0, r1 = np.exp(li - top), np.exp(l0 - top), np.exp(l1 - top)
    tot = ri + r0 + r1
    return top + np.log(tot), ri / tot, r0 / tot, r1 / tot


def atoms_logprior(log_pi, alpha):
    """Dirichlet(``alpha``) log density of the masses (up to its constant), from their logs."""
    return alpha[0] * log_pi[0] + alpha[1] * log_pi[1] + alpha[2] * log_pi[2]


def atoms_grad(r0, r1, w, log_pi, alpha):
    """Gradient in (z0, z1) of ``sum_u w_u loglik_u`` plus the Dirichlet(``alpha``) log prior of the masses."""
    tot_w, a_sum = w.sum(-1), alpha[0] + alpha[1] + alpha[2]
    p0, p1 = np.exp(log_pi[1]), np.exp(log_pi[2])
    return (np.sum(w * r0, -1) - tot_w * p0 + alpha[1] - a_sum * p0,
            np.sum(w * r1, -1) - tot_w * p1 + alpha[2] - a_sum * p1)


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

    def prepare(self, data):
        return pair_arrays(data)

    def logp_grad(self, theta, aux, w):
        """Analytic gradient: responsibilities of the three components times their gradients.

        Written out component by component (one Beta-Binomial evaluation, with the pairs' log C(n, c)
        from :meth:`prepare`): the fast sampler calls it thousands of times on small arrays, where
        NumPy's per-call overhead, not the arithmetic, is the cost.
        """
        if bb_module.COMPILED:
            out = compiled_logp_grad(self, theta, aux, w)
            if out is not None:
                return out
        _, _, a, b = beta_params(theta[..., None, :], NP)
        log_pi = log_masses(theta)
        ww = np.where(w > 0, w, 0.0)
        with np.errstate(all="ignore"):
            lbb, da, db = bb_terms(a, b, aux)
            ll, rb, r0, r1 = inflate(lbb, log_pi, aux["n"], aux["c"])
            lp = np.sum(ww * ll, -1) + beta_logprior(theta, NP) + atoms_logprior(log_pi, ALPHA)
        g_mu, g_k = bb_grad(theta, ww * rb, da, db)
        p_mu, p_k = beta_prior_grad(theta)
        grad = np.stack([g_mu + p_mu, g_k + p_k, *atoms_grad(r0, r1, ww, log_pi, ALPHA)], axis=-1)
        lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def warm(self):
        """Load the compiled loop (one tiny call) if it is on: forked candidates then inherit it."""
        if bb_module.COMPILED:
            data = warm_data()
            self.logp_grad(self.start(data)[None], self.prepare(data), data.w)

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
