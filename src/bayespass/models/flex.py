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

Each interior point stands for its cell of the grid, ``[x_j - h/2, x_j + h/2]`` in logit (h = 28 / 79, 0.35), over
which ``G_j`` is spread evenly in logit: the likelihood of a task is ``sum_j G_j L_j(n, c)`` with ``L_j`` the mean
of ``Binom(c | n, p)`` over cell j (an incomplete Beta function; the atoms are points), computed per distinct
(n, c) pair, and the predictive of a task is its posterior over the cells, so pass@k at any k is
``1 - sum_j w_ij E[(1 - p)^k | cell j, n, c]`` per draw.  Where a task's likelihood is wider than a cell (a few
dozen samples or fewer) this is the grid's point value to within a percent; where it is narrower (thousands of
samples per task) a point value pinned each task to one grid point, and the band of pass@k within the samples
drawn was too narrow: at 10,000 samples per task flex's 90% band of pass@1 covered 3 of 20 simulated replicates
(benchmarks/RESULTS.md, "flex at thousands of samples per task").
"""

from __future__ import annotations

import numbers
import threading
from functools import cached_property

import numpy as np
from scipy.special import betainc, betaincc, betaln, expit, gammaln, log_expit

from . import _flex_kernel
from .base import NP, Model, register, warm_data
from .bb import LOG_KAPPA_MU, LOG_KAPPA_SD, beta_logprior, mean_rate_start

#: the log density and gradient by the compiled loop of :mod:`bayespass.models._flex_kernel`; False: NumPy
COMPILED = True

#: default settings of the flex prior (chosen on the calibration benchmark, see benchmarks/RESULTS.md)
DEFAULTS = {"J": 80, "K": 16, "lo": -14.0, "hi": 14.0, "ridge_sd": 2.0, "tau_mu": 0.0, "tau_sd": 1.0,
            "alpha": (3.0, 0.5, 0.5), "kappa_max": 400.0, "cells": True}


#: Gauss-Legendre nodes and weights on [-1/2, 1/2] for the cell means of integrands smooth on a cell's scale
_GL_T, _GL_W = (v / 2 for v in np.polynomial.legendre.leggauss(12))
#: up to this information in logit, a * b / (a + b) of ``p^a (1-p)^b`` (its width in logit >= 0.18, half a
#: cell), a cell's mean is by Gauss-Legendre; beyond it by the incomplete Beta function
_SMOOTH_INFO = 32.0
_CHUNK = 4096  # rows of Gauss-Legendre at a time (rows x J x nodes values)
_TABLES_LOCK = threading.Lock()
_TABLES_BYTES = 128 * 2**20  # the predictive's cell tables kept, over every (n, c, k) asked


def cell_means(x: np.ndarray, n, c, k=0.0) -> np.ndarray:
    """Mean over each grid cell of ``Binom(c | n, p) (1 - p)^k``, p = expit(t), t uniform on the cell; shape + (J,).

    The cells are ``[x_j - h/2, x_j + h/2]`` around the evenly spaced logit grid ``x``.  The integrand is
    ``C(n, c) p^a (1 - p)^b`` (a = c, b = n - c + k), whose width in logit is about ``(a b / (a + b))^-1/2``.
    Where that is at least half a cell (a few dozen samples per task or fewer, and every one-sided
    integrand, a = 0 or b = 0) the mean is by 12-point Gauss-Legendre in logit; where it is narrower, with
    ``dt = dp / (p (1 - p))``, it is ``C(n, c) B(a, b)`` times the regularized incomplete Beta function's mass
    on the cell, over h (from the tail that keeps the difference exact: lower tails below the mean, upper
    tails above it).
    """
    n, c, k = np.broadcast_arrays(*(np.asarray(v, float) for v in (n, c, k)))
    shape = n.shape
    n, c, k = n.ravel(), c.ravel(), k.ravel()
    h = x[1] - x[0]
    a, b = c, n - c + k
    log_coef = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
    out = np.empty((n.size, x.size))
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        sharp = (a > 0) & (b > 0) & (a * b > _SMOOTH_INFO * (a + b))
        if sharp.any():
            lo, hi = expit(x - h / 2), expit(x + h / 2)
            aa, bb = a[sharp, None], b[sharp, None]
            mean = aa / (aa + bb)
            mass = np.where(hi <= mean, betainc(aa, bb, hi) - betainc(aa, bb, lo),
                            np.where(lo >= mean, betaincc(aa, bb, lo) - betaincc(aa, bb, hi),
                                     1.0 - betainc(aa, bb, lo) - betaincc(aa, bb, hi)))
            out[sharp] = np.exp((log_coef[sharp] + betaln(aa[:, 0], bb[:, 0]) - np.log(h))[:, None]
                                + np.log(np.clip(mass, 0.0, None)))
        t = x[:, None] + h * _GL_T  # (J, nodes)
        lp, lq = log_expit(t), log_expit(-t)
        rows = np.flatnonzero(~sharp)
        for s in range(0, rows.size, _CHUNK):
            r = rows[s:s + _CHUNK]
            log_f = log_coef[r, None, None] + a[r, None, None] * lp + b[r, None, None] * lq
            out[r] = np.exp(log_f) @ _GL_W
    return out.reshape(shape + (x.size,))


def _check_settings(s: dict) -> None:
    """Raise a ValueError naming the first flex setting out of its range (kappa_max is checked where it is used)."""

    def real(v) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v)

    def integer(v, least: int) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= least

    problems = [("J", "an integer >= 2 (grid points)", integer(s["J"], 2)),
                ("K", "an integer >= 4 (cubic B-spline coefficients)", integer(s["K"], 4)),
                ("lo", "a finite number below hi (logit p)", real(s["lo"]) and real(s["hi"]) and s["lo"] < s["hi"]),
                ("hi", "a finite number (logit p)", real(s["hi"])),
                ("ridge_sd", "a positive number", real(s["ridge_sd"]) and s["ridge_sd"] > 0),
                ("tau_sd", "a positive number", real(s["tau_sd"]) and s["tau_sd"] > 0),
                ("tau_mu", "a finite number", real(s["tau_mu"])),
                ("alpha", "three positive numbers (the Dirichlet of interior, 0 and 1)",
                 isinstance(s["alpha"], (tuple, list)) and len(s["alpha"]) == 3
                 and all(real(a) and a > 0 for a in s["alpha"])),
                ("cells", "True or False", isinstance(s["cells"], (bool, np.bool_)))]
    for name, allowed, ok in problems:
        if not ok:
            raise ValueError(f"flex setting {name}={s[name]!r} is not allowed; it must be {allowed}")


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
    LEGACY = {"kappa_max": None, "cells": False}

    def __init__(self, **settings):
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown flex settings {sorted(unknown)}; allowed: {sorted(DEFAULTS)}")
        self.settings = DEFAULTS | settings
        s = self.settings
        _check_settings(s)
        self.K = int(s["K"])
        self.coords = ("logit_mu", "log_kappa", "z0", "z1", *(f"u{i}" for i in range(self.K)), "log_tau")
        self.x = np.linspace(s["lo"], s["hi"], int(s["J"]))
        pin = expit(self.x)
        self.support = np.r_[0.0, pin, 1.0]
        self._tables: dict = {}  # (n, c, k) -> the predictive's cell tables (q), the latest kept
        self.log_p, self.log_1mp = np.log(pin), np.log1p(-pin)
        self.cells = bool(s["cells"])  # False: each interior point a point value (fits made before the cells)
        self.support_mean = np.r_[0.0, self._interior(1.0, 1.0, 0.0), 1.0]  # the mean of p on each cell
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

    def lik_matrix(self, n, c, k=0.0) -> np.ndarray:
        """Mean of ``Binom(c | n, p) (1 - p)^k`` over each cell and at the atoms, shape n.shape + (J + 2,)."""
        n, c, k = np.broadcast_arrays(*(np.asarray(v, float) for v in (n, c, k)))
        at0 = (c == 0).astype(float)  # p = 0: (1 - p)^k = 1
        at1 = ((c == n) & (k == 0)).astype(float)  # p = 1
        return np.concatenate([at0[..., None], self._interior(n, c, k), at1[..., None]], axis=-1)

    def _interior(self, n, c, k) -> np.ndarray:
        """``Binom(c | n, p) (1 - p)^k`` at the interior points: its mean on each cell, else (not cells) its value."""
        if self.cells:
            return cell_means(self.x, n, c, k)
        n, c, k = (np.asarray(v, float)[..., None] for v in (n, c, k))
        return np.exp(gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1) + c * self.log_p
                      + (n - c + k) * self.log_1mp)

    def _q_tables(self, n, c, k) -> tuple[np.ndarray, np.ndarray]:
        """Return the likelihood per cell (U, J + 2) and ``E[(1 - p)^k | cell, n, c]`` (U, J + 2, K) of pairs (U,)."""
        key = (np.asarray(n, float).tobytes(), np.asarray(c, float).tobytes(), k.tobytes())
        with _TABLES_LOCK:  # configs' curves are made in threads
            found = self._tables.get(key)
        if found is not None:
            return found
        lik = self.lik_matrix(n, c)
        fail = self.lik_matrix(np.asarray(n, float)[:, None], np.asarray(c, float)[:, None], k[None, :])
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(lik[:, None, :] > 0, fail / lik[:, None, :], 0.0)
        found = (lik, np.ascontiguousarray(np.clip(ratio, 0.0, 1.0).transpose(0, 2, 1)))
        with _TABLES_LOCK:
            self._tables[key] = found
            while sum(v[1].nbytes for v in self._tables.values()) > _TABLES_BYTES and len(self._tables) > 1:
                self._tables.pop(next(iter(self._tables)))  # the oldest
        return found

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
        k = np.atleast_1d(np.asarray(k, float))
        lik, ratio = self._q_tables(n, c, k)
        post = g * lik  # (..., U, J+2)
        with np.errstate(invalid="ignore", divide="ignore"):
            post = post / post.sum(-1, keepdims=True)
        return (post[..., None, :] @ ratio)[..., 0, :]  # per pair: its cells' E[(1-p)^k] by their weights

    def draw_p(self, theta, size, rng):
        g = self.weights(theta)
        cum = np.cumsum(g, -1)
        u = rng.random(g.shape[:-1] + (size,)) * cum[..., -1:]
        j = _searchsorted(cum, u)
        if not self.cells:
            return self.support[j]
        h = self.x[1] - self.x[0]
        inner = expit(self.x[np.clip(j - 1, 0, self.x.size - 1)] + h * (rng.random(j.shape) - 0.5))  # even in logit
        return np.where(j == 0, 0.0, np.where(j == self.n_support - 1, 1.0, inner))

    def named(self, theta):
        mu, kappa, a, b, pi, _, g = self._parts(np.asarray(theta, float), _np())
        return {"mu": mu, "kappa": kappa, "a": a, "b": b, "pi0": pi[..., 1], "pi1": pi[..., 2],
                "tau": np.exp(theta[..., 4 + self.K]), "mean_p": g @ self.support_mean}

    def sample_prior(self, size, rng):
        from .bb import beta_prior_draws

        pi = rng.dirichlet(self.alpha, size)
        s = self.settings
        return np.column_stack([beta_prior_draws(size, rng), np.log(pi[:, 1:] / pi[:, :1]),
                                rng.standard_normal((size, self.K)), rng.normal(s["tau_mu"], s["tau_sd"], size)])

    def population_passk(self, theta, k) -> np.ndarray:
        """pass@k of the population ``E_G[1 - (1-p)^k]`` (a new task), theta (..., P) -> (..., K)."""
        g = self.weights(theta)
        k = np.atleast_1d(np.asarray(k, float))
        return 1.0 - g @ self.lik_matrix(np.zeros_like(k), np.zeros_like(k), k).T  # E_G[(1-p)^k], per cell

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
