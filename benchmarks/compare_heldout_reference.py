"""Does a 10-sample truth favour the naive ranking?  The held-out design of compare.py on the tuning configs.

    python benchmarks/compare_heldout_reference.py [--m 2,5] [--reps 30]

The held-out real configs of ``compare.py --real-set heldout`` have 10 samples per task, so their truth, pass@10
on all samples, is one draw (did any of the 10 pass?) and shares the m samples seen.  Here the 12 tuning configs
(50 samples per task) play that design: per replicate 10 of the 50 samples are "all", m of those 10 are seen.
``shared`` (the default of ``compare_configs``) and the naive pass@m are scored by Kendall tau against the
10-sample truth and the 50-sample one, with the leaderboard band's coverage of both.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import load_real, tau_untied  # noqa: E402


def main():
    import bayespass as bp

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="2,5")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    counts = load_real()
    n, c = counts.n.values, counts.c.values
    t50 = bp.passk(counts, [10], method="unbiased").values[:, 0]
    for m in map(int, args.m.split(",")):
        rng = np.random.default_rng(77 + m)
        res = []
        for r in range(args.reps):
            c10 = rng.hypergeometric(c, n - c, np.full_like(n, 10))
            cm = rng.hypergeometric(c10, 10 - c10, np.full_like(n, m))
            t10 = bp.passk(counts.copy(data={"n": np.full_like(n, 10), "c": c10}), [10], method="unbiased").values[:, 0]
            sub = counts.copy(data={"n": np.full_like(n, m), "c": cm})
            cmp = bp.compare_configs(sub, k=[10], seed=r)
            est = cmp["passk"].sel(k=10).values
            naive = bp.passk(sub, [m], method="unbiased").values[:, 0]
            lo, hi = cmp["passk_eti"].sel(k=10).transpose("ci_bound", "config").values
            res.append([kendalltau(est, t10).statistic, tau_untied(naive, t10), kendalltau(est, t50).statistic,
                        tau_untied(naive, t50), np.mean((lo <= t10) & (t10 <= hi)), np.mean((lo <= t50) & (t50 <= hi))])
        a = np.mean(res, 0)
        print(f"m={m}: vs 10-sample truth: shared {a[0]:.3f} naive {a[1]:.3f} | vs 50-sample truth: shared {a[2]:.3f} "
              f"naive {a[3]:.3f} | band coverage {a[4]:.3f} / {a[5]:.3f}", flush=True)


if __name__ == "__main__":
    main()
