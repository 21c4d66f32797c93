"""Compiled log density and gradient of ``bb`` and ``zoibb`` (Numba; compiled on first use and cached on disk).

Their NumPy ``logp_grad`` is some forty calls on small arrays, mostly call overhead on the fast path's
thousands of calls per fit.  This module does the same arithmetic in one pass per (draw, config), with the
Beta-Binomial's log-gamma and digamma differences as sums of ``log(x + i)`` and ``1 / (x + i)`` over
``i < m`` (the tables of ``bb_terms``, exact to rounding) for integer counts; the tests compare it with the
NumPy formulas, which stay the definition.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import arg, compiled

__all__ = ["logp_grad"]

_JITTED = ("_rising", "_one", "_kernel")


def _rising(x, lg, dg):
    """``lg[m] = log Gamma(x + m) - log Gamma(x)``, ``dg[m] = psi(x + m) - psi(x)`` for m < lg.size."""
    lg[0], dg[0] = 0.0, 0.0
    for m in range(lg.size - 1):
        lg[m + 1] = lg[m] + math.log(x + m)
        dg[m + 1] = dg[m] + 1.0 / (x + m)


def _one(th, n, c, ww, lb, consts, zoi, grad, tables):
    """Log density of one (draw, config) of bb (``zoi`` False) or zoibb, its gradient into ``grad``."""
    la, da_t, lb_t, db_t, lab, dab = tables
    lk_mu, lk_sd = consts[0], consts[1]
    mu = 1.0 / (1.0 + math.exp(-th[0]))
    kappa = math.exp(th[1])
    a, b = mu * kappa, (1.0 - mu) * kappa
    _rising(a, la, da_t)
    _rising(b, lb_t, db_t)
    _rising(a + b, lab, dab)
    lpi0, lpi1, lpi2 = 0.0, -np.inf, -np.inf
    if zoi:  # the masses' logs (zoibb's log_masses)
        tp = max(max(th[2], th[3]), 0.0)
        norm = tp + math.log(math.exp(-tp) + math.exp(th[2] - tp) + math.exp(th[3] - tp))
        lpi0, lpi1, lpi2 = -norm, th[2] - norm, th[3] - norm
    s_ll, s_mu, s_k, s_r0, s_r1, s_w = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    for u in range(n.size):
        ni, ci = int(n[u]), int(c[u])
        ll = lb[u] + la[ci] + lb_t[ni - ci] - lab[ni]
        d_a, d_b = da_t[ci] - dab[ni], db_t[ni - ci] - dab[ni]
        rb, r0, r1 = 1.0, 0.0, 0.0
        if zoi:  # zoibb's inflate
            l_i = lpi0 + ll
            l_0 = lpi1 if ci == 0 else -np.inf
            l_1 = lpi2 if ci == ni else -np.inf
            tp = max(max(l_i, l_0), l_1)
            rb, r0, r1 = math.exp(l_i - tp), math.exp(l_0 - tp), math.exp(l_1 - tp)
            tot = rb + r0 + r1
            ll = tp + math.log(tot)
            rb, r0, r1 = rb / tot, r0 / tot, r1 / tot
        s_ll += ww[u] * ll
        s_mu += (ww[u] * rb) * (d_a * a * (1.0 - mu) - d_b * b * mu)
        s_k += (ww[u] * rb) * (d_a * a + d_b * b)
        s_r0 += ww[u] * r0
        s_r1 += ww[u] * r1
        s_w += ww[u]
    lp = s_ll + (math.log(mu) + math.log1p(-mu) - 0.5 * ((th[1] - lk_mu) / lk_sd) ** 2)
    grad[0] = s_mu + (1.0 - 2.0 * mu)
    grad[1] = s_k + (-(th[1] - lk_mu) / lk_sd**2)
    if zoi:  # zoibb's atoms_logprior and atoms_grad, Dirichlet(1, 1, 1)
        lp += lpi0 + lpi1 + lpi2
        p0, p1 = math.exp(lpi1), math.exp(lpi2)
        grad[2] = s_r0 - s_w * p0 + 1.0 - 3.0 * p0
        grad[3] = s_r1 - s_w * p1 + 1.0 - 3.0 * p1
    return lp


def _kernel(th, n, c, ww, lb, consts, zoi, mmax, lp, grad):
    """Fill ``lp`` (B, config) and ``grad`` (B, config, P) for ``th`` (B, config, P)."""
    tables = (np.empty(mmax + 1), np.empty(mmax + 1), np.empty(mmax + 1), np.empty(mmax + 1), np.empty(mmax + 1),
              np.empty(mmax + 1))
    for b in range(th.shape[0]):
        for k in range(th.shape[1]):
            lp[b, k] = _one(th[b, k], n[k], c[k], ww[k], lb[k], consts, zoi, grad[b, k], tables)


def logp_grad(theta, aux, w, *, zoi: bool, consts):
    """Return bb's (``zoi`` False) or zoibb's log density and gradient before their masks, or None.

    None where ``bb_terms`` would not use its tables (counts not integral, or n far above the number of pairs,
    where scipy per pair is cheaper): the NumPy path then.
    """
    n = np.atleast_2d(aux["n"])
    if "ni" not in aux or n.size == 0:
        return None
    mmax = int(n.max())
    if mmax > 4 * n.shape[-1]:
        return None
    p = 4 if zoi else 2
    shape = np.broadcast_shapes(np.shape(theta)[:-1], n.shape[:1])
    th = arg(theta, shape + (p,)).reshape(-1, shape[-1], p)
    cfg = n.shape
    lp, grad = np.empty(th.shape[:2]), np.empty(th.shape)
    compiled(globals(), _JITTED, "_kernel")(th, arg(n), arg(aux["c"], cfg), arg(np.where(w > 0, w, 0.0), cfg),
                                            arg(aux["lb"], cfg), consts, zoi, mmax, lp, grad)
    return lp.reshape(shape), grad.reshape(shape + (p,))
