"""``bayespass.fit``: counts -> ``az.InferenceData`` by MCMC (PyMC) or empirical Bayes."""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from .._version import __version__
from ..data.counts import validate_counts
from ..defaults import rcParams
from ..stats import kernels
from ..stats.pairs import pair_table
from ..testing import rng as _rng
from ..validate import check_choice, check_positive_int
from .eb import FitWarning
from .laplace import laplace_draws
from .predictive import default_k_grid, passk_draws, replicate_counts
from .specs import MODELS, build_model

__all__ = ["fit", "convergence_report"]

METHODS = ("mcmc", "eb")
SAMPLERS = ("pymc", "nutpie", "numpyro", "blackjax")
_FREE = {"bb": ["mu", "log_kappa"], "zoibb": ["mu", "log_kappa", "w"],
         "hier": ["alpha", "sigma_d", "z", "log_phi"]}


def fit(counts: xr.Dataset, model: str = "bb", method: str = "mcmc", *, draws: int | None = None,
        tune: int | None = None, chains: int | None = None, cores: int | None = None,
        seed: int | None = None, k=None, sampler: str = "pymc", target_accept: float | None = None,
        progressbar: bool = True):
    """Fit a model of per-task success probability and return ``az.InferenceData``.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts dataset (``n``, ``c`` over ``config`` x ``task``).
    model : {"bb", "zoibb", "hier"}
        See :mod:`bayespass.models.specs` for the formulas.
    method : {"mcmc", "eb"}
        ``"mcmc"``: NUTS via PyMC.  ``"eb"``: evidence maximisation, then an
        importance-corrected (PSIS) Laplace approximation of the
        hyperparameter posterior under the same hyperpriors
        (:mod:`bayespass.models.laplace`; bb/zoibb only), in the
        same layout, so every post-processor works on both.
    draws, tune, chains, cores : int, optional
        Sampler settings; defaults from ``rcParams["mcmc.*"]`` (cores capped
        at the machine's CPUs).
    seed : int, optional
        Random seed (default ``rcParams["stats.seed"]``).
    k : sequence of int, optional
        k grid of the ``passk`` group; default log-spaced 1..max(200, 4 max n).
    sampler : {"pymc", "nutpie", "numpyro", "blackjax"}
        NUTS implementation (PyMC's default is the measured default here).
    target_accept : float, optional
        NUTS target acceptance.
    progressbar : bool
        Show the sampler's progress bar.

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior``, ``posterior_predictive`` (``c`` replicated),
        ``log_likelihood`` (``c`` per config x task, marginal over p_i),
        ``observed_data`` (``c``), ``constant_data`` (``n``),
        ``sample_stats`` and ``passk`` (dataset-level pass@k per draw on the
        k grid; for ``hier``, whose predictive is per config x task, on 250
        evenly spaced draws per chain).  ``posterior.attrs`` records the model, method, seed and
        convergence diagnostics.

    Examples
    --------
    >>> import bayespass as bp
    >>> counts = bp.read_counts("data/examples/counts_small.csv")  # doctest: +SKIP
    >>> idata = bp.fit(counts, model="zoibb", method="eb")           # doctest: +SKIP
    >>> bp.passk_curve(idata, k=[1, 10, 100])                         # doctest: +SKIP
    """
    counts = validate_counts(counts)
    check_choice(model, MODELS, name="model")
    check_choice(method, METHODS, name="method")
    check_choice(sampler, SAMPLERS, name="sampler")
    seed = rcParams["stats.seed"] if seed is None else int(seed)
    draws = check_positive_int(draws if draws is not None else rcParams["mcmc.draws"], name="draws")
    if method == "eb":
        if model == "hier":
            raise ValueError("model='hier' supports method='mcmc' only (its task difficulties are "
                             "latent); use method='mcmc', or model 'bb'/'zoibb' with method='eb'")
        idata = _fit_eb(counts, model, draws=draws, seed=seed)
    else:
        idata = _fit_mcmc(counts, model, draws=draws, tune=tune, chains=chains, cores=cores,
                          seed=seed, sampler=sampler, target_accept=target_accept,
                          progressbar=progressbar)
    return _finish(idata, counts, model, method, seed, k)


def _fit_mcmc(counts, model, *, draws, tune, chains, cores, seed, sampler, target_accept, progressbar):
    import os

    import pymc as pm
    from threadpoolctl import threadpool_limits

    chains = check_positive_int(chains if chains is not None else rcParams["mcmc.chains"], name="chains")
    cores = check_positive_int(cores if cores is not None else rcParams["mcmc.cores"], name="cores")
    cores = min(cores, os.cpu_count() or 1, chains)
    tune = check_positive_int(tune if tune is not None else rcParams["mcmc.tune"], name="tune")
    target_accept = rcParams["mcmc.target_accept"] if target_accept is None else float(target_accept)
    with build_model(counts, model), threadpool_limits(1), warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*fork.*", DeprecationWarning)
        warnings.filterwarnings("ignore", "The effect of Potentials", UserWarning)
        # These models use no BLAS operations; pip-installed pytensor warns on every cold start.
        warnings.filterwarnings("ignore", "PyTensor could not link to a BLAS", UserWarning)
        return pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                         target_accept=target_accept, nuts_sampler=sampler, progressbar=progressbar,
                         compute_convergence_checks=False,
                         idata_kwargs={"log_likelihood": model != "zoibb"})


