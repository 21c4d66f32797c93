"""How much the width of `shared`'s band of pass@k moves with the fit's seed, on the real MBPP configs.

For each (config set, m), one of ``compare.py``'s subsamples (its first replicate) is fitted by EB with
``--seeds`` seeds; the seed-to-seed coefficient of variation of each config's band width is reported (median and
largest over the configs), with the slopes' weight of the fit::

    python benchmarks/shared_seed_width.py            # about a minute
    python benchmarks/shared_seed_width.py --k 10 --seeds 6 --cells tuning:1,tuning:2,heldout:2
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def width_cv(counts, k: int, seeds: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Band widths (seed, config) of pass@k, their CV per config, and the fit's slopes' weight."""
    import bayespass as bp
    from bayespass.pipeline.adaptive import band_width

    widths, weight = [], float("nan")
    for seed in range(seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = bp.fit(counts, "shared", "eb", progressbar=False, seed=seed)
        widths.append(list(band_width(fit, k).values()))
        weight = float(fit.posterior.attrs.get("slopes_weight", np.nan))
    widths = np.array(widths)
    return widths, widths.std(0) / widths.mean(0), weight


def main(argv=None) -> None:
    from compare import load_real, subsample

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--cells", default="tuning:1,tuning:2,heldout:2", help="comma-separated SET:M")
    args = ap.parse_args(argv)
    print("| configs | m | slopes' weight | width CV, median over configs | largest | mean width |")
    print("|---|---|---|---|---|---|")
    for cell in args.cells.split(","):
        which, m = cell.split(":")
        sub = subsample(load_real(which), int(m), np.random.default_rng(1000 + int(m)))  # compare.py's first
        widths, cv, weight = width_cv(sub, args.k, args.seeds)
        print(f"| {which} | {m} | {weight:.3f} | {np.median(cv):.3f} | {cv.max():.3f} | {widths.mean():.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
