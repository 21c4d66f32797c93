"""Calibration of dataset-level pass@k bands: coverage, width, interval score and MAE per cell.

Cells: (truth family or real data) x m samples per task x k.  For each cell,
``--reps`` replicate data sets are drawn; every model is fitted to all of them
at once (each replicate is one config of a counts dataset: the fits are
per-config, so this is the same as fitting them one by one, only faster) with
``method="eb"`` and its 90% equal-tailed interval of pass@k is checked against
the truth.

Simulation: per-task p from six families (the published ZOIB priors of the
accuracy benchmark, MBPP-like and CodeContests-like; two-Beta mixtures;
logit-normal; structural zeros plus a cloud of tiny p in [1e-3, 1e-2];
near-deterministic), T = 300 tasks (`--tasks`); truth = mean_i [1 - (1 - p_i)^k] of the
replicate's own p_i.

``--models oracle`` (simulation only) adds the exact Bayes posterior under each
replicate's true prior (``bayespass.testing.oracle_passk``): its coverage on the
same replicates is what a perfect method would show there, the cells' noise
floor, and its MAE the Bayes floor.

Real data: the counts of ``data/real_mbpp/counts.csv`` (real MBPP
generations executed by ``benchmarks/real_mbpp.py``): configs with n = 50 on
every task; a replicate draws m of the 50 samples of each task without
replacement (a hypergeometric draw of the correct ones); the reference is the
unbiased pass@k on all 50, k <= 50.  ``--real-set hard`` keeps the tasks those
configs pass less than 90% of the time on average (a low pass rate benchmark),
``--real-set heldout`` takes the configs with 10-49 samples per task instead.

``--levels 0.5,0.8,0.95,0.99`` scores every fitted model's band at those probabilities too (rows
``model@level``, from the same fits; the interval score at each level's own alpha).

Usage: python benchmarks/calibration.py [--reps 100] [--real-reps 50] [--models bb,zoibb,flex,auto]
       [--real-set tuning|hard|heldout] [--families ...] [--ms 1,2,5,10,20] [--no-sim] [--no-real]
       [--levels 0.5,0.95] [--json out.json] [--flex key=value,...]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
import zlib
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.testing import oracle_passk, true_passk  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KS = (1, 10, 50, 100, 1000)
REAL_KS = (1, 10, 50)
TASKS = 300  # tasks per simulated config unless --tasks says otherwise
T = TASKS  # what every family's generator reads
ALPHA = 0.1
MBPP = [(0.15, 0.03, 0, 0.01), (1.14, 0.27, 0.02, 0), (0.19, 0.14, 0.10, 0.37), (0.79, 0.73, 0.02, 0),
        (0.34, 0.19, 0.07, 0.26), (1.65, 1.19, 0.03, 0)]
CODECONTESTS = [(0.12, 0.37, 0.35, 0), (0.05, 1.72, 0.06, 0), (0.15, 3.76, 0.71, 0), (0.39, 23.24, 0.81, 0),
                (0.03, 0.90, 0.07, 0), (0.02, 0.92, 0.18, 0.01)]
TWO_BETA = [(0.5, (0.3, 4.0), (6.0, 1.5)), (0.3, (0.5, 8.0), (3.0, 3.0)), (0.7, (0.2, 2.0), (10.0, 1.0))]
LOGIT_NORMAL = [(-1.0, 2.5), (1.0, 2.0), (-2.5, 1.5)]
FAMILIES = ("zoib-mbpp", "zoib-codecontests", "two-beta", "logit-normal", "zeros+tiny", "near-deterministic")
#: truth families that chose nothing: the default, its band rule and its priors were settled on FAMILIES and the
#: real data; these check it on shapes it was not tuned on (run them with ``--families``).  Every task at one p
#: (0.05, 0.3 or 0.7: no spread at all, which every candidate's prior finds unlikely); a uniform p; p on four
#: discrete levels; tiny p only (a model that rarely passes anything, p log-uniform in [1e-3, 0.1])
HELD_OUT = {"homogeneous": (0.05, 0.3, 0.7), "uniform": None, "discrete-levels": (0.02, 0.2, 0.5, 0.9),
            "tiny-only": (1e-3, 0.1)}


def _zoib(rng, a, b, pi0, pi1):
    u, p = rng.random(T), rng.beta(a, b, T)
    return np.where(u < pi0, 0.0, np.where(u < pi0 + pi1, 1.0, p))


def draw_family(name: str, rng, r: int) -> np.ndarray:
    """Per-task p of replicate ``r`` of a truth family (variants rotate with r)."""
    if name == "zoib-mbpp":
        return _zoib(rng, *MBPP[r % len(MBPP)])
    if name == "zoib-codecontests":
        return _zoib(rng, *CODECONTESTS[r % len(CODECONTESTS)])
    if name == "two-beta":
        w, (a1, b1), (a2, b2) = TWO_BETA[r % len(TWO_BETA)]
        return np.where(rng.random(T) < w, rng.beta(a1, b1, T), rng.beta(a2, b2, T))
    if name == "logit-normal":
        mu, sd = LOGIT_NORMAL[r % len(LOGIT_NORMAL)]
        return expit(rng.normal(mu, sd, T))
    if name == "zeros+tiny":
        u = rng.random(T)
        return np.where(u < 0.3, 0.0, np.where(u < 0.5, 10 ** rng.uniform(-3, -2, T), rng.beta(2, 2, T)))
    if name == "near-deterministic":
        u = rng.random(T)
        return np.where(u < 0.2, 0.0, np.where(u < 0.8, 1.0, rng.beta(0.5, 0.5, T)))
    return _draw_held_out(name, rng, r)


def _draw_held_out(name: str, rng, r: int) -> np.ndarray:
    if name == "homogeneous":
        return np.full(T, HELD_OUT[name][r % len(HELD_OUT[name])])
    if name == "uniform":
        return rng.random(T)
    if name == "discrete-levels":
        return rng.choice(HELD_OUT[name], T)
    if name == "tiny-only":
        lo, hi = np.log10(HELD_OUT[name])
        return 10 ** rng.uniform(lo, hi, T)
    raise ValueError(f"family={name!r} is not one of {FAMILIES + tuple(HELD_OUT)}")


def family_prior(name: str, r: int) -> list[tuple]:
    """The prior :func:`draw_family` draws replicate ``r``'s p from, as :func:`bayespass.testing.oracle_passk`
    components (a logit-normal and the cloud of tiny p on fine grids)."""
    if name in ("zoib-mbpp", "zoib-codecontests"):
        table = MBPP if name == "zoib-mbpp" else CODECONTESTS
        a, b, pi0, pi1 = table[r % len(table)]
        return [("atom", pi0, 0.0), ("atom", pi1, 1.0), ("beta", 1.0 - pi0 - pi1, a, b)]
    if name == "two-beta":
        w, (a1, b1), (a2, b2) = TWO_BETA[r % len(TWO_BETA)]
        return [("beta", w, a1, b1), ("beta", 1.0 - w, a2, b2)]
    if name == "logit-normal":
        mu, sd = LOGIT_NORMAL[r % len(LOGIT_NORMAL)]
        x = np.linspace(mu - 9 * sd, mu + 9 * sd, 4001)
        return [("grid", 1.0, expit(x), np.exp(-0.5 * ((x - mu) / sd) ** 2))]
    if name == "zeros+tiny":
        return [("atom", 0.3, 0.0), ("grid", 0.2, 10 ** np.linspace(-3, -2, 2001), np.ones(2001)),
                ("beta", 0.5, 2.0, 2.0)]
    if name == "near-deterministic":
        return [("atom", 0.2, 0.0), ("atom", 0.6, 1.0), ("beta", 0.2, 0.5, 0.5)]
    if name == "homogeneous":
        return [("atom", 1.0, HELD_OUT[name][r % len(HELD_OUT[name])])]
    if name == "uniform":
        return [("beta", 1.0, 1.0, 1.0)]
    if name == "discrete-levels":
        return [("atom", 0.25, p) for p in HELD_OUT[name]]
    if name == "tiny-only":
        x = np.linspace(*np.log10(HELD_OUT[name]), 2001)
        return [("grid", 1.0, 10 ** x, np.ones_like(x))]
    raise ValueError(f"family={name!r} is not one of {FAMILIES + tuple(HELD_OUT)}")


def oracle(counts, family: str, ks) -> tuple:
    """(mean, lo, hi, secs) of the exact Bayes posterior under each replicate's true prior: what a perfect
    method would cover on these replicates (their noise floor; simulation only)."""
    t0 = time.perf_counter()
    n, c = counts["n"].values, counts["c"].values
    res = [oracle_passk(family_prior(family, r), n[r], c[r], list(ks), ci_prob=1 - ALPHA, draws=2000, seed=r)
           for r in range(n.shape[0])]
    return (*(np.stack(x) for x in zip(*res, strict=True)), time.perf_counter() - t0)


def sim_cell(family: str, m: int, reps: int, seed: int):
    """Counts (reps configs x T tasks) and the truth (reps, K) of one simulation cell."""
    rng = np.random.default_rng(seed)
    p = np.stack([draw_family(family, rng, r) for r in range(reps)])
    c = rng.binomial(m, p)
    counts = bp.make_counts(np.full(p.shape, m), c, config=[f"r{r}" for r in range(reps)])
    return counts, true_passk(p, KS)


#: the ``hard`` real set's tasks: mean pass rate over the 12 tuning configs' samples below this
HARD_RATE = 0.9
#: k of the held-out real configs' reference (every task of theirs has at least 10 samples)
HELDOUT_KS = (1, 10)


def real_counts(which: str = "tuning"):
    """Real MBPP counts (configs x tasks), or None.

    ``"tuning"``: the 12 configs with n = 50 on every task, on which the default was chosen.  ``"hard"``:
    the same 12 configs on the tasks their mean pass rate on all samples leaves below ``HARD_RATE`` (159 of 364:
    a low pass rate benchmark, pass@1 0.30-0.36, like a mid-size code model on HumanEval).  ``"heldout"``:
    the configs that chose nothing, with 10 <= n < 50 samples on every task (16 configs; other models
    than the tuning set's four, and claude_opus_4, deepseek_r1, gemini, gpt_3_5 at several
    temperatures), on the tasks common to all of them.
    """
    path = REPO / "data" / "real_mbpp" / "counts.csv"
    if not path.exists():
        return None
    import pandas as pd

    df = pd.read_csv(path)
    if which in ("tuning", "hard"):
        tuning = df.groupby(["model", "temperature"]).filter(lambda g: (g.n == 50).all())
        if which == "tuning":
            return tuning
        rate = (tuning.c / tuning.n).groupby(tuning.task).mean()
        return tuning[tuning.task.isin(rate.index[rate < HARD_RATE])]
    if which != "heldout":
        raise ValueError(f"which={which!r}; allowed: 'tuning', 'hard', 'heldout'")
    held = df.groupby(["model", "temperature"]).filter(lambda g: 10 <= g.n.min() < 50)
    configs = held.groupby(["model", "temperature"]).ngroups
    common = held.groupby("task")["n"].transform("size") == configs
    return held[common]


def full_reference(n, c, ks) -> np.ndarray:
    """(K,) the unbiased pass@k of one config on all its samples (``n``, ``c`` per task): the real cells' reference."""
    return bp.passk(bp.make_counts(np.asarray(n)[None], np.asarray(c)[None]), list(ks), method="unbiased").values[0]


