"""Compiled log density and gradient of ``flex`` (Numba; compiled on first use and cached on disk).

:meth:`bayespass.models.flex.Flex.logp_grad` is about forty NumPy calls on small arrays (82 support points,
a handful of distinct pairs, 16 spline coefficients), each mostly call overhead: 0.4 ms a call, and the
fast path makes thousands of calls per fit.  This module does the same arithmetic in one pass per
(draw, config); ``tests/models/test_flex.py`` checks it against the NumPy formulas, which stay the
definition (and the PyTensor graph's source).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import arg, compiled

__all__ = ["logp_grad"]

_JITTED = ("_shape", "_one", "_kernel")


def _shape(th, f_rows, lam, ridge, inv_kmax, h):
    """Fill ``h`` with the interior's weights (softmax of the log shape f); return mu, kappa, a, b, scale."""
    k_basis = lam.size
    mu = 1.0 / (1.0 + math.exp(-th[0]))
    kappa = 1.0 / (math.exp(-th[1]) + inv_kmax)
    a, b = mu * kappa, (1.0 - mu) * kappa
    e = math.exp(-2.0 * th[4 + k_basis])
    scale = np.empty(k_basis)
    for k in range(k_basis):
        scale[k] = (ridge + lam[k] * e) ** -0.5
    top = -np.inf
    for j in range(h.size):
        f = a * f_rows[0, j] + b * f_rows[1, j]
        for k in range(k_basis):
            f += (scale[k] * th[4 + k]) * f_rows[2 + k, j]
        h[j] = f
        top = max(top, f)
    tot = 0.0
    for j in range(h.size):
        h[j] = math.exp(h[j] - top)
        tot += h[j]
    for j in range(h.size):
        h[j] /= tot
    return mu, kappa, a, b, scale


def _one(th, lik, w, f_rows, basis, vec, lam, alpha, consts, grad, g, s_sum, h):
    """Log density of one (draw, config) and its gradient into ``grad`` (flex's ``logp_grad``)."""
    ridge, lk_mu, lk_sd, tau_mu, tau_sd, inv_kmax = consts[0], consts[1], consts[2], consts[3], consts[4], consts[5]
    k_basis, n_int = lam.size, h.size
    mu, kappa, a, b, scale = _shape(th, f_rows, lam, ridge, inv_kmax, h)
    top = max(max(0.0, th[2]), th[3])
    p_b, p_0, p_1 = math.exp(-top), math.exp(th[2] - top), math.exp(th[3] - top)
    tot = p_b + p_0 + p_1
    pi = (p_b / tot, p_0 / tot, p_1 / tot)
    g[0], g[n_int + 1] = pi[1], pi[2]
    for j in range(n_int):
        g[j + 1] = pi[0] * h[j]
    s_sum[:] = 0.0
    ll = 0.0
    for u in range(w.size):
        if w[u] > 0:
            den = 0.0
            for j in range(g.size):
                den += lik[u, j] * g[j]
            ll += w[u] * math.log(den)
            for j in range(g.size):
                s_sum[j] += (w[u] / den) * lik[u, j]
    sh = 0.0
    for j in range(n_int):
        sh += s_sum[j + 1] * h[j]
    t_basis = np.zeros(k_basis)  # (df @ basis), then @ vec
    da, db = 0.0, 0.0
    for j in range(n_int):
        df = pi[0] * h[j] * (s_sum[j + 1] - sh)
        da += df * f_rows[0, j]
        db += df * f_rows[1, j]
        for k in range(k_basis):
            t_basis[k] += df * basis[j, k]
    g_lt = -(th[4 + k_basis] - tau_mu) / tau_sd**2
    e = math.exp(-2.0 * th[4 + k_basis])
    sq_u = 0.0
    for k in range(k_basis):
        d_su = 0.0
        for i in range(k_basis):
            d_su += t_basis[i] * vec[i, k]
        u = th[4 + k]
        grad[4 + k] = d_su * scale[k] - u
        g_lt += d_su * ((ridge + lam[k] * e) ** -1.5 * lam[k] * e) * u
        sq_u += u * u
    grad[4 + k_basis] = g_lt
    grad[0] = (da - db) * kappa * mu * (1.0 - mu) + (1.0 - 2.0 * mu)
    grad[1] = (da * a + db * b) * (1.0 - kappa * inv_kmax) - (th[1] - lk_mu) / lk_sd**2
    sv_mean = pi[0] * sh + pi[1] * s_sum[0] + pi[2] * s_sum[n_int + 1]
    a_sum = alpha[0] + alpha[1] + alpha[2]
    grad[2] = pi[1] * (s_sum[0] - sv_mean) + alpha[1] - a_sum * pi[1]
    grad[3] = pi[2] * (s_sum[n_int + 1] - sv_mean) + alpha[2] - a_sum * pi[2]
    return (ll + math.log(mu) + math.log1p(-mu) - 0.5 * ((th[1] - lk_mu) / lk_sd) ** 2
            + (math.log(pi[0]) * alpha[0] + math.log(pi[1]) * alpha[1] + math.log(pi[2]) * alpha[2])
            - 0.5 * sq_u - 0.5 * ((th[4 + k_basis] - tau_mu) / tau_sd) ** 2)


def _kernel(th, lik, w, f_rows, basis, vec, lam, alpha, consts, lp, grad):
    """Fill ``lp`` (B, config) and ``grad`` (B, config, P) for ``th`` (B, config, P)."""
    n_sup = lik.shape[2]
    g, s_sum, h = np.empty(n_sup), np.empty(n_sup), np.empty(n_sup - 2)
    for b in range(th.shape[0]):
        for k in range(th.shape[1]):
            lp[b, k] = _one(th[b, k], lik[k], w[k], f_rows, basis, vec, lam, alpha, consts, grad[b, k], g, s_sum, h)


def logp_grad(model, theta, aux, w):
    """Return flex's log density (batch, config) and gradient (batch, config, P) before its masks, or None.

    None where the pairs' likelihood table does not have one row of pairs per config (the NumPy path then).
    """
    lik = aux["L"]
    shape = np.broadcast_shapes(np.shape(theta)[:-1], lik.shape[:1])
    if lik.ndim != 3 or lik.shape[0] != shape[-1]:
        return None
    p = model.n_params
    th = arg(theta, shape + (p,)).reshape(-1, shape[-1], p)
    ww = arg(w, lik.shape[:2])
    s = model.settings
    consts = np.array([model.ridge, model.lk_mu, model.lk_sd, s["tau_mu"], s["tau_sd"], model.inv_kappa_max],
                      dtype=np.float64)
    lp, grad = np.empty(th.shape[:2]), np.empty(th.shape)
    compiled(globals(), _JITTED, "_kernel")(th, arg(lik), ww, model._f_rows,
                                            model.basis, model.vec, model.lam, model.alpha, consts, lp, grad)
    return lp.reshape(shape), grad.reshape(shape + (p,))
