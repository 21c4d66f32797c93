"""Pure NumPy/SciPy kernels for pass@k estimation (no xarray in here).

Every function broadcasts over its array arguments, works in log space, and
returns NaN where the quantity is undefined (for example ``n < k`` for the
unbiased estimator, or ``n == 0`` for plug-in estimators).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from .._xp import NP
from .._xp import betaln as _betaln_xp
from .._xp import log_binom as _log_binom_xp

__all__ = [
    "passk_naive",
    "passk_unbiased",
    "passk_bb_predictive",
    "passk_zoibb_predictive",
    "linmix_weight",
    "bb_logpmf",
    "zoibb_logpmf",
    "bb_loglik",
    "zoibb_loglik",
    "log_binom",
]


def log_binom(n, k):
    """Return ``log C(n, k)`` for real ``n >= k >= 0`` (``-inf`` where ``k > n``)."""
    n = np.asarray(n, dtype=float)
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        out = gammaln(n + 1) - gammaln(k + 1) - gammaln(np.maximum(n - k, 0) + 1)
    return np.where(k > n, -np.inf, out)


def bb_loglik(a, b, n, c, xp=NP):
    """Beta-Binomial log-pmf ``log[C(n,c) B(a+c, b+n-c) / B(a,b)]`` in the backend ``xp``.

    The one definition of the Beta-Binomial likelihood: the PyMC models, the
    NumPy samplers, empirical Bayes and the closed-form estimators all use it.
    """
    # b + (n - c), not (b + n) - c: a b below n's rounding (a Beta mean of 1 - 1e-16) would vanish, and with
    # c = n the log-pmf, log B(a + n, b) - log B(a, b) ~ 0, would read log B(a + n, 0) = +inf
    return _log_binom_xp(n, c, xp) + _betaln_xp(a + c, b + (n - c), xp) - _betaln_xp(a, b, xp)


#: below this many cells a row-by-row loop costs more in Python overhead than one cumulative sum
_ROW_LOOP_MIN = 512


def rising_log_rows(x, mmax: int, *, digamma: bool = False):
    """``log Gamma(x + m) - log Gamma(x)`` for every integer m in 0..mmax, shape (mmax + 1, *x.shape).

    Row m + 1 is row m plus ``log(x + m)``: exact to rounding for any m, no overflow.  With
    ``digamma=True`` also ``psi(x + m) - psi(x)`` (sums of 1 / (x + m)).  The rows are contiguous
    (m leads), so a row is one vectorised pass and a flat index ``m * x.size + i`` finds any cell;
    this is several times faster than a cumulative sum along an inner axis.
    """
    x = np.asarray(x, float)
    mmax = int(mmax)
    lg = np.empty((mmax + 1,) + x.shape)
    dg = np.empty_like(lg) if digamma else None
    lg[0] = 0.0
    if digamma:
        dg[0] = 0.0
    if x.size < _ROW_LOOP_MIN:  # small: one cumulative sum (the same sums in the same order)
        t = x[None] + np.arange(mmax, dtype=float).reshape((mmax,) + (1,) * x.ndim)
        np.cumsum(np.log(t), axis=0, out=lg[1:])
        if digamma:
            np.cumsum(1.0 / t, axis=0, out=dg[1:])
        return (lg, dg) if digamma else lg
    t = np.empty_like(x)
    for m in range(mmax):
        np.add(x, float(m), out=t)
        np.add(lg[m], np.log(t), out=lg[m + 1])
        if digamma:
            np.add(dg[m], np.reciprocal(t), out=dg[m + 1])
    return (lg, dg) if digamma else lg


def power_rows(q, k) -> np.ndarray:
    """``q ** k`` for every k, shape (K, *q.shape): q in [0, 1], k ascending non-negative integers.

    Each power is the previous one times ``q ** (k_i - k_{i-1})``, built from the squares
    ``q, q^2, q^4, ...``: a few multiplications per k instead of an ``exp`` (several times faster, exact
    to a few ulp; checked against ``q ** k`` in tests/stats/test_kernels.py).  Any other k: ``exp(k log q)``.
    """
    q = np.asarray(q, float)
    k = np.asarray(k)
    kf = k.astype(float)
    if k.size == 0 or np.any(kf != np.round(kf)) or np.any(kf < 0) or np.any(np.diff(kf) < 0):
        with np.errstate(divide="ignore"):
            return np.exp(np.multiply.outer(kf, np.log(q)))
    out = np.empty((k.size,) + q.shape)
    squares = [q]
    out[0] = np.power(q, kf[0])
    for i in range(1, k.size):
        d = int(kf[i] - kf[i - 1])
        if d > 64:
            out[i] = np.power(q, kf[i])
            continue
        out[i] = out[i - 1]
        bit = 0
        while d:
            if bit == len(squares):
                squares.append(squares[-1] * squares[-1])
            if d & 1:
                out[i] *= squares[bit]
            d >>= 1
            bit += 1
    return out


def bb_loglik_pair_rows(a, b, n, c, *, ab=None, split: bool = False):
    """:func:`bb_loglik` for many (n, c) pairs sharing the same a, b: shape (P, ..., G) from a, b (..., G).

    ``log B(a + c, b + n - c) - log B(a, b)`` is a sum of logs of rising factorials, tabulated once for
    every m up to max(n) (:func:`rising_log_rows`) and looked up per pair, so the cost does not grow with
    the number of pairs the way ``betaln`` over (..., P, G) does.  Equal to ``bb_loglik`` to rounding
    (tests/stats/test_kernels.py).  The pairs lead, so each pair's block is contiguous.

    ``ab``: ``a + b`` where it is known with fewer cells (as many dimensions as ``a``, of length 1 where it
    does not vary, as a Beta's concentration over a grid of means): its table is computed on those cells only.
    ``split=True`` returns ``(varying, const)``: the terms of a and b, shape (P, ..., G), and those of
    ``a + b`` with the binomial coefficient, shape (P, *ab.shape), whose sum is the log-pmf: a caller that
    reduces over the axes where ``ab`` is constant adds ``const`` after the reduction.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    ab = a + b if ab is None else np.asarray(ab, float)
    n, c = np.asarray(n, np.intp), np.asarray(c, np.intp)
    tab = rising_log_rows(ab, int(n.max()) if n.size else 0)
    ta = rising_log_rows(a, int(c.max()) if c.size else 0)
    tb = rising_log_rows(b, int((n - c).max()) if n.size else 0)
    lc = _log_binom_xp(n.astype(float), c.astype(float), NP).reshape((-1,) + (1,) * ab.ndim)
    out = ta[c]
    out += tb[n - c]
    const = lc - tab[n]
    if split:
        return out, const
    out += const
    return out


def zoibb_loglik(a, b, pi_b, pi0, pi1, n, c, xp=NP):
    """Zero-one-inflated Beta-Binomial log-pmf in the backend ``xp`` (masses beta/zero/one).

    ``log[pi0 1[c=0] + pi1 1[c=n] + pi_b BB(c | n, a, b)]``; the one definition
    of this likelihood.
    """
    bb = bb_loglik(a, b, n, c, xp)
    comps = xp.stack([xp.log(pi_b) + bb, xp.where(xp.eq(c, 0), xp.log(pi0), -np.inf),
                      xp.where(xp.eq(c, n), xp.log(pi1), -np.inf)], axis=-1)
    return xp.logsumexp(comps, axis=-1)


def passk_naive(n, c, k):
    """Plug-in estimate ``1 - (1 - c/n)^k``; NaN where ``n == 0``."""
    n, c, k = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n, c, k)))
    with np.errstate(divide="ignore", invalid="ignore"):
        fail = 1.0 - c / n
        out = -np.expm1(k * np.log(fail))
    return np.where(n > 0, out, np.nan)


