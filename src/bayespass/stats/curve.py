"""pass@k curves with credible bands from a fitted InferenceData."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

from .._run import own
from ..defaults import rcParams
from ..results import Table
from ..validate import as_fit, as_k, check_prob
from .attach import attach_fit
from .panels import config_panel, label_panels, panels_of

__all__ = ["passk_curve", "curve_table", "plot_passk_curve", "improvability"]


def passk_curve(idata, k=None, *, ci_prob: float | None = None, extend_inferencedata: bool = False) -> xr.Dataset:
    """Posterior pass@k per config with equal-tailed and highest-density intervals.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        From :func:`bayespass.fit` (any model and method), or a run (``bp.load_run``: its main fit, and its own
        ci_prob if not given).
    k : int or sequence of int, optional
        Defaults to the k grid stored in the ``passk`` group (a fit without one: the grid a fit stores); any
        other k is computed from the posterior (Rao-Blackwellised, also k > n).
    ci_prob : float, optional
        Interval probability (default ``rcParams["stats.ci_prob"]``).
    extend_inferencedata : bool
        Also store the result in ``idata`` as the group ``passk_curve``.

    Returns
    -------
    xarray.Dataset
        Over ``(config, k)``: ``mean`` (Rao-Blackwellised posterior mean); over
        ``(config, k, ci_bound)`` with ``ci_bound = ["lower", "upper"]``:
        ``eti`` and ``hdi`` (from draws of the dataset pass@k that include the
        per-task spread; see :func:`bayespass.passk_draws`).  For a stacked
        fit (``model="auto"``) the band follows ``rcParams["stats.stack_band"]``
        (by default the hull of the candidates' bands, every candidate holding
        at least 5% of the draws): see :func:`passk_bands`.  The ETI is
        monotone in k over the k asked for (:func:`monotone_band`).  ``attrs``:
        ``ci_prob``, the model, method and, for stacked fits, the weights.
    """
    from ..models.predictive import passk_draws

    target, idata = idata, as_fit(idata, what="passk_curve")  # a run: its main fit
    ci_prob = own(target, ci_prob=ci_prob)["ci_prob"]  # a run's own
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    group = idata.passk if "passk" in idata.groups() else None
    if k is None and group is not None:
        draws = group
    else:
        from ..models.predictive import default_k_grid

        # no stored draws (a candidate of a stack, a group deleted): the grid a fit stores
        k = as_k(default_k_grid(int(idata.constant_data["n"].max())) if k is None else k)
        stored = group.k.values if group is not None else np.array([])
        # new k: the same (thinned) draws as the stored group, so both give one posterior
        thin = group.sizes["draw"] if group is not None else 1000
        draws = (group.sel(k=k) if np.isin(k, stored).all()
                 else passk_draws(idata, k, max_draws=thin, seed=idata.posterior.attrs.get("seed", 0)))
    draws = draws.reset_coords()  # n_min, ... are coordinates of a stack's draws: the mean carries none of them
    eti, hdi = passk_bands(draws, prob)
    out = xr.Dataset({"mean": draws["passk_mean"].mean(("chain", "draw")).transpose("config", "k"),
                      "eti": eti, "hdi": hdi})
    post = idata.posterior.attrs
    out.attrs.update(ci_prob=prob, model=post.get("bayespass_model", ""), method=post.get("bayespass_method", ""))
    if "stacking_weights" in post:
        out.attrs["stacking_weights"] = str(post["stacking_weights"])
    if extend_inferencedata:
        attach_fit(target, "passk_curve", out)
    return out


def _bands(full: xr.DataArray, prob: float, hdi: bool) -> tuple[xr.DataArray, xr.DataArray | None]:
    """ETI (and HDI) over (chain, draw) of ``full`` (chain, draw, config, k); NaN draws are skipped."""
    import arviz as az

    with warnings.catch_warnings():  # a config with no observed task (bp.fit warned) or a candidate ruled out
        warnings.filterwarnings("ignore", "All-NaN slice encountered", RuntimeWarning)
        qs = full.quantile([(1 - prob) / 2, (1 + prob) / 2], dim=("chain", "draw"), skipna=True)
    eti = qs.rename(quantile="ci_bound").assign_coords(ci_bound=["lower", "upper"])
    eti = eti.transpose("config", "k", "ci_bound").drop_vars("quantile", errors="ignore")
    if not hdi:
        return eti, None
    h = az.hdi(full.rename("passk").to_dataset(), hdi_prob=prob, skipna=True)["passk"].rename(hdi="ci_bound")
    return eti, h.assign_coords(ci_bound=["lower", "upper"]).transpose("config", "k", "ci_bound")


def passk_bands(draws: xr.Dataset, prob: float, *, hdi: bool = True) -> tuple[xr.DataArray, xr.DataArray | None]:
    """ETI and HDI (dims config, k, ci_bound) of the dataset pass@k draws of :func:`bayespass.passk_draws`.

    For a stacked fit (the draws carry ``component``) the band follows
    ``rcParams["stats.stack_band"]``:

    ``"hull-beyond"``
        The mixture's band where k is at most the config's smallest number of
        samples per task (there the data identify pass@k, and the candidates
        agree; a task or two of a few hundred with fewer samples, at most
        ``data.counts.IDENTIFIED_SHARE`` of them, do not count), the hull
        (below) beyond, where they extrapolate, and at every
        k for a config with one sample per task (the spread of p over the
        tasks, part of the dataset pass@1's band, is not identified), widened
        there to :func:`identified_band`, which holds whatever that spread is
        (the candidates' priors all expect tasks of unequal difficulty: on
        equally hard tasks their hull covered pass@10 in 10% of replicates).
        A config counts as one sample per task where most of its tasks have
        one (:data:`SINGLE_SAMPLE_SHARE`).  On the
        calibration benchmark the hull everywhere covered 0.955 on average
        over the simulated cells with m >= 2, k <= 100, above the target
        window [0.87, 0.95], nearly all of the excess at k <= m
        (benchmarks/RESULTS.md).  Draws without ``n_min`` (a fit saved before
        this rule) get the hull everywhere.
    ``"hull-short"`` (the default)
        As ``"hull-beyond"``, but beyond the samples drawn the band is the
        mixture's, each end pushed out by as far as the candidates' bands
        reach beyond the mixture's on the part of pass@k that the tasks with
        fewer than k samples make up (``passk_short`` of the draws), and kept
        inside the hull.  Where every task is short of k (equal n per task)
        this is the hull; on ragged counts (adaptive allocation, failed
        generations) the candidates' disagreement widens the band only by
        the tasks whose pass@k it extrapolates.  On ragged simulated and real
        counts it covered 0.85-1.00 (``benchmarks/ragged_band.py``), and with
        it adaptive allocation reaches a band width with about a third fewer
        samples than uniform (``benchmarks/allocate.py``; with the hull, 26%).
    ``"hull"``
        The hull of the candidates' own bands.  Stacking weighs the candidates
        by how well they predict the counts observed; on a benchmark of a few
        hundred tasks their LOO densities differ by 1-2 nats, so the weights are
        near equal, while the candidates' pass@k beyond the samples drawn can
        differ by more than their own bands (benchmarks/RESULTS.md, "The stacked
        band as the hull of its candidates' bands").  A band of the weighted
        mixture then covers only where most candidates are right; the hull
        covers wherever one of them is (a mixture's equal-tailed band always
        lies inside it).
    ``"mixture"``
        The band of the weighted mixture of the candidates' draws.
    ``"midpoint"``
        Each endpoint halfway between the hull's and the mixture's.

    Candidates holding less than ``rcParams["stats.stack_min_share"]`` of a
    config's draws (the data ruled them out) do not widen the hull.

    Under ``"hull-beyond"`` and ``"hull-short"``, where every observed task
    of a config has at least 2k samples, the band also holds
    :func:`unbiased_band`: the normal band of the unbiased pass@k, whose
    variance about the finite-task truth has an unbiased estimate there
    (:func:`bayespass.stats.kernels.unbiased_passk_moments`), with no prior
    and no shape of p (``rcParams["stats.unbiased_band"]``, default True).
    Within the data the candidates can still agree on a shape that is wrong
    (half the tasks at p = 0.05, half at 0.95: from 10 samples per task
    their band of pass@5 fell short of the truth); this keeps the band
    honest there whatever the shape (benchmarks/RESULTS.md).

    Every rule's equal-tailed band is then made monotone in k over the k of
    ``draws`` (:func:`monotone_band`); the HDI is left as it is (the HDI of a
    quantity that grows with k can start lower at a larger k).
    """
    eti, h = _rule_bands(draws.reset_coords(), prob, hdi)  # n_min, ... may be coordinates (passk_draws' own)
    return monotone_band(eti), h


def _rule_bands(draws: xr.Dataset, prob: float, hdi: bool) -> tuple[xr.DataArray, xr.DataArray | None]:
    """ETI and HDI of ``draws`` by the rule of ``rcParams["stats.stack_band"]`` (:func:`passk_bands`)."""
    full = draws["passk"].transpose("chain", "draw", "config", "k")
    rule = rcParams["stats.stack_band"]
    if "component" not in draws or rule == "mixture":
        return _bands(full, prob, hdi)
    comp = draws["component"].transpose("chain", "draw", "config")
    eti, h = _candidate_hull(full, comp, prob, hdi)
    if rule == "midpoint":
        mix = _bands(full, prob, hdi)
        eti, h = ((hull + m) / 2 if hull is not None else None for hull, m in zip((eti, h), mix, strict=True))
    elif rule in ("hull-beyond", "hull-short") and "n_min" in draws:
        mix = _bands(full, prob, hdi)
        if rule == "hull-short" and "passk_short" in draws:  # the hull for the tasks short of k only
            eti, h = _widen_by_short(draws["passk_short"], comp, mix, (eti, h), prob, hdi)
        # (config, k): pass@k identified by the data.  Not with one sample per task: the dataset pass@1's band
        # holds the spread of p over its tasks, which one sample each cannot tell (zoibb puts it at 0)
        # Up to k_identified: at most 1% of the tasks have fewer samples than k (data.counts.identified_k; draws
        # from before it: the smallest n)
        lim = draws["k_identified"] if "k_identified" in draws else draws["n_min"]
        inside = (draws["k"] <= lim) & (lim >= 2)
        eti, h = (hull if hull is None else xr.where(inside, m, hull).transpose(*hull.dims)
                  for hull, m in zip((eti, h), mix, strict=True))
        single = single_sample_configs(draws)
        if "pass1_rate" in draws and single.any():
            ident = identified_band(draws["pass1_rate"], draws["pass1_trials"], draws["k"], prob)
            eti, h = (b if b is None else xr.where(single, _hull([b, ident.transpose(*b.dims)]), b).transpose(*b.dims)
                      for b in (eti, h))
        if "unbiased_mean" in draws and rcParams["stats.unbiased_band"]:
            eti, h = (b if b is None else join_unbiased_band(b, draws["unbiased_mean"], draws["unbiased_var"], prob)
                      for b in (eti, h))
    return eti, h


def unbiased_band(mean, var, prob: float) -> xr.DataArray:
    """Return the normal band (config, k, ci_bound) of the unbiased pass@k about the finite-task truth, in [0, 1].

    ``mean``, ``var`` (config, k): :func:`bayespass.stats.kernels.unbiased_passk_moments` (NaN where some task has
    n < 2k).  No prior and no shape of p: only the central limit over the tasks.
    """
    from scipy.stats import norm

    half = norm.ppf((1 + prob) / 2) * np.sqrt(var)
    lo, hi = (mean - half).clip(0.0, 1.0), (mean + half).clip(0.0, 1.0)
    return xr.concat([lo, hi], "ci_bound").assign_coords(ci_bound=["lower", "upper"]).transpose(
        "config", "k", "ci_bound")


def join_unbiased_band(band: xr.DataArray, mean, var, prob: float) -> xr.DataArray:
    """Return ``band`` (config, k, ci_bound) widened to hold :func:`unbiased_band` of ``mean``, ``var``, where set."""
    data = unbiased_band(mean, var, prob).transpose(*band.dims)
    return xr.where(data.notnull(), _hull([band, data]), band).transpose(*band.dims)


def monotone_band(band: xr.DataArray) -> xr.DataArray:
    """Make an equal-tailed band (config, k, ci_bound) monotone in k, as pass@k itself is.

    Each lower end is raised to the largest lower end at a smaller k, each upper end lowered to the smallest
    upper end at a larger k (of the k in ``band``).  pass@k never decreases in k, so a truth under a raised
    lower end at k is under that end at the smaller k as well (and over a lowered upper end at k, over it at the
    larger k): every miss of the monotone band is a miss of the band at some k.  Two things can make the band
    itself fall: a stacked fit's band switches from the mixture's (k within the samples drawn) to the hull of
    its candidates' (beyond them), and the per-draw spread of the finite-task pass@k is a normal whose sd can
    grow faster in k than its mean (:func:`bayespass.passk_draws`).
    """
    order = np.argsort(band["k"].values, kind="stable")
    lo = band.sel(ci_bound="lower").transpose("config", "k").values[:, order]
    hi = band.sel(ci_bound="upper").transpose("config", "k").values[:, order]
    lo = np.where(np.isnan(lo), np.nan, np.fmax.accumulate(lo, axis=1))
    hi = np.where(np.isnan(hi), np.nan, np.fmin.accumulate(hi[:, ::-1], axis=1)[:, ::-1])
    back = np.argsort(order)
    out = band.transpose("config", "k", "ci_bound").copy()
    ends = {"lower": lo[:, back], "upper": hi[:, back]}
    out.values = np.stack([ends[b] for b in out["ci_bound"].values], axis=-1)
    return out.transpose(*band.dims)


def _candidate_hull(x: xr.DataArray, comp: xr.DataArray, prob: float, hdi: bool) -> list:
    """ETI and HDI (None without ``hdi``) of the hull of the candidates' bands of ``x`` (chain, draw, config, k).

    Candidates holding less than ``rcParams["stats.stack_min_share"]`` of a config's draws do not count there.
    """
    parts = []
    for lab in np.unique(comp.values):
        mine = comp == lab
        enough = mine.mean(("chain", "draw")) >= rcParams["stats.stack_min_share"]  # (config,): NaN where too few
        parts.append([None if b is None else b.where(enough) for b in _bands(x.where(mine), prob, hdi)])
    return [None if parts[0][i] is None else _hull([p[i] for p in parts]) for i in (0, 1)]


def _widen_by_short(short: xr.DataArray, comp: xr.DataArray, mix, hulls, prob: float, hdi: bool) -> list:
    """Widen the mixture's bands ``mix`` by the candidates' reach on the short tasks' part of pass@k.

    Each end moves out by as far as the candidates' bands of ``short`` (``passk_short``: the part of pass@k
    the tasks with n < k make up) reach beyond the mixture's band of it, and stays inside the hull of the
    candidates' bands of pass@k (``hulls``; the long tasks' part can move the total's quantiles by a little
    more than the short part's).  Where every task is short of k this is the hull (a mixture's equal-tailed
    band lies inside its candidates' hull); where none is, the mixture's band.
    """
    short = short.transpose("chain", "draw", "config", "k")
    out = []
    for m, s_mix, s_hull, hull in zip(mix, _bands(short, prob, hdi), _candidate_hull(short, comp, prob, hdi),
                                      hulls, strict=True):
        if m is None:
            out.append(None)
            continue
        lower = m.sel(ci_bound="lower") - (s_mix - s_hull).sel(ci_bound="lower").clip(min=0).fillna(0.0)
        upper = m.sel(ci_bound="upper") + (s_hull - s_mix).sel(ci_bound="upper").clip(min=0).fillna(0.0)
        out.append(xr.concat([lower.clip(min=hull.sel(ci_bound="lower")), upper.clip(max=hull.sel(ci_bound="upper"))],
                             "ci_bound").clip(0.0, 1.0).transpose(*m.dims))
    return out


#: A config is treated as one sample per task (its band joined with :func:`identified_band`) where more than
#: this share of its observed tasks have one sample: a few tasks with one sample among many with more (failed
#: generations, a ragged import) leave the spread of p identified, and the identified set is then far wider
#: than what the data allow (pass@10's lower end at pass@1's).
SINGLE_SAMPLE_SHARE = 0.5


def single_sample_configs(draws: xr.Dataset) -> xr.DataArray:
    """(config,) bool: the configs of :func:`bayespass.passk_draws` whose band is joined with the identified set.

    Those where more than :data:`SINGLE_SAMPLE_SHARE` of the observed tasks have one sample (draws without
    ``single_share``, from an older version: those whose smallest number of samples per task is 1).
    """
    if "single_share" in draws:
        return draws["single_share"] > SINGLE_SAMPLE_SHARE
    return draws["n_min"] < 2


def identified_band(rate, trials, k, prob: float) -> xr.DataArray:
    """Return the band of pass@k that holds whatever the spread of p over the tasks (all one sample each allows).

    Per task ``p_i <= 1 - (1 - p_i)^k``, and ``1 - (1 - p)^k`` is concave in p, so the dataset
    pass@k of tasks whose mean p is ``mu`` lies in ``[mu, 1 - (1 - mu)^k]``: the lower end when every
    task passes always or never, the upper when all tasks are equally hard.  One sample per task cannot
    tell these apart (the counts' distribution depends on ``mu`` alone), so this is the identified set;
    the band widens it by ``mu``'s own band, Jeffreys' interval for ``rate`` (the observed pass@1) over
    ``trials`` Bernoulli trials.  The count's variance, ``sum_i p_i (1 - p_i)``, is at most the
    binomial's for that mean, so the interval is conservative for any spread.

    ``rate``, ``trials``: (config,); ``k``: (k,).  Returns (config, k, ci_bound).
    """
    from scipy.stats import beta

    x = rate * trials
    a = (1 - prob) / 2
    lo = xr.where(x > 0, xr.apply_ufunc(beta.ppf, a, x + 0.5, trials - x + 0.5), 0.0)
    hi = xr.where(x < trials, xr.apply_ufunc(beta.ppf, 1 - a, x + 0.5, trials - x + 0.5), 1.0)
    lower = lo.broadcast_like(k.astype(float))
    upper = 1.0 - (1.0 - hi) ** k
    return xr.concat([lower, upper], "ci_bound").assign_coords(ci_bound=["lower", "upper"]).transpose(
        "config", "k", "ci_bound")


def _hull(bands: list[xr.DataArray]) -> xr.DataArray:
    """Smallest band (config, k, ci_bound) holding every band of ``bands`` (NaN bands ignored)."""
    b = xr.concat(bands, "candidate")
    return xr.concat([b.sel(ci_bound="lower").min("candidate"), b.sel(ci_bound="upper").max("candidate")],
                     "ci_bound").transpose("config", "k", "ci_bound")


def _check_curve(curve, *, what: str) -> None:
    """Raise a clear TypeError unless ``curve`` is a curve of :func:`passk_curve` (a fit gets the call to make)."""
    if isinstance(curve, xr.Dataset) and {"mean", "eti"} <= set(curve.data_vars):
        return
    hint = ("; this is a fit: make its curve first, bp.passk_curve(idata, k=[1, 10, 100])"
            if hasattr(curve, "posterior") else "")
    raise TypeError(f"{what} needs a curve from bp.passk_curve(...); got {type(curve).__name__}{hint}")


def none_passed_note(counts: xr.Dataset | None) -> str:
    """Return a caption's sentence naming the configs none of whose samples passed ('' when there are none).

    Their pass@k beyond the samples drawn is the prior's shape near p = 0 (a task with p = 0.001 and one with
    p = 0 look the same from a few failures, and pass@100 differs by 0.1 between them): the counts bound it
    (the band), its mean is not an estimate to report.
    """
    if counts is None:
        return ""
    n, c = counts["n"].sum("task"), counts["c"].sum("task")
    none = [str(x) for x in counts.config.values[((n > 0) & (c == 0)).values]]
    if not none:
        return ""
    total = int(n.sel(config=none).sum())
    return (f" No sample of {', '.join(repr(x) for x in none[:4])}{' ...' if len(none) > 4 else ''} passed "
            f"({total} samples): beyond the samples drawn {'its' if len(none) == 1 else 'their'} mean is the prior's "
            "shape near p = 0, not the counts'; report the band's upper end (what the counts do not rule out), not "
            "the mean.")


#: Fewer observed tasks than this in a config and its pass@k table's caption says the posterior mean leans on the
#: priors (benchmarks/RESULTS.md, "Ten and twenty tasks per config": on 10-20 tasks the default's mean beyond the
#: samples drawn was worse than the naive plug-in in a third of the cells; on 40, in 4 of 90)
FEW_TASKS = 40


def few_tasks_note(counts: xr.Dataset | None) -> str:
    """Return a caption's sentence naming the configs with fewer than :data:`FEW_TASKS` observed tasks ('' if none).

    On so few tasks the candidates' hyperparameters rest on the priors as much as on the counts, and the posterior
    mean of pass@k with them: its band holds the truth (0.95 on average on 10 and 20 tasks), its mean can be far
    from it (pass@10 of a low pass rate model from 2 samples per task on 10 tasks: +0.09).
    """
    if counts is None:
        return ""
    tasks = (counts["n"] > 0).sum("task")
    few = [(str(cfg), int(t)) for cfg, t in zip(counts.config.values, tasks.values, strict=True) if 0 < t < FEW_TASKS]
    if not few:
        return ""
    named = ", ".join(f"{cfg!r} ({t} tasks)" for cfg, t in few[:4]) + (" ..." if len(few) > 4 else "")
    return (f" Few tasks: {named}. On so few the posterior mean leans on the models' priors (beyond the samples drawn "
            "it was further off than the plug-in 1 - (1 - c/n)^k in a third of the simulated cells on 10-20 tasks): "
            "read the band, which covered there, not the mean.")


def counts_notes(counts: xr.Dataset | None) -> str:
    """Return the caption's sentences the counts call for: configs with no pass, configs with few tasks."""
    return none_passed_note(counts) + few_tasks_note(counts)


def curve_table(curve: xr.Dataset, *, hdi: bool = False, bounds_shown: bool = False,
                counts: xr.Dataset | None = None) -> Table:
    """One row per (config, k): posterior mean and interval bounds, the interval named by its probability.

    Columns ``config, k, mean, "90% lower", "90% upper"`` (ETI; with ``hdi=True``
    also the HDI bounds), the percentage taken from ``curve.attrs["ci_prob"]``.  The caption says what the
    band beyond the samples per task rests on, (unless ``bounds_shown``) where the range under any
    shape of p is, and, given the ``counts``, which configs had no sample pass or few tasks (:func:`counts_notes`).
    """
    _check_curve(curve, what="curve_table")
    prob = curve.attrs.get("ci_prob", rcParams["stats.ci_prob"])
    df = curve["mean"].to_dataframe()
    for band in ("eti", "hdi") if hdi else ("eti",):
        wide = curve[band].to_dataframe().unstack("ci_bound")[band]
        label = f"{prob:.0%}" if band == "eti" else f"{prob:.0%} HDI"
        df = df.join(wide.rename(columns={"lower": f"{label} lower", "upper": f"{label} upper"}))
    model = curve.attrs.get("model") or "?"
    by = f" by {curve.attrs['method']}" if curve.attrs.get("method") else ""
    bands = f"{prob:.0%} equal-tailed interval" + (f" and {prob:.0%} HDI" if hdi else "")
    beyond = ("the band spans its candidates' bands (on ragged counts, their part from the tasks with fewer "
              "than k samples), which fit the counts alike and differ in how p is shaped near 0 and 1: there "
              f"it covers more often than {prob:.0%} on most shapes measured, less on shapes none of them follows"
              if model == "auto" else f"the band holds if the tasks' p are shaped as model {model} "
              "assumes")
    return Table.of(df.reset_index(), f"pass@k of model {model}{by}: posterior mean and {bands}",
                    note="Any k, also k > samples per task: the posterior predictive of the dataset pass@k. Beyond "
                    f"the samples per task {beyond}" + ("." if bounds_shown else "; 'bayespass curve FIT --bounds' "
                                                       "(bp.passk_bounds) gives the range under any shape.")
                    + counts_notes(counts))


#: most configs drawn on one panel: beyond it (matplotlib's ten colours repeat) each config has its own panel
MAX_ON_ONE_PANEL = 10


def plot_passk_curve(curve: xr.Dataset, *, counts: xr.Dataset | None = None, truth: xr.DataArray | None = None,
                     ax=None, band: str = "eti", bounds: xr.DataArray | None = None) -> Axes | np.ndarray:
    """Plot pass@k curves with bands per config; overlay the unbiased estimator where n >= k.

    Up to ten configs share one panel, a colour each; more (34 real configs' bands were one grey mass behind a
    legend taller than the figure) get a panel each, on shared axes, as ArviZ's ``plot_posterior`` draws
    several variables.

    Parameters
    ----------
    curve : xarray.Dataset
        From :func:`passk_curve`.
    counts : xarray.Dataset, optional
        When given, the unbiased estimate is drawn as markers at k <= min n.
    truth : xarray.DataArray, optional
        Known true pass@k over ``(config, k)`` (simulations), drawn dashed.
    ax : matplotlib Axes or sequence of Axes, optional
        One Axes for every config, or one per config (panels); default: a new figure, panels above ten configs.
    band : {"eti", "hdi"}
    bounds : xarray.DataArray, optional
        :func:`bayespass.passk_bounds` over ``(config, k, ci_bound)``, drawn dotted: what the counts allow
        under any spread of p, beside the band the model's prior narrows it to.

    Returns
    -------
    matplotlib Axes, or numpy.ndarray of them (one per config) where each config has its panel.
    """
    _check_curve(curve, what="plot_passk_curve")
    panels = panels_of(ax, curve.sizes["config"], most_on_one=MAX_ON_ONE_PANEL, one_size=(7, 4.5))
    for i, cfg in enumerate(curve.config.values):
        one = panels.size == 1
        _draw_config(config_panel(panels, i, str(cfg)), curve, cfg, f"C{i % 10}" if one else "C0", counts=counts,
                     truth=truth, bounds=bounds, band=band, label=str(cfg) if one else None)
    lo = min(a.dataLim.y0 for a in panels)
    hi = max(a.dataLim.y1 for a in panels)
    for a in panels:
        a.set_xscale("log")
        a.set_ylim(*_pass_limits(lo, hi))
        a.grid(alpha=0.3)
    prob = curve.attrs.get("ci_prob", rcParams["stats.ci_prob"])
    notes = [note for note, on in (("o: unbiased estimate", counts is not None), ("dashed: truth", truth is not None),
                                   ("dotted: no-prior bounds", bounds is not None)) if on]
    title = f"pass@k, posterior mean and {prob:.0%} {band.upper()}" + (f" ({'; '.join(notes)})" if notes else "")
    label_panels(panels, "k", "pass@k", title, fontsize=10 if len(notes) > 1 else None)
    if panels.size == 1:
        panels[0].legend(fontsize=8, loc="best")
        return panels[0]
    return panels


def _draw_config(ax, curve: xr.Dataset, cfg, color: str, *, counts, truth, bounds, band: str,
                 label: str | None) -> None:
    """Draw one config's mean and band, its unbiased estimates, truth and no-prior bounds on ``ax``."""
    from .passk import passk

    k = curve.k.values
    sub = curve.sel(config=cfg)
    ax.plot(k, sub["mean"], color=color, label=label)
    ax.fill_between(k, sub[band].sel(ci_bound="lower"), sub[band].sel(ci_bound="upper"), color=color, alpha=0.2,
                    lw=0)
    if counts is not None:
        kk = k[k <= int(counts.n.sel(config=cfg).where(counts.n.sel(config=cfg) > 0).min())]
        if kk.size:
            est = passk(counts.sel(config=[cfg]), kk, method="unbiased").values[0]
            ax.plot(kk, est, "o", color=color, ms=3.5, mfc="white")
    if truth is not None:
        ax.plot(truth.k.values, truth.sel(config=cfg).values, "--", color=color, lw=1)
    if bounds is not None:
        for end in ("lower", "upper"):
            ax.plot(bounds.k.values, bounds.sel(config=cfg, ci_bound=end).values, ":", color=color, lw=1.2)


def _pass_limits(lo: float, hi: float) -> tuple[float, float]:
    """Return y limits around what is drawn, within [0, 1.01]: configs within a few points of each other stay apart."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return 0.0, 1.01
    pad = max(0.08 * (hi - lo), 0.02)
    return max(0.0, lo - pad), min(1.01, hi + pad)


def improvability(idata, *, ci_prob: float | None = None, extend_inferencedata: bool = False) -> xr.Dataset:
    """Posterior summaries of dPass = a + b (concentration) and pass@1 per config.

    At equal pass@1, larger ``a + b`` means larger pass@k for every k >= 2.
    Returns ``dpass`` and ``pass1`` means and their equal-tailed intervals
    (``dpass_eti``, ``pass1_eti`` over ``ci_bound``).  A stacked fit (the default, ``model="auto"``; also a
    run, whose main fit it is) has no concentration of its own: ``dpass`` is then that of its Beta-Binomial
    candidate (``bb_kappa``, fitted to the same counts), named in ``attrs["dpass_from"]``; ``pass1`` is the
    stack's.
    """
    target, idata = idata, as_fit(idata, what="improvability")  # a run: its main fit
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    kappa, source = _concentration(idata.posterior)
    p1 = passk_curve(idata, [1], ci_prob=prob).isel(k=0, drop=True)
    qs = kappa.quantile([(1 - prob) / 2, (1 + prob) / 2], dim=("chain", "draw"))
    out = xr.Dataset({
        "dpass": kappa.mean(("chain", "draw")),
        "dpass_eti": qs.rename(quantile="ci_bound").assign_coords(ci_bound=["lower", "upper"]),
        "pass1": p1["mean"], "pass1_eti": p1["eti"],
    }, attrs={"ci_prob": prob, "dpass_from": source})
    if extend_inferencedata:
        attach_fit(target, "improvability", out)
    return out


def _concentration(post) -> tuple[xr.DataArray, str]:
    """Return the Beta concentration behind dPass and its source (a stack: its first Beta candidate's)."""
    if "kappa" in post:
        return post["kappa"], "kappa"
    if "phi" in post:
        return post["phi"], "phi"
    for name in ("bb", "zoibb", "flex"):
        if f"{name}_kappa" in post:
            return post[f"{name}_kappa"], f"{name}_kappa: the {name} candidate of the stack"
    raise ValueError(f"improvability needs a Beta concentration: 'kappa' (bb, zoibb, flex), 'phi' (hier) or, in a "
                     f"stack, a bb, zoibb or flex candidate's; a {post.attrs.get('bayespass_model', '?')!r} fit "
                     f"has none (fit model='bb')")
