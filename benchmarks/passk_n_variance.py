"""A variance bound for the unbiased pass@k where n/2 < k <= n: tried, not adopted (seventy-sixth session).

Where every task has n >= 2k samples the default's band holds the normal band of the unbiased pass@k, whose
variance about the tasks' own pass@k has an unbiased estimate (``stats.kernels.unbiased_passk_moments``).  For
n/2 < k <= n none exists: the variance of ``u = 1 - C(n-c, k) / C(n, k)`` needs ``(1 - p)^(2k)``, a polynomial of
degree 2k > n.  A *conservative* estimate does exist.  With ``r = C(n-c, k) / C(n, k)`` and ``s = 1 - p``,
the variance is ``E[r^2] - s^(2k)``; ``r(c)^2`` estimates the first term without bias, and any polynomial
``L(s) <= s^(2k)`` of degree n is estimated without bias by a table ``beta[n - c]`` (its Bernstein
coefficients).  So ``r(c)^2 - beta[n - c]`` has expectation the variance plus the slack
``s^(2k) - L(s) >= 0``.  This script finds the table by linear programming (the slack as small as possible in
the worst case, with every task's estimate in [0, 1] so that their sum is not swamped by noise, and no slack
at p = 0 or 1) and reports

1. per (n, k): the estimate's expectation over the true variance at several p, and its sd per task;
2. at pass@10 from 10 samples, on the calibration benchmark's truth families (100 replicates of 300 tasks,
   the benchmark's seeds): the normal band with that variance against the band with the true variance.

    python benchmarks/passk_n_variance.py

The finding: at k = n the bound is 1.1-2.8x the variance at p = 0.01-0.2 (n = 10), and its band is 1.1-1.45x
the width of the true variance's band on every family (at p = 0.7 for every task, the homogeneous family's
third replicate, every task passes, the bound is 0 and its band misses the truth 0.99999: the model's band
covers that).  Joined to the default's band (mean widths at m = 10, k = 10 in
``results/calibration_seventysixth_seed7_sim100.json``) it would widen pass@10 from 10 samples by 20-57% on
five of the six tuning families, where the default covers 0.90-0.94 already; not adopted (RESULTS, "The full
grid again after the unbiased band").
"""

from __future__ import annotations

import importlib.util
import zlib
from pathlib import Path

import numpy as np
from scipy.optimize import linprog
from scipy.stats import binom

from bayespass.stats.kernels import passk_unbiased

HERE = Path(__file__).parent


def untried(n: int, k: int) -> np.ndarray:
    """(n + 1,) ``r(c) = C(n - c, k) / C(n, k)`` for c = 0..n: one minus the unbiased pass@k of a task."""
    return 1.0 - passk_unbiased(n, np.arange(n + 1), k)


def var_u(n: int, k: int, s: np.ndarray) -> np.ndarray:
    """Exact variance of the unbiased pass@k of one task with n samples at failure probability ``s``."""
    c = np.arange(n + 1)
    r = untried(n, k)
    pm = binom.pmf(c[None, :], n, 1 - s[:, None])
    return (pm * r**2).sum(1) - s ** (2 * k)


def bound_table(n: int, k: int, grid: int = 3000) -> np.ndarray:
    """(n + 1,) the per-task variance estimate by c: non-negative, conservative, smallest worst-case slack."""
    s = np.linspace(0, 1, grid + 1)
    basis = binom.pmf(np.arange(n + 1)[None, :], n, s[:, None])  # P(n - c = j | s)
    target = s ** (2 * k)
    c = np.arange(n + 1)
    r2 = untried(n, k) ** 2
    r2_by_failures = r2[::-1]
    a_ub = np.vstack([np.hstack([basis, np.zeros((s.size, 1))]), np.hstack([-basis, -np.ones((s.size, 1))])])
    bounds = [(0, 0)] + [(r2_by_failures[j] - 1, r2_by_failures[j]) for j in range(1, n)] + [(1, 1), (0, None)]
    res = linprog(np.r_[np.zeros(n + 1), 1.0], A_ub=a_ub, b_ub=np.r_[target, -target], bounds=bounds,
                  method="highs")
    if not res.success:
        raise RuntimeError(f"linprog failed for n={n}, k={k}: {res.message}")
    return r2 - res.x[:-1][n - c]


def per_p_table() -> None:
    """Print the bound's expectation over the variance, and its sd, at several p."""
    ps = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
    print("| n | k | " + " | ".join(f"p = {p}: E / var, sd" for p in ps) + " |")
    print("|---|---|" + "---|" * len(ps))
    for n, k in [(5, 3), (5, 5), (10, 6), (10, 8), (10, 10), (20, 15), (20, 20)]:
        vhat, c, cells = bound_table(n, k), np.arange(n + 1), []
        for p in ps:
            pm = binom.pmf(c, n, p)
            mean = (pm * vhat).sum()
            sd = np.sqrt(max((pm * vhat**2).sum() - mean**2, 0.0))
            cells.append(f"{mean / var_u(n, k, np.array([1 - p]))[0]:.2f}x, {sd:.2f}")
        print(f"| {n} | {k} | " + " | ".join(cells) + " |")


def family_widths(n: int = 10, k: int = 10, reps: int = 100) -> None:
    """Print the normal band's width and coverage with the bound and with the true variance, per truth family."""
    spec = importlib.util.spec_from_file_location("calibration", HERE / "calibration.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    vhat = bound_table(n, k)
    print(f"\npass@{k} from {n} samples, {reps} replicates of {cal.TASKS} tasks (the benchmark's seeds, --seed 7)")
    print("| truth | band with the bound: width / coverage | with the true variance: width / coverage |")
    print("|---|---|---|")
    for fam in cal.FAMILIES + tuple(cal.HELD_OUT):
        rng = np.random.default_rng(zlib.crc32(f"{fam}:{n}".encode()) + 7)
        p = np.stack([cal.draw_family(fam, rng, r) for r in range(reps)])
        c = rng.binomial(n, p)
        est = passk_unbiased(n, c, k).mean(1)
        q = 1 - (1 - p) ** k
        truth, tasks = q.mean(1), p.shape[1]
        half_b = 1.645 * np.sqrt(vhat[c].sum(1)) / tasks
        half_t = 1.645 * np.sqrt(var_u_rows(n, k, p)) / tasks
        cov_b, cov_t = (np.mean(np.abs(est - truth) <= h) for h in (half_b, half_t))
        print(f"| {fam} | {2 * half_b.mean():.4f} / {cov_b:.2f} | {2 * half_t.mean():.4f} / {cov_t:.2f} |")


def var_u_rows(n: int, k: int, p: np.ndarray) -> np.ndarray:
    """Sum over tasks (last axis) of the exact variance of the unbiased pass@k."""
    return var_u(n, k, 1 - p.ravel()).reshape(p.shape).sum(-1)


if __name__ == "__main__":
    per_p_table()
    family_widths()
