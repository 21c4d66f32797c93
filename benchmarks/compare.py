"""Ranking and P(better) of configs from few samples, validated on real generations (issue 18, item 5).

    python benchmarks/compare.py [--reps 50] [--m 1,2,5] [--model bb] [--method eb] [--out results/compare_real.json]

The real MBPP counts (``data/real_mbpp/counts.csv``: configs x 364 tasks, n = 50 samples each, executed from
``../shared/data/real/difftrust_mbpp``) are the truth: pass@k of every config on all its samples (unbiased
estimator, k <= 50).  Each replicate keeps m random samples per task and config (a hypergeometric draw of
c from (50, c)), compares the configs with :func:`bayespass.compare_configs` and scores:

- Kendall tau between the ranking by posterior mean pass@k and the true ranking, for k in {1, 10}, against
  the naive ranking (unbiased estimate at k, or at m when k > m: the best it has) and the scorio-style
  ranking (independent per-task Beta(1, 1) posteriors).  scipy's tau-b counts a pair the estimate ties as
  neither right nor wrong, and the naive and scorio-style estimates tie often (at m = 1 both are the
  number of tasks passed, up to a constant); a leaderboard must still list tied configs in some order, so
  the baselines' tau is also given with their ties broken at random (its expectation, exact:
  :func:`tau_untied`), beside the pairs the naive estimate orders that bayespass orders the other way;
- calibration of ``prob_better``: every ordered pair's predicted P(A better than B) against whether A is
  truly better, in 10 bins; expected calibration error (ECE), also for the two baselines' probabilities;
- coverage and width of every config's band of pass@k (the leaderboard's), against the truth.

Rows go to a JSON file; ``--report`` prints the markdown tables for RESULTS.md.
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
from scipy.stats import kendalltau

HERE = Path(__file__).resolve().parent
COUNTS = HERE.parent / "data" / "real_mbpp" / "counts.csv"


def load_real(which="tuning"):
    """Counts of the real configs: ``"tuning"``, those with n = 50 on every task (the 12 every choice of issue 18
    was made on); ``"heldout"``, those with 10 <= n < 50 on every task (16 configs that chose nothing), on the
    tasks common to all of them.  The selection is :func:`calibration.real_counts`' (one definition)."""
    import bayespass as bp

    sys.path.insert(0, str(HERE))
    from calibration import real_counts

    df = real_counts(which)
    if df is None:
        raise FileNotFoundError(COUNTS)
    return bp.counts_from_frame(df[["model", "temperature", "task", "n", "c"]])


def ece(p, y, bins=10):
    """Expected calibration error of probabilities p for outcomes y (equal-width bins) and the bin table."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    if p.size == 0:
        return float("nan"), []
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    err, table = 0.0, []
    for b in range(bins):
        sel = idx == b
        if sel.any():
            err += sel.mean() * abs(p[sel].mean() - y[sel].mean())
            table.append((float(edges[b]), float(edges[b + 1]), int(sel.sum()), float(p[sel].mean()),
                          float(y[sel].mean())))
    return float(err), table


def tau_untied(x, truth) -> float:
    """Expected Kendall tau-b of ``x`` against ``truth`` when the ties of ``x`` are broken uniformly at random.

    A pair ``x`` ties adds +1 or -1 to tau's numerator with equal chance once broken, so the expected
    numerator is tau-b's; the denominator loses the factor for ``x``'s ties: ``tau_b * sqrt(1 - t / P)``
    with ``t`` of the ``P`` pairs tied in ``x``.  Values equal to 12 decimals count as tied (the same number of
    tasks passed can differ in the last bit, summed in another order).
    """
    x = np.round(np.asarray(x, float), 12)
    pairs = x.size * (x.size - 1) / 2
    return float(kendalltau(x, truth).statistic * np.sqrt(1 - tied_pairs(x) / pairs))


def tied_pairs(x) -> int:
    """Pairs of ``x`` equal to 12 decimals."""
    r = np.round(np.asarray(x, float), 12)
    return int(np.triu(r[:, None] == r[None, :], 1).sum())


def flips(x, ref) -> int:
    """Pairs that ``ref`` orders (no tie) and ``x`` orders the other way or ties."""
    ref, x = (np.round(np.asarray(v, float), 12) for v in (ref, x))
    iu = np.triu_indices(len(ref), 1)
    dr = np.sign(np.subtract.outer(ref, ref))[iu]
    dx = np.sign(np.subtract.outer(x, x))[iu]
    return int(((dr != 0) & (dx != dr)).sum())


def subsample(counts, m, rng):
    """``counts`` with m of each (config, task)'s samples kept: a hypergeometric draw of its successes."""
    n, c = counts.n.values, counts.c.values
    return counts.copy(data={"n": np.full_like(n, m), "c": rng.hypergeometric(c, n - c, np.full_like(n, m))})


