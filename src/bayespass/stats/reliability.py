"""Conformal reliability level from self-consistency ranking, with Hoeffding sequential stopping.

Samples of a task are canonicalised into classes (behaviour signatures on
the probe tests) and the classes ranked by frequency (ties at random, with a
seed).  A calibration task's nonconformity score is the rank of its first
*acceptable* class (the class representative passes the gold tests), or
infinity if none is.  With ``q = ceil((n+1)(1-alpha))``-th smallest score,
the top-q classes form a prediction set with coverage >= 1 - alpha under
exchangeability.  A task with no correct sample scores infinity and no set of
its classes covers it: where more than alpha of the calibration tasks have
none, q is infinite, the set is every class seen, and its coverage is only
the share of tasks with a correct sample, below 1 - alpha (reported as such,
not as the trivially true ``inf <= inf``).  The
**reliability level** ``r = #(calibration tasks whose top class is
correct) / (n+1)`` is the largest confidence at which the mode alone is a
valid conformal set.

Sequential stopping draws the samples of a task one at a time and stops after
t when the gap between the two most frequent classes exceeds ``2 eps_t``,
``eps_t = sqrt(log(2 C_t / delta_t) / (2 t))``, ``delta_t = 6 delta / (pi^2
t^2)``, ``C_t`` the number of classes seen: by Hoeffding's inequality and
union bounds over classes and t, the empirical mode is then the true mode
with probability >= 1 - delta.  Stopping reads only the samples, never the
labels, so the conformal guarantee is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from .._run import own
from ..defaults import rcParams
from ..results import Table
from ..validate import check_prob
from .attach import attach, check_target
from .behaviour import behaviour, task_mask
from .panels import config_panel, label_panels, panels_of

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["ConformalReliability", "conformal_qhat", "covers", "reliability", "reliability_table", "hoeffding_stop",
           "wilson", "plot_set_size"]


def wilson(k, n, z: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion k/n (``z`` default: of ``rcParams["stats.ci_prob"]``)."""
    if z is None:
        from scipy.stats import norm

        z = float(norm.ppf((1 + rcParams["stats.ci_prob"]) / 2))
    k, n = np.asarray(k, float), np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        den = 1 + z**2 / n
        mid = (p + z**2 / (2 * n)) / den
        half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / den
    return mid - half, mid + half


def hoeffding_stop(labels, delta: float = 0.1) -> int:
    """Return the number of samples after which the sequential rule stops (``len(labels)`` if it never does)."""
    delta = check_prob(delta, name="delta")
    counts: dict = {}
    labels = list(labels)
    for t, lab in enumerate(labels, 1):
        counts[lab] = counts.get(lab, 0) + 1
        top = sorted(counts.values(), reverse=True)[:2] + [0]
        delta_t = 6 * delta / (np.pi**2 * t**2)
        eps = np.sqrt(np.log(2 * len(counts) / delta_t) / (2 * t))
        if (top[0] - top[1]) / t > 2 * eps:
            return t
    return len(labels)


def _task_scores(labels: np.ndarray, correct: np.ndarray, rng) -> tuple[float, int, float]:
    """(score, number of classes, entropy) of one task from its sample labels and per-sample correctness."""
    uniq, first, cnt = np.unique(labels, return_index=True, return_counts=True)
    order = np.lexsort((rng.random(uniq.size), -cnt))  # frequency, ties at random
    ok = correct[first[order]]
    hit = np.flatnonzero(ok)
    p = cnt / cnt.sum()
    return (float(hit[0] + 1) if hit.size else np.inf), uniq.size, float(-(p * np.log(p)).sum())


def _all_task_scores(lab, corr, rng, delta):
    """Per (config, task): conformal score, score after Hoeffding stopping, classes, entropy, samples used."""
    n_cfg, n_task = lab.shape[:2]
    score = np.full((n_cfg, n_task), np.nan)
    score_seq = np.full_like(score, np.nan)
    n_cls = np.zeros((n_cfg, n_task), int)
    ent = np.full_like(score, np.nan)
    used = np.zeros((n_cfg, n_task), int)
    for c in range(n_cfg):
        for t in range(n_task):
            idx = np.flatnonzero(lab[c, t] >= 0)
            if idx.size == 0:
                continue
            score[c, t], n_cls[c, t], ent[c, t] = _task_scores(lab[c, t, idx], corr[c, t, idx], rng)
            used[c, t] = hoeffding_stop(lab[c, t, idx], delta)
            score_seq[c, t] = _task_scores(lab[c, t, idx[: used[c, t]]], corr[c, t, idx[: used[c, t]]], rng)[0]
    return score, score_seq, n_cls, ent, used


