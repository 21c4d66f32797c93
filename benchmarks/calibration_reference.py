"""How much the real-data reference of the calibration benchmark flatters coverage, measured where the truth is known.

The real-data cells of ``calibration.py`` (issue 15's design) subsample m of
the 50 samples of each task and compare the band with the unbiased pass@k on
*all 50*. The m samples are part of those 50, so the reference moves with the
data the band was fitted to: the band is judged against a target that shares
its noise, and its coverage looks higher than it is (for pass@1 at m = 20 the
error against the reference has the variance 1/20 - 1/50 instead of 1/20 of
the error against the truth).

This script measures the effect in a world with the same per-task success
rates as the real generations, where the truth is known: per real config, each
task's p is its observed rate c/50; a replicate draws 50 samples per task from
p, then m of them without replacement (the real design). The same band is
scored against

- the **truth**, mean_i [1 - (1 - p_i)^k] (any k, also 100 and 1000), and
- the **reference** of the real design, the unbiased pass@k on the 50 samples (k <= 50).

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/calibration_reference.py [--reps 10] [--ms 1,2,5,10,20]
       [--models naive,bb,auto] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402

try:  # run as a script from the repository root or as benchmarks.calibration_reference
    from calibration import ALPHA, evaluate, real_counts
except ImportError:  # pragma: no cover
    from benchmarks.calibration import ALPHA, evaluate, real_counts

KS = (1, 10, 50, 100, 1000)
REF_KS = (1, 10, 50)


def world_cell(df, m: int, reps: int, seed: int):
    """Counts (configs*reps x tasks), truth (.., KS) and the real design's reference (.., REF_KS)."""
    rng = np.random.default_rng(seed)
    ns, cs, truths, refs, names = [], [], [], [], []
    for (model, temp), g in df.groupby(["model", "temperature"]):
        p = g.c.to_numpy() / g.n.to_numpy()
        truth = [float(np.mean(1 - (1 - p) ** k)) for k in KS]
        for r in range(reps):
            c50 = rng.binomial(50, p)
            c = rng.hypergeometric(c50, 50 - c50, m)
            refs.append(bp.passk(bp.make_counts(np.full((1, p.size), 50), c50[None]), list(REF_KS),
                                 method="unbiased").values[0])
            truths.append(truth)
            ns.append(np.full(p.size, m))
            cs.append(c)
            names.append(f"{model}|T={temp}|r{r}")
    counts = bp.make_counts(np.stack(ns), np.stack(cs), config=names)
    return counts, np.array(truths), np.stack(refs)


def scores(res, target, ks):
    """Coverage, width, interval score and MAE of one model's (mean, lo, hi) against a target, per k."""
    mean, lo, hi = (a[:, : len(ks)] for a in res[:3])
    covered = (lo <= target) & (target <= hi)
    interval = (hi - lo) + 2 / ALPHA * (np.maximum(lo - target, 0) + np.maximum(target - hi, 0))
    has_band = bool(np.isfinite(lo).all())
    return {"coverage": np.mean(covered, 0).tolist() if has_band else [None] * len(ks),
            "width": np.mean(hi - lo, 0).tolist(), "interval_score": np.mean(interval, 0).tolist(),
            "mae": np.mean(np.abs(mean - target), 0).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--ms", default="1,2,5,10,20")
    ap.add_argument("--models", default="naive,bb,auto")
    ap.add_argument("--json", default="calibration_reference.json")
    args = ap.parse_args()
    df = real_counts()
    if df is None:
        raise SystemExit("data/real_mbpp/counts.csv is missing")
    n_cfg = df.groupby(["model", "temperature"]).ngroups
    rows, t0 = [], time.perf_counter()
    for m in map(int, args.ms.split(",")):
        counts, truth, ref = world_cell(df, m, args.reps, seed=2000 + m)
        for name, res in evaluate(counts, truth, KS, args.models.split(",")).items():
            for target_name, target, ks in (("truth", truth, KS), ("reference", ref, REF_KS)):
                row = {"m": m, "model": name, "target": target_name, "k": list(ks), "reps": args.reps,
                       "configs": n_cfg, "tasks": int(df.task.nunique()), **scores(res, target, ks)}
                rows.append(row)
                cov = " ".join("  -  " if c is None else f"{c:.2f}" for c in row["coverage"])
                print(f"m={m:2d} {name:6s} vs {target_name:9s} cov {cov} | width "
                      f"{' '.join(f'{w:.3f}' for w in row['width'])} | MAE {' '.join(f'{w:.3f}' for w in row['mae'])}",
                      flush=True)
    Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} rows written to {args.json}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