def real_cell(df, m: int, reps: int, seed: int, ks=REAL_KS):
    """Subsampled counts (configs*reps) and the reference (configs*reps, K) of one real-data cell."""
    rng = np.random.default_rng(seed)
    groups = list(df.groupby(["model", "temperature"]))
    ns, cs, refs, names = [], [], [], []
    for (model, temp), g in groups:
        n_full, c_full = g.n.to_numpy(), g.c.to_numpy()
        ref = full_reference(n_full, c_full, ks)
        for r in range(reps):
            c = rng.hypergeometric(c_full, n_full - c_full, m)
            ns.append(np.full(n_full.size, m))
            cs.append(c)
            refs.append(ref)
            names.append(f"{model}|T={temp}|r{r}")
    return bp.make_counts(np.stack(ns), np.stack(cs), config=names), np.stack(refs), len(groups)


def evaluate(counts, truth, ks, models, flex_settings=None, family=None, levels=()):
    """Per model: (mean, lo, hi) of shape (configs, K), and the fit time.

    ``levels``: other band probabilities than the 90% one; each fitted model's band at level L is added as
    ``"{name}@{L}"`` (the same fit, its ``passk_curve`` at ``ci_prob=L``).

    ``oracle`` (simulation only: ``family`` given) is the exact posterior under the true prior.

    ``auto`` (stacking) is built from the candidate fits of the same cell
    (``bp.stack``), as ``bp.fit(counts, "auto")`` would fit them again.
    """
    out, fits = {}, {}
    for name in models:
        if name in BAND_VARIANTS or name in WEIGHT_VARIANTS:
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "oracle":
                if family is not None:
                    out[name] = oracle(counts, family, ks)
                continue
            if name == "naive":
                est = bp.passk(counts, list(ks), method="naive").values
                out[name] = (est, np.full_like(est, np.nan), np.full_like(est, np.nan), time.perf_counter() - t0)
                continue
            if name == "auto":
                cands = list(bp.rcParams["stats.candidates"])
                missing = [c for c in cands if c not in fits]
                for c in missing:
                    fits[c] = _fit(counts, c, ks, flex_settings)[0]
                idata = bp.stack({c: fits[c] for c in cands}, counts, k=list(ks))
                secs = sum(fit_secs.get(c, 0.0) for c in cands) + time.perf_counter() - t0
            else:
                idata, secs = _fit(counts, name, ks, flex_settings)
                fits[name] = idata
                fit_secs[name] = secs
            out[name] = (*_mean_band(idata, ks), secs)
            for level in levels:
                out[f"{name}@{level:g}"] = (*_mean_band(idata, ks, level), secs)
            if name == "auto":
                for variant in (v for v in models if v in BAND_VARIANTS):
                    out[variant] = band_variant(idata, variant, ks, out["auto"])
                for variant in (v for v in models if v in WEIGHT_VARIANTS):
                    with bp.rc_context(WEIGHT_VARIANTS[variant]):
                        out[variant] = (*_mean_band(bp.stack({c: fits[c] for c in cands}, counts, k=list(ks)), ks),
                                        secs)
    return out


