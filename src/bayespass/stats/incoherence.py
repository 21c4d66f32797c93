"""Incoherence: an oracle-free lower bound on error from disagreement between sampled programs.

For a task, with programs drawn from the model and inputs x from the fuzzer:

- pointwise **incoherence** ``I = P(two independently sampled programs
  disagree on x)``;
- pointwise **error** ``E = P(a sampled program disagrees with the canonical
  solution on x)``.

Agreement is equality of behaviour digests (normalised return value, error
type, or timeout), one equivalence relation for both, so ``I <= 2E`` holds
for the true quantities *and* for the exact plug-in estimates below: if two
programs disagree, at least one of them disagrees with the reference.
``I`` needs no reference solution, so ``I > 0`` certifies an error and
``I / 2`` is a lower bound on it.

Estimators: (a) exact over all ordered pairs of distinct samples x all inputs
(a U-statistic); (b) Monte-Carlo over ``n`` random (pair, input) draws, with
the Hoeffding half-width ``sqrt(log(2/delta) / (2n))``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from .._run import own
from ..results import Table
from ..validate import check_positive_int, check_prob
from .attach import attach, check_target
from .behaviour import as_samples
from .panels import config_panel, label_panels, panels_of

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["incoherence", "incoherence_summary", "plot_incoherence", "pac_n_estimate", "pac_n_detect",
           "hoeffding_halfwidth"]


def pac_n_estimate(eps: float, delta: float) -> int:
    """(pair, input) draws so that ``|I_hat - I| <= eps`` with probability >= 1 - delta (Hoeffding)."""
    eps, delta = check_prob(eps, name="eps"), check_prob(delta, name="delta")
    return math.ceil(math.log(2 / delta) / (2 * eps**2))


def pac_n_detect(eps: float, delta: float) -> int:
    """Draws so that a disagreement of probability >= eps is seen at least once w.p. >= 1 - delta."""
    eps, delta = check_prob(eps, name="eps"), check_prob(delta, name="delta")
    return math.ceil(math.log(delta) / math.log(1 - eps))


def hoeffding_halfwidth(n: int, delta: float) -> float:
    """Half-width eps of the two-sided Hoeffding interval of a mean of n draws in [0, 1]."""
    return math.sqrt(math.log(2 / check_prob(delta, name="delta")) / (2 * check_positive_int(n, name="n")))


def _exact(d: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Exact (I, E) for one task: d is (K, N) digests of K samples on N inputs, ref is (N,)."""
    k = d.shape[0]
    err = float(np.mean(d != ref[None, :]))
    if k < 2:
        return np.nan, err
    s = np.sort(d, axis=0)
    new_run = np.ones(s.shape, bool)
    new_run[1:] = s[1:] != s[:-1]
    pos = np.arange(k)[:, None] * np.ones((1, s.shape[1]), int)
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=0)
    equal_pairs = 2 * (pos - start).sum(0)  # ordered pairs j != j' with equal digests, per input
    inc = float(np.mean(1 - equal_pairs / (k * (k - 1))))
    return inc, err


def _monte_carlo(d: np.ndarray, ref: np.ndarray, n: int, rng) -> tuple[float, float]:
    k, m = d.shape
    x = rng.integers(m, size=n)
    j = rng.integers(k, size=n)
    err = float(np.mean(d[j, x] != ref[x]))
    if k < 2:
        return np.nan, err
    j2 = (j + rng.integers(1, k, size=n)) % k  # uniform over the other k - 1 samples
    return float(np.mean(d[j, x] != d[j2, x])), err


