"""Is the stacked band beyond the samples wider than it should be because of Monte Carlo noise?

The default's band beyond the samples drawn is the hull of its candidates' bands, each computed from the draws
of the stacked mixture that came from that candidate (its share of the 1,600; 5%-95% quantiles from a few
hundred draws).  The hull's ends are a minimum and a maximum of noisy quantiles, so noise could widen it.  This
recomputes every candidate's band from all 1,600 of its own draws and compares, on subsamples of the real MBPP
configs (``calibration.real_cell``: m samples per task, the reference on all 50)::

    python benchmarks/hull_draws_check.py --m 2,5,10 --reps 3      # about a minute per m
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def hull_from_full_draws(f, ks, min_share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper) of shape (config, K): the hull of each candidate's band from all its own draws; and which
    candidate holds each end (index into ``stack_components``)."""
    from bayespass.models.predictive import passk_draws

    comp = f.posterior["component"]
    names = str(f.posterior.attrs["stack_components"]).split(",")
    los, his = [], []
    for j in range(len(names)):
        g = f.copy()
        g.posterior = f.posterior.assign_coords(component=xr.full_like(comp, j))  # every draw from candidate j
        dj = passk_draws(g, ks, max_draws=f.passk.sizes["draw"], seed=f.posterior.attrs.get("seed", 0))
        q = dj["passk"].quantile([0.05, 0.95], dim=("chain", "draw")).transpose("quantile", "config", "k").values
        ok = ((comp == j).mean(("chain", "draw")).values >= min_share)[:, None]  # as the product's hull
        los.append(np.where(ok, q[0], np.inf))
        his.append(np.where(ok, q[1], -np.inf))
    return np.min(los, 0), np.max(his, 0), np.argmin(los, 0), np.argmax(his, 0)


def main() -> None:
    from calibration import real_cell, real_counts

    import bayespass as bp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="2,5,10")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    ks = [1, 10, 50]
    df = real_counts("tuning")
    if df is None:
        sys.exit("data/real_mbpp/counts.csv is missing")
    print("| m | k | configs | width, the product's hull | from all draws | ratio | coverage, product / all draws | "
          "lower end held by | upper end held by | reference's place in the hull (quartiles) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in (int(x) for x in args.m.split(",")):
        counts, ref = real_cell(df, m, args.reps, args.seed, ks)[:2]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = bp.fit(counts, "auto", "eb", k=ks, progressbar=False)
            cur = bp.passk_curve(f, ks)["eti"]
            lo_f, hi_f, at_lo, at_hi = hull_from_full_draws(f, ks, bp.rcParams["stats.stack_min_share"])
        names = str(f.posterior.attrs["stack_components"]).split(",")
        lo_c, hi_c = cur.sel(ci_bound="lower").values, cur.sel(ci_bound="upper").values
        for i, k in enumerate(ks):
            if k <= m:
                continue  # within the samples the band is the mixture's, not a hull
            wc, wf = hi_c[:, i] - lo_c[:, i], hi_f[:, i] - lo_f[:, i]
            cc = np.mean((lo_c[:, i] <= ref[:, i]) & (ref[:, i] <= hi_c[:, i]))
            cf = np.mean((lo_f[:, i] <= ref[:, i]) & (ref[:, i] <= hi_f[:, i]))
            held = [", ".join(f"{names[j]} {np.mean(at[:, i] == j):.0%}" for j in range(len(names))
                              if np.mean(at[:, i] == j) > 0) for at in (at_lo, at_hi)]
            place = np.quantile((ref[:, i] - lo_f[:, i]) / wf, [0.25, 0.5, 0.75])
            print(f"| {m} | {k} | {wc.size} | {wc.mean():.4f} | {wf.mean():.4f} | {np.mean(wf / wc):.3f} | "
                  f"{cc:.3f} / {cf:.3f} | {held[0]} | {held[1]} | {' / '.join(f'{x:.2f}' for x in place)} |",
                  flush=True)


if __name__ == "__main__":
    main()