def _mean_band(idata, ks, level: float = 1 - ALPHA) -> tuple:
    """(mean, lower, upper) of the ``level`` (default 90%) pass@k band of ``idata``, each (configs, K)."""
    cur = bp.passk_curve(idata, list(ks), ci_prob=level)
    eti = cur["eti"]
    return cur["mean"].values, eti.sel(ci_bound="lower").values, eti.sel(ci_bound="upper").values


#: the stack of the same candidate fits under other stacking settings (list them after ``auto`` in --models):
#: ``auto-eq1`` weighs the candidates of a config with one sample per task equally (what stacking gives there;
#: the default before the twelfth session)
WEIGHT_VARIANTS = {"auto-eq1": {"stats.stack_single_weights": {}}}
#: other bands of the same stacked fit, measured beside the default's (no fit of their own; list them after
#: ``auto`` in --models): the hull of the candidates' bands at every k (the default until the eleventh session),
#: the weighted mixture's equal-tailed band, the hull of the candidates holding >= 20% of the draws, the midpoint
#: of the hull's and the mixture's endpoints, the hull of the candidates' 80% / 85% bands, and the default's band
#: without the unbiased estimate's band where every task has n >= 2k (before the seventy-fifth session)
BAND_VARIANTS = ("auto-hull", "auto-mix", "auto-h20", "auto-mid", "auto-h80", "auto-h85", "auto-no-unbiased")


