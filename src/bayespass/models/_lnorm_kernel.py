"""Compiled likelihood and gradient of ``lnorm`` (Numba; compiled on first use and cached on disk).

:meth:`bayespass.models.lnorm.LogitNormal.logp_grad` spends its time on the adaptive Gauss-Hermite rule
of each (draw, config, pair): ten Newton steps to the mode, 24 nodes, their log terms and four weighted
sums, then the integrals by parts of the one-sided pairs at wide priors and the atoms.  In NumPy that is
about a hundred passes over small arrays per call, and on small data (164 tasks, one config) each pass is
mostly call overhead.  This module does the same arithmetic in one pass per pair, in the same order (the
Newton steps in lock-step over the whole call, with the same stopping rule), so the results agree with
the NumPy formulas to rounding; ``tests/models/test_lnorm.py`` checks the two against each other.  The
NumPy formulas in :mod:`bayespass.models.lnorm` stay the definition (and the PyTensor graph's source).
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["logp_grad", "kernel"]

_KERNEL = None
_LOCK = threading.Lock()


def kernel():
    """Return the compiled kernel, compiling it (or loading it from Numba's cache) on the first call.

    Where Numba cannot cache on disk (a read-only install with no user cache directory) it compiles
    without a cache, a few seconds per process.
    """
    global _KERNEL
    with _LOCK:  # the stack fits its candidates in threads: compile once
        if _KERNEL is None:
            try:
                _KERNEL = _compile(cache=True)
            except RuntimeError:  # numba: "cannot cache function ...: no locator available"
                _KERNEL = _compile(cache=False)
    return _KERNEL


#: the functions compiled by :func:`_compile`, each calling the others as compiled
_JITTED = ("_ndtr", "_log_ndtr", "_tail", "_modes", "_pair", "_config", "_kernel")


def _compile(cache: bool):
    import numba

    jit = numba.njit(cache=cache, nogil=True, error_model="numpy")
    g = globals()
    for name in _JITTED:  # compiled lazily, at the first call, against the module's (by then compiled) names
        g[name] = jit(g[name]) if not isinstance(g[name], numba.core.dispatcher.Dispatcher) else g[name]
    return g["_kernel"]


def _ndtr(a):
    x = a * math.sqrt(0.5)
    z = abs(x)
    if z < math.sqrt(0.5):
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(z)
    return 1.0 - y if x > 0 else y


def _log_ndtr(a):
    """``log Phi(a)`` by scipy's algorithm (cephes): log1p above 6, the asymptotic series below -20."""
    if a > 6.0:
        return -_ndtr(-a)
    if a > -20.0:
        return math.log(_ndtr(a))
    log_lhs = -0.5 * a * a - math.log(-a) - 0.5 * math.log(2.0 * math.pi)
    last, rhs, num, denom, cons, sign, i = 0.0, 1.0, 1.0, 1.0, 1.0 / (a * a), 1.0, 0
    while abs(last - rhs) > 2.220446049250313e-16:
        i += 1
        last = rhs
        sign = -sign
        denom *= cons
        num *= 2 * i - 1
        rhs += sign * num * denom
    return log_lhs + math.log(rhs)


def _tail(mu, s, g, bp_logw, t, mills):
    """``log E[sigmoid(X)^N]`` by parts and its derivatives in mu and log s (lnorm's ``_log_tail_grad``)."""
    q = g.size
    top = -np.inf
    for j in range(q):
        z = (mu - g[j]) / s
        ln = _log_ndtr(z)
        t[j] = bp_logw[j] + ln
        mills[j] = math.exp(-0.5 * z * z - 0.5 * math.log(2.0 * math.pi) - ln)
        if t[j] > top:
            top = t[j]
    tot, d, dz = 0.0, 0.0, 0.0
    for j in range(q):
        r = math.exp(t[j] - top)
        tot += r
        d += r * mills[j]
        dz += r * (mills[j] * ((mu - g[j]) / s))
    return top + math.log(tot), (d / tot) / s, -(dz / tot)


def _modes(th, n, c, steps):
    """Mode of each (draw, config, pair)'s integrand by Newton (lnorm's ``_mode``), all in lock-step.

    Every pair of the call takes the same number of steps: they stop when every step is below 1e-7.
    """
    b_size, n_cfg, n_pair = th.shape[0], n.shape[0], n.shape[1]
    mode = np.empty((b_size, n_cfg, n_pair))
    for b in range(b_size):
        for k in range(n_cfg):
            m, s = th[b, k, 0], math.sqrt(math.exp(2.0 * th[b, k, 1]))
            p = 1.0 / (s * s)
            for u in range(n_pair):
                ph = (c[k, u] + 0.5) / (n[k, u] + 1.0)
                vi = (n[k, u] + 1.0) * ph * (1.0 - ph)
                mode[b, k, u] = (m * p + math.log(ph / (1.0 - ph)) * vi) / (p + vi)
    for _ in range(steps):
        done = True
        for b in range(b_size):
            for k in range(n_cfg):
                m, s = th[b, k, 0], math.sqrt(math.exp(2.0 * th[b, k, 1]))
                p = 1.0 / (s * s)
                for u in range(n_pair):
                    x0 = mode[b, k, u]
                    sg = 1.0 / (1.0 + math.exp(-x0))
                    v = n[k, u] * sg * (1.0 - sg)
                    step = 3.0 * math.tanh((c[k, u] + m * p - n[k, u] * sg - x0 * p) / (3.0 * (v + p)))
                    mode[b, k, u] = x0 + step
                    if not (abs(step) < 1e-7):
                        done = False
        if done:
            break
    return mode


def _pair(md, m, s2, ni, ci, nodes, log_aw, x, t, sig):
    """One pair's interior log-likelihood (without C(n, c)) and its derivatives in m and log s.

    ``md`` is the mode of its integrand; lnorm's ``_nodes`` and ``_interior_grad``.
    """
    s = math.sqrt(s2)
    p = 1.0 / (s * s)
    sg = 1.0 / (1.0 + math.exp(-md))
    v = ni * sg * (1.0 - sg)
    h = v + p
    sd = h ** -0.5
    top = -np.inf
    for j in range(nodes.size):
        xj = md + sd * (math.sqrt(2.0) * nodes[j])
        e = math.exp(-abs(xj))
        sp = max(xj, 0.0) + math.log1p(e)
        sig[j] = 1.0 / (1.0 + e) if xj >= 0.0 else e / (1.0 + e)  # sigmoid(xj) from the same exponential
        zz = (xj - m) / s
        x[j] = xj
        t[j] = log_aw[j] + ci * xj - ni * sp - 0.5 * (zz * zz)
        if t[j] > top:
            top = t[j]
    tot = 0.0
    for j in range(nodes.size):
        t[j] = math.exp(t[j] - top)
        tot += t[j]
    fm, fs, am, bm = 0.0, 0.0, 0.0, 0.0
    for j in range(nodes.size):
        r = t[j] / tot
        du = x[j] - m
        z = du / s2
        d = ci - ni * sig[j] - z
        fm += r * z
        fs += r * (z * du)
        am += r * d
        bm += r * (d * (x[j] - md))
    li = top + math.log(tot * sd) - 0.5 * math.log(s2) - 0.5 * math.log(2.0 * math.pi)
    dmode_m = 1.0 / (s2 * h)
    dmode_s = 2.0 * (md - m) / (s2 * h)
    curv = v * (1.0 - 2.0 * sg)
    dlsd_m = -0.5 * curv * dmode_m / h
    dlsd_s = -0.5 * (curv * dmode_s - 2.0 / s2) / h
    return li, fm + am * dmode_m + (1.0 + bm) * dlsd_m, (fs - 1.0) + am * dmode_s + (1.0 + bm) * dlsd_s


def _config(th, mode, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw, consts, ll_out, scratch):
    """One (draw, config): each pair's log-likelihood into ``ll_out`` and the weighted sums of the gradient.

    Returns ``(sum w ll, sum w r_i dx, sum w r_i dxs, sum w r_0, sum w r_1, sum w)`` and the log masses.
    """
    x, t, sig, tt, mills = scratch
    m, log_s = th[0], th[1]
    s2 = math.exp(2.0 * log_s)
    # the masses' logs (zoibb's log_masses) and the blend of the by-parts integrals (lnorm's _blend)
    tp = max(max(th[2], th[3]), 0.0)
    norm = tp + math.log(math.exp(-tp) + math.exp(th[2] - tp) + math.exp(th[3] - tp))
    lpi0, lpi1, lpi2 = -norm, th[2] - norm, th[3] - norm
    bt = min(max((log_s - consts[3]) / consts[4], 0.0), 1.0)
    bw, dbw = bt * bt * (3.0 - 2.0 * bt), 6.0 * bt * (1.0 - bt) / consts[4]
    s_ll, s_dm, s_ds, s_r0, s_r1, s_w = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    for u in range(n.size):
        li, dx, dxs = _pair(mode[u], m, s2, n[u], c[u], nodes, log_aw, x, t, sig)
        ed = rev[u]
        if ed < edge_g.shape[0] and bw > 0.0:  # a one-sided pair at a wide prior: blend in its integral by parts
            val, d_mu, d_ls = _tail(edge_sign[ed] * m, math.exp(log_s), edge_g[ed], bp_logw, tt, mills)
            gap = val - li
            li = li + bw * gap
            dx = dx + bw * (edge_sign[ed] * d_mu - dx)
            dxs = dxs + (bw * (d_ls - dxs) + dbw * gap)
        # the atoms (zoibb's inflate)
        l_i = lpi0 + (li + lb[u])
        l_0 = lpi1 if c[u] == 0 else -np.inf
        l_1 = lpi2 if c[u] == n[u] else -np.inf
        tp = max(max(l_i, l_0), l_1)
        ri, r0, r1 = math.exp(l_i - tp), math.exp(l_0 - tp), math.exp(l_1 - tp)
        tot = ri + r0 + r1
        ll_out[u] = tp + math.log(tot)
        s_ll += ww[u] * ll_out[u]
        s_dm += ww[u] * (ri / tot) * dx
        s_ds += ww[u] * (ri / tot) * dxs
        s_r0 += ww[u] * (r0 / tot)
        s_r1 += ww[u] * (r1 / tot)
        s_w += ww[u]
    return s_ll, s_dm, s_ds, s_r0, s_r1, s_w, lpi0, lpi1, lpi2


def _kernel(th, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw, consts, steps, lp, grad, ll_out):
    """Fill ``lp`` (B, config), ``grad`` (B, config, 4) and ``ll_out`` (B, config, U) for ``th`` (B, config, 4)."""
    mode = _modes(th, n, c, steps)
    scratch = (np.empty(nodes.size), np.empty(nodes.size), np.empty(nodes.size), np.empty(bp_logw.size),
               np.empty(bp_logw.size))
    m_sd, log_s_mu, log_s_sd, a0, a1, a2 = consts[0], consts[1], consts[2], consts[5], consts[6], consts[7]
    for b in range(th.shape[0]):
        for k in range(n.shape[0]):
            s_ll, s_dm, s_ds, s_r0, s_r1, s_w, lpi0, lpi1, lpi2 = _config(
                th[b, k], mode[b, k], n[k], c[k], ww[k], lb[k], rev[k], edge_g[k], edge_sign[k], nodes, log_aw,
                bp_logw, consts, ll_out[b, k], scratch)
            m, log_s = th[b, k, 0], th[b, k, 1]
            lp[b, k] = (s_ll - 0.5 * (m / m_sd) ** 2 - 0.5 * ((log_s - log_s_mu) / log_s_sd) ** 2
                        + (a0 * lpi0 + a1 * lpi1 + a2 * lpi2))
            p0, p1, a_sum = math.exp(lpi1), math.exp(lpi2), a0 + a1 + a2
            grad[b, k, 0] = s_dm - m / m_sd**2
            grad[b, k, 1] = s_ds - (log_s - log_s_mu) / log_s_sd**2
            grad[b, k, 2] = s_r0 - s_w * p0 + a1 - a_sum * p0
            grad[b, k, 3] = s_r1 - s_w * p1 + a2 - a_sum * p1


def logp_grad(theta, aux, w, *, nodes, log_aw, bp_logw, consts, steps):
    """Return lnorm's log density per (batch, config), its gradient and each pair's log-likelihood.

    ``theta`` (..., config, 4); ``aux`` from :meth:`~bayespass.models.lnorm.LogitNormal.prepare` (pairs
    (config, U)); ``w`` the pairs' weights.  The log density and gradient are those of
    :meth:`~bayespass.models.lnorm.LogitNormal.logp_grad` before its bounds and finiteness masks.
    ``consts``: the priors' ``M_SD, LOG_S_MU, LOG_S_SD``, ``log _S_LO``, ``log(_S_HI / _S_LO)`` and the
    Dirichlet's ``ALPHA``.
    """
    n = np.ascontiguousarray(np.atleast_2d(aux["n"]), dtype=np.float64)
    shape = np.broadcast_shapes(np.shape(theta)[:-1], n.shape[:1])  # (..., config)
    th = np.broadcast_to(theta, shape + (4,)).astype(np.float64).reshape(-1, shape[-1], 4)
    cfg = n.shape
    c = np.broadcast_to(aux["c"], cfg).astype(np.float64)
    ww = np.broadcast_to(np.where(w > 0, w, 0.0), cfg).astype(np.float64)
    lb = np.broadcast_to(aux["lb"], cfg).astype(np.float64)
    rev = np.broadcast_to(aux["edge_rev"], cfg).astype(np.int64)
    lp, grad = np.empty(th.shape[:2]), np.empty(th.shape)
    ll = np.empty(th.shape[:2] + (cfg[1],))
    kernel()(th, n, c, ww, lb, rev, np.ascontiguousarray(aux["edge_g"], dtype=np.float64),
            np.ascontiguousarray(aux["edge_sign"], dtype=np.float64), nodes, log_aw, bp_logw, consts, steps,
            lp, grad, ll)
    return lp.reshape(shape), grad.reshape(shape + (4,)), ll.reshape(shape + (cfg[1],))