_EXACT_TERMS = 64


def passk_unbiased(n, c, k):
    """Unbiased estimator of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    The log-ratio ``log C(n-c,k)/C(n,k)`` is a sum of ``min(c, k)`` terms
    ``log1p(-k/(n-i))`` (or ``log1p(-c/(n-j))``); it is summed exactly when
    ``min(c, k) <= 64`` (where the result can be tiny and cancellation would
    hurt) and taken from ``gammaln`` otherwise (where ``c k / n`` is large
    enough that absolute error 1e-10 is harmless).  Stable for ``n`` up to
    10^7.  Returns 1 where ``n - c < k`` and **NaN where ``n < k``** (the
    estimator is not defined there; returning 1.0 when ``c == 0`` is a
    common bug).
    """
    n, c, k = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n, c, k)))
    f = n - c
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        lr = (
            gammaln(f + 1)
            - gammaln(np.maximum(f - k, 0) + 1)
            - gammaln(n + 1)
            + gammaln(np.maximum(n - k, 0) + 1)
        )
        m = np.minimum(c, k)
        small = (m <= _EXACT_TERMS) & (f >= k)
        if small.any():
            cs, ks, ns, ms = c[small], k[small], n[small], m[small]
            num = np.where(cs <= ks, ks, cs)
            exact = np.zeros_like(cs)
            for t in range(int(ms.max()) if ms.size else 0):
                active = t < ms
                exact += np.where(active, np.log1p(-num / np.where(active, ns - t, np.inf)), 0.0)
            lr = np.array(lr, dtype=float)
            lr[small] = exact
        out = -np.expm1(lr)
    out = np.where(f < k, 1.0, np.clip(out, 0.0, 1.0))
    return np.where((n < k) | (n <= 0), np.nan, out)


