"""``shared``: configs that share task difficulty, with a flexible difficulty distribution integrated out.

::

    x_i ~ g                                              (task difficulty, shared by every config;
                                                          log g piecewise linear on 13 knots over [-10, 10])
    m_ij = logistic(alpha_j - s_j x_i)
    p_ij ~ Beta(m_ij phi_j, (1 - m_ij) phi_j)            (per-config overdispersion)
    c_ij ~ Binomial(n_ij, p_ij)

    alpha_j ~ Normal(0, 2.5),  log phi_j ~ Normal(lambda, 1.5),  lambda ~ Normal(log 0.6, 1.5)   (lambda integrated out)
    siblings (one model at several temperatures, see ``sibling_groups``):
    alpha_j ~ Normal(A_g, sw^2),  A_g ~ Normal(0, 2.5)  (integrated out),  sw ~ HalfNormal(1)
    log s = Z eta, eta ~ Normal(0, 0.5)                  (Z: orthonormal basis of the vectors summing to 0)
    log g knot values ~ Normal(0, 3) with second differences ~ Normal(0, 1.5)   (smooth, any shape)

Each config has an ability ``alpha_j``, a dispersion ``phi_j`` and a slope ``s_j`` (how sharply its success
falls with difficulty: sampling at a higher temperature flattens it, ``logit p / T``); tasks have one
difficulty for all configs, drawn from a distribution ``g`` learnt from the data, so it can put mass on tasks
no config solves and on tasks every config solves (which a normal difficulty cannot, and which real
benchmarks have).  The slopes' geometric mean is 1 (the scale of the difficulties is ``g``'s), so one config
has none.  The difficulties are **integrated out** task by task on a fine grid, so the likelihood depends on
``3 J + 12`` numbers only.  ``method="eb"`` maximises their posterior with analytic gradients (L-BFGS) and
draws them from its Laplace approximation; ``method="mcmc"`` runs NUTS on the same marginal density.

pass@k draws sample every task's difficulty from its posterior given *all* configs' counts and each
config's ``p_ij`` given it: a config with few samples borrows strength from how hard the other configs
found each task, and the draws of two configs are correlated through the shared tasks, as a comparison
needs.
"""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr
from scipy.special import expit, logsumexp

from .._threads import thread_map
from ..stats.kernels import bb_loglik, bb_loglik_pair_rows, passk_bb_predictive, power_rows, rising_log_rows
from . import hmc
from .base import Model, pt_backend, register

KNOTS = np.linspace(-10.0, 10.0, 13)
#: parameter draws per chain behind the pass@k draws of `shared` (each carries many draws of the task-level
#: unknowns).  25 cut the seed-to-seed variation of the 90% band's width 2-3x (CV 0.11-0.13 -> 0.04-0.05 on the
#: real MBPP configs at m = 2) but make P(better) at m = 1, k = 10, already under-confident, more so (ECE
#: 0.035 -> 0.076 on the tuning configs, 0.106 -> 0.130 held out; m = 2 alike) and add 1-2 s to the EB fit
#: of 34 x 378, at its 10 s line at m = 50 (benchmarks/RESULTS.md, sixty-fifth session)
N_THETA = 5
#: N_THETA holds on counts of issue 18's 34 configs x 378 tasks and larger; smaller counts take more parameter
#: draws per chain, as many as keep (configs x tasks x draws per chain) within THETA_CELLS, at most one per
#: pass@k draw (:func:`n_parameter_draws`).  With 5 on every size, two configs with identical counts (100 tasks,
#: 4 samples each) got P(better) 0.30-0.70 and ends of the pass@10 band up to 0.2 apart, from the 20 draws a
#: fit happened to take; with 250 they get 0.49-0.50 and ends within 0.06, at 0.4 s more
#: (tests/stats/test_ranking.py; benchmarks/RESULTS.md, sixty-eighth session)
THETA_CELLS = 34 * 378 * N_THETA
#: the grid of MCMC assumes dispersions up to this multiple of the posterior mode's (or 3 sd above it where
#: their posterior is wider; at m = 50 on 34 x 378 the sd of log phi is about 0.05): tests/models/test_shared.py
#: checks the log density's differences and gradient against a grid 10x finer
PHI_MARGIN = 2.0
#: ranges of leapfrog steps per HMC transition in the whitened coordinates (drawn uniformly), one chosen in the
#: warm-up by its ChEES per gradient (hmc.sample's steps_choices).  Where the posterior is near a standard normal
#: there, the range whose trajectories come near a quarter period decorrelates fastest: with the abilities
#: centred (m = 50 on 34 x 378: step size about 0.47) that is 2-5 steps, while 3-8 come near half a period, which
#: mirrors a draw across the centre and leaves its distance from it unmixed.  With one sample per task the
#: dispersions and the spread of g trade off along a ridge that only long trajectories cross (12 real configs x
#: 364 tasks at m = 1: ESS 212 with 3-8, 1,344 with 4-16)
STEPS = ((2, 5), (3, 8), (6, 16))
#: chains that still miss the gate after going on to 3x the draws (5 rounds), with a direction along which the
#: draws vary 5x what the diagonal metric expects, restart where they are in a dense metric (the draws'
#: covariance) with long trajectories, and draw afresh.  On real MBPP at one sample per task (12 configs x 364
#: tasks) the warm-up picks 2-8 steps and misses such a direction, which mixes slowly along a curved ridge.  Of
#: 20 fits at m = 1 and 2 this fired on two: the fit whose chains had missed at 3,000 draws (52.9 s) passed in
#: 62.6 s, and one that had passed by going on (43.6 s) took 62.2 s; the other 18 are unchanged, draw for draw
#: (fifty-first session, benchmarks/RESULTS.md)
RESTART = hmc.DenseRestart(threshold=5.0, after_rounds=5, steps_choices=((6, 16), (10, 24)))
#: corrections L-BFGS keeps to find the posterior mode (scipy's default is 10).  Before the abilities were centred
#: (:func:`_split`) they and the location of g traded off along a ridge the prior alone closed, and with the
#: curvature of 50 steps the two modes of 34 configs x 378 tasks took 91 + 68 log-density evaluations instead of
#: 166 + 74 at m = 50 (144 + 83 -> 91 + 79 at m = 5), to the same optimum (the log posterior 2e-6 higher, the
#: modes 6e-4 apart; benchmarks/RESULTS.md)
MODE_MEMORY = 50
#: the dispersions' level is centred on real code models': over the 12 real MBPP configs with 50 samples per task
#: log phi ranges from -2.6 to 4.3, median -0.5 (p spread to 0 and 1 about each task's mean).  One sample per task
#: does not tell it, and the prior's centre then sets pass@k beyond k = 1: at log 20 (before) every config's p hugged
#: its task's mean, pass@10 came out 0.10-0.19 too high on 16 real configs that chose nothing, and its ranking was
#: worse than pass@1's (Kendall tau 0.22 against 0.54; benchmarks/RESULTS.md, "Real configs that chose nothing")
_PRIOR = {"alpha": (0.0, 2.5), "log_phi": (np.log(0.6), 1.5), "beta": (0.0, 3.0), "smooth": 1.5,
          "eta": (0.0, 0.5)}
#: sd of the configs' common level of log phi (``_PRIOR["log_phi"]`` is each config's sd about it and the level's
#: mean).  A config's dispersion is not told by one sample per task (a Beta-Binomial count of n = 1 depends on the
#: mean only): with independent priors such a config kept phi near 20 beside configs whose counts put it near 1
#: (real MBPP: log phi -2.6 to 4.3, median -0.5), so its p spread less, its pass@k beyond one sample was inflated,
#: and P(better) against configs with more samples was confidently wrong (benchmarks/compare_mixed.py).  A common
#: level lets it borrow the others' dispersion, with its own sd about them
PHI_LEVEL_SD = 1.5


@functools.lru_cache(maxsize=64)
def _phi_precision(J: int) -> np.ndarray:
    """Precision (J, J) of the configs' log phi with the common level integrated out (read-only).

    Covariance ``s^2 I + t^2 1 1^T`` (s: a config's sd about the level, t: the level's); its inverse by
    Sherman-Morrison is ``(I - t^2 / (s^2 + J t^2) 1 1^T) / s^2``.
    """
    s2, t2 = _PRIOR["log_phi"][1] ** 2, PHI_LEVEL_SD**2
    out = (np.eye(J) - t2 / (s2 + J * t2)) / s2
    out.flags.writeable = False
    return out


