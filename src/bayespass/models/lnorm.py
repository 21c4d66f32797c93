"""``lnorm``: zero-one-inflated logit-normal.

``p_i = 0`` w.p. ``pi0``, ``1`` w.p. ``pi1``, else ``logit p_i ~ Normal(m, s)``; p integrated out
by *adaptive* Gauss-Hermite quadrature: per (n, c) pair the nodes are centred on the mode of the
integrand ``Binom(c | n, sigmoid x) Normal(x | m, s)`` and scaled by its curvature there (Newton steps,
as lme4's nAGQ).  Nodes centred on the prior instead (this model's first version) missed the
likelihood's peak once it is narrower than their spacing: -7% at n = 50, -78% at n = 200 and every
digit at n = 2000 (``tests/models/test_lnorm.py`` checks the adaptive rule against brute force: within
0.2% from 1 to 2,000 samples per task; 24 nodes for the likelihood, 32 for the predictive, whose
``(1 - p)^k`` moves the integrand off the mode).  Pairs with c = 0 or c = n at a wide prior (s > 2.5, as
on near-deterministic configs) are a wall times a flat prior, whose tail Laplace's scale misses: they are
integrated by parts instead (:func:`_log_tail`).  Its tail near p = 0 falls like a Gaussian in logit
space (faster than any Beta's), so stacking can prefer it where the data say so.
Priors: ``m ~ Normal(0, 3)``, ``log s ~ Normal(log 1.5, 0.7)``, ``(pi_B, pi0, pi1) ~
Dirichlet(1, 0.3, 0.3)`` (most mass near no inflation: a uniform prior pushed pi0 off 0 and
biased pass@k low); ``theta = (m, log s, z0, z1)``.

This file is the whole model: adding a model is a file like this one plus its name in
``bayespass/models/__init__.py``.  (Its likelihood and gradient also run as one compiled loop,
:mod:`bayespass.models._lnorm_kernel`, for speed; the formulas here stay the definition.)
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_ndtr

from .._xp import NP, log_binom
from .._xp import _np_logsumexp as _np_lse
from . import _lnorm_kernel
from .base import BLOCK_CELLS, Model, register, warm_data
from .bb import pair_arrays
from .zoibb import atoms_grad, atoms_logprior, inflate, log_masses, masses

_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(24)
#: log of the weights of adaptive Gauss-Hermite: int f = sqrt(2) sd sum_i w_i e^{t_i^2} f(mode + sqrt(2) sd t_i)
_LOG_AW = np.log(_WEIGHTS) + _NODES**2 + 0.5 * np.log(2.0)
#: the predictive ``q`` (k up to thousands moves the integrand off the mode) uses more nodes
_NODES_Q, _WEIGHTS_Q = np.polynomial.hermite.hermgauss(32)
_LOG_AW_Q = np.log(_WEIGHTS_Q) + _NODES_Q**2 + 0.5 * np.log(2.0)
_NEWTON_STEPS = 10
#: one-sided pairs (c = 0 or c = n) at a wide prior: integrated by parts (see :func:`_log_tail`) on a
#: trapezoid over u = log E, E ~ Exp(1), whose density e^(u - e^u) is smooth with an analytic strip of
#: half-width pi / 2 (the rule's error falls like exp(-pi^2 / h)); below u = -16 the rest is e^-16 of it.
#: 51 nodes: worst error over m in [-15, 15], n in [1, 2000] 5e-5 at s = 3.5, 1e-6 at s = 4, 5e-8 from s = 8
_BP_H = 0.4
_BP_E = np.exp(np.arange(-16.0, 4.2 + 1e-9, _BP_H))
_BP_LOGW = np.log(_BP_E) - _BP_E + np.log(_BP_H)
#: nodes of E[Normal(x | m, s)] under the density of sigmoid(x)^n sigmoid(-x)^k (the predictive of c = n)
_LB_NODES = 64
#: the prior's scales over which the one-sided pairs move from adaptive Gauss-Hermite (narrow priors, where
#: it is exact to 1e-4 at s = 2.5) to the integrals by parts (wide priors, 8e-4 at s = 3), C^1 in log s
_S_LO, _S_HI = 2.5, 4.5
M_SD, LOG_S_MU, LOG_S_SD = 3.0, float(np.log(1.5)), 0.7
ALPHA = np.array([1.0, 0.3, 0.3])  # Dirichlet prior of (pi_B, pi0, pi1): mass near no inflation
#: the likelihood, its gradient and the predictive ``q`` (NumPy callers) by the compiled loops of
#: :mod:`bayespass.models._lnorm_kernel`, equal to the NumPy formulas below to rounding; False: the NumPy formulas
COMPILED = True
_CONSTS = np.array([M_SD, LOG_S_MU, LOG_S_SD, np.log(_S_LO), np.log(_S_HI / _S_LO), *ALPHA])


def _mode(m, s, n, c, xp):
    """Mode of ``c x - n log(1 + e^x) - (x - m)^2 / (2 s^2)`` and the curvature there (both (..., U)).

    Newton from the precision-weighted blend of the prior mean and the empirical logit; the integrand
    is strictly log-concave, and each step is bounded smoothly (``3 tanh(step / 3)``) so that the result
    is a smooth function of ``(m, s)`` for the samplers.
    """
    ph = (c + 0.5) / (n + 1.0)
    vi = (n + 1.0) * ph * (1.0 - ph)
    prec = 1.0 / xp.square(s)
    x = (m * prec + xp.log(ph / (1.0 - ph)) * vi) / (prec + vi)
    cm = c + m * prec
    for _ in range(_NEWTON_STEPS):
        sg = xp.sigmoid(x)
        v = n * sg * (1.0 - sg)
        step = 3.0 * xp.tanh((cm - n * sg - x * prec) / (3.0 * (v + prec)))
        x = x + step
        if xp.name == "numpy" and np.all(np.abs(step) < 1e-7):  # converged (a fixed count in a graph)
            break
    sg = xp.sigmoid(x)
    return x, n * sg * (1.0 - sg) + prec


def _nodes(m, s, n, c, xp, log_aw=_LOG_AW, nodes=_NODES):
    """Build the adaptive rule for pairs (..., U) under ``Normal(m, s)`` (m, s broadcast against the pairs).

    Returns the mode and the curvature there (..., U), the scale ``sd`` (..., U), the nodes ``x``
    (..., U, Q) and each node's log term (..., U, Q): its log weight plus the log integrand without
    C(n, c).  The one place the nodes are built: the likelihood, its gradient and the predictive use it.
    """
    mode, h = _mode(m, s, n, c, xp)
    sd = h ** -0.5
    x = mode[..., None] + sd[..., None] * (np.sqrt(2.0) * nodes)
    terms = (log_aw + c[..., None] * x - n[..., None] * xp.softplus(x)
             - 0.5 * xp.square((x - m[..., None]) / s[..., None]))
    return mode, h, sd, x, terms


def _inner(theta, n, c, xp, log_aw=_LOG_AW, nodes=_NODES):
    """Log of the interior's likelihood without C(n, c), and the nodes: ((..., U), (..., U, Q), (..., U, Q)).

    The third array is each node's log term, so ``softmax`` of it gives the posterior weights of the nodes.
    """
    m, s = theta[..., 0], xp.exp(theta[..., 1])
    _, _, sd, x, terms = _nodes(m, s, n, c, xp, log_aw, nodes)
    return xp.logsumexp(terms, axis=-1) + xp.log(sd / s) - 0.5 * np.log(2.0 * np.pi), x, terms


def _mean_powers(r, log_base, k):
    """``sum_q r_q exp(k log_base_q)`` per k: r, log_base (..., Q), k (K,) -> (..., K).

    Each distinct k once, k first in memory (one contiguous pass per k), and where k / 2 is among them
    as the square of its power: the predictive asks for k and 2k together, so about half the
    exponentials become multiplications (2.3x faster than one (..., Q, K) exponential and a matmul).
    """
    uk, inv = np.unique(k, return_inverse=True)
    half = np.searchsorted(uk, uk / 2)
    sq = (uk > 0) & (half < uk.size) & (uk[np.minimum(half, uk.size - 1)] == uk / 2)
    power = np.empty((uk.size,) + log_base.shape)
    for i in range(uk.size):  # increasing k: each half is done before it is squared
        if sq[i]:
            np.square(power[half[i]], out=power[i])
        else:
            np.exp(log_base * uk[i], out=power[i])
    return np.moveaxis(np.einsum("...q,k...q->k...", r, power), 0, -1)[..., inv]


def _blend_t(log_s, xp):
    """Where ``log s`` lies between ``log _S_LO`` (0) and ``log _S_HI`` (1), clipped."""
    return xp.clip((log_s - np.log(_S_LO)) / np.log(_S_HI / _S_LO), 0.0, 1.0)


def _blend(log_s, xp):
    """Weight of the by-parts integrals of the one-sided pairs: 0 below ``_S_LO``, 1 above ``_S_HI``, smoothstep."""
    t = _blend_t(log_s, xp)
    return xp.square(t) * (3.0 - 2.0 * t)


def _one_sided(n, c, xp):
    """1.0 for the pairs with c = 0 or c = n (and n > 0), else 0.0."""
    edge = xp.where(xp.eq(c, 0), 1.0, xp.where(xp.eq(c, n), 1.0, 0.0))
    return xp.where(xp.eq(n, 0), 0.0, edge)


def _tail_nodes(big_n, xp):
    """``logit(e^(-E / N))`` at the by-parts nodes, (..., Q): depends on the data only."""
    return -xp.log(xp.expm1(_BP_E / big_n[..., None]))


def _log_tail(mu, s, g, xp):
    """``log E[sigmoid(X)^N]``, ``X ~ Normal(mu, s)``, by parts: ``E_{P ~ Beta(N, 1)}[Pr(X > logit P)]``.

    The pair's integrand ``sigmoid(x)^N`` is one-sided (a wall near log N, flat above it), so Laplace's
    scale at the mode misses the prior's tail when s is wide (-6% at s = 16 with 24 adaptive nodes).
    Writing ``E[P^N] = int N p^(N-1) Pr(P > p) dp`` puts the wall into the weights (``P = e^(-E / N)``) and
    leaves ``Phi((mu - logit P) / s)``, smooth on the scale s.  ``g`` from :func:`_tail_nodes`.
    """
    return xp.logsumexp(_BP_LOGW + xp.log_ndtr((mu[..., None] - g) / s[..., None]), axis=-1)


def _log_tail_grad(mu, s, g):
    """:func:`_log_tail` (NumPy) and its derivatives in ``mu`` and in ``log s``."""
    z = (mu[..., None] - g) / s[..., None]
    ln = log_ndtr(z)
    terms = _BP_LOGW + ln
    top = terms.max(-1, keepdims=True)
    r = np.exp(terms - top)
    tot = r.sum(-1)
    mills = np.exp(-0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - ln)  # phi(z) / Phi(z)
    d = np.einsum("...q,...q->...", r, mills) / tot
    dz = np.einsum("...q,...q->...", r, mills * z) / tot
    return top[..., 0] + np.log(tot), d / s, -dz


def _log_joint_top(m, s, n, k):
    """``log E[sigmoid(X)^n sigmoid(-X)^k]`` for n, k >= 1 (NumPy; m, s (..., 1, 1), n (U, 1), k (1, K)).

    ``sigmoid(x)^n sigmoid(-x)^k`` is ``B(n, k)`` times a (type IV logistic) density with exponential
    tails, so the prior's density is the smooth factor: a trapezoid in x over that density's range
    (about 8 of its sds or 36 / n and 36 / k, whichever is wider), 64 nodes placed by the data alone.
    """
    x, lw = _joint_nodes(n, k)  # (U, K, Q)
    u = (x - m[..., None]) / s[..., None]
    return _np_lse(lw - 0.5 * u * u, -1) - np.log(s) - 0.5 * np.log(2.0 * np.pi)


def _joint_nodes(n, k):
    """Return the nodes of :func:`_log_joint_top`'s trapezoid and their log weights times the density, (..., Q)."""
    mode, sd = np.log(n / k), np.sqrt(1.0 / n + 1.0 / k)
    lo, hi = mode - np.maximum(36.0 / n, 8.0 * sd), mode + np.maximum(36.0 / k, 8.0 * sd)
    t = np.linspace(0.0, 1.0, _LB_NODES)
    x = lo[..., None] + (hi - lo)[..., None] * t
    lw = (np.log((hi - lo) / (_LB_NODES - 1)))[..., None] - n[..., None] * np.logaddexp(0.0, -x) \
        - k[..., None] * np.logaddexp(0.0, x)
    return x, lw


