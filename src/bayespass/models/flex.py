"""``flex``: a prior for p whose shape is learnt with its uncertainty (g-modelling on a logit grid).

Per config, the distribution of task success probabilities is a discrete
distribution ``G`` on a fixed support: atoms at exactly 0 and 1 and ``J = 80``
points ``p_j`` evenly spaced in logit from -14 to 14 (p from 8e-7 to 1 - 8e-7)::

    G = (pi0, pi_B h_1, ..., pi_B h_J, pi1)
    (pi_B, pi0, pi1) ~ Dirichlet(alpha)
    h_j ∝ p_j^a (1 - p_j)^b exp(s(x_j))            (x_j = logit p_j)

so that with ``s = 0`` the interior is the Beta(a, b) of ``zoibb`` (in logit
coordinates) and ``flex`` nests ``zoibb`` and ``bb``.  The deviation ``s`` is a
cubic B-spline (16 basis functions over the logit range) whose coefficients
have a second-order random-walk prior with scale ``tau`` (learnt: ``log tau ~
Normal``) plus a weak ridge, so the data decide how far the shape departs from
a Beta, and where they cannot tell (near p = 0 with few samples per task) the
posterior keeps the spread of plausible shapes instead of extrapolating one.
``a = mu kappa``, ``b = (1 - mu) kappa`` with bb's priors on ``mu`` and ``kappa``, except that the
concentration saturates: ``kappa = 1 / (1 / exp(log_kappa) + 1 / kappa_max)`` (``kappa_max = 400``).  On the grid
a Beta much narrower than the grid's spacing (0.35 in logit; a Beta(200, 200) is 0.1 wide) is a spike whose
weights jump from point to point as ``mu`` moves, a curvature no step size follows: flex's chains diverged
there, on 1-5 of 24 configs at two samples per task in five of the six simulated families.  Saturated, the
likelihood stops changing with ``log_kappa`` beyond ``kappa_max`` (the prior alone decides there), and the
shapes below that concentration are those of before (benchmarks/RESULTS.md, "flex's divergences").

The likelihood of a task is ``sum_j G_j Binom(c | n, p_j)`` (p integrated
out), computed per distinct (n, c) pair; the predictive of a task is its
posterior over the support, so pass@k at any k is
``1 - sum_j w_ij (1 - p_j)^k`` per draw.
"""

from __future__ import annotations

import numbers
from functools import cached_property

import numpy as np
from scipy.special import expit, gammaln

from . import _flex_kernel
from .base import NP, Model, register, warm_data
from .bb import LOG_KAPPA_MU, LOG_KAPPA_SD, beta_logprior, mean_rate_start

#: the log density and gradient by the compiled loop of :mod:`bayespass.models._flex_kernel`; False: NumPy
COMPILED = True

#: default settings of the flex prior (chosen on the calibration benchmark, see benchmarks/RESULTS.md)
DEFAULTS = {"J": 80, "K": 16, "lo": -14.0, "hi": 14.0, "ridge_sd": 2.0, "tau_mu": 0.0, "tau_sd": 1.0,
            "alpha": (3.0, 0.5, 0.5), "kappa_max": 400.0}


def bspline_basis(x: np.ndarray, k_basis: int, lo: float, hi: float, deg: int = 3) -> np.ndarray:
    """Cubic B-spline basis (len(x), k_basis) with equally spaced knots on [lo, hi]."""
    from scipy.interpolate import BSpline

    inner = np.linspace(lo, hi, k_basis - deg + 1)
    t = np.r_[[lo] * deg, inner, [hi] * deg]
    basis = np.zeros((x.size, k_basis))
    for i in range(k_basis):
        coef = np.zeros(k_basis)
        coef[i] = 1.0
        basis[:, i] = BSpline(t, coef, deg, extrapolate=False)(x)
    basis = np.nan_to_num(basis)
    basis[x >= hi, -1] = 1.0
    return basis


