"""Assumption-free bounds on dataset pass@k: what the counts alone allow, whatever the shape of p.

A band of the fitted models rests on a prior's shape for p over the tasks, and beyond the samples drawn
that shape, not the data, decides it (benchmarks/RESULTS.md, "How wide the data alone leave pass@k").
:func:`passk_bounds` makes no such assumption.  For ``m`` samples per task the expected histogram of the
counts is ``sum_i Binom(c | m, p_i) / T``, linear in the tasks' own distribution ``G`` of p; every ``G``
whose histogram lies in a simultaneous confidence box around the observed one is consistent with the data,
and the bounds are the smallest and largest ``mean_G 1 - (1 - p)^k`` over those (two linear programs over
a grid of p dense in logit p, with atoms at 0 and 1).  They hold the tasks' own pass@k whenever the box
holds the expected histogram: at least ``ci_prob`` of the time, for any spread of p.  Tasks with
different numbers of samples are grouped by n (:func:`sample_groups`), each group with its own ``G``.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ..defaults import rcParams
from ..validate import as_k, check_prob

__all__ = ["passk_bounds", "sample_groups"]

#: p on a grid dense in logit p (about 1e-6 .. 1 - 1e-6, 0.023 apart), a sparser tail down to about 1e-15
#: (0.1 apart: where only k in the millions and beyond tells p from 0; without it the grid's first gap, 0 to
#: 1e-6, made the bounds [0, 1] from k ~ 1e7 on), and exactly 0 and 1
_LOGIT_GRID = np.linspace(-14.0, 14.0, 1200)
_LOGIT_TAIL = np.arange(-35.0, -14.0, 0.1)


def _grid() -> np.ndarray:
    from scipy.special import expit

    return np.concatenate([[0.0], expit(_LOGIT_TAIL), expit(_LOGIT_GRID), [1.0]])


def _clopper_pearson(x: np.ndarray, trials: float, a: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided ``1 - a`` Clopper-Pearson bounds on a rate from ``x`` (possibly fractional) of ``trials``."""
    from scipy.stats import beta

    tiny = 1e-12
    lo = np.where(x > 0, beta.ppf(a / 2, np.maximum(x, tiny), trials - x + 1), 0.0)
    hi = np.where(x < trials, beta.ppf(1 - a / 2, x + 1, np.maximum(trials - x, tiny)), 1.0)
    return lo, hi


def thinned_histogram(n: np.ndarray, c: np.ndarray, m: int) -> np.ndarray:
    """(m + 1,): sum over tasks of ``P(c' | n_i, c_i)`` for m of each task's n_i samples drawn without replacement.

    Each task's term has expectation ``Binom(c' | m, p_i)`` whatever p_i, so tasks with more than m samples
    enter as if m had been drawn, and with less spread.
    """
    from scipy.stats import hypergeom

    cc = np.arange(m + 1)
    return hypergeom.pmf(cc[None, :], n[:, None], c[:, None], m).sum(0)


#: the bounds use at most this many samples per task (more are thinned to it): each extra cell of the
#: histogram loosens the Bonferroni box, and 50 samples leave nothing beyond k = 100 to extrapolate far
MAX_M = 50


def _unbiased_miss(n: np.ndarray, c: np.ndarray, js: np.ndarray) -> np.ndarray:
    """(J, T): C(n - c, j) / C(n, j), the unbiased estimate of (1 - p)^j from c of n (j <= n)."""
    from .kernels import passk_unbiased_grid

    return 1.0 - passk_unbiased_grid(n, c, js).T


#: at most this many groups of tasks by samples drawn (each group is thinned to its own smallest n), and a
#: group is split off only where it raises the share of the tasks' samples the bounds use by this much
MAX_GROUPS = 4
GROUP_GAIN = 0.3