def replicate(counts, truth, m, ks, rng, model, method, seed):
    import bayespass as bp

    sub = subsample(counts, m, rng)
    cmp = bp.compare_configs(sub, k=ks, model=model, method=method, seed=seed)
    out = {"tau": {}, "pairs": {}}
    J = counts.sizes["config"]
    iu = ~np.eye(J, dtype=bool)
    for kk in ks:
        tv = truth.sel(k=kk).values
        naive_k = min(kk, m)
        naive = bp.passk(sub, naive_k, method="unbiased").values.ravel()
        scores = {"bayespass": cmp["passk"].sel(k=kk).values, "naive": naive,
                  "beta": cmp["beta_passk"].sel(k=kk).values}
        out["tau"][int(kk)] = {name: float(kendalltau(s, tv).statistic) for name, s in scores.items()}
        out["tau"][int(kk)].update({f"{name}_untied": tau_untied(scores[name], tv) for name in ("naive", "beta")})
        out["tau"][int(kk)]["naive_ties"] = tied_pairs(naive)
        out["tau"][int(kk)]["flips"] = flips(scores["bayespass"], naive)
        # the order by expected rank (the leaderboard's before the forty-fourth session), ties broken
        out["tau"][int(kk)]["expected_rank"] = tau_untied(-cmp["expected_rank"].sel(k=kk).values, tv)
        lo, hi = cmp["passk_eti"].sel(k=kk).transpose("ci_bound", "config").values
        out.setdefault("band", {})[int(kk)] = {"cover": ((lo <= tv) & (tv <= hi)).tolist(), "width": (hi - lo).tolist()}
        better = (tv[:, None] > tv[None, :])[iu]
        out["pairs"][int(kk)] = {"y": better.astype(int).tolist(),
                                 "bayespass": cmp["prob_better"].sel(k=kk).values[iu].tolist(),
                                 "beta": cmp["beta_prob_better"].sel(k=kk).values[iu].tolist(),
                                 "paired": cmp["paired_prob_better"].sel(k=kk).values[iu].tolist()}
    return out


def run(args):
    import bayespass as bp

    counts = load_real(which=args.real_set)
    ks = args.k
    truth = bp.passk(counts, ks, method="unbiased")
    rows = []
    for m in args.m:
        rng = np.random.default_rng(1000 + m)
        res = []
        t0 = time.perf_counter()
        for r in range(args.reps):
            res.append(replicate(counts, truth, m, ks, rng, args.model, args.method, seed=r))
            print(f"m={m} rep {r + 1}/{args.reps} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for kk in ks:
            row = {"m": m, "k": kk, "reps": args.reps, "set": args.real_set, "configs": int(counts.sizes["config"]),
                   "tasks": int(counts.sizes["task"]), "model": args.model, "method": args.method}
            for name in ("bayespass", "naive", "beta", "naive_untied", "beta_untied", "naive_ties", "flips"):
                taus = [x["tau"][kk][name] for x in res]
                row[f"tau_{name}"] = float(np.nanmean(taus))
            row.update(gain_against_best(res, kk))
            if "expected_rank" in res[0]["tau"][kk]:  # runs before the forty-fourth session have none
                _, row["erank_minus_mean"], row["erank_minus_mean_se"] = paired_gain(
                    [x["tau"][kk]["expected_rank"] for x in res], [x["tau"][kk]["bayespass"] for x in res])
            row["coverage"] = float(np.mean([x["band"][kk]["cover"] for x in res]))  # of the leaderboard's band
            row["width"] = float(np.mean([x["band"][kk]["width"] for x in res]))
            y = np.concatenate([x["pairs"][kk]["y"] for x in res])
            for name in ("bayespass", "beta", "paired"):
                p = np.concatenate([x["pairs"][kk][name] for x in res])
                ok = np.isfinite(p)
                row[f"ece_{name}"], table = ece(p[ok], y[ok])
                if name == "bayespass":
                    row["reliability"] = table
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("reliability", "gain_reps")}), file=sys.stderr,
                  flush=True)
    return rows