#: configs of one model on one benchmark at different temperatures ("siblings") have abilities about a common one:
#: ``alpha_j ~ Normal(A_g, sw^2)``, ``A_g ~ Normal(0, 2.5^2)`` (integrated out), ``sw ~ HalfNormal(POOL_SCALE)`` in
#: logits.  On real MBPP the siblings' abilities differ by less than one sample per task can tell (pass@1 within
#: 0.01 of each other), and pooling their counts ranked the configs better; where siblings differ, their counts
#: say so and sw's posterior moves away from 0.  EB integrates sw over ``POOL_GRID`` (the Laplace approximation
#: updated per sw, weighted by its evidence); MCMC fixes sw at that posterior's median.  ``POOL_SIBLINGS = False``
#: turns it off (every ability independent, as before the sixtieth session)
POOL_SIBLINGS = True
POOL_SCALE = 1.0
POOL_GRID = np.exp(np.linspace(np.log(0.005), np.log(3.0), 32))


def sibling_groups(counts) -> np.ndarray | None:
    """Return a group label per config (-1: none), or None where no two configs are siblings.

    Siblings share the ``model`` and ``benchmark`` coordinates and have a finite ``temperature`` (counts without
    those coordinates, or whose temperature is unknown, have no siblings).
    """
    if not POOL_SIBLINGS or "model" not in counts.coords or "temperature" not in counts.coords:
        return None
    model = np.asarray(counts["model"].values).astype(str)
    bench = (np.asarray(counts["benchmark"].values).astype(str) if "benchmark" in counts.coords
             else np.full(model.size, ""))
    temp = np.asarray(counts["temperature"].values, float)
    keys: dict = {}
    labels = np.array([keys.setdefault((m, b), len(keys)) if np.isfinite(t) else -1
                       for m, b, t in zip(model, bench, temp, strict=True)], dtype=int)
    if not keys:
        return None
    sizes = np.bincount(labels[labels >= 0], minlength=len(keys))
    labels[(labels >= 0) & (sizes[np.maximum(labels, 0)] < 2)] = -1
    if not (labels >= 0).any():
        return None
    return np.unique(labels, return_inverse=True)[1] - (1 if (labels < 0).any() else 0)


def _alpha_precision(groups: np.ndarray, sw: float) -> tuple[np.ndarray, float]:
    """Precision (J, J) of the free abilities with siblings' common ability integrated out, and its log det.

    A group of n siblings has covariance ``sw^2 I + t^2 1 1^T`` (t: ``_PRIOR["alpha"]``'s sd), whose inverse
    is ``(I - t^2 / (sw^2 + n t^2) 1 1^T) / sw^2`` and log det ``(n - 1) log sw^2 + log(sw^2 + n t^2)``.
    """
    t2, s2 = _PRIOR["alpha"][1] ** 2, sw**2
    P = np.eye(groups.size) / t2
    logdet = -float(np.sum(groups < 0)) * np.log(t2)
    for g in np.unique(groups[groups >= 0]):
        idx = np.flatnonzero(groups == g)
        n = idx.size
        P[np.ix_(idx, idx)] = (np.eye(n) - t2 / (s2 + n * t2)) / s2
        logdet -= (n - 1) * np.log(s2) + np.log(s2 + n * t2)
    return P, logdet


def _pooled(mode: np.ndarray, cov: np.ndarray, J: int, groups: np.ndarray):
    """Update the Laplace approximation at ``mode`` (independent abilities) to siblings pooled, per sw of the grid.

    The prior change is Gaussian, so within the approximation each sw's posterior is Gaussian (one Newton step
    from ``mode``) and its evidence closed-form.  Returns the grid's posterior weights (with sw's half-normal
    prior), and each sw's mean and covariance.
    """
    H = np.linalg.inv(cov)
    a0 = mode[:J]
    base = np.eye(J) / _PRIOR["alpha"][1] ** 2
    logw, means, covs = [], [], []
    for sw in POOL_GRID:
        P, logdet_p = _alpha_precision(groups, sw)
        D = P - base
        Hn = H.copy()
        Hn[:J, :J] += D
        g = np.zeros_like(mode)
        g[:J] = D @ a0
        dx = -np.linalg.solve(Hn, g)
        xn = mode + dx
        val = 0.5 * dx @ H @ dx + 0.5 * xn[:J] @ D @ xn[:J]  # the negative log posterior's change at its new mode
        logdet_h = np.linalg.slogdet(Hn)[1]
        # evidence of sw, and its prior: half-normal on sw, the grid uniform in log sw (Jacobian sw)
        logw.append(-val - 0.5 * logdet_h + 0.5 * logdet_p - 0.5 * (sw / POOL_SCALE) ** 2 + np.log(sw))
        means.append(xn)
        covs.append(np.linalg.inv(Hn))
    logw = np.array(logw)
    w = np.exp(logw - logw.max())
    return w / w.sum(), means, covs


def _median_sw(w: np.ndarray) -> float:
    return float(POOL_GRID[min(int(np.searchsorted(np.cumsum(w), 0.5)), POOL_GRID.size - 1)])


def _fixed_sibling_prior(counts, mode: np.ndarray, cov: np.ndarray):
    """MCMC's abilities' precision with siblings pooled at the median of sw's posterior, and attrs (None, {}: none)."""
    groups = sibling_groups(counts)
    if groups is None:
        return None, {}
    sw = _median_sw(_pooled(mode, cov, groups.size, groups)[0])
    return _alpha_precision(groups, sw)[0], {"sibling_groups": groups.astype(np.int64), "sibling_sd_median": sw}


@functools.lru_cache(maxsize=32)
def _basis(J: int) -> np.ndarray:
    """Orthonormal basis (J, J - 1) of the vectors summing to 0: the log slopes are ``Z @ eta``.

    Cached (read-only): every log density of a fit needs it, twice.
    """
    if J < 2:
        z = np.zeros((J, 0))
    else:
        z = np.ascontiguousarray(np.linalg.qr(np.column_stack([np.ones(J), np.eye(J)[:, :J - 1]]))[0][:, 1:])
    z.flags.writeable = False
    return z


def _hat(x: np.ndarray) -> np.ndarray:
    """Piecewise-linear (hat) basis of the knots at points ``x``: log g(x) = _hat(x) @ beta."""
    return np.clip(1.0 - np.abs(x[:, None] - KNOTS[None, :]) / (KNOTS[1] - KNOTS[0]), 0.0, None)