def sample_groups(n: np.ndarray) -> np.ndarray:
    """(T,) the samples per task the bounds use: each task's n (at most :data:`MAX_M`) rounded down to a level.

    The levels depend on the n alone (never on the counts): the smallest n, then, greedily, the level that
    most raises the mean over tasks of (samples used) / (samples drawn), while it raises it by at least
    :data:`GROUP_GAIN`, up to :data:`MAX_GROUPS` levels.  One sample on 5% of the tasks and 10 on the rest
    gives two groups, 1 and 10; n between 8 and 10 gives one, 8 (thinning loses little, and another group
    would split the confidence box).
    """
    cap = np.minimum(n, MAX_M).astype(int)
    values, counts = np.unique(cap, return_counts=True)
    levels = [int(values[0])]

    def used(lv):
        at = np.array(sorted(lv))
        return float((at[np.searchsorted(at, values, side="right") - 1] / values * counts).sum() / counts.sum())

    while len(levels) < MAX_GROUPS:
        now = used(levels)
        gains = [(used(levels + [int(v)]) - now, int(v)) for v in values if int(v) not in levels]
        if not gains or max(gains)[0] < GROUP_GAIN:
            break
        levels.append(max(gains)[1])
    at = np.array(sorted(levels))
    return at[np.searchsorted(at, cap, side="right") - 1]


def _bounds_one(n: np.ndarray, c: np.ndarray, level: np.ndarray, ks: np.ndarray, alpha: float) -> np.ndarray:
    """(K, 2) bounds for one config's observed tasks (n >= 1), grouped by ``level`` (:func:`sample_groups`).

    Every group has its own distribution of p, so the linear programs separate and the dataset's bounds are
    the task-weighted sums of the groups' bounds.  The confidence box is one simultaneous box over every
    group's cells (Bonferroni over all of them).
    """
    ms = np.unique(level)
    cells, moments = int((ms + 1).sum()), int(ms.sum())
    out = np.zeros((ks.size, 2))
    for m in ms:
        g = level == m
        out += g.mean() * _bounds_group(n[g], c[g], int(m), ks, alpha / 2 / cells, alpha / 2 / moments)
    return out


def _bounds_group(n: np.ndarray, c: np.ndarray, m: int, ks: np.ndarray, a_cell: float, a_moment: float
                  ) -> np.ndarray:
    """(K, 2) bounds on the mean pass@k of tasks with at least m samples each, thinned to m."""
    from scipy.stats import binom

    t = n.size
    grid = _grid()
    # box 1 (level 1 - a_cell per cell; Bonferroni): the histogram of m samples per task.  The mass of a
    # cell is a sum of independent [0, 1] terms, less spread than the binomial of their mean
    lo, hi = _clopper_pearson(thinned_histogram(n, c, m), t, a_cell)
    mix = binom.pmf(np.arange(m + 1)[:, None], m, grid[None, :])
    # box 2 (1 - a_moment per j = 1..m): the tasks' 1 - pass@j from the per-task unbiased estimates
    # C(n - c, j) / C(n, j): it pins what the data identify (k <= m) more tightly than box 1.  Each is a
    # U-statistic of order j, an average over the task's j-subsets of "all j fail"; m samples hold m // j
    # disjoint ones, independent Bernoulli trials of (1 - p)^j, and the U-statistic is less spread than
    # their mean (Hoeffding 1963, section 5), so the box is Clopper-Pearson over T * (m // j) trials
    js = np.arange(1, m + 1)
    blocks = m // js
    x = _unbiased_miss(n, c, js).sum(1) * blocks
    mlo, mhi = _clopper_pearson(x, t * blocks, a_moment)
    mom = (1.0 - grid[None, :]) ** js[:, None]
    # a task's p between two grid points is a mix of the two only up to the chord's gap: the rows get that
    # slack (so the tasks' own distribution stays feasible) and the bounds that margin
    mid = (grid[1:] + grid[:-1]) / 2
    slack = np.concatenate([_chord_gap(binom.pmf(np.arange(m + 1)[:, None], m, mid[None, :]), mix),
                            _chord_gap((1.0 - mid[None, :]) ** js[:, None], mom)])
    a_ub = np.vstack([mix, -mix, mom, -mom])
    b_ub = np.concatenate([hi + slack[:m + 1], -lo + slack[:m + 1], mhi + slack[m + 1:], -mlo + slack[m + 1:]])
    out = np.full((ks.size, 2), np.nan)
    lp = _ColumnLP(a_ub, b_ub)
    for i, k in enumerate(ks):
        f = 1.0 - (1.0 - grid) ** float(k)
        gap = _chord_gap((1.0 - (1.0 - mid) ** float(k))[None, :], f[None, :])[0]
        ends = [lp.solve(s * f) for s in (1.0, -1.0)]
        if all(e is not None for e in ends):
            out[i] = np.clip([ends[0] - gap, -ends[1] + gap], 0.0, 1.0)
    return _monotone(out, ks, m, mlo, mhi)