def _fit_eb(counts, model, *, draws, seed):
    import arviz as az

    g = _rng(seed)
    table = pair_table(counts.n.values, counts.c.values)
    names = ("mu", "kappa", "a", "b", "pi0", "pi1")
    post = {k: np.full((1, draws, table.n_config), np.nan) for k in names}
    notes, accept, logml = [], [], []
    for j in range(table.n_config):
        sel = (table.cfg == j) & table.observed
        if not sel.any():
            notes.append(np.nan)
            accept.append(np.nan)
            logml.append(np.nan)
            continue
        n, c, w = table.n[sel].astype(float), table.c[sel].astype(float), table.weight[sel]
        vals, diag, lm = laplace_draws(n, c, w, model, draws=draws, rng=g)
        for key in names:
            post[key][0, :, j] = vals[key]
        notes.append(diag["khat"])
        accept.append(diag["acceptance"])
        logml.append(lm + float(np.sum(w * kernels.log_binom(n, c))))
    coords = {"chain": [0], "draw": np.arange(draws), "config": counts.config.values}
    posterior = xr.Dataset({k: (("chain", "draw", "config"), v) for k, v in post.items()}, coords=coords)
    if model == "bb":
        posterior = posterior.drop_vars(["pi0", "pi1"])
    idata = az.InferenceData(posterior=posterior)
    idata.posterior.attrs["importance_khat"] = notes
    idata.posterior.attrs["rejuvenation_acceptance"] = accept
    idata.posterior.attrs["log_marginal"] = logml
    bad = [str(cfg) for cfg, kh in zip(counts.config.values, notes, strict=True) if kh > 1.0]
    if bad:
        warnings.warn(f"EB Laplace/importance approximation failed (Pareto k-hat > 1) for "
                      f"{bad[:5]}; use method='mcmc' for these configs.", FitWarning, stacklevel=3)
    return idata


def _log_likelihood(idata, counts, model):
    n, c = counts.n.values, counts.c.values
    post = idata.posterior
    a, b = post["a"].values[..., None], post["b"].values[..., None]
    if model == "bb":
        ll = kernels.bb_logpmf(c, n, a, b)
    else:
        ll = kernels.zoibb_logpmf(c, n, a, b, post["pi0"].values[..., None], post["pi1"].values[..., None])
    return xr.Dataset({"c": (("chain", "draw", "config", "task"), np.where(n > 0, ll, 0.0))},
                      coords={"chain": post.chain.values, "draw": post.draw.values,
                              "config": counts.config.values, "task": counts.task.values})


def _finish(idata, counts, model, method, seed, k):
    import arviz as az

    cfg_coords = {name: ("config", counts[name].values) for name in ("model", "temperature", "benchmark")}
    obs = xr.Dataset({"c": counts.c}).assign_coords(cfg_coords)
    const = xr.Dataset({"n": counts.n}).assign_coords(cfg_coords)
    idata.posterior.attrs.update(bayespass_model=model, bayespass_method=method, seed=seed,
                                 bayespass_version=__version__)
    groups = {"observed_data": obs.drop_vars(list(cfg_coords)), "constant_data": const.drop_vars(list(cfg_coords))}
    if method == "eb" or model == "zoibb":
        groups["log_likelihood"] = _log_likelihood(idata, counts, model)
    if method == "eb":
        groups["sample_stats"] = xr.Dataset(
            {"lp": (("chain", "draw"), np.zeros((1, idata.posterior.sizes["draw"])))},
            coords={"chain": [0], "draw": idata.posterior.draw.values})
    for name, ds in groups.items():
        if name in idata.groups():
            del idata[name]
        idata.add_groups({name: ds})
    k_grid = default_k_grid(int(counts.n.max())) if k is None else k
    ppc = replicate_counts(idata, seed=seed)
    pk = passk_draws(idata, k_grid, max_draws=250 if model == "hier" else None, seed=seed)
    extra = {"posterior_predictive": ppc.to_dataset(), "passk": pk}
    for name, ds in extra.items():
        if name in idata.groups():
            del idata[name]
        idata.add_groups({name: ds})
    if method == "mcmc":
        _gate(idata, model)
    else:
        idata.posterior.attrs["convergence"] = "n/a (empirical Bayes)"
    del az
    return idata


def convergence_report(idata, model: str) -> dict:
    """Return r_hat max, ESS-bulk min and divergence count over the free parameters."""
    import arviz as az

    names = [v for v in _FREE[model] if v in idata.posterior]
    rhat = az.rhat(idata, var_names=names)
    ess = az.ess(idata, var_names=names, method="bulk")
    return {
        "r_hat_max": float(max(float(rhat[v].max()) for v in names)),
        "ess_bulk_min": float(min(float(ess[v].min()) for v in names)),
        "divergences": int(idata.sample_stats["diverging"].sum()),
    }


def _gate(idata, model):
    rep = convergence_report(idata, model)
    problems = []
    if not rep["r_hat_max"] <= rcParams["mcmc.rhat_max"]:
        problems.append(f"r_hat {rep['r_hat_max']:.3f} > {rcParams['mcmc.rhat_max']}")
    if not rep["ess_bulk_min"] >= rcParams["mcmc.ess_min"]:
        problems.append(f"ESS bulk {rep['ess_bulk_min']:.0f} < {rcParams['mcmc.ess_min']:.0f}")
    if rep["divergences"] > 0:
        problems.append(f"{rep['divergences']} divergences")
    idata.posterior.attrs.update({f"convergence_{k}": v for k, v in rep.items()})
    idata.posterior.attrs["convergence"] = "ok" if not problems else "; ".join(problems)
    if problems:
        warnings.warn(f"MCMC convergence gates failed for model {model!r}: {'; '.join(problems)}. "
                      "Increase draws/tune or target_accept; results are recorded but may be "
                      "unreliable.", FitWarning, stacklevel=3)
