"""The leaderboard on a few tasks (a `bayespass run --tasks 25` smoke evaluation), half the configs at few samples.

The joint model `shared` by EB draws its parameters from a Laplace approximation whose likelihood curvature is the
outer product of the per-task scores.  With fewer distinct tasks than parameters (3 per config and 12 for the
difficulty prior) that product is singular and most directions were left to the prior: 34 real configs on MBPP+'s
first 25 tasks gave a 10-sample config a pass@1 band 2.5x the exact posterior's.  There the curvature is now the
observed one.  This benchmark measures it on real generations: per replicate, ``--tasks`` random MBPP+ tasks of
the 12 real configs with 50 samples per task (``data/real_mbpp/counts.csv``), a random half of the configs cut
to ``--m-low`` samples per task (a hypergeometric draw of their successes), the others keeping 50.
``bp.compare_configs`` (the leaderboard) and ``bp.passk_curve(bp.fit(counts))`` (the default per-config fit) at
k = 1, 5, 10; the truth is each config's unbiased pass@k on all 50 samples of those tasks.

    python benchmarks/leaderboard_few_tasks.py --reps 20 --tasks 25 --m-low 10 --json few.json
    python benchmarks/leaderboard_few_tasks.py --reps 20 --outer-product --json few_before.json  # the curvature before

Prints, for the configs cut to few samples, the coverage and mean width of the two 90% bands, the bias and mean
absolute error of the two points and of the unbiased estimate, and the expected calibration error of P(better)
over every ordered pair of configs (10 bins, truth: the order on all 50 samples; ties left out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ece, load_real  # noqa: E402

K = (1, 5, 10)


def use_outer_product() -> None:
    """The curvature before (eighty-ninth session): the scores' outer product whatever the number of tasks."""
    from bayespass.models import shared

    shared.OBSERVED_WHEN_SINGULAR = False


def replicate(counts, rng, tasks: int, m_low: int) -> dict:
    """One replicate: its truth, which configs were cut, the leaderboard's and the curve's points and bands."""
    import bayespass as bp
    from bayespass.stats.kernels import passk_unbiased

    sub = counts.isel(task=np.sort(rng.choice(counts.sizes["task"], tasks, replace=False)))
    n, c = sub.n.values, sub.c.values
    low = np.zeros(n.shape[0], bool)
    low[rng.permutation(n.shape[0])[: n.shape[0] // 2]] = True
    nm, cm = n.copy(), c.copy()
    cm[low] = rng.hypergeometric(c[low], n[low] - c[low], np.full_like(n[low], m_low))
    nm[low] = m_low
    data = sub.copy(data={"n": nm, "c": cm})
    cfg = sub.config
    cmp = bp.compare_configs(data, k=list(K), progressbar=False)
    cur = bp.passk_curve(bp.fit(data, progressbar=False), k=list(K))
    ck, band = ("config", "k"), ("config", "k", "ci_bound")
    return {"truth": np.stack([passk_unbiased(n, c, k).mean(1) for k in K], 1).tolist(),
            "naive": np.stack([passk_unbiased(nm, cm, k).mean(1) for k in K], 1).tolist(), "low": low.tolist(),
            "lb_mean": cmp["passk"].sel(config=cfg).transpose(*ck).values.tolist(),
            "lb_band": cmp["passk_eti"].sel(config=cfg).transpose(*band).values.tolist(),
            "prob_better": cmp["prob_better"].sel(config=cfg, config_b=cfg.values).transpose(
                "config", "config_b", "k").values.tolist(),
            "curve_mean": cur["mean"].sel(config=cfg).transpose(*ck).values.tolist(),
            "curve_band": cur["eti"].sel(config=cfg).transpose(*band).values.tolist()}


def summarise(reps: list[dict]) -> dict:
    """Coverage, width, bias and MAE (per k) over the configs cut to few samples, and P(better)'s ECE per k."""
    truth = np.array([r["truth"] for r in reps])
    low = np.array([r["low"] for r in reps])
    out = {"configs_cut": int(low.sum())}
    for name in ("lb", "curve"):
        mean, band = np.array([r[f"{name}_mean"] for r in reps]), np.array([r[f"{name}_band"] for r in reps])
        inside = (band[..., 0] <= truth) & (truth <= band[..., 1])
        out[name] = {"coverage": inside[low].mean(0).round(3).tolist(),
                     "width": (band[..., 1] - band[..., 0])[low].mean(0).round(4).tolist(),
                     "bias": (mean - truth)[low].mean(0).round(4).tolist(),
                     "mae": np.abs(mean - truth)[low].mean(0).round(4).tolist()}
    naive = np.array([r["naive"] for r in reps])
    out["naive"] = {"bias": (naive - truth)[low].mean(0).round(4).tolist(),
                    "mae": np.abs(naive - truth)[low].mean(0).round(4).tolist()}
    pb = np.array([r["prob_better"] for r in reps])  # (rep, config, config_b, k)
    better = truth[:, :, None, :] > truth[:, None, :, :]
    decided = truth[:, :, None, :] != truth[:, None, :, :]
    out["prob_better_ece"] = [round(ece(pb[..., j][decided[..., j]], better[..., j][decided[..., j]])[0], 4)
                              for j in range(len(K))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=25)
    ap.add_argument("--m-low", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--outer-product", action="store_true", help="the curvature before: see use_outer_product()")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.outer_product:
        use_outer_product()
    counts, rng = load_real("tuning"), np.random.default_rng(args.seed)
    reps, start = [], time.time()
    for r in range(args.reps):
        reps.append(replicate(counts, rng, args.tasks, args.m_low))
        print(f"replicate {r + 1}/{args.reps} ({time.time() - start:.0f} s)", flush=True)
    s = summarise(reps)
    print(f"{args.tasks} tasks, {s['configs_cut']} configs cut to {args.m_low} samples per task; k = {list(K)}")
    for name, label in (("lb", "leaderboard"), ("curve", "per-config fit")):
        print(f"{label:15s} coverage {s[name]['coverage']} width {s[name]['width']} bias {s[name]['bias']} "
              f"mae {s[name]['mae']}")
    print(f"{'unbiased':15s} bias {s['naive']['bias']} mae {s['naive']['mae']}")
    print(f"P(better) ECE {s['prob_better_ece']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "k": list(K), "summary": s, "replicates": reps}, fh)


if __name__ == "__main__":
    main()