def band_variant(idata, variant: str, ks, auto):
    """(mean, lo, hi, secs) of the stacked fit ``idata`` under another band rule (mean and time: auto's)."""
    rc = {"auto-hull": {"stats.stack_band": "hull"}, "auto-mix": {"stats.stack_band": "mixture"},
          "auto-mid": {"stats.stack_band": "midpoint"},
          "auto-h20": {"stats.stack_band": "hull", "stats.stack_min_share": 0.2},
          "auto-h80": {"stats.stack_band": "hull"}, "auto-h85": {"stats.stack_band": "hull"},
          "auto-no-unbiased": {"stats.unbiased_band": False}}.get(variant, {})
    prob = {"auto-h80": 0.8, "auto-h85": 0.85}.get(variant, 1 - ALPHA)
    with bp.rc_context(rc):
        eti = bp.passk_curve(idata, list(ks), ci_prob=prob)["eti"]
    return auto[0], eti.sel(ci_bound="lower").values, eti.sel(ci_bound="upper").values, auto[3]


fit_secs: dict = {}


def _fit(counts, name, ks, flex_settings):
    t0 = time.perf_counter()
    model = name
    if name == "flex" and flex_settings:
        from bayespass.models.flex import Flex

        model = Flex(**flex_settings)
    idata = bp.fit(counts, model, "eb", k=list(ks), progressbar=False)
    return idata, time.perf_counter() - t0


