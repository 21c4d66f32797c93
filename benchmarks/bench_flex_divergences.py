"""How often flex's chains diverge on the fast path (``method="eb"``), with and without its saturated concentration.

    python benchmarks/bench_flex_divergences.py [--reps 24] [--ms 2,5,10,20] [--json out.json]

Per cell (the six truth families of ``benchmarks/calibration.py`` and the 12 real MBPP configs of
``data/real_mbpp/counts.csv``, subsampled to m per task), one fit of ``reps`` configs (real: 2 replicates of each of
the 12 configs) by ``bp.fit(counts, Flex(kappa_max=...), "eb", seed=0)`` for each variant: ``None`` (kappa =
exp(log kappa), flex before the fifty-third session) and 400 (the default); ``--variants 400`` fits the default
alone.  Printed per cell and variant: the configs whose chains diverged and the divergences, the configs rerun
(for R-hat or, since the seventy-ninth session, for divergences), the share of draws with log kappa > 5, and the
90% band's coverage of the truth, mean width and the posterior mean's MAE at k = 1, 10, 50, 100 (real: k = 1, 10,
50, against the unbiased estimate on all 50 samples).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

VARIANTS = (None, 400.0)
KS = (1, 10, 50, 100)


def cell(fam: str, m: int, reps: int, real):
    """Counts, truth (configs, K) and the k of one cell."""
    import calibration as cal

    if fam == "real":
        counts, truth, _ = cal.real_cell(real, m, max(1, reps // 12), seed=100 + m, ks=cal.REAL_KS)
        return counts, truth, list(cal.REAL_KS)
    counts, truth = cal.sim_cell(fam, m, reps, seed=1000 + m)
    return counts, truth[:, [cal.KS.index(k) for k in KS]], list(KS)


def one(counts, truth, ks, kappa_max) -> dict:
    import calibration as cal

    import bayespass as bp
    from bayespass.models.flex import Flex

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = bp.fit(counts, Flex(kappa_max=kappa_max), "eb", progressbar=False, seed=0)
    secs = time.perf_counter() - t0
    attrs = f.posterior.attrs
    scores = cal.score((*cal._mean_band(f, ks), secs), truth)  # the calibration benchmark's 90% band and scores
    div = np.asarray(attrs["divergences"])
    return dict(kappa_max=kappa_max, secs=round(secs, 1), div_configs=int((div > 0).sum()), divergences=int(div.sum()),
                reruns=int((np.asarray(attrs["rerun"]) > 0).sum()), n_config=int(counts.sizes["config"]),
                log_kappa_gt5=round(float((f.posterior["theta"].values[..., 1] > 5).mean()), 4),
                coverage=np.round(scores["coverage"], 3).tolist(), width=np.round(scores["width"], 4).tolist(),
                mae=np.round(scores["mae"], 4).tolist())


def main():
    import calibration as cal

    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=24)
    ap.add_argument("--ms", default="2,5,10,20")
    ap.add_argument("--json", default="")
    ap.add_argument("--variants", default="none,400", help="flex's kappa_max values to fit (none: no saturation)")
    ap.add_argument("--families", default=None, help="comma-separated (default: every family, and real if present)")
    args = ap.parse_args()
    ms = [int(x) for x in args.ms.split(",")]
    variants = [None if v == "none" else float(v) for v in args.variants.split(",")]
    real = cal.real_counts("tuning")
    fams = list(cal.FAMILIES) + (["real"] if real is not None else [])
    if args.families:
        fams = [f for f in args.families.split(",") if f in fams]
    rows = []
    for fam in fams:
        for m in ms:
            counts, truth, ks = cell(fam, m, args.reps, real)
            for kappa_max in variants:
                row = dict(family=fam, m=m, k=ks, **one(counts, truth, ks, kappa_max))
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    with open(args.json, "w") as fh:
                        json.dump(rows, fh, indent=1)
    for kappa_max in variants:
        mine = [r for r in rows if r["kappa_max"] == kappa_max]
        print(f"kappa_max={kappa_max}: {sum(r['div_configs'] for r in mine)} diverging configs of "
              f"{sum(r['n_config'] for r in mine)} in {sum(r['div_configs'] > 0 for r in mine)} of {len(mine)} "
              f"fits; {sum(r['reruns'] for r in mine)} configs rerun (R-hat or divergences)")


if __name__ == "__main__":
    main()
