"""Do `shared`'s per-config slopes predict held-out tasks better?  PSIS-LOO and stacking against their evidence.

Issue 18's ranking target: with the slopes always on, the joint model ranks real MBPP configs by pass@10 far
better from one sample per task (benchmarks/RESULTS.md, thirty-first session), but their evidence weight is
0.002-0.08 there and the default leaves them out.  This asks the other model-weighing question: on compare.py's
replicates (the same seeds), the leave-one-task-out predictive density of every task's counts (all configs
together, the difficulty integrated out on the mode's grid), from 400 draws of each model's Laplace
approximation, Pareto-smoothed; the elpd difference and the stacking weight of the model with slopes.

    OPENBLAS_NUM_THREADS=1 python benchmarks/slopes_loo.py --reps 20 --m 1,2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def task_loglik(mode, d, J: int, draws: int, rng) -> np.ndarray:
    """(draws, distinct tasks): log p(task's counts | theta) under the Laplace draws of ``mode``."""
    from scipy.special import logsumexp

    from bayespass.models.shared import _lik, _log_g, _split

    res, _, bounds, _, cov, _ = mode
    th = np.clip(rng.multivariate_normal(res.x, cov, size=draws, method="cholesky"), bounds[:, 0], bounds[:, 1])
    out = np.empty((draws, d.w.size))
    for s in range(draws):
        alpha, log_phi, beta, log_s = _split(th[s], J)
        ll = _lik(alpha, np.exp(log_phi), d, d.x, np.exp(log_s))[0]
        out[s] = logsumexp(ll.sum(0) + _log_g(beta, d.hat)[None, :], axis=1)
    return out


def replicate(sub, seed: int, draws: int) -> dict:
    """Evidence weight, LOO elpd difference (slopes - none) and the stacking weight of slopes on one replicate."""
    import arviz as az
    from scipy.special import logsumexp

    from bayespass.models.shared import Shared, _laplace_cov
    from bayespass.stats.loo import stacking_weights

    J = sub.sizes["config"]
    with_, without, weight, log_bf = Shared().modes(sub)
    d = with_[3]
    if without[3].x.size != d.x.size:  # the slopes needed a finer grid: both on it
        without = Shared().mode(sub, data=d, slopes=False)
        without = without + _laplace_cov(without[0].x, d, J)
    rng = np.random.default_rng(seed)
    elpd, khat = [], []
    for mode in (with_, without):
        ll = task_loglik(mode, d, J, draws, rng)
        lw, k = az.psislw(-ll.T.copy())
        elpd.append(logsumexp(ll.T + lw, axis=1))
        khat.append(float(k.max()))
    elpd = np.array(elpd)
    return {"evidence_weight": weight, "log_bayes_factor": log_bf, "elpd_diff": float(d.w @ (elpd[0] - elpd[1])),
            "stacking_weight": float(stacking_weights(elpd, d.w, concentration=1.0)[0]), "khat_max": max(khat)}


def main(argv=None) -> None:
    from compare import load_real

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--m", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    counts = load_real()
    rows = []
    for m in args.m:
        rng = np.random.default_rng(1000 + m)  # compare.py's replicates
        for r in range(args.reps):
            n, c = counts.n.values, counts.c.values
            sub = counts.copy(data={"n": np.full_like(n, m), "c": rng.hypergeometric(c, n - c, np.full_like(n, m))})
            t0 = time.perf_counter()
            row = {"m": m, "rep": r, **replicate(sub, r, args.draws)}
            rows.append(row)
            print(json.dumps(row | {"seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    print("| m | replicates | evidence weight of slopes (median, max) | LOO elpd, slopes - none (median, max) | "
          "stacking weight of slopes (median, max) | largest Pareto k |")
    print("|---|---|---|---|---|---|")
    for m in args.m:
        mine = [x for x in rows if x["m"] == m]
        col = lambda key, mine=mine: np.array([x[key] for x in mine])  # noqa: E731
        print(f"| {m} | {len(mine)} | {np.median(col('evidence_weight')):.3f}, {col('evidence_weight').max():.3f} | "
              f"{np.median(col('elpd_diff')):+.1f}, {col('elpd_diff').max():+.1f} | "
              f"{np.median(col('stacking_weight')):.3f}, {col('stacking_weight').max():.3f} | "
              f"{col('khat_max').max():.2f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
