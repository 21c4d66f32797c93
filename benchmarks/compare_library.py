"""Ranking pass@k with a prior made of other real code models' task-level shapes (issue 18; forty-first session).

    python benchmarks/compare_library.py [--real-set heldout] [--m 1,2,5] [--reps 50] [--k 1,10]

A measurement, not a product feature.  Each config's prior for its per-task p is one of a *library* of
shapes, each the empirical distribution of per-task pass rates of another real config on all of its samples
(50 per task), shifted in logit space by d (atoms at 0 and 1 stay atoms: a task a model never or always
solves).  The posterior over (shape, d) on a grid is exact; pass@k is the posterior mean of the mean over
tasks of E[1 - (1 - p)^k | c_i] (per-task posteriors over the shape's tasks).

- ``--real-set heldout``: the 16 configs that chose nothing, with the library of the 12 tuning configs (the
  4 models of the tuning set are not among the held-out models).
- ``--real-set tuning``: each of the 12 tuning configs with the library of the tuning configs of the *other*
  models (its own model at every temperature left out).

Replicates are ``compare.py``'s (same seeds and subsamples), so the taus pair with its runs of ``shared``.
Printed per (m, k): Kendall tau of the library's ranking, of the naive one (ties broken, exact expectation)
and the gain with its paired standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.special import expit, logit, logsumexp
from scipy.stats import binom, kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import load_real, paired_gain, subsample, tau_untied  # noqa: E402

SHIFTS = np.linspace(-3.0, 3.0, 25)


def shifted(p: np.ndarray, d: float) -> np.ndarray:
    """Shift the interior of p by d in logit space; 0 and 1 stay."""
    q = p.copy()
    mid = (q > 0) & (q < 1)
    q[mid] = expit(logit(q[mid]) + d)
    return q


def tables(shapes: np.ndarray, m: int, ks) -> tuple[np.ndarray, np.ndarray]:
    """For every (shape, shift): log P(c = x) for x = 0..m, and E[pass@k | c = x] (shape x shift x (m+1) [x k])."""
    S, D = len(shapes), len(SHIFTS)
    logmarg, post = np.empty((S, D, m + 1)), np.empty((S, D, m + 1, len(ks)))
    x = np.arange(m + 1)[:, None]
    for s, p in enumerate(shapes):
        for i, d in enumerate(SHIFTS):
            q = shifted(p, d)
            like = binom.pmf(x, m, q[None])  # (m+1, tasks of the shape)
            tot = like.sum(1)
            logmarg[s, i] = np.log(np.maximum(tot / q.size, 1e-300))
            pk = np.stack([1 - (1 - q) ** k for k in ks], axis=1)  # (tasks, K)
            post[s, i] = (like @ pk) / np.maximum(tot, 1e-300)[:, None]
    return logmarg, post


def estimate(hist: np.ndarray, logmarg: np.ndarray, post: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Posterior mean pass@k (K,) of one config whose tasks' counts are ``hist`` (m+1,), over the allowed shapes."""
    ll = logmarg[allowed] @ hist  # (S', D)
    w = np.exp(ll - logsumexp(ll))
    per = np.einsum("x,sdxk->sdk", hist / hist.sum(), post[allowed])
    return np.einsum("sd,sdk->k", w, per)


def run(which: str, ms, reps: int, ks) -> list[dict]:
    import bayespass as bp

    lib = load_real(which="tuning")
    shapes = lib.c.values / lib.n.values
    lib_models = np.array([str(c).split("|")[0] for c in lib.config.values])
    counts = lib if which == "tuning" else load_real(which="heldout")
    models = [str(c).split("|")[0] for c in counts.config.values]
    allowed = [lib_models != mod for mod in models]  # never a config's own model (held out: all allowed)
    truth = bp.passk(counts, ks, method="unbiased")
    rows = []
    for m in ms:
        logmarg, post = tables(shapes, m, ks)
        rng = np.random.default_rng(1000 + m)  # compare.py's replicates
        taus = {k: {"library": [], "naive": []} for k in ks}
        for _ in range(reps):
            sub = subsample(counts, m, rng)
            est = np.stack([estimate(np.bincount(cj, minlength=m + 1), logmarg, post, allowed[j])
                            for j, cj in enumerate(sub.c.values)])  # (J, K)
            for i, k in enumerate(ks):
                tv = truth.sel(k=k).values.ravel()
                taus[k]["library"].append(kendalltau(est[:, i], tv).statistic)
                taus[k]["naive"].append(tau_untied(bp.passk(sub, min(k, m), method="unbiased").values.ravel(), tv))
        for k in ks:
            _, gain, se = paired_gain(taus[k]["library"], taus[k]["naive"])
            row = {"set": which, "m": m, "k": k, "reps": reps, "tau_library": float(np.mean(taus[k]["library"])),
                   "tau_naive_untied": float(np.mean(taus[k]["naive"])), "gain": gain, "gain_se": se,
                   "tau_library_reps": taus[k]["library"]}
            rows.append(row)
            print(json.dumps({a: (round(b, 4) if isinstance(b, float) else b) for a, b in row.items()
                              if not a.endswith("_reps")}), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real-set", choices=("tuning", "heldout"), default="heldout")
    ap.add_argument("--m", default="1,2,5")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--k", default="1,10")
    ap.add_argument("--out", default=None, help="write the rows (with per-replicate taus) to this JSON file")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = run(args.real_set, [int(x) for x in args.m.split(",")], args.reps, [int(x) for x in args.k.split(",")])
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