def level_of(name: str) -> float:
    """The band probability of a model's row: ``L`` for ``"name@L"``, else 90%."""
    return float(name.split("@", 1)[1]) if "@" in name else 1 - ALPHA


def score(res, truth, level: float = 1 - ALPHA):
    """Coverage, width, interval score (Winkler, at the band's ``level``), MAE and bias per k."""
    mean, lo, hi, secs = res
    covered = (lo <= truth) & (truth <= hi)
    interval = (hi - lo) + 2 / (1 - level) * (np.maximum(lo - truth, 0) + np.maximum(truth - hi, 0))
    return {"coverage": np.nanmean(covered, 0).tolist() if np.isfinite(lo).all() else [None] * truth.shape[1],
            "width": np.mean(hi - lo, 0).tolist(), "interval_score": np.mean(interval, 0).tolist(),
            "mae": np.mean(np.abs(mean - truth), 0).tolist(), "bias": np.mean(mean - truth, 0).tolist(),
            "seconds": secs}


def run(args) -> list[dict]:
    rows = []
    if args.candidates:
        bp.rcParams["stats.candidates"] = tuple(args.candidates.split(","))
    flex = dict(kv.split("=", 1) for kv in args.flex.split(";")) if args.flex else None
    if flex:
        flex = {k: eval(v) for k, v in flex.items()}  # noqa: S307 - benchmark option, trusted
    models = args.models.split(",")
    levels = [float(x) for x in args.levels.split(",")] if args.levels else []
    if not args.no_sim:
        for fam in args.families.split(","):
            for m in map(int, args.ms.split(",")):
                counts, truth = sim_cell(fam, m, args.reps, seed=zlib.crc32(f"{fam}:{m}".encode()) + args.seed)
                for name, res in evaluate(counts, truth, KS, models, flex, family=fam, levels=levels).items():
                    level = level_of(name)
                    rows.append({"data": "sim", "family": fam if T == TASKS else f"{fam} ({T} tasks)", "m": m,
                                 "model": name, "k": list(KS), "reps": args.reps, "tasks": T,
                                 "level": level, **score(res, truth, level)})
                    _print(rows[-1])
                _save(rows, args)
    df = None if args.no_real else real_counts(args.real_set)
    ks = HELDOUT_KS if args.real_set == "heldout" else REAL_KS
    label = {"tuning": "real MBPP", "hard": "real MBPP hard tasks", "heldout": "real MBPP held out"}[args.real_set]
    if df is not None:
        for m in map(int, args.ms.split(",")):
            counts, ref, n_cfg = real_cell(df, m, args.real_reps, seed=1000 + m + args.seed, ks=ks)
            chunk = args.chunk
            parts = {}
            for s in range(0, counts.sizes["config"], chunk):
                sub = counts.isel(config=slice(s, s + chunk))
                for name, res in evaluate(sub, ref[s:s + chunk], ks, models, flex, levels=levels).items():
                    prev = parts.get(name)
                    parts[name] = res if prev is None else tuple(
                        np.concatenate([a, b]) if isinstance(a, np.ndarray) else a + b
                        for a, b in zip(prev, res, strict=True))
            for name, res in parts.items():
                level = level_of(name)
                rows.append({"data": "real", "family": f"{label} ({n_cfg} configs x {df.task.nunique()} tasks)",
                             "m": m, "model": name, "k": list(ks), "reps": args.real_reps,
                             "level": level, **score(res, ref, level)})
                _print(rows[-1])
            _save(rows, args)
    return rows


