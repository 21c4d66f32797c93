"""Which config is better, and how sure: paired comparison of pass@k across configs, rankings, leaderboard.

:func:`compare_configs` takes the posterior of a fit of several configs on the same tasks and returns, for
every pair of configs and every k, the posterior of the difference of their dataset-level pass@k, the
probability that one is better, and the distribution of every config's rank.  The estimand is the pass@k of
each config *on these tasks* (the finite-task truth that all samples would reveal), so the posterior
draws include the spread of the per-task probabilities around their conditional means
(:func:`bayespass.passk_draws`).

Next to it, three baselines in the same dataset, so the gain is visible:

``naive_*``
    the unbiased estimator per task (needs n >= k) and its ranking;
``paired_*``
    the paired per-task difference of unbiased estimates with a task-clustered standard error and the
    normal-approximation probability that the difference is positive (Miller, "Adding error bars to
    evals", 2024), over the tasks both configs saw; NaN where one of them has 0 < n < k there;
``beta_*``
    independent per-task Beta(1 + c, 1 + n - c) posteriors (uniform prior, the scorio / Bayes@N style),
    pass@k in closed form and P(better) by Monte Carlo, over each config's own tasks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import ndtr, ndtri

from .._run import default_fit_of, own
from ..defaults import rcParams
from ..results import Table
from ..validate import as_k, check_prob, split_pair
from . import kernels

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["compare_configs", "leaderboard", "prob_better_table", "plot_forest", "plot_prob_better",
           "plot_diff_curve"]


def _resolve(data, model, method, seed, check=None, progressbar=False):
    """Return an InferenceData from a fit, counts (fitted here), a counts file or a run directory.

    ``check(configs)`` validates the other arguments against the counts' configs before fitting.
    """
    import arviz as az

    from ..data.counts import validate_counts
    from ..models.fit import fit

    if isinstance(data, az.InferenceData):
        from ..models.predictive import model_of

        model_of(data)  # a clear error for an InferenceData that bp.fit did not make
        if model is not None or method is not None:
            raise ValueError("model/method apply when data are counts; a fit was given")
        return data
    if isinstance(data, str | os.PathLike):
        from ..data.io import read_counts

        # a run directory (of ``run`` or ``execute``): its counts, fitted like ``bayespass run`` does

        if not Path(data).exists():
            raise FileNotFoundError(f"data={str(data)!r} does not exist")
        data = read_counts(data)
    if isinstance(data, xr.Dataset | pd.DataFrame | xr.DataTree):
        counts = validate_counts(data)  # a run (bp.load_run): its counts, as for a run directory
        if counts.sizes["config"] < 2:
            raise ValueError(f"compare_configs needs at least two configs; the counts have "
                             f"{counts.sizes['config']} ({list(map(str, counts.config.values))})")
        observed = _observed_configs(counts.n, stacklevel=4)  # left out before the fit (the fit lacks them)
        if len(observed) < 2:
            raise ValueError(f"compare_configs needs at least two configs with observed tasks; the counts have "
                             f"{observed}")
        if check is not None:
            check(observed)
        counts = counts.sel(config=observed)  # fitted without the configs that have no observed task
        _warn_benchmarks(counts)
        # default: the joint model, whose P(better) is the best calibrated on real data (benchmarks/RESULTS.md)
        return fit(counts, "shared" if model is None else model, method, seed=seed, progressbar=progressbar)
    raise TypeError(f"data must be an InferenceData fit, a counts Dataset, a counts file, a run directory or a run "
                    f"(bp.load_run); got {type(data).__name__}")


def _ranks(draws: np.ndarray, rng) -> np.ndarray:
    """Rank (1 = highest) of every config per draw; draws (S, J, K); ties broken at random."""
    jitter = rng.random(draws.shape) * 1e-12
    order = np.argsort(-(draws + jitter), axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, draws.shape[1] + 1)[None, :, None], axis=1)
    return ranks


def _prob_better(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(a > b) + P(a == b) / 2 over the first axis; a (S, J, 1, K), b (S, 1, J, K)."""
    return (a > b).mean(0) + 0.5 * (a == b).mean(0)


def _pair_draws(full: np.ndarray, rows: list, cols: list, q: list) -> tuple[np.ndarray, np.ndarray]:
    """Band (J, J, K, 2) and P(better) (J, J, K) of pass@k[config] - pass@k[config_b] from draws (S, J, K).

    Only the block of ``rows`` x ``cols`` (the configs of the pairs asked for) is computed, the rest NaN: the
    differences of every pair hold S x J x J x K draws (half a gigabyte for 34 configs at 15 k).
    """
    J, K = full.shape[1:]
    d_eti, better = np.full((J, J, K, 2), np.nan), np.full((J, J, K), np.nan)
    a, b = full[:, rows][:, :, None], full[:, cols][:, None]
    block = np.ix_(rows, cols)
    d_eti[block] = np.moveaxis(np.quantile(a - b, q, axis=0), 0, -1)
    better[block] = _prob_better(a, b)
    return d_eti, better


