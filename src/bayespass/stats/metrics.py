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
        (majority of the K samples correct; K is the fewest samples of any task, so that every task's
        cons@K is estimable when tasks have different n), ``maj@K`` (the dominant
        behaviour cluster's representative passes the gold tests) and
        ``reading`` (pass@K against cons@K).
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
    k_big = int(counts.n.where(counts.n > 0).min())  # K: every task has at least K samples (cons@K estimable)
    est = passk(counts, k, method="unbiased")
    cons = cons_at_k(counts, k_big)
    beh = behaviour(ds, signature=signature, probe_fraction=probe_fraction)
    maj = beh["dominant_correct"].where(beh["n"] > 0).mean("task")
    avg = avg_at_n(counts)
    curve = passk_curve(idata, k) if idata is not None else None
    top = passk(counts, k_big, method="unbiased").sel(k=k_big)
    rows = []
    for cfg in counts.config.values:
        row = {"config": cfg, "tasks": int((counts.n.sel(config=cfg) > 0).sum())}
        for kk in k:
            row[f"pass@{kk}"] = float(est.sel(config=cfg, k=kk))
            if curve is not None and cfg in curve.config.values:
                cell = curve.sel(config=cfg, k=kk)
                row[f"bayes@{kk}"] = float(cell["mean"])
                row[f"bayes@{kk}_lo"] = float(cell["eti"].sel(ci_bound="lower"))
                row[f"bayes@{kk}_hi"] = float(cell["eti"].sel(ci_bound="upper"))
        row["avg@n"] = float(avg.sel(config=cfg))
        row[f"cons@{k_big}"] = float(cons.sel(config=cfg, k=k_big))
        row[f"maj@{k_big}"] = float(maj.sel(config=cfg))
        row["reading"] = interpret(float(top.sel(config=cfg)), row[f"cons@{k_big}"])
        rows.append(row)
    table = pd.DataFrame(rows)
    if extend_inferencedata:
        attach(samples, "metric_table", xr.Dataset.from_dataframe(table.set_index("config")))
    return Table.of(table, "Metrics", note=f"avg@n; cons@{k_big} (the majority of {k_big} samples correct); "
                    f"maj@{k_big} (the dominant behaviour cluster passes the gold tests); bayes@k with its band "
                    "from the fit; and how to read pass@K against cons@K.")
