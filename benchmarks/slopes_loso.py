"""Does a criterion from the counts choose `shared`'s one-slope model where it ranks pass@10 better?

`shared` weighs its model with a slope per config against one slope for all by their Laplace evidence
(``slopes_log_bayes_factor``).  On the 16 held-out real MBPP configs the evidence chooses slopes at every m, yet
from 2 or 5 samples per task the one-slope model ranks pass@10 better (benchmarks/RESULTS.md, "Slopes on the
held-out configs").  Pass@k beyond the samples drawn is a prediction of further samples of the same tasks, so
this script scores each model by that: the leave-one-sample-out log predictive, each sample of each (config,
task) predicted from the others and from every other config's counts, the task's difficulty integrated on the
grid, the parameters at each model's mode (plug-in).  Run::

    python benchmarks/slopes_loso.py --real-set heldout --m 2 --reps 4     # a minute
    python benchmarks/slopes_loso.py --real-set heldout --m 2 --reps 3 --eta-sds 0.05,0.1,0.2,0.3,0.5,0.7,1
    python benchmarks/slopes_loso.py --real-set tuning --m 1 --reps 5 --eta-sds 0.05,0.1,0.2,0.3,0.5,0.7,1 --closed-form

``--eta-sds`` prints instead, per replicate, the log Bayes factor of slopes at each prior sd of ``eta`` (the
product's 0.5): as a function of sd it is the log marginal likelihood of that sd, up to a constant, so its
peak is the sd the counts prefer (a learnt spread of the slopes would sit there).  ``--closed-form`` adds the
same curve updated in closed form from the fit at the product's sd (:func:`closed_form_by_sd`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))


def loso(theta: np.ndarray, d, J: int) -> float:
    """Sum over (config, distinct task, sample) of log p(that sample | the rest), at parameters ``theta``.

    ``d``: the model's ``_Data``.  Sequence probabilities (the samples are exchangeable), so it is the same
    whichever of a config's successes (or failures) is left out; (config, task) cells with fewer than 2 samples
    have nothing to predict from their own counts and are left out.
    """
    from bayespass.models import shared as S
    from bayespass.stats.kernels import bb_loglik

    alpha, log_phi, beta, log_s = S._split(theta, J)
    ll, _, a, b = S._lik(alpha, np.exp(log_phi), d, d.x, np.exp(log_s))  # (J, U, G), with C(n, c)
    s = ll.sum(0) + S._log_g(beta, d.hat)[None, :]
    full = logsumexp(s, axis=1)
    total = 0.0
    for j in range(J):
        n, c = d.n[j], d.c[j]
        for dc, left in ((1, c), (0, n - c)):  # leave out a success, or a failure
            sel = (n >= 2) & (left > 0)
            nn, cc = np.where(sel, n - 1, 1)[:, None], np.where(sel, c - dc, 0)[:, None]  # valid where unused
            red = np.where(sel[:, None], bb_loglik(a[j], b[j], nn, cc), 0.0)
            reduced = logsumexp(s - ll[j] + red, axis=1)
            # from counts to sequences: log C(n, c) - log C(n - 1, c - dc) = log(n / left)
            coef = np.log(np.where(sel, n / np.maximum(left, 1), 1.0))
            total += float(np.sum((d.w * left * (full - reduced - coef))[sel]))
    return total


def scores(counts) -> tuple[float, float, float]:
    """Leave-one-sample-out log predictive with slopes, without, and the log Bayes factor of slopes."""
    from bayespass.models import shared as S

    with_, without, _, log_bf = S.Shared().modes(counts)
    J = counts.sizes["config"]
    return loso(with_[0].x, with_[3], J), loso(without[0].x, without[3], J), log_bf


def modes_by_sd(counts, sds, modes=None) -> list[tuple[float, tuple]]:
    """``(sd, Shared.modes(counts))`` at each prior sd of ``eta``; the product's prior is restored after.

    ``modes``: the function to call (default ``Shared().modes``; compare.py's variant passes the unpatched one).
    """
    from bayespass.models import shared as S

    modes = S.Shared().modes if modes is None else modes
    saved, out = S._PRIOR["eta"], []
    try:
        for sd in sds:
            S._PRIOR["eta"] = (0.0, float(sd))
            out.append((float(sd), modes(counts)))
    finally:
        S._PRIOR["eta"] = saved
    return out


def evidence_by_sd(counts, sds) -> list[tuple[float, float, float]]:
    """``(sd, log Bayes factor of slopes, sd of the fitted log slopes)`` at each prior sd of ``eta``."""
    from bayespass.models import shared as S

    J = counts.sizes["config"]
    return [(sd, m[3], float(np.std(S._basis(J) @ m[0][0].x[2 * J + S.KNOTS.size:])))
            for sd, m in modes_by_sd(counts, sds)]


def closed_form_by_sd(with_, J: int, sds, sd0: float | None = None) -> np.ndarray:
    """Change of the slopes' model's log evidence from prior sd ``sd0`` (default the product's) to each of ``sds``,
    in closed form from the Laplace approximation at the mode ``with_`` (a mode tuple of ``Shared.modes``, found
    at ``sd0``): the prior change on ``eta`` is Gaussian, so within the approximation the new posterior is one
    Newton step away and its evidence closed-form, as ``shared._pooled`` does for the siblings' sw.  The
    sixty-third session measured it against the exact scan (:func:`evidence_by_sd`): a candidate for choosing the
    sd without a mode search per grid point.
    """
    from bayespass.models import shared as S

    sd0 = S._PRIOR["eta"][1] if sd0 is None else float(sd0)
    x0, cov = with_[0].x, with_[4]
    H = np.linalg.inv(cov)
    e = slice(2 * J + S.KNOTS.size, x0.size)
    logdet_h = np.linalg.slogdet(H)[1]
    out = []
    for sd in sds:
        dd = 1.0 / sd**2 - 1.0 / sd0**2  # the prior precision's change on each eta
        Hn = H.copy()
        Hn[e, e] += dd * np.eye(x0[e].size)
        g = np.zeros_like(x0)
        g[e] = dd * x0[e]
        dx = -np.linalg.solve(Hn, g)
        xn = x0 + dx
        val = 0.5 * dx @ H @ dx + 0.5 * dd * xn[e] @ xn[e]  # the negative log posterior's change at its new mode
        out.append(-val - 0.5 * (np.linalg.slogdet(Hn)[1] - logdet_h) - x0[e].size * np.log(sd / sd0))
    return np.array(out)


def main(argv=None):
    from compare import load_real, subsample

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-set", default="heldout", choices=("tuning", "heldout"))
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--eta-sds", default=None, help="comma-separated prior sds of eta: print the evidence of each")
    ap.add_argument("--closed-form", action="store_true",
                    help="with --eta-sds: also the closed-form update from the product's sd (closed_form_by_sd)")
    args = ap.parse_args(argv)
    counts = load_real(args.real_set)
    rng = np.random.default_rng(1000 + args.m)  # compare.py's replicates
    for r in range(args.reps):
        if args.eta_sds:
            sub, sds = subsample(counts, args.m, rng), [float(x) for x in args.eta_sds.split(",")]
            rows = evidence_by_sd(sub, sds)
            print(f"replicate {r}: " + "  ".join(f"sd {sd:g}: log BF {b:+.1f} (fitted log-slope sd {s:.2f})"
                                                 for sd, b, s in rows), flush=True)
            if args.closed_form:
                from bayespass.models import shared as S

                with_, _, _, log_bf = S.Shared().modes(sub)
                cf = closed_form_by_sd(with_, sub.sizes["config"], sds) + log_bf
                print("  closed form from the product's sd: " + "  ".join(f"sd {sd:g}: {b:+.1f}"
                                                                          for sd, b in zip(sds, cf, strict=True)))
            continue
        a, b, log_bf = scores(subsample(counts, args.m, rng))
        print(f"replicate {r}: leave-one-sample-out log predictive with slopes {a:.1f}, one slope {b:.1f}, "
              f"difference {a - b:+.1f}; log Bayes factor of slopes {log_bf:+.1f}", flush=True)


if __name__ == "__main__":
    main()
