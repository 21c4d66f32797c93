"""Compiled grid sums of ``shared``'s log marginal likelihood and its gradient (Numba; compiled on first use, cached).

``shared`` integrates each task's difficulty over a grid of nodes. At every node a config's Beta-Binomial term
depends on the task only through its count, so it is a table over the count values, per config and node
(``log Gamma(a + m) - log Gamma(a)`` as sums of ``log(a + i)``, exact to rounding, and the digamma differences as
sums of ``1 / (a + i)``), looked up per (config, task). NumPy built those tables one row at a time and summed
them over the configs by sparse products, about a dozen passes over memory per row; here each is one loop, and
the lookups add straight into the tasks' sums. ``shared.log_marginal(..., scores=True)`` computes the same
numbers per task with ``scipy.special`` and stays the definition: tests/models/test_shared.py compares the two.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import arg, compiled

__all__ = ["forward", "backward"]

_JITTED = ("_forward", "_backward")


def _forward(mu, phi, ci, bi, g0, g1, grad, s, la, lb, da, db):
    """Fill the tables (J, M, g1 - g0) of a = mu phi and b = (1 - mu) phi over nodes g0..g1, and ``s`` (U, g1 - g0).

    ``s[u, g]`` is the sum over configs of ``la[j, c_uj, g] + lb[j, n_uj - c_uj, g]``; ``ci``, ``bi`` (J, U)
    hold c and n - c, -1 where the config has no sample of the task.  ``da``, ``db``: the digamma tables,
    filled where ``grad``.
    """
    J, U = ci.shape
    M, Gb = la.shape[1], g1 - g0
    for j in range(J):
        for g in range(Gb):
            la[j, 0, g], lb[j, 0, g] = 0.0, 0.0
            if grad:
                da[j, 0, g], db[j, 0, g] = 0.0, 0.0
        for m in range(M - 1):
            for g in range(Gb):
                mj = mu[j, g0 + g]
                a, b = mj * phi[j] + m, (1.0 - mj) * phi[j] + m
                la[j, m + 1, g] = la[j, m, g] + math.log(a)
                lb[j, m + 1, g] = lb[j, m, g] + math.log(b)
                if grad:
                    da[j, m + 1, g] = da[j, m, g] + 1.0 / a
                    db[j, m + 1, g] = db[j, m, g] + 1.0 / b
    s[:] = 0.0
    for j in range(J):
        for u in range(U):
            c = ci[j, u]
            if c < 0:
                continue
            f = bi[j, u]
            for g in range(Gb):
                s[u, g] += la[j, c, g] + lb[j, f, g]


def _backward(r, ci, bi, g0, da, db, sa, sb):
    """``sa[j, g] = sum_u r[u, g0 + g] da[j, c_uj, g]``, and ``sb`` likewise with ``db`` at n - c."""
    J, U = ci.shape
    Gb = sa.shape[1]
    sa[:] = 0.0
    sb[:] = 0.0
    for j in range(J):
        for u in range(U):
            c = ci[j, u]
            if c < 0:
                continue
            f = bi[j, u]
            for g in range(Gb):
                sa[j, g] += r[u, g0 + g] * da[j, c, g]
                sb[j, g] += r[u, g0 + g] * db[j, f, g]


def forward(mu, phi, ci, bi, sl: slice, m_max: int, grad: bool):
    """Return ``s`` (U, nodes of ``sl``): each task's summed log Beta-Binomial terms of a and b, and the tables.

    ``mu`` (J, G): the configs' means at every node; ``phi`` (J,); ``ci``, ``bi`` (J, U) as in :func:`_forward`
    (int64, C-ordered); ``m_max``: the largest count.  The tables ``(da, db)`` go to :func:`backward`.
    """
    J, U = ci.shape
    Gb = sl.stop - sl.start
    la, lb = np.empty((J, m_max + 1, Gb)), np.empty((J, m_max + 1, Gb))
    da, db = (np.empty((J, m_max + 1, Gb)), np.empty((J, m_max + 1, Gb))) if grad else (np.empty((0, 0, 0)),) * 2
    s = np.empty((U, Gb))
    compiled(globals(), _JITTED, "_forward")(arg(mu), arg(phi), ci, bi, sl.start, sl.stop, grad, s, la, lb, da, db)
    return s, (da, db)


def backward(r, ci, bi, sl: slice, tables):
    """Return ``(sa, sb)`` (J, nodes of ``sl``): :func:`forward`'s digamma tables summed over the tasks by ``r``."""
    da, db = tables
    J, Gb = ci.shape[0], sl.stop - sl.start
    sa, sb = np.empty((J, Gb)), np.empty((J, Gb))
    compiled(globals(), _JITTED, "_backward")(arg(r), ci, bi, sl.start, da, db, sa, sb)
    return sa, sb
