"""Rao-Blackwellised pass@k and replicated counts from posterior draws (NumPy).

Per-task success probabilities are never sampled: given hyperparameters
their posterior is conjugate, so pass@k per draw is the closed-form
posterior predictive of :mod:`bayespass.stats.kernels`, averaged over
observed tasks.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import expit

from ..stats import kernels
from ..stats.pairs import pair_table
from ..testing import rng as _rng
from ..validate import as_k

__all__ = ["default_k_grid", "passk_draws", "replicate_counts", "model_of"]


def default_k_grid(n_max: int) -> np.ndarray:
    """Log-spaced k grid from 1 to ``max(200, 4 n_max)`` including round values."""
    k_max = max(200, 4 * int(n_max))
    grid = np.unique(np.round(np.logspace(0, np.log10(k_max), 40)).astype(int))
    round_vals = [v for v in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if v <= k_max]
    return np.unique(np.concatenate([grid, round_vals, [k_max]]))


def model_of(idata) -> str:
    """Return the model name recorded on an InferenceData from :func:`bayespass.fit`."""
    try:
        return idata.posterior.attrs["bayespass_model"]
    except (AttributeError, KeyError) as err:
        raise ValueError("idata was not produced by bayespass.fit (posterior.attrs has no "
                         "'bayespass_model'); fit it with bayespass.fit(counts, model=...)") from err


def _counts_arrays(idata):
    n = idata.constant_data["n"].values.astype(np.int64)
    c = idata.observed_data["c"].values.astype(np.int64)
    return n, c


def _stack(post: xr.Dataset, name: str) -> np.ndarray:
    return post[name].values  # (chain, draw, ...)


def _task_q(idata, post, k):
    """Per-draw E[(1-p)^k] for every observed (pair or task): returns (q, weights, config index)."""
    model = model_of(idata)
    n, c = _counts_arrays(idata)
    if model in ("bb", "zoibb"):
        table = pair_table(n, c)
        obs = table.observed
        a = _stack(post, "a")[..., table.cfg][..., obs, None]
        b = _stack(post, "b")[..., table.cfg][..., obs, None]
        un, uc = table.n[obs, None], table.c[obs, None]
        if model == "bb":
            pred = kernels.passk_bb_predictive(un, uc, k, a, b)
        else:
            pi0 = _stack(post, "pi0")[..., table.cfg][..., obs, None]
            pi1 = _stack(post, "pi1")[..., table.cfg][..., obs, None]
            pred = kernels.passk_zoibb_predictive(un, uc, k, a, b, pi0, pi1)
        return 1.0 - pred, table.weight[obs], table.cfg[obs]
    if model == "hier":
        mean = expit(_stack(post, "alpha")[..., :, None] - _stack(post, "d")[..., None, :])
        phi = _stack(post, "phi")[..., :, None]
        obs = n > 0
        cfg_idx, task_idx = np.nonzero(obs)
        a = (mean * phi)[..., cfg_idx, task_idx][..., None]
        b = ((1 - mean) * phi)[..., cfg_idx, task_idx][..., None]
        pred = kernels.passk_bb_predictive(n[obs][:, None], c[obs][:, None], k, a, b)
        return 1.0 - pred, np.ones(obs.sum()), cfg_idx
    raise ValueError(f"unknown model {model!r}")  # pragma: no cover - model_of guards this


def passk_draws(idata, k, *, max_draws: int | None = None, seed=0) -> xr.Dataset:
    """Dataset-level pass@k per posterior draw, dims ``(chain, draw, config, k)``.

    Two variables:

    ``passk_mean``
        Rao-Blackwellised: per draw, the mean over observed tasks of the
        closed-form ``E[1 - (1-p_i)^k | c_i, hyper]``.  Its average over draws
        is the posterior mean.
    ``passk``
        A draw of the dataset pass@k itself: ``passk_mean`` plus the spread of
        the per-task probabilities around their conditional means, from the
        exact conditional variance ``sum_i (q_{2k,i} - q_{k,i}^2) / T^2`` with
        ``q_{k,i} = E[(1-p_i)^k | c_i, hyper]`` (normal over tasks, clipped to
        [0, 1]).  Intervals use this, so they cover the finite-task truth.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`bayespass.fit`.
    k : int or sequence of int
        Any positive k (also beyond the samples drawn).
    max_draws : int, optional
        Thin to at most this many draws per chain (evenly spaced).
    seed : int
        Seed of the task-spread noise.
    """
    k = as_k(k)
    post = idata.posterior
    if max_draws is not None and post.sizes["draw"] > max_draws:
        post = post.isel(draw=np.linspace(0, post.sizes["draw"] - 1, max_draws).astype(int))
    q_k, w, cfg = _task_q(idata, post, k)
    q_2k, _, _ = _task_q(idata, post, 2 * k)
    n_config = idata.observed_data.sizes["config"]
    shape = (post.sizes["chain"], post.sizes["draw"], n_config, k.size)
    mean, var = np.full(shape, np.nan), np.full(shape, np.nan)
    for j in range(n_config):  # a loop over configs, not tasks
        sel = cfg == j
        if not sel.any():
            continue
        tot = w[sel].sum()
        mean[:, :, j] = np.tensordot(1.0 - q_k[:, :, sel], w[sel], axes=([2], [0])) / tot
        v = np.clip(q_2k[:, :, sel] - q_k[:, :, sel] ** 2, 0.0, None)
        var[:, :, j] = np.tensordot(v, w[sel], axes=([2], [0])) / tot**2
    noise = _rng(seed).standard_normal(shape)
    full = np.clip(mean + np.sqrt(var) * noise, 0.0, 1.0)
    dims = ("chain", "draw", "config", "k")
    coords = {"chain": post.chain.values, "draw": post.draw.values,
              "config": idata.observed_data.config.values, "k": k}
    return xr.Dataset({"passk": (dims, full), "passk_mean": (dims, mean)}, coords=coords)


def replicate_counts(idata, *, seed=0, max_draws: int | None = 1000) -> xr.DataArray:
    """Replicated counts ``c_rep`` per draw for posterior predictive checks.

    For bb/zoibb each replicate is a *new* task with the same n (p drawn
    from the fitted prior, then ``Binomial(n, p)``): the mixed replication
    that checks the population model, e.g. its fraction of zeros.  For
    ``hier`` the task difficulty d_i is kept and the overdispersion redrawn.
    """
    model = model_of(idata)
    g = _rng(seed)
    post = idata.posterior
    if max_draws is not None and post.sizes["draw"] > max_draws:
        post = post.isel(draw=np.linspace(0, post.sizes["draw"] - 1, max_draws).astype(int))
    n, _ = _counts_arrays(idata)
    if model in ("bb", "zoibb"):
        a = _stack(post, "a")[..., :, None]
        b = _stack(post, "b")[..., :, None]
        shape = a.shape[:-1] + (n.shape[1],)
        p = g.beta(np.broadcast_to(a, shape), np.broadcast_to(b, shape))
        if model == "zoibb":
            u = g.random(shape)
            pi0 = _stack(post, "pi0")[..., :, None]
            pi1 = _stack(post, "pi1")[..., :, None]
            p = np.where(u < pi0, 0.0, np.where(u < pi0 + pi1, 1.0, p))
    else:
        mean = expit(_stack(post, "alpha")[..., :, None] - _stack(post, "d")[..., None, :])
        phi = _stack(post, "phi")[..., :, None]
        p = g.beta(mean * phi, (1 - mean) * phi)
    c_rep = g.binomial(np.broadcast_to(n, p.shape), p)
    return xr.DataArray(c_rep, dims=("chain", "draw", "config", "task"),
                        coords={"chain": post.chain.values, "draw": post.draw.values,
                                "config": idata.observed_data.config.values,
                                "task": idata.observed_data.task.values}, name="c")