def n_parameter_draws(cells: int, per_chain: int) -> int:
    """Parameter draws per chain behind ``per_chain`` pass@k draws of counts with ``cells`` (config, task) cells.

    ``N_THETA`` on issue 18's largest counts and above, more on smaller ones, at the same cost (``THETA_CELLS``).
    """
    return int(np.clip(THETA_CELLS // max(int(cells), 1), min(N_THETA, per_chain), per_chain))


class _Data:
    """Distinct task columns (counts of every config on a task) with their multiplicities."""

    def __init__(self, n: np.ndarray, c: np.ndarray, phi: np.ndarray | None = None,
                 slope: np.ndarray | None = None):
        obs = (n > 0).any(0)
        cols = np.concatenate([n[:, obs], c[:, obs]]).T
        uniq, inverse, w = np.unique(cols, axis=0, return_inverse=True, return_counts=True)
        J = n.shape[0]
        self.n, self.c, self.w = uniq[:, :J].T.astype(float), uniq[:, J:].T.astype(float), w.astype(float)
        self.inverse, self.observed = inverse.ravel(), obs  # observed task -> distinct column
        # trapezoid error ~ exp(-2 pi^2 (sd/h)^2) for a task posterior of sd >= 2 / sqrt(sum_j n_ij): h <= 1.2 sd.
        # Given dispersions phi_j (J,), a config's count tells at most as much as n (1 + phi) / (n + phi) trials
        # (its Beta-Binomial variance), so the bound is 2 / sqrt(sum_j n_eff_ij); a config of slope s_j tells
        # s_j^2 times as much about the difficulty (bound on the slopes: ``slope``, default 1)
        n_eff = self.n if phi is None else self.n * (1.0 + phi[:, None]) / (self.n + phi[:, None])
        if slope is not None:
            n_eff = n_eff * np.maximum(np.asarray(slope, float), 1.0)[:, None] ** 2
        h = min(0.2, 2.4 / np.sqrt(max(float(n_eff.sum(0).max()), 1.0)))
        self.x = np.arange(KNOTS[0], KNOTS[-1] + h / 2, h)
        self.hat = _hat(self.x)
        self._indices = None

    def indices(self):
        """Return c, n - c and n per (config, distinct task), int64 (J, U), -1 where n = 0 (cached)."""
        if self._indices is None:
            seen = self.n > 0
            self._indices = tuple(np.ascontiguousarray(np.where(seen, m, -1).astype(np.int64))
                                  for m in (self.c, self.n - self.c, self.n))
        return self._indices


def _split(theta: np.ndarray, J: int):
    """Return the centred abilities, log phi, the knots of log g and the log slopes (0 without slopes).

    The abilities the likelihood sees are centred, ``alpha_j - mean(alpha)``: the difficulties are placed
    relative to the configs' mean ability, and the grid of g moves with it.  Without that, every ability +
    ``s_j d`` with g shifted by d predicted nearly the same, and with g piecewise linear on fixed knots the
    posterior along that shift had a mode per alignment of g's features with the knots, a direction MCMC crossed
    slowly (34 configs x 378 tasks at m = 50: ESS 45 along it in 2,000 draws).  The free abilities' mean is now
    set by their prior alone, and nothing else depends on it.  (Centring by ``sum(alpha) / sum(s)``, which the
    shift moves by d whatever the slopes, coupled that mean to the slopes: trajectories along it diverged.)
    """
    eta = theta[..., 2 * J + KNOTS.size:]
    log_s = eta @ _basis(J).T if eta.shape[-1] else np.zeros(theta.shape[:-1] + (J,))
    return _centred(theta[..., :J]), theta[..., J:2 * J], theta[..., 2 * J:2 * J + KNOTS.size], log_s


def _centred(x: np.ndarray) -> np.ndarray:
    """Subtract the mean over the last axis (config).

    A symmetric projection, so it also maps a gradient in the centred abilities to one in the free abilities.
    """
    return x - x.mean(-1, keepdims=True)


def _log_g(beta: np.ndarray, hat: np.ndarray) -> np.ndarray:
    """Log weights of the grid's nodes, ``log softmax(hat @ beta)``.

    By :func:`_logsumexp_last`: scipy's logsumexp costs ~50 us a call, and this is called at every leapfrog step.
    """
    s = hat @ beta
    return s - _logsumexp_last(s)


#: the mean's logit is kept within this: beyond it 1 - logistic rounds to 0 (a Beta parameter of 0) and a task is
#: as certain as the counts can tell (p < 1e-13)
LOGIT_MAX = 30.0


def _mean(alpha, slope, x):
    """``logistic(alpha - slope x)``, its argument clipped to +-LOGIT_MAX."""
    return expit(np.clip(alpha - slope * x, -LOGIT_MAX, LOGIT_MAX))


def _lik(alpha, phi, d: _Data, x, slope) -> np.ndarray:
    """Log BB per (config, distinct task, node); 0 where a config has no sample of the task."""
    mu = _mean(alpha[:, None], slope[:, None], x[None, :])  # (J, G)
    a, b = (mu * phi[:, None])[:, None, :], ((1 - mu) * phi[:, None])[:, None, :]
    n, c = d.n[:, :, None], d.c[:, :, None]
    return np.where(n > 0, bb_loglik(a, b, n, c), 0.0), mu, a, b


def _rising_table(a2: np.ndarray, m: np.ndarray, mmax: int):
    """``log Gamma(a + m) - log Gamma(a)`` and ``psi(a + m) - psi(a)`` gathered per (config, task).

    ``a2`` (J, G) does not depend on the task, so both are tabulated once per config and node
    (:func:`~bayespass.stats.kernels.rising_log_rows`) and then looked up by ``m`` (J, U): one gather
    per call instead of a pass of special functions over (J, U, G).
    """
    lg, dg = rising_log_rows(a2, mmax, digamma=True)  # (mmax + 1, J, G)
    j = np.arange(a2.shape[0])[:, None]
    return lg[m, j], dg[m, j]


def _bb_parts(a, b, n, c):
    """Log BB (without the binomial coefficient) and d/da, d/db for a, b (J, 1, G), the same for every task."""
    mmax = int(n.max())
    ci, ni = c[:, :, 0].astype(np.intp), n[:, :, 0].astype(np.intp)
    la, da = _rising_table(a[:, 0], ci, mmax)
    lb, db = _rising_table(b[:, 0], ni - ci, mmax)
    lab, dab = _rising_table(a[:, 0] + b[:, 0], ni, mmax)
    return la + lb - lab, da - dab, db - dab


def log_marginal(theta: np.ndarray, d: _Data, grad: bool = True, scores: bool = False, workers: int | None = None):
    """Log marginal likelihood ``sum_u w_u log sum_g g(x_g) prod_j BB(c_uj | ...)`` and its gradient.

    (Up to the binomial coefficients, which do not depend on the parameters.)  With ``scores=True`` the
    gradient is returned per distinct task, shape (U, P), unweighted.  ``workers``: threads (default
    ``rcParams["eb.cores"]``).
    """
    J = d.n.shape[0]
    alpha, log_phi, beta, log_s = _split(theta, J)
    phi, slope = np.exp(log_phi), np.exp(log_s)
    mu = _mean(alpha[:, None], slope[:, None], d.x[None, :])  # (J, G)
    Z = _basis(J) if theta.shape[-1] > 2 * J + KNOTS.size else np.zeros((J, 0))  # a theta without slopes: 1
    if not scores:
        total, g = _log_marginal_tables(phi, mu, beta, d, grad, workers)
        if g is None:
            return total, None
        g_alpha, g_lphi, g_beta, dx = g  # dx: d/d alpha per node (J, G)
        g_ls = -slope * (dx @ d.x)  # d mu / d log s_j = -mu (1 - mu) s_j x
        return total, np.concatenate([_centred(g_alpha), g_lphi, g_beta, Z.T @ g_ls])
    a, b = (mu * phi[:, None])[:, None, :], ((1 - mu) * phi[:, None])[:, None, :]
    n, c = d.n[:, :, None], d.c[:, :, None]
    seen = n > 0
    with np.errstate(all="ignore"):
        ll, dA, dB = _bb_parts(a, b, n, c)
    ll = np.where(seen, ll, 0.0)
    log_g = _log_g(beta, d.hat)
    s = ll.sum(0) + log_g[None, :]  # (U, G)
    lse = logsumexp(s, axis=1)
    total = float(d.w @ lse)
    if not grad:
        return total, None
    r = np.exp(s - lse[:, None])  # responsibilities (U, G)
    dA, dB = np.where(seen, dA, 0.0), np.where(seen, dB, 0.0)
    phi3, mu3 = phi[:, None, None], mu[:, None, :]
    d_alpha, d_lphi = phi3 * (dA - dB) * mu3 * (1 - mu3), phi3 * (mu3 * dA + (1 - mu3) * dB)
    s_ls = np.einsum("jug,ug->uj", d_alpha * d.x[None, None, :], r) * -slope[None, :]
    return total, np.concatenate([_centred(np.einsum("jug,ug->uj", d_alpha, r)), np.einsum("jug,ug->uj", d_lphi, r),
                                  r @ d.hat - np.exp(log_g) @ d.hat, s_ls @ Z], axis=1)


def _log_marginal_tables(phi, mu, beta, d: _Data, grad: bool, workers: int | None = None):
    """:func:`log_marginal` by per-config tables over the count values, compiled (:mod:`._shared_kernel`).

    The gradient is returned as its parts: alpha's, log phi's, the knots' and alpha's per node (J, G),
    from which :func:`log_marginal` forms the slopes'.

    ``a + b = phi`` does not depend on the node, so ``log Gamma(phi + n) - log Gamma(phi)`` is one
    table per config, a constant per task that leaves the responsibilities unchanged; only the
    tables of ``a`` and ``b`` vary over the grid.  Those, their lookups and the gradient's sums are
    computed in blocks of nodes, one per thread (``rcParams["eb.cores"]``).
    """
    from . import _shared_kernel as kernel

    ci, bi, ni = d.indices()
    J, G = mu.shape
    m_max = int(d.n.max()) if d.n.size else 0
    blocks = _node_blocks(G, workers)
    parts = thread_map(lambda sl: kernel.forward(mu, phi, ci, bi, sl, m_max, grad), blocks, workers)
    with np.errstate(all="ignore"):
        ab = rising_log_rows(phi, m_max, digamma=grad)  # (M, J): the same at every node
    seen, at_n = ni >= 0, (np.maximum(ni, 0), np.arange(J)[:, None])

    def per_task(table):  # a (M, J) table at each (config, task)'s n, 0 where it has no sample: (J, U)
        return np.where(seen, table[at_n], 0.0)

    const = per_task(ab[0] if grad else ab).sum(0)  # (U,)
    log_g = _log_g(beta, d.hat)
    s = np.concatenate([p[0] for p in parts], axis=1) + log_g[None, :]  # (U, G)
    lse = _logsumexp_last(s)
    total = float(d.w @ (lse - const))
    if not grad:
        return total, None
    r = np.exp(s - lse[:, None]) * d.w[:, None]  # weighted responsibilities (U, G)

    def backward(item):
        sl, (_, tables) = item
        sa, sb = kernel.backward(r, ci, bi, sl, tables)  # (J, block)
        m = mu[:, sl]
        return m * (1 - m) * (sa - sb), m * sa + (1 - m) * sb

    # per node, summed over all nodes at once: the same sums whatever the number of blocks
    grads = thread_map(backward, list(zip(blocks, parts, strict=True)), workers)
    sab = per_task(ab[1]) @ d.w  # sum_u w_u (psi(phi + n_uj) - psi(phi)), (J,)
    dx = phi[:, None] * np.concatenate([g[0] for g in grads], axis=1)  # d/d alpha per node (J, G)
    g_lphi = phi * (np.concatenate([g[1] for g in grads], axis=1).sum(1) - sab)
    g_beta = r.sum(0) @ d.hat - d.w.sum() * (np.exp(log_g) @ d.hat)
    return total, (dx.sum(1), g_lphi, g_beta, dx)


def _node_blocks(G: int, workers: int | None = None) -> tuple[slice, ...]:
    """Contiguous blocks of grid nodes, one per thread (``workers``, default ``rcParams["eb.cores"]``)."""
    from ..defaults import rcParams

    return _blocks_of(int(G), int(rcParams["eb.cores"]) if workers is None else int(workers))


@functools.lru_cache(maxsize=64)
def _blocks_of(G: int, workers: int) -> tuple[slice, ...]:  # asked at every leapfrog step with the same numbers
    edges = np.linspace(0, G, max(1, min(workers, G)) + 1).astype(int)
    return tuple(slice(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True))


#: where the counts have fewer distinct tasks than the model has parameters, EB's covariance is the observed
#: curvature's (:func:`_laplace_cov`); False: the scores' outer product everywhere, as before the eighty-ninth
#: session (benchmarks/leaderboard_few_tasks.py --outer-product measures it)
OBSERVED_WHEN_SINGULAR = True


def _bounded_inverse(vals: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Return the inverse of a precision given by its eigenvalues and eigenvectors, each direction curved >= 1/3^2.

    The prior alone curves every direction by >= 1/3^2; flatter is a mode on a bound (e.g. phi -> inf).
    """
    return (vecs / np.clip(vals, 1 / 3.0**2, None)) @ vecs.T


def _laplace_cov(mode: np.ndarray, d: _Data, J: int, neg=None):
    """Covariance of the Laplace approximation at ``mode`` and the eigenvalues of its precision.

    The likelihood's curvature is the outer product of the per-task scores (one pass; the expected
    information at the mode), plus the prior's; a central-difference Hessian costs 2P passes, and is the
    curvature where the counts have fewer distinct tasks than the model has parameters (the outer product is
    then singular).  Where two
    configs' counts agree on (nearly) every task their scores do too, and that product holds (almost) no
    information on how they differ: a config's band widened without bound (7x for a copy of it, 6x for one
    that differed on one task of 164).  Along those directions the curvature is raised toward the observed
    one (``neg``: value and gradient of the negative log posterior; :func:`_concordant_curvature`).
    """
    lik = _outer_scores(mode, d)
    prior = _prior_precision(J, slopes=mode.size > 2 * J + KNOTS.size)
    H = lik + prior
    if neg is not None:
        H = _concordant_curvature(H, lik, prior, mode, neg, d, J)
    vals, vecs = np.linalg.eigh(0.5 * (H + H.T))
    if OBSERVED_WHEN_SINGULAR and neg is not None and d.w.size < mode.size:
        # fewer distinct tasks than parameters: the outer product, of rank <= tasks, leaves most directions to the
        # prior (34 real configs on 25 tasks: a 10-sample config's phi spanned [0.5, 26] where the exact posterior
        # spans [1.3, 5.8], its pass@1 band 2.5x the exact one); the observed curvature holds them
        # (benchmarks/RESULTS.md, "The leaderboard on 25 tasks").  The eigenvalues returned stay the outer
        # product's: they weigh the models with and without slopes as before
        return _bounded_inverse(*_observed_hessian(neg, mode)), vals
    return _bounded_inverse(vals, vecs), vals


def _outer_scores(mode: np.ndarray, d: _Data) -> np.ndarray:
    """Return the outer product of the per-task scores at ``mode`` (the likelihood's part of EB's precision)."""
    S = log_marginal(mode, d, scores=True)[1]
    return (S * d.w[:, None]).T @ S


def _likelihood_curvature(u: np.ndarray, mode: np.ndarray, neg, prior: np.ndarray) -> float:
    """Return the likelihood's observed curvature along the unit direction ``u`` at ``mode`` (two gradients)."""
    return float(u @ (neg(mode + 1e-4 * u)[1] - neg(mode - 1e-4 * u)[1])) / 2e-4 - float(u @ prior @ u)


#: the ratio of the scores' outer product to the observed curvature (the likelihood's parts) along two configs'
#: difference below which that curvature is raised toward the observed one.  On the real MBPP configs the ratio
#: reaches 0.06 (siblings from 5 samples per task; most pairs 0.9-1.3), 0.079 among the pairs checked (below):
#: there the outer product's extra width keeps the bands honest (thirty-eighth session), and stays
#: (benchmarks/near_copies.py).
CONCORDANT_RATIO = 0.05
#: the pairs checked: counts that differ on at most this share of the tasks both configs have
CONCORDANT_SHARE = 0.05


def _concordant_curvature(H, lik, prior, mode, neg, d: _Data, J: int) -> np.ndarray:
    """Return ``H`` with the curvature along concordant configs' differences raised toward the observed one.

    For each pair of configs whose counts differ on at most ``CONCORDANT_SHARE`` of their tasks (at most J
    pairs, the closest first), the likelihood's curvature along the difference of their abilities (then of
    their log phi and log slopes) is measured (two gradients).  Where the outer product holds a ratio r <
    r0 = ``CONCORDANT_RATIO`` of it, it is replaced by the share r0 + (1 - r0)(1 - r / r0) of it: all of it for
    identical counts, continuously down to the outer product's own at r0.  So a band widens by at most
    1 / sqrt(r0) over the exact posterior's from this cause, and not at all between copies.
    """
    P = mode.size
    V = [np.eye(P)[:J], np.eye(P)[J:2 * J]]
    if P > 2 * J + KNOTS.size:  # the log slopes are Z @ eta, Z orthonormal
        V.append(np.zeros((J, P)))
        V[-1][:, 2 * J + KNOTS.size:] = _basis(J)
    r0 = CONCORDANT_RATIO
    for j, jj in _concordant_pairs(d, J):
        for i, v in enumerate(V):
            u = (v[j] - v[jj]) / np.linalg.norm(v[j] - v[jj])
            observed = _likelihood_curvature(u, mode, neg, prior)
            r = float(u @ lik @ u) / max(observed, 1e-12)
            if r >= r0:
                if i == 0:  # the abilities' difference is curved as observed: the pair is not a near copy
                    break
                continue
            target = float(u @ prior @ u) + (r0 + (1 - r0) * (1 - r / r0)) * observed
            H = H + max(target - float(u @ H @ u), 0.0) * np.outer(u, u)
    return H


def _concordant_pairs(d: _Data, J: int) -> list:
    """Return the pairs of configs whose counts differ on at most ``CONCORDANT_SHARE`` of their common tasks."""
    both = (d.n[:, None] > 0) & (d.n[None] > 0)
    differ = both & ((d.n[:, None] != d.n[None]) | (d.c[:, None] != d.c[None]))
    with np.errstate(all="ignore"):
        share = (differ * d.w).sum(-1) / (both * d.w).sum(-1)
    j, jj = np.nonzero(np.triu(share <= CONCORDANT_SHARE, 1))
    order = np.argsort(share[j, jj], kind="stable")[:J]
    return list(zip(j[order].tolist(), jj[order].tolist(), strict=True))


def _log_evidence(neg_log_post: float, vals: np.ndarray, n_slopes: int) -> float:
    """Laplace approximation of the log marginal likelihood, up to terms the models with and without slopes share.

    ``neg_log_post``: the negative log posterior at the mode (the priors without their normalising constants);
    ``vals``: the eigenvalues of the precision there.  The slopes' own prior normalisation enters, the other
    parameters' is common to both.
    """
    P = vals.size
    sd = _PRIOR["eta"][1]
    return (-neg_log_post + 0.5 * P * np.log(2 * np.pi) - 0.5 * float(np.sum(np.log(np.clip(vals, 1e-300, None))))
            - n_slopes * np.log(sd * np.sqrt(2 * np.pi)))


def _observed_hessian(neg, mode: np.ndarray):
    """Return the eigenvalues and eigenvectors of the observed Hessian of ``neg`` (value, gradient) at ``mode``.

    Central differences of the analytic gradient (2 P gradients).
    """
    P = mode.size
    H = np.empty((P, P))
    for i in range(P):
        e = np.zeros(P)
        e[i] = 1e-5
        H[i] = (neg(mode + e)[1] - neg(mode - e)[1]) / 2e-5
    return np.linalg.eigh(0.5 * (H + H.T))


def _whitening(neg, mode: np.ndarray) -> np.ndarray:
    """Return L with L L^T the inverse of the observed Hessian of ``neg`` at ``mode``.

    Directions flatter than the priors allow are bounded.
    """
    vals, vecs = _observed_hessian(neg, mode)
    return vecs / np.sqrt(np.clip(vals, 1 / 3.0**2 / 4, None))


def _posterior(theta: np.ndarray, counts, attrs: dict) -> xr.Dataset:
    """Return the posterior dataset of draws ``theta`` (chain, draw, 2 J + knots + J - 1 slopes)."""
    chains, draws, _ = theta.shape
    alpha, log_phi, beta, log_s = _split(theta, counts.sizes["config"])
    dims = ("chain", "draw", "config")
    return xr.Dataset({"alpha": (dims, alpha), "log_phi": (dims, log_phi), "phi": (dims, np.exp(log_phi)),
                       "log_slope": (dims, log_s), "slope": (dims, np.exp(log_s)),
                       "beta": (("chain", "draw", "knot"), beta)},
                      coords={"chain": np.arange(chains), "draw": np.arange(draws),
                              "config": counts.config.values, "knot": KNOTS}, attrs=attrs)


def _prior_precision(J: int, slopes: bool = True, alpha_prec: np.ndarray | None = None) -> np.ndarray:
    """Hessian of the negative log prior (constant: the priors are Gaussian); ``slopes=False``: without them.

    ``alpha_prec``: the abilities' precision where siblings are pooled (:func:`_alpha_precision`).
    """
    prec = np.concatenate([np.full(J, 1 / _PRIOR["alpha"][1] ** 2), np.zeros(J),
                           np.full(KNOTS.size, 1 / _PRIOR["beta"][1] ** 2),
                           np.full(max(J - 1, 0) if slopes else 0, 1 / _PRIOR["eta"][1] ** 2)])
    D = np.diff(np.eye(KNOTS.size), 2, axis=0)
    H = np.diag(prec)
    H[J:2 * J, J:2 * J] = _phi_precision(J)
    kb = slice(2 * J, 2 * J + KNOTS.size)
    H[kb, kb] += D.T @ D / _PRIOR["smooth"] ** 2
    if alpha_prec is not None:
        H[:J, :J] = alpha_prec
    return H


def _log_prior(theta: np.ndarray, J: int, alpha_prec: np.ndarray | None = None):
    alpha, log_phi, beta = theta[:J], theta[J:2 * J], theta[2 * J:2 * J + KNOTS.size]
    lp = 0.0
    grads = []
    for v, key in ((alpha, "alpha"), (log_phi, "log_phi"), (beta, "beta"), (theta[2 * J + KNOTS.size:], "eta")):
        mu0, s0 = _PRIOR[key]
        prec = (_phi_precision(J) if key == "log_phi" else alpha_prec if key == "alpha" else None)
        if prec is not None:  # correlated: the dispersions through their common level, siblings' abilities
            g = -prec @ (v - mu0)
            lp += float(0.5 * (v - mu0) @ g)
            grads.append(g)
            continue
        lp += float(-0.5 * np.sum(((v - mu0) / s0) ** 2))
        grads.append(-(v - mu0) / s0**2)
    d2 = np.diff(beta, 2)
    s = _PRIOR["smooth"]
    lp += float(-0.5 * np.sum((d2 / s) ** 2))
    g2 = np.zeros_like(beta)  # gradient of -0.5 sum (D beta)^2 / s^2 is -D^T D beta / s^2
    g2[:-2] -= d2 / s**2
    g2[1:-1] += 2 * d2 / s**2
    g2[2:] -= d2 / s**2
    grads[2] = grads[2] + g2
    return lp, np.concatenate(grads)


@register
class Shared(Model):
    """Shared task difficulty across configs with a flexible distribution, integrated out."""

    name = "shared"
    joint = True
    coords = ()
    description = ("logit m_ij = alpha_j - s_j x_i, x_i ~ g (flexible, shared, integrated out); "
                   "BetaBinomial(n, m phi_j, (1-m) phi_j)")
    free = ("alpha", "log_phi", "log_slope", "beta")

    # -- fit -----------------------------------------------------------------------------------
    def mode(self, counts, *, data: _Data | None = None, start: np.ndarray | None = None, slopes: bool = True,
             alpha_prec: np.ndarray | None = None):
        """Posterior mode of (alpha, log phi, log g knots, slopes), the negative log posterior and the data.

        ``data``: the tasks on another grid (default: the grid that holds for any dispersion and for the
        slopes at the mode: where a slope above 1 needs a finer one, the mode is found again on it);
        ``start``: a starting point (default: from the pass rates); ``slopes=False``: every slope 1 (theta
        without them); ``alpha_prec``: the abilities' prior precision where siblings are pooled.
        """
        from scipy.optimize import minimize

        n, c = counts.n.values.astype(float), counts.c.values.astype(float)
        J = n.shape[0]
        n_eta = max(J - 1, 0) if slopes else 0
        d = _Data(n, c) if data is None else data

        def neg(theta):
            ll, g = log_marginal(theta, d)
            lp, gp = _log_prior(theta, J, alpha_prec)
            return -(ll + lp), -(g + gp)

        with np.errstate(all="ignore"):
            frac = np.clip((c.sum(1) + 0.5) / (n.sum(1) + 1.0), 0.02, 0.98)
        if start is None:
            start = np.concatenate([np.log(frac / (1 - frac)), np.full(J, _PRIOR["log_phi"][0]),
                                    -0.5 * (KNOTS / 3.0) ** 2])
        start, K = np.asarray(start, float), 2 * J + KNOTS.size
        start = np.concatenate([start[:K], start[K:] if start.size - K == n_eta else np.zeros(n_eta)])
        bounds = [(-15.0, 15.0)] * J + [(-4.0, 12.0)] * J + [(-30.0, 30.0)] * KNOTS.size + [(-2.0, 2.0)] * n_eta
        res = minimize(neg, start, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": 3000, "ftol": 1e-12, "gtol": 1e-6, "maxcor": MODE_MEMORY})
        if data is None and n_eta:
            fine = _Data(n, c, slope=np.exp(_split(res.x, J)[3]))
            if fine.x.size > 1.05 * d.x.size:
                return self.mode(counts, data=fine, start=res.x, alpha_prec=alpha_prec)
        return res, neg, np.array(bounds), d

    def modes(self, counts):
        """Return the modes with and without slopes, on one grid, and the weight of the slopes' model.

        Returns ``(with, without, weight, log_bayes_factor)``, each mode a tuple ``(res, neg, bounds, data,
        cov, eigenvalues)``.  The weight is the posterior probability of the model with slopes against every
        slope 1 (even prior odds), from the Laplace approximations of their evidence: configs whose counts
        do not tell their slopes apart keep one slope, as the model before them did (a slope fitted to noise
        would decide pass@k beyond the samples drawn), while configs that differ in slope (temperatures,
        models) get theirs.
        """
        J = counts.sizes["config"]
        without = self.mode(counts, slopes=False)
        if J < 2:
            return None, without + _laplace_cov(without[0].x, without[3], J, without[1]), 0.0, -np.inf
        with_ = self.mode(counts, start=np.concatenate([without[0].x, np.zeros(J - 1)]))
        offset = 0.0
        if with_[3].x.size != without[3].x.size:
            # the slopes needed a finer grid.  Grids differ in their sums by about a constant (the normalisation of
            # g enters every task alike): measured at the mode without slopes, it puts both evidences on the finer
            # grid, and the fit without slopes stays the one the model had before them
            x0 = without[0].x
            offset = log_marginal(x0, with_[3], grad=False)[0] - log_marginal(x0, without[3], grad=False)[0]
        out = []
        for m, k in ((with_, J - 1), (without, 0)):
            cov, vals = _laplace_cov(m[0].x, m[3], J, m[1])
            out.append((m + (cov, vals), _log_evidence(float(m[0].fun), vals, k)))
        log_bf = out[0][1] - out[1][1] - offset
        return out[0][0], out[1][0], float(expit(log_bf)), float(log_bf)

    def fit_eb(self, counts, *, draws: int, chains: int, seed: int) -> xr.Dataset:
        """Posterior mode and draws from its Laplace approximation (the posterior group).

        The draws mix the models with and without slopes by their weight (:meth:`modes`).
        """
        with_, without, weight, log_bf = self.modes(counts)
        J = counts.sizes["config"]
        rng = np.random.default_rng(seed)
        pick = rng.random((chains, draws)) < weight
        best = with_ if weight >= 0.5 else without
        groups = sibling_groups(counts)
        theta = np.zeros((chains, draws, 2 * J + KNOTS.size + max(J - 1, 0)))
        pool: dict = {}
        for m, sel in ((with_, pick), (without, ~pick)):
            if m is None or not sel.any():
                continue
            res, _, bounds, _, cov, _ = m
            th = self._laplace_draws(res.x, cov, J, groups, int(sel.sum()), rng, pool if m is best else {})
            theta[sel, :th.shape[1]] = np.clip(th, bounds[:, 0], bounds[:, 1])
        res, vals = best[0], best[5]
        # the centre the curves' posterior mean is taken at: with siblings, the mean of the mixture over sw
        centre = pool.pop("centre", res.x)
        mode = np.concatenate([centre, np.zeros(theta.shape[-1] - res.x.size)])
        return _posterior(theta, counts, {"optimizer": f"L-BFGS-B: {res.message}", "mode_iterations": int(res.nit),
                                          "laplace_mode": mode.astype(float),
                                          "laplace_min_eigenvalue": float(vals.min()), "sampler": "laplace",
                                          "slopes_weight": weight, "slopes_log_bayes_factor": log_bf, **pool})

    @staticmethod
    def _laplace_draws(mode, cov, J, groups, size, rng, pool: dict) -> np.ndarray:
        """Draws of the Laplace approximation; with siblings, of its mixture over sw (noted in ``pool``)."""
        if groups is None:
            return rng.multivariate_normal(mode, cov, size=size, method="cholesky")
        w, means, covs = _pooled(mode, cov, J, groups)
        which = rng.choice(w.size, size=size, p=w)
        out = np.empty((size, mode.size))
        for i in np.unique(which):
            sel = which == i
            out[sel] = rng.multivariate_normal(means[i], covs[i], size=int(sel.sum()), method="cholesky")
        pool.update(sibling_groups=groups.astype(np.int64), sibling_sd_median=_median_sw(w),
                    sibling_sd_mean=float(w @ POOL_GRID), centre=w @ np.array(means))
        return out

    def sibling_prior(self, counts):
        """Return the abilities' precision the PyMC model pools siblings with, and attrs (None, {}: no siblings).

        sw at the median of its posterior on EB's grid, from the mode of the model of higher evidence, as
        :meth:`fit_hmc` takes it.
        """
        if sibling_groups(counts) is None:
            return None, {}
        with_, without, weight, _ = self.modes(counts)
        best = with_ if weight >= 0.5 else without
        return _fixed_sibling_prior(counts, best[0].x, best[4])

    def fit_hmc(self, counts, *, draws: int, warmup: int, chains: int, seed: int, progress: str | None = None,
                gate=None, max_rounds: int = 1, target_accept: float = 0.8):
        """Sample the exact marginal posterior by Hamiltonian Monte Carlo, whitened by its curvature at the mode.

        The coordinates are ``z`` with ``theta = mode + L z`` and ``L L^T`` the inverse of the observed
        Hessian at the mode (central differences of the analytic gradient), so the sampler's diagonal
        mass matrix and step size face a posterior near the identity; the correlated shift of the
        abilities and the difficulty distribution, which NUTS with a diagonal mass matrix crosses in
        long trajectories, is one coordinate here.  The chains' gradients are computed in threads.
        Returns the posterior dataset, the sampler's statistics in its attributes.  ``progress``: a label
        for the sampler's progress bar (none without).  ``gate``: a function of a posterior dataset that returns
        whether it passes the convergence gate; where it does not, the same chains go on ``draws // 2`` iterations
        at a time (a gate missed by a little, which at 500 draws is chance, costs a quarter of the first run),
        up to ``max_rounds * draws``, thinned by the whole multiple of ``draws`` reached (750 are all kept, 1,000
        thinned to 500; the gate is asked of what is returned).  ``target_accept``: the step size's target
        acceptance (higher: smaller steps, fewer divergences, longer runs).
        """
        with_, without, weight, log_bf = self.modes(counts)  # the model of higher evidence is sampled
        slopes = weight >= 0.5
        res, neg, _, d, cov, _ = with_ if slopes else without
        J = counts.sizes["config"]
        # the dispersions bound what a count tells about a task's difficulty, so the grid can be coarser (m = 50
        # on 34 x 378: 160 nodes instead of 345); it holds for dispersions up to PHI_MARGIN times the mode's, or
        # 3 Laplace sd above it where the data leave them wider.  The mode and curvature are then taken on it
        sd = np.sqrt(np.diag(cov)[J:2 * J])
        phi_max = np.exp(res.x[J:2 * J] + np.maximum(np.log(PHI_MARGIN), 3 * sd))
        Z, e = _basis(J), slice(2 * J + KNOTS.size, None)  # the slopes' sd, 3 above the mode's a bound too
        sd_s = np.sqrt(np.clip(np.einsum("ja,ab,jb->j", Z, cov[e, e], Z), 0.0, None)) if slopes else np.zeros(J)
        slope_max = np.exp(_split(res.x, J)[3] + 3 * sd_s)
        coarse = _Data(counts.n.values.astype(float), counts.c.values.astype(float), phi=phi_max, slope=slope_max)
        prec, pool = _fixed_sibling_prior(counts, res.x, cov)
        if coarse.x.size < d.x.size or prec is not None:
            res, neg, _, d = self.mode(counts, data=coarse if coarse.x.size < d.x.size else d, start=res.x,
                                       slopes=slopes, alpha_prec=prec)
        mode = res.x
        P = mode.size
        L = _whitening(neg, mode)

        def one(z):
            theta = mode + L @ z
            with np.errstate(all="ignore"):  # far out on a divergent trajectory: non-finite, which hmc rejects
                ll, g = log_marginal(theta, d, workers=1)
                lp, gp = _log_prior(theta, J, prec)
                return ll + lp, L.T @ (g + gp)

        # threads pay where a gradient is large; below ~1e5 (config, task, node) cells they cost more than they
        # save (3 configs x 100 tasks: 46 s in two threads, 32 s in one)
        workers = 1 if d.n.size * d.x.size < 100_000 else None

        def logp_grad(z):  # (chains, 1, P)
            out = thread_map(one, list(z.reshape(-1, P)), workers)
            return (np.array([o[0] for o in out]).reshape(z.shape[:-1]),
                    np.stack([o[1] for o in out]).reshape(z.shape))

        def posterior(z, attrs):  # the draws of z thinned by the whole multiple of ``draws`` they reached
            every = z.shape[1] // draws
            z = z[:, every - 1::every, 0]
            theta = mode + z @ L.T
            theta = np.concatenate([theta, np.zeros(theta.shape[:2] + (2 * J + KNOTS.size + max(J - 1, 0) - P,))], -1)
            return _posterior(theta, counts, attrs)

        more = None if gate is None else (lambda z: not gate(posterior(z, {})))
        r = hmc.sample(logp_grad, np.zeros((1, P)), chains=chains, warmup=warmup, draws=draws, rng=seed,
                       steps_choices=STEPS, use_map=False, jitter=0.5, progress=progress, more=more,
                       max_rounds=2 * max_rounds - 1, more_draws=max(draws // 2, 1), target_accept=target_accept,
                       restart=RESTART)
        post = posterior(r.draws, {"optimizer": f"L-BFGS-B: {res.message}", "sampler": "bayespass-hmc",
                                          "step_size": float(r.step_size[0]), "leapfrog_steps": list(r.steps),
                                          "acceptance": float(r.acceptance[0]),
                                          "divergences": int(r.divergences[0]),
                                          "slopes_weight": weight, "slopes_log_bayes_factor": log_bf, **pool})
        if r.rounds > 1:
            post.attrs["rerun"] = _rerun_note(r, draws)
        return post

    def build_pymc(self, counts):
        """Build the PyMC model (the same marginal density, for NUTS)."""
        import pymc as pm
        import pytensor.tensor as pt

        J = counts.sizes["config"]
        # the grid holds for slopes up to 2 (log 2 = 1.4 prior sd of a config's log slope)
        d = _Data(counts.n.values.astype(float), counts.c.values.astype(float), slope=np.full(J, 2.0))
        prec = self.sibling_prior(counts)[0]
        with pm.Model(coords={"config": counts.config.values.tolist(), "knot": KNOTS.tolist()}) as model:
            if prec is None:
                alpha = pm.Normal("alpha_free", *_PRIOR["alpha"], dims="config")
            else:  # siblings pooled at the median of sw's posterior, as bayespass's HMC
                alpha = pm.MvNormal("alpha_free", mu=np.zeros(J), tau=prec, dims="config")
            log_phi = pm.MvNormal("log_phi", mu=np.full(J, _PRIOR["log_phi"][0]), tau=_phi_precision(J),
                                  dims="config")
            beta = pm.Normal("beta", *_PRIOR["beta"], dims="knot")
            pm.Potential("smooth", -0.5 * pt.sum((pt.diff(beta, 2) / _PRIOR["smooth"]) ** 2))
            phi = pm.Deterministic("phi", pt.exp(log_phi), dims="config")
            if J > 1:
                eta = pm.Normal("eta", *_PRIOR["eta"], shape=J - 1)
                log_s = pm.Deterministic("log_slope", pt.dot(_basis(J), eta), dims="config")
            else:
                log_s = pm.Deterministic("log_slope", pt.zeros(J), dims="config")
            slope = pm.Deterministic("slope", pt.exp(log_s), dims="config")
            alpha = pm.Deterministic("alpha", alpha - pt.mean(alpha), dims="config")  # centred, as _split
            mu = pm.math.sigmoid(pt.clip(alpha[:, None] - slope[:, None] * d.x[None, :], -LOGIT_MAX, LOGIT_MAX))
            a, b = (mu * phi[:, None])[:, None, :], ((1 - mu) * phi[:, None])[:, None, :]
            nn, cc = d.n[:, :, None], d.c[:, :, None]
            ll = pt.switch(nn > 0, bb_loglik(a, b, nn, cc, pt_backend()), 0.0)
            s = pt.dot(d.hat, beta)
            s = ll.sum(0) + (s - pm.math.logsumexp(s))[None, :]
            pm.Potential("marginal", pt.dot(d.w, pm.math.logsumexp(s, axis=1).ravel()))
        return model

    def gated_quantities(self, post: xr.Dataset) -> xr.Dataset:
        """Return what the data identify, for the convergence gate.

        That is the abilities relative to their mean, the dispersions, the difficulty
        distribution relative to the mean ability (its mean, spread and the mass of tasks 5 logits harder or
        easier than the average config finds them), and the slopes where they vary.  The likelihood depends on
        ``alpha_j - s_j x_i`` only.  The abilities a posterior records are centred (:func:`_split`), so they
        sum to 0 in these fits, but a posterior of abilities that are not (fits made before the centring, when
        a shift of every difficulty and of ``g`` by d, with every ability by ``s_j d``, was set by the priors
        alone and mixed slowly) is gated on the same identified quantities.  Every prediction is a function of
        them, so the gate checks them (as flex's gate skips its far spline coefficients).
        """
        alpha = post["alpha"]
        slope = post["slope"] if "slope" in post else xr.ones_like(alpha)
        centre = (alpha / slope).mean("config")  # moves by d with that shift
        grid = np.linspace(KNOTS[0], KNOTS[-1], 40 * (KNOTS.size - 1) + 1)  # 40 points per knot interval
        s = post["beta"].transpose("chain", "draw", "knot").values @ _hat(grid).T
        g = np.exp(s - logsumexp(s, axis=-1, keepdims=True))
        rel = grid - centre.values[..., None]  # difficulty relative to the mean ability, per draw
        mean = (g * rel).sum(-1)
        dims = ("chain", "draw")
        sd = np.sqrt((g * (rel - mean[..., None]) ** 2).sum(-1))
        # one config has no slope, and a fit of the model without slopes (the counts' evidence) holds them at 1
        log_s = np.log(slope)
        slopes = {"log_slope": log_s} if float(log_s.std(("chain", "draw")).max()) > 0 else {}
        return xr.Dataset({"alpha_rel": alpha - slope * centre, "log_phi": post["log_phi"], **slopes,
                           "g_mean_rel": (dims, mean), "g_sd": (dims, sd),
                           "g_mass_hard": (dims, (g * (rel > 5.0)).sum(-1)),
                           "g_mass_easy": (dims, (g * (rel < -5.0)).sum(-1))},
                          coords={"chain": post.chain, "draw": post.draw})

    # -- predictions ---------------------------------------------------------------------------
    @staticmethod
    def _params(post):
        alpha = post["alpha"].transpose("chain", "draw", "config").values
        phi = post["phi"].transpose("chain", "draw", "config").values
        beta = post["beta"].transpose("chain", "draw", "knot").values
        # fits made before the slopes have none: slope 1
        slope = post["slope"].transpose("chain", "draw", "config").values if "slope" in post else np.ones_like(alpha)
        return alpha, phi, beta, slope

    def _center(self, post):
        """Return the posterior mode (EB) or the centre of the draws on the unconstrained scale (MCMC).

        The mean of a thousand draws would carry Monte-Carlo noise in the abilities as large as the
        differences between close configs.
        """
        mode = post.attrs.get("laplace_mode")
        if mode is not None:
            mode, J = np.asarray(mode, float), post.sizes["config"]
            alpha, log_phi, beta, log_s = _split(mode, J)
            if float(np.abs(post["alpha"].mean("config")).max()) > 1e-6:
                # a fit saved before the abilities were centred (forty-ninth session): its draws and g place
                # the raw abilities, and so must the centre (centred, it moved the mean and the nodes off g)
                alpha = mode[:J]
            return alpha, np.exp(log_phi), beta, np.exp(log_s)
        alpha, phi, beta, slope = self._params(post)
        return (alpha.mean((0, 1)), np.exp(np.log(phi).mean((0, 1))), beta.mean((0, 1)),
                np.exp(np.log(slope).mean((0, 1))))

    def _nodes(self, centre, d: _Data, nodes: int):
        """Return ``nodes`` grid points per distinct task at quantiles of its difficulty posterior.

        Computed at the parameters ``centre`` (:meth:`_center`): each node carries 1/nodes of the posterior
        there; the log density at the nodes is returned too, to reweight them under other draws.
        """
        alpha, phi, beta, slope = centre
        with np.errstate(all="ignore"):
            ll, _, _, _ = _lik(alpha, phi, d, d.x, slope)
        s = ll.sum(0) + _log_g(beta, d.hat)[None, :]
        targets = (np.arange(nodes) + 0.5) / nodes
        idx = _node_index(s, np.broadcast_to(targets, (s.shape[0], nodes)))  # (U, Q)
        return d.x[idx], np.take_along_axis(s, idx, axis=1)

    @staticmethod
    def _move(draw, centre, xq):
        """Move the nodes ``xq``, placed at ``centre``'s parameters, to where ``draw``'s put the same tasks.

        A node x goes to the x' that keeps ``alpha_j - s_j x`` nearest (least squares over the configs) to its
        value at the centre.  The abilities are centred (:func:`_split`), so a draw moves the nodes only as
        far as its abilities and slopes differ from the centre's; fits made before the centring shared a location
        with the difficulties that the counts hardly fix, and under a draw far along that ridge, nodes left where
        they were would pile every task's weight on its extreme node.
        """
        (a1, s1), (a0, s0) = (draw[0], draw[3]), (centre[0], centre[3])
        ss = float(s1 @ s1)
        return float(s1 @ (a1 - a0)) / ss + float(s1 @ s0) / ss * xq

    def _task_weights(self, alpha, phi, beta, slope, d: _Data, xq, s0):
        """Normalised weights (U, Q) of the nodes under one draw of the parameters, and Beta parameters."""
        mu = _mean(alpha[:, None, None], slope[:, None, None], xq[None])  # (J, U, Q)
        a, b = mu * phi[:, None, None], (1 - mu) * phi[:, None, None]
        with np.errstate(all="ignore"):
            ll = np.where(d.n[:, :, None] > 0, bb_loglik(a, b, d.n[:, :, None], d.c[:, :, None]), 0.0)
        log_g = np.interp(xq, d.x, _log_g(beta, d.hat))
        s = ll.sum(0) + log_g - s0  # importance ratio against the nodes' own density
        return np.exp(s - logsumexp(s, axis=1, keepdims=True)), a, b

    def passk_draws(self, idata, k, *, max_draws=None, seed=0, nodes: int = 16) -> xr.Dataset:
        """Draws of the dataset pass@k: each task's difficulty from its posterior, then p_ij given it.

        A few parameter draws per chain (:func:`n_parameter_draws`: ``N_THETA`` on large counts, up to one per
        pass@k draw on small ones) each carry draws of the task-level unknowns, which dominate the uncertainty
        of pass@k when there are hundreds of tasks.
        """
        per_chain = min(int(max_draws or 250), 250)
        n = idata.constant_data["n"].transpose("config", "task").values.astype(float)
        n_theta = min(n_parameter_draws(n.size, per_chain), idata.posterior.sizes["draw"])
        post = idata.posterior.isel(draw=np.linspace(0, idata.posterior.sizes["draw"] - 1, n_theta).astype(int))
        reps = -(-per_chain // n_theta)
        c = idata.observed_data["c"].transpose("config", "task").values.astype(float)
        k = np.asarray(k)
        node_centre = self._center(post)
        d = _Data(n, c, slope=node_centre[3])
        xq, s0 = self._nodes(node_centre, d, nodes)
        alpha, phi, beta, slope = self._params(post)
        C, D = alpha.shape[:2]
        col = d.inverse
        obs = np.flatnonzero(d.observed)
        n_o, c_o = n[:, obs], c[:, obs]
        seen = n_o > 0
        wts = seen / np.maximum(seen.sum(1), 1)[:, None]  # (J, T): the dataset mean's weights
        wts_sum = wts.sum(1)[:, None]
        full = np.empty((C, D * reps, n.shape[0], k.size))
        t_idx = np.arange(col.size)
        # the posterior mean (Rao-Blackwellised) at the centre of the parameters (see _center)
        centre = self._center(idata.posterior)
        w, a, b = self._task_weights(*centre, d, self._move(centre, node_centre, xq), s0)
        w_t = w[col]
        cond = passk_bb_predictive(n_o[:, :, None, None], c_o[:, :, None, None], k, a[:, col][..., None],
                                   b[:, col][..., None])  # (J, T, Q, K) given each node
        m_rb = np.einsum("jt,jtqk,tq->jk", wts, np.where(seen[:, :, None, None], cond, 0.0), w_t, optimize=True)
        mean = np.ascontiguousarray(np.broadcast_to(m_rb[None, None], full.shape))

        def chain(ci):  # a generator per chain: the draws do not depend on the number of threads
            rng = np.random.default_rng([seed, ci])
            for di in range(D):
                th = (alpha[ci, di], phi[ci, di], beta[ci, di], slope[ci, di])
                w, a, b = self._task_weights(*th, d, self._move(th, node_centre, xq), s0)  # nodes along the ridge
                ap, bp, w_t = a[:, col] + c_o[:, :, None], b[:, col] + (n_o - c_o)[:, :, None], w[col]
                cdf = np.cumsum(w_t, axis=-1)
                for r in range(reps):
                    q = np.minimum((cdf < rng.random(col.size)[:, None]).sum(1), nodes - 1)  # a node per task
                    e = power_rows(1.0 - np.minimum(rng.beta(ap[:, t_idx, q], bp[:, t_idx, q]), 1 - 1e-15), k)
                    full[ci, di * reps + r] = wts_sum - np.einsum("kjt,jt->jk", e, wts)  # (1 - p)^k averaged

        thread_map(chain, range(C))
        dims = ("chain", "draw", "config", "k")
        coords = {"chain": post.chain.values, "draw": np.arange(D * reps),
                  "config": idata.observed_data.config.values, "k": k}
        return xr.Dataset({"passk": (dims, full), "passk_mean": (dims, mean)}, coords=coords)

    def replicate_p(self, post, rng, n_tasks: int | None = None):
        """Draw p per (chain, draw, config, task) for new tasks: a difficulty drawn from g per task."""
        alpha, phi, beta, slope = self._params(post)
        grid = np.linspace(KNOTS[0], KNOTS[-1], 801)
        hat = _hat(grid)
        s = beta @ hat.T  # (C, D, G)
        x = grid[_node_index(s, rng.random(alpha.shape[:2] + (n_tasks,)))][:, :, None, :]
        mu = _mean(alpha[..., None], slope[..., None], x)
        return rng.beta(mu * phi[..., None], (1 - mu) * phi[..., None])

    def task_candidates(self, post, n, c, j: int, rng, n_draws: int = 20, pool: int = 500) -> np.ndarray:
        """Candidate p's of config ``j`` per task (task, pool), drawn given the *other* configs' counts.

        Per parameter draw (``n_draws`` of the posterior), each task's difficulty is drawn from its posterior
        given the other configs' counts, and config j's p from its Beta there.  Weighed by the binomial
        likelihood of config j's own counts they are a sample of p_ij's posterior given every count
        (importance sampling, exact as the pool grows), which :func:`bayespass.allocate` needs.  Tasks no
        config has seen get p's of new tasks (:meth:`replicate_p`).
        """
        alpha, phi, beta, slope = (x.reshape((-1,) + x.shape[2:]) for x in self._params(post))
        pick = rng.choice(alpha.shape[0], size=min(n_draws, alpha.shape[0]), replace=False)
        d = _Data(n.astype(float), c.astype(float), slope=np.exp(np.log(slope).mean(0)))
        per = -(-pool // pick.size)
        cand = np.empty((d.w.size, pick.size * per))
        for i, t in enumerate(pick):
            with np.errstate(all="ignore"):
                ll, _, a, b = _lik(alpha[t], phi[t], d, d.x, slope[t])  # (J, U, G)
            s = ll.sum(0) - ll[j] + _log_g(beta[t], d.hat)[None, :]
            node = _node_index(s, rng.random((d.w.size, per)))
            cand[:, i * per:(i + 1) * per] = rng.beta(a[j, 0, node], b[j, 0, node])
        out = np.empty((n.shape[1], cand.shape[1]))
        out[d.observed] = cand[d.inverse]
        if not d.observed.all():
            new = self.replicate_p(post.isel(chain=[0]), rng, int((~d.observed).sum()) * cand.shape[1])
            out[~d.observed] = new[0, rng.integers(new.shape[1]), j].reshape(-1, cand.shape[1])
        return np.clip(out, 0.0, 1.0)

    def posterior_p(self, post, n, c, rng) -> np.ndarray:
        """One draw of every (config, task)'s p from the posterior, for :func:`bayespass.plan`'s simulated futures.

        A parameter draw, each task's difficulty from its posterior given every config's counts, then each
        config's p given the difficulty and its own counts (a Beta).
        """
        alpha, phi, beta, slope = (x.reshape((-1,) + x.shape[2:]) for x in self._params(post))
        t = rng.integers(alpha.shape[0])
        n, c = n.astype(float), c.astype(float)
        d = _Data(n, c, slope=slope[t])
        with np.errstate(all="ignore"):
            ll, _, a, b = _lik(alpha[t], phi[t], d, d.x, slope[t])  # (J, U, G)
        log_g = _log_g(beta[t], d.hat)
        s = np.tile(log_g, (n.shape[1], 1))
        s[d.observed] += ll.sum(0)[d.inverse]
        node = _node_index(s, rng.random((n.shape[1], 1)))[:, 0]  # a difficulty per task
        return rng.beta(a[:, 0, node] + c, b[:, 0, node] + (n - c))  # b + (n - c): a tiny b survives

    def loglik_tasks(self, post, n, c):
        """Log-likelihood per (chain, draw, config, task), the difficulty integrated out under g.

        That is the predictive of one config's count on a new task.  A config's term depends on its task
        only through (n, c), so it is computed per distinct pair, in blocks of draws (threads).
        """
        alpha, phi, beta, slope = self._params(post)
        C, D, J = alpha.shape
        grid = np.linspace(KNOTS[0], KNOTS[-1], 81)
        s = beta.reshape(C * D, -1) @ _hat(grid).T
        log_g = s - logsumexp(s, axis=-1, keepdims=True)  # (C D, G)
        alpha, phi, slope = alpha.reshape(C * D, J), phi.reshape(C * D, J), slope.reshape(C * D, J)
        out = np.zeros((C * D,) + n.shape)
        uniq = [np.unique(np.stack([n[j], c[j]]), axis=1, return_inverse=True) for j in range(J)]

        def block(item):
            j, sl = item
            (pn, pc), inv = uniq[j]
            mu = _mean(alpha[sl, j, None], slope[sl, j, None], grid)  # (draws, G)
            ph = phi[sl, j, None]
            with np.errstate(all="ignore"):  # a + b = phi at every node: its terms are added after the sum
                ll, const = bb_loglik_pair_rows(mu * ph, (1 - mu) * ph, pn, pc, ab=ph, split=True)  # (pair, draws, G)
            ll += log_g[sl]
            out[sl, j, :] = (_logsumexp_last(ll, overwrite=True) + const[..., 0]).T[:, inv.ravel()]

        step = 250
        thread_map(block, [(j, slice(i, i + step)) for j in range(J) for i in range(0, C * D, step)])
        return np.where(n > 0, out.reshape((C, D) + n.shape), 0.0)


def _node_index(log_w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Grid nodes (..., Q) at probabilities ``u`` (..., Q) of the distributions with log weights ``log_w`` (..., G).

    The inverse of each row's cumulative distribution: uniform ``u`` draws a node, fixed quantiles place them.
    """
    cdf = np.cumsum(np.exp(log_w - logsumexp(log_w, axis=-1, keepdims=True)), axis=-1)
    return np.minimum((cdf[..., None, :] < u[..., None]).sum(-1), log_w.shape[-1] - 1)


def _rerun_note(r, draws: int) -> str:
    """Say how the chains of ``hmc.sample``'s result ``r`` went on after missing the gate at ``draws``."""
    if r.restarted is not None:
        return (f"gate missed at {r.restarted[0]} draws, with a direction the diagonal metric missed (variance "
                f"{r.restarted[1]:.1f} in it): the chains restarted in a dense metric with {r.steps[0]}-{r.steps[1]} "
                f"leapfrog steps, to {r.draws.shape[1]}")
    every = r.draws.shape[1] // draws  # as fit_hmc's posterior() thinned them
    return (f"gate missed at {draws} draws: the chains went on to {r.draws.shape[1]}"
            + (f", thinned by {every}" if every > 1 else ", all kept"))


def _logsumexp_last(x: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """``logsumexp(x, axis=-1)`` without scipy's checks (hot paths), scipy's where a maximum is not finite.

    ``overwrite=True`` uses ``x`` as the scratch array.
    """
    mx = x.max(-1, keepdims=True)
    if not np.all(np.isfinite(mx)):
        return logsumexp(x, axis=-1)
    y = np.subtract(x, mx, out=x if overwrite else None)
    np.exp(y, out=y)
    return np.log(y.sum(-1)) + mx[..., 0]
