"""Low-budget accuracy protocol for dataset pass@k (issue 3).

For each regime, each true prior (a, b, pi0, pi1) and 10 replicates: draw
per-task p_i, draw m samples per task, estimate dataset pass@k and compare
with the exact truth mean_i[1 - (1 - p_i)^k].  Reported: mean absolute
error averaged over replicates and the regime's priors, for naive,
unbiased (m >= k only), EB BB / ZOIBB / LinMix, and the full-Bayes ZOIBB
posterior mean ("bayes": importance-corrected Laplace posterior, same
hyperpriors as the PyMC model); and the coverage of the 90% intervals.
With ``--nuts`` one cell (MBPP-like, m = 5) is also fitted by NUTS to
compare the two posteriors.

Usage: python benchmarks/accuracy.py [--reps 10] [--nuts]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.testing import draw_zoib, simulate_counts, true_passk  # noqa: E402

REGIMES = {
    "MBPP-like": (378, [(0.15, 0.03, 0, 0.01), (1.14, 0.27, 0.02, 0), (0.19, 0.14, 0.10, 0.37),
                        (0.79, 0.73, 0.02, 0), (0.34, 0.19, 0.07, 0.26), (1.65, 1.19, 0.03, 0)]),
    "CodeContests-like": (165, [(0.12, 0.37, 0.35, 0), (0.05, 1.72, 0.06, 0), (0.15, 3.76, 0.71, 0),
                                (0.39, 23.24, 0.81, 0), (0.03, 0.90, 0.07, 0), (0.02, 0.92, 0.18, 0.01)]),
    # misspecified: p from a two-Beta mixture (no ZOIB member matches it)
    "Misspecified (2-Beta mix)": (300, [("mix", 0.5, (0.3, 4.0), (6.0, 1.5)),
                                        ("mix", 0.3, (0.5, 8.0), (3.0, 3.0)),
                                        ("mix", 0.7, (0.2, 2.0), (10.0, 1.0))]),
}
MS = (1, 5, 10, 20, 50)
KS = (10, 50, 100, 200, 500)
METHODS = ("naive", "unbiased", "bb", "zoibb", "linmix")


def draw_truth(prior, T, reps, seed):
    if prior[0] == "mix":
        _, w, (a1, b1), (a2, b2) = prior
        g = np.random.default_rng(seed)
        z = g.random((reps, T)) < w
        return np.where(z, g.beta(a1, b1, (reps, T)), g.beta(a2, b2, (reps, T)))
    return draw_zoib((reps, T), *prior, seed=seed)


def run_cell(T, priors, m, reps, seed, fit_method="eb"):
    p = np.vstack([draw_truth(pr, T, reps, seed + 100 * i) for i, pr in enumerate(priors)])
    ds = simulate_counts(p, m, seed=seed + 7)
    truth = true_passk(p, KS)  # (config, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = bp.passk(ds, KS, method=list(METHODS)).values  # (method, config, k)
        kw = {} if fit_method == "eb" else {"draws": 500, "tune": 500, "progressbar": False}
        idata = bp.fit(ds, "zoibb", fit_method, seed=seed, **kw)
        cur = bp.passk_curve(idata, KS, ci_prob=0.9)
    bayes = cur["mean"].values
    lo, hi = cur.eti.sel(ci_bound="lower").values, cur.eti.sel(ci_bound="upper").values
    covered = (lo <= truth) & (truth <= hi)
    err = np.abs(np.concatenate([est, bayes[None]]) - truth[None])  # (method, config, k)
    return err, covered, hi - lo


def fmt(v):
    return "—" if not np.isfinite(v) else f"{v:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--nuts", action="store_true", help="also fit one cell by NUTS (about 10 more minutes)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    names = list(METHODS) + ["bayes"]
    lines = []
    cover_lines = ["| regime | m | coverage of 90% intervals | mean interval width |", "|---|---|---|---|"]
    for regime, (T, priors) in REGIMES.items():
        lines += [f"\n### {regime} ({T} tasks, {len(priors)} priors x {args.reps} replicates)\n",
                  "| m | k | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
        for m in MS:
            err, cov, width = run_cell(T, priors, m, args.reps, seed=1000 * m)
            mae = np.mean(err, axis=1)  # (method, k); NaN where the method is undefined
            for ik, k in enumerate(KS):
                lines.append(f"| {m} | {k} | " + " | ".join(fmt(v) for v in mae[:, ik]) + " |")
                print(f"{regime} " + lines[-1], flush=True)
            cover_lines.append(f"| {regime} | {m} | {cov.mean():.2f} | {width.mean():.3f} |")
            print(f"{regime} m={m} done ({time.perf_counter() - t0:.0f}s)", flush=True)
    nuts = []
    if args.nuts:
        T, priors = REGIMES["MBPP-like"]
        t1 = time.perf_counter()
        err_n, cov_n, _ = run_cell(T, priors, 5, args.reps, seed=5000, fit_method="mcmc")
        err_e, cov_e, _ = run_cell(T, priors, 5, args.reps, seed=5000, fit_method="eb")
        nuts = ["| posterior | " + " | ".join(f"MAE k={k}" for k in KS) + " | coverage |",
                "|---|" + "---|" * (len(KS) + 1),
                "| NUTS (PyMC) | " + " | ".join(fmt(v) for v in err_n[-1].mean(0)) + f" | {cov_n.mean():.2f} |",
                "| Laplace+IS | " + " | ".join(fmt(v) for v in err_e[-1].mean(0)) + f" | {cov_e.mean():.2f} |",
                f"\n(NUTS cell: {time.perf_counter() - t1:.0f} s including the Laplace refit)"]
    print("\n## MAE of dataset pass@k (mean over replicates and priors)")
    print("\n".join(lines))
    print("\n## Coverage (full-Bayes ZOIBB, 90% equal-tailed intervals)\n")
    print("\n".join(cover_lines))
    if nuts:
        print("\n## NUTS vs Laplace+IS on MBPP-like, m = 5\n")
        print("\n".join(nuts))
    print(f"\nTotal time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