class _ColumnLP:
    """``min obj @ w`` over ``a_ub @ w <= b_ub``, ``sum w = 1``, ``w >= 0`` for many objectives, by column generation.

    The constraints are the same for every k, only the objective changes, and a basic optimal ``w`` has no
    more positive weights than there are constraints.  So each objective is solved on a few columns (a sparse
    subset of the grid and every column positive in an earlier solution, which is feasible for all), and
    columns whose reduced cost under that solution's duals is negative are added until none is: the optimum
    over all columns (what one linear program over the whole grid gives; the tests compare the two), 5-11x
    faster (``benchmarks/bench_bounds.py``).  Where the sparse subset alone has no solution (the box too
    tight for its spacing), the first objective is solved on the whole grid.
    """

    #: reduced costs above ``-TOL`` count as non-negative (HiGHS's dual feasibility tolerance is 1e-7)
    TOL = 1e-9
    #: the sparse subset: every ``STRIDE``-th column
    STRIDE = 16
    ROUNDS = 50

    def __init__(self, a_ub: np.ndarray, b_ub: np.ndarray):
        self.a_ub, self.b_ub = a_ub, b_ub
        self.cols = None  # the columns each objective starts from (bool), set at the first

    def _lp(self, obj, cols):
        from scipy.optimize import linprog

        # without HiGHS's presolve: on these small dense programs it costs more than it saves (1.5x)
        return linprog(obj[cols], A_ub=self.a_ub[:, cols], b_ub=self.b_ub, A_eq=np.ones((1, int(cols.sum()))),
                       b_eq=[1.0], bounds=(0, None), method="highs", options={"presolve": False})

    def solve(self, obj: np.ndarray) -> float | None:
        """Return the minimum of ``obj @ w``, or None where the constraints have no solution."""
        size = obj.size
        if self.cols is None:
            self.cols = np.zeros(size, bool)
            self.cols[::self.STRIDE] = self.cols[-1] = True
        cols = self.cols.copy()
        for _ in range(self.ROUNDS):
            res = self._lp(obj, cols)
            if res.status != 0:  # (only at the first objective: a solution's support is kept for the next)
                break
            reduced = obj - res.ineqlin.marginals @ self.a_ub - res.eqlin.marginals[0]
            enter = ~cols & (reduced < -self.TOL)
            if not enter.any():
                self.cols[np.flatnonzero(cols)[res.x > 0]] = True  # the next k starts from this support too
                return float(res.fun)
            cols |= enter
        # the subset has no solution, or the columns did not settle (rounding): the whole grid, as before
        res = self._lp(obj, np.ones(size, bool))
        if res.status != 0:
            return None
        self.cols[res.x > 0] = True
        return float(res.fun)


def _monotone(out: np.ndarray, ks: np.ndarray, m: int, mlo: np.ndarray, mhi: np.ndarray) -> np.ndarray:
    """Bounds that keep what the box itself says of pass@j, j <= m (the same whichever k are asked for).

    Within the box, ``pass@j >= 1 - mhi_j`` (and ``<= 1 - mlo_j``), and pass@k never falls with k: the lower
    bound at k is raised to the largest of these for j <= k, the upper bound at k <= m lowered to its own.  The
    linear programs' grid margin, large only at k in the millions, no longer takes the bounds below them.
    """
    floor = 1.0 - np.minimum.accumulate(mhi)  # (m,): pass@j >= floor[j - 1] for every j' <= j, so for k >= j
    j = np.minimum(ks, m) - 1
    lo = np.maximum(out[:, 0], floor[j])
    hi = np.where(ks <= m, np.minimum(out[:, 1], 1.0 - mlo[j]), out[:, 1])
    return np.where(np.isnan(out), np.nan, np.stack([lo, hi], axis=1))