def gain_against_best(res, kk) -> dict:
    """Per-replicate gain of bayespass's Kendall tau over the better baseline (ties broken), its mean and paired s.e.

    The better baseline is the one with the higher mean tau over the replicates (the issue's "best baseline").
    The per-replicate gains are kept (``gain_reps``) so that cells on the same replicates can be pooled.
    """
    base = max(("naive_untied", "beta_untied"), key=lambda b: np.nanmean([x["tau"][kk][b] for x in res]))
    gain, mean, se = paired_gain([x["tau"][kk]["bayespass"] for x in res], [x["tau"][kk][base] for x in res])
    return {"best_baseline": base.removesuffix("_untied"), "gain": mean, "gain_se": se, "gain_reps": gain.tolist()}


def paired_gain(x, base) -> tuple[np.ndarray, float, float]:
    """Per-replicate differences ``x - base``, their mean and its standard error (NaN from one replicate)."""
    gain = np.subtract(x, base, dtype=float)
    se = float(np.std(gain, ddof=1) / np.sqrt(gain.size)) if gain.size > 1 else float("nan")
    return gain, float(np.mean(gain)), se


def pooled_gain(rows, ms=(1, 2), ks=(1, 10)) -> tuple[float, float] | None:
    """The issue's average gain over its cells (m in ``ms``, k in ``ks``) and its s.e.

    Cells at the same m share replicates (their gains are paired by replicate); different m's are independent.
    """
    means, variances = [], []
    for m in ms:
        cells = [r for r in rows if r["m"] == m and r["k"] in ks and "gain_reps" in r]
        if len(cells) != len(ks):
            return None
        per_rep = np.mean([r["gain_reps"] for r in cells], axis=0)  # the cells' mean gain, per replicate
        means.append(per_rep.mean())
        variances.append(per_rep.var(ddof=1) / per_rep.size)
    return float(np.mean(means)), float(np.sqrt(np.sum(variances)) / len(ms))


