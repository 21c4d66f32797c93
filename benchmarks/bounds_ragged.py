"""Assumption-free bounds (``bp.passk_bounds``) on ragged counts: grouped by n against thinned to the smallest n.

A config whose tasks have different numbers of samples (generation failures, an interrupted run) used to be
thinned to its smallest n, so one sample on a few tasks gave the bounds of one sample per task.  The bounds
now split the tasks into groups by n (``bayespass.stats.bounds.sample_groups``) while that raises the share
of samples used by ``GROUP_GAIN``.  This measures, on the same replicates, coverage and width of three rules:

- ``thin``: every task thinned to the smallest n (``GROUP_GAIN = inf``, the code before);
- ``split``: every distinct n its own group (``GROUP_GAIN = 0``, up to ``MAX_GROUPS``);
- ``default``: today's ``GROUP_GAIN``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bounds_ragged.py --reps 40

Truth: the replicate's own tasks' mean pass@k.  300 tasks; p ~ Beta(0.4, 0.6) or zero/one-inflated
(20% at 0, 30% at 1, the rest Beta(0.5, 1.5)); n = 10 with 5% of tasks at 1, 20% at 2, or 50% at 5.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import bayespass as bp
from bayespass.stats import bounds

KS = np.array([1, 5, 10, 50, 100])
SHAPES = {"5% at n=1": (0.05, 1), "20% at n=2": (0.20, 2), "50% at n=5": (0.50, 5)}


def draw_p(family: str, rng: np.random.Generator, t: int) -> np.ndarray:
    if family == "beta":
        return rng.beta(0.4, 0.6, t)
    u = rng.random(t)
    return np.where(u < 0.2, 0.0, np.where(u < 0.5, 1.0, rng.beta(0.5, 1.5, t)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rules = {"thin": float("inf"), "split": 0.0, "default": bounds.GROUP_GAIN}
    rng = np.random.default_rng(args.seed)
    rows = []
    for family in ("beta", "zoib"):
        for shape, (share, low) in SHAPES.items():
            hits = {r: [] for r in rules}
            widths = {r: [] for r in rules}
            for _ in range(args.reps):
                p = draw_p(family, rng, args.tasks)
                n = np.full(args.tasks, 10)
                n[rng.random(args.tasks) < share] = low
                counts = bp.make_counts(n[None], rng.binomial(n, p)[None])
                truth = (1 - (1 - p[:, None]) ** KS).mean(0)
                for rule, gain in rules.items():
                    saved, bounds.GROUP_GAIN = bounds.GROUP_GAIN, gain
                    try:
                        lo, hi = bp.passk_bounds(counts, KS).values[0].T
                    finally:
                        bounds.GROUP_GAIN = saved
                    hits[rule].append((lo <= truth) & (truth <= hi))
                    widths[rule].append(hi - lo)
            for rule in rules:
                row = {"family": family, "shape": shape, "rule": rule, "k": KS.tolist(), "reps": args.reps,
                       "coverage": np.mean(hits[rule], 0).round(3).tolist(),
                       "width": np.mean(widths[rule], 0).round(3).tolist()}
                rows.append(row)
                print(f"{family:5s} {shape:11s} {rule:8s} coverage {row['coverage']} width {row['width']}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
