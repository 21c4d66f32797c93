"""How fast ``shared``'s MCMC mixes with each fixed range of leapfrog steps, on one real MBPP subsample.

    python benchmarks/bench_shared_steps.py [--m 1] [--rep 3] [--ranges 2,5/3,8/6,16/10,24] [--tune 200]
                                            [--draws 1000]

The subsample is replicate ``rep`` (0-based) of ``benchmarks/bench_shared_gate.py`` at m samples per task (12
configs x 364 tasks of ``data/real_mbpp/counts.csv``).  For each range the fit runs with that range alone (no
trial, no gate: ``draws`` per chain, 4 chains, ``tune`` warm-up iterations) and prints its step size, seconds,
the smallest bulk ESS of the gated quantities (and which), their largest R-hat, and ESS per second: what the
steps trial of ``hmc.sample`` should pick.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))


def main():
    import arviz as az
    from compare import load_real, subsample

    from bayespass.models import shared

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--rep", type=int, default=3)
    ap.add_argument("--ranges", default="2,5/3,8/6,16/10,24")
    ap.add_argument("--tune", type=int, default=200)
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args()
    ranges = [tuple(int(v) for v in r.split(",")) for r in args.ranges.split("/")]
    if any(len(r) != 2 or not 1 <= r[0] <= r[1] for r in ranges):
        raise SystemExit(f"--ranges: {args.ranges!r}; expected lo,hi pairs with 1 <= lo <= hi, separated by '/'")
    counts = load_real()
    rng = np.random.default_rng(1000 + args.m)  # bench_shared_gate.py's (and compare.py's) replicates
    for _ in range(args.rep + 1):
        sub = subsample(counts, args.m, rng)
    model, kept = shared.Shared(), shared.STEPS
    print(f"m = {args.m}, replicate {args.rep}, {args.tune} warm-up iterations, 4 chains x {args.draws} draws")
    print("| steps | step size | seconds | ESS bulk min (quantity) | R-hat max | ESS per second |")
    print("|---|---|---|---|---|---|")
    try:
        for r in ranges:
            shared.STEPS = (r,)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                post = model.fit_hmc(sub, draws=args.draws, warmup=args.tune, chains=4, seed=args.rep)
                secs = time.perf_counter() - t0
            gq = model.gated_quantities(post)
            ess, rhat = az.ess(gq), az.rhat(gq)
            worst = min(gq.data_vars, key=lambda v: float(ess[v].min()))
            e = float(ess[worst].min())
            r_max = max(float(rhat[v].max()) for v in gq.data_vars)
            print(f"| {r[0]}-{r[1]} | {post.attrs['step_size']:.3f} | {secs:.1f} | {e:.0f} ({worst}) | {r_max:.4f} | "
                  f"{e / secs:.1f} |", flush=True)
    finally:
        shared.STEPS = kept


if __name__ == "__main__":
    main()
