"""``bp.plan`` on real data: the band width it forecasts against the width reached by drawing the samples.

Real MBPP+ verdicts (``data/real_mbpp/counts.csv``), the configs with 50 samples on every task.  For each
config, ``--m`` of the 50 samples per task are drawn (hypergeometric), the model is fitted and
:func:`bayespass.plan` forecasts the width of the ``ci_prob`` band of pass@k for each n of its grid.  Then,
for each n, ``--draws`` fresh draws of n of the 50 samples per task are fitted and the band measured.  The
plan's futures are simulated from the fitted model; real data are not, so this measures how far the
forecast can be trusted where the model is not the truth (``tests/stats/test_plan.py`` checks it where
it is).

Reported per config: the forecast and reached widths per n, their ratio, the planned n for
``--target``, and whether the band reached at that n is within 20% of the target.

Usage: python benchmarks/plan_real.py [--model bb] [--m 2] [--k 10] [--target 0.04] [--draws 3] [--json F]
       python benchmarks/plan_real.py --model shared --joint    # the 12 configs fitted and planned together
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.pipeline.adaptive import band_width  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def real_configs():
    """Counts of the configs with 50 samples on every task (config x task)."""
    df = pd.read_csv(REPO / "data" / "real_mbpp" / "counts.csv")
    return bp.counts_from_frame(df.groupby(["model", "temperature"]).filter(lambda g: (g.n == 50).all()))


def draw(full, m: int, seed: int):
    """Counts of m of the 50 samples per task (without replacement), same configs and tasks."""
    rng = np.random.default_rng(seed)
    c = rng.hypergeometric(full.c.values, full.n.values - full.c.values, m)
    return bp.make_counts(np.full(c.shape, m), c, task=full.task.values, config=full.config.values)


def width(counts, model: str, k: int) -> float:
    return float(widths(counts, model, k)[0])


def one_config(full, cfg: str, args) -> dict:
    sub = full.sel(config=[cfg])
    fit = bp.fit(draw(sub, args.m, args.seed), args.model, "eb", progressbar=False)
    plan = bp.plan(fit, k=args.k, target_width=args.target, seed=args.seed)
    rows = []
    for n in plan.n.values:
        reached = [width(draw(sub, int(n), 1000 * args.seed + 100 + d), args.model, args.k) for d in range(args.draws)]
        rows.append({"n": int(n), "forecast": float(plan.expected_width.sel(config=cfg, n=n)),
                     "reached": float(np.mean(reached)), "reached_sd": float(np.std(reached))})
    needed = plan.n_needed.sel(config=cfg).item()
    at = next((r for r in rows if r["n"] == needed), None)
    return {"config": cfg, "current": float(plan.current_width.sel(config=cfg)), "n_needed": needed,
            "reached_at_needed": None if at is None else at["reached"], "rows": rows}


def widths(counts, model: str, k: int) -> np.ndarray:
    """Band widths of pass@k of every config of one fit of ``model`` to ``counts``."""
    return np.array(list(band_width(bp.fit(counts, model, "eb", progressbar=False), k).values()))


def joint(full, configs: list, args) -> list:
    """``--joint``: the configs fitted together (``shared``), planned once; each n's draws fitted together."""
    sub = full.sel(config=configs)
    fit = bp.fit(draw(sub, args.m, args.seed), args.model, "eb", progressbar=False)
    plan = bp.plan(fit, k=args.k, target_width=args.target, seed=args.seed)
    reached = {int(n): np.mean([widths(draw(sub, int(n), 1000 * args.seed + 100 + d), args.model, args.k)
                                for d in range(args.draws)], axis=0) for n in plan.n.values}
    out = []
    for j, cfg in enumerate(configs):
        rows = [{"n": n, "forecast": float(plan.expected_width.sel(config=cfg, n=n)), "reached": float(r[j]),
                 "reached_sd": float("nan")} for n, r in reached.items()]
        needed = plan.n_needed.sel(config=cfg).item()
        at = next((r for r in rows if r["n"] == needed), None)
        out.append({"config": cfg, "current": float(plan.current_width.sel(config=cfg)), "n_needed": needed,
                    "reached_at_needed": None if at is None else at["reached"], "rows": rows})
    return out


def report(results: list, args) -> None:
    print(f"\nplan on real MBPP: model {args.model}, from m = {args.m}, pass@{args.k}, target width {args.target}, "
          f"{args.draws} draws per n\n")
    print("| config | n needed | reached at it | within 20% of target | forecast / reached, per n |")
    print("|---|---|---|---|---|")
    ratios, ok = [], []
    for r in results:
        per_n = ", ".join(f"{x['n']}: {x['forecast'] / x['reached']:.2f}" for x in r["rows"] if x["n"] > args.m)
        ratios += [x["forecast"] / x["reached"] for x in r["rows"] if x["n"] > args.m]
        reached = r["reached_at_needed"]
        within = None if reached is None else reached <= 1.2 * args.target
        ok.append(within)
        print(f"| {r['config']} | {r['n_needed']} | {'—' if reached is None else f'{reached:.4f}'} | "
              f"{'—' if within is None else ('yes' if within else '**no**')} | {per_n} |")
    ratios = np.array(ratios)
    print(f"\nforecast / reached over every (config, n > m): median {np.median(ratios):.2f}, "
          f"range {ratios.min():.2f}-{ratios.max():.2f}; within 20% in {np.mean(np.abs(ratios - 1) <= 0.2):.0%}; "
          f"planned n reached the target within 20%: {sum(x is True for x in ok)} of "
          f"{sum(x is not None for x in ok)} configs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bb")
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.04)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--configs", default=None, help="comma-separated config names (default: every config)")
    ap.add_argument("--joint", action="store_true",
                    help="fit the configs together (--model shared) and plan them at once (default: one by one)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    full = real_configs()
    configs = args.configs.split(",") if args.configs else [str(c) for c in full.config.values]
    results, t0 = [], time.perf_counter()
    if args.joint:
        configs, results = [], joint(full, configs, args)
        print(f"joint fits: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    for cfg in configs:
        results.append(one_config(full, cfg, args))
        print(f"{cfg}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
        if args.json:  # after each config: an interrupted run keeps what it measured
            Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    report(results, args)


if __name__ == "__main__":
    main()
