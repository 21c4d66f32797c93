"""Coverage of 90% pass@k bands at thousands of samples per task (simulated, known truth).

Each replicate draws 60 task success probabilities (10 exactly 0, 50 from Beta(0.3, 1.5)), n samples of each,
and fits every model named; the truth is the replicate's own mean of 1 - (1 - p)^k.  Written for flex's grid
(80 points 0.35 apart in logit), which a task's likelihood at n = 10,000 (0.03 wide) falls between: run it
with ``--src`` pointing at an older checkout's ``src`` to compare (benchmarks/RESULTS.md, "flex at thousands
of samples per task")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/many_samples.py --n 1000,10000 --reps 20 --models flex,default
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

KS = (1, 10, 100, 1000, 10**5)


def replicate(r: int, n: int):
    """Counts (one config, 60 tasks) and the true pass@k at KS of replicate r."""
    import bayespass as bp

    rng = np.random.default_rng(100 + r)
    p = rng.beta(0.3, 1.5, 60)
    p[:10] = 0.0
    counts = bp.make_counts(np.full(60, n), rng.binomial(n, p))
    return counts, np.array([np.mean(1 - (1 - p) ** k) for k in KS])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1000,10000", help="samples per task, comma-separated")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--models", default="flex,default", help="models to fit ('default': bp.fit's own)")
    ap.add_argument("--src", default=None, help="import bayespass from this src directory (an older checkout)")
    args = ap.parse_args(argv)
    if args.src:
        sys.path.insert(0, args.src)
    import bayespass as bp

    warnings.simplefilter("ignore")
    print(f"bayespass from {bp.__file__}")
    print("| n | model | coverage at k = " + " / ".join(map(str, KS)) + " | mean width |")
    print("|---|---|---|---|")
    for n in map(int, args.n.split(",")):
        for model in args.models.split(","):
            hits, width = np.zeros(len(KS)), np.zeros(len(KS))
            for r in range(args.reps):
                counts, truth = replicate(r, n)
                fit = bp.fit(counts, seed=r) if model == "default" else bp.fit(counts, model, seed=r)
                eti = bp.passk_curve(fit, k=list(KS))["eti"]
                lo, hi = (eti.sel(ci_bound=b).values.ravel() for b in ("lower", "upper"))
                hits += (lo <= truth) & (truth <= hi)
                width += hi - lo
            print(f"| {n:,} | {model} | {' / '.join(f'{h / args.reps:.2f}' for h in hits)} | "
                  f"{' / '.join(f'{w / args.reps:.4f}' for w in width)} |", flush=True)


if __name__ == "__main__":
    main()
