"""``lnorm``: zero-one-inflated logit-normal.

``p_i = 0`` w.p. ``pi0``, ``1`` w.p. ``pi1``, else ``logit p_i ~ Normal(m, s)``; p integrated out
by 48-point Gauss-Hermite quadrature.  Its tail near p = 0 falls like a Gaussian in logit
space (faster than any Beta's), so stacking can prefer it where the data say so.
Priors: ``m ~ Normal(0, 3)``, ``log s ~ Normal(log 1.5, 0.7)``, ``(pi_B, pi0, pi1) ~
Dirichlet(1, 0.3, 0.3)`` (most mass near no inflation: a uniform prior pushed pi0 off 0 and
biased pass@k low); ``theta = (m, log s, z0, z1)``.

This file is the whole model: adding a model is a file like this one plus its name in
``bayespass/models/__init__.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._xp import NP, log_binom
from .base import Model, register
from .bb import pair_arrays
from .zoibb import atoms_grad, atoms_logprior, inflate, log_masses, masses

_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(48)
_LOG_W = np.log(_WEIGHTS / np.sqrt(np.pi))
M_SD, LOG_S_MU, LOG_S_SD = 3.0, float(np.log(1.5)), 0.7
ALPHA = np.array([1.0, 0.3, 0.3])  # Dirichlet prior of (pi_B, pi0, pi1): mass near no inflation


def _grid(theta, xp):
    """Quadrature points on the logit scale, shape theta.shape[:-1] + (48,)."""
    return theta[..., 0][..., None] + xp.exp(theta[..., 1])[..., None] * np.sqrt(2.0) * _NODES


@register
class LogitNormal(Model):
    """Zero-one-inflated logit-normal."""

    name = "lnorm"
    coords = ("m", "log_s", "z0", "z1")
    description = "p = 0 w.p. pi0, 1 w.p. pi1, else logit p ~ Normal(m, s)"

    def bounds(self):
        return np.array([[-20.0, 20.0], [-5.0, 3.0], [-25.0, 25.0], [-25.0, 25.0]])

    def logprior(self, theta, xp):
        pi = masses(theta, xp)
        return (-0.5 * xp.square(theta[..., 0] / M_SD) - 0.5 * xp.square((theta[..., 1] - LOG_S_MU) / LOG_S_SD)
                + xp.sum(ALPHA * xp.log(pi), axis=-1))

    def loglik(self, theta, aux, xp):
        n, c = aux["n"][..., None], aux["c"][..., None]
        x = _grid(theta, xp)  # (..., 1, Q) against pairs (..., U, 1)
        # log Binom(c | n, sigmoid(x)) = log C(n,c) + c x - n log(1 + e^x)
        softplus = xp.where(x > 0, x, 0.0) + xp.log1p(xp.exp(xp.where(x > 0, -x, x)))  # log(1 + e^x), stable
        inner = xp.logsumexp(_LOG_W + c * x - n * softplus, axis=-1) + log_binom(aux["n"], aux["c"], xp)
        pi = masses(theta, xp)
        comps = xp.stack([xp.log(pi[..., 0]) + inner, xp.where(xp.eq(aux["c"], 0), xp.log(pi[..., 1]), -np.inf),
                          xp.where(xp.eq(aux["c"], aux["n"]), xp.log(pi[..., 2]), -np.inf)], axis=-1)
        return xp.logsumexp(comps, axis=-1)

    def prepare(self, data):
        return pair_arrays(data)

    def logp_grad(self, theta, aux, w):
        """Analytic gradient (checked against central differences in the tests).

        The (chains, config, U, Q) work is one array, made by one matmul of the pairs' (c, n)
        with the nodes' (x, -softplus x) and then changed in place (a fresh array of that size
        costs more in page faults than the arithmetic); a second matmul gives every moment the
        gradient needs (sums over the nodes of e, e p, e z, e p z).
        """
        n, c = aux["n"], aux["c"]
        z = np.exp(theta[..., 1])[..., None] * (np.sqrt(2.0) * _NODES)  # (..., Q): x - m
        x = theta[..., 0][..., None] + z
        log_pi = log_masses(theta)
        ww = np.where(w > 0, w, 0.0)
        with np.errstate(all="ignore"):
            p = expit(x)
            e = np.stack([c, n], -1) @ np.stack([x, -np.logaddexp(0.0, x)], -2)  # (..., U, Q) log terms
            e += _LOG_W
            top = e.max(-1, keepdims=True)
            e -= top
            np.exp(e, out=e)
            mom = e @ np.stack([np.ones_like(p), p, z, p * z], -1)  # (..., U, 4)
            tot = mom[..., 0]
            dx = c - n * mom[..., 1] / tot  # d inner / d m
            dxs = (c * mom[..., 2] - n * mom[..., 3]) / tot  # d inner / d log s
            ll, ri, r0, r1 = inflate(top[..., 0] + np.log(tot) + aux["lb"], log_pi, n, c)
            lp = (np.sum(ww * ll, -1) - 0.5 * (theta[..., 0] / M_SD) ** 2
                  - 0.5 * ((theta[..., 1] - LOG_S_MU) / LOG_S_SD) ** 2 + atoms_logprior(log_pi, ALPHA))
        grad = np.stack([np.sum(ww * ri * dx, -1) - theta[..., 0] / M_SD**2,
                         np.sum(ww * ri * dxs, -1) - (theta[..., 1] - LOG_S_MU) / LOG_S_SD**2,
                         *atoms_grad(r0, r1, ww, log_pi, ALPHA)], -1)
        lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def q(self, theta, n, c, k):
        p = expit(_grid(theta, NP))  # (..., 1, Q)
        n, c = np.asarray(n, float)[:, None], np.asarray(c, float)[:, None]  # (U, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            logb = np.where(c > 0, c * np.log(p), 0.0) + np.where(n - c > 0, (n - c) * np.log1p(-p), 0.0)
        wq = np.exp(_LOG_W + logb)  # (..., U, Q): the interior's weights, without C(n, c)
        pi = masses(theta, NP)  # (..., 1, 3)
        lb = np.exp(log_binom(n, c))
        z0 = np.where(c == 0, pi[..., 1:2] / lb, 0.0)  # the atoms on the same C(n, c)-free scale
        z1 = np.where(c == n, pi[..., 2:3] / lb, 0.0)
        k = np.atleast_1d(np.asarray(k, float))
        tail = pi[..., 0:1] * (wq @ ((1.0 - p)[..., 0, :, None] ** k))  # (..., U, K)
        return (tail + z0) / (pi[..., 0:1] * wq.sum(-1, keepdims=True) + z0 + z1)

    def draw_p(self, theta, size, rng):
        pi = masses(theta, NP)
        x = theta[..., 0:1] + np.exp(theta[..., 1:2]) * rng.standard_normal(theta.shape[:-1] + (size,))
        u = rng.random(x.shape)
        return np.where(u < pi[..., 1:2], 0.0, np.where(u < pi[..., 1:2] + pi[..., 2:3], 1.0, expit(x)))

    def named(self, theta):
        pi = masses(theta, NP)
        return {"m": theta[..., 0], "s": np.exp(theta[..., 1]), "pi0": pi[..., 1], "pi1": pi[..., 2]}

    def start(self, data):
        rate = np.clip((data.w * data.c).sum(1) / np.maximum((data.w * data.n).sum(1), 1), 0.02, 0.98)
        k = data.n_config
        return np.column_stack([np.log(rate / (1 - rate)), np.full(k, LOG_S_MU), np.full(k, -1.0),
                                np.full(k, -1.0)])

    def sample_prior(self, size, rng):
        pi = rng.dirichlet(ALPHA, size)
        return np.column_stack([rng.normal(0, M_SD, size), rng.normal(LOG_S_MU, LOG_S_SD, size),
                                np.log(pi[:, 1:] / pi[:, :1])])
