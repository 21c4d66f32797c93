"""Real MBPP configs with a few tasks short of samples: the bounds and the default's band, each rule beside the other.

``data/real_mbpp/counts.csv`` holds 34 configs; a few have one to three tasks with fewer samples than the rest
(a generation that failed, or executions cut short).  For those configs this prints

- ``bp.passk_bounds`` with every task thinned to the smallest n (``GROUP_GAIN = inf``, the code before the
  thirtieth session) and grouped by n (today's);
- the width of the default's band (``bp.fit(counts, "auto", "eb")``) with pass@k counted as identified up to
  the smallest n (``IDENTIFIED_SHARE = 0``, the code before) and up to ``data.counts.identified_k`` (today's).

    OPENBLAS_NUM_THREADS=1 python benchmarks/ragged_real.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/ragged_real.py --sim 60   # and coverage in simulation

``--sim R``: the same two band rules on simulated counts with known truth, 300 tasks of which 3 (1%) have one
sample and the rest 10, R replicates of three truth families of ``calibration.py``: coverage and width of
the default's 90% band.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

import bayespass as bp
from bayespass.data import counts as counts_mod
from bayespass.stats import bounds
from bayespass.validate import as_k

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default=str(ROOT / "data" / "real_mbpp" / "counts.csv"))
    ap.add_argument("--k", default="1,10,50,100")
    ap.add_argument("--sim", type=int, default=0, help="replicates of the simulation check (0: none)")
    args = ap.parse_args()
    ks = as_k(args.k)
    if args.sim:
        simulate(args.sim, ks)
        return
    counts = bp.read_counts(args.counts)
    n = counts.n.values
    ragged = [i for i in range(n.shape[0]) if np.unique(n[i][n[i] > 0]).size > 1
              and bounds.sample_groups(n[i][n[i] > 0]).min() < min(int(n[i].max()), bounds.MAX_M)]
    sub = counts.isel(config=ragged)
    print(f"{len(ragged)} of {n.shape[0]} configs have tasks with fewer samples than the rest:")
    for i in ragged:
        vals, cnt = np.unique(n[i][n[i] > 0], return_counts=True)
        parts = [f"{c} tasks at n = {v}" for v, c in zip(vals, cnt, strict=True)]
        print(f"  {counts.config.values[i]}: " + ", ".join(parts))
    saved = bounds.GROUP_GAIN
    try:
        bounds.GROUP_GAIN = float("inf")
        thin = bp.passk_bounds(sub, ks)
    finally:
        bounds.GROUP_GAIN = saved
    grouped = bp.passk_bounds(sub, ks)
    print("\nno-prior bounds, thinned to the smallest n -> grouped by n:")
    for j, cfg in enumerate(sub.config.values):
        cells = [f"k={k}: [{thin.values[j, i, 0]:.3f}, {thin.values[j, i, 1]:.3f}] -> "
                 f"[{grouped.values[j, i, 0]:.3f}, {grouped.values[j, i, 1]:.3f}]" for i, k in enumerate(ks)]
        print(f"  {cfg} (groups {grouped.attrs['m_levels'][j]}): " + "; ".join(cells))
    widths = {}
    saved = counts_mod.IDENTIFIED_SHARE
    for share in (0.0, saved):
        eti = band_under(sub, ks, share)
        widths[share] = (eti.sel(ci_bound="upper") - eti.sel(ci_bound="lower")).values
    print(f"\nwidth of the default's 90% band, identified up to the smallest n -> up to identified_k "
          f"(IDENTIFIED_SHARE = {saved}):")
    for j, cfg in enumerate(sub.config.values):
        cells = [f"k={k}: {widths[0.0][j, i]:.4f} -> {widths[saved][j, i]:.4f}" for i, k in enumerate(ks)]
        print(f"  {cfg}: " + "; ".join(cells))


def band_under(counts, ks, share: float):
    """The default's 90% band (``eti``) with ``IDENTIFIED_SHARE = share``: the fit stores its draws (and their
    k_identified), so one fit per rule, with the same seed."""
    saved = counts_mod.IDENTIFIED_SHARE
    counts_mod.IDENTIFIED_SHARE = share
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = bp.fit(counts, "auto", "eb", seed=1, k=ks, progressbar=False)
        return bp.passk_curve(fit, ks)["eti"]
    finally:
        counts_mod.IDENTIFIED_SHARE = saved


def simulate(reps: int, ks) -> None:
    """Coverage of the default's band under both rules, 1% of 300 tasks at n = 1 and the rest at 10."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from calibration import draw_family, true_passk

    saved = counts_mod.IDENTIFIED_SHARE
    for family in ("two-beta", "logit-normal", "near-deterministic"):
        rng = np.random.default_rng(7)
        p = np.stack([draw_family(family, rng, r) for r in range(reps)])
        n = np.full(p.shape, 10)
        n[:, :3] = 1
        counts = bp.make_counts(n, rng.binomial(n, p), config=[f"r{r}" for r in range(reps)])
        truth = true_passk(p, ks)
        for share in (0.0, saved):
            eti = band_under(counts, ks, share)
            lo, hi = eti.sel(ci_bound="lower").values, eti.sel(ci_bound="upper").values
            cov = ((lo <= truth) & (truth <= hi)).mean(0)
            wid = (hi - lo).mean(0)
            print(f"{family:18s} IDENTIFIED_SHARE={share:<4} coverage " + " ".join(f"{v:.2f}" for v in cov)
                  + "  width " + " ".join(f"{v:.4f}" for v in wid) + f"  (k = {[int(k) for k in ks]})", flush=True)


if __name__ == "__main__":
    main()