def covers(score, qhat) -> np.ndarray:
    """Tell whether the top-``qhat`` classes hold a correct class: never for a task without one (score inf)."""
    score = np.asarray(score, float)
    return np.isfinite(score) & (score <= qhat)


def conformal_qhat(scores: np.ndarray, alpha: float) -> float:
    """Return the split-conformal quantile: the ceil((n + 1)(1 - alpha))-th smallest score (inf if beyond n)."""
    n = len(scores)
    rank = int(np.ceil((n + 1) * (1 - alpha)))
    return float(np.sort(scores)[rank - 1]) if rank <= n else np.inf


class ConformalReliability:
    """Conformal prediction sets over behaviour classes as an estimator (MAPIE-style).

    ``calibrate`` learns, per config, ``qhat_`` (the set size that covers a correct class with
    probability >= 1 - alpha on a new task) and the reliability level ``level_`` (share of calibration
    tasks whose most frequent class is correct, over n + 1) with its Wilson bounds; ``predict`` gives each
    task's set size, ``evaluate`` the coverage and set size on held-out tasks.  A task's score is the rank
    (by frequency, ties at random with ``seed``) of its first correct behaviour class (inf if none).
    """

    def __init__(self, *, alpha: float | None = None, signature: str = "verdict",
                 probe_fraction: float | None = None, seed: int | None = None):
        from ..defaults import rcParams, resolve

        self.alpha = check_prob(resolve(alpha, "reliability.alpha"), name="alpha")
        self.signature, self.probe_fraction = signature, resolve(probe_fraction, "behaviour.probe_fraction")
        self.seed = rcParams["stats.seed"] if seed is None else seed

    def __repr__(self) -> str:
        fitted = f", qhat_={self.qhat_.values.tolist()}" if hasattr(self, "qhat_") else ""
        return f"ConformalReliability(alpha={self.alpha}{fitted})"

    def scores(self, samples) -> xr.Dataset:
        """Return per (config, task) ``score``, ``n_classes`` and ``observed`` from the samples' behaviour.

        Given such a scores dataset, return it as is (so evaluate computes the behaviour once).
        """
        if isinstance(samples, xr.Dataset) and {"score", "n_classes", "observed"} <= set(samples.data_vars):
            return samples
        beh = samples if isinstance(samples, xr.Dataset) and "cluster" in samples else behaviour(
            samples, signature=self.signature, probe_fraction=self.probe_fraction)
        lab, corr = beh["cluster"].values, beh["gold_correct"].values
        rng = np.random.default_rng(self.seed)
        score = np.full(lab.shape[:2], np.inf)
        n_cls = np.zeros(lab.shape[:2], int)
        for c, t in zip(*np.nonzero((lab >= 0).any(-1)), strict=True):
            idx = np.flatnonzero(lab[c, t] >= 0)
            score[c, t], n_cls[c, t], _ = _task_scores(lab[c, t, idx], corr[c, t, idx], rng)
        dims = ("config", "task")
        return xr.Dataset({"score": (dims, score), "n_classes": (dims, n_cls), "observed": (dims, beh["n"].values > 0)},
                          coords={"config": beh.config.values, "task": beh.task.values})

    def calibrate(self, samples, tasks=None) -> ConformalReliability:
        """Learn ``qhat_``, ``level_`` (with ``level_lower_``/``level_upper_``) and ``n_calib_``; return self."""
        sc = self.scores(samples)
        mask = task_mask(sc.score, tasks, sc.observed.values)
        q, top, n = [], [], mask.sum(1)
        for c in range(sc.sizes["config"]):
            vals = sc.score.values[c, mask[c]]
            q.append(conformal_qhat(vals, self.alpha))
            top.append(int((vals == 1).sum()))
        lo, hi = wilson(np.array(top), n)
        coords = {"config": sc.config.values}
        self.qhat_ = xr.DataArray(q, dims="config", coords=coords)
        self.level_ = xr.DataArray(np.array(top) / (n + 1), dims="config", coords=coords)
        self.level_lower_ = xr.DataArray(lo, dims="config", coords=coords)
        self.level_upper_ = xr.DataArray(hi, dims="config", coords=coords)
        self.n_calib_ = xr.DataArray(n, dims="config", coords=coords)
        return self

    def predict(self, samples, tasks=None) -> xr.Dataset:
        """Return per (config, task) the prediction ``set_size`` (the ``qhat_`` most frequent classes, at most all)."""
        if not hasattr(self, "qhat_"):
            raise ValueError("this ConformalReliability is not calibrated yet: call calibrate(samples, tasks) first")
        sc = self.scores(samples)
        mask = task_mask(sc.score, tasks, sc.observed.values)
        size = np.minimum(self.qhat_.values[:, None], sc.n_classes.values)
        return xr.Dataset({"set_size": (("config", "task"), np.where(mask, size, np.nan)),
                           "covered": (("config", "task"), mask & covers(sc.score.values, self.qhat_.values[:, None])),
                           "in_tasks": (("config", "task"), mask)}, coords=sc.coords)

    def evaluate(self, samples, tasks=None) -> xr.Dataset:
        """Return per config ``coverage``, ``set_size``, ``cond_coverage`` (solvable tasks), ``mode_coverage``."""
        sc = self.scores(samples)  # once: the behaviour of raw samples is the costly part
        pred = self.predict(sc, tasks)
        out = {v: [] for v in ("coverage", "set_size", "cond_coverage", "mode_coverage")}
        for c in range(pred.sizes["config"]):
            m = pred.in_tasks.values[c]
            st = sc.score.values[c, m]
            solvable = np.isfinite(st)
            out["coverage"].append(float(np.mean(covers(st, self.qhat_.values[c]))))
            out["set_size"].append(float(np.mean(pred.set_size.values[c, m])))
            out["cond_coverage"].append(float(np.mean(st[solvable] <= self.qhat_.values[c])) if solvable.any()
                                        else np.nan)
            out["mode_coverage"].append(float(np.mean(st == 1)))
        return xr.Dataset({k: ("config", v) for k, v in out.items()} | {"qhat": self.qhat_},
                          coords={"config": pred.config.values})


