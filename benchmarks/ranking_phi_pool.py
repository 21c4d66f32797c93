"""Would pooling the dispersions of siblings rank pass@10 better?  A prototype outside the product.

`shared` pools siblings' *abilities* (sixtieth session).  Their dispersions ``log phi_j`` have only the common
level of all configs.  On all samples, a model's log phi rises with temperature (claude_sonnet_4 -2.7 / -1.3 /
-0.9 at T = 0.2 / 0.6 / 1.0, gpt_3_5 -1.5 / -0.3 at 0.2 / 0.6), and from two samples per task each config's is
known to about +-0.45.  This script replaces the dispersions' prior precision by that of

    log phi_j = lambda + u_model + gamma (T_j - 0.6) + e_j,
    e_j ~ N(0, r^2),  u ~ N(0, 1.5^2 - r^2),  gamma ~ N(0, sg^2),  lambda ~ N(log 0.6, PHI_LEVEL_SD^2)

(``--r 1.5 --sg 0`` is the product's prior), or with ``--oracle`` by a prior pinned at the dispersions fitted on
all samples (an upper bound no prior reaches), and scores the ranking as ``compare.py`` does, on its replicates
and seeds.  Run (about 4 minutes each)::

    python benchmarks/ranking_phi_pool.py --real-set heldout --m 2 --reps 20 --r 1.5 --sg 0    # the product
    python benchmarks/ranking_phi_pool.py --real-set heldout --m 2 --reps 20 --r 0.6 --sg 2
    python benchmarks/ranking_phi_pool.py --real-set heldout --m 2 --reps 20 --oracle
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def phi_precision(counts, r: float, sg: float) -> np.ndarray:
    """Precision of the configs' log phi under the pooled prior above (lambda integrated out)."""
    from bayespass.models import shared as S

    J = counts.sizes["config"]
    T = np.nan_to_num(counts["temperature"].values.astype(float) - 0.6)
    labels = np.unique(counts["model"].values.astype(str), return_inverse=True)[1]
    G = np.eye(labels.max() + 1)[labels]
    s2 = S._PRIOR["log_phi"][1] ** 2
    C = r**2 * np.eye(J) + (s2 - r**2) * G @ G.T + S.PHI_LEVEL_SD**2 + sg**2 * np.outer(T, T)
    return np.linalg.inv(C)


def main(argv=None):
    from compare import load_real, replicate

    import bayespass as bp
    from bayespass.models import shared as S

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-set", default="heldout", choices=("tuning", "heldout"))
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--r", type=float, default=1.5, help="a config's sd about its model's level (1.5: no pooling)")
    ap.add_argument("--sg", type=float, default=0.0, help="prior sd of the temperature trend (per unit of T)")
    ap.add_argument("--oracle", action="store_true", help="pin log phi at the fit on all samples")
    args = ap.parse_args(argv)
    counts = load_real(args.real_set)
    J = counts.sizes["config"]
    truth = bp.passk(counts, [1, 10], method="unbiased")
    if args.oracle:
        with_, without, weight, _ = S.Shared().modes(counts)
        S._PRIOR["log_phi"] = (S._split((with_ if weight >= 0.5 else without)[0].x, J)[1], 1.5)
        P = 1e4 * np.eye(J)
    else:
        P = phi_precision(counts, args.r, args.sg)
    S._phi_precision = lambda J_: P
    rng = np.random.default_rng(1000 + args.m)  # compare.py's replicates
    rows = []
    for rep in range(args.reps):
        res = replicate(counts, truth, args.m, [1, 10], rng, "shared", "eb", seed=rep)
        rows.append([res["tau"][k][n] for k in (1, 10) for n in ("bayespass", "naive_untied")]
                    + [float(np.mean(res["band"][10]["cover"]))])
        print(rep, np.round(rows[-1], 3), file=sys.stderr, flush=True)
    o = np.array(rows)
    for col, k in ((0, 1), (2, 10)):
        g = o[:, col] - o[:, col + 1]
        print(f"k = {k}: tau {o[:, col].mean():.3f}, gain over naive {g.mean():+.3f} "
              f"(s.e. {g.std(ddof=1) / np.sqrt(len(g)):.3f})")
    print(f"band coverage at k = 10: {o[:, 4].mean():.3f}")


if __name__ == "__main__":
    main()
