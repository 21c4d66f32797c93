"""``bayespass.fit``: counts -> ``az.InferenceData`` by a fast NumPy sampler or by PyMC's NUTS."""

from __future__ import annotations

import contextlib
import json
import threading
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from .._threads import thread_map
from .._version import __version__
from ..data.counts import validate_counts
from ..defaults import rcParams
from ..validate import check_choice, check_positive_int, check_prob, check_seed, first_of, is_run_with_fits, parse_list
from . import hmc
from .base import MODELS, NP, PairData, get_model
from .eb import FitWarning
from .predictive import _model, default_k_grid, pair_data, passk_draws, passk_mean_draws, replicate_counts
from .reweight import MAX_DIM, reweight
from .stack import model_from_posterior, theta_of

if TYPE_CHECKING:  # pragma: no cover
    import arviz as az

    from ..results import Table

__all__ = ["fit", "stack_fits", "convergence_report", "loglik_draws"]

METHODS = ("mcmc", "eb")
SAMPLERS = ("pymc", "nutpie", "numpyro", "blackjax", "hmc")
#: what each NUTS implementation beyond PyMC's own needs installed (PyMC imports them only when it samples)
SAMPLER_PACKAGES = {"nutpie": ("nutpie",), "numpyro": ("jax", "numpyro"), "blackjax": ("jax", "blackjax")}


def _check_sampler_installed(sampler: str) -> None:
    """Raise a clear ImportError, before any work, if the packages ``sampler`` needs are not installed."""
    import importlib.util

    missing = [p for p in SAMPLER_PACKAGES.get(sampler, ()) if importlib.util.find_spec(p) is None]
    if missing:
        raise ImportError(f"sampler={sampler!r} needs {' and '.join(missing)}, not installed here: pip install "
                          f"{' '.join(missing)}, or choose sampler='hmc' (bayespass's own, the default) or 'pymc'")


def fit(counts: xr.Dataset, model: str | None = None, method: str | None = None, *, draws: int | None = None,
        tune: int | None = None, chains: int | None = None, cores: int | None = None,
        seed: int | None = None, k=None, sampler: str | None = None, target_accept: float | None = None,
        progressbar: bool = True, candidates=None) -> az.InferenceData:
    """Fit a model of per-task success probability and return ``az.InferenceData``.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts dataset (``n``, ``c`` over ``config`` x ``task``).
    model : str, optional
        A registered model (``"bb"``, ``"zoibb"``, ``"flex"``, ``"hier"``) or
        ``"auto"`` (Bayesian stacking of ``candidates``; see
        :mod:`bayespass.models.stack`).  Default ``rcParams["stats.model"]``,
        the model that wins the calibration benchmark (benchmarks/RESULTS.md).
    method : {"eb", "mcmc"}, optional
        ``"eb"`` (default ``rcParams["stats.method"]``): empirical-Bayes start
        (the posterior mode) and the posterior under the model's priors by a
        vectorised HMC in NumPy (:mod:`bayespass.models.hmc`): fast, no PyMC.
        For models of at most 8 parameters the chains' draws are corrected by
        importance resampling (:mod:`bayespass.models.reweight`, k-hat and ESS
        gated; ``rcParams["eb.reweight"]``); chains kept as they are run again
        4x as long where they fail the R-hat gate on the named parameters or
        the dataset pass@k at k = 1, 10, 100.
        ``"mcmc"``: NUTS via PyMC on the same log density.  Both give the same
        layout, so every post-processor works on both.
    draws, tune, chains, cores : int, optional
        Sampler settings; defaults from ``rcParams["mcmc.*"]`` / ``rcParams["eb.*"]``.
        With ``method="eb"``, flex's chains (8-32 leapfrog steps each) take half of
        ``rcParams["eb.warmup"]`` where tasks have two samples or more; a ``tune`` given is used as
        given.  With ``method="eb"`` and ``model="auto"``, ``cores`` (default
        ``rcParams["eb.cores"]``, 2 where the machine has them) is the number of
        forked processes that sample the candidates (Linux; the draws are the
        same as in one process).
    seed : int, optional
        Random seed (default ``rcParams["stats.seed"]``).
    k : sequence of int, optional
        k grid of the ``passk`` group; default log-spaced 1..max(200, 4 max n).
    sampler : {"hmc", "pymc", "nutpie", "numpyro", "blackjax"}, optional
        Sampler of ``method="mcmc"``.  ``"hmc"`` (the default for every model but ``"hier"``):
        bayespass's NumPy HMC on the exact marginal posterior with analytic gradients, the same
        density as NUTS samples.  Per-config models: 8 vectorised chains of 500 draws after 500
        warm-up iterations, 8-32 leapfrog steps per iteration, gated like NUTS (R-hat <= 1.01,
        ESS >= 400), and configs that miss the gate run again 4x, then 16x as long (benchmarks/RESULTS.md:
        seconds where NUTS takes tens).  ``model="shared"``: whitened by the curvature at the
        mode, 4 chains of 500 draws after 200 warm-up iterations; chains that miss the gate go on half the
        draws at a time (to 4x the draws or 3,000, at most 8x), thinned by the whole multiple of ``draws``
        reached (750 draws are all kept, 1,000 thinned to 500).  The other names are NUTS implementations
        (``"pymc"``: PyMC's own, with ``chains``/``draws``/``tune`` from ``rcParams["mcmc.*"]``).
    target_accept : float, optional
        Target acceptance of the sampler.
    progressbar : bool
        Show progress on stderr: the sampler's bar (``method="mcmc"``), one bar over the candidates and the
        stack (``model="auto"``), and for ``method="eb"``, which has no sampler's bar, a clock; an eb fit
        shows its bar or clock only once it has taken ``EB_BAR_DELAY`` (2) seconds.
    candidates : sequence of str, optional
        Models stacked by ``model="auto"`` (default ``rcParams["stats.candidates"]``).

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior`` (``theta`` over config x param plus the model's
        named quantities), ``posterior_predictive`` (``c`` replicated),
        ``log_likelihood`` (``c`` per config x task, marginal over p_i),
        ``observed_data`` (``c``), ``constant_data`` (``n``),
        ``sample_stats`` and ``passk`` (dataset-level pass@k per draw on the
        k grid).  ``posterior.attrs`` records the model, method, seed,
        convergence diagnostics and, for ``"auto"``, the stacking weights.

    Examples
    --------
    >>> import bayespass as bp
    >>> counts = bp.read_counts("data/examples/counts_small.csv")  # doctest: +SKIP
    >>> idata = bp.fit(counts)                                      # doctest: +SKIP
    >>> bp.passk_curve(idata, k=[1, 10, 100])                        # doctest: +SKIP
    """
    counts = validate_counts(counts)
    model = rcParams["stats.model"] if model is None else model
    method = rcParams["stats.method"] if method is None else method
    m = None if model == "auto" else get_model(model)  # clear error for an unknown name, before any work
    check_choice(method, METHODS, name="method")
    if sampler is not None:
        check_choice(sampler, SAMPLERS, name="sampler")
        if method == "mcmc":
            _check_sampler_installed(sampler)
    if sampler == "hmc" and m is not None and not _has_hmc(m):
        nuts = [x for x in SAMPLERS if x != "hmc"]
        raise ValueError(f"sampler='hmc' needs a model whose task-level parameters are integrated out; got "
                         f"model={model!r}, whose task difficulties are latent (use one of {nuts}: "
                         "NUTS implementations, or model='shared')")
    sampler = sampler or ("hmc" if m is None or _has_hmc(m) else "pymc")
    seed = check_seed(rcParams["stats.seed"] if seed is None else seed)
    if target_accept is not None:
        target_accept = check_prob(target_accept, name="target_accept")
    _check_sampling(draws, tune, chains, cores)
    kw = dict(draws=draws, tune=tune, chains=chains, cores=cores, seed=seed, sampler=sampler,
              target_accept=target_accept, progressbar=progressbar)
    candidates = _check_candidates(candidates, model)
    _warn_unobserved(counts)
    if model == "auto":
        return _fit_auto(counts, method, candidates, k, kw)
    if m.joint and method == "eb" and not hasattr(m, "fit_eb"):
        raise ValueError(f"model={model!r} supports method='mcmc' only (its task difficulties are "
                         "latent); use method='mcmc', model='shared' (the same model with the difficulties "
                         "integrated out, which has method='eb'), or a per-config model")
    if not m.joint:
        _warn_single_sample(counts, model)
    # eb has no sampler's bar of its own: a clock once it takes a while (shared on 34 configs: 15 s)
    with _StageBar(None, f"model {model} by eb", kw["progressbar"] and method == "eb", delay=EB_BAR_DELAY) as bar:
        with bar.ticking():
            return _fit_model(counts, m, method, k, kw)