def _split_metrics(score, score_seq, n_cls, n, alpha, calib_fraction, n_splits, rng):
    """Coverage, set size and reliability over random calibration/test splits, and the full-data level."""
    n_cfg = n.shape[0]
    names = ("qhat", "coverage", "set_size", "cond_coverage", "reliability", "mode_coverage")
    out = {f"{v}{suf}": np.full((n_cfg, n_splits), np.nan) for v in names for suf in ("", "_seq")}
    level = np.full((3, n_cfg), np.nan)
    for c in range(n_cfg):
        tasks = np.flatnonzero(n[c] > 0)
        m = tasks.size
        n_cal = int(round(calib_fraction * m))
        if n_cal < 1 or n_cal >= m:
            raise ValueError(f"calib_fraction={calib_fraction} leaves an empty split for {m} tasks")
        top = int((score[c, tasks] == 1).sum())
        level[:, c] = top / (m + 1), *wilson(top, m)
        for s in range(n_splits):
            perm = rng.permutation(tasks)
            cal, test = perm[:n_cal], perm[n_cal:]
            for suf, sc in (("", score[c]), ("_seq", score_seq[c])):
                q = conformal_qhat(sc[cal], alpha)
                st = sc[test]
                solvable = np.isfinite(st)
                out[f"qhat{suf}"][c, s] = q
                out[f"coverage{suf}"][c, s] = np.mean(covers(st, q))
                out[f"set_size{suf}"][c, s] = np.mean(np.minimum(q, n_cls[c, test]))
                out[f"cond_coverage{suf}"][c, s] = np.mean(st[solvable] <= q) if solvable.any() else np.nan
                out[f"reliability{suf}"][c, s] = np.sum(sc[cal] == 1) / (n_cal + 1)
                out[f"mode_coverage{suf}"][c, s] = np.mean(st == 1)
    return out, level