def _baselines(n: np.ndarray, c: np.ndarray, k: np.ndarray, n_draws: int, rng) -> dict:
    J, T = n.shape
    est = np.stack([kernels.passk_unbiased_grid(n[j], c[j], k) for j in range(J)])  # (J, T, K), NaN if n < k
    seen = (n > 0)[:, :, None]
    with np.errstate(invalid="ignore"):
        naive = np.nansum(est, 1) / np.maximum(seen.sum(1), 1)
    naive[(np.isnan(est) & seen).any(axis=1) | (seen.sum(1) == 0)] = np.nan  # some task has 0 < n < k
    d = est[:, None] - est[None, :]  # (J, J, T, K)
    ok = ~np.isnan(d)
    cnt = ok.sum(2)
    # over the tasks both configs saw, as the naive estimate: undefined where one has 0 < n < k on one of them
    # (averaging the others would compare on the tasks that happen to have more samples)
    both = (seen[:, None] & seen[None, :])  # (J, J, T, 1)
    short = (both & ~ok).any(2)
    mean = np.where((cnt > 0) & ~short, np.nansum(d, 2) / np.maximum(cnt, 1), np.nan)
    var = np.nansum((d - mean[:, :, None]) ** 2, 2) / np.maximum(cnt - 1, 1)
    se = np.where((cnt > 1) & ~np.isnan(mean), np.sqrt(var / np.maximum(cnt, 1)), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = mean / se
    paired_pb = np.where(se > 0, ndtr(z), np.where(mean > 0, 1.0, np.where(mean < 0, 0.0, 0.5)))
    paired_pb = np.where(np.isnan(mean), np.nan, paired_pb)
    # over each config's own tasks, as the posterior's pass@k (a task it never ran is not a Beta(1, 1) guess)
    own = seen[:, :, 0] / np.maximum(seen.sum(1), 1)  # (J, T) weights
    beta = np.stack([own[j] @ kernels.passk_bb_predictive_grid(n[j], c[j], k, np.ones(T), np.ones(T))
                     for j in range(J)])
    p = rng.beta(1.0 + c, 1.0 + n - c, size=(n_draws, J, T))  # independent per-task posteriors
    bdraw = np.stack([((1.0 - (1.0 - p) ** kk) * own).sum(2) for kk in k], axis=-1)  # (S, J, K)
    return {"naive_passk": naive, "paired_diff": mean, "paired_se": se, "paired_prob_better": paired_pb,
            "beta_passk": beta, "beta_prob_better": _prob_better(bdraw[:, :, None], bdraw[:, None])}


def compare_configs(data, *, k=(1, 10, 100), pairs=None, ci_prob: float | None = None, model: str | None = None,
                    method: str | None = None, max_draws: int | None = 1000, seed: int | None = None,
                    extend_inferencedata: bool = False, progressbar: bool = False, band_fit=None) -> xr.Dataset:
    """Compare the pass@k of configs evaluated on the same tasks.

    Parameters
    ----------
    data : arviz.InferenceData, xarray.Dataset, or path
        A fit of several configs (:func:`bayespass.fit`), counts (fitted here with ``model``/``method``,
        default the joint model ``"shared"`` by EB: the best-calibrated P(better) on real data), a counts
        file, or a run directory or run (``bp.load_run``; its counts, and its own seed and ci_prob for those
        not given and its default fit as ``band_fit``, which give the run's leaderboard again).
    k : int or sequence of int
        Any positive k, also beyond the samples drawn.
    pairs : sequence of (str, str), optional
        Restrict the result to these (config, config_b) pairs: its ``config`` and ``config_b`` are the
        configs named first and second.  Ranks are still computed among all configs of the fit.
    ci_prob : float, optional
        Probability of the bands (default ``rcParams["stats.ci_prob"]``).
    model, method : str, optional
        The fit to make when ``data`` are counts.
    max_draws : int, optional
        Posterior draws per chain used (thinned evenly).
    seed : int, optional
        Seed of the fit, the task-spread noise, rank tie-breaking and the Beta baseline (default 0).
    extend_inferencedata : bool
        Also store the result in ``data`` (an InferenceData fit) as the group ``config_comparison``.
    progressbar : bool
        Show the progress of the fits made here: of ``data`` when they are counts (``bayespass compare`` does),
        and of the per-config fit whose band is joined beyond the samples drawn when ``band_fit`` is not given.
    band_fit : arviz.InferenceData, optional
        With a joint model (``shared``, ``hier``): a per-config fit of the same counts whose band is joined to
        each config's beyond the samples drawn (see Returns); default: the counts fitted here by EB with
        ``rcParams["stats.model"]`` (the default stacked model), when some k is beyond them.

    Returns
    -------
    xarray.Dataset
        Over ``(config, k)``: ``passk`` (posterior mean) and ``passk_eti`` (band, on ``ci_bound``;
        for a stack the band its curve has, ``rcParams["stats.stack_band"]``; for a config with one
        sample on most tasks, widened to the range one sample per task cannot narrow,
        :func:`~bayespass.stats.curve.identified_band`; for a joint model, beyond half the samples drawn
        (2k above :func:`~bayespass.data.counts.identified_k`, k >= 2), the hull of its band and the default
        per-config fit's, as the joint model's alone under-covered there: ``attrs["band_beyond_samples"]``
        names the model joined),
        ``expected_rank``, ``naive_passk``, ``beta_passk``.  Over ``(config, config_b, k)``: ``diff``
        (read it as ``cmp["diff"]``: ``cmp.diff`` is xarray's method)
        (posterior mean of pass@k[config] - pass@k[config_b]), ``diff_eti`` (its band), ``prob_better``
        (P(pass@k[config] > pass@k[config_b])), and the baselines ``paired_diff``, ``paired_se``,
        ``paired_prob_better``, ``beta_prob_better``.  Over ``(config, rank, k)``: ``rank_prob``
        (rank 1 = best).  ``attrs``: ``ci_prob``, model, method, number of draws and, for ``shared``,
        ``slopes_weight`` (the posterior probability that the configs differ in slope) and, where configs are
        siblings (one model at several temperatures), ``sibling_sd`` (the median of the posterior of how far a
        config's ability lies from its siblings', logits); ``single_sample_configs``, how many configs have one
        sample on most of their tasks (where all do, :func:`prob_better_table` says what P(better) at k > 1
        rests on).
    """
    from ..models.base import is_joint
    from ..models.fit import _single_sample_configs
    from ..models.predictive import model_of, passk_draws
    from ..simulate import rng as _rng
    from .attach import attach, check_target
    from .curve import passk_bands

    given = own(data, ci_prob=ci_prob, seed=seed)  # a run's own
    ci_prob, seed = given["ci_prob"], 0 if given["seed"] is None else given["seed"]
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    k = as_k(k)
    if extend_inferencedata:
        check_target(data)
    idata = _resolve(data, model, method, seed, check=lambda cfgs: _pairs(pairs, cfgs), progressbar=progressbar)
    if band_fit is None and is_joint(model_of(idata)) and (saved := default_fit_of(data)) is not None:
        band_fit = default_band_fit(idata, k, seed=seed, progressbar=progressbar, saved=saved)  # a run's own fit
    configs = _observed_configs(idata.constant_data["n"])  # a config with no observed task has no pass@k
    if len(configs) < 2:
        raise ValueError(f"compare_configs needs at least two configs with observed tasks; the fit has {configs}")
    first, second = _pairs(pairs, configs)
    dr = passk_draws(idata, k, max_draws=max_draws, seed=seed).sel(config=configs)
    full = dr["passk"].stack(sample=("chain", "draw")).transpose("sample", "config", "k").values  # (S, J, K)
    mean = dr["passk_mean"].mean(("chain", "draw")).transpose("config", "k").values
    rng = _rng(seed)
    q = [(1 - prob) / 2, (1 + prob) / 2]
    d_eti, better = _pair_draws(full, [configs.index(x) for x in first], [configs.index(x) for x in second], q)
    ranks = _ranks(full, rng)
    J = len(configs)
    rank_prob = np.stack([(ranks == r).mean(0) for r in range(1, J + 1)], axis=1)  # (J, R, K)
    n = idata.constant_data["n"].sel(config=configs).transpose("config", "task").values.astype(np.int64)
    c = idata.observed_data["c"].sel(config=configs).transpose("config", "task").values.astype(np.int64)
    _warn_task_sets(n, configs)
    ones = _single_sample_configs(idata.constant_data["n"].sel(config=configs))  # one sample on most tasks
    _warn_single_against_more(ones, configs, k)
    base = _baselines(n, c, k, full.shape[0], rng)
    cc, pp, kk_ = ("config", "k"), ("config", "config_b", "k"), ("ci_bound",)
    eti = _unbiased_join(_single_sample_band(passk_bands(dr, prob, hdi=False)[0], n, c, prob), n, c, prob)
    eti, widened = _beyond_samples_band(eti, idata, configs, prob, seed, band_fit, progressbar)
    eti = eti.values
    ds = xr.Dataset(
        {"passk": (cc, mean), "passk_eti": (cc + kk_, eti),
         "diff": (pp, mean[:, None] - mean[None]), "diff_eti": (pp + kk_, d_eti),
         "prob_better": (pp, better),
         "rank_prob": (("config", "rank", "k"), rank_prob), "expected_rank": (cc, ranks.mean(0)),
         "naive_passk": (cc, base["naive_passk"]), "beta_passk": (cc, base["beta_passk"]),
         **{name: (pp, base[name]) for name in ("paired_diff", "paired_se", "paired_prob_better",
                                                 "beta_prob_better")}},
        coords={"config": configs, "config_b": configs, "k": k, "rank": np.arange(1, J + 1),
                "ci_bound": ["lower", "upper"]})
    ds.attrs.update(_comparison_attrs(idata, prob, int(full.shape[0]), len(ones), widened))
    ds = ds if pairs is None else ds.sel(config=first, config_b=second)
    if extend_inferencedata:
        attach(data, "config_comparison", ds)
    return ds


def _comparison_attrs(idata, prob: float, n_draws: int, n_single: int, widened: str) -> dict:
    """Return the attrs of a comparison: its band probability, the fit's model, method and draws, and more."""
    post = idata.posterior.attrs
    attrs = {"ci_prob": prob, "model": str(post.get("bayespass_model", "")),
             "method": str(post.get("bayespass_method", "")), "n_draws": n_draws}
    if "slopes_weight" in post:  # shared: the posterior probability that the configs differ in slope
        attrs["slopes_weight"] = float(post["slopes_weight"])
    if "sibling_sd_median" in post:  # shared: siblings' abilities pooled, their spread learnt
        attrs["sibling_sd"] = float(post["sibling_sd_median"])
    attrs["single_sample_configs"] = n_single  # prob_better_table says what that means for P(better)
    attrs["band_beyond_samples"] = widened  # the per-config model whose band is joined beyond the samples
    return attrs


def _single_sample_band(eti: xr.DataArray, n: np.ndarray, c: np.ndarray, prob: float) -> xr.DataArray:
    """Join the band (config, k, ci_bound) with the identified set where a config has one sample per task.

    One sample per task tells pass@1 only: how pass@k grows beyond it depends on the spread of p over the
    tasks, which a joint model takes from its structure.  On real MBPP from one sample per task, `shared`'s
    90% band of pass@10 covered the truth in 16% of replicates (benchmarks/RESULTS.md); the default
    per-config fit widens its band to :func:`~bayespass.stats.curve.identified_band` there, and so does the
    comparison's band (P(better) and the ranks stay the model's: they were calibrated there).
    """
    from ..data.counts import pass1_rate_trials, single_sample_share
    from .curve import SINGLE_SAMPLE_SHARE, _hull, identified_band

    single = single_sample_share(n) > SINGLE_SAMPLE_SHARE
    if not single.any():
        return eti
    cfg = eti["config"]
    rate, trials = (xr.DataArray(v, coords={"config": cfg}) for v in pass1_rate_trials(n, c))
    ident = identified_band(rate, trials, eti["k"], prob)
    wide = _hull([eti.transpose("config", "k", "ci_bound"), ident])
    return xr.where(xr.DataArray(single, coords={"config": cfg}), wide, eti).transpose("config", "k", "ci_bound")


def _unbiased_join(eti: xr.DataArray, n: np.ndarray, c: np.ndarray, prob: float) -> xr.DataArray:
    """Join the band (config, k, ci_bound) with the unbiased pass@k's normal band where every task has n >= 2k.

    As the default per-config fit's band does (``rcParams["stats.unbiased_band"]``,
    :func:`~bayespass.stats.curve.passk_bands`): within the samples drawn the counts give pass@k and its variance
    about the tasks' own without a prior, so the leaderboard's band does not rest on the joint model's shape there.
    P(better), the differences and the ranks stay the model's.
    """
    from .curve import join_unbiased_band, monotone_band
    from .kernels import unbiased_passk_moments

    if not rcParams["stats.unbiased_band"]:
        return eti
    u, v = unbiased_passk_moments(n, c, eti["k"].values)
    coords = {"config": eti["config"], "k": eti["k"]}
    mean, var = (xr.DataArray(x, dims=("config", "k"), coords=coords) for x in (u, v))
    return monotone_band(join_unbiased_band(eti.transpose("config", "k", "ci_bound"), mean, var, prob))


def _beyond_samples_band(eti: xr.DataArray, idata, configs: list, prob: float, seed: int,
                         band_fit=None, progressbar: bool = False) -> tuple[xr.DataArray, str]:
    """Join a joint model's band (config, k, ci_bound) with the default per-config fit's beyond the samples drawn.

    Also past half of them (``_beyond``: 2k above a config's identified n, k >= 2), where no unbiased variance
    of pass@k exists. Beyond them (k above a config's :func:`~bayespass.data.counts.identified_k`) how pass@k
    grows depends on the shape of p near 0 and 1, which the counts do not tell; the joint model takes it from its
    structure (Beta-Binomial noise, as bb). On real MBPP its 90% band covered pass@50 from 5 samples per task in 81% of
    replicates (benchmarks/RESULTS.md, "The leaderboard's band beyond the samples drawn"), where the default
    stacked fit, whose band there spans its candidates' disagreement, covered 99.6%. The band becomes the hull
    of the two there; the posterior means, P(better), the differences and the ranks stay the joint model's.
    Returns the band and the name of the model joined ("" where nothing was).
    """
    from ..data.counts import counts_of_fit
    from ..models.base import is_joint
    from ..models.predictive import model_of
    from .curve import _hull, monotone_band, passk_curve

    if not is_joint(model_of(idata)):
        return eti, ""
    if band_fit is not None and is_joint(model_of(band_fit)):
        raise ValueError(f"band_fit must be a per-config fit (e.g. the default, model='auto'); got model "
                         f"{model_of(band_fit)!r}")
    counts = counts_of_fit(idata).sel(config=configs)
    beyond = _beyond(counts, eti["k"].values)
    if not beyond.any():
        return eti, ""
    if band_fit is None:
        if is_joint(rcParams["stats.model"]):  # a joint default: nothing per-config to join
            return eti, ""
        band_fit = _fit_default(counts, seed, progressbar)
    else:
        _check_band_fit(band_fit, counts)
    other = passk_curve(band_fit, k=eti["k"].values, ci_prob=prob)["eti"].sel(config=configs)
    wide = _hull([eti.transpose("config", "k", "ci_bound"), other.transpose("config", "k", "ci_bound")])
    mask = xr.DataArray(beyond, coords={"config": eti["config"], "k": eti["k"]})
    return monotone_band(xr.where(mask, wide, eti).transpose("config", "k", "ci_bound")), model_of(band_fit)


def _beyond(counts: xr.Dataset, k) -> np.ndarray:
    """(config, k): whether each k >= 2 is past half a config's samples drawn (2k above its ``identified_k``).

    Beyond the samples drawn (k > n) the counts do not tell how pass@k grows; between n/2 and n they tell its
    value (the unbiased estimate) but not its variance, which no unbiased estimate has there
    (benchmarks/RESULTS.md, "The full grid again after the unbiased band"), so the joint model's band alone is
    its shape's there too: from 10 samples per task of weak configs its band of pass@10 covered 0.73-0.85, the
    default per-config fit's 0.78-0.90 (benchmarks/RESULTS.md, "The leaderboard of weak configs").
    Where n >= 2k the unbiased band is joined instead (``_unbiased_join``).
    """
    from ..data.counts import identified_k

    k = np.asarray(k)[None, :]
    return (2 * k > identified_k(counts.n.transpose("config", "task").values)[:, None]) & (k >= 2)


def _fit_default(counts: xr.Dataset, seed: int, progressbar: bool = False):
    """Fit ``counts`` by EB with the default per-config model (``rcParams["stats.model"]``), without warnings."""
    import warnings

    from ..models.fit import fit

    with warnings.catch_warnings():  # the joint fit said what there is to say about these counts
        warnings.simplefilter("ignore")
        return fit(counts, rcParams["stats.model"], "eb", seed=seed, progressbar=progressbar)


def default_band_fit(idata, k, *, seed: int = 0, progressbar: bool = False, saved=None):
    """Return the fit whose band a joint model's comparison joins beyond the samples drawn, or None if none is.

    The counts of ``idata`` (its configs with an observed task) fitted by EB with ``rcParams["stats.model"]``,
    where ``idata`` is a joint model's fit and some k is beyond a config's samples drawn; None otherwise (also
    where the default model is itself a joint one). ``bayespass compare`` makes it once for its tables and
    its plots, with ``progressbar`` (the fit's bar: 34 configs x 378 tasks take about half a minute).  ``saved``:
    a fit made before (a run's ``fits/auto-eb.nc``) returned instead of fitting where it is that fit: the default
    model by EB on the same counts.
    """
    from ..data.counts import counts_of_fit
    from ..models.base import is_joint
    from ..models.predictive import method_of, model_of

    if not is_joint(model_of(idata)) or is_joint(rcParams["stats.model"]):
        return None
    counts = counts_of_fit(idata)
    counts = counts.sel(config=(counts.n > 0).any("task").values)
    if not _beyond(counts, as_k(k)).any():
        return None
    if saved is not None and model_of(saved) == rcParams["stats.model"] and method_of(saved) == "eb":
        try:
            _check_band_fit(saved, counts)
            return saved
        except ValueError:  # other counts (a run given more samples since): fitted again
            pass
    return _fit_default(counts, seed, progressbar)



def _check_band_fit(band_fit, counts: xr.Dataset) -> None:
    """Raise a ValueError unless ``band_fit`` was made on ``counts`` (every config, the same n and c)."""
    from ..data.counts import counts_of_fit

    theirs = counts_of_fit(band_fit)
    missing = sorted(set(map(str, counts.config.values)) - set(map(str, theirs.config.values)))
    same = not missing and set(theirs.task.values) == set(counts.task.values) and all(
        (theirs[v].sel(config=counts.config, task=counts.task) == counts[v]).all() for v in ("n", "c"))
    if not same:
        raise ValueError("band_fit must be a fit of the same counts as the comparison" +
                         (f"; it lacks config(s) {missing}" if missing else "; its n or c differ"))


def _observed_configs(n: xr.DataArray, *, stacklevel: int = 3) -> list[str]:
    """Return the configs of ``n`` (config x task) with an observed task; a warning names those left out.

    A config without one has no pass@k (its posterior is the prior): ranked, it would take a place it did not
    earn (the joint model gave it pass@k 0 with a band of width 0), so it is left out of the comparison.
    """
    import warnings

    seen = (n > 0).any("task").values
    names = [str(x) for x in n.config.values]
    if not seen.all():
        out = [cfg for cfg, s in zip(names, seen, strict=True) if not s]
        warnings.warn(f"config(s) {out} have no observed task (every n is 0): no pass@k to compare, left out of the "
                      "comparison", UserWarning, stacklevel=stacklevel)
    return [cfg for cfg, s in zip(names, seen, strict=True) if s]


def _warn_task_sets(n: np.ndarray, configs: list) -> None:
    """Warn when the configs were not evaluated on the same tasks (each one's pass@k is over its own)."""
    import warnings

    seen = n > 0
    total, common = int(seen.any(0).sum()), int(seen.all(0).sum())
    if common == total:
        return
    groups = _task_groups(seen)
    if len(groups) > 1:  # e.g. configs of two benchmarks in one file
        shown = "; ".join("{" + ", ".join(repr(configs[j]) for j in g[:4]) + (", ..." if len(g) > 4 else "") + "}"
                          for g in groups[:4]) + ("; ..." if len(groups) > 4 else "")
        warnings.warn(
            f"the configs fall in {len(groups)} groups with no task in common ({shown}), as configs of different "
            "benchmarks do: the ranks, P(better) and difference of two configs of "
            "different groups compare their task sets, not the models. Compare the configs of one group: "
            "bp.compare_configs(counts.sel(config=[...])) or, by benchmark, "
            "counts.sel(config=counts.benchmark == NAME) (the command line: bayespass compare --benchmark NAME)",
            UserWarning, stacklevel=3)
        return
    lacking = [f"{cfg!r} on {int(row.sum())} of {total}" for cfg, row in zip(configs, seen, strict=True)
               if row.sum() < total]
    warnings.warn(
        f"the configs were not all evaluated on the same tasks ({', '.join(lacking[:6])}"
        f"{', ...' if len(lacking) > 6 else ''}; {common} tasks are common to all): each config's pass@k is over "
        "its own tasks, so a difference mixes the configs with their task sets. To compare on the same tasks, "
        "keep the common ones: counts.isel(task=(counts.n > 0).all('config').values) (the command line: "
        "bayespass compare --common-tasks)", UserWarning, stacklevel=3)


def _warn_benchmarks(counts: xr.Dataset) -> None:
    """Warn when configs of different benchmarks ran tasks of one name (HumanEval and HumanEval+ share theirs).

    Configs of benchmarks with no task in common are warned about by ``_warn_task_sets``; these share tasks, so
    nothing else would say that a task of HumanEval+ is HumanEval's with more tests.
    """
    from ..data.counts import benchmarks_of

    names = benchmarks_of(counts)
    if len(names) < 2:
        return
    bench = np.asarray(counts["benchmark"].values).astype(str)
    seen = (counts["n"] > 0).transpose("config", "task").values
    if (np.stack([seen[bench == b].any(0) for b in names]).sum(0) < 2).all():  # no task run on two benchmarks
        return
    import warnings

    sizes = ", ".join(f"{b}: {int((bench == b).sum())}" for b in names)
    warnings.warn(
        f"the configs come from different benchmarks that name tasks alike (configs per benchmark: {sizes}): "
        "one name may be a harder task on one of them (HumanEval+ tests HumanEval's tasks more), so the ranks, "
        "P(better) and difference of two configs of different benchmarks compare the benchmarks as well as the "
        "models, and the joint model gives a task one difficulty on both. Compare one benchmark's configs: "
        "counts.sel(config=counts.benchmark == NAME) (the command line: bayespass compare --benchmark NAME)",
        UserWarning, stacklevel=4)


def _task_groups(seen: np.ndarray) -> list[list[int]]:
    """Return the configs (rows of ``seen``, config x task) in groups joined by shared tasks, largest first."""
    from scipy.sparse.csgraph import connected_components

    shared = seen.astype(np.int64) @ seen.T.astype(np.int64) > 0  # configs that ran a task in common
    _, label = connected_components(shared, directed=False)
    groups = [np.flatnonzero(label == g).tolist() for g in range(label.max() + 1)]
    return sorted(groups, key=len, reverse=True)


def _warn_single_against_more(ones: list, configs: list, k: np.ndarray) -> None:
    """Warn when configs with one sample per task (``ones``) are compared at k > 1 with configs that have more."""
    import warnings

    if not ones or len(ones) == len(configs) or not (np.asarray(k) > 1).any():
        return
    warnings.warn(
        f"config(s) {ones[:6]}{' ...' if len(ones) > 6 else ''} have one sample on most of their tasks and the "
        "others more: at k > 1, P(better) and the difference between the two kinds rest on the joint model's "
        "assumption about how the former's p spread over the tasks, which one sample cannot check. On real MBPP "
        "(half the configs at one sample per task, half at ten) P(better) at pass@10 across the two was "
        "less calibrated than between equals (expected calibration error 0.04 by EB over 20 replicates, against "
        "0.01-0.02 at equal m; by MCMC 0.19 as last measured, with the dispersions' prior before; "
        "benchmarks/RESULTS.md); their "
        "leaderboard band is the range one sample per task cannot narrow. A second sample per task of those "
        "configs identifies their spread", UserWarning, stacklevel=3)


def _pairs(pairs, configs):
    if pairs is None:
        return configs, configs
    try:
        pairs = [split_pair(p, configs, name="pairs") for p in ([pairs] if isinstance(pairs, str) else pairs)]
    except TypeError:
        raise ValueError(f"pairs must be a sequence of (config, config_b) pairs; got {pairs!r}") from None
    try:
        pairs = [(str(a), str(b)) for a, b in pairs]
    except (TypeError, ValueError):
        raise ValueError(f"pairs must be a sequence of (config, config_b) pairs; got {pairs!r}") from None
    for a, b in pairs:
        for x in (a, b):
            if x not in configs:
                raise ValueError(f"pairs=({a!r}, {b!r}) names config {x!r}, which is not among the configs {configs}")
        if a == b:
            raise ValueError(f"pairs must name two different configs; got ({a!r}, {b!r})")
    return list(dict.fromkeys(a for a, _ in pairs)), list(dict.fromkeys(b for _, b in pairs))


def _comparison_ks(cmp, k, *, what: str) -> np.ndarray:
    """Return the k's asked of a comparison (default: all of its k), each checked to be in it; ``cmp`` first."""
    if not isinstance(cmp, xr.Dataset) or not {"prob_better", "diff"} <= set(cmp.data_vars):
        hint = ("; these are counts: compare them first, bp.compare_configs(counts, k=...)"
                if isinstance(cmp, xr.Dataset) and {"n", "c"} <= set(cmp.data_vars)
                else "; a run: compare its configs first, bp.compare_configs(run, k=...)"
                if isinstance(cmp, xr.DataTree) else "")
        raise TypeError(f"{what} needs a comparison from bp.compare_configs(...); got {type(cmp).__name__}{hint}")
    have = [int(x) for x in cmp.k.values]
    ks = np.asarray(have) if k is None else as_k(k)
    for kk in ks:
        if int(kk) not in have:
            raise ValueError(f"k={int(kk)} is not in the comparison; it has k = {have}")
    return ks


def ranking_order(c: xr.Dataset) -> np.ndarray:
    """Return the indices of ``c``'s configs (one k of :func:`compare_configs`), best first: by posterior mean.

    Ties of the mean are broken by expected rank.  The mean, not the expected rank, orders the leaderboard,
    the pair table and the plots: on real MBPP (12 and 16 configs, 50 replicates) the expected rank ordered
    configs worse from one sample per task (Kendall tau against the full data 0.006-0.055 lower, pass@10 by
    0.040 and 0.055, paired s.e. 0.017 and 0.014) and within noise of the mean from two (-0.006 to +0.008;
    benchmarks/RESULTS.md, "Ordering by expected rank").
    """
    tie = c["expected_rank"].values if "expected_rank" in c else np.zeros(c.sizes["config"])
    return np.lexsort((tie, -c["passk"].values))


def leaderboard(cmp: xr.Dataset, k=None, *, rank_probs: bool | None = None) -> Table:
    """Leaderboard from :func:`compare_configs`: per k, configs by posterior mean pass@k (:func:`ranking_order`).

    Columns: ``k``, ``config``, ``passk``, ``lower``, ``upper`` (band), ``expected_rank``, ``rank_lo``,
    ``rank_hi`` (central ``ci_prob`` interval of the rank), ``p_best`` (P(rank 1)), ``naive`` (unbiased
    estimate; NaN where some task has n < k) and, with ``rank_probs`` (default: at most 6 configs),
    ``P(rank=r)`` for every rank r.
    """
    ks = _comparison_ks(cmp, k, what="leaderboard")
    if rank_probs is None:
        rank_probs = cmp.sizes.get("rank", 0) <= 6
    prob = float(cmp.attrs.get("ci_prob", rcParams["stats.ci_prob"]))
    rows = []
    for kk in ks:
        c = cmp.sel(k=kk)
        cdf = c["rank_prob"].transpose("config", "rank").cumsum("rank").values
        lo = 1 + (cdf < (1 - prob) / 2).sum(1)
        hi = 1 + (cdf < (1 + prob) / 2).sum(1)
        for j in ranking_order(c):
            cfg = c.config.values[j]
            rows.append({"k": int(kk), "config": str(cfg), "passk": float(c["passk"][j]),
                         "lower": float(c["passk_eti"][j, 0]), "upper": float(c["passk_eti"][j, 1]),
                         "expected_rank": float(c["expected_rank"][j]), "rank_lo": int(lo[j]),
                         "rank_hi": int(min(hi[j], c.sizes["rank"])), "p_best": float(c["rank_prob"][j, 0]),
                         "naive": float(c["naive_passk"][j]),
                         **({f"P(rank={int(r)})": float(c["rank_prob"][j, i]) for i, r in enumerate(c["rank"].values)}
                            if rank_probs else {})})
    df = pd.DataFrame(rows).sort_values("k", kind="stable").reset_index(drop=True)
    df.attrs["ci_prob"] = prob
    ci, model = f"{prob:.0%}", cmp.attrs.get("model") or "?"
    return Table.of(df, f"Which config is better: leaderboard (model {model}; {ci} bands, rank 1 = best)",
                    note=f"Configs by posterior mean pass@k (best first), with its {ci} band (lower, upper), the "
                    f"expected rank (1 = best), the central {ci} interval of the rank (rank_lo, rank_hi), P(best) and "
                    "the unbiased estimate (naive) where every task has n >= k." + _joint_model_note(cmp))


def _joint_model_note(cmp: xr.Dataset) -> str:
    """Say what the joint model assumed of slopes and siblings, and which band is joined beyond the samples."""
    out, w = "", cmp.attrs.get("slopes_weight")
    if w is not None:
        told = "one per config" if w >= 0.5 else "one for all configs"
        out = (f" Slope of success against task difficulty in the joint model: {told} (posterior probability of "
               f"per-config slopes {w:.2f}).")
    sd = cmp.attrs.get("sibling_sd")
    if sd is not None:
        out += (f" Configs of one model at several temperatures share an ability up to a spread learnt from the "
                f"counts (posterior median {sd:.2f} logits).")
    if partner := cmp.attrs.get("band_beyond_samples"):
        out += (f" Beyond the samples drawn (and past half of them, k >= 2) a band also holds the per-config "
                f"fit's ({partner}): how pass@k grows there (its variance, past half) is not in the counts, and "
                "the joint model's band alone under-covered it; the point there stays the joint model's, which "
                f"orders the configs ({partner}'s own mean: bp.passk_curve, bayespass curve).")
    return out


#: above this many configs, ``prob_better_table(pairs="auto")`` lists neighbours in the ranking only
ALL_PAIRS_MAX_CONFIGS = 4


def prob_better_table(cmp: xr.Dataset, k=None, *, pairs: str = "auto") -> Table:
    """P(pass@k of config > config_b) as a long table (k, config, config_b, prob_better, diff, band).

    ``pairs``: ``"all"`` lists every ordered pair; ``"neighbours"`` each config against the next one down
    the ranking by posterior mean (:func:`ranking_order`: is the r-th better than the (r + 1)-th?), per k;
    ``"auto"`` (default) lists every pair up to ``ALL_PAIRS_MAX_CONFIGS`` configs and neighbours above
    (34 configs have 1,122 ordered pairs per k; every pair stays in ``cmp`` and in :func:`plot_prob_better`).
    """
    if pairs not in ("all", "neighbours", "auto"):
        raise ValueError(f"pairs={pairs!r} is not supported; choose one of ['all', 'neighbours', 'auto']")
    ks = _comparison_ks(cmp, k, what="prob_better_table")
    square = list(cmp.config.values) == list(cmp.config_b.values) and "expected_rank" in cmp
    if pairs == "auto":
        pairs = "neighbours" if square and cmp.sizes["config"] > ALL_PAIRS_MAX_CONFIGS else "all"
    if pairs == "neighbours" and not square:
        raise ValueError("pairs='neighbours' needs a comparison of every config (compare_configs without pairs=)")
    sub = cmp.sel(k=ks)
    df = sub[["prob_better", "diff"]].to_dataframe()[["prob_better", "diff"]]
    band = sub["diff_eti"].to_dataframe().unstack("ci_bound")["diff_eti"][["lower", "upper"]]
    df = df.join(band.rename(columns={"lower": "diff_lower", "upper": "diff_upper"})).reset_index()
    df = df[df["config"] != df["config_b"]]
    cols = ["k", "config", "config_b", "prob_better", "diff", "diff_lower", "diff_upper"]
    ci = f"{float(cmp.attrs.get('ci_prob', rcParams['stats.ci_prob'])):.0%}"
    note = (f"Posterior probability that config beats config_b, and the difference of their pass@k "
            f"with its {ci} band (diff_lower, diff_upper), from the same posterior draws.")
    note += _single_sample_note(cmp, ks)
    if pairs == "all":
        df = df[cols].sort_values(["k", "config", "config_b"], kind="stable")
        return Table.of(df.reset_index(drop=True), "P(pass@k of config > config_b)", note=note)
    keep = []
    for kk in ks:
        order = [str(x) for x in sub.config.values[ranking_order(sub.sel(k=kk))]]
        keep += [(int(kk), a, b, r) for r, (a, b) in enumerate(zip(order[:-1], order[1:], strict=True), start=1)]
    nb = pd.DataFrame(keep, columns=["k", "config", "config_b", "rank"])
    df = nb.merge(df.astype({"k": int}), on=["k", "config", "config_b"], how="left")
    n = cmp.sizes["config"]
    return Table.of(df[["k", "rank", *cols[1:]]], "P(pass@k of config > the next config down the ranking)",
                    note=f"{note} Each config against the one ranked just below it (rank = config's place by "
                    f"posterior mean pass@k): {n - 1} of the {n * (n - 1)} ordered pairs per k; every pair is in the "
                    "comparison (bp.compare_configs, the P(better) matrix plot; 'bayespass compare --all-pairs').")


def _single_sample_note(cmp: xr.Dataset, ks) -> str:
    """Say what P(better) at k > 1 is worth where every config has one sample on most of its tasks (else "")."""
    every = cmp.sizes.get("rank", cmp.sizes["config"])  # all the configs compared (pairs= selects some of them)
    if cmp.attrs.get("single_sample_configs", 0) < every or not (np.asarray(ks) > 1).any():
        return ""
    out = (" Every config has one sample on most of its tasks: at k > 1 P(better) rests on the model's assumption "
           "about how p spreads over the tasks, which one sample cannot check.")
    if cmp.attrs.get("model") == "shared":  # measured with the joint model, compare_configs' default
        out += (" On real MBPP the joint model's erred towards 0.5 (at pass@10, pairs given about 0.84 were better "
                "in 90% and 98% of cases, on 12 and 16 configs; benchmarks/RESULTS.md, \"The ranking target again\").")
    return out + " A second sample per task identifies the spread."


def plot_forest(cmp: xr.Dataset, k=None, *, ax=None) -> np.ndarray:
    """Forest plot: pass@k of every config with its band, a panel per k, configs by the first k's ranking.

    Each k has its own panel and x axis (pass@1 and pass@100 differ by more than their bands are wide: on one
    axis the bands of 34 real configs were dots); the rows are the configs, best at the first k on top, the
    same in every panel, so a config's place at the other k reads across.

    Parameters
    ----------
    cmp : xarray.Dataset
        From :func:`compare_configs`.
    k : int or sequence of int, optional
        The k's to draw (default: all of the comparison's).
    ax : matplotlib Axes or sequence of Axes, optional
        One Axes per k (one Axes for one k); default: a new figure.

    Returns
    -------
    numpy.ndarray of matplotlib Axes
        One per k, as ArviZ's ``plot_forest`` returns them.
    """
    import matplotlib.pyplot as plt

    ks = _comparison_ks(cmp, k, what="plot_forest")
    order = ranking_order(cmp.sel(k=int(ks[0])))[::-1]  # the best at the first k on top
    names = [str(x) for x in cmp.config.values[order]]
    if ax is None:
        longest = max(map(len, names))
        _, ax = plt.subplots(1, len(ks), sharey=True, squeeze=False, layout="constrained",
                             figsize=(0.5 + 0.07 * longest + 2.4 * len(ks), 0.3 * len(names) + 1.3))
    axes = np.ravel(np.asarray(ax, dtype=object))
    if axes.size != len(ks):
        raise ValueError(f"ax must hold one Axes per k ({len(ks)}: k = {[int(x) for x in ks]}); got {axes.size}")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (kk, a) in enumerate(zip(ks, axes, strict=True)):
        c = cmp.sel(k=int(kk)).isel(config=order)
        lo, hi = c["passk_eti"].transpose("config", ...).values.T
        rows = np.arange(len(names))
        a.hlines(rows, lo, hi, color=colors[i % len(colors)], lw=2)
        a.plot(c["passk"].values, rows, "o", color=colors[i % len(colors)])
        if i == 0:
            a.set_yticks(rows, names)
        else:  # shared rows: the names once, at the left
            a.set_yticks(rows)
            a.tick_params(labelleft=False)
        a.set_ylim(-0.8, len(names) - 0.2)  # matplotlib's 5% margins left empty rows at each end of 34 configs
        a.set_title(f"pass@{int(kk)}")
        a.grid(axis="x", alpha=0.3)
    axes[0].figure.supxlabel(f"posterior mean and {cmp.attrs.get('ci_prob', 0.9):.0%} band; "
                             f"configs by pass@{int(ks[0])}, best on top", fontsize=9)
    return axes


def plot_prob_better(cmp: xr.Dataset, k=None, *, ax=None) -> Axes:
    """Heat map of P(pass@k[row] > pass@k[column]), configs by posterior mean pass@k (best first)."""
    import matplotlib.pyplot as plt

    ks = _comparison_ks(cmp, k, what="plot_prob_better")
    if ks.size != 1 and k is not None:
        raise ValueError(f"k must be one value for plot_prob_better (one matrix per k); got {k!r}")
    kk = int(ks[0])
    c = cmp.sel(k=kk)
    order = ranking_order(c)
    pb = c["prob_better"].transpose("config", "config_b").values
    names = [str(x) for x in c.config.values]
    if list(c.config.values) == list(c.config_b.values):
        pb = pb[np.ix_(order, order)]
        rows = cols = [names[i] for i in order]
    else:
        rows, cols = names, [str(x) for x in c.config_b.values]
    if ax is None:
        size, longest = 1.2 + 0.55 * max(len(rows), len(cols)), max(map(len, rows + cols))
        _, ax = plt.subplots(figsize=(size + 1.5 + 0.07 * longest, size + 0.05 * longest), layout="constrained")
    im = ax.imshow(pb, vmin=0, vmax=1, cmap="RdBu_r")
    for i in range(len(rows)):
        for j in range(len(cols)):
            if rows[i] != cols[j]:
                ax.text(j, i, f"{pb[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(pb[i, j] - 0.5) > 0.35 else "black")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows)
    ax.set_title(f"P(pass@{kk} of row > column)")
    ax.figure.colorbar(im, ax=ax, fraction=0.046)
    return ax


def plot_diff_curve(cmp: xr.Dataset, config: str, config_b: str, *, ax=None) -> Axes:
    """pass@k[config] - pass@k[config_b] over k with its band and the paired-SE baseline where defined."""
    import matplotlib.pyplot as plt

    _comparison_ks(cmp, None, what="plot_diff_curve")
    for x, dim in ((config, "config"), (config_b, "config_b")):
        if x not in cmp[dim].values:
            raise ValueError(f"{dim}={x!r} is not in the comparison; it has {list(map(str, cmp[dim].values))}")
    c = cmp.sel(config=config, config_b=config_b)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
    ks = c.k.values
    ax.fill_between(ks, c["diff_eti"].values[:, 0], c["diff_eti"].values[:, 1], alpha=0.3,
                    label=f"{cmp.attrs.get('ci_prob', 0.9):.0%} band")
    ax.plot(ks, c["diff"].values, "o-", label="posterior mean")
    ok = np.isfinite(c["paired_diff"].values)
    if ok.any():
        prob = float(cmp.attrs.get("ci_prob", 0.9))
        ax.errorbar(ks[ok], c["paired_diff"].values[ok], yerr=ndtri((1 + prob) / 2) * c["paired_se"].values[ok],
                    fmt="s", ms=4, color="grey", label=f"paired per-task difference, {prob:.0%} (clustered s.e.)")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("difference of pass@k")
    ax.set_title(f"pass@k of {config} minus {config_b}", fontsize=10)
    ax.legend(fontsize=8)
    return ax
