"""Where `shared` errs on pass@10 beyond the samples drawn, config by config (issue 18; fortieth session).

    python benchmarks/compare_errors.py [--real-set heldout] [--m 5] [--reps 4]            # per-config errors
    python benchmarks/compare_errors.py --zeros [--real-set heldout]                       # zeros by difficulty
    python benchmarks/compare_errors.py --anchored [--m 2,5] [--reps 20]                   # anchored estimators
    python benchmarks/compare_errors.py --blend [--m 1,2] [--reps 20]                      # shared and zoibb mixed

- Default: the mean error (estimate - truth) of pass@10 per config over ``--reps`` replicates of m samples per
  task (the replicates of ``compare.py``: same seeds), for `shared` (``compare_configs``), per-config ``bb`` and
  ``zoibb`` (``bp.fit`` by EB) and the naive pass@m, and the spread of those errors across configs (what
  decides a ranking).
- ``--zeros``: on all samples, per config, the fraction of tasks with no success by quintile of the other
  configs' pass rate on the task, against a Beta-Binomial with the quintile's mean and one dispersion per
  config (fitted): excess zeros among harder tasks are structural zeros that a Beta's tail does not have.
- ``--anchored``: Kendall tau of pass@10 from three data-anchored versions of `shared`'s estimate (its pass@10
  shifted by naive pass@m - its pass@m; scaled by their ratio; the same in 1 - pass@k) against `shared` and
  the naive pass@m.
- ``--blend`` (forty-first session): Kendall tau of pass@10 from `shared`, per-config ``bb`` and ``zoibb`` and
  the weighted means (1 - w) `shared` + w ``zoibb`` (w = 0.25, 0.5, 0.75), with each one's gain over the naive
  pass@m (ties broken) and its paired standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import load_real, paired_gain, subsample, tau_untied  # noqa: E402


def errors(counts, m, reps):
    import bayespass as bp

    truth = bp.passk(counts, [10], method="unbiased").sel(k=10).values
    rng = np.random.default_rng(1000 + m)
    err = {k: [] for k in ("shared", "bb", "zoibb", "naive")}
    for r in range(reps):
        sub = subsample(counts, m, rng)
        cmp = bp.compare_configs(sub, k=[10], model="shared", method="eb", seed=r, progressbar=False)
        err["shared"].append(cmp["passk"].sel(k=10).values - truth)
        err["naive"].append(bp.passk(sub, m, method="unbiased").values.ravel() - truth)
        for model in ("bb", "zoibb"):
            f = bp.fit(sub, model, "eb", seed=r, progressbar=False)
            err[model].append(bp.passk_curve(f, [10])["mean"].sel(k=10).transpose("config").values.ravel() - truth)
    mean = {k: np.mean(v, 0) for k, v in err.items()}
    for j, cfg in enumerate(counts.config.values):
        print(f"| {cfg} | " + " | ".join(f"{mean[k][j]:+.3f}" for k in err) + " |")
    print("| sd across configs | " + " | ".join(f"{np.std(mean[k]):.4f}" for k in err) + " |")


def zeros(counts):
    from bayespass.stats.kernels import bb_logpmf

    n, c = counts.n.values, counts.c.values
    rate = c / n
    for j, cfg in enumerate(counts.config.values):
        others = np.delete(rate, j, axis=0).mean(0)
        q = np.clip(np.digitize(others, np.quantile(others, [0.2, 0.4, 0.6, 0.8])), 0, 4)
        means = [np.clip(rate[j, q == b].mean(), 1e-3, 1 - 1e-3) for b in range(5)]

        def nll(lphi, j=j, q=q, means=means):
            phi = np.exp(lphi)
            return -sum(bb_logpmf(c[j, q == b], n[j, q == b], means[b] * phi, (1 - means[b]) * phi).sum()
                        for b in range(5))

        phi = np.exp(minimize_scalar(nll, bounds=(-4, 6), method="bounded").x)
        cells = []
        for b in range(5):
            s = q == b
            pred = np.mean(np.exp(bb_logpmf(0, n[j, s], means[b] * phi, (1 - means[b]) * phi)))
            cells.append(f"{np.mean(c[j, s] == 0):.2f} / {pred:.2f}")
        print(f"| {cfg} | {phi:.2f} | " + " | ".join(cells) + " |")


def anchored(counts, ms, reps):
    import bayespass as bp

    truth = bp.passk(counts, [10], method="unbiased").sel(k=10).values
    for m in ms:
        rng = np.random.default_rng(1000 + m)
        taus = {k: [] for k in ("shared", "shift", "ratio", "complement", "naive")}
        for r in range(reps):
            sub = subsample(counts, m, rng)
            cmp = bp.compare_configs(sub, k=[m, 10], model="shared", method="eb", seed=r, progressbar=False)
            p10, pm = cmp["passk"].sel(k=10).values, cmp["passk"].sel(k=m).values
            nv = bp.passk(sub, m, method="unbiased").values.ravel()
            est = {"shared": p10, "shift": p10 + nv - pm, "ratio": p10 * nv / pm,
                   "complement": 1 - (1 - p10) * (1 - nv) / (1 - pm)}
            for k, v in est.items():
                taus[k].append(kendalltau(v, truth).statistic)
            taus["naive"].append(tau_untied(nv, truth))
        print(json.dumps({"m": m, "reps": reps, **{k: round(float(np.mean(v)), 4) for k, v in taus.items()}}))


def blend(counts, ms, reps):
    import bayespass as bp

    truth = bp.passk(counts, [10], method="unbiased").sel(k=10).values
    for m in ms:
        rng = np.random.default_rng(1000 + m)
        taus = {k: [] for k in ("naive", "shared", "bb", "zoibb", "w0.25", "w0.5", "w0.75")}
        for r in range(reps):
            sub = subsample(counts, m, rng)
            est = {"shared": bp.compare_configs(sub, k=[10], model="shared", method="eb", seed=r,
                                                progressbar=False)["passk"].sel(k=10).values}
            for model in ("bb", "zoibb"):
                f = bp.fit(sub, model, "eb", seed=r, progressbar=False)
                est[model] = bp.passk_curve(f, [10])["mean"].sel(k=10).transpose("config").values.ravel()
            for w in (0.25, 0.5, 0.75):
                est[f"w{w}"] = (1 - w) * est["shared"] + w * est["zoibb"]
            for k, v in est.items():
                taus[k].append(kendalltau(v, truth).statistic)
            taus["naive"].append(tau_untied(bp.passk(sub, m, method="unbiased").values.ravel(), truth))
        out = {"m": m, "reps": reps, "naive": round(float(np.mean(taus["naive"])), 4)}
        for k, v in taus.items():
            if k != "naive":
                _, gain, se = paired_gain(v, taus["naive"])
                out[k] = f"{np.mean(v):.4f} (gain {gain:+.4f}, s.e. {se:.4f})"
        print(json.dumps(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real-set", choices=("tuning", "heldout"), default="heldout")
    ap.add_argument("--m", default="5")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--zeros", action="store_true")
    ap.add_argument("--anchored", action="store_true")
    ap.add_argument("--blend", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    counts = load_real(which=args.real_set)
    ms = [int(x) for x in args.m.split(",")]
    if args.zeros:
        zeros(counts)
    elif args.anchored:
        anchored(counts, ms, args.reps)
    elif args.blend:
        blend(counts, ms, args.reps)
    else:
        errors(counts, ms[0], args.reps)


if __name__ == "__main__":
    main()
