"""Tabular summaries that print themselves (used by the CLI and reports)."""

from __future__ import annotations

from collections.abc import Sequence

import xarray as xr

from ..data.counts import validate_counts
from ..results import Table
from .passk import avg_at_n, passk

__all__ = ["estimate_table"]


def estimate_table(counts: xr.Dataset, k: Sequence[int] | str = (1, 10, 100), *,
                   method: Sequence[str] | str = ("naive", "unbiased", "bb", "zoibb", "linmix"),
                   ) -> Table:
    """One row per (config, method), one ``pass@k`` column per k, plus ``avg@n`` and ``tasks``.

    ``counts``: counts, a DataFrame of them, or a run (``bp.load_run``; its counts).
    """
    counts = validate_counts(counts)
    est = passk(counts, k, method=method if not isinstance(method, str) else method.split(","))
    if "estimator" not in est.dims:
        est = est.expand_dims(estimator=[method])
    df = est.rename(estimator="method").to_dataframe().reset_index()
    df = df.pivot(index=["config", "method"], columns="k",
                                                  values="passk")
    df.columns = [f"pass@{k}" for k in df.columns]
    order = {m: i for i, m in enumerate(est.estimator.values)}
    df = df.reset_index()
    df["_o"] = df["method"].map(order)
    cfg_order = {c: i for i, c in enumerate(est.config.values)}
    df["_c"] = df["config"].map(cfg_order)
    df = df.sort_values(["_c", "_o"]).drop(columns=["_o", "_c"])
    avg = avg_at_n(counts).to_series()
    df.insert(2, "avg@n", df["config"].map(avg))
    df.insert(2, "tasks", df["config"].map((counts.n > 0).sum("task").to_series()))
    return Table.of(df.reset_index(drop=True), "Closed-form pass@k estimates",
                    note="naive: plug-in 1 - (1 - c/n)^k per task (any k; biased low for k > 1); unbiased: Chen "
                    "et al. (k <= n); bb, zoibb, linmix: closed forms under a fitted prior (any k; NaN where only "
                    "the mean is identified).")