def reliability(samples, *, alpha: float | None = None, calib_fraction: float | None = None,
                n_splits: int | None = None, seed: int | None = None, delta: float | None = None,
                signature: str = "verdict", probe_fraction: float | None = None, ci_prob: float | None = None,
                extend_inferencedata: bool = False) -> xr.Dataset:
    """Conformal prediction sets over behaviour classes, the reliability level and sequential stopping.

    Parameters
    ----------
    samples : xarray.Dataset, arviz.InferenceData or xarray.DataTree
        Executed samples, or a run (``bp.load_run``): its samples, and its own alpha, n_splits, seed and
        ci_prob for those not given, which give the run's reliability table again.
    alpha : float, optional
        Miscoverage level of the prediction sets (default ``rcParams["reliability.alpha"]`` = 0.1).
    calib_fraction : float, optional
        Share of tasks used for calibration in each random split (default
        ``rcParams["reliability.calib_fraction"]`` = 0.5).
    n_splits : int, optional
        Number of random splits (default ``rcParams["reliability.n_splits"]`` = 100).
    seed : int, optional
        Seed of the splits and of the tie-breaking (default ``rcParams["stats.seed"]``).
    delta : float, optional
        Failure probability of the Hoeffding stopping rule (default ``rcParams["reliability.delta"]`` = 0.1).
    signature, probe_fraction
        Passed to :func:`bayespass.stats.behaviour.behaviour`.
    ci_prob : float, optional
        Probability of the level's Wilson bounds (default ``rcParams["stats.ci_prob"]``).
    extend_inferencedata : bool
        Also attach the result as group ``reliability`` of the input (an InferenceData or the run tree).

    Returns
    -------
    xarray.Dataset
        Over ``(config, split)``: ``qhat``, ``coverage``, ``set_size``,
        ``cond_coverage`` (on solvable test tasks), ``reliability`` (level
        from the calibration half), ``mode_coverage`` (test share whose top
        class is correct), and the same with the ``_seq`` suffix for the
        sequentially stopped samples.  Over ``(config, task)``: ``score``,
        ``score_seq``, ``n_classes``, ``entropy``, ``n_used``.  Over
        ``config``: ``saved`` (share of samples not drawn), ``level``
        (reliability level with all tasks as calibration) with its Wilson interval at ``ci_prob``
        bounds ``level_lower``/``level_upper``, ``n_tasks``.
    """
    from ..defaults import rc_context, rcParams, resolve

    if extend_inferencedata:
        check_target(samples)
    given = own(samples, alpha=alpha, n_splits=n_splits, seed=seed, ci_prob=ci_prob)  # a run's own
    alpha, n_splits, seed = given["alpha"], given["n_splits"], given["seed"]
    prob = check_prob(rcParams["stats.ci_prob"] if given["ci_prob"] is None else given["ci_prob"], name="ci_prob")
    alpha = resolve(alpha, "reliability.alpha")
    calib_fraction = resolve(calib_fraction, "reliability.calib_fraction")
    n_splits, delta = resolve(n_splits, "reliability.n_splits"), resolve(delta, "reliability.delta")
    probe_fraction = resolve(probe_fraction, "behaviour.probe_fraction")
    beh = behaviour(samples, signature=signature, probe_fraction=probe_fraction)
    seed = rcParams["stats.seed"] if seed is None else seed
    rng = np.random.default_rng(seed)
    lab, corr, n = beh["cluster"].values, beh["gold_correct"].values, beh["n"].values
    score, score_seq, n_cls, ent, used = _all_task_scores(lab, corr, rng, delta)
    with rc_context({"stats.ci_prob": prob}):  # the level's Wilson bounds
        out, level = _split_metrics(score, score_seq, n_cls, n, alpha, calib_fraction, n_splits, rng)
    d2, d1 = ("config", "split"), ("config", "task")
    tot = np.maximum(n.sum(1), 1)
    ds = xr.Dataset({**{k: (d2, v) for k, v in out.items()},
                     "score": (d1, score), "score_seq": (d1, score_seq), "n_classes": (d1, n_cls),
                     "entropy": (d1, ent), "n_used": (d1, used),
                     "saved": ("config", 1 - used.sum(1) / tot), "level": ("config", level[0]),
                     "level_lower": ("config", level[1]), "level_upper": ("config", level[2]),
                     "n_tasks": ("config", (n > 0).sum(1))},
                    coords={"config": beh.config.values, "task": beh.task.values, "split": np.arange(n_splits)})
    ds.attrs.update(ci_prob=prob)
    ds.attrs.update(alpha=alpha, calib_fraction=calib_fraction, n_splits=n_splits, seed=seed, delta=delta,
                    signature=signature)
    if extend_inferencedata:
        attach(samples, "reliability", ds)
    return ds


def _mean(x: np.ndarray) -> float:
    """Return the mean over the splits where a value exists (NaN where none does, e.g. a handful of tasks)."""
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