def incoherence(fuzz_samples, *, samples=None, n_mc: int | None = None, delta: float | None = None,
                seed: int | None = None,
                n_repeats: int = 1, extend_inferencedata: bool = False) -> xr.Dataset:
    """Per-task incoherence and error on fuzzed inputs, exact and Monte-Carlo.

    Parameters
    ----------
    fuzz_samples : xarray.Dataset or arviz.InferenceData
        Samples executed on the fuzzed inputs (a suite from
        :func:`bayespass.execution.fuzz.fuzzed_suite`), or an InferenceData with a
        ``fuzz_samples`` group.
    samples : xarray.Dataset or arviz.InferenceData, optional
        Samples executed on the task's own tests; gives pass@1 per config for
        the rank agreement with the zero-incoherence rate.  Taken from the
        InferenceData's ``samples`` group when ``fuzz_samples`` is one.
    n_mc : int, optional
        (pair, input) draws of the Monte-Carlo estimator (default ``rcParams["incoherence.n_mc"]`` = 1000).
    delta : float, optional
        Confidence parameter of the reported Hoeffding half-width (default
        ``rcParams["incoherence.delta"]`` = 0.05).
    seed : int, optional
        Seed of the Monte-Carlo draws (default: a run's own, given a run (``bp.load_run``), which gives its
        table again; else ``rcParams["stats.seed"]``).
    n_repeats : int
        Independent Monte-Carlo repeats (``repeat`` dim) to check the PAC bound.

    extend_inferencedata : bool
        Also attach the result as group ``incoherence`` of the input (an InferenceData or the run tree).

    Returns
    -------
    xarray.Dataset
        Over ``(config, task)``: ``I``, ``E`` (exact), ``bound_holds``
        (``I <= 2E``), ``n_inputs``, ``n_samples`` (samples of the task); over ``(config, task, repeat)``:
        ``I_mc``, ``E_mc``; ``eps`` (attrs) is the half-width for ``n_mc``.
        Over ``config``: ``pass1`` when ``samples`` is available.
    """
    from ..defaults import rcParams, resolve

    if extend_inferencedata:
        check_target(fuzz_samples)
    n_mc, delta = resolve(n_mc, "incoherence.n_mc"), resolve(delta, "incoherence.delta")
    n_repeats = check_positive_int(n_repeats, name="n_repeats")
    if samples is None and isinstance(fuzz_samples, xr.DataTree) and "samples" in fuzz_samples.children:
        samples = fuzz_samples
    elif samples is None and hasattr(fuzz_samples, "groups") and not isinstance(fuzz_samples, xr.DataTree) \
            and "samples" in fuzz_samples.groups():
        samples = fuzz_samples
    fz = as_samples(fuzz_samples, group="fuzz_samples")
    if "reference_digest" not in fz:
        raise ValueError("fuzz_samples lacks 'reference_digest'; execute the samples with bayespass.execute "
                         "against bayespass.execution.fuzz.fuzzed_suite(...)")
    seed = own(fuzz_samples, seed=seed)["seed"]  # a run's own
    rng = np.random.default_rng(rcParams["stats.seed"] if seed is None else seed)
    dig, exists, ref = fz["digest"].values, fz["exists"].values, fz["reference_digest"].values
    n_inputs = (fz["is_plus"].values >= 0).sum(-1)
    n_cfg, n_task = exists.shape[:2]
    inc = np.full((n_cfg, n_task), np.nan)
    err = np.full_like(inc, np.nan)
    inc_mc = np.full((n_cfg, n_task, n_repeats), np.nan)
    err_mc = np.full_like(inc_mc, np.nan)
    ks = exists.sum(-1)
    for c in range(n_cfg):
        for t in range(n_task):
            m = int(n_inputs[t])
            idx = np.flatnonzero(exists[c, t])
            if idx.size == 0 or m == 0:
                continue
            d = dig[c, t][idx][:, :m]
            inc[c, t], err[c, t] = _exact(d, ref[t, :m])
            for r in range(n_repeats):
                inc_mc[c, t, r], err_mc[c, t, r] = _monte_carlo(d, ref[t, :m], n_mc, rng)
    d2 = ("config", "task")
    ds = xr.Dataset({"I": (d2, inc), "E": (d2, err), "bound_holds": (d2, ~(inc > 2 * err + 1e-12)),
                     "I_mc": (d2 + ("repeat",), inc_mc), "E_mc": (d2 + ("repeat",), err_mc),
                     "n_inputs": ("task", n_inputs), "n_samples": (d2, ks)},
                    coords={"config": fz.config.values, "task": fz.task.values, "repeat": np.arange(n_repeats)})
    if samples is not None:
        s = as_samples(samples)
        correct = s["correct"].where(s["exists"]).sum("sample") / s["exists"].sum("sample")
        ds["pass1"] = correct.reindex(config=ds.config.values).mean("task")
    ds.attrs.update(n_mc=n_mc, delta=delta, eps=hoeffding_halfwidth(n_mc, delta), n_repeats=n_repeats)
    if extend_inferencedata:
        attach(fuzz_samples, "incoherence", ds)
    return ds


