"""Speed of ``bp.passk_bounds``: column generation against one linear program over the whole grid per k.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_bounds.py [--repeats 2]

The baseline, in the same run, is what ``passk_bounds`` did before the forty-third session: for every k and
both ends, HiGHS (with its presolve) on all 1,412 columns of the grid.  Cases: the shipped example counts with
the 27 k of ``bayespass curve --bounds --plot --k 1,1000`` (3 configs x 164 tasks, 20 samples per task), six of
the real MBPP configs (378 tasks, 10 or 50 samples per task) and simulated counts at 1 and 2 samples per task
and ragged n, at k in {1, 2, 3, 5, 10, 50, 100, 1000, 1e6, 1e9}; and all 34 real configs at a table's k (1, 10,
100), where the first objective's program is most of the work.  Prints a markdown table: best-of-repeats wall
time of each, the ratio, and the largest difference between the two sets of bounds.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.stats import bounds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KS = [1, 2, 3, 5, 10, 50, 100, 1000, 10**6, 10**9]


def whole_grid(self, obj):
    """The baseline: one program over every column (the code before column generation)."""
    from scipy.optimize import linprog

    res = linprog(obj, A_ub=self.a_ub, b_ub=self.b_ub, A_eq=np.ones((1, obj.size)), b_eq=[1.0], bounds=(0, None),
                  method="highs")
    return float(res.fun) if res.status == 0 else None


def cases():
    rng = np.random.default_rng(0)
    n_ragged = rng.choice([1, 5, 10], (2, 300))
    out = {
        "example counts, 3 x 164, n = 20 (the CLI plot's 27 k)":
            (bp.read_counts(ROOT / "data" / "examples" / "counts_small.csv"),
             np.unique(np.round(np.logspace(0, 3, 30)).astype(int))),
        "n = 1, 2 x 200": (bp.make_counts(np.full((2, 200), 1), rng.binomial(1, rng.beta(0.5, 0.5, (2, 200)))), KS),
        "n = 2, 3 x 300": (bp.make_counts(np.full((3, 300), 2), rng.binomial(2, rng.beta(0.3, 0.4, (3, 300)))), KS),
        "ragged n in {1, 5, 10}, 2 x 300":
            (bp.make_counts(n_ragged, rng.binomial(n_ragged, rng.beta(0.4, 0.6, n_ragged.shape))), KS),
    }
    real = ROOT / "data" / "real_mbpp" / "counts.csv"
    if real.exists():
        out["real MBPP, 6 configs x 378"] = (bp.read_counts(real).isel(config=slice(0, 34, 6)), KS)
        out["real MBPP, all 34 configs x 378 (a table's k)"] = (bp.read_counts(real), [1, 10, 100])
    return out


def timed(counts, ks, repeats):
    best, vals = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        vals = bp.passk_bounds(counts, ks).values
        best = min(best, time.perf_counter() - t0)
    return best, vals


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print("| counts | k | whole grid (before) | column generation | ratio | largest difference |")
    print("|---|---|---|---|---|---|")
    new_solve = bounds._ColumnLP.solve
    for name, (counts, ks) in cases().items():
        bounds._ColumnLP.solve = whole_grid
        t_old, old = timed(counts, ks, args.repeats)
        bounds._ColumnLP.solve = new_solve
        t_new, new = timed(counts, ks, args.repeats)
        print(f"| {name} | {len(ks)} | {t_old:.2f} s | {t_new:.2f} s | {t_old / t_new:.1f}x | "
              f"{np.nanmax(np.abs(new - old)):.1e} |", flush=True)


if __name__ == "__main__":
    main()