@register
class Flex(Model):
    """ZOIBB times a smooth, learnt deviation, on a logit grid (see the module docstring)."""

    name = "flex"
    #: what the convergence gates check (with pass@k): the Beta base and the spline trade off against
    #: each other (mu, kappa alone are not identified), the population they define is
    gated = ("mean_p",)
    description = ("atoms at 0 and 1 + a Beta(a, b) shape times exp(spline) on a logit grid; the spline's "
                   "smoothness tau is learnt (nests zoibb and bb)")

    #: the value a setting had before it existed: a fit whose recorded settings lack it was made with this
    LEGACY = {"kappa_max": None}

    def __init__(self, **settings):
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown flex settings {sorted(unknown)}; allowed: {sorted(DEFAULTS)}")
        self.settings = DEFAULTS | settings
        s = self.settings
        self.K = int(s["K"])
        self.coords = ("logit_mu", "log_kappa", "z0", "z1", *(f"u{i}" for i in range(self.K)), "log_tau")
        self.x = np.linspace(s["lo"], s["hi"], int(s["J"]))
        pin = expit(self.x)
        self.support = np.r_[0.0, pin, 1.0]
        self.log_p, self.log_1mp = np.log(pin), np.log1p(-pin)
        self.basis = bspline_basis(self.x, self.K, s["lo"], s["hi"])
        d2 = np.diff(np.eye(self.K), n=2, axis=0)
        lam, vec = np.linalg.eigh(d2.T @ d2)
        self.lam, self.vec = np.maximum(lam, 0.0), np.ascontiguousarray(vec)
        self.ridge = 1.0 / s["ridge_sd"] ** 2
        self.alpha = np.asarray(s["alpha"], float)
        kmax = s["kappa_max"]
        if kmax is not None and not (isinstance(kmax, numbers.Real) and not isinstance(kmax, bool) and kmax > 0):
            raise ValueError(f"kappa_max={kmax!r} must be a positive number or None (no saturation)")
        #: 1 / the concentration's saturation (0: none, kappa = exp(log_kappa) as bb's)
        self.inv_kappa_max = 0.0 if kmax is None else 1.0 / float(kmax)
        #: f = (a, b, scale * u) @ this: the log shape on the grid in one matmul (NumPy path)
        self._f_rows = np.ascontiguousarray(np.vstack([self.log_p, self.log_1mp, (self.basis @ self.vec).T]))
        self.lk_mu, self.lk_sd = LOG_KAPPA_MU, LOG_KAPPA_SD  # bb's prior on log kappa (the compiled loop's)

    def bounds(self):
        b = np.tile([-10.0, 10.0], (self.n_params, 1))
        b[0], b[1], b[2], b[3], b[-1] = [-15, 15], [-7, 12], [-25, 25], [-25, 25], [-7, 5]
        return b

    def as_fitted(self, settings: dict) -> Flex:
        """Return flex with a fit's recorded settings (those it lacks: their :attr:`LEGACY` value, or the default)."""
        full = DEFAULTS | self.LEGACY | {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
        return self if full == self.settings else Flex(**full)

    # -- pieces ------------------------------------------------------------------------------
    def _scale(self, log_tau, xp):
        """Per-eigendirection prior sd of the spline coefficients, shape (..., K)."""
        e = xp.exp(-2.0 * log_tau)[..., None]
        return (self.ridge + self.lam * e) ** -0.5

    def _parts(self, theta, xp):
        mu = xp.sigmoid(theta[..., 0])
        kappa = 1.0 / (xp.exp(-theta[..., 1]) + self.inv_kappa_max)
        a, b = mu * kappa, (1 - mu) * kappa
        z = xp.stack([xp.zeros_like(theta[..., 2]), theta[..., 2], theta[..., 3]], axis=-1)
        pi = xp.softmax(z, axis=-1)
        u = theta[..., 4:4 + self.K]
        su = self._scale(theta[..., 4 + self.K], xp) * u
        if xp.name == "numpy":
            f = np.concatenate([a[..., None], b[..., None], su], -1) @ self._f_rows
        else:
            f = (a[..., None] * self.log_p + b[..., None] * self.log_1mp
                 + xp.matmul(xp.matmul(su, self.vec.T), self.basis.T))
        h = xp.softmax(f, axis=-1)
        g = xp.concatenate([pi[..., 1:2], pi[..., 0:1] * h, pi[..., 2:3]], axis=-1)
        return mu, kappa, a, b, pi, h, g

    def weights(self, theta) -> np.ndarray:
        """``G`` on the support (NumPy), shape (..., J + 2)."""
        return self._parts(np.asarray(theta, float), _np())[-1]

    def lik_matrix(self, n, c) -> np.ndarray:
        """``Binom(c | n, p_j)`` on the support, shape n.shape + (J + 2,)."""
        n = np.asarray(n, float)[..., None]
        c = np.asarray(c, float)[..., None]
        p = self.support
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = (gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
                  + np.where(c > 0, c * np.log(p), 0.0) + np.where(n - c > 0, (n - c) * np.log1p(-p), 0.0))
        return np.exp(ll)

    # -- the specification -------------------------------------------------------------------
    def prepare(self, data):
        return {"n": data.n, "c": data.c, "L": self.lik_matrix(data.n, data.c)}

    def logprior(self, theta, xp):
        pi = xp.softmax(xp.stack([xp.zeros_like(theta[..., 2]), theta[..., 2], theta[..., 3]], axis=-1), axis=-1)
        u = theta[..., 4:4 + self.K]
        lt = theta[..., 4 + self.K]
        s = self.settings
        return (beta_logprior(theta, xp) + xp.sum(self.alpha * xp.log(pi), axis=-1)
                - 0.5 * xp.sum(xp.square(u), axis=-1) - 0.5 * xp.square((lt - s["tau_mu"]) / s["tau_sd"]))

    def loglik(self, theta, aux, xp):
        g = self._parts(theta, xp)[-1]  # (..., 1, J+2)
        return xp.log(xp.sum(g * aux["L"], axis=-1))

    def logp_grad(self, theta, aux, w):
        """Analytic gradient (checked against central differences in the tests).

        By the compiled loop of :mod:`bayespass.models._flex_kernel` where it applies (``COMPILED``), equal to
        the NumPy formulas below to rounding.
        """
        theta = np.asarray(theta, float)
        if COMPILED:
            with np.errstate(all="ignore"):
                out = _flex_kernel.logp_grad(self, theta, aux, w)
            if out is not None:
                lp, grad = out
                lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
                return lp, np.where(np.isfinite(grad), grad, 0.0)
        mu, kappa, a, b, pi, h, g = self._parts(theta, _np())
        lik = aux["L"]  # (config, U, J+2)
        with np.errstate(all="ignore"):
            den = (lik @ g[..., None])[..., 0]
            ll = np.sum(np.where(w > 0, w * np.log(den), 0.0), axis=-1)
            ratio = np.where(w > 0, w / den, 0.0)
            S = (ratio[..., None, :] @ lik)[..., 0, :]  # d ll / d g_j
            Si = S[..., 1:-1]
            sh = np.sum(Si * h, -1, keepdims=True)
            df = pi[..., :1] * h * (Si - sh)  # d ll / d f_j (interior)
            u = theta[..., 4:4 + self.K]
            lt = theta[..., 4 + self.K]
            e = np.exp(-2.0 * lt)[..., None]
            A = self.ridge + self.lam * e
            scale = A ** -0.5
            d_su = (df @ self.basis) @ self.vec  # d / d(scale * u)
            s = self.settings
            g_u = d_su * scale - u
            g_lt = np.sum(d_su * (A ** -1.5 * self.lam * e) * u, -1) - (lt - s["tau_mu"]) / s["tau_sd"] ** 2
            da, db = df @ self.log_p, df @ self.log_1mp
            g_mu = (da - db) * kappa * mu * (1 - mu) + (1 - 2 * mu)
            g_k = ((da * a + db * b) * (1 - kappa * self.inv_kappa_max)
                   - (theta[..., 1] - LOG_KAPPA_MU) / LOG_KAPPA_SD**2)
            sv = np.stack([sh[..., 0], S[..., 0], S[..., -1]], -1)
            g_z = (pi[..., 1:] * (sv[..., 1:] - np.sum(pi * sv, -1, keepdims=True))
                   + self.alpha[1:] - self.alpha.sum() * pi[..., 1:])
            s_ = self.settings
            lp = (ll + np.log(mu) + np.log1p(-mu) - 0.5 * ((theta[..., 1] - LOG_KAPPA_MU) / LOG_KAPPA_SD) ** 2
                  + np.log(pi) @ self.alpha - 0.5 * np.sum(u**2, -1) - 0.5 * ((lt - s_["tau_mu"]) / s_["tau_sd"]) ** 2)
            grad = np.concatenate([g_mu[..., None], g_k[..., None], g_z, g_u, g_lt[..., None]], -1)
        lp = np.where(np.isfinite(lp) & self.inside(theta), lp, -np.inf)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def warm(self):
        """Load the compiled loop (one tiny call) if it is on: forked candidates then inherit it."""
        if COMPILED:
            data = warm_data()
            self.logp_grad(self.start(data)[None], self.prepare(data), data.w)

    def q(self, theta, n, c, k):
        g = self.weights(theta)  # (..., 1, J+2)
        post = g * self.lik_matrix(n, c)  # (..., U, J+2)
        with np.errstate(invalid="ignore", divide="ignore"):
            post = post / post.sum(-1, keepdims=True)
        k = np.atleast_1d(np.asarray(k, float))
        return post @ ((1.0 - self.support)[:, None] ** k[None, :])

    def draw_p(self, theta, size, rng):
        g = self.weights(theta)
        cum = np.cumsum(g, -1)
        u = rng.random(g.shape[:-1] + (size,)) * cum[..., -1:]
        return self.support[_searchsorted(cum, u)]

    def named(self, theta):
        mu, kappa, a, b, pi, _, g = self._parts(np.asarray(theta, float), _np())
        return {"mu": mu, "kappa": kappa, "a": a, "b": b, "pi0": pi[..., 1], "pi1": pi[..., 2],
                "tau": np.exp(theta[..., 4 + self.K]), "mean_p": g @ self.support}

    def sample_prior(self, size, rng):
        from .bb import beta_prior_draws

        pi = rng.dirichlet(self.alpha, size)
        s = self.settings
        return np.column_stack([beta_prior_draws(size, rng), np.log(pi[:, 1:] / pi[:, :1]),
                                rng.standard_normal((size, self.K)), rng.normal(s["tau_mu"], s["tau_sd"], size)])

    def population_passk(self, theta, k) -> np.ndarray:
        """pass@k of the population ``E_G[1 - (1-p)^k]`` (a new task), theta (..., P) -> (..., K)."""
        g = self.weights(theta)
        return 1.0 - g @ ((1.0 - self.support)[:, None] ** np.atleast_1d(np.asarray(k, float))[None, :])

    def start(self, data):
        k = data.n_config
        out = np.zeros((k, self.n_params))
        out[:, 0] = mean_rate_start(data)
        out[:, 1] = LOG_KAPPA_MU
        out[:, 2:4] = -1.0
        out[:, -1] = self.settings["tau_mu"]
        return out

    @cached_property
    def n_support(self) -> int:
        """Number of support points (J + 2)."""
        return self.support.size


def _np():
    return NP


def _searchsorted(cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row-wise ``searchsorted(cum[..., :], u[..., :])`` for batched rows."""
    flat_c = cum.reshape(-1, cum.shape[-1])
    flat_u = u.reshape(-1, u.shape[-1])
    out = np.empty(flat_u.shape, int)
    for i in range(flat_c.shape[0]):
        out[i] = np.searchsorted(flat_c[i], flat_u[i])
    return np.minimum(out, cum.shape[-1] - 1).reshape(u.shape)