def _save(rows, args) -> None:
    """Write the rows so far (an interrupted run keeps every finished cell)."""
    Path(args.json).write_text(json.dumps(rows, indent=1))


def _print(row):
    cov = " ".join("  -  " if c is None else f"{c:.2f}" for c in row["coverage"])
    print(f"{row['data']:4s} {row['family'][:22]:22s} m={row['m']:2d} {row['model']:6s} cov {cov} | "
          f"width {' '.join(f'{w:.3f}' for w in row['width'])} | "
          f"IS {' '.join(f'{w:.3f}' for w in row['interval_score'])}"
          f" | MAE {' '.join(f'{w:.3f}' for w in row['mae'])} | bias {' '.join(f'{w:+.3f}' for w in row['bias'])}"
          f" | {row['seconds']:.0f}s", flush=True)


def run_as_main(argv: list[str]) -> None:
    """Run this script with the command line ``argv`` (the what-if wrappers patch a prior first)."""
    import sys

    sys.argv = [__file__, *argv]
    main()


def main():
    global T
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--real-reps", type=int, default=50)
    ap.add_argument("--models", default="naive,bb,zoibb,flex,auto")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--ms", default="1,2,5,10,20")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--real-set", choices=("tuning", "hard", "heldout"), default="tuning",
                    help="real configs: the 12 with 50 samples per task that chose the default, or the 16 "
                    "with 10-49 that chose nothing (reference k = 1, 10), or 'hard': the 12 on the tasks they "
                    "pass less than 90%% of the time on average (a low pass rate benchmark)")
    ap.add_argument("--seed", type=int, default=0, help="shifts every cell's replicate seed (0: the tables' own)")
    ap.add_argument("--chunk", type=int, default=200, help="real-data configs fitted at once")
    ap.add_argument("--flex", default="", help="flex prior settings, e.g. 'ridge_sd=2.0;alpha=(3,0.5,0.5)'")
    ap.add_argument("--candidates", default=None, help="stacking candidates of auto (default rcParams)")
    ap.add_argument("--tasks", type=int, default=TASKS, help=f"tasks per simulated config (default {TASKS})")
    ap.add_argument("--levels", default="",
                    help="other band probabilities than 0.9, e.g. '0.5,0.8,0.95': every fitted model's band at "
                    "each is scored too, as rows 'model@level' (same fits)")
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "calibration.json"))
    ap.add_argument("--numpy", action="store_true",
                    help="the models' NumPy formulas instead of their compiled loops (the code before them)")
    args = ap.parse_args()
    if args.tasks < 2:
        ap.error(f"--tasks must be at least 2; got {args.tasks}")
    T = args.tasks
    if args.numpy:
        from bayespass.models import bb, flex, lnorm

        lnorm.COMPILED = flex.COMPILED = bb.COMPILED = False
    t0 = time.perf_counter()
    rows = run(args)
    _save(rows, args)
    print(f"\n{len(rows)} rows written to {args.json}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
