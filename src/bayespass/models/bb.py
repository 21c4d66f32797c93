"""``bb``: Beta-Binomial.  ``p_i ~ Beta(a, b)`` per config, p integrated out.

Priors (per config): ``mu = a / (a + b) ~ Beta(1, 1)``, ``log kappa ~ Normal(log 2, 2.5)``
with ``kappa = a + b``; ``theta = (logit mu, log kappa)``.  zoibb and flex share this prior.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, digamma, expit

from ..stats import kernels
from ..stats.kernels import bb_loglik, rising_log_rows
from .base import NP, Model, PairData, log_binom, register, warm_data

#: log kappa ~ Normal(log 2, 2.5): mass on both U-shaped populations (kappa < 2, real code models) and tasks of
#: nearly equal difficulty (kappa in the hundreds).  With sd 1.5 no candidate of the default reached the latter,
#: and on equally hard tasks its band covered pass@10-100 0.60-0.76 of the time (0.78-0.88 with 2.5); the
#: tuning families and real MBPP kept their coverage (benchmarks/RESULTS.md, "Truth shapes the default was not
#: tuned on", twenty-eighth session)
LOG_KAPPA_MU, LOG_KAPPA_SD = float(np.log(2.0)), 2.5


#: bb's and zoibb's log density and gradient by the compiled loop of :mod:`bayespass.models._bb_kernel` for
#: integer counts (equal to the NumPy formulas to rounding); False: NumPy
COMPILED = True
_CONSTS = np.array([LOG_KAPPA_MU, LOG_KAPPA_SD])


def compiled_logp_grad(model, theta, aux, w):
    """Return bb's or zoibb's (``model``) compiled log density and gradient, masked as NumPy's, or None."""
    from . import _bb_kernel

    theta = np.asarray(theta, float)
    with np.errstate(all="ignore"):
        out = _bb_kernel.logp_grad(theta, aux, w, zoi=model.name == "zoibb", consts=_CONSTS)
    if out is None:
        return None
    lp, grad = out
    return np.where(np.isfinite(lp) & model.inside(theta), lp, -np.inf), np.where(np.isfinite(grad), grad, 0.0)


def beta_params(theta, xp):
    """``(mu, kappa, a, b)`` from ``theta = (logit mu, log kappa, ...)``."""
    mu = xp.sigmoid(theta[..., 0])
    kappa = xp.exp(theta[..., 1])
    return mu, kappa, mu * kappa, (1 - mu) * kappa


def beta_logprior(theta, xp):
    """``mu ~ Beta(1, 1)`` (in logit coordinates) and ``log kappa ~ Normal(log 2, 2.5)``."""
    mu = xp.sigmoid(theta[..., 0])
    return xp.log(mu) + xp.log1p(-mu) - 0.5 * xp.square((theta[..., 1] - LOG_KAPPA_MU) / LOG_KAPPA_SD)


#: below this many (draw x pair) cells the Beta-Binomial terms come from scipy directly; above, from tables
_TABLE_MIN_CELLS = 4096


def pair_arrays(data: PairData) -> dict:
    """Return the pairs' arrays of the fast path: ``n``, ``c``, ``lb = log C(n, c)``, integer copies if integral."""
    out = {"n": data.n, "c": data.c, "lb": log_binom(data.n, data.c)}
    if np.array_equal(data.n, np.round(data.n)) and np.array_equal(data.c, np.round(data.c)):
        out["ni"], out["ci"] = data.n.astype(np.intp), data.c.astype(np.intp)
    return out


def bb_terms(a, b, aux):
    """Beta-Binomial log-pmf of every pair and its derivatives in a and b: a, b (..., 1) -> three (..., U).

    Many pairs: the log-gamma and digamma differences are looked up per pair in tables of rising
    factorials over m = 0..max n (sums of log(x + i) and 1 / (x + i), exact to rounding), far
    cheaper than betaln and digamma per pair; few pairs or non-integer counts: scipy directly.
    """
    n, c, lb = aux["n"], aux["c"], aux["lb"]
    shape = np.broadcast_shapes(a.shape, n.shape)
    mmax = int(n.max()) if n.size else 0
    if ("ni" not in aux or np.prod(shape) < _TABLE_MIN_CELLS or mmax > 4 * n.shape[-1]
            or a.shape[:-1] != shape[:-1] or b.shape[:-1] != shape[:-1]):
        dab = digamma(a + b) - digamma(a + b + n)
        ll = lb + betaln(a + c, b + (n - c)) - betaln(a, b)  # b + (n - c): a tiny b survives (bb_loglik)
        return ll, digamma(a + c) - digamma(a) + dab, digamma(b + (n - c)) - digamma(b) + dab
    # (mmax + 1, ..., 1) tables (a, b of shape (..., 1) are the kernel's (..., G) with one node)
    (la, da), (lb_, db), (lab, dab) = (rising_log_rows(x, mmax, digamma=True) for x in (a, b, a + b))
    # flat positions in the tables of each pair's c, n - c and n: row m of cell i is m * cells + i
    cells = int(np.prod(shape[:-1]))
    row = np.arange(cells).reshape(shape[:-1] + (1,))
    at_c, at_f, at_n = row + aux["ci"] * cells, row + (aux["ni"] - aux["ci"]) * cells, row + aux["ni"] * cells
    d_n = dab.ravel()[at_n]
    return (lb + la.ravel()[at_c] + lb_.ravel()[at_f] - lab.ravel()[at_n],
            da.ravel()[at_c] - d_n, db.ravel()[at_f] - d_n)


def bb_grad(theta, w, da, db):
    """Gradient of ``sum_u w_u bb_loglik`` wrt (logit mu, log kappa); theta (..., P), w (config, U).

    ``da``, ``db``: the pairs' derivatives of the log-pmf in a and b (:func:`bb_terms`).
    """
    mu, kappa, a, b = beta_params(theta[..., None, :], NP)
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
    cheap_logp = True  # its density alone: 2.6x faster than with the gradient

    coords = ("logit_mu", "log_kappa")
    description = "p ~ Beta(a, b); mu = a/(a+b) ~ Beta(1, 1), log(a+b) ~ N(log 2, 2.5)"

    def bounds(self):
        return np.array([[-15.0, 15.0], [-7.0, 12.0]])

    def logprior(self, theta, xp):
        return beta_logprior(theta, xp)

    def loglik(self, theta, aux, xp):
        _, _, a, b = beta_params(theta, xp)
        return bb_loglik(a, b, aux["n"], aux["c"], xp)

    def prepare(self, data):
        return pair_arrays(data)

    def logp_grad(self, theta, aux, w):
        if COMPILED:
            out = compiled_logp_grad(self, theta, aux, w)
            if out is not None:
                return out
        _, _, a, b = beta_params(theta[..., None, :], NP)
        ww = np.where(w > 0, w, 0.0)
        with np.errstate(all="ignore"):
            ll, da, db = bb_terms(a, b, aux)
            lp = np.sum(ww * ll, -1) + beta_logprior(theta, NP)
        lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
        g_mu, g_k = bb_grad(theta, ww, da, db)
        p_mu, p_k = beta_prior_grad(theta)
        grad = np.stack([g_mu + p_mu, g_k + p_k], axis=-1)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def warm(self):
        """Load the compiled loop (one tiny call) if it is on: forked candidates then inherit it."""
        if COMPILED:
            data = warm_data()
            self.logp_grad(self.start(data)[None], self.prepare(data), data.w)

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