def _interior_grad(m, s2, n, c):
    """Return the interior's log-likelihood without C(n, c) and its derivatives in m and log s (NumPy, (..., U)).

    The definition that ``_pair`` in :mod:`bayespass.models._lnorm_kernel` compiles; ``m``, ``s2`` (..., 1)
    are the prior's mean and variance against the pairs (..., U).  Called inside ``np.errstate``.
    """
    mode, h, sd, x, terms = _nodes(m, np.sqrt(s2), n, c, NP)  # (..., U), (..., U, Q)
    dev = x - mode[..., None]
    u = x - m[..., None]
    top = terms.max(-1, keepdims=True)
    r = np.exp(terms - top)
    tot = r.sum(-1)
    r /= tot[..., None]
    li = top[..., 0] + np.log(tot * sd) - 0.5 * np.log(s2) - 0.5 * np.log(2.0 * np.pi)
    z = u / s2[..., None]
    d_x = c[..., None] - n[..., None] * expit(x) - z  # d term / d node
    fixed_m = np.einsum("...q,...q->...", r, z)
    fixed_s = np.einsum("...q,...q->...", r, z * u) - 1.0
    a_mov = np.einsum("...q,...q->...", r, d_x)  # d / d mode
    b_mov = 1.0 + np.einsum("...q,...q->...", r, d_x * dev)  # d / d log sd
    sg = expit(mode)
    v = n * sg * (1.0 - sg)
    dmode_m = 1.0 / (s2 * h)
    dmode_s = 2.0 * (mode - m) / (s2 * h)
    curv = v * (1.0 - 2.0 * sg)
    dlsd_m = -0.5 * curv * dmode_m / h
    dlsd_s = -0.5 * (curv * dmode_s - 2.0 / s2) / h
    dx = fixed_m + a_mov * dmode_m + b_mov * dlsd_m
    dxs = fixed_s + a_mov * dmode_s + b_mov * dlsd_s
    return li, dx, dxs


