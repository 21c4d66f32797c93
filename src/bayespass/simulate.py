"""Seeded random generators and simulators with known truth (used by the synthetic coder, benchmarks and tests)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import stats
from scipy.special import betaln, logsumexp

from .data.counts import make_counts
from .validate import as_k, check_positive_int, check_prob, check_seed

__all__ = ["rng", "stable_seed", "draw_zoib", "simulate_counts", "true_passk", "oracle_passk"]


def rng(seed: int | np.random.Generator | None = 0) -> np.random.Generator:
    """Return a NumPy Generator, passing a Generator through unchanged.

    A negative, fractional or boolean seed is refused by name: numpy's own message does not say which argument
    it was.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and not isinstance(seed, np.random.SeedSequence | list | tuple | np.ndarray):
        check_seed(seed)
    return np.random.default_rng(seed)


def stable_seed(*parts, bits: int = 32) -> int:
    """Return a ``bits``-bit integer fixed by ``parts`` (their ``str`` joined by ':'), the same in every process.

    A seed per (run, config, task, ...) for draws that must not depend on which others were made with them;
    Python's ``hash`` of a string changes between processes. ``bits`` is a multiple of 8, at most 256.
    """
    import hashlib

    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "little")


def draw_zoib(size, a: float, b: float, pi0: float = 0.0, pi1: float = 0.0, *, seed=0) -> np.ndarray:
    """Draw per-task success probabilities from ``pi0 d0 + pi1 d1 + (1-pi0-pi1) Beta(a, b)``."""
    g = rng(seed)
    u = g.random(size)
    p = g.beta(a, b, size)
    return np.where(u < pi0, 0.0, np.where(u < pi0 + pi1, 1.0, p))


def simulate_counts(p: np.ndarray, n, *, seed=0, **kwargs) -> xr.Dataset:
    """Draw ``c ~ Binomial(n, p)`` for per-task probabilities ``p`` (config, task) or (task,).

    The truth is stored in the returned dataset as the variable ``p_true``.
    """
    g = rng(seed)
    p = np.atleast_2d(np.asarray(p, dtype=float))
    n = np.broadcast_to(np.asarray(n), p.shape)
    ds = make_counts(n, g.binomial(n, p), source="simulation", **kwargs)
    return ds.assign(p_true=(("config", "task"), p))


def true_passk(p: np.ndarray, k) -> np.ndarray:
    """Exact dataset pass@k ``mean_i [1 - (1 - p_i)^k]`` for p of shape (..., task)."""
    p = np.asarray(p, dtype=float)[..., None]
    k = np.atleast_1d(np.asarray(k))
    with np.errstate(divide="ignore"):
        return np.mean(-np.expm1(k * np.log1p(-np.minimum(p, 1.0))), axis=-2)


def _check_prior(prior) -> list[tuple]:
    """Validate a known prior: components ("atom", w, p0), ("beta", w, a, b), ("grid", w, points, weights)."""
    allowed = "('atom', weight, p0), ('beta', weight, a, b) or ('grid', weight, points, point_weights)"
    if not isinstance(prior, (list, tuple)) or not prior:
        raise ValueError(f"prior must be a non-empty list of components {allowed}; got {prior!r}")
    comps, total = [], 0.0
    for comp in prior:
        kind = comp[0] if isinstance(comp, (list, tuple)) and comp else None
        size = {"atom": 3, "beta": 4, "grid": 4}.get(kind)
        if size is None or len(comp) != size:
            raise ValueError(f"prior component {comp!r} is not one of {allowed}")
        w = float(comp[1])
        if not w >= 0:
            raise ValueError(f"prior component {comp!r} has weight {w}; weights must be >= 0")
        if kind == "atom" and not 0.0 <= float(comp[2]) <= 1.0:
            raise ValueError(f"prior component {comp!r}: the atom p0={comp[2]} must be in [0, 1]")
        if kind == "beta" and not (float(comp[2]) > 0 and float(comp[3]) > 0):
            raise ValueError(f"prior component {comp!r}: Beta(a, b) needs a > 0 and b > 0")
        if kind == "grid":
            pts, pw = np.asarray(comp[2], float).ravel(), np.asarray(comp[3], float).ravel()
            if pts.size == 0 or pts.shape != pw.shape or (pts < 0).any() or (pts > 1).any() or (pw < 0).any() \
                    or pw.sum() <= 0:
                raise ValueError(f"prior component 'grid' needs points in [0, 1] and as many non-negative "
                                 f"point_weights with a positive sum; got {pts.size} points, {pw.size} weights")
            comp = ("grid", w, pts, pw / pw.sum())
        comps.append(tuple(comp))
        total += w
    if not np.isclose(total, 1.0, atol=1e-9):
        raise ValueError(f"prior weights must sum to 1; they sum to {total}")
    return comps