def passk_bb_predictive(n, c, k, a, b):
    """Posterior-predictive pass@k of one task under ``p ~ Beta(a, b)``.

    ``1 - B(a + c, b + n - c + k) / B(a + c, b + n - c)``; with ``n = c = 0``
    this is the prior (unconditional) value ``1 - prod_{j<k} (b+j)/(a+b+j)``.
    """
    n, c, a, b = (np.asarray(x, dtype=float) for x in (n, c, a, b))
    k = np.asarray(k, dtype=float)
    ap = a + c
    bp = b + (n - c)  # not (b + n) - c, which loses a b below n's rounding (bb_loglik)
    # B(ap, bp + k) / B(ap, bp) = G(bp + k) G(ap + bp) / (G(ap + bp + k) G(bp)): the k-free part
    # once, two gammaln per (draw, task, k) instead of two betaln (2.5x faster, same to ~1e-12)
    with np.errstate(invalid="ignore"):
        base = gammaln(ap + bp) - gammaln(bp)
        out = -np.expm1(gammaln(bp + k) - gammaln(ap + bp + k) + base)
    return np.broadcast_to(out, np.broadcast_shapes(n.shape, c.shape, k.shape, a.shape, b.shape)).copy()


def bb_logpmf(c, n, a, b):
    """Beta-Binomial log-pmf ``log[C(n,c) B(a+c, b+n-c) / B(a,b)]`` (NumPy, broadcasting)."""
    c, n, a, b = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (c, n, a, b)))
    return bb_loglik(a, b, n, c)


def zoibb_logpmf(c, n, a, b, pi0, pi1):
    """Zero-one-inflated Beta-Binomial log-pmf (NumPy, broadcasting); 0 where ``n = 0``.

    ``pi0 1[c=0] + pi1 1[c=n] + (1 - pi0 - pi1) BB(c | n, a, b)``.
    """
    c, n, a, b, pi0, pi1 = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (c, n, a, b, pi0, pi1))
    )
    with np.errstate(divide="ignore"):
        out = zoibb_loglik(a, b, 1.0 - (pi0 + pi1), pi0, pi1, n, c)
    return np.where(n == 0, 0.0, out)