@register
class LogitNormal(Model):
    """Zero-one-inflated logit-normal."""

    name = "lnorm"
    cheap_logp = True  # its density alone: 3.2x faster than with the gradient
    coords = ("m", "log_s", "z0", "z1")
    description = "p = 0 w.p. pi0, 1 w.p. pi1, else logit p ~ Normal(m, s)"

    def bounds(self):
        return np.array([[-20.0, 20.0], [-5.0, 3.0], [-25.0, 25.0], [-25.0, 25.0]])

    def logprior(self, theta, xp):
        pi = masses(theta, xp)
        return (-0.5 * xp.square(theta[..., 0] / M_SD) - 0.5 * xp.square((theta[..., 1] - LOG_S_MU) / LOG_S_SD)
                + xp.sum(ALPHA * xp.log(pi), axis=-1))

    def loglik(self, theta, aux, xp):
        n, c = aux["n"], aux["c"]
        if COMPILED and xp.name == "numpy" and "edge_pos" in aux and np.shape(theta)[-2] == 1:
            with np.errstate(all="ignore"):  # theta (..., config, 1, P) against the pairs (config, U)
                return self._compiled(theta[..., 0, :], aux, np.ones(np.shape(n)))[2]
        inner = _inner(theta, n, c, xp)[0]
        # one-sided pairs at a wide prior: the integral by parts, blended in over s in [_S_LO, _S_HI]
        if xp.name == "numpy" and "edge_pos" in aux:
            inner = self._wide_one_sided(theta[..., 0, :], aux, inner)  # theta (..., config, 1, P) here
        else:
            m, log_s = theta[..., 0], theta[..., 1]
            mu = xp.where(xp.eq(c, n), m, -m)
            tail = _log_tail(mu, xp.exp(log_s), _tail_nodes(xp.where(xp.eq(n, 0), 1.0, n), xp), xp)
            inner = inner + _one_sided(n, c, xp) * _blend(log_s, xp) * (tail - inner)
        inner = inner + log_binom(n, c, xp)
        pi = masses(theta, xp)
        comps = xp.stack([xp.log(pi[..., 0]) + inner, xp.where(xp.eq(aux["c"], 0), xp.log(pi[..., 1]), -np.inf),
                          xp.where(xp.eq(aux["c"], aux["n"]), xp.log(pi[..., 2]), -np.inf)], axis=-1)
        return xp.logsumexp(comps, axis=-1)

    def prepare(self, data):
        out = pair_arrays(data)
        n, c = np.atleast_2d(data.n), np.atleast_2d(data.c)
        # the one-sided pairs of each config, padded to a common count E: positions among the pairs, a
        # mask, the sign of m in their integral, the inverse map (E for the others) and by-parts nodes.  Not
        # the padding (weight 0, n = 1, c = 0): a config with 11 distinct pairs beside one with 51 has 40 of
        # them, and integrating them made E 42 instead of 4 on the real MBPP counts (2/3 of the fit's time)
        edge = (_one_sided(n, c, NP) > 0) & (np.atleast_2d(data.w) > 0)
        e = int(edge.sum(1).max()) if edge.size else 0
        pos, ok, rev = np.zeros((n.shape[0], e), int), np.zeros((n.shape[0], e), bool), np.full(n.shape, e)
        for i, row in enumerate(edge):
            at = np.flatnonzero(row)
            pos[i, :at.size], ok[i, :at.size], rev[i, at] = at, True, np.arange(at.size)
        rows = np.arange(n.shape[0])[:, None]
        en, ec = np.where(ok, n[rows, pos], 1.0), np.where(ok, c[rows, pos], 0.0)
        out.update(edge_pos=pos, edge_ok=ok, edge_rev=rev, edge_sign=np.where(ec == en, 1.0, -1.0),
                   edge_g=_tail_nodes(en, NP))
        return out

    def logp_grad(self, theta, aux, w):
        """Analytic gradient (checked against central differences in the tests).

        The interior's log-likelihood is ``log sd + logsumexp_i a_i`` with ``a_i`` the nodes' terms;
        its derivative holds the nodes' own terms at fixed nodes plus the moves of the mode and of the
        scale with ``(m, s)`` (implicit derivatives at the mode), which vanish where the quadrature is
        exact and are kept so that the gradient is the derivative of what is computed.
        """
        if COMPILED:
            with np.errstate(all="ignore"):
                lp, grad = self._compiled(theta, aux, w)[:2]
            lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
            return lp, np.where(np.isfinite(grad), grad, 0.0)
        n, c = aux["n"], aux["c"]
        log_pi = log_masses(theta)
        ww = np.where(w > 0, w, 0.0)
        m = theta[..., 0][..., None]  # (..., 1) against pairs (..., U)
        s2 = np.exp(2.0 * theta[..., 1])[..., None]
        with np.errstate(all="ignore"):
            li, dx, dxs = _interior_grad(m, s2, n, c)
            li, dx, dxs = self._wide_one_sided(theta, aux, li, dx, dxs)
            ll, ri, r0, r1 = inflate(li + aux["lb"], log_pi, n, c)
            lp = (np.sum(ww * ll, -1) - 0.5 * (theta[..., 0] / M_SD) ** 2
                  - 0.5 * ((theta[..., 1] - LOG_S_MU) / LOG_S_SD) ** 2 + atoms_logprior(log_pi, ALPHA))
        grad = np.stack([np.sum(ww * ri * dx, -1) - theta[..., 0] / M_SD**2,
                         np.sum(ww * ri * dxs, -1) - (theta[..., 1] - LOG_S_MU) / LOG_S_SD**2,
                         *atoms_grad(r0, r1, ww, log_pi, ALPHA)], -1)
        lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def warm(self):
        """Load the compiled loops (one tiny call each) if they are on: forked candidates then inherit them."""
        if COMPILED:
            data = warm_data()
            self.logp_grad(self.start(data)[None], self.prepare(data), data.w)
            with np.errstate(all="ignore"):  # and the loops of large calls, which run in threads
                _lnorm_kernel.logp_grad(self.start(data)[None], self.prepare(data), data.w, nodes=_NODES,
                                        log_aw=_LOG_AW, bp_logw=_BP_LOGW, consts=_CONSTS, steps=_NEWTON_STEPS,
                                        split=True)
            self.q(self.start(data)[:, None, :], data.n[0], data.c[0], np.array([1.0, 2.0]))

    @staticmethod
    def _compiled(theta, aux, w):
        """:meth:`logp_grad`'s density and gradient before its masks, and each pair's log-likelihood (compiled)."""
        return _lnorm_kernel.logp_grad(theta, aux, w, nodes=_NODES, log_aw=_LOG_AW, bp_logw=_BP_LOGW,
                                       consts=_CONSTS, steps=_NEWTON_STEPS)

    @staticmethod
    def _wide_one_sided(theta, aux, li, dx=None, dxs=None):
        """Blend the by-parts integrals of the one-sided pairs into ``li`` (..., config, U) (NumPy).

        With ``dx``, ``dxs`` (the derivatives of ``li`` in m and log s) returns the three blended; else ``li``.
        Only the one-sided pairs are integrated (``aux["edge_pos"]``, a few per config).
        """
        log_s = theta[..., 1][..., None]
        w = _blend(log_s, NP)
        pos = aux["edge_pos"]
        if pos.shape[-1] == 0 or not np.any(w > 0):
            return li if dx is None else (li, dx, dxs)
        cfg = np.arange(pos.shape[0])[:, None]
        ok, sign, rev = aux["edge_ok"], aux["edge_sign"], aux["edge_rev"]
        li_e = li[..., cfg, pos]
        at = np.nonzero(w[..., 0] > 0)  # the (draw, config) entries whose s is wide: only they are integrated
        mu, s, g = sign[at[-1]] * theta[..., 0][at][:, None], np.exp(log_s[at]), aux["edge_g"][at[-1]]
        val = li_e.copy()  # elsewhere the blend's weight is 0: no gap, no derivative
        if dx is None:
            val[at] = _log_tail(mu, s, g, NP)
        else:
            d_mu, d_ls = np.zeros(li_e.shape), np.zeros(li_e.shape)
            val[at], d_mu[at], d_ls[at] = _log_tail_grad(mu, s, g)
        gap = np.where(ok, val - li_e, 0.0)

        def scatter(delta):  # (..., config, E) -> (..., config, U), zero off the one-sided pairs
            pad = np.concatenate([delta, np.zeros(delta.shape[:-1] + (1,))], -1)
            return pad[..., cfg, rev]

        li = li + scatter(w * gap)
        if dx is None:
            return li
        t = _blend_t(log_s, NP)
        dw = 6.0 * t * (1.0 - t) / np.log(_S_HI / _S_LO)
        ddx = np.where(ok, w * (sign * d_mu - dx[..., cfg, pos]), 0.0)
        ddxs = np.where(ok, w * (d_ls - dxs[..., cfg, pos]) + dw * gap, 0.0)
        return li, dx + scatter(ddx), dxs + scatter(ddxs)

    def q(self, theta, n, c, k):
        n, c = np.asarray(n, float), np.asarray(c, float)  # (U,)
        k = np.atleast_1d(np.asarray(k, float))
        if COMPILED and np.shape(theta)[-2] == 1 and n.ndim == 1:
            with np.errstate(all="ignore"):
                return _lnorm_kernel.q(theta, n, c, k, nodes=_NODES_Q, log_aw=_LOG_AW_Q, bp_logw=_BP_LOGW,
                                       consts=_CONSTS, steps=_NEWTON_STEPS,
                                       tail_nodes=lambda big_n: _tail_nodes(big_n, NP), joint_nodes=_joint_nodes)
        batch = int(np.prod(np.shape(theta)[:-2], dtype=np.int64))
        # pairs at once: its (draws x pairs x nodes x k) arrays within the predictive's budget
        size = max(1, BLOCK_CELLS // max(1, batch * _NODES_Q.size * k.size))
        return np.concatenate([self._q(theta, n[s:s + size], c[s:s + size], k)
                               for s in range(0, max(n.size, 1), size)], axis=-2)

    def _q(self, theta, n, c, k):
        pi = masses(theta, NP)  # (..., 1, 3)
        lb = log_binom(n, c)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            li, x, terms = _inner(theta, n, c, NP, _LOG_AW_Q, _NODES_Q)  # (..., U), (..., U, Q)
            r = np.exp(terms - terms.max(-1, keepdims=True))
            r /= r.sum(-1, keepdims=True)
            log_1mp = -NP.softplus(x)  # log(1 - sigmoid x), stable
            tail = _mean_powers(r, log_1mp, k)  # (..., U, K)
            li, tail = self._q_wide_one_sided(theta, n, c, k, li, tail)
            # the interior and the atoms on the C(n, c)-free scale, in logs shifted by their maximum per
            # pair: with hundreds of samples per task the terms underflow
            log_int = np.log(pi[..., 0]) + li
            log_z0 = np.where(c == 0, np.log(pi[..., 1]) - lb, -np.inf)
            log_z1 = np.where(c == n, np.log(pi[..., 2]) - lb, -np.inf)
            top = np.maximum(np.maximum(log_int, log_z0), log_z1)
            wi, z0, z1 = np.exp(log_int - top), np.exp(log_z0 - top), np.exp(log_z1 - top)
            return (wi[..., None] * tail + z0[..., None]) / (wi + z0 + z1)[..., None]

    @staticmethod
    def _q_wide_one_sided(theta, n, c, k, li, tail):
        """Blend the by-parts integrals of the one-sided pairs into ``li`` (..., U) and ``tail`` (..., U, K).

        Only at the draws whose s is wide (NumPy; ``theta`` (..., 1, P), ``n``, ``c`` (U,)).
        c = 0: ``E[(1 - P)^(n + k)] / E[(1 - P)^n]``, both by parts; c = n: the numerator
        ``E[P^n (1 - P)^k]`` is two-sided, integrated over its own density (:func:`_log_joint_top`).
        """
        zero, full = np.flatnonzero((c == 0) & (n > 0)), np.flatnonzero((c == n) & (n > 0))
        w = _blend(theta[..., 1], NP)  # (..., 1)
        if zero.size + full.size == 0 or not np.any(w > 0):
            return li, tail
        shape = li.shape[:-1]
        li, tail = li.reshape(-1, li.shape[-1]).copy(), tail.reshape(-1, *tail.shape[-2:]).copy()
        th, w = theta.reshape(-1, theta.shape[-1]), w.reshape(-1)
        rows = np.flatnonzero(w > 0)
        m, s, w = th[rows, 0][:, None, None], np.exp(th[rows, 1])[:, None, None], w[rows][:, None, None]
        kc = max(1, BLOCK_CELLS // max(1, rows.size * max(zero.size, full.size, 1) * _LB_NODES))
        pos = k > 0
        for idx, mu in ((zero, -m), (full, m)):
            if idx.size == 0:
                continue
            nn = n[idx]
            lt_n = _log_tail(mu[..., 0], s[..., 0], _tail_nodes(nn, NP), NP)  # (R, E)
            log_q = np.zeros((rows.size, idx.size, k.size))
            for j in range(0, k.size, kc):
                kk = k[j:j + kc]
                if idx is zero:
                    top = _log_tail(mu, s, _tail_nodes(nn[:, None] + kk, NP), NP)
                else:
                    top = _log_joint_top(mu, s, nn[:, None], np.where(kk > 0, kk, 1.0))
                log_q[..., j:j + kc] = np.where(pos[j:j + kc], np.minimum(top - lt_n[..., None], 0.0), 0.0)
            sub_li = li[rows][:, idx]
            li[np.ix_(rows, idx)] = sub_li + w[..., 0] * (lt_n - sub_li)
            log_ad = np.log(np.maximum(tail[rows][:, idx], 1e-300))  # underflow: no -inf + inf
            tail[np.ix_(rows, idx)] = np.exp(log_ad + w * (log_q - log_ad))
        return li.reshape(shape + li.shape[-1:]), tail.reshape(shape + tail.shape[-2:])

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
