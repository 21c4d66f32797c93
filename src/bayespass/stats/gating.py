"""Deployment gating with Conformal Risk Control (Angelopoulos et al., 2022).

Rule: answer task x (deploy its dominant behaviour cluster's representative)
iff its score ``s(x) >= lambda``; the silent-failure loss is
``L(lambda; x) = 1[s(x) >= lambda and the deployed program is wrong]``,
bounded by 1 and non-increasing in lambda.  On a calibration split of n tasks
CRC picks the smallest lambda with

    n/(n+1) * R_n(lambda) + 1/(n+1) <= alpha          (variant "crc")
    R_n(lambda) <= alpha - 1/n                         (variant "conservative")

so that E[silent failure on a new task] <= alpha under exchangeability of
tasks.  Scores: ``f_max`` (largest behaviour cluster / K) for the
behavioural gate, sample 0's mean token log-probability for the logprob
baseline.  Correctness is judged on the gold half of the test bank.

Ties.  ``f_max`` takes K + 1 values, and on real runs most tasks tie at 1 (all
samples behave alike), right or wrong; a threshold answers all of a tied group
or none, so where that group holds more wrong answers than alpha the gate
abstains on every task.  ``tie_break="random"`` adds to each task's score a
tie-breaker below any gap between scores, a pseudo-random number fixed by the
seed, the config and the task: the tasks stay exchangeable, so the guarantee
holds as it is, and the threshold can answer a random share of a tied group.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from .._run import own
from ..results import Table, name_list
from ..simulate import stable_seed
from ..validate import check_choice, check_prob, check_seed
from .attach import attach, check_target
from .behaviour import behaviour, task_mask
from .panels import config_panel, label_panels, panels_of

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["CRCGate", "crc_threshold", "gate", "gate_table", "gate_diagnostics", "risk_coverage",
           "plot_risk_coverage", "METHODS"]

METHODS = ("pass@1", "best-of-K", "logprob-CRC", "behaviour-CRC")
VARIANTS = ("crc", "conservative")


def crc_threshold(scores, wrong, alpha: float, *, variant: str = "crc") -> float:
    """Smallest threshold lambda whose CRC-adjusted silent-failure risk is <= alpha.

    Parameters
    ----------
    scores : array of float
        Calibration scores (accept iff score >= lambda; -inf is never accepted, NaN is not allowed).
    wrong : array of bool
        Whether the program deployed on each calibration task is wrong.
    alpha : float
        Target risk in (0, 1).
    variant : {"crc", "conservative"}

    Returns
    -------
    float
        The threshold; ``inf`` (abstain on everything) when no finite one qualifies.
    """
    alpha = check_prob(alpha, name="alpha")
    check_choice(variant, VARIANTS, name="variant")
    s = np.asarray(scores, float)
    w = np.asarray(wrong, bool)
    if s.shape != w.shape or s.ndim != 1:
        raise ValueError(f"scores and wrong must be 1-d arrays of equal length; got {s.shape} and {w.shape}")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN; give -inf to tasks that must never be accepted")
    n = s.size
    if n == 0:
        return np.inf
    cands = np.unique(s[np.isfinite(s)])  # ascending; risk is non-increasing along it
    if cands.size == 0:
        return np.inf
    # R_n(lambda) for each candidate = #(s >= lambda and wrong) / n
    ws = np.sort(s[w])
    risk = (ws.size - np.searchsorted(ws, cands, side="left")) / n
    ok = (n / (n + 1) * risk + 1 / (n + 1) <= alpha) if variant == "crc" else (risk <= alpha - 1 / n)
    hit = np.flatnonzero(ok)
    return float(cands[hit[0]]) if hit.size else np.inf


#: tie-breakers are below this (scores are shares of K samples or log-probabilities: gaps far larger)
TIE_SCALE = 1e-9
TIE_BREAKS = ("none", "random")


def tie_breakers(configs, tasks, seed: int) -> np.ndarray:
    """Return a number in [0, TIE_SCALE) per (config, task), fixed by the seed, the config and the task."""
    return _tie_breakers(tuple(map(str, configs)), tuple(map(str, tasks)), seed)


@functools.lru_cache(maxsize=16)
def _tie_breakers(configs: tuple, tasks: tuple, seed: int) -> np.ndarray:
    # cached (read-only): gate() asks for the same ones in every split, three times (calibrate, evaluate's two)
    out = np.array([[stable_seed(seed, c, t, bits=56) for t in tasks] for c in configs], float).reshape(
        len(configs), len(tasks)) / 2**56 * TIE_SCALE
    out.setflags(write=False)
    return out


def _scores(beh: xr.Dataset, diversity_floor: float, cluster_penalty: float) -> np.ndarray:
    f_max = beh["f_max"].values
    n = beh["n"].values
    score = f_max - cluster_penalty * (beh["n_clusters"].values - 1) / np.maximum(n - 1, 1)
    diverse = beh["n_programs"].values >= np.ceil(diversity_floor * n)
    return np.where(diverse & (n > 0), score, -np.inf)


def _metrics(accept: np.ndarray, correct: np.ndarray) -> tuple:
    """abstention, effective pass-rate, silent-failure rate, accuracy among answered (over the last axis)."""
    m = accept.shape[-1]
    ans = accept.sum(-1)
    eff = (accept & correct).sum(-1) / m
    sil = (accept & ~correct).sum(-1) / m
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(ans > 0, (accept & correct).sum(-1) / np.maximum(ans, 1), np.nan)
    return 1 - ans / m, eff, sil, acc


class CRCGate:
    """A conformal-risk-control gate as an estimator: ``calibrate`` on some tasks, ``predict``/``evaluate`` others.

    Scores: ``"behaviour"`` (the share of the largest behaviour cluster, the dominant representative is
    deployed) or ``"logprob"`` (sample 0's mean token log-probability, sample 0 is deployed). Learned
    values end in ``_`` (``threshold_`` per config, ``n_calib_``), as in MAPIE and scikit-learn.

    Parameters
    ----------
    alpha : float, optional
        Target silent-failure rate (default ``rcParams["gating.alpha"]``).
    score : {"behaviour", "logprob"}
    variant : {"crc", "conservative"}
    signature, probe_fraction
        Passed to :func:`bayespass.stats.behaviour.behaviour`.
    diversity_floor, cluster_penalty : float
        See :func:`gate`.
    tie_break : {"none", "random"}
        ``"random"``: break ties between scores by a pseudo-random number per task (see the module docstring),
        so that the gate can answer a share of the tasks tied at the threshold instead of all or none.
    seed : int, optional
        Seed of the tie-breakers (default ``rcParams["stats.seed"]``).

    Examples
    --------
    >>> g = CRCGate(alpha=0.1).calibrate(samples, tasks=calib)   # doctest: +SKIP
    >>> g.threshold_, g.evaluate(samples, tasks=test)             # doctest: +SKIP
    """

    def __init__(self, *, alpha: float | None = None, score: str = "behaviour", variant: str = "crc",
                 signature: str = "verdict", probe_fraction: float | None = None, diversity_floor: float = 0.0,
                 cluster_penalty: float = 0.0, tie_break: str = "none", seed: int | None = None):
        from ..defaults import resolve

        self.alpha = check_prob(resolve(alpha, "gating.alpha"), name="alpha")
        self.score = check_choice(score, ("behaviour", "logprob"), name="score")
        self.variant = check_choice(variant, VARIANTS, name="variant")
        self.signature, self.probe_fraction = signature, resolve(probe_fraction, "behaviour.probe_fraction")
        if not 0 <= diversity_floor <= 1:
            raise ValueError(f"diversity_floor must be in [0, 1]; got {diversity_floor!r}")
        if cluster_penalty < 0:
            raise ValueError(f"cluster_penalty must be >= 0; got {cluster_penalty!r}")
        self.diversity_floor, self.cluster_penalty = diversity_floor, cluster_penalty
        self.tie_break = check_choice(tie_break, TIE_BREAKS, name="tie_break")
        self.seed = check_seed(resolve(seed, "stats.seed"))

    def __repr__(self) -> str:
        fitted = f", threshold_={np.round(self.threshold_.values, 4).tolist()}" if hasattr(self, "threshold_") else ""
        ties = f", tie_break={self.tie_break!r}" if self.tie_break != "none" else ""
        return f"CRCGate(alpha={self.alpha}, score={self.score!r}, variant={self.variant!r}{ties}{fitted})"

    def behaviour(self, samples) -> xr.Dataset:
        """Return the behaviour dataset the gate reads (executed samples, or a :func:`behaviour` result as is)."""
        if isinstance(samples, xr.Dataset) and "f_max" in samples:
            return samples
        return behaviour(samples, signature=self.signature, probe_fraction=self.probe_fraction)

    def scores(self, samples) -> tuple[xr.DataArray, xr.DataArray]:
        """Return the (config, task) score and whether the program the gate would deploy is correct."""
        beh = self.behaviour(samples)
        if self.score == "behaviour":
            sc, ok = _scores(beh, self.diversity_floor, self.cluster_penalty), beh["dominant_correct"].values
        else:
            if "first_mean_logprob" not in beh:
                raise ValueError("score='logprob' needs samples with mean_logprob")
            sc, ok = np.where(beh["n"].values > 0, beh["first_mean_logprob"].values, -np.inf), \
                beh["first_correct"].values
        coords = {"config": beh.config.values, "task": beh.task.values}
        if self.tie_break == "random":
            sc = sc + tie_breakers(beh.config.values, beh.task.values, self.seed)
        return (xr.DataArray(sc, dims=("config", "task"), coords=coords),
                xr.DataArray(ok, dims=("config", "task"), coords=coords))

    def calibrate(self, samples, tasks=None) -> CRCGate:
        """Learn ``threshold_`` per config on the calibration tasks (all observed tasks by default); return self."""
        beh = self.behaviour(samples)  # once: the behaviour of raw samples is the costly part
        sc, ok = self.scores(beh)
        mask = task_mask(sc, tasks, beh["n"].values > 0)
        lam = []
        for c in range(sc.sizes["config"]):
            m = mask[c]
            if np.isnan(sc.values[c, m]).any():
                raise ValueError(f"config {str(sc.config.values[c])!r}: a calibration task has no {self.score} score")
            lam.append(crc_threshold(sc.values[c, m], ~ok.values[c, m], self.alpha, variant=self.variant))
        self.threshold_ = xr.DataArray(lam, dims="config", coords={"config": sc.config.values})
        self.n_calib_ = xr.DataArray(mask.sum(1), dims="config", coords={"config": sc.config.values})
        return self

    def predict(self, samples, tasks=None) -> xr.Dataset:
        """Return per (config, task) the ``score`` and whether the gate answers (``accept``)."""
        if not hasattr(self, "threshold_"):
            raise ValueError("this CRCGate is not calibrated yet: call calibrate(samples, tasks) first")
        beh = self.behaviour(samples)
        sc, _ = self.scores(beh)
        mask = task_mask(sc, tasks, beh["n"].values > 0)
        accept = (sc >= self.threshold_.sel(config=sc.config)) & mask
        return xr.Dataset({"score": sc, "accept": accept, "in_tasks": (("config", "task"), mask)})

    def evaluate(self, samples, tasks=None) -> xr.Dataset:
        """Return per config the abstention, effective pass-rate, silent-failure rate and accuracy on ``tasks``."""
        beh = self.behaviour(samples)
        pred = self.predict(beh, tasks)
        _, ok = self.scores(beh)
        rows = [_metrics(pred.accept.values[c][pred.in_tasks.values[c]], ok.values[c][pred.in_tasks.values[c]])
                for c in range(pred.sizes["config"])]
        return xr.Dataset({name: ("config", [float(r[i]) for r in rows]) for i, name in
                           enumerate(("abstention", "effective", "silent", "accuracy"))} |
                          {"threshold": self.threshold_}, coords={"config": pred.config.values})


def gate(samples, *, alpha: float | None = None, calib_fraction: float | None = None, n_splits: int | None = None,
         seed: int | None = None, signature: str = "verdict", probe_fraction: float | None = None, variant: str = "crc",
         diversity_floor: float = 0.0, cluster_penalty: float = 0.0, tie_break: str | None = None,
         extend_inferencedata: bool = False) -> xr.Dataset:
    """Behavioural CRC gating against pass@1, best-of-K and logprob-CRC over repeated random splits.

    Each split calibrates a :class:`CRCGate` per score on the calibration tasks and evaluates it on the
    rest.

    Parameters
    ----------
    samples : xarray.Dataset, arviz.InferenceData or xarray.DataTree
        Executed samples (or an InferenceData with a ``samples`` group), or a run (``bp.load_run``): its
        samples, and its own alpha, n_splits, seed and tie_break for those not given, which give the run's
        gating table again.
    alpha : float, optional
        Target silent-failure rate (default ``rcParams["gating.alpha"]`` = 0.1).
    calib_fraction : float, optional
        Share of tasks in the calibration split, the rest is the test split (default
        ``rcParams["gating.calib_fraction"]`` = 0.6).
    n_splits : int, optional
        Random calibration/test splits, the same for every method and config (default
        ``rcParams["gating.n_splits"]`` = 100).
    seed : int, optional
        Split seed (default ``rcParams["stats.seed"]``).
    signature, probe_fraction
        Passed to :func:`bayespass.stats.behaviour.behaviour`.
    variant : {"crc", "conservative"}
        CRC rule (see the module docstring).
    diversity_floor : float
        Sample-collapse guard: never accept a task whose K samples contain
        fewer than ``diversity_floor * K`` textually distinct programs.
    cluster_penalty : float
        Score = f_max - penalty * (clusters - 1) / (K - 1).
    tie_break : {"none", "random"}, optional
        Default ``"none"``. ``"random"``: the CRC gates break ties between scores by a pseudo-random number
        per task, fixed by ``seed``, the config and the task (see the module docstring): where many tasks tie
        at f_max = 1 and too many of them are wrong, the behavioural gate answers a random share of them
        rather than none.
    extend_inferencedata : bool
        Also attach the result as group ``gating`` of the input (an InferenceData or the run tree).

    Returns
    -------
    xarray.Dataset
        Over ``(config, rule, split)``: ``threshold``, ``abstention``,
        ``effective`` (answered and correct), ``silent`` (answered and
        wrong), ``accuracy`` (among answered).  Rules (named ``rule`` rather
        than ``method``, which ``Dataset.sel`` reserves): ``pass@1`` (sample
        0, always answers), ``best-of-K`` (oracle: right if any sample is),
        ``logprob-CRC``, ``behaviour-CRC``.
    """
    from ..defaults import rcParams, resolve

    if extend_inferencedata:
        check_target(samples)
    given = own(samples, alpha=alpha, n_splits=n_splits, seed=seed, tie_break=tie_break)  # a run's own
    alpha, n_splits, seed, tie_break = given["alpha"], given["n_splits"], given["seed"], given["tie_break"] or "none"
    calib_fraction = resolve(calib_fraction, "gating.calib_fraction")
    n_splits = resolve(n_splits, "gating.n_splits")
    seed = rcParams["stats.seed"] if seed is None else seed
    gates = {s: CRCGate(alpha=alpha, score=s, variant=variant, signature=signature, probe_fraction=probe_fraction,
                        diversity_floor=diversity_floor, cluster_penalty=cluster_penalty, tie_break=tie_break,
                        seed=seed)
             for s in ("logprob", "behaviour")}
    beh = gates["behaviour"].behaviour(samples)
    cal, test = _split_masks(beh, calib_fraction, n_splits, np.random.default_rng(seed))
    out = {v: np.full((beh.sizes["config"], len(METHODS), n_splits), np.nan)
           for v in ("threshold", "abstention", "effective", "silent", "accuracy")}
    for j, name in enumerate(("first_correct", "any_correct")):  # the rules that always answer
        for c in range(beh.sizes["config"]):
            corr = beh[name].values[c]
            res = [_metrics(np.ones(test[s, c].sum(), bool), corr[test[s, c]]) for s in range(n_splits)]
            for i, v in enumerate(("abstention", "effective", "silent", "accuracy")):
                out[v][c, j] = [r[i] for r in res]
    has_lp = "first_mean_logprob" in beh
    for j, key in ((2, "logprob"), (3, "behaviour")):
        if key == "logprob" and (not has_lp or np.isnan(beh["first_mean_logprob"].values[beh["n"].values > 0]).any()):
            continue
        for s in range(n_splits):
            ev = gates[key].calibrate(beh, cal[s]).evaluate(beh, test[s])
            for v in out:
                out[v][:, j, s] = ev[v].values
    dims = ("config", "rule", "split")
    ds = xr.Dataset({k: (dims, v) for k, v in out.items()},
                    coords={"config": beh.config.values, "rule": list(METHODS), "split": np.arange(n_splits)})
    g = gates["behaviour"]
    ds.attrs.update(alpha=g.alpha, calib_fraction=calib_fraction, n_splits=n_splits, seed=seed, variant=variant,
                    signature=signature, probe_fraction=g.probe_fraction, diversity_floor=diversity_floor,
                    cluster_penalty=cluster_penalty, tie_break=tie_break, has_logprob=int(has_lp))
    if extend_inferencedata:
        attach(samples, "gating", ds)
    return ds


def _split_masks(beh: xr.Dataset, calib_fraction: float, n_splits: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random calibration/test masks (split, config, task) over each config's observed tasks."""
    n_cfg, n_task = beh.sizes["config"], beh.sizes["task"]
    cal = np.zeros((n_splits, n_cfg, n_task), bool)
    test = np.zeros_like(cal)
    for c in range(n_cfg):
        tasks = np.flatnonzero(beh["n"].values[c] > 0)
        n_cal = int(round(calib_fraction * tasks.size))
        if n_cal < 1 or n_cal >= tasks.size:
            raise ValueError(f"calib_fraction={calib_fraction} leaves an empty split for {tasks.size} tasks")
        for s in range(n_splits):
            perm = rng.permutation(tasks)
            cal[s, c, perm[:n_cal]], test[s, c, perm[n_cal:]] = True, True
    return cal, test


def gate_table(gated: xr.Dataset) -> Table:
    """Mean and standard deviation over splits of each rule's metrics, one row per (config, rule)."""
    rows = []
    for cfg in gated.config.values:
        for m in gated.rule.values:
            cell = gated.sel({"config": cfg, "rule": m})
            row = {"config": cfg, "rule": m, "alpha": float(gated.attrs.get("alpha", np.nan))}  # a row says its target
            for v in ("abstention", "effective", "silent", "accuracy"):
                x = cell[v].values
                row[v] = np.nanmean(x) if np.isfinite(x).any() else np.nan
                if v in ("effective", "silent"):
                    row[f"{v}_sd"] = np.nanstd(x) if np.isfinite(x).any() else np.nan
            lam = cell["threshold"].values
            row["threshold_median"] = np.median(lam[~np.isnan(lam)]) if (~np.isnan(lam)).any() else np.nan
            rows.append(row)
    a = gated.attrs
    df = pd.DataFrame(rows)
    crc = df[df["rule"] == "behaviour-CRC"]
    every = crc.loc[crc["abstention"] >= 1, "config"].astype(str).tolist()
    most = crc.loc[crc["abstention"].between(0.99, 1, inclusive="left"), "config"].astype(str).tolist()
    mute = every + most
    total = int(df["config"].nunique())
    said = [f"every task for {name_list(every, total=total)}"] if every else []
    said += [f"99% or more of the test tasks (mean over the splits) for {name_list(most, total=total)}"] if most else []
    flag = (f" Behaviour-CRC abstains on {' and '.join(said)}: no threshold keeps the silent-failure bound below "
            "alpha on the calibration tasks (too few of them, or wrong answers even where all samples behave alike: "
            "stable_wrong in the diagnostics)." if mute else "")
    if mute and a.get("tie_break", "none") == "none":
        flag += (" Where many tasks tie at one score (all samples alike), tie_break='random' ('bayespass gate RUN "
                 "--tie-break random', or 'bayespass run --tie-break random') lets the gate answer a random share of "
                 "them under the same guarantee.")
    never = df.loc[np.isinf(df["threshold_median"].astype(float)) & ~df["config"].astype(str).isin(mute),
                   "config"].astype(str).tolist()
    flag += (f" threshold_median inf ({name_list(never, total=total)}): in more than half of the splits no "
             "threshold qualified, and behaviour-CRC abstained on every test task of those splits." if never else "")
    blank = df.loc[(df["rule"] == "logprob-CRC") & df["abstention"].isna(), "config"].astype(str).tolist()
    flag += (f" logprob-CRC is blank for {name_list(blank, total=total)}: not every sample carries its log-probability "
             "(generations imported without them, or from an endpoint that returns none)." if blank else "")
    ties = "; ties broken at random" if a.get("tie_break") == "random" else ""
    return Table.of(df, f"Gating at alpha = {a.get('alpha', float('nan')):g} (mean over "
                    f"{a.get('n_splits', '?')} calibration/test splits{ties})",
                    note="Behaviour-CRC answers a task iff its largest behaviour cluster holds at least a share "
                    "lambda of the K samples (lambda chosen by conformal risk control); silent = answered and "
                    "wrong, effective = answered and right; _sd = standard deviation over the splits." + flag,
                    brief=[c for c in df.columns if c != "alpha"])  # the title says it; CSV and JSON rows too


def gate_diagnostics(samples, *, signature: str = "verdict", probe_fraction: float | None = None) -> Table:
    """Per-config behaviour diagnostics of the K-sample bundles.

    Columns: split rate (>= 2 clusters), mean clusters, mean f_max, dominant-correct
    rate, stable-wrong rate (f_max = 1 and dominant wrong), fragile-correct
    rate (dominant passes every base test but fails a plus test), mean f_pass,
    and the collapse rate (all K samples one program text, K > 1).
    """
    beh = behaviour(samples, signature=signature, probe_fraction=probe_fraction)
    rows = []
    for cfg in beh.config.values:
        b = beh.sel(config=cfg)
        has = b["n"].values > 0
        pick = lambda v, b=b, has=has: b[v].values[has]  # noqa: E731
        rows.append({"config": cfg, "tasks": int(has.sum()), "split_rate": np.mean(pick("n_clusters") >= 2),
                     "mean_clusters": np.mean(pick("n_clusters")), "mean_f_max": np.mean(pick("f_max")),
                     "dominant_correct": np.mean(pick("dominant_correct")),
                     "stable_wrong": np.mean(pick("stable_wrong")), "fragile": np.mean(pick("fragile")),
                     "mean_f_pass": np.mean(pick("f_pass")),
                     "collapsed": np.mean((pick("n_programs") == 1) & (pick("n") > 1))})
    return Table.of(pd.DataFrame(rows), f"Behaviour diagnostics of the K-sample bundles ({signature} signatures)",
                    note="split_rate: tasks with >= 2 behaviour clusters; f_max: share of the largest cluster; "
                    "stable_wrong: one cluster, and it is wrong; fragile: the dominant cluster passes the base "
                    "tests but fails a plus test; collapsed: all K samples one program text.")


def risk_coverage(samples, *, signature: str = "verdict", probe_fraction: float | None = None) -> xr.Dataset:
    """Coverage (answer rate), silent-failure rate and selective risk at every threshold, all tasks.

    Over ``(config, rule, point)`` for ``logprob-CRC`` and ``behaviour-CRC``
    (padded with NaN): ``threshold``, ``coverage``, ``silent``, ``selective_risk``.
    """
    beh = behaviour(samples, signature=signature, probe_fraction=probe_fraction)
    methods = ["logprob-CRC", "behaviour-CRC"]
    n_cfg, n_task = beh.sizes["config"], beh.sizes["task"]
    arr = {v: np.full((n_cfg, 2, n_task + 1), np.nan) for v in ("threshold", "coverage", "silent", "selective_risk")}
    for c in range(n_cfg):
        has = beh["n"].values[c] > 0
        pairs = [(beh["first_mean_logprob"].values[c] if "first_mean_logprob" in beh else None,
                  beh["first_correct"].values[c]),
                 (beh["f_max"].values[c], beh["dominant_correct"].values[c])]
        for j, (score, corr) in enumerate(pairs):
            if score is None or np.isnan(score[has]).any():
                continue
            s, ok = score[has], corr[has]
            lams = np.concatenate([np.unique(s), [np.inf]])
            acc = s[None, :] >= lams[:, None]
            cov = acc.mean(1)
            sil = (acc & ~ok).mean(1)
            with np.errstate(invalid="ignore", divide="ignore"):
                sel = np.where(cov > 0, sil / cov, np.nan)
            for name, val in (("threshold", lams), ("coverage", cov), ("silent", sil), ("selective_risk", sel)):
                arr[name][c, j, : lams.size] = val
    dims = ("config", "rule", "point")
    return xr.Dataset({k: (dims, v) for k, v in arr.items()},
                      coords={"config": beh.config.values, "rule": methods, "point": np.arange(n_task + 1)})


def plot_risk_coverage(curve: xr.Dataset, gated: xr.Dataset | None = None, *, ax=None) -> Axes | np.ndarray:
    """Silent-failure rate vs coverage per config and method, with the CRC operating points (mean over splits).

    The curve joins the thresholds' points by straight lines, the rates a rule that answers a random share of the
    tasks tied at a threshold has. A marker is the mean over the splits of CRC's operating point on each test
    split: where the threshold differs between splits (abstaining on everything in some, answering most tasks in
    others) the mean lies between those points, above a convex curve. Up to four
    configs share one Axes, a colour each; more get a panel each (returned as an array of Axes, one per config;
    ``ax`` may also be one Axes per config).
    """
    import matplotlib.pyplot as plt

    panels = panels_of(ax, curve.sizes["config"], most_on_one=4, size=(2.8, 2.3), one_size=(6, 4.2))
    one = panels.size == 1
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, cfg in enumerate(curve.config.values):
        _draw_risk(config_panel(panels, i, str(cfg)), curve, gated, cfg,
                   colours[i % len(colours)] if one else "C0", label=f"{cfg} " if one else "")
    for a in panels if gated is not None else ():
        a.axhline(gated.attrs["alpha"], color="grey", lw=0.8, ls=":", label=f"alpha = {gated.attrs['alpha']:g}")
    for a in panels:
        a.set_xlim(0, 1.02)
        a.set_ylim(bottom=0)
    label_panels(panels, "coverage (share of tasks answered)", "silent-failure rate P(answer and wrong)",
                 "Risk-coverage (markers: CRC operating points, mean over splits)")
    panels[0].legend(fontsize=7, loc="upper left")  # panels: the rules and alpha, the titles name the configs
    return panels[0] if one else panels


def _draw_risk(ax, curve: xr.Dataset, gated: xr.Dataset | None, cfg, col: str, *, label: str) -> None:
    """Draw one config's risk-coverage curve per CRC rule and, with ``gated``, its operating points."""
    styles = {"logprob-CRC": "--", "behaviour-CRC": "-"}
    for m in curve.rule.values:
        cell = curve.sel({"config": cfg, "rule": m})
        cov, sil = cell["coverage"].values, cell["silent"].values
        keep = np.isfinite(cov)
        if not keep.any():
            continue
        # straight segments: answering a random share of the tasks tied at a threshold reaches every point
        # between two thresholds (a step would draw risks no rule has, e.g. 0.19 at coverage 0.3)
        ax.plot(cov[keep], sil[keep], ls=styles[m], color=col, label=f"{label}{m}")
        if gated is not None:
            g = gated.sel({"config": cfg, "rule": m})
            ax.plot(1 - np.nanmean(g["abstention"].values), np.nanmean(g["silent"].values),
                    marker="o" if m == "behaviour-CRC" else "s", color=col, ms=7, mec="k")
