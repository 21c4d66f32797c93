"""P(better) and the difference's band when configs have different numbers of samples per task (real MBPP).

    python benchmarks/compare_mixed.py [--reps 50] [--m-low 1] [--m-high 10] [--k 1,10] [--model shared] [--out ...]

A team often has many samples of its own model and few of a rival's (or the reverse).  ``benchmarks/compare.py``
keeps the same m for every config; here, in each replicate, a random half of the real configs keep
``--m-low`` samples per task and the others ``--m-high`` (hypergeometric draws from the 50 of
``data/real_mbpp/counts.csv``).  The truth is pass@k on all 50 samples.  Scored for k in ``--k`` (1 and 10 by
default; at most 50), separately for pairs of one low-m and one high-m config ("cross") and pairs of equal m
("same"):

- calibration of ``prob_better`` (expected calibration error over 10 bins, as in compare.py);
- coverage and width of the band ``diff_eti`` of pass@k[config] - pass@k[config_b];
- coverage of each config's leaderboard band ``passk_eti``, low-m and high-m configs apart.
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
from compare import ece, load_real, use_hessian_eb  # noqa: E402

HERE = Path(__file__).resolve().parent


def replicate(counts, truth, m_low, m_high, ks, rng, model, method, seed):
    """One replicate: a random half of the configs at m_low, the rest at m_high; per-pair scores."""
    import bayespass as bp

    n, c = counts.n.values, counts.c.values
    J = n.shape[0]
    low = np.zeros(J, bool)
    low[rng.choice(J, J // 2, replace=False)] = True
    m = np.where(low, m_low, m_high)[:, None] * np.ones_like(n)
    sub = counts.copy(data={"n": m, "c": rng.hypergeometric(c, n - c, m)})
    cmp = bp.compare_configs(sub, k=ks, model=model, method=method, seed=seed)
    off = ~np.eye(J, dtype=bool)
    cross = (low[:, None] != low[None, :]) & off
    same = (low[:, None] == low[None, :]) & off
    out = {}
    for kk in ks:
        tv = truth.sel(k=kk).values
        true_diff = tv[:, None] - tv[None, :]
        lo, hi = cmp["diff_eti"].sel(k=kk).transpose("ci_bound", "config", "config_b").values
        cover = (lo <= true_diff) & (true_diff <= hi)
        pb = cmp["prob_better"].sel(k=kk).values
        y = (true_diff > 0).astype(int)
        blo, bhi = cmp["passk_eti"].sel(k=kk).transpose("ci_bound", "config").values
        bcover = (blo <= tv) & (tv <= bhi)
        out[int(kk)] = {
            part: {"p": pb[mask].tolist(), "y": y[mask].tolist(), "cover": cover[mask].tolist(),
                   "width": (hi - lo)[mask].tolist()} for part, mask in (("cross", cross), ("same", same))}
        out[int(kk)]["band"] = {"low": bcover[low].tolist(), "high": bcover[~low].tolist(),
                                "width_low": (bhi - blo)[low].tolist(), "width_high": (bhi - blo)[~low].tolist()}
    return out


def run(args):
    import bayespass as bp

    counts = load_real()
    ks = args.k
    truth = bp.passk(counts, ks, method="unbiased")
    rng = np.random.default_rng(2000 + 100 * args.m_low + args.m_high)
    res, t0 = [], time.perf_counter()
    for r in range(args.reps):
        res.append(replicate(counts, truth, args.m_low, args.m_high, ks, rng, args.model, args.method, seed=r))
        print(f"rep {r + 1}/{args.reps} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    rows = []
    for kk in ks:
        for part in ("cross", "same"):
            p = np.concatenate([x[kk][part]["p"] for x in res])
            y = np.concatenate([x[kk][part]["y"] for x in res])
            err, table = ece(p, y)
            rows.append({"m_low": args.m_low, "m_high": args.m_high, "k": kk, "pairs": part, "reps": args.reps,
                         "model": args.model, "method": args.method, "ece": err, "reliability": table,
                         "diff_coverage": float(np.mean(np.concatenate([x[kk][part]["cover"] for x in res]))),
                         "diff_width": float(np.mean(np.concatenate([x[kk][part]["width"] for x in res]))),
                         "band_coverage_low": float(np.mean(np.concatenate([x[kk]["band"]["low"] for x in res]))),
                         "band_coverage_high": float(np.mean(np.concatenate([x[kk]["band"]["high"] for x in res]))),
                         "band_width_low": float(np.mean(np.concatenate([x[kk]["band"]["width_low"] for x in res]))),
                         "band_width_high": float(np.mean(np.concatenate([x[kk]["band"]["width_high"]
                                                                          for x in res])))})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "reliability"}), file=sys.stderr, flush=True)
    return rows


def report(rows) -> str:
    out = ["| m (low / high) | k | pairs | model | reps | ECE of P(better) | diff band coverage | diff band width | "
           "band coverage (low m / high m) | band width (low m / high m) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['m_low']} / {r['m_high']} | {r['k']} | {r['pairs']} | {r['model']}-{r['method']} | "
                   f"{r['reps']} | {r['ece']:.3f} | {r['diff_coverage']:.3f} | {r['diff_width']:.3f} | "
                   f"{r['band_coverage_low']:.3f} / {r['band_coverage_high']:.3f} | "
                   f"{r['band_width_low']:.3f} / {r['band_width_high']:.3f} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--m-low", type=int, default=1)
    ap.add_argument("--m-high", type=int, default=10)
    ap.add_argument("--k", type=lambda s: [int(x) for x in s.split(",")], default=[1, 10],
                    help="the k of pass@k, comma-separated (at most 50, the samples of the truth)")
    ap.add_argument("--model", default="shared")
    ap.add_argument("--method", default="eb")
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", action="store_true", help="print the markdown table of --out and exit")
    ap.add_argument("--hessian-eb", action="store_true", help="a variant not adopted: see compare.use_hessian_eb()")
    args = ap.parse_args(argv)
    if args.hessian_eb:
        use_hessian_eb()
    out = Path(args.out or HERE / "results" / f"compare_mixed_m{args.m_low}_{args.m_high}.json")
    if args.report:
        print(report(json.loads(out.read_text())))
        return
    rows = run(args)
    out.write_text(json.dumps(rows, indent=1))
    print(report(rows))


if __name__ == "__main__":
    main()
