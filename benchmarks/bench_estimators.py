"""Speed of EB fits (BB + ZOIBB) and pass@k curves (k = 1..1000).

For 10 configs x T tasks (T = 10^3 .. 10^6), with per-task sample counts n
drawn from {10, 20, 50, 100, 200}, time:

* bayespass: ``fit_eb`` for bb and zoibb, then ``passk`` curves for
  unbiased, bb, zoibb over k = 1..1000 (dataset level);
* baseline (same run, same machine): the same optimiser on the raw per-task
  arrays (no (n, c) compression) and curves evaluated per task, as most
  implementations do.  The baseline only runs where it finishes in
  reasonable time (T <= 10^4).

Usage: python benchmarks/bench_estimators.py [--sizes 1000,10000,100000,1000000] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.models import eb  # noqa: E402
from bayespass.stats import kernels as K  # noqa: E402
from bayespass.testing import draw_zoib  # noqa: E402

KGRID = np.arange(1, 1001)


def make(T: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = rng.choice([10, 20, 50, 100, 200], size=(10, T))
    p = np.stack([draw_zoib(T, 0.2 + 0.1 * j, 0.8, 0.2, 0.05, seed=seed + j) for j in range(10)])
    return bp.make_counts(n, rng.binomial(n, p))


def run_bayespass(ds):
    fits = {"bb": bp.fit_eb(ds, "bb", warn=False), "zoibb": bp.fit_eb(ds, "zoibb", warn=False)}
    return bp.passk(ds, KGRID, method=["unbiased", "bb", "zoibb"], fits=fits)


def run_baseline(ds):
    out = []
    for j in range(ds.sizes["config"]):
        n = ds.n.values[j].astype(float)
        c = ds.c.values[j].astype(float)
        w = np.ones_like(n)
        rb = eb._fit_one(n, c, w, "bb")
        rz = eb._fit_one(n, c, w, "zoibb")
        mu, kap = 1 / (1 + np.exp(-rb.x[0])), np.exp(rb.x[1])
        a, b = mu * kap, (1 - mu) * kap
        curves = [K.passk_unbiased(n[:, None], c[:, None], KGRID).mean(0),
                  K.passk_bb_predictive(n[:, None], c[:, None], KGRID, a, b).mean(0)]
        out.append((curves, rz.x))
    return out


def timeit(fn, *args, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--baseline-max", type=int, default=10000)
    args = ap.parse_args()
    rows = ["| tasks per config | configs | bayespass (s) | baseline (s) | speed-up |", "|---|---|---|---|---|"]
    for T in [int(s) for s in args.sizes.split(",")]:
        ds = make(T)
        run_bayespass(ds)  # warm caches
        t_bp = timeit(run_bayespass, ds, repeat=3 if T < 10**6 else 1)
        if T <= args.baseline_max:
            t_base = timeit(run_baseline, ds, repeat=1)
            ratio = f"{t_base / t_bp:.0f}x"
            base = f"{t_base:.2f}"
        else:
            base, ratio = "—", "—"
        rows.append(f"| {T:,} | 10 | {t_bp:.3f} | {base} | {ratio} |")
        print(rows[-1], flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
