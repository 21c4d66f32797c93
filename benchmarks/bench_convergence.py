"""How often the fast path's short chains fail the convergence gate, per candidate of the default.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_convergence.py [--draws 100 --warmup 200]
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_convergence.py --method mcmc   # bb too; gate R-hat 1.01

Per candidate (zoibb, flex, lnorm; bb always passes) and cell, the share of configs whose split
R-hat over 16 chains exceeds 1.05 for a gated parameter or for the dataset pass@k at k = 1, 10, 100
where the chains' draws are kept (not importance-resampled), the shares resampled and rerun, and the
largest R-hat over kept chains.  Cells: the 12 real MBPP configs (one subsample at m = 5 and 20; skipped
without ``data/real_mbpp``) and 12 simulated configs of three truth families of
``benchmarks/calibration.py``.  A fit whose gate fails warns (``FitWarning``); this measures how often.
With ``--method mcmc`` (the default MCMC, bayespass's HMC with its own settings) the gate is MCMC's
(R-hat <= 1.01, ESS bulk >= 400), bb is measured too, and the columns are the share failing it after the
reruns, the share rerun, the largest R-hat and the smallest ESS.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
import zlib
from pathlib import Path

import arviz as az
import numpy as np

import bayespass as bp
from bayespass.models.base import get_model
from bayespass.models.fit import _gated_named

sys.path.insert(0, str(Path(__file__).parent))
import calibration as cal  # noqa: E402

CANDS = ("zoibb", "flex", "lnorm")


def cells():
    """(label, counts) of every cell measured."""
    df = cal.real_counts()
    if df is not None:
        for m in (5, 20):
            yield f"real MBPP, m = {m}", cal.real_cell(df, m, 1, seed=11)[0]
    for fam in ("logit-normal", "zoib-mbpp", "two-beta"):
        for m in (5, 20):
            yield f"{fam}, m = {m}", cal.sim_cell(fam, m, 12, seed=zlib.crc32(f"{fam}{m}".encode()))[0]


def _per_config(fit, stat, worst: str) -> np.ndarray:
    """``stat`` (az.rhat or az.ess) per config, its ``worst`` ("max" or "min") over the gate's quantities."""
    post = _gated_named(fit.posterior, get_model(fit.posterior.attrs["bayespass_model"]))
    on_post = getattr(stat(post).to_array(), worst)("variable").values
    on_passk = getattr(stat(fit.passk[["passk_mean"]]).to_array(), worst)(("variable", "k")).values
    return getattr(np.stack([on_post, on_passk]), worst)(0)


def rhat_per_config(fit) -> np.ndarray:
    """Largest split R-hat per config over the named parameters and pass@k at k = 1, 10, 100."""
    return _per_config(fit, az.rhat, "max")


def ess_per_config(fit) -> np.ndarray:
    """Smallest bulk ESS per config over the named parameters and pass@k at k = 1, 10, 100."""
    return _per_config(fit, az.ess, "min")


def main_mcmc():
    """The default MCMC's gate per candidate and cell (``--method mcmc``)."""
    rhat_max, ess_min = bp.rcParams["mcmc.rhat_max"], bp.rcParams["mcmc.ess_min"]
    cands = ("bb",) + CANDS
    print(f"method = mcmc (bayespass HMC, default settings); gate R-hat <= {rhat_max}, ESS bulk >= {ess_min:.0f}\n")
    print("| cell | " + " | ".join(f"{c}: fail / rerun (max R-hat, min ESS)" for c in cands) + " | seconds |")
    print("|---|" + "---|" * (len(cands) + 1))
    for label, counts in cells():
        t0, row = time.perf_counter(), []
        for name in cands:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = bp.fit(counts, name, "mcmc", k=[1, 10, 100], progressbar=False)
            r, e = rhat_per_config(fit), ess_per_config(fit)
            rerun = np.asarray(fit.posterior.attrs.get("rerun", np.zeros_like(r)), bool)
            row.append(f"{np.mean((r > rhat_max) | (e < ess_min)):.2f} / {rerun.mean():.2f} "
                       f"({r.max():.3f}, {e.min():.0f})")
        print(f"| {label} | " + " | ".join(row) + f" | {time.perf_counter() - t0:.0f} |", flush=True)


def main():
    global CANDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=bp.rcParams["eb.draws"])
    ap.add_argument("--warmup", type=int, default=bp.rcParams["eb.warmup"])
    ap.add_argument("--method", choices=("eb", "mcmc"), default="eb")
    ap.add_argument("--models", default=",".join(CANDS), help="candidates measured (comma-separated)")
    args = ap.parse_args()
    CANDS = tuple(args.models.split(","))
    if args.method == "mcmc":
        return main_mcmc()
    bp.rcParams["eb.draws"], bp.rcParams["eb.warmup"] = args.draws, args.warmup
    print(f"eb.draws = {args.draws}, eb.warmup = {args.warmup}, {bp.rcParams['eb.chains']} chains\n")
    print("Per candidate: share of configs failing the gate (R-hat > 1.05 where the chains' draws are kept; "
          "k-hat > 0.7 or ESS < 200 cannot happen where they were importance-resampled) / share "
          "importance-resampled / share whose chains ran again 4x as long; largest R-hat over kept chains; "
          "divergences in the draws kept\n")
    print("| cell | " + " | ".join(f"{c}: fail / resampled / rerun (max R-hat; div)" for c in CANDS) + " | seconds |")
    print("|---|" + "---|" * (len(CANDS) + 1))
    for label, counts in cells():
        t0, row = time.perf_counter(), []
        for name in CANDS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = bp.fit(counts, name, "eb", k=[1, 10, 100], progressbar=False)
            r = rhat_per_config(fit)
            attrs = fit.posterior.attrs
            used = np.asarray(attrs.get("reweight_used", np.zeros_like(r)), bool)
            rerun = np.asarray(attrs.get("rerun", np.zeros_like(r)), bool)
            kept = r[~used]
            row.append(f"{np.mean(~used & (r > 1.05)):.2f} / {used.mean():.2f} / {rerun.mean():.2f} "
                       f"({kept.max() if kept.size else float('nan'):.2f}; {attrs.get('convergence_divergences', 0)})")
        print(f"| {label} | " + " | ".join(row) + f" | {time.perf_counter() - t0:.0f} |", flush=True)

if __name__ == "__main__":
    main()
