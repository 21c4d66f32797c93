"""One table of the headline metrics per config, with how to read them together."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from ..results import Table
from ..validate import as_fit, as_k, is_fit, is_run_with_fits
from .behaviour import as_samples, behaviour

__all__ = ["metric_table", "interpret"]


def interpret(pass_k: float, cons_k: float, level: float = 0.5) -> str:
    """Read pass@k against cons@k on the interpretation grid: capability (pass@k) against stability (cons@k)."""
    if not (np.isfinite(pass_k) and np.isfinite(cons_k)):
        return "n/a"
    hi_p, hi_c = pass_k >= level, cons_k >= level
    if hi_p and hi_c:
        return "capable and stable"
    if hi_p:
        return "potential without stability (sampling finds it, the majority does not)"
    if hi_c:
        return "stable on a narrow set"
    return "mostly out of reach"


def metric_table(samples, *, idata=None, k=(1, 5, 10), signature: str = "verdict",
                 probe_fraction: float | None = None, extend_inferencedata: bool = False) -> Table:
    """pass@k (unbiased and Bayesian), avg@n, cons@K, maj@K of behaviour clusters, and the reading.

    Parameters
    ----------
    samples : xarray.Dataset, arviz.InferenceData or xarray.DataTree
        Executed samples (or an InferenceData with a ``samples`` group, which
        is then also used as ``idata`` when it has a posterior; or a run, ``bp.load_run``, whose main fit is
        then ``idata``).
    idata : arviz.InferenceData, optional
        A fit (:func:`bayespass.fit`) of the same counts, for the Bayesian pass@k and its interval.
    k : sequence of int
        The k of the pass@k columns.
    extend_inferencedata : bool
        Also attach the table, as a Dataset over ``config``, as group ``metric_table`` of ``samples``
        (an InferenceData or the run tree).

    Returns
    -------
    pandas.DataFrame
        One row per config: ``pass@k`` (unbiased), ``bayes@k`` with
        ``bayes@k_lo``/``_hi`` (when a fit is given), ``avg@n``, ``cons@K``
        (majority of the K samples correct; K is the config's fewest samples of a task, so that every task's
        cons@K is estimable when tasks have different n: named by its value, ``cons@10``, where the configs
        share it, else with a column ``K``), ``maj@K`` (the dominant behaviour cluster's representative passes
        the gold tests; ``maj@n`` where a config's tasks have different n: each task's own samples) and
        ``reading`` (pass@K against cons@K; n/a where K = 1).
    """
    from ..execution.engine import to_counts
    from .attach import attach, check_target
    from .curve import passk_curve
    from .passk import avg_at_n, cons_at_k, passk

    if extend_inferencedata:
        check_target(samples)
    ds = as_samples(samples)
    if idata is None and (is_fit(samples) or is_run_with_fits(samples)):  # a fit itself; a run: its main fit
        idata = as_fit(samples, what="metric_table")
    k = as_k(k)
    counts = to_counts(ds)
    est = passk(counts, k, method="unbiased")
    beh = behaviour(ds, signature=signature, probe_fraction=probe_fraction)
    maj = beh["dominant_correct"].where(beh["n"] > 0).mean("task")
    avg = avg_at_n(counts)
    curve = passk_curve(idata, k) if idata is not None else None
    big, names = _consensus_k(counts)
    rows = []
    for j, cfg in enumerate(counts.config.values):
        row = {"config": cfg, "tasks": int((counts.n.sel(config=cfg) > 0).sum())}
        for kk in k:
            row[f"pass@{kk}"] = float(est.sel(config=cfg, k=kk))
            if curve is not None and cfg in curve.config.values:
                cell = curve.sel(config=cfg, k=kk)
                row[f"bayes@{kk}"] = float(cell["mean"])
                row[f"bayes@{kk}_lo"] = float(cell["eti"].sel(ci_bound="lower"))
                row[f"bayes@{kk}_hi"] = float(cell["eti"].sel(ci_bound="upper"))
        row["avg@n"] = float(avg.sel(config=cfg))
        one = counts.isel(config=[j])
        if "K" in names:
            row["K"] = int(big[j])
        row[names["cons"]] = float(cons_at_k(one, int(big[j])).values[0, 0])
        row[names["maj"]] = float(maj.sel(config=cfg))
        top = float(passk(one, int(big[j]), method="unbiased").values[0, 0])
        row["reading"] = interpret(top, row[names["cons"]]) if big[j] > 1 else "n/a: a task has one sample"
        rows.append(row)
    table = pd.DataFrame(rows)
    if extend_inferencedata:
        attach(samples, "metric_table", xr.Dataset.from_dataframe(table.set_index("config")))
    return Table.of(table, "Metrics", note=names["note"])


def _consensus_k(counts: xr.Dataset) -> tuple[np.ndarray, dict]:
    """Each config's K for cons@K (its fewest samples of a task, so that every task's cons@K is estimable).

    Returns ``(K per config, column names and caption)``. Where the configs share K, the columns are named by its
    value (``cons@10``); otherwise K is a column of its own, so one task with one sample no longer sets K = 1 for
    every config. maj is the dominant behaviour cluster of each task's own samples: ``maj@K`` where every task
    of a config has K samples, else ``maj@n``.
    """
    n = counts.n.where(counts.n > 0)
    big = n.min("task").values.astype(int)
    shared = np.unique(big).size == 1
    uniform = bool(((n == big[:, None]) | (counts.n == 0)).all())
    kname = str(big[0]) if shared else "K"
    names = {"cons": f"cons@{kname}", "maj": f"maj@{kname}" if uniform else "maj@n"}
    if not shared:
        names["K"] = "K"
    whose_k = "the" if shared else "each config's"
    why = f"; K is {whose_k} fewest samples of a task, so that every task's cons is estimable"
    why = "" if shared and uniform else why
    whose = f"the {kname}" if uniform else "each task's"
    note = (f"avg@n; {names['cons']} (the majority of {kname} samples correct{why}); {names['maj']} (the dominant "
            f"behaviour cluster of {whose} samples passes the gold tests); bayes@k with its band from the fit; and "
            "how to read pass@K against cons@K.")
    return big, names | {"note": note}