def report(rows) -> str:
    out = ["| m | k | model | reps | Kendall tau: bayespass | naive | scorio-style Beta | "
           "naive, ties broken | Beta, ties broken | naive's tied pairs | pairs reordered | "
           "ECE of P(better): bayespass | Beta | paired s.e. | band coverage | band width |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["m"], r["k"], f"{r['model']}-{r['method']}", r["reps"]]
        cells += [f"{r[c]:.3f}" for c in ("tau_bayespass", "tau_naive", "tau_beta")]
        cells += [f"{r[c]:.3f}" if c in r else "-" for c in ("tau_naive_untied", "tau_beta_untied")]  # 33rd session
        cells += [f"{r[c]:.2f}" if c in r else "-" for c in ("tau_naive_ties", "tau_flips")]
        cells += [f"{r[c]:.3f}" for c in ("ece_bayespass", "ece_beta", "ece_paired")]
        cells += [f"{r[c]:.3f}" if c in r else "-" for c in ("coverage", "width")]  # runs before the thirty-first
        out.append("| " + " | ".join(map(str, cells)) + " |")
    gains = [r for r in rows if "gain" in r]  # runs before the forty-first session have no per-replicate taus
    if gains:
        out += ["", "| m | k | best baseline (ties broken) | gain of bayespass's tau | paired s.e. |",
                "|---|---|---|---|---|"]
        out += [f"| {r['m']} | {r['k']} | {r['best_baseline']} | {r['gain']:+.3f} | {r['gain_se']:.3f} |"
                for r in gains]
        erank = [r for r in rows if "erank_minus_mean" in r]
        if erank:
            out += ["", "| m | k | tau of the order by expected rank minus that by posterior mean | paired s.e. |",
                    "|---|---|---|---|"]
            out += [f"| {r['m']} | {r['k']} | {r['erank_minus_mean']:+.3f} | {r['erank_minus_mean_se']:.3f} |"
                    for r in erank]
        pooled = pooled_gain(rows)
        if pooled is not None:
            out.append(f"\nAverage gain over m = 1, 2 and k = 1, 10 (the issue's +0.03): {pooled[0]:+.3f} "
                       f"(s.e. {pooled[1]:.3f})")
    return "\n".join(out)


def use_hessian_eb() -> None:
    """A variant measured and not adopted (thirty-eighth session): EB draws of ``shared`` from the observed Hessian.

    The product's EB draws come from the Laplace approximation whose precision is the outer product of the
    per-task scores; this replaces that covariance (the draws' only) by the inverse of the observed Hessian at
    the mode, as the HMC's whitening computes it, so that EB's draws match the exact posterior's width.  The
    models' weights (their Laplace evidence) are unchanged.
    """
    from bayespass.models import shared

    modes = shared.Shared.modes

    def hessian_cov(neg, mode):  # bounded as the product's covariance is
        return shared._bounded_inverse(*shared._observed_hessian(neg, mode))

    def swap(m):
        return None if m is None else m[:4] + (hessian_cov(m[1], m[0].x), m[5])

    def patched(self, counts):
        with_, without, weight, log_bf = modes(self, counts)
        return swap(with_), swap(without), weight, log_bf

    shared.Shared.modes = patched


def without_slopes() -> None:
    """A variant measured and not adopted (sixty-first session): ``shared`` with one slope for all configs.

    The product weighs the model with a slope per config against one slope by their Laplace evidence; this
    gives the one-slope model weight 1 whatever the evidence.
    """
    from bayespass.models import shared

    modes = shared.Shared.modes

    def patched(self, counts):
        with_, without, _, log_bf = modes(self, counts)
        return with_, without, 0.0, log_bf

    shared.Shared.modes = patched


def with_eta_sd(sd: float) -> None:
    """A variant measured and not adopted (sixty-second session): the slopes' prior sd (the product's 0.5).

    ``log s = Z eta``, ``eta ~ Normal(0, sd^2)``; the evidence of the slopes' model changes with it (its own
    normalisation included), so the weight of slopes does too.
    """
    from bayespass.models import shared

    if not sd > 0:
        raise ValueError(f"--eta-sd must be positive; got {sd}")
    shared._PRIOR["eta"] = (0.0, float(sd))


ETA_SD_GRID = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def eta_sd_by_evidence(grid=ETA_SD_GRID) -> None:
    """A variant measured and not adopted (sixty-second session): the slopes' prior sd chosen per fit, at the grid
    point of highest Laplace evidence of the slopes' model (type-II maximum likelihood); the fit then weighs that
    model against one slope as the product does.  ``posterior.attrs`` do not record the sd: a measurement only.
    """
    from bayespass.models import shared

    sys.path.insert(0, str(HERE))
    from slopes_loso import modes_by_sd

    modes = shared.Shared.modes

    def patched(self, counts):  # the modes at the best sd, as the scan found them (their covariance at that sd)
        return max(modes_by_sd(counts, grid, lambda c: modes(self, c)), key=lambda r: r[1][3])[1]

    shared.Shared.modes = patched


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--m", default="1,2,5")
    ap.add_argument("--k", default="1,10", help="the k of pass@k (at most 50, the samples of the truth)")
    ap.add_argument("--hessian-eb", action="store_true", help="a variant not adopted: see use_hessian_eb()")
    ap.add_argument("--no-slopes", action="store_true", help="a variant not adopted: see without_slopes()")
    ap.add_argument("--eta-sd", default=None,
                    help="a variant not adopted: the slopes' prior sd (see with_eta_sd(); the product's 0.5), or "
                         "'evidence': chosen per fit on a grid (eta_sd_by_evidence())")
    ap.add_argument("--real-set", choices=("tuning", "heldout"), default="tuning",
                    help="the 12 configs with 50 samples per task, or the 16 with 10-49 that chose nothing")
    ap.add_argument("--model", default="bb")
    ap.add_argument("--method", default="eb")
    ap.add_argument("--out", default=str(HERE / "results" / "compare_real.json"))
    ap.add_argument("--report", action="store_true", help="print the markdown table of --out and exit")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.out).read_text())))
        return
    args.m = [int(x) for x in args.m.split(",")]
    args.k = [int(x) for x in args.k.split(",")]
    if args.hessian_eb:
        use_hessian_eb()
    if args.no_slopes:
        without_slopes()
    if args.eta_sd == "evidence":
        eta_sd_by_evidence()
    elif args.eta_sd is not None:
        with_eta_sd(float(args.eta_sd))
    rows = run(args)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(report(rows))


if __name__ == "__main__":
    main()
