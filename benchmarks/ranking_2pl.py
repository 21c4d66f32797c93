"""Does a per-task discrimination rank configs at k = 1 better than their totals? (issue 18; fifty-ninth session)

    python benchmarks/ranking_2pl.py [--real-set tuning] [--m 1] [--reps 30] [--sd 0,0.3,0.5,0.8] [--phi 2]

At k = 1 the joint model `shared` orders configs as the number of tasks they passed and only breaks its ties
(RESULTS.md, "At k = 1 the joint model's ranking is the naive one with its ties broken"): under a Rasch-type
model ``logit p_ij = alpha_j - x_i`` a config's total is sufficient for its ability.  A two-parameter model
``logit p_ij = a_i (alpha_j - x_i)`` is not: a task every config passes or fails by chance (``a_i`` near 0) tells
little, and one that separates the configs (large ``a_i``) tells more, so the configs are ordered by a weighted
total.  This prototype measures whether that ordering is closer to the ranking on all samples.

The model, fitted by marginal maximum likelihood (EM): ``x_i ~ g`` on a grid of 41 points in [-8, 8], g learnt
(a histogram, with 0.5 added to every point); ``log a_i ~ Normal(0, sd)`` on 7 Gauss-Hermite nodes (sd fixed,
``--sd``; sd = 0 is the Rasch model); abilities with a Normal(0, 3) penalty.  pass@1 of a config is the mean over
tasks of the posterior mean of p_ij: of ``logistic(a (alpha_j - x))`` under the task's posterior over the
grid, or with ``--phi`` of the Beta(phi mu, phi (1 - mu)) about it given the config's own count.

Replicates are drawn as ``compare.py``'s (``compare.subsample``: m of each task's samples), from another seed.
"sd by likelihood" takes, per replicate, the sd of the highest marginal likelihood (EM's, at its fitted
abilities and g) among those tried.  The score is Kendall tau against pass@1 on all samples, and its gain
over the naive ranking with its ties broken at random (``compare.tau_untied``), with the paired standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, expit, logsumexp
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import load_real, paired_gain, subsample, tau_untied  # noqa: E402

GRID = np.linspace(-8.0, 8.0, 41)


def _nodes(sd: float, n: int = 7):
    """Discriminations and their weights: ``log a ~ Normal(0, sd)`` on n Gauss-Hermite nodes (one node at sd 0)."""
    if sd == 0:
        return np.ones(1), np.ones(1)
    z, w = np.polynomial.hermite_e.hermegauss(n)
    return np.exp(sd * z), w / w.sum()


def _log_lik_table(alpha, a, m: int, phi):
    """Log-likelihood (J, m + 1, A, X) of every count value at every (discrimination, difficulty) node, and mu."""
    mu = np.clip(expit(a[None, :, None] * (alpha[:, None, None] - GRID[None, None, :])), 1e-12, 1 - 1e-12)
    v = np.arange(m + 1)[None, :, None, None]
    if phi is None:
        return v * np.log(mu[:, None]) + (m - v) * np.log1p(-mu[:, None]), mu
    a_, b_ = mu * phi, (1 - mu) * phi
    return betaln(a_[:, None] + v, b_[:, None] + m - v) - betaln(a_, b_)[:, None], mu


def fit_pass1(c: np.ndarray, m: int, sd: float, phi: float | None = None, iters: int = 15, *,
              log_lik: bool = False):
    """Posterior-mean pass@1 per config (J,) from counts ``c`` (J, T) of m samples each.

    With ``log_lik=True`` also the log marginal likelihood at the fitted abilities and g (to choose sd by it).
    """
    J = c.shape[0]
    a, wa = _nodes(sd)
    onehot = (c[:, :, None] == np.arange(m + 1)[None, None, :]).astype(float)  # (J, T, m + 1)
    alpha, g = np.zeros(J), np.full(GRID.size, 1.0 / GRID.size)

    def log_post(alpha, g):  # (T, A, X): log p(counts of the task, node)
        tab, mu = _log_lik_table(alpha, a, m, phi)
        return np.einsum("jtv,jvax->tax", onehot, tab) + np.log(wa)[None, :, None] + np.log(g)[None, None, :], mu

    for _ in range(iters):
        s, _ = log_post(alpha, g)
        r = np.exp(s - logsumexp(s, axis=(1, 2), keepdims=True))
        g = r.sum((0, 1)) + 0.5
        g /= g.sum()
        alpha = minimize(lambda t, g=g: -logsumexp(log_post(t, g)[0], axis=(1, 2)).sum() + (t @ t) / 18, alpha,
                         method="L-BFGS-B").x
    s, mu = log_post(alpha, g)
    lse = logsumexp(s, axis=(1, 2), keepdims=True)
    r = np.exp(s - lse)  # (T, A, X)
    if phi is None:
        out = np.einsum("tax,jax->j", r, mu) / c.shape[1]
    else:
        post = (phi * mu[:, None] + c[:, :, None, None]) / (phi + m)  # (J, T, A, X)
        out = np.einsum("tax,jtax->j", r, post) / c.shape[1]
    return (out, float(lse.sum())) if log_lik else out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-set", default="tuning", choices=("tuning", "heldout"))
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--sd", default="0,0.3,0.5,0.8", help="prior sds of log a, comma-separated (0: Rasch)")
    ap.add_argument("--phi", type=float, default=None, help="a config's dispersion about the task's mean (Beta)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import bayespass as bp

    counts = load_real(args.real_set)  # compare.py's configs and tasks; its truth and its subsamples below
    truth = bp.passk(counts, 1, method="unbiased").values.ravel()
    sds = [float(s) for s in args.sd.split(",")]
    rng = np.random.default_rng(args.seed)
    taus = {"naive": [], **{f"sd={s}": [] for s in sds}, "sd by likelihood": []}
    chosen = []
    for r in range(args.reps):
        c = subsample(counts, args.m, rng).c.transpose("config", "task").values.astype(float)
        taus["naive"].append(tau_untied(c.mean(1), truth))
        fits = [fit_pass1(c, args.m, s, args.phi, log_lik=True) for s in sds]
        for s, (est, _) in zip(sds, fits, strict=True):
            taus[f"sd={s}"].append(float(kendalltau(est, truth).statistic))
        best = int(np.argmax([ll for _, ll in fits]))  # marginal likelihood over the sds tried
        chosen.append(sds[best])
        taus["sd by likelihood"].append(float(kendalltau(fits[best][0], truth).statistic))
        print(f"rep {r + 1}/{args.reps}", file=sys.stderr, flush=True)
    cells = f"{args.real_set} ({counts.sizes['config']} x {counts.sizes['task']})"
    print("| set | m | phi | estimator | Kendall tau | gain over naive, ties broken | paired s.e. |")
    print("|---|---|---|---|---|---|---|")
    for name, v in taus.items():
        _, gain, se = paired_gain(v, taus["naive"])
        print(f"| {cells} | {args.m} | {args.phi} | {name} | "
              f"{np.mean(v):.3f} | {gain:+.4f} | {se:.4f} |")
    print(f"sd chosen by the marginal likelihood: {dict(zip(*np.unique(chosen, return_counts=True), strict=True))}")


if __name__ == "__main__":
    main()
