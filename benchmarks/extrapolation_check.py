"""Can the data tell which candidate extrapolates right?  A check on real MBPP (issue 15).

The default's band beyond the samples drawn is the hull of its candidates' bands, because stacking weighs
them by how they fit the counts seen, which says nothing about k > m.  A cross-validation of the
extrapolation itself would: thin each task's m = 5 samples to 2 (hypergeometric), fit every candidate on
the 2, and score its pass@5 against the unbiased pass@5 of the 5.  This script asks whether that score picks
the candidate whose pass@50 (fitted on the 5) is closest to the reference on all 50 samples, per config and
replicate.

    OPENBLAS_NUM_THREADS=1 python benchmarks/extrapolation_check.py --reps 5

Needs ``data/real_mbpp/counts.csv`` (the 12 configs with 50 samples per task).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import calibration as cal  # noqa: E402

import bayespass as bp  # noqa: E402

CANDS = ["bb", "zoibb", "flex", "lnorm"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=str(cal.REPO / "benchmarks" / "results" / "extrapolation_check.json"))
    args = ap.parse_args()
    df = cal.real_counts()
    if df is None:
        sys.exit("data/real_mbpp/counts.csv is missing")
    warnings.simplefilter("ignore")
    counts, ref, _ = cal.real_cell(df, 5, args.reps, seed=11)
    n5, c5 = counts.n.values, counts.c.values
    c2 = np.random.default_rng(12).hypergeometric(c5, n5 - c5, 2)
    thin = bp.make_counts(np.full(c2.shape, 2), c2, config=list(counts.config.values))
    obs5 = (c5 > 0).mean(1)  # the unbiased pass@5 of the 5 samples
    ref50 = ref[:, list(cal.REAL_KS).index(50)]
    e50, ext = [], []
    for name in CANDS:
        full = bp.passk_curve(bp.fit(counts, name, "eb", k=[50], progressbar=False), [50])["mean"].values[:, 0]
        cv = bp.passk_curve(bp.fit(thin, name, "eb", k=[5], progressbar=False), [5])["mean"].values[:, 0]
        e50.append(full - ref50)
        ext.append(cv - obs5)
        print(f"{name}: MAE of pass@50 from m = 5 {np.abs(e50[-1]).mean():.4f}; "
              f"MAE of pass@5 from m = 2 {np.abs(ext[-1]).mean():.4f}", flush=True)
    e50, ext = np.array(e50), np.array(ext)
    pick, best = np.abs(ext).argmin(0), np.abs(e50).argmin(0)
    cols = np.arange(e50.shape[1])
    res = {"configs": int(e50.shape[1]), "picked_is_best": float((pick == best).mean()), "chance": 1 / len(CANDS),
           "mae50_picked": float(np.abs(e50[pick, cols]).mean()),
           "mae50_each": dict(zip(CANDS, np.abs(e50).mean(1).tolist(), strict=True)),
           "mae50_oracle": float(np.abs(e50).min(0).mean()),
           "corr_signed": dict(zip(CANDS, [float(np.corrcoef(ext[i], e50[i])[0, 1]) for i in range(len(CANDS))],
                                   strict=True))}
    print(json.dumps(res, indent=1))
    Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