def _check_sampling(draws, tune, chains, cores) -> None:
    """Refuse sampler settings no fit can use, before any work (draws=0 failed after the candidates' fits)."""
    for name, value in (("draws", draws), ("tune", tune), ("cores", cores)):
        if value is not None:
            check_positive_int(value, name=name)
    if chains is not None and check_positive_int(chains, name="chains") < 2:
        # one chain has no R-hat: the gate failed every config (MCMC reran them 4x and 16x as long, in vain)
        raise ValueError(f"chains must be at least 2: the convergence gate compares chains (R-hat); got {chains}")


def _warn_unobserved(counts) -> None:
    """FitWarning for configs with no observed task: their posterior is the prior, their pass@k NaN."""
    empty = [str(c) for c in counts.config.values[(counts["n"] == 0).all("task").values]]
    if empty:
        from .eb import FitWarning

        drop = f"drop_sel(config={empty!r})" if len(empty) <= 5 else "sel(config=(counts.n > 0).any('task'))"
        warnings.warn(f"config(s) {first_of(empty)} have no observed task (every n is 0): their posterior is the "
                      f"prior and their pass@k is NaN; drop them with counts.{drop}", FitWarning, stacklevel=3)


def _warn_single_sample(counts, model: str) -> None:
    """FitWarning where a per-config model is fitted to configs with one sample on most tasks.

    There only pass@1 is identified: the model's pass@k beyond k = 1 is its prior's guess at the spread of p
    over the tasks.  The default (``model="auto"``) widens its band to the range the data cannot narrow.
    """
    single = _single_sample_configs(counts["n"])
    if single:
        from .eb import FitWarning

        warnings.warn(f"config(s) {single[:5]}{' ...' if len(single) > 5 else ''} have one sample on most of "
                      f"their tasks: only pass@1 is identified there, and the pass@k of model {model!r} beyond k = 1 "
                      "(mean and band) is set by its prior on the spread of p over the tasks. The default, "
                      "model='auto', widens the band to the range the data cannot narrow "
                      "(bayespass.stats.curve.identified_band).", FitWarning, stacklevel=3)


def _has_hmc(m) -> bool:
    """Return whether ``method="mcmc"`` can sample ``m`` by bayespass's HMC (per-config models, and ``shared``)."""
    return not m.joint or hasattr(m, "fit_hmc")


def _fit_model(counts, m, method, k, kw, *, extras: bool = True):
    """Sample one model and finish its InferenceData (``extras=False``: no replicates, no pass@k group)."""
    if kw["sampler"] == "hmc" and not _has_hmc(m):  # a stack's candidate without an HMC (hier): NUTS
        kw = kw | {"sampler": "pymc"}
    if method == "eb":
        idata = (_fit_joint_eb if m.joint else _fit_eb)(counts, m, **kw)
    elif kw["sampler"] == "hmc":
        idata = (_fit_joint_hmc if m.joint else _fit_hmc_mcmc)(counts, m, **kw)
    else:
        idata = _fit_mcmc(counts, m, **kw)
    return _finish(idata, counts, m, method, kw["seed"], k, extras=extras)


