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

import numpy as np

from ._jit import arg, compiled

__all__ = ["logp_grad", "q"]

#: the functions compiled, each calling the others compiled
_JITTED = ("_ndtr", "_log_ndtr", "_tail", "_modes", "_pair", "_config", "_kernel", "_scales", "_rows", "_modes_rows",
           "_more_steps", "_step_rows", "_tail_value",
           "_lse", "_joint_value", "_q_pair", "_q_one_sided", "_q_kernel")


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


def _modes(th, sd, n, c, steps):
    """Mode of each (draw, config, pair)'s integrand by Newton (lnorm's ``_mode``), all in lock-step.

    ``sd`` (B, config) is the prior's scale as the NumPy caller computes it.  Every pair of the call takes the
    same number of steps: they stop when every step is below 1e-7.
    """
    mode = np.empty((th.shape[0], n.shape[0], n.shape[1]))
    _modes_rows(th, sd, n, c, steps, 0, th.shape[0] * n.shape[0], mode)
    return mode


def _modes_rows(th, sd, n, c, steps, i0, i1, mode):
    """:func:`_modes` for the (draw, config) rows ``i0 <= b * config + k < i1`` into ``mode``, stopping on their own.

    Returns the steps taken; :func:`_more_steps` then takes the others' (the rows of the whole call stop together in
    :func:`_modes`), so that blocks of rows in threads give the same modes, bit for bit.
    """
    n_cfg, n_pair = n.shape[0], n.shape[1]
    for i in range(i0, i1):
        b, k = i // n_cfg, i % n_cfg
        m, s = th[b, k, 0], sd[b, k]
        p = 1.0 / (s * s)
        for u in range(n_pair):
            ph = (c[k, u] + 0.5) / (n[k, u] + 1.0)
            vi = (n[k, u] + 1.0) * ph * (1.0 - ph)
            mode[b, k, u] = (m * p + math.log(ph / (1.0 - ph)) * vi) / (p + vi)
    for it in range(steps):
        if _step_rows(th, sd, n, c, i0, i1, mode):
            return it + 1
    return steps


def _more_steps(th, sd, n, c, extra, i0, i1, mode):
    """Take ``extra`` more Newton steps of the rows ``i0 .. i1`` (see :func:`_modes_rows`)."""
    for _ in range(extra):
        _step_rows(th, sd, n, c, i0, i1, mode)


def _step_rows(th, sd, n, c, i0, i1, mode):
    """One Newton step of :func:`_modes` for the rows ``i0 .. i1``; whether every step was below 1e-7."""
    done = True
    n_cfg, n_pair = n.shape[0], n.shape[1]
    for i in range(i0, i1):
        b, k = i // n_cfg, i % n_cfg
        m, s = th[b, k, 0], sd[b, k]
        p = 1.0 / (s * s)
        for u in range(n_pair):
            x0 = mode[b, k, u]
            sg = 1.0 / (1.0 + math.exp(-x0))
            v = n[k, u] * sg * (1.0 - sg)
            step = 3.0 * math.tanh((c[k, u] + m * p - n[k, u] * sg - x0 * p) / (3.0 * (v + p)))
            mode[b, k, u] = x0 + step
            if not (abs(step) < 1e-7):
                done = False
    return done


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
    mode = _modes(th, _scales(th), n, c, steps)
    _rows(th, mode, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw, consts, 0, th.shape[0] * th.shape[1],
          lp, grad, ll_out)


def _scales(th):
    """Return the prior's scale ``s`` per (draw, config) of ``th`` (B, config, 4), as the NumPy caller does."""
    sd = np.empty((th.shape[0], th.shape[1]))
    for b in range(th.shape[0]):
        for k in range(th.shape[1]):
            sd[b, k] = math.sqrt(math.exp(2.0 * th[b, k, 1]))
    return sd


def _rows(th, mode, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw, consts, i0, i1, lp, grad, ll_out):
    """:func:`_kernel`'s work after the modes, for the (draw, config) rows ``i0 <= b * config + k < i1``.

    Each row writes only its own outputs, so blocks of rows may run in threads (the kernels release the GIL).
    """
    scratch = (np.empty(nodes.size), np.empty(nodes.size), np.empty(nodes.size), np.empty(bp_logw.size),
               np.empty(bp_logw.size))
    m_sd, log_s_mu, log_s_sd, a0, a1, a2 = consts[0], consts[1], consts[2], consts[5], consts[6], consts[7]
    for i in range(i0, i1):
        b, k = i // n.shape[0], i % n.shape[0]
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


