"""``benchmarks/calibration.py`` with the Beta candidates' prior on log(a + b) widened (a what-if, no code change).

    KAPPA_SD=2.5 OPENBLAS_NUM_THREADS=1 python benchmarks/kappa_prior_check.py --reps 50 --no-real \\
        --ms 2,5,10,20 --models bb,zoibb,flex,lnorm,auto --json out.json

Every argument after the script's name goes to ``calibration.py``. bb, zoibb and flex share the prior
``log kappa ~ Normal(log 2, 1.5)`` (``bayespass.models.bb.LOG_KAPPA_SD``, read at call time; flex keeps a
copy for its gradient, replaced too), so the fits (by EB, in this process and its forks) use the
replacement. Why: tasks that are all about equally hard (kappa large) are a shape every candidate's prior
finds unlikely, and there the default under-covered pass@10-100 (benchmarks/RESULTS.md, "Truth shapes the
default was not tuned on"; twenty-eighth session).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import bayespass.models.bb as bb
import bayespass.models.flex as flex

HERE = Path(__file__).resolve().parent


def main() -> None:
    raw = os.environ.get("KAPPA_SD", "")
    try:
        sd = float(raw)
    except ValueError:
        sd = float("nan")
    if not sd > 0:
        raise SystemExit(f"KAPPA_SD must be a positive number (the sd of log kappa, e.g. 2.5); got {raw!r}")
    bb.LOG_KAPPA_SD = flex.LOG_KAPPA_SD = sd
    print(f"the Beta candidates' prior: log kappa ~ Normal(log 2, {sd})", flush=True)
    sys.path.insert(0, str(HERE))
    from calibration import run_as_main

    run_as_main(sys.argv[1:])


if __name__ == "__main__":
    main()