def _fit_eb(counts, m, *, draws, tune, chains, seed, target_accept, **_):
    draws = check_positive_int(draws if draws is not None else rcParams["eb.draws"], name="draws")
    warmup = check_positive_int(tune if tune is not None else rcParams["eb.warmup"], name="tune")
    chains = check_positive_int(chains if chains is not None else rcParams["eb.chains"], name="chains")
    kw = dict(chains=chains, rng=seed, target_accept=target_accept or 0.8)
    if rcParams["eb.reweight"] and m.n_params <= MAX_DIM:
        theta, stats = _sample_reweighted(counts, m, warmup, draws, kw)
    else:
        # chains kept as they are (flex): MCMC's 8-32 leapfrog steps at acceptance 0.9.  With the 4-16 steps at
        # 0.8 of the corrected path, flex diverged on most real MBPP fits (1-3 per fit, so bp.fit warned on
        # nearly every one) and reran 25-100% of the configs; with the longer steps none diverged, fewer reran,
        # and where every task has two samples or more half the warm-up iterations (the same leapfrog budget)
        # suffice, faster on 6 of 9 measured cells (real m = 5: 5 s instead of 11).  One sample per task keeps
        # the full warm-up (the posterior is the prior on a thin curved surface; with half, a divergence came
        # back).  benchmarks/RESULTS.md, "flex's trajectories at every m"
        single = int(counts["n"].max()) <= 1
        if single or m.n_params > MAX_DIM:  # not bb, zoibb or lnorm run with eb.reweight off: not measured
            kw |= {"steps": HMC_MCMC["steps"], "target_accept": target_accept or 0.9}
            if tune is None and not single:
                warmup = max(warmup // 2, 20)
        # one rerun: a second (16x) made flex's fast path on real MBPP at m = 2 half as slow again, where
        # every config reruns once and 2-4 of 12 would rerun twice
        theta, stats = _sample_gated(counts, m, warmup, draws, kw, rhat_max=rcParams["eb.rhat_max"],
                                     reruns=RERUNS[:1])
    return _hmc_idata(m, theta, stats, counts)


#: ``method="mcmc"`` by HMC on a per-config model: chains, draws, warm-up and leapfrog steps.  8 chains
#: of 500 after 500 with 8-32 steps pass R-hat <= 1.01 and ESS >= 400 for bb, zoibb, flex and lnorm
#: on 164 tasks in 3-5 s each; with 4 chains of 1000 and 4-16 steps lnorm's atom pi0 mixed too
#: slowly (ESS 280-430, R-hat up to 1.018; benchmarks/RESULTS.md)
HMC_MCMC = dict(chains=8, draws=500, tune=500, steps=(8, 32))


def _fit_hmc_mcmc(counts, m, *, draws, tune, chains, seed, target_accept, progressbar=False, **_):
    draws = check_positive_int(draws if draws is not None else HMC_MCMC["draws"], name="draws")
    warmup = check_positive_int(tune if tune is not None else HMC_MCMC["tune"], name="tune")
    chains = check_positive_int(chains if chains is not None else HMC_MCMC["chains"], name="chains")
    target_accept = rcParams["mcmc.target_accept"] if target_accept is None else float(target_accept)
    kw = dict(chains=chains, rng=seed, target_accept=target_accept, steps=HMC_MCMC["steps"],
              progress=f"{m.name} by HMC" if progressbar else None)
    theta, stats = _sample_gated(counts, m, warmup, draws, kw, rhat_max=rcParams["mcmc.rhat_max"])
    return _hmc_idata(m, theta, stats, counts)


def _hmc_idata(m, theta, stats, counts):
    """InferenceData of bayespass-HMC draws (chain, draw, config, P) with the sampler's per-config stats."""
    import arviz as az

    chains, draws = theta.shape[:2]
    idata = az.InferenceData(posterior=_posterior(m, theta, counts.config.values))
    idata.posterior.attrs.update({k: np.asarray(v).tolist() for k, v in stats.items()}, sampler="bayespass-hmc")
    diverging = np.zeros((chains, draws), bool)
    idata.add_groups({"sample_stats": xr.Dataset({"diverging": (("chain", "draw"), diverging)},
                                                 coords={"chain": np.arange(chains), "draw": np.arange(draws)})})
    return idata


def _logp(counts, m):
    """Return the model's log posterior on ``counts``: with its gradient, for importance weights, and its pairs.

    Both functions map theta (N, config, P) to (log posterior (N, config), gradient); the one for
    importance weights computes the density alone where that is cheaper (``m.cheap_logp``; gradient None),
    on the same prepared data.
    """
    data = PairData.from_counts(counts)
    parts = [(idx, sub, m.prepare(sub)) for idx, sub in _pair_buckets(data)]

    def by_bucket(th, f, grad: bool):  # the configs are independent: each bucket on its own pairs
        lp, g = np.empty(th.shape[:-1]), (np.empty(th.shape) if grad else None)
        for idx, sub, aux in parts:
            out = f(th[..., idx, :], aux, sub.w)
            lp[..., idx] = out[0] if grad else out
            if grad:
                g[..., idx, :] = out[1]
        return lp, g

    def logp_grad(th):
        return by_bucket(th, m.logp_grad, True)

    def weights_logp(th):
        return by_bucket(th, m.logp, False) if m.cheap_logp else logp_grad(th)

    return logp_grad, weights_logp, data


def _pair_buckets(data: PairData) -> list[tuple[np.ndarray, PairData]]:
    """Configs grouped by how many distinct (n, c) pairs they have, each group padded to its own longest.

    ``PairData`` pads every config to the longest one's pairs, and the fast path computes every padded
    pair: on the real MBPP counts (configs of 10 samples per task beside configs of 50: 11 or 51 pairs)
    half of the work was padding.  Groups are the configs whose number of pairs lies in one range
    ``(2^(i-1), 2^i]``, so a group is at most half padding; a config's values do not depend on its group.
    """
    per = np.maximum((data.w > 0).sum(1), 1)
    key = np.ceil(np.log2(per)).astype(int)
    if np.unique(key).size == 1:
        return [(np.arange(data.n_config), data)]
    out = []
    for b in np.unique(key):
        idx = np.flatnonzero(key == b)
        u = int(per[idx].max())  # a config's real pairs come first (PairData.from_table fills slots in order)
        out.append((idx, PairData(data.n[idx, :u], data.c[idx, :u], data.w[idx, :u])))
    return out


def _hmc(counts, m, warmup, draws, kw):
    """Run the fast sampler on ``counts``: (HMCResult, its log density for importance weights, the pairs)."""
    logp_grad, weights_logp, data = _logp(counts, m)
    res = hmc.sample(logp_grad, m.start(data), warmup=warmup, draws=draws, bounds=m.bounds(), **kw)
    return res, weights_logp, data


def _gated_named(post: xr.Dataset, m) -> xr.Dataset:
    """Select the named posterior variables the convergence gate checks (the model's ``gated``, else all)."""
    gated = getattr(m, "gated", None)
    return post[[v for v in post.data_vars if v != "theta" and (gated is None or v in gated)]]


#: the pass@k values every per-config fit is gated on (with its named parameters)
GATE_K = (1, 10, 100)


def _passk_gated(m, theta: np.ndarray, data: PairData) -> xr.Dataset:
    """Dataset pass@k (Rao-Blackwellised) at ``GATE_K`` per draw: the gate's check of what users read."""
    return xr.Dataset({"passk_mean": (("chain", "draw", "config", "k"), passk_mean_draws(m, theta, data, GATE_K))})


@contextlib.contextmanager
def _quiet_arviz():
    """Silence ArviZ's logged warnings (e.g. "Array contains NaN-value.") for the block."""
    import logging

    import arviz as az

    log = getattr(az, "_log", None) or logging.getLogger("arviz")  # ArviZ's own Logger, outside logging's tree
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _rhat_by_config(m, theta, configs, data: PairData) -> np.ndarray:
    """Largest split R-hat per config over what the gate checks (named parameters, dataset pass@k on ``data``)."""
    import arviz as az

    parts = [_gated_named(_posterior(m, theta, configs), m), _passk_gated(m, theta, data)]
    r = []
    with warnings.catch_warnings(), _quiet_arviz():  # a config with no observed task has NaN pass@k
        warnings.simplefilter("ignore")
        for ds in parts:
            if ds.data_vars:
                rhat = az.rhat(ds).to_array()
                r.append(rhat.max([d for d in ("variable", "k") if d in rhat.dims]).values)
    return np.nanmax(np.stack(r), 0) if r else np.ones(len(configs))


#: the reruns of configs whose chains fail the R-hat gate: (warm-up factor, draws factor), the draws thinned back.
#: The fast path (gate 1.05) stops after the first; MCMC (gate 1.01) takes both
RERUNS = ((2, 4), (4, 16))
#: the target acceptance of a rerun of configs whose chains diverged: smaller steps, the usual remedy, taken for
#: the user (flex on the real MBPP counts diverged once or twice in 2 of 6 seeds, and bp.fit warned)
DIVERGED_ACCEPT = 0.95


def _sample_gated(counts, m, warmup, draws, kw, *, rhat_max: float, reruns=RERUNS):
    """Sample by the chains alone; configs that fail the R-hat gate or diverged run again, 4x as long, thinned.

    With the default ``reruns`` (MCMC), configs that still fail run once more, 16x as long (on real
    near-deterministic configs lnorm's centre trades slowly against its atom at 1: R-hat 1.015-1.03 after
    the first rerun).  A config whose chains diverged reruns at a target acceptance of at least
    ``DIVERGED_ACCEPT`` (a smaller step size); the divergences reported are those of the draws kept.
    """
    res, _, data = _hmc(counts, m, warmup, draws, kw)
    theta = res.draws
    stats = {"step_size": res.step_size, "acceptance": res.acceptance, "divergences": res.divergences,
             "rerun": np.zeros(theta.shape[2], int)}
    bad, sub = np.arange(theta.shape[2]), counts  # the configs last sampled, and their counts (pairs: data)
    for stage, (f_warm, f_draws) in enumerate(reruns, 1):
        diverged = stats["divergences"][bad] > 0
        missed = ~(_rhat_by_config(m, theta[:, :, bad], sub.config.values, data) <= rhat_max) | diverged
        groups = [(bad[missed & ~diverged], kw["target_accept"]),
                  (bad[diverged], max(kw["target_accept"], DIVERGED_ACCEPT))]
        bad = bad[missed]
        if not bad.size:
            break
        for group, accept in groups:
            if group.size:
                _rerun(counts.isel(config=group), m, theta, stats, group, (f_warm * warmup, f_draws, draws),
                       kw | {"target_accept": accept}, stage)
        sub = counts.isel(config=bad)
        data = PairData.from_counts(sub)
    return theta, stats


def _rerun(sub, m, theta, stats, group, lengths, kw, stage) -> None:
    """Sample the configs ``group`` (counts ``sub``) again, ``f_draws`` times as long, thinned into ``theta``."""
    warmup, f_draws, draws = lengths
    if progress := kw.get("progress"):
        kw = kw | {"progress": f"{progress}, {group.size} config{'s' * (group.size > 1)} again {f_draws}x as long"}
    again, _, _ = _hmc(sub, m, warmup, f_draws * draws, kw)
    theta[:, :, group] = again.draws[:, f_draws - 1::f_draws]
    for key, value in (("step_size", again.step_size), ("acceptance", again.acceptance),
                       ("divergences", again.divergences), ("rerun", stage)):
        stats[key][group] = value


def _sample_reweighted(counts, m, warmup, draws, kw):
    """Sample by half-length chains, importance-resampled (:mod:`bayespass.models.reweight`).

    Configs the correction cannot take get full-length chains and twice the proposals, corrected again
    where it can, else kept and gated by R-hat.
    """
    seed = kw["rng"]
    rng = np.random.default_rng([0 if seed is None else int(seed), 1])
    n_cfg = counts.sizes["config"]
    todo = np.arange(n_cfg)
    theta = np.full((kw["chains"], draws, n_cfg, m.n_params), np.nan)
    stats = {key: np.zeros(n_cfg, dtype) for key, dtype in
             (("step_size", float), ("acceptance", float), ("divergences", int), ("reweight_khat", float),
              ("reweight_ess", float), ("reweight_used", int))}
    for length in (0.5, 1.0):
        sub = counts if todo.size == n_cfg else counts.isel(config=todo)
        res, weights_logp, data = _hmc(sub, m, max(int(warmup * length), 20), max(int(draws * length), 10), kw)
        fixed = _reweight_staged(sub, m, res.draws, weights_logp, data, rng, n_out=draws,
                                 n_prop=int(32_000 * length))
        theta[:, :, todo] = fixed.draws
        # the chains' divergences count only where their draws are kept
        for key, value in {"step_size": res.step_size, "acceptance": res.acceptance,
                           "divergences": np.where(fixed.used, 0, res.divergences), "reweight_khat": fixed.khat,
                           "reweight_ess": fixed.ess, "reweight_used": fixed.used}.items():
            stats[key][todo] = value
        todo = todo[~fixed.used]
        if not todo.size:
            break
    return theta, stats


def _reweight_staged(counts, m, draws, weights_logp, data, rng, *, n_out, n_prop):
    """Correct chains' draws with ``n_prop / 4`` proposals, and ``n_prop`` for the configs whose ESS then is short.

    The first stage is kept where its ESS reaches twice ``eb.ess_min`` (its k-hat gated as
    always); most configs get there (bb's ESS is half its proposals, lnorm's a sixth), and the
    rest, evaluated on their own, pay for the full number.
    """
    ess_min = rcParams["eb.ess_min"]
    first = reweight(weights_logp, draws, rng=rng, ess_min=2 * ess_min, per_draw=data.n.size * 100, n_out=n_out,
                     n_prop=n_prop // 4)
    again = np.flatnonzero(~first.used)
    if not again.size:
        return first
    _, sub_logp, sub_data = _logp(counts.isel(config=again), m)
    second = reweight(sub_logp, draws[:, :, again], rng=rng, ess_min=ess_min, per_draw=sub_data.n.size * 100,
                      n_out=n_out, n_prop=n_prop)
    first.draws[:, :, again] = second.draws
    first.khat[again], first.ess[again], first.used[again] = second.khat, second.ess, second.used
    return first


def _fit_joint_eb(counts, m, *, draws, chains, seed, **_):
    draws = check_positive_int(draws if draws is not None else 250, name="draws")  # independent Laplace draws
    chains = check_positive_int(chains if chains is not None else 4, name="chains")
    return _joint_idata(m.fit_eb(counts, draws=draws, chains=chains, seed=seed))


def _joint_idata(post: xr.Dataset):
    """Return the InferenceData of a joint model's posterior (its samplers record no divergence per draw)."""
    import arviz as az

    idata = az.InferenceData(posterior=post)
    shape = (post.sizes["chain"], post.sizes["draw"])
    idata.add_groups({"sample_stats": xr.Dataset({"diverging": (("chain", "draw"), np.zeros(shape, bool))},
                                                 coords={"chain": post.chain.values, "draw": post.draw.values})})
    return idata


def _fit_joint_hmc(counts, m, *, draws, tune, chains, seed, target_accept=None, progressbar=False, **_):
    # 500 draws after 200 warm-up iterations per chain, going on where they miss the gate.  The sampler starts
    # at the mode, whitened by the curvature there, so the warm-up only sets a step size, a diagonal mass and a
    # trajectory length: on 34 configs x 378 tasks at m = 50, 400 warm-up iterations (and rounds of 500 draws)
    # took 93-226 s over 4 seeds, 200 (and rounds of 250) 71-112 s; on 10 real replicates at m = 1, 0 and 3
    # of 10 passed at the first check, every fit at the end (benchmarks/RESULTS.md)
    draws = check_positive_int(draws if draws is not None else 500, name="draws")
    chains = check_positive_int(chains if chains is not None else rcParams["mcmc.chains"], name="chains")
    tune = check_positive_int(tune if tune is not None else 200, name="tune")
    progress = f"{m.name} by HMC" if progressbar else None

    def gate(post):  # R-hat and ESS only: running on does not answer divergences
        return not _gate_problems(convergence_report(_joint_idata(post), m) | {"divergences": 0}, "mcmc")

    # chains that miss the gate go on, half the draws at a time, to 4x the draws or 3,000 per chain (at most 8x),
    # thinned by the whole multiple of the draws reached: with one or two samples per task the dispersions and
    # the spread of difficulties trade off along a ridge, and the first run missed the gate in 27 of 50 real
    # replicates at m = 1 (r_hat 1.01-1.03, ESS 150-400; benchmarks/RESULTS.md).  Going on keeps the warm-up and
    # the draws already made, where a fresh run of 4x the draws cost 3.3x the first.  The step size's target
    # acceptance: 0.8 unless asked (the gate's warning suggests raising it)
    accept = 0.8 if target_accept is None else target_accept  # checked by fit
    return _joint_idata(m.fit_hmc(counts, draws=draws, warmup=tune, chains=chains, seed=seed, progress=progress,
                                  target_accept=accept, gate=gate if hasattr(m, "gated_quantities") else None,
                                  max_rounds=min(8, max(4, 3000 // draws))))


def _posterior(m, theta: np.ndarray, configs) -> xr.Dataset:
    """Posterior dataset of a per-config model from theta draws (chain, draw, config, P)."""
    dims = ("chain", "draw", "config")
    named = {k: (dims, v) for k, v in m.named(theta).items()}
    return xr.Dataset({"theta": (dims + ("param",), theta), **named},
                      coords={"chain": np.arange(theta.shape[0]), "draw": np.arange(theta.shape[1]),
                              "config": configs, "param": list(m.coords)})


def _fit_mcmc(counts, m, *, draws, tune, chains, cores, seed, sampler, target_accept, progressbar):
    import os

    import pymc as pm
    from threadpoolctl import threadpool_limits

    from .specs import build_model

    draws = check_positive_int(draws if draws is not None else rcParams["mcmc.draws"], name="draws")
    chains = check_positive_int(chains if chains is not None else rcParams["mcmc.chains"], name="chains")
    cores = check_positive_int(cores if cores is not None else rcParams["mcmc.cores"], name="cores")
    cores = min(cores, os.cpu_count() or 1, chains)
    tune = check_positive_int(tune if tune is not None else rcParams["mcmc.tune"], name="tune")
    target_accept = rcParams["mcmc.target_accept"] if target_accept is None else float(target_accept)
    initval = None
    if not m.joint:  # start NUTS at the posterior mode (the same one the fast path starts from)
        data = PairData.from_counts(counts)
        aux = m.prepare(data)
        initval = hmc.map_point(lambda th: m.logp_grad(th, aux, data.w), m.start(data), bounds=m.bounds())
    pm_model = build_model(counts, m, initval=initval) if not m.joint else m.build_pymc(counts)
    with pm_model, threadpool_limits(1), warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*fork.*", DeprecationWarning)
        warnings.filterwarnings("ignore", "The effect of Potentials", UserWarning)
        warnings.filterwarnings("ignore", "PyTensor could not link to a BLAS", UserWarning)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                          target_accept=target_accept, nuts_sampler=sampler, progressbar=progressbar,
                          compute_convergence_checks=False, idata_kwargs={"log_likelihood": m.joint})
    got = (idata.posterior.sizes["chain"], idata.posterior.sizes["draw"])
    if got != (chains, draws):  # PyMC catches Ctrl-C and returns the draws made so far, as if it had ended
        raise KeyboardInterrupt(f"sampling was interrupted: PyMC returned {got[0]} chains of {got[1]} draws, not "
                                f"{chains} of {draws}; the fit is not returned")
    # NUTS's mass-matrix eigenvalue stats are NaN unless a low-rank adaptation ran: drop them, or every
    # ArviZ summary of the fit warns "Array contains NaN-value"
    idata.posterior.attrs["sampler"] = f"{sampler}-nuts"
    stats = idata.sample_stats
    idata.sample_stats = stats.drop_vars([v for v in ("smallest_eigval", "largest_eigval")
                                          if v in stats and bool(np.isnan(stats[v]).all())])
    if not m.joint:
        theta = idata.posterior["theta"].values
        post = _posterior(m, theta, counts.config.values)
        post.attrs.update(idata.posterior.attrs)
        del idata["posterior"]
        idata.add_groups({"posterior": post})
    return idata


def loglik_draws(m, theta: np.ndarray, data: PairData) -> np.ndarray:
    """Log-likelihood per (chain, draw, config, pair) of per-config-model draws theta (chain, draw, config, P)."""
    from .stack import StackModel

    out = np.zeros(theta.shape[:3] + (data.n.shape[1],))
    for j in range(data.n_config):
        sub = PairData(data.n[j:j + 1], data.c[j:j + 1], data.w[j:j + 1])
        if isinstance(m, StackModel):
            comp = theta[:, :, j, 0].astype(int)
            for i, cm in enumerate(m.components):
                sel = comp == i
                if sel.any():
                    t = theta[:, :, j, 1:1 + cm.n_params][sel]
                    out[:, :, j][sel] = cm.loglik(t[:, None, None, :], cm.prepare(sub), NP)[:, 0]
        else:
            with np.errstate(all="ignore"):
                out[:, :, j] = m.loglik(theta[:, :, j][..., None, None, :], m.prepare(sub), NP)[..., 0, :]
    return out


#: above this many (draw x config x task) cells, log-likelihoods are stored per distinct (n, c) pair
LL_TASK_CELLS = 20_000_000


def _log_likelihood(idata, counts, m) -> xr.Dataset:
    post = idata.posterior
    n, c = counts.n.values, counts.c.values
    coords = {"chain": post.chain.values, "draw": post.draw.values, "config": counts.config.values}
    if m.joint:
        ll = m.loglik_tasks(post, n, c)
        return xr.Dataset({"c": (("chain", "draw", "config", "task"), np.where(n > 0, ll, 0.0))},
                          coords=coords | {"task": counts.task.values})
    data = PairData.from_counts(counts)
    per_pair = loglik_draws(m, theta_of(post).values, data)
    if post.sizes["chain"] * post.sizes["draw"] * n.size <= LL_TASK_CELLS:
        ll = _fan_out(per_pair, data, n)
        return xr.Dataset({"c": (("chain", "draw", "config", "task"), np.where(n > 0, ll, 0.0))},
                          coords=coords | {"task": counts.task.values})
    # large data: one term per distinct (n, c) pair, weighted by its number of tasks (exactly the same LOO)
    pairs = np.arange(data.n.shape[1])
    ds = xr.Dataset({"c": (("chain", "draw", "config", "pair"), np.where(data.w > 0, per_pair, 0.0)),
                     "pair_weight": (("config", "pair"), data.w), "pair_n": (("config", "pair"), data.n),
                     "pair_c": (("config", "pair"), data.c)}, coords=coords | {"pair": pairs})
    ds.attrs.update(layout="pair", note=(f"{n.size} tasks x {post.sizes['chain'] * post.sizes['draw']} draws: "
                                         "log-likelihood stored per distinct (n, c) pair; a task's term is its "
                                         "pair's (pair_weight tasks each), see bayespass.stats.loo"))
    return ds


def _fan_out(per_pair: np.ndarray, data: PairData, n: np.ndarray) -> np.ndarray:
    """(chain, draw, config, U) per padded pair -> (chain, draw, config, task)."""
    task_slot = data.task_slots()  # (config, task)
    cfg_idx = np.broadcast_to(np.arange(n.shape[0])[:, None], n.shape)
    out = per_pair[:, :, cfg_idx, np.maximum(task_slot, 0)]
    return np.where(task_slot >= 0, out, 0.0)


def _finish(idata, counts, m, method, seed, k, *, extras: bool = True):
    cfg_coords = {name: ("config", counts[name].values) for name in ("model", "temperature", "benchmark")}
    obs = xr.Dataset({"c": counts.c}).assign_coords(cfg_coords)
    const = xr.Dataset({"n": counts.n}).assign_coords(cfg_coords)
    idata.posterior.attrs.update(bayespass_model=m.name, bayespass_method=method, seed=seed,
                                 bayespass_version=__version__, model_description=m.description)
    if hasattr(m, "settings"):
        idata.posterior.attrs["model_settings"] = repr(m.settings)
    groups = {"observed_data": obs.drop_vars(list(cfg_coords)), "constant_data": const.drop_vars(list(cfg_coords))}
    for name, ds in groups.items():
        if name in idata.groups():
            del idata[name]
        idata.add_groups({name: ds})
    if "log_likelihood" in idata.groups():
        del idata["log_likelihood"]

    def loglik():
        return _log_likelihood(idata, counts, m)

    if not extras:  # a candidate of the stack: its posterior and log-likelihood are all the stack reads
        idata.add_groups({"log_likelihood": loglik()})
        _gate(idata, m, method)
        return idata
    k_grid = default_k_grid(int(counts.n.max())) if k is None else k

    def replicates():
        return replicate_counts(idata, seed=seed).to_dataset()

    def draws():  # a stack keeps more draws: its band is the hull of its candidates' bands, each from its share
        return passk_draws(idata, k_grid, max_draws=250 * len(getattr(m, "components", [0])), seed=seed)

    # side by side in threads, the longest first (none reads another's output; the draws are seeded each on its
    # own, so they are the same as one after the other)
    passk, log_lik, replicated = thread_map(lambda f: f(), [draws, loglik, replicates])
    idata.add_groups({"log_likelihood": log_lik})
    extra = {"posterior_predictive": replicated, "passk": passk}
    for name, ds in extra.items():
        if name in idata.groups():
            del idata[name]
        idata.add_groups({name: ds}, warn_on_custom_groups=False) if name == "passk" else idata.add_groups({name: ds})
    _gate(idata, m, method)
    return idata


def _per_config_models() -> list[str]:
    """Return the registered models that ``model="auto"`` and ``bp.stack`` can mix (not the joint ones)."""
    return [m for m in MODELS if not get_model(m).joint]


def _check_candidates(candidates, model) -> list[str] | None:
    """Return the models ``model="auto"`` stacks (None for another model), checked before any work.

    Two or more distinct per-config models: ``candidates``, else ``rcParams["stats.candidates"]``.
    """
    if candidates is not None and model != "auto":
        raise ValueError(f"candidates={candidates!r} are the models that model='auto' stacks; got model={model!r} "
                         "(leave candidates out, or fit with model='auto')")
    if model != "auto":
        return None
    given = rcParams["stats.candidates"] if candidates is None else candidates
    names = parse_list(given, name="candidates")  # "bb,zoibb" too, as the CLI's lists
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ValueError(f"candidates={names!r}: {unknown[0]!r} is not a model; model='auto' stacks per-config "
                         f"models ({', '.join(_per_config_models())})")
    joint = [n for n in names if get_model(n).joint]
    if joint:
        raise ValueError(f"candidates={names!r} holds the joint model {joint[0]!r}; model='auto' stacks per-config "
                         f"models ({', '.join(_per_config_models())})")
    if len(set(names)) < len(names) or len(names) < 2:
        raise ValueError(f"model='auto' stacks at least two distinct candidates; got candidates={names!r}")
    return names


def _fit_auto(counts, method, names: list[str], k, kw):
    models = [get_model(name) for name in names]  # checked by _check_candidates
    # the candidates skip their own replicates and pass@k draws: the stack computes its own
    parallel = method == "eb" or kw["sampler"] == "hmc"  # NumPy samplers: one process per candidate
    forked = parallel and _can_fork(kw, models)
    # one bar over the candidates and the stack where no candidate shows its own (forked workers, or the fast
    # path's chains in this process); a fast fit shows none (the bar appears after a few seconds)
    with _StageBar(len(models) + 1, f"model auto by {method}", kw["progressbar"] and (forked or method == "eb"),
                   delay=EB_BAR_DELAY if method == "eb" else 0.0) as bar:
        # sampled and finished (log-likelihood, convergence gate) in the worker processes, where allowed
        done = _sample_candidates(counts, models, method, kw, k, bar=bar) if forked else {}
        with bar.ticking():  # a clock thread only once the workers are gone (never beside a fork)
            for m in models:
                if m.name not in done:
                    done[m.name] = _fit_model(counts, m, method, k, kw, extras=False)
                    bar.step(m.name)
            bar.stage("stacking")
            out = stack_fits({m.name: done[m.name] for m in models}, counts, seed=kw["seed"], k=k)
            bar.step("stack")
    return out


#: seconds before the default's fast-path fit shows its bar (164 tasks take about 1 s; 34 configs x 378 tasks 35 s)
EB_BAR_DELAY = 2.0


class _StageBar:
    """A progress bar (stderr) over a fit's stages, its postfix naming those done; silent where not ``show``.

    Nothing shows before ``delay`` seconds; after that, :meth:`tick` redraws it (the elapsed time runs on while
    a stage takes long).
    """

    def __init__(self, total: int | None, desc: str, show: bool, *, delay: float = 0.0):
        self.bar, self.done, self.delay, self.tty = None, [], delay, False
        if show:
            import sys

            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="stage", file=sys.stderr, delay=delay,
                            bar_format=("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
                                        if total else "{desc}: {elapsed}"))  # no rate: stages differ 40-fold
            self.tty = bool(getattr(sys.stderr, "isatty", lambda: False)())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()

    @contextlib.contextmanager
    def ticking(self, every: float = 1.0):
        """Tick once every ``every`` seconds in a thread while the block runs (one long stage)."""
        if self.bar is None or not self.tty:
            yield
            return
        stop = threading.Event()

        def run():
            while not stop.wait(every):
                self.tick()

        ticker = threading.Thread(target=run, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()

    def tick(self) -> None:
        """Redraw the bar once it is due (after ``delay``), on a terminal (a log gets a line per stage only)."""
        if self.bar is not None and self.tty and self.bar.format_dict["elapsed"] >= self.delay:
            self.bar.refresh()
            # tqdm's close ends the line of a bar it printed after its delay, which it reads off last_print_t (set
            # by update only; update(0) would print only while tqdm's own rate throttle allows)
            self.bar.last_print_t = self.bar._time()

    def stage(self, what: str) -> None:
        """Say what runs now."""
        if self.bar is not None:
            self.bar.set_postfix_str(("done: " + ", ".join(self.done) + "; " if self.done else "") + what,
                                     refresh=False)
            self.tick()

    def step(self, name: str) -> None:
        """Count ``name`` as done."""
        self.done.append(name)
        if self.bar is not None:
            self.bar.set_postfix_str("done: " + ", ".join(self.done), refresh=False)
            self.bar.update(1)


#: relative cost of a candidate's fast-path sampling (measured, benchmarks/bench_default.py): the costliest
#: start first, so that the processes finish together
_COST = {"lnorm": 4, "flex": 3, "zoibb": 2, "bb": 1}


def _cores(kw) -> int:
    """Return the processes for the candidates: ``cores`` as given to :func:`fit`, else ``rcParams["eb.cores"]``."""
    return check_positive_int(kw["cores"] if kw["cores"] is not None else rcParams["eb.cores"], name="cores")


def _can_fork(kw, models) -> bool:
    """Whether per-config candidates are sampled in forked processes (:func:`_sample_candidates`)."""
    import multiprocessing as mp
    import sys

    cores = _cores(kw)
    # a daemonic process (a multiprocessing pool's or Dask's worker) may not start children
    return (cores >= 2 and sum(not m.joint for m in models) >= 2 and sys.platform.startswith("linux")
            and not mp.current_process().daemon)


def _sample_candidates(counts, models, method, kw, k=None, *, bar: _StageBar | None = None) -> dict:
    """Sample and finish per-config candidates by bayespass's HMC (``method``'s settings) in ``cores`` forked processes.

    Returns ``{name: InferenceData}`` (finished as a candidate of the stack: posterior,
    log-likelihood, convergence gate; the costliest candidate, which ends last, is finished in
    this process and the others in the workers) for the candidates fitted here, which is none where only
    one process is allowed, the platform cannot fork, this process may not have children (a
    daemon), or fewer than two candidates are per-config models (:func:`_can_fork`).  Each candidate's
    draws are the same as in one process (its seed is its own), and the warnings of its fit are raised
    here, in the caller's process, once each.  ``bar`` counts the candidates as they end.
    """
    from concurrent.futures import FIRST_COMPLETED, wait

    if not _can_fork(kw, models):
        return {}
    cores = _cores(kw)
    todo = sorted((m for m in models if not m.joint), key=lambda m: -_COST.get(m.name, 0))
    for m in models:  # compiled loops loaded once here, not in each worker (and again here for the stack)
        m.warm()
    bar = bar or _StageBar(0, "", False)
    with warnings.catch_warnings():  # Python >= 3.12 warns on fork in a threaded process (as PyMC's cores=2)
        warnings.filterwarnings("ignore", ".*fork.*", DeprecationWarning)
        with _worker_pool(min(cores, len(todo))) as pool:
            # the workers' bars would overwrite each other: one bar here, over the candidates sampled
            # the costliest candidate ends last: it is finished here, the others in the workers' idle time
            futures = {m.name: pool.submit(_sample_by_name, counts, m.name, method, kw | {"progressbar": False}, k,
                                           finish=i > 0) for i, m in enumerate(todo)}
            names, pending = {f: name for name, f in futures.items()}, set(futures.values())
            bar.stage("sampling " + ", ".join(futures))
            while pending:  # a second at a time: the bar's clock runs on while the costliest candidate samples
                ended, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for f in ended:
                    bar.step(names[f])
                bar.tick()
            out = {}
            for m in todo:
                idata, caught = futures[m.name].result()
                for message, category, filename, lineno in caught:
                    if issubclass(category, _QUIET):  # a library's: where it was raised, as the filters expect
                        warnings.warn_explicit(message, category, filename, lineno)
                    else:  # the fit's own (a convergence gate): at the caller's line, as in one process
                        warnings.warn(message, category, stacklevel=4)
                out[m.name] = idata if m is not todo[0] else _finish(idata, counts, m, method, kw["seed"], k,
                                                                     extras=False)
            return out


@contextlib.contextmanager
def _worker_pool(workers: int):
    """Yield a pool of ``workers`` forked processes that ends with its caller, also when interrupted.

    Left normally, the pool is shut down as usual.  Left by an exception (Ctrl-C's KeyboardInterrupt, an error),
    the candidates not started are cancelled and the workers terminated: their sampling is lost work, and waiting
    for it made Ctrl-C take as long as the whole fit (``kill -INT`` of this process alone: for ever, the workers
    idle and never told to end).  The workers ignore SIGINT (a terminal's Ctrl-C reaches them too; this process
    ends them) and end when this process dies (``kill``, SIGKILL: Linux's parent-death signal).
    """
    import multiprocessing as mp
    import os
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_end_with_parent,
                               initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            p.terminate()
        for p in processes:
            p.join(timeout=10)
        raise
    pool.shutdown()


def _end_with_parent(parent: int) -> None:
    """Initialise a forked worker: ignore SIGINT, and end when ``parent`` dies (``PR_SET_PDEATHSIG``, Linux)."""
    import ctypes
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


#: warnings hidden by default outside ``__main__``: raised from a worker at their own module, not the caller's line
_QUIET = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _sample_by_name(counts, name: str, method: str, kw, k, *, finish: bool) -> tuple[az.InferenceData, list]:
    """Sample one registered per-config candidate by bayespass's HMC, and ``finish`` it (run in a worker process).

    Returns the fit and its warnings as ``(message, category, filename, lineno)``, each once, for the
    caller to raise.
    """
    m = get_model(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = (_fit_eb if method == "eb" else _fit_hmc_mcmc)(counts, m, **kw)
        if finish:
            idata = _finish(idata, counts, m, method, kw["seed"], k, extras=False)
    unique = list(dict.fromkeys((str(w.message), w.category, w.filename, w.lineno) for w in caught))
    return idata, unique


def stack_fits(fits: dict, counts: xr.Dataset | None = None, *, seed: int | None = None,
               k=None) -> az.InferenceData:
    """Stack fits of the same counts (``bp.stack``): one InferenceData whose posterior mixes theirs.

    Per config, the weights maximise the PSIS-LOO predictive density of the
    mixture (Bayesian stacking, ``arviz.compare(method="stacking")``); they are
    recorded in ``posterior.attrs["stacking_weights"]`` and as the variable
    ``stacking_weight`` (config x model) of the group ``stacking``.
    """
    from ..data.counts import counts_of_fit
    from .stack import stack

    if not isinstance(fits, Mapping) or is_run_with_fits(fits):
        run = " (a run: its fits are bp.pipeline.fits_of(run))" if is_run_with_fits(fits) else ""
        raise TypeError(f"fits must be a dict of model name -> fit, e.g. {{'bb': bp.fit(counts, 'bb'), "
                        f"'lnorm': bp.fit(counts, 'lnorm')}}; got {type(fits).__name__}{run}")
    names = list(fits)
    if len(names) < 2:
        raise ValueError(f"stacking needs at least two fits; got {len(names)} ({names!r})")
    from ..data.counts import check_same_counts

    for name, f in fits.items():  # each a fit of one per-config model, made by bp.fit
        made = getattr(getattr(f, "posterior", None), "attrs", {}).get("bayespass_model")
        if made is None:
            raise ValueError(f"fits[{name!r}] was not produced by bayespass.fit; stack fits of one model each")
        if made == "auto":
            raise ValueError(f"fits[{name!r}] is itself a stack (model='auto'); stack the candidates' own fits, or "
                             "choose them with bp.fit(counts, candidates=[...])")
        if get_model(made).joint:
            raise ValueError(f"fits[{name!r}] is a fit of the joint model {made!r}; stacking mixes per-config models "
                             f"({', '.join(_per_config_models())})")
    check_same_counts(fits, what="stacking")
    first = fits[names[0]]
    if counts is None:
        counts = counts_of_fit(first)
    methods = {f.posterior.attrs.get("bayespass_method") for f in fits.values()}
    seed = check_seed(rcParams["stats.seed"] if seed is None else seed)
    idata, weights = stack(fits, seed=seed)
    m = model_from_posterior(idata.posterior)
    out = _finish(idata, counts, m, "+".join(sorted(methods)), seed, k)
    # JSON text: netCDF attributes cannot hold a dict (the variable ``stacking_weight`` has the numbers)
    out.posterior.attrs["stacking_weights"] = json.dumps(
        {str(c): dict(zip(names, map(float, w), strict=True))
         for c, w in zip(weights.config.values, weights.values, strict=True)})
    out.posterior.attrs["sampler"] = "+".join(sorted({str(f.posterior.attrs.get("sampler")) for f in fits.values()}))
    out.posterior.attrs["convergence"] = "; ".join(f"{n}: {fits[n].posterior.attrs.get('convergence')}"
                                                   for n in names)
    return out


def stacking_weights_of(idata) -> dict | None:
    """``{config: {model: weight}}`` of a stacked fit (``model="auto"``), or None for a single model."""
    # fits saved before the weights had their own group kept them in the posterior
    src = idata["stacking"] if "stacking" in idata.groups() else idata.posterior
    if "stacking_weight" not in src:
        return None
    w = src["stacking_weight"].transpose("config", "model")
    return {str(c): {str(m): float(x) for m, x in zip(w.model.values, row, strict=True)}
            for c, row in zip(w.config.values, w.values, strict=True)}


def stacking_table(idata) -> Table | None:
    """Return the stacking weights of a stacked fit as a :class:`~bayespass.Table` (config x model), or None."""
    import pandas as pd

    from ..results import Table

    weights = stacking_weights_of(idata)
    if not weights:
        return None
    df = pd.DataFrame([{"config": cfg, **ws} for cfg, ws in weights.items()])
    note = ("The fit stacks the candidate models by their PSIS-LOO predictive density (Bayesian stacking); its "
            "posterior is the mixture of theirs in these proportions, per config.")
    single = json.loads(idata.posterior.attrs.get("stack_single_configs", "[]"))
    if single:
        note += (f" {len(single)} config(s) have one sample per task ({', '.join(single[:3])}"
                 f"{', ...' if len(single) > 3 else ''}): LOO cannot weigh the candidates there, so their weights "
                 "are rcParams['stats.stack_single_weights'] (pass@k's mean beyond k = 1 follows the candidates' "
                 "priors; its band spans every spread of p, from all-or-nothing tasks to equally hard ones).")
    mostly = _mostly_single_sample(idata, exclude=single)
    if mostly:
        note += (f" {len(mostly)} config(s) have one sample on most of their tasks ({', '.join(mostly[:3])}"
                 f"{', ...' if len(mostly) > 3 else ''}): their band, too, spans every spread of p.")
    return Table.of(df, "Stacking weights of the candidate models (model auto)", note=note)


def _mostly_single_sample(idata, exclude=()) -> list[str]:
    """Configs (not in ``exclude``) whose band is joined with the identified set though some tasks have n >= 2."""
    return [c for c in _single_sample_configs(idata.constant_data["n"]) if c not in exclude]


def _single_sample_configs(n: xr.DataArray) -> list[str]:
    """Configs of ``n`` (config x task) with one sample on more than ``SINGLE_SAMPLE_SHARE`` of their tasks."""
    from ..data.counts import single_sample_share
    from ..stats.curve import SINGLE_SAMPLE_SHARE

    n = n.transpose("config", "task")
    return [str(c) for c in n.config.values[single_sample_share(n.values) > SINGLE_SAMPLE_SHARE]]


def convergence_report(idata, model=None) -> dict:
    """Return r_hat max, ESS-bulk min and divergence count over the free parameters."""
    import arviz as az

    m = get_model(model) if model is not None else _model(idata)  # the model it was made with (settings, candidates)
    if hasattr(m, "gated_quantities"):  # a joint model whose parameters are identified only jointly
        target = m.gated_quantities(idata.posterior)
    elif m.joint:
        target = idata.posterior[[v for v in m.free if v in idata.posterior]]
    else:
        # the identified quantities: the model's named parameters and the dataset pass@k at k = 1, 10, 100
        # (coordinates of theta that the data do not inform, e.g. far spline coefficients, mix slowly
        # without changing any estimate)
        target = _gated_named(idata.posterior, m)
    parts = [target]
    if not m.joint and "passk" in idata.groups() and np.isin(GATE_K, idata.passk.k).all():
        # its own dataset: the pass@k draws are thinned, so aligning them with the posterior's draws
        # would fill NaN (and a NaN r_hat would silently pass the gate)
        parts.append(idata.passk[["passk_mean"]].sel(k=list(GATE_K)))
    elif not m.joint:
        # a candidate of the stack computes no pass@k draws, and a fit asked for other k (fit(k=[50]))
        # stores none at the gate's k: gate it on the same dataset pass@k, from its draws (its named
        # parameters alone missed the direction in which a learnt shape mixes slowest)
        parts.append(_passk_gated(m, idata.posterior["theta"].values, pair_data(idata)))
    if not m.joint and "constant_data" in idata.groups():  # configs with no observed task: pass@k is NaN
        seen = (idata.constant_data["n"] > 0).any("task")
        parts = [ds.sel(config=seen.values) if "config" in ds.dims else ds for ds in parts]
    r_hat, ess_min = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ds in parts:
            if not ds.data_vars or 0 in ds.sizes.values():
                continue
            rhat, ess = az.rhat(ds), az.ess(ds, method="bulk")
            fixed = _constant(ds)  # the same finite value in every draw: nothing to mix (ArviZ says NaN)
            r_hat += [float(rhat[v].where(~fixed[v], 1.0).max()) for v in ds.data_vars]
            draws = ds.sizes["chain"] * ds.sizes["draw"]
            ess_min += [float(ess[v].where(~fixed[v], draws).min()) for v in ds.data_vars]
    used = np.asarray(idata.posterior.attrs.get("reweight_used", []), bool)
    if used.any():  # resampled draws: their information is the importance weights' ESS, not the draws' count
        ess_min.append(float(np.min(np.asarray(idata.posterior.attrs["reweight_ess"])[used])))
    return {
        "r_hat_max": float(np.max(r_hat)),  # NaN propagates: an undefined r_hat fails the gate
        "ess_bulk_min": float(np.min(ess_min)),
        "divergences": int(idata.sample_stats["diverging"].sum()) + int(np.sum(
            idata.posterior.attrs.get("divergences", 0))),
    }


def _constant(ds: xr.Dataset) -> xr.Dataset:
    """Return, per element of ``ds``'s variables, whether every draw of every chain holds one finite value.

    Such an element (the one config's ability relative to the mean in a joint fit of one config, a pass@k
    of 1 where every task always passed) has converged by construction, but ArviZ's R-hat and ESS of it
    are NaN, which the gate reads as a failure.  A NaN or infinite draw is not constant: it still fails.
    """
    dims = ["chain", "draw"]
    return xr.Dataset({v: np.isfinite(ds[v]).all(dims) & (ds[v].max(dims) == ds[v].min(dims))
                       for v in ds.data_vars})


def _gate_problems(rep: dict, method: str) -> list[str]:
    """Return what a convergence report (:func:`convergence_report`) misses of ``method``'s gates."""
    ess_min = rcParams["mcmc.ess_min"] if method == "mcmc" else rcParams["eb.ess_min"]
    rhat_max = rcParams["mcmc.rhat_max"] if method == "mcmc" else rcParams["eb.rhat_max"]
    problems = []
    if not rep["r_hat_max"] <= rhat_max:
        problems.append(f"r_hat {rep['r_hat_max']:.3f} > {rhat_max}")
    if not rep["ess_bulk_min"] >= ess_min:
        problems.append(f"ESS bulk {rep['ess_bulk_min']:.0f} < {ess_min:.0f}")
    if rep["divergences"] > 0:
        problems.append(f"{rep['divergences']} divergences")
    return problems


def _gate(idata, m, method):
    from .stack import StackModel

    if isinstance(m, StackModel):
        return
    rep = convergence_report(idata, m)
    problems = _gate_problems(rep, method)
    idata.posterior.attrs.update({f"convergence_{k}": v for k, v in rep.items()})
    idata.posterior.attrs["convergence"] = "ok" if not problems else "; ".join(problems)
    if problems:
        warnings.warn(f"convergence gates failed for model {m.name!r} ({method}): {'; '.join(problems)}. "
                      "Increase draws/tune or target_accept; results are recorded but may be "
                      "unreliable.", FitWarning, stacklevel=4)