def _zoibb_affine(n, c, a, b, pi0, pi1):
    """ZOIBB predictive as ``lo + slope * BBpred`` per task (weights of the boundary components)."""
    pib = 1.0 - pi0 - pi1
    r = pib * np.exp(bb_logpmf(c, n, a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        wb0 = np.where(r > 0, r / (pi0 + r), 0.0)
        w1 = np.where(pi1 > 0, pi1 / (pi1 + r), 0.0)
    lo = np.where(n == 0, pi1, np.where((c == n) & (c > 0), w1, 0.0))
    slope = np.where(n == 0, pib, np.where(c == 0, wb0, np.where(c == n, 1.0 - w1, 1.0)))
    return lo, slope


def passk_zoibb_predictive(n, c, k, a, b, pi0, pi1):
    """Posterior-predictive pass@k of one task under the ZOIB prior.

    For ``0 < c < n`` it equals the Beta-Binomial predictive; for ``c = 0`` it
    is ``w_B * BBpred`` with ``w_B = r / (pi0 + r)``, ``r = (1-pi0-pi1) BB(0|n)``;
    for ``c = n`` it is ``w1 + (1 - w1) BBpred`` with ``w1 = pi1 / (pi1 + r)``,
    ``r = (1-pi0-pi1) BB(n|n)``.  With ``n = 0`` it is the prior value
    ``pi1 + (1-pi0-pi1) * BBpred``.
    """
    n, c, k, a, b, pi0, pi1 = (np.asarray(x, dtype=float) for x in (n, c, k, a, b, pi0, pi1))
    # the weights do not depend on k: computed without broadcasting over it
    lo, slope = _zoibb_affine(*np.broadcast_arrays(n, c, a, b, pi0, pi1))
    out = lo + slope * passk_bb_predictive(n, c, k, a, b)
    return np.broadcast_to(out, np.broadcast_shapes(out.shape, k.shape)).copy()


def linmix_weight(m, m_low=5.0, m_high=50.0):
    """LinMix weight of the ZOIBB component: ``clip((m - m_low)/(m_high - m_low), 0, 1)``."""
    m = np.asarray(m, dtype=float)
    return np.clip((m - m_low) / (m_high - m_low), 0.0, 1.0)


# --- grid kernels: per-pair arrays (U,) x a k grid (K,) -> (U, K) -----------------------
_CHUNK = 1 << 21


def _log_ratio_grid(d, den0, step, k):
    """``log prod_{j<k} (1 - d / (den0 + step * j))`` for 1-D ``d``, ``den0`` and k grid ``k``.

    Evaluated as a cumulative sum of ``log1p`` terms up to ``max(k)``, in row
    chunks to bound memory.  Terms whose denominator is not positive are set
    to 0 (callers mask those k); a zero factor gives ``-inf``.
    """
    d = np.asarray(d, dtype=float)
    den0 = np.asarray(den0, dtype=float)
    k = np.asarray(k, dtype=np.int64)
    kmax = int(k.max())
    j = np.arange(kmax, dtype=float)
    out = np.empty((d.size, k.size))
    rows = max(1, _CHUNK // max(kmax, 1))
    for s in range(0, d.size, rows):
        den = den0[s:s + rows, None] + step * j[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(den > 0, np.log1p(-d[s:s + rows, None] / np.where(den > 0, den, 1.0)), 0.0)
        out[s:s + rows] = np.cumsum(terms, axis=1)[:, k - 1]
    bad = ~(np.isfinite(d) & np.isfinite(den0))
    out[bad] = np.nan  # undefined inputs (e.g. non-identified hyperparameters) stay undefined
    return out


def unbiased_passk_moments(n, c, k) -> tuple[np.ndarray, np.ndarray]:
    """(config, k) each: the unbiased dataset pass@k and an unbiased estimate of its variance about the tasks' own.

    Per task ``u_i = 1 - C(n_i - c_i, k) / C(n_i, k)`` is unbiased for ``q_i = 1 - (1 - p_i)^k`` (k <= n_i), and
    ``1 - 2 C(n_i - c_i, k) / C(n_i, k) + C(n_i - c_i, 2k) / C(n_i, 2k)`` for ``q_i^2`` (2k <= n_i), so
    ``sum_i (u_i^2 - that) / T^2`` is unbiased for the variance of ``mean_i u_i`` around the finite-task truth
    ``mean_i q_i``, whatever the p_i (clipped at 0).  NaN where an observed task (n > 0) of the config has n < 2k.
    ``n``, ``c`` (config, task); ``k`` (k,).
    """
    n, c = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    k = np.atleast_1d(np.asarray(k, dtype=float))
    seen = n > 0
    tasks = np.maximum(seen.sum(1), 1)
    mean = np.full((n.shape[0], k.size), np.nan)
    var = np.full_like(mean, np.nan)
    for j, kk in enumerate(k):
        ok = ~(seen & (n < 2 * kk)).any(1) & seen.any(1)
        nn = np.where(seen, np.maximum(n, 2 * kk), 2 * kk)  # unseen tasks: any n >= 2k, masked out below
        u = passk_unbiased(nn, c, kk)
        r_k, r_2k = 1.0 - u, 1.0 - passk_unbiased(nn, c, 2 * kk)
        q2 = 1.0 - 2.0 * r_k + r_2k
        mean[:, j] = np.where(ok, np.where(seen, u, 0.0).sum(1) / tasks, np.nan)
        var[:, j] = np.where(ok, np.clip(np.where(seen, u * u - q2, 0.0).sum(1), 0.0, None) / tasks**2, np.nan)
    return mean, var


def passk_unbiased_grid(n, c, k):
    """:func:`passk_unbiased` for 1-D ``n``, ``c`` (U,) over a k grid (K,), shape (U, K).

    Uses ``C(n-c,k)/C(n,k) = prod_{j<k} (1 - c/(n-j))``: exact to rounding
    for any ``n`` and much faster than ``gammaln`` on dense k grids.
    """
    n = np.asarray(n, dtype=float)
    c = np.asarray(c, dtype=float)
    k = np.asarray(k)
    if k.max() > 8 * k.size and n.size * k.max() > 4 * _CHUNK:
        return passk_unbiased(n[:, None], c[:, None], k[None, :])
    out = np.clip(-np.expm1(_log_ratio_grid(c, n, -1.0, k)), 0.0, 1.0)
    out = np.where((n - c)[:, None] < k[None, :], 1.0, out)
    return np.where((n[:, None] < k[None, :]) | (n[:, None] <= 0), np.nan, out)


def passk_bb_predictive_grid(n, c, k, a, b):
    """:func:`passk_bb_predictive` for 1-D per-pair arrays over a k grid, shape (U, K).

    Uses ``B(a', b'+k)/B(a', b') = prod_{j<k} (1 - a'/(a'+b'+j))``.
    """
    n, c, a, b = (np.asarray(x, dtype=float) for x in (n, c, a, b))
    k = np.asarray(k)
    if k.max() > 8 * k.size and n.size * k.max() > 4 * _CHUNK:
        return passk_bb_predictive(n[:, None], c[:, None], k[None, :], a[:, None], b[:, None])
    ap = a + c
    return -np.expm1(_log_ratio_grid(ap, ap + b + (n - c), 1.0, k))


def passk_zoibb_predictive_grid(n, c, k, a, b, pi0, pi1):
    """:func:`passk_zoibb_predictive` for 1-D per-pair arrays over a k grid, shape (U, K)."""
    n, c, a, b, pi0, pi1 = (np.asarray(x, dtype=float) for x in (n, c, a, b, pi0, pi1))
    lo, slope = _zoibb_affine(n, c, a, b, pi0, pi1)
    return lo[:, None] + slope[:, None] * passk_bb_predictive_grid(n, c, k, a, b)
