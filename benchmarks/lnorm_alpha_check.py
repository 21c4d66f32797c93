"""``benchmarks/calibration.py`` with lnorm's Dirichlet prior on (pi_B, pi0, pi1) replaced (a what-if, no code change).

    ALPHA=2,0.2,0.2 OPENBLAS_NUM_THREADS=1 python benchmarks/lnorm_alpha_check.py --reps 100 --no-real \\
        --ms 2,5,10,20 --models lnorm --json out.json

Every argument after the script's name goes to ``calibration.py``. lnorm reads ``ALPHA`` at call time, so
the fits (by EB, in this process) use the replacement. Measured in the twenty-seventh session: see
benchmarks/RESULTS.md, "lnorm's prior on its atoms".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

import bayespass.models.lnorm as lnorm

HERE = Path(__file__).resolve().parent


def main() -> None:
    raw = os.environ.get("ALPHA", "")
    try:
        alpha = np.array([float(x) for x in raw.split(",")])
    except ValueError:
        alpha = np.array([])
    if alpha.shape != (3,) or not (alpha > 0).all():
        raise SystemExit(f"ALPHA must be three positive numbers 'a_B,a_0,a_1' (e.g. 2,0.2,0.2); got {raw!r}")
    lnorm.ALPHA = alpha
    print(f"lnorm's Dirichlet prior on (pi_B, pi0, pi1): {alpha.tolist()}", flush=True)
    sys.path.insert(0, str(HERE))
    from calibration import run_as_main

    run_as_main(sys.argv[1:])


if __name__ == "__main__":
    main()