def _chord_gap(at_mid: np.ndarray, at_grid: np.ndarray) -> np.ndarray:
    """(R,): twice the largest gap between each row at the grid's midpoints and its chord (plus rounding)."""
    return 2.0 * np.abs(at_mid - (at_grid[:, 1:] + at_grid[:, :-1]) / 2).max(1) + 1e-12


def passk_bounds(counts: xr.Dataset, k=(1, 10, 100), *, ci_prob: float | None = None) -> xr.DataArray:
    """Bounds on each config's dataset pass@k that hold whatever the distribution of p over its tasks.

    No prior and no family: the interval holds every pass@k that some distribution of p over the tasks
    makes consistent with the counts (a simultaneous ``ci_prob`` confidence box on their histogram and on
    the dataset's pass@j for j up to the samples drawn; see the module docstring).  It is conservative
    (within the samples drawn about 2-6x the width of the default's band, a Bonferroni box) and, beyond
    them, as wide as what no count can tell apart (a task with p = 0.001 and one with p = 0): on real MBPP
    from 5 samples per task pass@50 spans about 0.28, where the default's band spans 0.07.  Set the two
    side by side to see how much of a band beyond the data is the prior's (benchmarks/RESULTS.md).

    Ragged n: the tasks are split into a few groups by n alone (:func:`sample_groups`), each with its
    own distribution of p, and thinned to its group's smallest n (at most :data:`MAX_M`) by
    :func:`thinned_histogram`.  A config with one sample on 5% of its tasks and 10 on the rest gets
    bounds whose width beyond k = 1 comes from the 5% (at most 0.05) and from what 10 samples leave open
    on the 95%, not the bounds of one sample per task.  Tasks with n = 0 are left out.

    Parameters
    ----------
    counts : xarray.Dataset, az.InferenceData or xarray.DataTree
        Counts (``n``, ``c`` over config x task), a fit (its counts) or a run (``bp.load_run``: its counts).
    k : int or sequence of int
        Any positive k.
    ci_prob : float, optional
        Coverage of the bounds (default ``rcParams["stats.ci_prob"]``).

    Returns
    -------
    xarray.DataArray
        ``(config, k, ci_bound)`` with ``ci_bound = ["lower", "upper"]``; ``attrs`` ``ci_prob``, ``m``
        (per config, the fewest samples per task the bounds use) and ``m_levels`` (per config, the groups'
        samples per task).
    """
    from .compare import _counts_of

    counts = _counts_of(counts)
    ks = as_k(k)
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    n_all, c_all = counts["n"].values, counts["c"].values
    out = np.full((n_all.shape[0], ks.size, 2), np.nan)
    levels = []
    for j in range(n_all.shape[0]):
        seen = n_all[j] > 0
        if not seen.any():
            levels.append([0])
            continue
        level = sample_groups(n_all[j][seen])
        out[j] = _bounds_one(n_all[j][seen], c_all[j][seen], level, ks, 1.0 - prob)
        levels.append([int(v) for v in np.unique(level)])
        if np.isnan(out[j]).any():
            warnings.warn(f"passk_bounds: config {str(counts.config.values[j])!r} has NaN bounds: no distribution "
                          f"of p over its tasks gives binomial counts like these at ci_prob={prob} (more tasks "
                          f"share one number of successes than independent samples allow: underdispersed or "
                          f"made-up counts, or samples that are not independent draws)", UserWarning, stacklevel=2)
    return xr.DataArray(out, dims=("config", "k", "ci_bound"),
                        coords={"config": counts.config.values, "k": ks, "ci_bound": ["lower", "upper"]},
                        name="passk_bounds",
                        attrs={"ci_prob": prob, "m": [lv[0] for lv in levels], "m_levels": levels})
