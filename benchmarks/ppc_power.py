"""How often ``bp.ppc`` flags the default's fit: false alarms where its band is honest, alarms where it is not.

    python benchmarks/ppc_power.py [--reps 30] [--ms 5,10,20] [--families discrete-levels,zoib-mbpp,...]

Each replicate draws 300 tasks' p from a truth family of ``benchmarks/calibration.py``, m samples per task (or,
for ``real``, m of the 50 samples per task of the 12 real MBPP configs it was tuned on), fits
the default (``bp.fit(counts)``: the stack by EB) and runs :func:`bayespass.ppc`.  Reported per (family, m): the
share of replicates in which each statistic is ``extreme``, and for ``hist_distance`` also with the histogram it
had before (10 bins of c / n, one bin per c now where every task has the same n <= 25): the same replicates,
replicated counts and p-value rule.  Rows go to a JSON file.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def binned_p_value(fit) -> np.ndarray:
    """Per config, the hist_distance p-value with 10 bins of c / n (the histogram before), from the fit's own
    replicates (``bp.ppc``'s rule, :func:`bayespass.stats.ppc._p_values`)."""
    from bayespass.stats.ppc import STATISTICS, _p_values

    return _p_values(fit, None)[2][:, STATISTICS.index("hist_distance")]


def draw_counts(family: str, m: int, g, r: int):
    """Counts of replicate ``r``: 300 tasks of a simulated family, or m of the 50 samples per task of the 12 real
    MBPP configs (``"real"``, calibration.py's tuning set)."""
    from calibration import draw_family, real_counts

    import bayespass as bp

    if family == "real":
        full = bp.counts_from_frame(real_counts("tuning")[["model", "temperature", "task", "n", "c"]])
        n, c = full.n.values, full.c.values
        return full.copy(data={"n": np.full_like(n, m), "c": g.hypergeometric(c, n - c, m)})
    p = draw_family(family, g, r)
    n = np.full((1, p.size), m)
    return bp.make_counts(n, g.binomial(n, p))


def cell(family: str, m: int, reps: int, seed: int) -> dict:
    """Flag rates of one (family, m) over ``reps`` replicates (and configs)."""
    import bayespass as bp

    flags, pvals, binned = [], [], []
    for r in range(reps):
        g = np.random.default_rng([seed, m, r])
        counts = draw_counts(family, m, g, r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = bp.fit(counts, seed=r)
        out = bp.ppc(fit).transpose("config", "statistic")
        flags += out.extreme.values.tolist()
        pvals += out.p_value.values.tolist()
        binned += binned_p_value(fit).tolist()
    stats = [str(s) for s in out.statistic.values]
    rate = np.mean(flags, 0)
    return {"family": family, "m": m, "reps": reps, "statistics": stats,
            "flag_rate": dict(zip(stats, rate.tolist(), strict=True)),
            "any_flag_rate": float(np.mean(np.any(flags, 1))),
            "hist_binned_flag_rate": float(np.mean(np.array(binned) < 0.05)),
            "p_values": pvals, "hist_binned_p_values": binned}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ms", default="5,10,20")
    ap.add_argument("--families", default="discrete-levels,zoib-mbpp,two-beta,logit-normal,zeros+tiny")
    ap.add_argument("--seed", type=int, default=77)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for fam in args.families.split(","):
        for m in map(int, args.ms.split(",")):
            rows.append(cell(fam, m, args.reps, args.seed))
            r = rows[-1]
            print(f"{fam:20s} m={m:3d}  hist_distance flagged {r['flag_rate']['hist_distance']:.2f} "
                  f"(10 bins of c/n: {r['hist_binned_flag_rate']:.2f}); any statistic {r['any_flag_rate']:.2f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