#: (draw, config) rows x pairs per call from which :func:`logp_grad` splits the rows over ``rcParams["eb.cores"]``
#: threads (below it the threads cost more than they save: measured on the real MBPP counts)
THREADED_FROM = 1500


def logp_grad(theta, aux, w, *, nodes, log_aw, bp_logw, consts, steps, split: bool | None = None):
    """Return lnorm's log density per (batch, config), its gradient and each pair's log-likelihood.

    ``theta`` (..., config, 4); ``aux`` from :meth:`~bayespass.models.lnorm.LogitNormal.prepare` (pairs
    (config, U)); ``w`` the pairs' weights.  The log density and gradient are those of
    :meth:`~bayespass.models.lnorm.LogitNormal.logp_grad` before its bounds and finiteness masks.
    ``consts``: the priors' ``M_SD, LOG_S_MU, LOG_S_SD``, ``log _S_LO``, ``log(_S_HI / _S_LO)`` and the
    Dirichlet's ``ALPHA``.  ``split``: run blocks of (draw, config) rows in ``rcParams["eb.cores"]`` threads
    (default: from :data:`THREADED_FROM` rows x pairs); the numbers are the same either way, bit for bit.
    """
    n = arg(np.atleast_2d(aux["n"]))
    shape = np.broadcast_shapes(np.shape(theta)[:-1], n.shape[:1])  # (..., config)
    th = arg(theta, shape + (4,)).reshape(-1, shape[-1], 4)
    cfg = n.shape
    c, lb = arg(aux["c"], cfg), arg(aux["lb"], cfg)
    ww = arg(np.where(w > 0, w, 0.0), cfg)
    rev = arg(aux["edge_rev"], cfg, np.int64)
    lp, grad = np.empty(th.shape[:2]), np.empty(th.shape)
    ll = np.empty(th.shape[:2] + (cfg[1],))
    edge_g, edge_sign = arg(aux["edge_g"]), arg(aux["edge_sign"])
    rows = th.shape[0] * th.shape[1]
    workers = _workers()
    if not split if split is not None else (workers < 2 or rows < 2 or rows * cfg[1] < THREADED_FROM):
        compiled(globals(), _JITTED, "_kernel")(th, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw,
                                                consts, steps, lp, grad, ll)
    else:  # the same arithmetic in blocks of rows in threads, the modes' steps as many as over the whole call
        from .._threads import thread_map

        fn = {name: compiled(globals(), _JITTED, name) for name in ("_scales", "_modes_rows", "_more_steps", "_rows")}
        sd, mode = fn["_scales"](th), np.empty(th.shape[:2] + (cfg[1],))
        cuts = np.linspace(0, rows, max(min(workers, rows), 1) + 1).astype(np.int64)
        blocks = list(zip(cuts[:-1], cuts[1:], strict=True))
        taken = thread_map(lambda ij: fn["_modes_rows"](th, sd, n, c, steps, ij[0], ij[1], mode), blocks, workers)

        def rest(job):
            (i0, i1), own = job
            fn["_more_steps"](th, sd, n, c, max(taken) - own, i0, i1, mode)
            fn["_rows"](th, mode, n, c, ww, lb, rev, edge_g, edge_sign, nodes, log_aw, bp_logw, consts, i0, i1, lp,
                        grad, ll)

        thread_map(rest, list(zip(blocks, taken, strict=True)), workers)
    return lp.reshape(shape), grad.reshape(shape + (4,)), ll.reshape(shape + (cfg[1],))


def _workers() -> int:
    from ..defaults import rcParams

    return int(rcParams["eb.cores"])


# -- the predictive E[(1 - p)^k | n, c, theta] (lnorm's ``q``) ---------------------------------------------------
def _lse(t, size):
    """``log sum exp`` of ``t[:size]`` (``_np_logsumexp``: a non-finite maximum counts as 0)."""
    top = -np.inf
    for j in range(size):
        top = max(top, t[j])
    if not np.isfinite(top):
        top = 0.0
    tot = 0.0
    for j in range(size):
        tot += math.exp(t[j] - top)
    return math.log(tot) + top


