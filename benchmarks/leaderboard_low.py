"""The leaderboard of weak configs: its band and point beyond the samples drawn, against the per-config fit's.

A model whose pass@1 is a few percent, sampled a few times per task, is where the joint model's point beyond the
samples drawn rests most on its shape (the eighty-second session saw a config whose 96 samples all failed read
pass@100 0.003 on the leaderboard and 0.16 on the curve). Truth: three configs on shared task difficulties,
``logit p_ij = a_j - d_i``, ``d_i ~ N(0, 2^2)``, ``a`` given per regime (``--abilities``); ``m`` samples per task
on 100 tasks. Per replicate: ``bp.compare_configs(counts)`` (the joint model ``shared`` by EB, its band beyond the
samples joined to the default per-config fit's) and ``bp.passk_curve(bp.fit(counts))`` (the default ``auto`` by
EB); truth = the replicate's own mean of 1 - (1 - p_ij)^k over its tasks.

    python benchmarks/leaderboard_low.py --abilities=-4,-3.5,-3 --m 4 --reps 40 --json low_m4.json

Prints, per config and k, the coverage of the two 90% bands, their mean width and the bias of the two points.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import xarray as xr
from scipy.special import expit

import bayespass as bp

K = (1, 10, 50)


def replicate(rng: np.random.Generator, abilities, m: int, tasks: int = 100) -> dict:
    """Simulate one replicate and return the truth and both summaries (config x k, and config x k x bound)."""
    d = rng.normal(0, 2.0, tasks)
    p = expit(np.asarray(abilities, float)[:, None] - d[None, :])
    c = rng.binomial(m, p)
    names = [f"c{j}" for j in range(len(abilities))]
    counts = xr.Dataset({"n": (("config", "task"), np.full_like(c, m)), "c": (("config", "task"), c)},
                        coords={"config": names, "task": [f"t{i}" for i in range(tasks)]})
    cmp = bp.compare_configs(counts, k=K)
    curve = bp.passk_curve(bp.fit(counts, progressbar=False), k=K)
    truth = np.stack([(1 - (1 - p) ** k).mean(axis=1) for k in K], axis=1)
    band = lambda da: da.transpose("config", "k", "ci_bound").values.tolist()  # noqa: E731
    return {"truth": truth.tolist(), "c": c.sum(1).tolist(),
            "shared": {"mean": cmp["passk"].transpose("config", "k").values.tolist(), "band": band(cmp["passk_eti"])},
            "auto": {"mean": curve["mean"].transpose("config", "k").values.tolist(), "band": band(curve["eti"])}}


def summarise(reps: list[dict]) -> dict:
    """Coverage, mean width and bias (config x k) of each summary over the replicates."""
    truth = np.array([r["truth"] for r in reps])
    out = {"truth_mean": truth.mean(0).round(4).tolist()}
    for name in ("shared", "auto"):
        mean = np.array([r[name]["mean"] for r in reps])
        band = np.array([r[name]["band"] for r in reps])
        inside = (band[..., 0] <= truth) & (truth <= band[..., 1])
        out[name] = {"coverage": inside.mean(0).round(3).tolist(),
                     "width": (band[..., 1] - band[..., 0]).mean(0).round(4).tolist(),
                     "bias": (mean - truth).mean(0).round(4).tolist()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--abilities", default="-4,-3.5,-3", help="Comma-separated logit abilities, one per config.")
    ap.add_argument("--m", type=int, default=4, help="Samples per task.")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    abilities = [float(x) for x in args.abilities.split(",")]
    rng = np.random.default_rng(args.seed)
    reps, start = [], time.time()
    for r in range(args.reps):
        reps.append(replicate(rng, abilities, args.m))
        print(f"replicate {r + 1}/{args.reps} ({time.time() - start:.0f} s)", flush=True)
    res = {"abilities": abilities, "m": args.m, "k": list(K), "reps": args.reps, "seed": args.seed,
           "summary": summarise(reps), "replicates": reps}
    s = res["summary"]
    print(f"abilities {abilities}, m = {args.m}, {args.reps} replicates; rows config, columns k = {list(K)}")
    print("truth (mean)", s["truth_mean"])
    for name in ("shared", "auto"):
        print(f"{name:6s} coverage {s[name]['coverage']}\n       width    {s[name]['width']}\n"
              f"       bias     {s[name]['bias']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh)


if __name__ == "__main__":
    main()
