"""Coverage of the pass@k bands at other probabilities than 90%, from ``calibration.py --levels`` runs.

A user who asks ``bayespass curve --ci-prob 0.5`` (or 0.95, or ``rcParams["stats.ci_prob"]``) gets a band
at that probability; the calibration grid checks the 90% one.  This prints, per data set, model and level:
the mean coverage over the cells with m >= 2 and k <= 100 (k <= 50 on real MBPP, k <= 10 on its held-out
configs), within the samples drawn (k <= m) and beyond them, the lowest cell, the number of cells more than
0.10 under the level, and the mean at m = 1; then the default's coverage beyond the samples per truth family.

Usage (about 20 minutes on 2 cores, the two runs in parallel)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/calibration.py --reps 40 --no-real --models naive,bb,auto \\
        --levels 0.5,0.8,0.95,0.99 --seed 11 --json lev_sim.json
    OPENBLAS_NUM_THREADS=1 python benchmarks/calibration.py --real-reps 20 --no-sim --models naive,bb,auto \\
        --levels 0.5,0.8,0.95,0.99 --seed 11 --json lev_real.json
    python benchmarks/calibration_levels.py lev_sim.json lev_real.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)


def _cells(rows, data: str, base: str, level: float, keep) -> list[tuple]:
    """(family, m, k, coverage) of ``base``'s band at ``level`` in the rows of ``data`` whose m passes ``keep``."""
    out = []
    for r in rows:
        if r["data"] != data or abs(r.get("level", 0.9) - level) > 1e-9 or r["model"].split("@")[0] != base:
            continue
        if keep(r["m"]):
            out += [(r["family"], r["m"], k, cov) for k, cov in zip(r["k"], r["coverage"], strict=True)
                    if k <= 100 and cov is not None]
    return out


def summary(rows) -> None:
    """Print the table of coverage by data, model and level."""
    print("| data | model | level | cells | mean coverage (m >= 2) | within k <= m | beyond k > m | lowest cell "
          "| cells under level - 0.10 | m = 1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for data in dict.fromkeys(r["data"] for r in rows):
        for base in dict.fromkeys(r["model"].split("@")[0] for r in rows if r["data"] == data):
            for level in LEVELS:
                c = _cells(rows, data, base, level, lambda m: m >= 2)
                if not c:
                    continue
                cov = np.array([x[3] for x in c])
                within = np.array([x[2] <= x[1] for x in c])
                low = min(c, key=lambda x: x[3])
                one = [x[3] for x in _cells(rows, data, base, level, lambda m: m == 1)]
                beyond = f"{cov[~within].mean():.3f}" if (~within).any() else "-"
                print(f"| {data} | {base} | {level:g} | {len(c)} | {cov.mean():.3f} | {cov[within].mean():.3f} | "
                      f"{beyond} | {low[3]:.2f} ({low[0][:24]}, m = {low[1]}, k = {low[2]}) | "
                      f"{int((cov < level - 0.10).sum())} | {np.mean(one) if one else float('nan'):.3f} |")


def beyond_by_family(rows, base: str = "auto") -> None:
    """Print ``base``'s mean / lowest coverage beyond the samples drawn (m >= 2, k <= 100) per family and level."""
    print("\n| family | " + " | ".join(f"{level:g}" for level in LEVELS) + " |")
    print("|---|" + "---|" * len(LEVELS))
    for fam in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == fam]  # a family is of one data set, sim or real
        out = []
        for level in LEVELS:
            v = [x[3] for x in _cells(mine, mine[0]["data"], base, level, lambda m: m >= 2) if x[1] < x[2]]
            out.append(f"{np.mean(v):.2f} / {min(v):.2f}" if v else "-")
        print(f"| {fam} | " + " | ".join(out) + " |")


def main(paths: list[str]) -> None:
    """Print both tables for the calibration JSON files ``paths``."""
    rows = [r for path in paths for r in json.loads(Path(path).read_text())]
    summary(rows)
    beyond_by_family(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