def _tail_value(mu, s, g, bp_logw, t):
    """``log E[sigmoid(X)^N]`` by parts (lnorm's ``_log_tail``), ``g`` the nodes of N; ``t`` scratch."""
    for j in range(g.size):
        t[j] = bp_logw[j] + _log_ndtr((mu - g[j]) / s)
    return _lse(t, g.size)


def _joint_value(mu, s, x, lw, t):
    """``log E[sigmoid(X)^n sigmoid(-X)^k]`` on the trapezoid of lnorm's ``_log_joint_top``; ``t`` scratch."""
    for j in range(x.size):
        u = (x[j] - mu) / s
        t[j] = lw[j] - 0.5 * u * u
    return _lse(t, x.size) - math.log(s) - 0.5 * math.log(2.0 * math.pi)


def _q_pair(md, m, s, ni, ci, nodes, log_aw, r, lq):
    """One pair's interior: its posterior weights at the nodes into ``r``, ``log(1 - p)`` there into ``lq``.

    Returns the interior's log-likelihood without C(n, c) (lnorm's ``_inner``).
    """
    p = 1.0 / (s * s)
    sg = 1.0 / (1.0 + math.exp(-md))
    sd = (ni * sg * (1.0 - sg) + p) ** -0.5
    top = -np.inf
    for j in range(nodes.size):
        xj = md + sd * (math.sqrt(2.0) * nodes[j])
        sp = max(xj, 0.0) + math.log1p(math.exp(-abs(xj)))
        zz = (xj - m) / s
        r[j] = log_aw[j] + ci * xj - ni * sp - 0.5 * (zz * zz)
        lq[j] = -sp
        top = max(top, r[j])
    tot = 0.0
    for j in range(nodes.size):
        r[j] = math.exp(r[j] - top)
        tot += r[j]
    for j in range(nodes.size):
        r[j] /= tot
    return math.log(tot) + top + math.log(sd / s) - 0.5 * math.log(2.0 * math.pi)


def _q_one_sided(mu, s, wb, ks, zero, g_n, g_nk, jx, jlw, bp_logw, li, tail, t):
    """Blend a one-sided pair's integrals by parts into ``tail`` (K,) at blend weight ``wb``; return its li.

    lnorm's ``_q_wide_one_sided``: c = 0 (``g_nk`` the nodes of n + k) or c = n (``jx``, ``jlw`` its trapezoid);
    ``t`` scratch of the caller's.
    """
    lt_n = _tail_value(mu, s, g_n, bp_logw, t)
    for j in range(ks.size):
        log_q = 0.0
        if ks[j] > 0:
            top = _tail_value(mu, s, g_nk[j], bp_logw, t) if zero else _joint_value(mu, s, jx[j], jlw[j], t)
            log_q = min(top - lt_n, 0.0)
        log_ad = math.log(max(tail[j], 1e-300))
        tail[j] = math.exp(log_ad + wb * (log_q - log_ad))
    return li + wb * (lt_n - li)


