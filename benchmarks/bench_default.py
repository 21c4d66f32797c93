"""Speed of the default fit (+ curve) against issue 15's targets, with bb as the baseline of the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_default.py [--mcmc [--sampler pymc]] [--repeats 3] [--real] [--numpy]

Cases: 164 tasks x 1 config (HumanEval-sized; EB and, with --mcmc, the default MCMC:
bayespass's HMC with its own settings, or with ``--sampler pymc`` PyMC's NUTS with
chains=4, cores=2, warm: compiled once before timing) and 400 tasks x 34 configs
(EB).  Counts are simulated from a zero-one-inflated Beta with n = 10.  ``--real`` adds the real MBPP counts
(``data/real_mbpp/counts.csv``: 34 configs x 378 tasks, 10 samples per task for 18 configs and 50 for 16, by
EB; no target of its own).  Prints a markdown table: best-of-repeats wall time per model and its ratio to bb.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.models.eb import FitWarning  # noqa: E402


def counts_of(tasks: int, configs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    u = rng.random((configs, tasks))
    p = np.where(u < 0.15, 0.0, np.where(u > 0.9, 1.0, rng.beta(0.8, 0.6, (configs, tasks))))
    n = np.full((configs, tasks), 10)
    return bp.make_counts(n, rng.binomial(n, p), config=[f"c{j}" for j in range(configs)])


def timed(counts, model: str, method: str, repeats: int, sampler: str = "hmc") -> float:
    kw = {}
    if method == "mcmc":
        kw = dict(cores=2, progressbar=False, sampler=sampler) | (dict(chains=4) if sampler != "hmc" else {})
    best = np.inf
    for r in range(repeats):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            idata = bp.fit(counts, model, method, seed=r, **kw)
        bp.passk_curve(idata, [1, 10, 100, 1000])
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mcmc", action="store_true")
    ap.add_argument("--models", default="bb,zoibb,flex,lnorm,auto")
    ap.add_argument("--sampler", default="hmc", help="sampler of --mcmc: hmc (the default) or pymc (NUTS)")
    ap.add_argument("--real", action="store_true", help="also the real MBPP counts (34 x 378, n = 10 or 50)")
    ap.add_argument("--numpy", action="store_true",
                    help="the models' NumPy formulas instead of their compiled loops (the code before them)")
    args = ap.parse_args()
    if args.numpy:
        from bayespass.models import bb, flex, lnorm

        lnorm.COMPILED = flex.COMPILED = bb.COMPILED = False
    models = args.models.split(",")
    cases = [("164 x 1", counts_of(164, 1), "eb", 2.0), ("400 x 34", counts_of(400, 34), "eb", 30.0)]
    if args.real:
        real = Path(__file__).resolve().parents[1] / "data" / "real_mbpp" / "counts.csv"
        cases.append(("378 x 34, real MBPP", bp.read_counts(real), "eb", float("nan")))
    if args.mcmc:
        cases.insert(1, ("164 x 1", counts_of(164, 1), "mcmc", 15.0))
    print("| tasks x configs | method | " + " | ".join(models) + " | default (auto) / bb | target |")
    print("|---|---|" + "---|" * len(models) + "---|---|")
    for name, counts, method, target in cases:
        sampler = args.sampler if method == "mcmc" else "hmc"
        if method == "mcmc" and sampler != "hmc":  # warm: compile every model's graph once
            for m in models:
                timed(counts, m, method, 1, sampler)
        t = {m: timed(counts, m, method, args.repeats if method == "eb" else 1, sampler) for m in models}
        ratio = t["auto"] / t["bb"] if "auto" in t and "bb" in t else float("nan")
        ok = "met" if t.get("auto", np.inf) < target else "**missed**"
        verdict = f"< {target:g} s: {ok}" if np.isfinite(target) else "-"  # the real counts have no target
        print(f"| {name} | {method} | " + " | ".join(f"{t[m]:.2f} s" for m in models)
              + f" | {ratio:.1f}x | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
