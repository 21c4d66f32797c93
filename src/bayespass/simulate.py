"""Seeded random generators and simulators with known truth (used by the synthetic coder, benchmarks and tests)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .data.counts import make_counts

__all__ = ["rng", "draw_zoib", "simulate_counts", "true_passk"]


def rng(seed: int | np.random.Generator | None = 0) -> np.random.Generator:
    """Return a NumPy Generator (passing a Generator through unchanged)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


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