def _q_kernel(th, n, c, lb, ks, uk, inv, half, sq, nodes, log_aw, bp_logw, consts, steps, edge, g_n, g_nk, jx, jlw,
              out):
    """Fill ``out`` (B, U, K) with ``E[(1 - p)^k | n, c, theta]`` for ``th`` (B, 4) and pairs ``n``, ``c`` (U,)."""
    sd = np.empty((th.shape[0], 1))
    for b in range(th.shape[0]):
        sd[b, 0] = math.exp(th[b, 1])
    mode = _modes(th.reshape(th.shape[0], 1, 4), sd, n.reshape(1, -1), c.reshape(1, -1), steps)
    r, lq, pw, tail = np.empty(nodes.size), np.empty(nodes.size), np.empty((uk.size, nodes.size)), np.empty(ks.size)
    vals, t = np.empty(uk.size), np.empty(max(bp_logw.size, jx.shape[-1]))  # t: the integrals' scratch
    for b in range(th.shape[0]):
        m, log_s = th[b, 0], th[b, 1]
        tp = max(max(th[b, 2], th[b, 3]), 0.0)
        norm = tp + math.log(math.exp(-tp) + math.exp(th[b, 2] - tp) + math.exp(th[b, 3] - tp))
        bt = min(max((log_s - consts[3]) / consts[4], 0.0), 1.0)
        wb = bt * bt * (3.0 - 2.0 * bt)
        for u in range(n.size):
            li = _q_pair(mode[b, 0, u], m, sd[b, 0], n[u], c[u], nodes, log_aw, r, lq)
            for i in range(uk.size):  # increasing k: a power whose half is among them is the half's square
                vals[i] = 0.0
                for j in range(nodes.size):
                    pw[i, j] = pw[half[i], j] ** 2 if sq[i] else math.exp(lq[j] * uk[i])
                    vals[i] += r[j] * pw[i, j]
            for j in range(ks.size):
                tail[j] = vals[inv[j]]
            e = edge[u]
            if e >= 0 and wb > 0.0:  # a one-sided pair at a wide prior
                zero = c[u] == 0
                li = _q_one_sided(-m if zero else m, sd[b, 0], wb, ks, zero, g_n[e], g_nk[e], jx[e], jlw[e], bp_logw,
                                  li, tail, t)
            l_i = -norm + li
            l_0 = th[b, 2] - norm - lb[u] if c[u] == 0 else -np.inf
            l_1 = th[b, 3] - norm - lb[u] if c[u] == n[u] else -np.inf
            top = max(max(l_i, l_0), l_1)
            wi, z0, z1 = math.exp(l_i - top), math.exp(l_0 - top), math.exp(l_1 - top)
            for j in range(ks.size):
                out[b, u, j] = (wi * tail[j] + z0) / (wi + z0 + z1)


def q(theta, n, c, k, *, nodes, log_aw, bp_logw, consts, steps, tail_nodes, joint_nodes):
    """Return lnorm's predictive ``E[(1 - p)^k | n, c, theta]``, shape ``theta.shape[:-2] + (U, K)``.

    ``theta`` (..., 1, 4); ``n``, ``c`` (U,); ``k`` (K,).  ``tail_nodes(N)`` and ``joint_nodes(n, k)`` give the
    data's part of the integrals by parts (the nodes of ``sigmoid(x)^N``; the trapezoid's nodes and log weights
    of ``sigmoid(x)^n sigmoid(-x)^k``), computed here for the one-sided pairs only.
    """
    from .._xp import log_binom

    th = arg(np.asarray(theta)[..., 0, :].reshape(-1, 4))
    n, c = arg(np.ravel(n)), arg(np.ravel(c))
    ks = arg(np.atleast_1d(k))
    uk, inv = np.unique(ks, return_inverse=True)
    half = np.searchsorted(uk, uk / 2)
    sq = (uk > 0) & (half < uk.size) & (uk[np.minimum(half, uk.size - 1)] == uk / 2)
    one = np.flatnonzero(((c == 0) | (c == n)) & (n > 0))
    edge = np.full(n.size, -1, np.int64)
    edge[one] = np.arange(one.size)
    q_n = bp_logw.size
    g_n, g_nk = np.zeros((one.size, q_n)), np.zeros((one.size, ks.size, q_n))
    jx, jlw = np.zeros((one.size, ks.size, 64)), np.zeros((one.size, ks.size, 64))
    wide = one.size > 0 and np.max(np.asarray(theta)[..., 1]) > consts[3]  # some draw's s above _S_LO
    for i, u in enumerate(one if wide else ()):  # the data's part of the integrals by parts (wide priors only)
        g_n[i] = tail_nodes(n[u:u + 1])[0]
        if c[u] == 0:
            g_nk[i] = tail_nodes(n[u] + ks)
        else:
            jx[i], jlw[i] = joint_nodes(n[u], np.where(ks > 0, ks, 1.0))
    out = np.empty((th.shape[0], n.size, ks.size))
    compiled(globals(), _JITTED, "_q_kernel")(
        th, n, c, log_binom(n, c), ks, uk, inv.astype(np.int64), half.astype(np.int64), sq, nodes, log_aw, bp_logw,
        consts, steps, edge, g_n, g_nk, jx, jlw, out)
    return out.reshape(np.shape(theta)[:-2] + (n.size, ks.size))
