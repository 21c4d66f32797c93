"""Adaptive allocation against uniform sampling on real MBPP: samples to reach a band width, and whether the final
band covers.

``allocate.py`` measures this in simulation.  Here the samples are real: the 12 tuning configs of real MBPP (50
samples on each of 364 tasks).  A path draws each task's samples without replacement in a random order of its 50
outcomes (``stop_bias.sample_order``), starts with ``--n0`` per task, and then works in rounds of T // 2 samples
until the ``ci_prob`` band of pass@k is at most ``--width`` wide (or no task has samples left):

* uniform: one more sample to each of the half of the tasks with the fewest;
* adaptive: ``bp.allocate`` of the current fit (the default model unless ``--model``), no task past its 50.

The truth is the unbiased pass@k on all 50 samples of each task.  Each config's path is fitted on its own.

    OPENBLAS_NUM_THREADS=1 python benchmarks/allocate_real.py --reps 1 [--configs 0-5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

import bayespass as bp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allocate import band, uniform_round  # noqa: E402
from calibration import full_reference, real_counts  # noqa: E402
from stop_bias import sample_order  # noqa: E402


def next_round(arm: str, fit, n, cap: int, k: int, rng) -> np.ndarray:
    """The round's extra samples per task (T // 2 in all, none past ``cap``)."""
    T = n.size
    if arm == "uniform":
        extra = uniform_round(np.where(n >= cap, np.iinfo(np.int64).max, n))
        return np.minimum(extra, cap - n)
    max_n = xr.DataArray(np.full((1, T), cap), dims=("config", "task"),
                         coords={"config": fit.observed_data.config.values, "task": fit.observed_data.task.values})
    return bp.allocate(fit, k=k, budget=T // 2, max_n=max_n, seed=int(rng.integers(1 << 30))).n_more.values[0]


def run_path(order: np.ndarray, arm: str, args, rng) -> tuple:
    """(samples used, reached the width, lo, hi) of one path; ``order`` (task, 50) the outcomes in draw order."""
    T, cap = order.shape
    won = np.concatenate([np.zeros((T, 1), np.int64), np.cumsum(order, axis=1)], axis=1)  # passes in the first j
    n = np.full(T, args.n0)
    for _ in range(args.max_rounds):
        fit, lo, hi = band(n, won[np.arange(T), n], args.model, args.k, args.ci_prob)
        if hi - lo <= args.width or (n >= cap).all():
            break
        extra = next_round(arm, fit, n, cap, args.k, rng)
        if not extra.any():
            break
        n = n + extra
    return int(n.sum()), bool(hi - lo <= args.width), float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--configs", default="0-11", help="which of the 12 configs, e.g. 0-5")
    ap.add_argument("--n0", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--width", type=float, default=0.03)
    ap.add_argument("--ci-prob", type=float, default=0.9)
    ap.add_argument("--model", default="auto")
    ap.add_argument("--max-rounds", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--band-rule", default=None, help="rcParams['stats.stack_band'] (default: the product's)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.band_rule:
        bp.rcParams["stats.stack_band"] = args.band_rule
    df = real_counts("tuning")
    if df is None:
        sys.exit("data/real_mbpp/counts.csv is absent")
    first, last = (int(v) for v in args.configs.split("-"))
    groups = list(df.groupby(["model", "temperature"]))[first:last + 1]
    print(f"real MBPP, {len(groups)} configs x {args.reps} paths, n0 = {args.n0}, pass@{args.k}, "
          f"{args.ci_prob:.0%} band width {args.width}, model {args.model} "
          f"(band rule {bp.rcParams['stats.stack_band']})\n")
    rows, t0 = [], time.perf_counter()
    for j, ((model, temp), g) in enumerate(groups, start=first):
        n_all, c_all = g.n.to_numpy(), g.c.to_numpy()
        true = float(full_reference(n_all, c_all, [args.k])[0])
        for r in range(args.reps):
            rng = np.random.default_rng([args.seed, j, r])
            order = sample_order(c_all, int(n_all.max()), rng)
            res = {arm: run_path(order, arm, args, np.random.default_rng([args.seed, r, len(arm)]))
                   for arm in ("uniform", "adaptive")}
            rows.append({"config": f"{model}|T={temp}", "rep": r, "truth": true,
                         **{f"{a}_{key}": v for a, out in res.items()
                            for key, v in zip(("samples", "reached", "lo", "hi"), out, strict=True)}})
            row = rows[-1]
            print(f"  {row['config']} r{r}: uniform {row['uniform_samples']} samples, adaptive "
                  f"{row['adaptive_samples']} ({1 - row['adaptive_samples'] / row['uniform_samples']:.0%} fewer); "
                  f"covers {row['uniform_lo'] <= true <= row['uniform_hi']} / "
                  f"{row['adaptive_lo'] <= true <= row['adaptive_hi']}", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    u = np.array([r["uniform_samples"] for r in rows], float)
    a = np.array([r["adaptive_samples"] for r in rows], float)
    cov = {arm: np.mean([r[f"{arm}_lo"] <= r["truth"] <= r[f"{arm}_hi"] for r in rows]) for arm in ("uniform",
                                                                                                    "adaptive")}
    print(f"\nuniform {u.mean():.0f}, adaptive {a.mean():.0f} samples on average: {1 - a.mean() / u.mean():.0%} fewer; "
          f"final band covers {cov['uniform']:.2f} / {cov['adaptive']:.2f}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