def reliability_table(rel: xr.Dataset) -> Table:
    """One row per config: reliability level (Wilson interval at ``ci_prob``), coverage, set size, savings."""
    rows = []
    for cfg in rel.config.values:
        r = rel.sel(config=cfg)
        m = lambda v, r=r: _mean(r[v].values)  # noqa: E731
        rows.append({"config": cfg, "alpha": float(rel.attrs.get("alpha", np.nan)), "n_tasks": int(r["n_tasks"]),
                     "level": float(r["level"]),
                     "level_lo": float(r["level_lower"]), "level_hi": float(r["level_upper"]),
                     "coverage": m("coverage"), "coverage_sd": float(np.nanstd(r["coverage"].values)),
                     "set_size": m("set_size"), "cond_coverage": m("cond_coverage"),
                     "mode_coverage": m("mode_coverage"), "coverage_seq": m("coverage_seq"),
                     "mode_coverage_seq": m("mode_coverage_seq"), "saved": float(r["saved"]),
                     "qhat": float(np.median(r["qhat"].values)),
                     "unsolved": float(np.mean(np.isinf(r["score"].values[~np.isnan(r["score"].values)])))})
    ci = round(100 * float(rel.attrs.get("ci_prob", rcParams["stats.ci_prob"])))
    alpha = rel.attrs.get("alpha", float("nan"))
    return Table.of(pd.DataFrame(rows), f"Reliability level (Wilson {ci}% bounds) at alpha = {alpha:g}",
                    note=f"Level = share of calibration tasks whose most frequent behaviour class is correct, over "
                    f"n+1 (Wilson {ci}% bounds level_lo, level_hi); coverage (share of test tasks whose set holds a "
                    "correct class) and set size of the conformal sets, qhat their median size rank over the splits; "
                    "samples saved by Hoeffding sequential stopping." + _unreachable(rows, alpha)
                    + _cannot_stop(rel, rows),
                    brief=("config", "n_tasks", "level", "level_lo", "level_hi", "qhat", "coverage", "set_size",
                           "saved"))


def _unreachable(rows: list, alpha: float) -> str:
    """Say where no set reaches 1 - alpha: more than alpha of the tasks have no correct sample (qhat inf)."""
    bad = [r for r in rows if np.isinf(r["qhat"])]
    if not bad:
        return ""
    shown = ", ".join(f"{r['config']} {r['unsolved']:.2f}" for r in bad[:6]) + (", ..." if len(bad) > 6 else "")
    return (f" qhat inf: no set of the sampled classes covers 1 - alpha = {1 - alpha:g} of the tasks, as more than "
            f"alpha of them have no correct sample (share without one: {shown}); the set is every class, and its "
            "coverage is the share with a correct sample. Raise alpha above that share or draw more samples per "
            "task.")


def _cannot_stop(rel: xr.Dataset, rows: list) -> str:
    """Say why sequential stopping saved nothing where no task had enough samples for it to stop (else "")."""
    if "n_used" not in rel or any(r["saved"] > 0 for r in rows) or "delta" not in rel.attrs:
        return ""
    delta = float(rel.attrs["delta"])
    earliest = hoeffding_stop(np.zeros(1000), delta)  # the soonest it can stop: every sample alike
    most = int(rel["n_used"].max())  # it stopped nowhere: the samples each task has
    if most >= earliest:
        return ""
    return (f" Sequential stopping saved nothing: at delta = {delta:g} it cannot stop a task before {earliest} of "
            f"its samples (all alike), and no task has more than {most}; it saves samples from about "
            f"{earliest} per task on (a larger delta stops sooner: bp.reliability(delta=...), 'bayespass reliability "
            "RUN --delta').")


def plot_set_size(rel: xr.Dataset, *, ax=None) -> Axes | np.ndarray:
    """Per-task mean conformal set size vs the entropy of its class distribution.

    Where the median conformal quantile is infinite (more than alpha of the calibration tasks have no correct
    behaviour class, so no finite rank reaches 1 - alpha), the legend says every set holds all classes. Up to
    four configs share one Axes; more get a panel each (returned as an array of Axes, one per config; ``ax`` may
    also be one Axes per config), titled with what the legend says.
    """
    panels = panels_of(ax, rel.sizes["config"], most_on_one=4, size=(2.8, 2.3), one_size=(6, 4.2))
    for i, cfg in enumerate(rel.config.values):
        r = rel.sel(config=cfg)
        q = np.nanmedian(r["qhat"].values)
        size = np.minimum(q, r["n_classes"].values)
        jitter = np.random.default_rng(0).uniform(-0.12, 0.12, size.size)
        said = f"{'every set holds all classes' if np.isinf(q) else f'median q = {q:g}'}, level {float(r['level']):.2f}"
        a = config_panel(panels, i, f"{cfg}\n{said}", fontsize=7)
        a.scatter(r["entropy"].values, size + jitter, s=10, alpha=0.6, color=None if panels.size == 1 else "C0",
                  label=f"{cfg} ({said})")
    label_panels(panels, "entropy of the task's behaviour classes (nats)", "prediction-set size (classes)",
                 f"Conformal sets at alpha = {rel.attrs['alpha']:g}")
    if panels.size == 1:
        panels[0].legend(fontsize=7)
        return panels[0]
    return panels
