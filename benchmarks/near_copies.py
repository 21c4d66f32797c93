"""`shared` by EB on two configs whose counts (nearly) coincide, and how often real configs reach the floor.

    python benchmarks/near_copies.py                    # the table of near copies (a minute)
    python benchmarks/near_copies.py --real --reps 10   # the real MBPP pairs the rule checks (a few minutes)

**Near copies.**  Config a: ``tasks`` tasks with p ~ Beta(0.5, 0.5), ``n`` samples each.  Config b: a's counts,
with ``differ`` tasks drawn again (so some of them differ).  ``bp.compare_configs(counts, k=[1, 10])`` (`shared`
by EB) with the product's rule, and with the scores' outer product alone (``CONCORDANT_RATIO = 0``, which
also turns off the copy rule: the code before the sixty-eighth session).  Beside them, a's own ``bb`` band.

**Real pairs.**  On `compare.py`'s subsamples of the real MBPP configs, every pair the rule checks (counts
that differ on at most 5% of the tasks) and the ratio of the outer product to the observed curvature along
their abilities' difference; the floor acts below ``CONCORDANT_RATIO``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import bayespass as bp
from bayespass.models import shared

sys.path.insert(0, str(Path(__file__).resolve().parent))


def near_copy_rows(tasks: int, n: int, seed: int = 1):
    """Yield one row per number of tasks drawn again: bands of a and of a - b, with and without the rule."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.5, tasks)
    ca = rng.binomial(n, p)
    one = bp.fit(bp.make_counts(np.full((1, tasks), n), ca[None], config=["a"]), "bb", "eb", progressbar=False)
    own = bp.passk_curve(one, [1])["eti"].values.ravel()
    for redrawn in (0, 2, 5, 20, tasks):
        cb = ca.copy()
        idx = rng.choice(tasks, redrawn, replace=False)
        cb[idx] = rng.binomial(n, p[idx])
        counts = bp.make_counts(np.full((2, tasks), n), np.stack([ca, cb]), config=["a", "b"])
        row = {"tasks": tasks, "n": n, "differ": int((ca != cb).sum()), "bb": own[1] - own[0]}
        for name, r0 in (("product", shared.CONCORDANT_RATIO), ("outer product alone", 0.0)):
            saved, shared.CONCORDANT_RATIO = shared.CONCORDANT_RATIO, r0
            try:
                cmp = bp.compare_configs(counts, k=[1, 10])
            finally:
                shared.CONCORDANT_RATIO = saved
            s = dict(config="a", config_b="b", k=1)
            band = cmp["passk_eti"].sel(config="a", k=1).values
            diff = cmp["diff_eti"].sel(**s).values
            row[name] = (band[1] - band[0], diff[1] - diff[0], float(cmp["prob_better"].sel(**s)))
        row["paired"] = float(cmp["paired_prob_better"].sel(**s))
        yield row


def real_ratios(which: str, reps: int, ms) -> None:
    """Print, per m, the pairs the rule checks on `compare.py`'s subsamples and their smallest ratio."""
    import compare as C

    counts = C.load_real(which)
    model = shared.Shared()
    for m in ms:
        rng = np.random.default_rng(100 + m)
        ratios = []
        for _ in range(reps):
            sub = C.subsample(counts, m, rng)
            J = sub.sizes["config"]
            for slopes in (True, False):
                res, neg, _, d = model.mode(sub, slopes=slopes)
                lik = shared._outer_scores(res.x, d)
                prior = shared._prior_precision(J, slopes=slopes)
                for j, jj in shared._concordant_pairs(d, J):
                    u = np.zeros(res.x.size)
                    u[j], u[jj] = 1 / np.sqrt(2), -1 / np.sqrt(2)
                    ratios.append(float(u @ lik @ u) / shared._likelihood_curvature(u, res.x, neg, prior))
        low = f"{min(ratios):.3f}" if ratios else "-"
        print(f"| {which} | {m} | {reps} x 2 modes | {len(ratios)} | {low} | "
              f"{sum(r < shared.CONCORDANT_RATIO for r in ratios)} |", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="the real MBPP pairs instead of the near copies")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.real:
        print("| configs | m | subsamples | pairs checked | smallest ratio | floored |\n|---|---|---|---|---|---|")
        real_ratios("tuning", args.reps, (1, 2, 5, 10, 20))
        real_ratios("heldout", args.reps, (1, 2, 5))
        return
    print("| tasks x n | tasks that differ | a's bb band | a's pass@1 band: product / outer product alone | "
          "band of a - b | P(a > b), k = 1 | paired |\n|---|---|---|---|---|---|---|")
    for tasks, n in ((100, 4), (164, 10)):
        for r in near_copy_rows(tasks, n):
            new, old = r["product"], r["outer product alone"]
            print(f"| {tasks} x {n} | {r['differ']} | {r['bb']:.3f} | {new[0]:.3f} / {old[0]:.3f} | "
                  f"{new[1]:.3f} / {old[1]:.3f} | {new[2]:.2f} / {old[2]:.2f} | {r['paired']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
