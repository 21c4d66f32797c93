"""Coverage of the default's 90% pass@k band on truth shapes no calibration family has, with and without the
unbiased pass@k's normal band within the samples drawn (``rcParams["stats.unbiased_band"]``).

Each replicate draws the counts of one config (``--tasks`` tasks, m samples each) from a fixed vector of per-task
p, fits the default once and reads its band under both settings; the truth is the replicate's own mean of
1 - (1 - p_i)^k.  Results: benchmarks/RESULTS.md, "Within the samples drawn, whatever the shape".

    python benchmarks/shape_sweep.py                  # 40 replicates, m = 10 and 20 (about 10 minutes)
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bayespass as bp

KS = (1, 2, 5, 10)


def truths(T: int) -> dict:
    """Per-task p of each truth shape on ``T`` tasks."""
    i = np.arange(T)
    return {"levels .05/.95": np.where(i % 2 == 0, 0.05, 0.95),
            "half 0 half 0.02": np.where(i < T // 2, 0.0, 0.02),
            "0.3 on 10% + zeros": np.where(i < T // 10, 0.3, 0.0)}


def main(argv=None) -> None:
    """Print coverage and width per truth, m and setting."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--ms", default="10,20")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    ks = list(KS)
    for m in (int(x) for x in args.ms.split(",")):
        for name, p in truths(args.tasks).items():
            hits = {flag: np.zeros(len(ks)) for flag in (True, False)}
            width = {flag: np.zeros(len(ks)) for flag in (True, False)}
            truth = np.array([np.mean(1 - (1 - p) ** k) for k in ks])
            for _ in range(args.reps):
                c = rng.binomial(m, p)
                idata = bp.fit(bp.make_counts(np.full((1, args.tasks), m), c[None]))
                for flag in (True, False):
                    with bp.rc_context({"stats.unbiased_band": flag}):
                        cur = bp.passk_curve(idata, k=ks).isel(config=0)
                    lo, hi = (cur["eti"].sel(ci_bound=b).values for b in ("lower", "upper"))
                    hits[flag] += (truth >= lo - 1e-12) & (truth <= hi + 1e-12)
                    width[flag] += hi - lo
            for flag in (False, True):
                print(f"m={m} {name:20s} unbiased_band={flag!s:5s} k={ks} cov", np.round(hits[flag] / args.reps, 2),
                      "width", np.round(width[flag] / args.reps, 4), flush=True)


if __name__ == "__main__":
    main()
