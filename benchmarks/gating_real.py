"""Gating and the reliability level on real generations: do their guarantees hold on real MBPP+?

The conformal gate (``bp.gate``) promises that the share of test tasks it answers wrongly (silent failures)
is at most ``alpha`` on average over calibration/test splits; the reliability level's prediction sets
(``bp.reliability``) that they hold a correct behaviour class on at least ``1 - alpha`` of the test tasks.
Both hold under exchangeable tasks whatever the model, and had been measured on the synthetic coder only.

For each of the 16 fifty-sample configs of the real MBPP generations (``../shared/data/real/difftrust_mbpp``),
the first ``--samples`` samples of every MBPP+ task are executed in the sandbox (resumable: kept in
``--out``), then, per ``--alpha``: the gate's silent-failure rate, abstention and effective rate (answered and
right) per rule, averaged over ``--splits`` splits (its standard error over splits beside it; behaviour-CRC
also in its conservative variant and with ``tie_break="random"``), and the reliability sets' coverage and size.
The real generations have no log-probabilities, so logprob-CRC is left out.

Usage:
    python benchmarks/gating_real.py [--samples 10] [--alpha 0.05,0.1,0.2] [--splits 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from incoherence_real import samples  # noqa: E402  (the first K samples per task of the first N configs)
from real_mbpp import FIFTY, MBPP_PLUS, REAL  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def measure(ds, alphas: list[float], n_splits: int, seed: int) -> list[dict]:
    """Per alpha and config: the gate's rules (mean and s.e. over splits) and the reliability sets."""
    import bayespass as bp

    rows = []
    for alpha in alphas:
        for variant, tie_break, suffix in (("crc", "none", ""), ("conservative", "none", "/cons"),
                                           ("crc", "random", "/random")):
            g = bp.gate(ds, alpha=alpha, n_splits=n_splits, seed=seed, variant=variant, tie_break=tie_break)
            for cfg in g.config.values:
                for rule in g.rule.values:
                    if suffix and rule != "behaviour-CRC":
                        continue
                    s = g.sel(config=cfg, rule=rule)
                    if np.isnan(np.asarray(s["silent"].values, float)).all():  # logprob-CRC: no log-probabilities
                        continue
                    row = {"alpha": alpha, "config": str(cfg), "rule": str(rule) + suffix}
                    for v in ("silent", "abstention", "effective"):
                        x = np.asarray(s[v].values, float)
                        row[v], row[v + "_se"] = float(np.nanmean(x)), float(np.nanstd(x) / np.sqrt(x.size))
                    rows.append(row)
        r = bp.reliability(ds, alpha=alpha, n_splits=n_splits, seed=seed)
        for cfg in r.config.values:
            s = r.sel(config=cfg)
            cov = np.asarray(s["coverage"].values, float)
            rows.append({"alpha": alpha, "config": str(cfg), "rule": "reliability-set",
                         "coverage": float(np.nanmean(cov)), "coverage_se": float(np.nanstd(cov) / np.sqrt(cov.size)),
                         "set_size": float(np.nanmean(s["set_size"].values))})
    return rows


def report(rows: list[dict], ds) -> None:
    """Markdown tables: per alpha and rule the mean over configs, and the configs whose silent rate exceeds alpha."""
    import pandas as pd

    df = pd.DataFrame(rows)
    gate = df[df.rule != "reliability-set"]
    print("| alpha | rule | configs | silent: mean | max (config) | configs above alpha by > 2 s.e. | abstention "
          "| effective |\n|---|---|---|---|---|---|---|---|")
    for (alpha, rule), d in gate.groupby(["alpha", "rule"], sort=False):
        worst = d.loc[d.silent.idxmax()]
        above = int(((d.silent - alpha) > 2 * d.silent_se).sum())
        print(f"| {alpha:g} | {rule} | {len(d)} | {d.silent.mean():.3f} | {worst.silent:.3f} "
              f"({worst.config}) | {above} | {d.abstention.mean():.3f} | {d.effective.mean():.3f} |")
    rel = df[df.rule == "reliability-set"]
    print("\n| alpha | configs | coverage: mean | min (config) | configs below 1 - alpha by > 2 s.e. | set size |"
          "\n|---|---|---|---|---|---|")
    for alpha, d in rel.groupby("alpha"):
        worst = d.loc[d.coverage.idxmin()]
        below = int(((1 - alpha - d.coverage) > 2 * d.coverage_se).sum())
        print(f"| {alpha:g} | {len(d)} | {d.coverage.mean():.3f} | {worst.coverage:.3f} ({worst.config}) | {below} "
              f"| {d.set_size.mean():.2f} |")
    per = gate[gate.rule == "behaviour-CRC"].pivot(index="config", columns="alpha", values=["silent", "abstention"])
    print("\nbehaviour-CRC per config (silent / abstention at each alpha):")
    print(per.round(3).to_string())
    print(f"\n{ds.sizes['config']} configs x {ds.sizes['task']} tasks x {ds.sizes['sample']} samples")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=len(FIFTY), help="the first N of the 16 fifty-sample configs")
    ap.add_argument("--samples", type=int, default=10, help="samples per task and config (K)")
    ap.add_argument("--alpha", default="0.05,0.1,0.2")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "runs" / "gating-real"))
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if not REAL.exists():
        raise SystemExit(f"the real MBPP generations are not at {REAL} (see ../shared/data/real/README)")
    import bayespass as bp

    t0 = time.perf_counter()
    suite = bp.load_suite("mbpp+", MBPP_PLUS, workers=args.workers)
    recs = samples(args.configs, list(suite.tasks), args.samples)
    ds = bp.execute(recs, suite, out=args.out, workers=args.workers)
    t1 = time.perf_counter()
    print(f"{len(recs)} samples executed (or read back) in {t1 - t0:.0f} s")
    rows = measure(ds, [float(a) for a in args.alpha.split(",")], args.splits, args.seed)
    print(f"gate and reliability in {time.perf_counter() - t1:.0f} s\n")
    report(rows, ds)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
