"""The default's band on counts where some tasks have fewer samples than k: the hull for every task or for the
short tasks only.

Beyond the samples drawn the default's band (a stack of candidate models) is wider than its mixture's: the
candidates fit the counts alike and disagree on how p is shaped near 0 and 1.  Two band rules
(``rcParams["stats.stack_band"]``), from the same fit and draws:

- ``hull-beyond``: the hull of the candidates' bands wherever more than 1% of the tasks have n < k;
- ``hull-short``: the mixture's band, each end pushed out by as far as the candidates' bands reach beyond the
  mixture's on the part of pass@k that the tasks with n < k make up (all tasks short: the hull; none: the
  mixture's band).

On counts with equal n per task the two are the same band.  They differ on ragged counts: an import with failed
generations, a run that allocated samples adaptively (``bp.allocate``, ``bayespass run --until-width``).  Designs
(``--designs``; every task starts with ``--n-short`` samples, some are then topped up to ``--n-long``):

- ``random``: a random ``--short-share`` of the tasks stays short;
- ``all-pass``: the tasks that passed all their first samples stay short (where the candidates agree);
- ``none-pass``: the tasks that passed none stay short (zero or tiny p: where the candidates disagree most).

Simulation: ``calibration.py``'s six truth families, 300 tasks, ``--reps`` replicates, truth = the replicate's
mean of 1 - (1 - p)^k.  Real MBPP (``--real``): the 12 tuning configs (50 samples on each of 364 tasks),
``--real-reps`` subsamples each (drawn without replacement), reference = the unbiased pass@k on all 50.

    OPENBLAS_NUM_THREADS=1 python benchmarks/ragged_band.py --reps 60 --json sim.json
    OPENBLAS_NUM_THREADS=1 python benchmarks/ragged_band.py --real --real-reps 8 --json real.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import ALPHA, FAMILIES, draw_family, full_reference, real_counts, true_passk  # noqa: E402
from calibration import score as calibration_score  # noqa: E402

RULES = ("hull-beyond", "hull-short", "mixture")
DESIGNS = ("random", "all-pass", "none-pass")


def top_up(n_first, c_first, design: str, share: float, n_long: int, rng) -> np.ndarray:
    """(configs, tasks) bool: which tasks get topped up to ``n_long`` after their first samples."""
    if design == "random":
        return rng.random(n_first.shape) >= share
    if design == "all-pass":
        return c_first < n_first
    if design == "none-pass":
        return c_first > 0
    raise ValueError(f"design={design!r}; allowed: {DESIGNS}")


def bands(counts, ks):
    """Per rule: (mean, lower, upper), each (configs, K), from one fit of the default."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(counts, "auto", "eb", k=list(ks), progressbar=False)
    out = {}
    for rule in RULES:
        with bp.rc_context({"stats.stack_band": rule}):
            cur = bp.passk_curve(fit, list(ks), ci_prob=1 - ALPHA)
        out[rule] = (cur["mean"].values, cur["eti"].sel(ci_bound="lower").values,
                     cur["eti"].sel(ci_bound="upper").values)
    return out


def score(res, truth) -> dict:
    """calibration.py's scores of (mean, lower, upper), and how often the band misses above the truth."""
    out = calibration_score((*res, 0.0), truth)
    del out["seconds"]
    return {**out, "miss_above": (res[1] > truth).mean(0).tolist()}


def sim_cell(family, design, args, ks, seed):
    rng = np.random.default_rng(seed)
    p = np.stack([draw_family(family, rng, r) for r in range(args.reps)])
    n = np.full(p.shape, args.n_short)
    c = rng.binomial(n, p)
    more = top_up(n, c, design, args.short_share, args.n_long, rng)
    c = c + rng.binomial(np.where(more, args.n_long - args.n_short, 0), p)
    n = np.where(more, args.n_long, n)
    counts = bp.make_counts(n, c, config=[f"r{r}" for r in range(args.reps)])
    return counts, true_passk(p, ks), float((~more).mean())


def real_cell(df, design, args, ks, seed):
    rng = np.random.default_rng(seed)
    ns, cs, refs = [], [], []
    for _, g in df.groupby(["model", "temperature"]):
        n_all, c_all = g.n.to_numpy(), g.c.to_numpy()
        ref = full_reference(n_all, c_all, ks)
        for _ in range(args.real_reps):
            first = rng.hypergeometric(c_all, n_all - c_all, args.n_short)  # the first samples, then more of
            extra = rng.hypergeometric(c_all - first, n_all - c_all - (args.n_short - first),  # the rest
                                       args.n_long - args.n_short)
            more = top_up(np.full(n_all.size, args.n_short), first, design, args.short_share, args.n_long, rng)
            ns.append(np.where(more, args.n_long, args.n_short))
            cs.append(first + np.where(more, extra, 0))
            refs.append(ref)
    n = np.stack(ns)
    counts = bp.make_counts(n, np.stack(cs), config=[f"c{i}" for i in range(n.shape[0])])
    return counts, np.stack(refs), float((n < args.n_long).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--real", action="store_true", help="real MBPP instead of the simulations")
    ap.add_argument("--real-reps", type=int, default=8)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--n-short", type=int, default=2)
    ap.add_argument("--n-long", type=int, default=10)
    ap.add_argument("--short-share", type=float, default=0.3)
    ap.add_argument("--k", default="5,10,50")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ks = [int(v) for v in args.k.split(",")]
    df = real_counts("tuning") if args.real else None
    if args.real and df is None:
        sys.exit("data/real_mbpp/counts.csv is absent")
    cells = ([("real MBPP", d) for d in args.designs.split(",")] if args.real
             else [(f, d) for f in args.families.split(",") for d in args.designs.split(",")])
    print(f"n = {args.n_short} on every task, then {args.n_long} on those topped up; k = {ks}; 90% bands\n")
    print("| truth | design | short tasks | rule | coverage (k = " + " / ".join(map(str, ks))
          + ") | width | interval score | misses above the truth |")
    print("|---|---|---|---|---|---|---|---|")
    rows, t0 = [], time.perf_counter()
    for i, (family, design) in enumerate(cells):
        seed = args.seed * 1000 + i
        counts, truth, short = (real_cell(df, design, args, ks, seed) if args.real
                                else sim_cell(family, design, args, ks, seed))
        for rule, res in bands(counts, ks).items():
            s = score(res, truth)
            rows.append({"family": family, "design": design, "short_share": short, "rule": rule,
                         "configs": int(truth.shape[0]), "k": ks, **s})
            print(f"| {family} | {design} | {short:.0%} | {rule} | "
                  + " / ".join(f"{v:.2f}" for v in s["coverage"]) + " | "
                  + " / ".join(f"{v:.4f}" for v in s["width"]) + " | "
                  + " / ".join(f"{v:.4f}" for v in s["interval_score"]) + " | "
                  + " / ".join(f"{v:.2f}" for v in s["miss_above"]) + " |", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
