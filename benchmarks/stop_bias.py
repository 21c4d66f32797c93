"""What stopping on the band's width does to its coverage: the same counts, with and without the stop.

``benchmarks/allocate.py`` stops each run at the first round whose ``ci_prob`` band of pass@k is at most
``--width`` wide, and its uniform arm's final band of the default covered the truth in 17 of 24 runs (RESULTS,
"twelve replicates of the two families with zeros").  Two causes would give that: the stop (it keeps the
first band that came out narrow, and a band's width and its position can go together), or a bias of the band
itself at the sample sizes where the run stops.  This benchmark tells them apart.

Each replicate draws one uniform sampling path exactly as ``allocate.py``'s uniform arm (same truths, same
seeds: replicates 0-11 repeat its runs), but does not stop: it refits after every round up to ``--n-max``
samples per task and records every round's band.  Then, over the replicates:

* **with the stop**: the band of the first round at most ``--width`` wide (what ``allocate.py`` and
  ``bayespass run --until-width`` report);
* **without the stop**: the band after a fixed number of samples per task (every task has the same n), the
  same for every replicate whatever its band looks like; and, at each fixed n, the coverage among the
  replicates whose band there is at most ``--width`` wide and among the rest.

If the fixed-n coverage is near ``ci_prob`` and the stopped one is not, the stop is the cause; if the fixed-n
coverage at the n where runs stop is already low, the band is.  Rounds before ``--n-start`` samples per task are not
fitted, so "with the stop" means the first narrow band from there on: with ``--n-start 14 --n-max 14`` (one
fixed n, the fast way to measure one cell on many seeds) only the fixed-n rows mean anything.

``--real``: the same on real MBPP (the 12 configs with 50 samples on each of 364 tasks), each path drawing a
task's samples without replacement; the truth is the unbiased pass@k on all 50.

Usage: python benchmarks/stop_bias.py [--reps 50] [--families zeros+tiny,zoib-like] [--model auto]
       [--n-fixed 8,10,12,14,16,20] [--seed-offset 1000] [--json out.json]
One fixed n only (fits two rounds per replicate): --n-start 14 --n-max 14 --n-fixed 14.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from allocate import truth, uniform_round  # noqa: E402


def fit_bands(n, c, names, args):
    """One EB fit of every path's counts (paths x tasks) and its ``ci_prob`` band of dataset pass@k.

    Returns per path: the band's lower and upper ends and the posterior mean, from one curve.
    """
    import warnings

    import bayespass as bp

    counts = bp.make_counts(n, c, task=[f"t{i}" for i in range(n.shape[1])], config=names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = bp.fit(counts, args.model, "eb", progressbar=False)
        cur = bp.passk_curve(f, [args.k], ci_prob=args.ci_prob)
    eti = cur["eti"].sel(k=args.k).values
    return eti[:, 0], eti[:, 1], cur["mean"].sel(k=args.k).values


def path(p, args, rng):
    """One uniform path of ``allocate.py``'s uniform arm, refitted every round from ``--n-start`` samples on.

    Returns rows (min n, total samples, lo, hi, posterior mean) for every fitted round.
    """
    n = np.full(p.size, args.n0)
    c = rng.binomial(n, p)
    rows = []
    while n.min() <= args.n_max:
        if n.min() >= args.n_start:
            lo, hi, mean = fit_bands(n[None], c[None], ["sim"], args)
            rows.append((int(n.min()), int(n.sum()), float(lo[0]), float(hi[0]), mean[0]))
        extra = uniform_round(n)
        c = c + rng.binomial(extra, p)
        n = n + extra
    return rows


def summarise(runs, args):
    """Coverage with the stop and at each fixed n, from the recorded paths."""
    out = {"stopped": [], "fixed": {}}
    for true, rows in runs:
        narrow = [r for r in rows if r[3] - r[2] <= args.width]
        if narrow:
            _, tot, lo, hi, mean = narrow[0]
            out["stopped"].append((tot, lo <= true <= hi, lo > true, _bias(mean, true)))
    for m in args.n_fixed:
        cells = []
        for true, rows in runs:
            at = [r for r in rows if r[0] == m and r[1] == m * args.tasks]
            if at:
                _, _, lo, hi, mean = at[0]
                cells.append((hi - lo <= args.width, lo <= true <= hi, lo > true, hi - lo, _bias(mean, true)))
        out["fixed"][m] = cells
    return out


def _bias(mean, true):
    return np.nan if mean is None else mean - true


def report(fam, out, args):
    s = np.array(out["stopped"], float)
    if s.size:
        print(f"| {fam} | with the stop | {len(s)} | {s[:, 0].mean():.0f} samples | {s[:, 1].mean():.2f} | "
              f"{s[:, 2].mean():.2f} | mean - truth {s[:, 3].mean():+.4f} |")
    for m, cells in out["fixed"].items():
        if not cells:
            continue
        a = np.array(cells, float)
        nar = a[a[:, 0] == 1]
        wide = a[a[:, 0] == 0]
        cov_n = f"{nar[:, 1].mean():.2f} of {len(nar)}" if len(nar) else "-"
        cov_w = f"{wide[:, 1].mean():.2f} of {len(wide)}" if len(wide) else "-"
        print(f"| {fam} | n = {m} per task | {len(a)} | width {a[:, 3].mean():.4f} | {a[:, 1].mean():.2f} | "
              f"{a[:, 2].mean():.2f} | narrow: {cov_n}; wide: {cov_w} | mean - truth {a[:, 4].mean():+.4f} |",
              flush=True)


def sample_order(c, n: int, rng) -> np.ndarray:
    """A random order of each task's samples: (task, n) booleans with exactly ``c[task]`` passes, every order
    equally likely (drawing the samples without replacement)."""
    rank = np.argsort(rng.random((len(c), n)), axis=1)  # a uniformly random permutation of 0..n-1 per task
    return rank < np.asarray(c)[:, None]


def real_runs(args) -> tuple[list, int]:
    """The real-data paths: per config of real MBPP (50 samples per task), ``--reps`` uniform paths.

    Each path draws a task's samples without replacement in a random order of its 50 outcomes; every round
    adds one sample to the half of the tasks with the fewest, as the simulated paths do.  All paths (configs x
    replicates) are fitted together, one fit per round.  The truth is the unbiased pass@k on all 50 samples.
    Returns the runs (truth, rows) and the number of tasks.
    """
    from calibration import full_reference, real_counts

    df = real_counts("tuning")
    if df is None:
        raise SystemExit("data/real_mbpp/counts.csv is absent")
    rng = np.random.default_rng(args.seed_offset)
    names, outcomes, truths = [], [], []
    for (model, temp), g in df.groupby(["model", "temperature"]):
        n_full, c_full = g.n.to_numpy(), g.c.to_numpy()
        true = float(full_reference(n_full, c_full, [args.k])[0])
        for r in range(args.rep0, args.rep0 + args.reps):
            outcomes.append(sample_order(c_full, int(n_full.max()), rng))
            names.append(f"{model}|T={temp}|r{r}")
            truths.append(true)
    won = np.cumsum(np.stack(outcomes), axis=2)  # (path, task, j): passes among the first j + 1 samples
    T = won.shape[1]
    n = np.full(T, args.n0)
    rows = [[] for _ in names]
    while n.min() <= args.n_max:
        if n.min() >= args.n_start:
            lo, hi, mean = fit_bands(np.broadcast_to(n, won.shape[:2]), won[:, np.arange(T), n - 1], names, args)
            for i in range(len(names)):
                rows[i].append((int(n.min()), int(n.sum()), float(lo[i]), float(hi[i]), float(mean[i])))
            print(f"  {int(n.sum())} samples per config fitted", flush=True)
        n = n + uniform_round(n)
    return list(zip(truths, rows, strict=True)), T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rep0", type=int, default=0, help="first replicate (to split a run across processes)")
    ap.add_argument("--tasks", type=int, default=150)
    ap.add_argument("--n0", type=int, default=2)
    ap.add_argument("--n-start", type=int, default=6, help="fit from this many samples per task on")
    ap.add_argument("--n-max", type=int, default=20)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--width", type=float, default=0.05)
    ap.add_argument("--ci-prob", type=float, default=0.9)
    ap.add_argument("--model", default="auto")
    ap.add_argument("--families", default="zeros+tiny,zoib-like")
    ap.add_argument("--n-fixed", default="8,10,12,14,16,20")
    ap.add_argument("--seed-offset", type=int, default=1000,
                    help="truths from seeds OFFSET + r; 1000 (the default) repeats allocate.py's replicates (data "
                         "seeds [r, 7]), any other offset draws other data too (seeds [OFFSET + r, 7])")
    ap.add_argument("--other-data", action="store_true",
                    help="data seeds [OFFSET + r, 7] also with the default offset (allocate.py's truths, other data)")
    ap.add_argument("--real", action="store_true",
                    help="real MBPP instead of simulated truths: the 12 configs with 50 samples per task "
                         "(data/real_mbpp/counts.csv), --reps paths each; --tasks is ignored")
    ap.add_argument("--json", help="write every replicate's path here")
    args = ap.parse_args()
    args.n_fixed = [int(x) for x in args.n_fixed.split(",")]
    data = ("real MBPP (12 configs x 364 tasks, rounds of 182 samples per config)" if args.real
            else f"T={args.tasks} tasks, uniform rounds of {args.tasks // 2} samples")
    print(f"{data}, n0={args.n0}, k={args.k}, {args.ci_prob:.0%} band of pass@k, stop at width {args.width}, "
          f"model {args.model} (EB), replicates {args.rep0}-{args.rep0 + args.reps - 1}\n")
    print("| truth | band | replicates | size | covers | above the truth | coverage by width there | bias |")
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    dump = {}
    if args.real:
        runs, args.tasks = real_runs(args)  # the fixed-n rows need the tasks: samples = n x tasks
        dump["real MBPP"] = [{"truth": t, "rows": rows} for t, rows in runs]
        report("real MBPP", summarise(runs, args), args)
    for fam in ([] if args.real else args.families.split(",")):
        runs = []
        for r in range(args.rep0, args.rep0 + args.reps):
            p = truth(fam, args.tasks, np.random.default_rng(args.seed_offset + r))
            true = float(np.mean(-np.expm1(args.k * np.log1p(-np.minimum(p, 1 - 1e-15)))))
            data_seed = r if args.seed_offset == 1000 and not args.other_data else args.seed_offset + r
            runs.append((true, path(p, args, np.random.default_rng([data_seed, len("uniform")]))))
        dump[fam] = [{"truth": t, "rows": rows} for t, rows in runs]
        report(fam, summarise(runs, args), args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": dump}, fh)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