def incoherence_summary(inc: xr.Dataset) -> Table:
    """Dataset-level summary per config.

    Columns: mean error, mean incoherence, Spearman rho(I, E) over tasks,
    detection rate (tasks with E > 0 that have I > 0), undetected mean error
    (mean E over tasks with I = 0), zero-incoherence rate, share of tasks where
    the bound I <= 2E holds, and (with ``pass1``) pass@1.  ``attrs["rank_agreement"]``
    is the Spearman rho across configs between pass@1 and the zero-incoherence rate.
    """
    rows = []
    for cfg in inc.config.values:
        x = inc.sel(config=cfg)
        i, e = x["I"].values, x["E"].values
        ok = np.isfinite(i) & np.isfinite(e)
        i, e = i[ok], e[ok]
        rho = stats.spearmanr(i, e).statistic if np.ptp(i) > 0 and np.ptp(e) > 0 else np.nan
        row = {"config": cfg, "tasks": int(ok.sum()), "mean_error": e.mean(), "mean_incoherence": i.mean(),
               "spearman": rho, "detection_rate": np.mean(i[e > 0] > 0) if (e > 0).any() else np.nan,
               "undetected_error": e[i == 0].mean() if (i == 0).any() else np.nan,
               "zero_incoherence": np.mean(i == 0), "bound_holds": float(x["bound_holds"].values[ok].mean())}
        if "pass1" in inc:
            row["pass1"] = float(x["pass1"])
        rows.append(row)
    df = pd.DataFrame(rows)
    if "pass1" in df and len(df) >= 2:
        x, y = df["pass1"].to_numpy(float), df["zero_incoherence"].to_numpy(float)
        df.attrs["rank_agreement"] = (float(stats.spearmanr(x, y).statistic) if np.ptp(x) > 0 and np.ptp(y) > 0
                                      else np.nan)  # undefined when either is constant across configs
    return Table.of(df, "Incoherence on fuzzed inputs (oracle-free lower bound on error)",
                    note="I = P(two sampled programs disagree on a fuzzed input), E = P(a sampled program disagrees "
                    "with the canonical solution); I <= 2E always, so I > 0 certifies an error without a reference "
                    "solution.")


def plot_incoherence(inc: xr.Dataset, *, ax=None) -> Axes | np.ndarray:
    """Per-task incoherence vs error with the line I = 2E (points must lie on or below it).

    Up to four configs share one Axes; more get a panel each (returned as an array of Axes, one per config;
    ``ax`` may also be one Axes per config).
    """
    panels = panels_of(ax, inc.sizes["config"], most_on_one=4, size=(2.5, 2.3), one_size=(5.2, 4.6))
    for i, cfg in enumerate(inc.config.values):
        x = inc.sel(config=cfg)
        config_panel(panels, i, str(cfg)).scatter(x["E"].values, x["I"].values, s=10, alpha=0.6, label=str(cfg),
                                                  color=None if panels.size == 1 else "C0")
    for a in panels:
        a.plot([0, 0.5], [0, 1], color="k", lw=1, ls="--", label="I = 2E (bound)")
        a.set_xlim(-0.02, 1.02)
        a.set_ylim(-0.02, 1.02)
    label_panels(panels, "error E (disagreement with the canonical solution)",
                 "incoherence I (disagreement between samples)", "Incoherence vs error per task")
    if panels.size == 1:
        panels[0].legend(fontsize=7)
        return panels[0]
    panels[0].legend(handles=panels[0].lines[-1:], fontsize=7)  # the bound; the titles name the configs
    return panels
