"""Adaptive allocation vs uniform sampling: samples needed for the pass@k band to reach a target width.

Simulation with known truth (issue 18, item 4).  For each truth family, T tasks get p from the
family; every task starts with ``--n0`` samples.  Then, in rounds of ``T // 2`` samples:

* uniform: one more sample to each of the T // 2 tasks with the fewest (so n stays equal up to one);
* adaptive: :func:`bayespass.allocate` gives the round's samples to the tasks whose next samples
  shrink the band of pass@k the most (expected variance reduction, preposterior).

After each round the model is refitted (``--model``, EB) and the ``ci_prob`` band of the dataset
pass@k measured; a run stops at the first round whose band is at most ``--width`` wide.  Reported:
the mean samples used by each arm, the saving, and the coverage of the final band of each arm (the
truth is the mean over the T tasks of 1 - (1 - p)^k): an allocation that depends only on the data
seen keeps the posterior valid, and this checks it.

``--trace`` prints every round's band width and how many tasks have at least k samples.  For a stack the band
beyond the samples drawn spans the candidates' disagreement: with the default rule ``"hull-short"`` only on the
tasks short of k, with ``"hull-beyond"`` (``--band-rule``; the default until the sixty-seventh session) the hull
of their bands until 99% of the tasks have n >= k, a line that uniform sampling crosses and adaptive allocation
need not.  ``--arms`` runs one arm only, ``--rep-start`` later replicates (the seeds are per replicate).

Usage: python benchmarks/allocate.py [--reps 10] [--tasks 150] [--k 10] [--width 0.05] [--model bb] [--trace]
       [--band-rule hull-short] [--arms uniform,adaptive] [--rep-start 0]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.data.counts import identified_k  # noqa: E402


def truth(family, T, rng):
    if family == "zoib-like":
        return np.where(rng.random(T) < 0.3, 0.0, rng.beta(0.6, 0.8, T))
    if family == "two-beta":
        return np.where(rng.random(T) < 0.5, rng.beta(0.3, 3.0, T), rng.beta(4.0, 1.0, T))
    if family == "logit-normal":
        return 1.0 / (1.0 + np.exp(-rng.normal(-1.0, 2.0, T)))
    if family == "zeros+tiny":
        u = rng.random(T)
        return np.where(u < 0.3, 0.0, np.where(u < 0.5, 10 ** rng.uniform(-3, -2, T), rng.beta(2.0, 2.0, T)))
    raise ValueError(family)


def band(n, c, model, k, prob):
    counts = bp.make_counts(n[None], c[None], task=[f"t{i}" for i in range(n.size)], config=["sim"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = bp.fit(counts, model, "eb", progressbar=False)
        lo, hi = bp.passk_curve(f, [k], ci_prob=prob)["eti"].sel(k=k).values[0]
    return f, lo, hi


def uniform_round(n):
    """One more sample to each of the half of the tasks with the fewest (stable order), as a 0/1 array."""
    extra = np.zeros(n.size, np.int64)
    extra[np.argsort(n, kind="stable")[: n.size // 2]] = 1
    return extra


def one_arm(p, arm, args, rng):
    T = p.size
    n = np.full(T, args.n0)
    c = rng.binomial(n, p)
    for _ in range(args.max_rounds):
        f, lo, hi = band(n, c, args.model, args.k, args.ci_prob)
        if getattr(args, "trace", False):
            print(f"  {arm}: {int(n.sum())} samples, {int((n >= args.k).sum())} tasks with n >= k, "
                  f"identified up to k = {int(identified_k(n[None])[0])}, band width {hi - lo:.4f}", flush=True)
        if hi - lo <= args.width:
            break
        if arm == "uniform":
            extra = uniform_round(n)
        else:
            extra = bp.allocate(f, k=args.k, budget=T // 2, seed=int(rng.integers(1 << 30))).n_more.values[0]
        c = c + rng.binomial(extra, p)
        n = n + extra
    true = float(np.mean(-np.expm1(args.k * np.log1p(-np.minimum(p, 1 - 1e-15)))))
    return int(n.sum()), hi - lo <= args.width, lo <= true <= hi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--arms", default="uniform,adaptive", help="which arms to run (the saving needs both)")
    ap.add_argument("--rep-start", type=int, default=0, help="first replicate (seeds are per replicate)")
    ap.add_argument("--tasks", type=int, default=150)
    ap.add_argument("--n0", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--width", type=float, default=0.05)
    ap.add_argument("--ci-prob", type=float, default=0.9)
    ap.add_argument("--model", default="bb")
    ap.add_argument("--max-rounds", type=int, default=60)
    ap.add_argument("--families", default="zoib-like,two-beta,logit-normal,zeros+tiny")
    ap.add_argument("--band-rule", default=None,
                    help="rcParams['stats.stack_band'] for a stacked model (default: the product's)")
    ap.add_argument("--trace", action="store_true",
                    help="print every round: samples, tasks with n >= k, identified k (data.counts.identified_k), "
                         "band width")
    args = ap.parse_args()
    if args.band_rule:
        bp.rcParams["stats.stack_band"] = args.band_rule
    print(f"band rule {bp.rcParams['stats.stack_band']}")
    print(f"T={args.tasks} tasks, n0={args.n0}, k={args.k}, target {args.ci_prob:.0%} band width {args.width}, "
          f"model {args.model} (EB), rounds of {args.tasks // 2} samples, {args.reps} replicates\n")
    print("| truth | uniform: samples | adaptive: samples | saving | reached (u / a) | coverage of final band "
          "(u / a) |")
    print("|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for fam in args.families.split(","):
        res = {arm: [] for arm in args.arms.split(",")}
        for r in range(args.rep_start, args.rep_start + args.reps):
            p = truth(fam, args.tasks, np.random.default_rng(1000 + r))
            for arm in res:
                res[arm].append(one_arm(p, arm, args, np.random.default_rng([r, len(arm)])))
            print(f"  {fam} replicate {r}: " + ", ".join(f"{x} {res[x][-1][0]} samples (covers {res[x][-1][2]})"
                                                         for x in res), flush=True)
        if len(res) < 2:
            x = np.array(next(iter(res.values())), float)
            print(f"| {fam} | {next(iter(res))} only: {x[:, 0].mean():.0f} samples, reached {x[:, 1].mean():.2f}, "
                  f"final band covers {x[:, 2].mean():.2f} |", flush=True)
            continue
        u, a = (np.array(res[x], float) for x in ("uniform", "adaptive"))
        print(f"| {fam} | {u[:, 0].mean():.0f} | {a[:, 0].mean():.0f} | {1 - a[:, 0].mean() / u[:, 0].mean():.0%} | "
              f"{u[:, 1].mean():.2f} / {a[:, 1].mean():.2f} | {u[:, 2].mean():.2f} / {a[:, 2].mean():.2f} |",
              flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
