"""Scale of inputs: a counts file with 10^6 rows through read, estimate and fit (time and peak memory).

Each step runs in a fresh process (``/usr/bin/time``-style accounting via ``resource``), so the peak
resident memory of one step is not inflated by an earlier one.

Usage: python benchmarks/bench_scale.py [--rows 1000000] [--configs 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

STEP = r"""
import json, resource, sys, time, warnings
t0 = time.perf_counter()
import bayespass as bp
t_import = time.perf_counter() - t0
step, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
ds = bp.read_counts(path)
t_read = time.perf_counter() - t
out = {"import_s": t_import, "read_s": t_read}
if step == "estimate":
    from bayespass.stats.table import estimate_table
    t = time.perf_counter()
    estimate_table(ds, "1,10,100", method=["naive", "unbiased", "bb", "zoibb", "linmix"])
    out["estimate_s"] = time.perf_counter() - t
elif step.startswith("fit"):
    _, model, method = step.split(":")
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {"draws": 300, "tune": 300, "chains": 2} if method == "mcmc" else {}
        idata = bp.fit(ds, model, method, progressbar=False, **kw)
        bp.passk_curve(idata, [1, 10, 100])
    out["fit_s"] = time.perf_counter() - t
    out["loglik_layout"] = idata.log_likelihood.attrs.get("layout", "task")
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["peak_rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--configs", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    per = args.rows // args.configs
    n = rng.integers(1, 50, args.rows)
    c = rng.binomial(n, np.where(rng.random(args.rows) < 0.2, 0.0, rng.beta(0.5, 1.0, args.rows)))
    df = pd.DataFrame({"model": np.repeat([f"m{i}" for i in range(args.configs)], per),
                       "task": np.tile([f"t{i}" for i in range(per)], args.configs), "n": n, "c": c})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "counts.csv"
        df.to_csv(path, index=False)
        print(f"{args.rows} rows ({args.configs} config(s)); {path.stat().st_size / 1e6:.0f} MB CSV\n")
        print("| step | import (s) | read + validate (s) | step (s) | peak memory (MB) |\n|---|---|---|---|---|")
        for step in ("read", "estimate", "fit:bb:eb", "fit:flex:eb", "fit:auto:eb", "fit:bb:mcmc", "fit:flex:mcmc",
                     "fit:auto:mcmc"):
            t = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", STEP, step, str(path)], capture_output=True, text=True)
            if res.returncode != 0:
                print(f"| {step} | failed: {res.stderr.strip().splitlines()[-1]} |")
                continue
            out = json.loads(res.stdout.strip().splitlines()[-1])
            work = out.get("estimate_s", out.get("fit_s", 0.0))
            mem = max(out["peak_rss_mb"], out["peak_rss_children_mb"])
            print(f"| {step} | {out['import_s']:.1f} | {out['read_s']:.2f} | {work:.1f} | {mem:.0f} |"
                  + (f" log-likelihood layout: {out['loglik_layout']}" if "loglik_layout" in out else ""),
                  flush=True)
            del t


if __name__ == "__main__":
    main()