def oracle_passk(prior, n, c, k, *, ci_prob: float = 0.9, draws: int = 4000, seed=0):
    """Exact Bayes posterior of dataset pass@k when each task's p is drawn from a *known* prior.

    The reference a simulation study needs: with the prior known, the tasks are independent given it, and
    the posterior of ``mean_i [1 - (1 - p_i)^k]`` given the counts is exact. Averaged over data sets drawn
    from ``prior``, its ``ci_prob`` interval covers the data set's own pass@k with probability ``ci_prob``;
    on a fixed set of replicates, its coverage is what a perfect method would show there (the replicates'
    noise floor).

    ``prior``: mixture components ``("atom", w, p0)``, ``("beta", w, a, b)`` and ``("grid", w, points,
    point_weights)`` (a discretised density), weights summing to 1. ``n``, ``c``: per-task counts of one data
    set. Returns ``(mean, lower, upper)``, each of shape ``(len(k),)``: the exact posterior mean and the
    equal-tailed interval from ``draws`` posterior draws of every task's p (memory: about 50 bytes x draws x
    tasks, 2 GiB at 2,000 draws of 20,000 tasks).
    """
    comps = _check_prior(prior)
    n, c, kk = _check_oracle_args(n, c, k, ci_prob, draws)
    pairs, inv = np.unique(np.stack([n, c], 1).astype(int), axis=0, return_inverse=True)
    inv = inv.ravel()
    pcomp, one_minus, grid_post = _component_posteriors(comps, pairs, kk)
    mean = 1.0 - np.einsum("pj,pjk->pk", pcomp, one_minus)[inv].mean(0)
    p = _draw_p(comps, pcomp, grid_post, n, c, inv, draws, rng(seed))
    step = max(1, 4_000_000 // (n.size * kk.size))  # (draws, tasks, K) in blocks of about 4M cells
    passk = np.concatenate([true_passk(p[i:i + step], kk) for i in range(0, p.shape[0], step)])  # (draws, K)
    lower, upper = np.quantile(passk, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
    return mean, lower, upper


def _check_oracle_args(n, c, k, ci_prob, draws):
    """Check the arguments of :func:`oracle_passk`; return n, c and k (as floats)."""
    n, c = np.asarray(n).ravel(), np.asarray(c).ravel()
    if n.shape != c.shape or n.size == 0 or (n < 0).any() or (c < 0).any() or (c > n).any() \
            or not (np.equal(np.mod(n, 1), 0).all() and np.equal(np.mod(c, 1), 0).all()):
        raise ValueError(f"n and c must be equal-length, non-empty integer arrays with 0 <= c <= n; "
                         f"got n of shape {n.shape}, c of shape {c.shape}")
    check_prob(ci_prob, name="ci_prob")
    check_positive_int(draws, name="draws")
    return n, c, as_k(k).astype(float)


def _component_posteriors(comps, pairs, kk):
    """Per distinct (n, c) pair: P(component | pair), E[(1 - p)^k | pair, component] and each grid's weights."""
    pn, pc = pairs[:, 0], pairs[:, 1]
    logml = np.empty((len(pairs), len(comps)))
    one_minus = np.empty((len(pairs), len(comps), kk.size))
    grid_post = {}
    with np.errstate(divide="ignore"):
        for j, comp in enumerate(comps):
            kind, w = comp[0], comp[1]
            if kind == "atom":
                p0 = float(comp[2])
                logml[:, j] = stats.binom.logpmf(pc, pn, p0)
                one_minus[:, j] = (1.0 - p0) ** kk
            elif kind == "beta":
                a, b = float(comp[2]), float(comp[3])
                logml[:, j] = stats.betabinom.logpmf(pc, pn, a, b)
                one_minus[:, j] = np.exp(betaln(a + pc[:, None], b + (pn - pc)[:, None] + kk)
                                         - betaln(a + pc, b + pn - pc)[:, None])
            else:
                pts, pw = comp[2], comp[3]
                ll = np.log(pw) + stats.binom.logpmf(pc[:, None], pn[:, None], pts)
                logml[:, j] = logsumexp(ll, axis=1)
                grid_post[j] = np.exp(ll - logml[:, j, None])
                one_minus[:, j] = grid_post[j] @ (1.0 - pts[:, None]) ** kk
            logml[:, j] += np.log(w) if w > 0 else -np.inf
    norm = logsumexp(logml, axis=1, keepdims=True)
    if not np.isfinite(norm).all():
        bad = pairs[~np.isfinite(norm[:, 0])][0]
        raise ValueError(f"the counts (n={bad[0]}, c={bad[1]}) are impossible under the prior")
    return np.exp(logml - norm), one_minus, grid_post


def _draw_p(comps, pcomp, grid_post, n, c, inv, draws, g):
    """(draws, tasks) posterior draws of every task's p: a component, then p within it."""
    which = (g.random((draws, n.size))[..., None] > np.cumsum(pcomp[inv], 1)[None, :, :-1]).sum(-1)
    p = np.zeros((draws, n.size))
    for j, comp in enumerate(comps):
        sel = which == j
        if not sel.any():
            continue
        if comp[0] == "atom":
            p[sel] = float(comp[2])
        elif comp[0] == "beta":
            tasks = np.nonzero(sel)[1]
            p[sel] = g.beta(float(comp[2]) + c[tasks], float(comp[3]) + (n - c)[tasks])
        else:
            cdf = np.cumsum(grid_post[j], 1)
            cdf /= cdf[:, -1:]
            q = inv[np.nonzero(sel)[1]]
            idx = np.empty(q.size, int)
            for pair in np.unique(q):
                at = q == pair
                idx[at] = np.searchsorted(cdf[pair], g.random(at.sum()), side="right")
            p[sel] = comp[2][np.minimum(idx, comp[2].size - 1)]
    return p
