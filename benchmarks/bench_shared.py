"""Speed of the joint ``shared`` model by EB at the size issue 18 names (34 configs x 378 tasks).

    python benchmarks/bench_shared.py [--m 5,50] [--configs 34] [--tasks 378] [--mcmc 5] [--mcmc-draws 750,500]

Counts are simulated from the model's own family (a quarter of the tasks impossible, a quarter trivial,
the rest logit-normal, abilities spread over 1.5 logits, Beta overdispersion 6); the ratio is against a
per-config ``bb`` EB fit of the same counts in the same run.  Both are timed warm (after a fit of a small
data set, so imports and first-call costs are excluded).  ``--mcmc M``: also ``method="mcmc"`` (the default
sampler, whitened NumPy HMC) at those m, with its convergence gate and the largest difference of its
pass@k means from the EB fit's.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.special import expit


def simulate(J, T, m, seed=0):
    from bayespass.simulate import simulate_counts

    g = np.random.default_rng(seed)
    x = np.where(g.random(T) < 0.25, 8.0, np.where(g.random(T) < 0.33, -8.0, g.normal(0, 1.5, T)))
    mu = expit(np.linspace(-0.75, 0.75, J)[:, None] - x[None, :])
    return simulate_counts(g.beta(mu * 6, (1 - mu) * 6), m, seed=seed + 1).drop_vars("p_true")


def main():
    import bayespass as bp

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="5,50")
    ap.add_argument("--configs", type=int, default=34)
    ap.add_argument("--tasks", type=int, default=378)
    ap.add_argument("--mcmc", default="", help="m values at which to time method='mcmc' too, e.g. 5")
    ap.add_argument("--mcmc-draws", default="", help="draws per chain to compare, e.g. 750,500: each timed twice, "
                    "interleaved (default: the default draws, once)")
    ap.add_argument("--no-eb", action="store_true", help="skip the EB table")
    args = ap.parse_args()
    print("| m | configs x tasks | shared EB fit (s) | compare_configs k=1,10 (s) | bb EB fit (s) | ratio |")
    print("|---|---|---|---|---|---|")
    with warnings.catch_warnings():  # warm-up: imports and first-call costs are not the fit's
        warnings.simplefilter("ignore")
        small = simulate(3, 20, 3)
        bp.compare_configs(bp.fit(small, "shared", "eb", progressbar=False), k=(1, 10))
        bp.fit(small, "bb", "eb", progressbar=False)
    for m in (int(x) for x in args.m.split(",") if x and not args.no_eb):
        counts = simulate(args.configs, args.tasks, m)
        idata, t_shared = timed(bp.fit, counts, "shared", "eb", progressbar=False)
        t_compare = timed(bp.compare_configs, idata, k=(1, 10))[1]
        t_bb = timed(bp.fit, counts, "bb", "eb", progressbar=False)[1]
        print(f"| {m} | {args.configs} x {args.tasks} | {t_shared:.1f} | {t_compare:.1f} | {t_bb:.1f} | "
              f"{t_shared / t_bb:.2f} |", flush=True)
    draws = [int(x) for x in args.mcmc_draws.split(",") if x] * 2 or [None]
    for m in (int(x) for x in args.mcmc.split(",") if x):
        counts = simulate(args.configs, args.tasks, m)
        for d in draws:
            mcmc_row(counts, m, d)


def timed(fn, *args, **kwargs):
    """Return ``(fn(*args, **kwargs), seconds)``, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        return out, time.perf_counter() - t0


def mcmc_row(counts, m, draws=None):
    """Time ``method="mcmc"`` (``draws`` per chain, None: the default); print its gate and its largest pass@k
    difference from the EB fit."""
    import bayespass as bp

    idata, secs = timed(bp.fit, counts, "shared", "mcmc", draws=draws, progressbar=False)
    eb = timed(bp.fit, counts, "shared", "eb", progressbar=False)[0]
    gap = float(abs(bp.passk_curve(idata, [1, 10, 100])["mean"] - bp.passk_curve(eb, [1, 10, 100])["mean"]).max())
    a = idata.posterior.attrs
    J, T = counts.sizes["config"], counts.sizes["task"]
    print(f"MCMC m = {m}, {J} x {T}, {idata.posterior.sizes['draw']} draws per chain: {secs:.1f} s; "
          f"{a['convergence']} (r_hat max {a['convergence_r_hat_max']:.4f}, "
          f"ESS bulk min {a['convergence_ess_bulk_min']:.0f}); step size "
          f"{a['step_size']:.2f}, leapfrog steps {a.get('leapfrog_steps')}, acceptance {a['acceptance']:.2f}; "
          f"max |pass@k mean - EB's| at k = 1, 10, 100: {gap:.4f}; slopes weight {a.get('slopes_weight', 0):.2g}; "
          f"{a.get('rerun', 'first run passed')}", flush=True)


if __name__ == "__main__":
    main()
