"""Does PyMC's NUTS path need the box the NumPy samplers keep theta in?

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_pymc_bounds.py [--tasks 164] [--ms 1,2]

The fast path (``sampler="hmc"``) and EB reject draws outside ``Model.bounds()``; the PyMC builder
(``models.specs.build_model``, ``sampler="pymc"``) gives theta a flat prior on the whole space.  On one
simulated config (20% of the tasks never pass, the rest p ~ Beta(0.6, 0.8)) each per-config model is fitted
both ways, and the share of NUTS draws outside the box is printed beside both paths' 0.1% and 99.9%
quantiles of every coordinate of theta.  Where the share is ~0 the two paths sample the same posterior.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np


def main() -> None:
    """Fit each model both ways and print the share of NUTS draws outside the NumPy samplers' box."""
    import bayespass as bp
    from bayespass.models.base import get_model
    from bayespass.testing import simulate_counts

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=164)
    ap.add_argument("--ms", default="1,2", help="samples per task, comma-separated")
    ap.add_argument("--models", default="bb,zoibb,lnorm,flex")
    args = ap.parse_args()
    g = np.random.default_rng(0)
    p = np.where(g.random((1, args.tasks)) < 0.2, 0.0, g.beta(0.6, 0.8, (1, args.tasks)))
    print("| m | model | NUTS draws outside the box | per coordinate (largest) | largest 0.1%/99.9% quantile gap |")
    print("|---|---|---|---|---|")
    for m in map(int, args.ms.split(",")):
        counts = simulate_counts(p, m, seed=1)
        for name in args.models.split(","):
            model = get_model(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nuts = bp.fit(counts, name, method="mcmc", sampler="pymc", progressbar=False)
                fast = bp.fit(counts, name, method="mcmc", progressbar=False)
            th = nuts.posterior["theta"].values.reshape(-1, model.n_params)
            tf = fast.posterior["theta"].values.reshape(-1, model.n_params)
            box = np.asarray(model.bounds())
            out = (th < box[:, 0]) | (th > box[:, 1])
            gap = np.abs(np.quantile(th, [0.001, 0.999], 0) - np.quantile(tf, [0.001, 0.999], 0)).max()
            worst = int(out.mean(0).argmax())
            print(f"| {m} | {name} | {out.any(1).mean():.2%} | {model.coords[worst]} {out.mean(0)[worst]:.2%} | "
                  f"{gap:.2f} |", flush=True)


if __name__ == "__main__":
    main()
