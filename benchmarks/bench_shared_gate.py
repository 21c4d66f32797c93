"""How often ``shared`` by MCMC passes its convergence gate at the first run, and its cost, on real MBPP subsamples.

    python benchmarks/bench_shared_gate.py [--m 1,2] [--reps 10] [--tune T] [--json out.json]

Each replicate draws m of the 50 samples of every task (12 configs x 364 tasks of ``data/real_mbpp/counts.csv``,
the configs of ``benchmarks/compare.py``) and fits ``bp.fit(sub, "shared", "mcmc")``; printed per m: the seconds
per fit (median, max), how many passed the gate at the first run, after the chains went on (and how many of
those restarted in a dense metric), or not at all.
``--tune``: warm-up iterations per chain (default: the fit's own).
Run it with ``PYTHONPATH=<other checkout>/src`` to time other code on the same replicates.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))


def main():
    from compare import load_real, subsample

    import bayespass as bp

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    counts = load_real()
    with warnings.catch_warnings():  # warm-up: imports and first-call costs are not the fit's
        warnings.simplefilter("ignore")
        bp.fit(counts.isel(config=slice(0, 2), task=slice(0, 20)), "shared", "mcmc", progressbar=False)
    rows = []
    print("| m | fits | seconds per fit: median | max | gate passed at the first run | after going on / rerun | "
          "missed |")
    print("|---|---|---|---|---|---|---|")
    for m in (int(x) for x in args.m.split(",")):
        rng = np.random.default_rng(1000 + m)  # compare.py's replicates
        secs, status, restarted = [], [], []
        for r in range(args.reps):
            sub = subsample(counts, m, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                post = bp.fit(sub, "shared", "mcmc", seed=r, tune=args.tune, progressbar=False).posterior
                secs.append(time.perf_counter() - t0)
            conv = post.attrs["convergence"]  # divergences are counted apart: going on does not answer them
            ok = conv == "ok" or all(p.endswith("divergences") for p in conv.split("; "))
            status.append("missed" if not ok else ("again" if "rerun" in post.attrs else "first"))
            restarted.append("restarted" in post.attrs.get("rerun", ""))  # chains that restarted in a dense metric
            print(f"m={m} rep {r + 1}: {secs[-1]:.1f} s, {status[-1]} ({post.attrs['convergence']}; "
                  f"{post.attrs.get('rerun', 'first run passed')})",
                  file=sys.stderr, flush=True)
        rows.append({"m": m, "secs": secs, "status": status, "restarted": restarted})
        print(f"| {m} | {args.reps} | {np.median(secs):.1f} | {max(secs):.1f} | {status.count('first')} | "
              f"{status.count('again')} ({sum(restarted)} restarted) | {status.count('missed')} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
