"""Rao-Blackwellised pass@k and replicated counts from posterior draws (NumPy), for every model.

Per-task success probabilities are never sampled: given a draw of a config's
parameters, a task's posterior depends only on its (n, c), and the model's
``q`` gives ``E[(1-p)^k | n, c, theta]`` in closed form (or exactly on the
flex model's grid), so pass@k per draw is an average over distinct pairs.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._threads import thread_map
from ..stats.pairs import pair_table
from ..validate import as_fit, as_k, is_run_with_fits
from .base import BLOCK_CELLS, PairData, fitted_model
from .stack import theta_of

__all__ = ["default_k_grid", "passk_draws", "passk_mean_draws", "replicate_counts", "model_of", "method_of",
           "pair_data", "thin"]


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
        raise ValueError("idata was not produced by bayespass.fit (posterior.attrs has no 'bayespass_model'); "
                         "fit its counts with bayespass.fit(counts) (or 'bayespass fit COUNTS')") from err


def method_of(idata) -> str:
    """Return how :func:`bayespass.fit` fitted ``idata``: ``"eb"`` or ``"mcmc"``.

    Its recorded method without the sampler's suffix (``"mcmc+pymc"``); ``""`` where none is recorded.
    """
    return str(idata.posterior.attrs.get("bayespass_method", "")).split("+")[0]


def _model(idata):
    from .stack import model_from_posterior

    name = model_of(idata)  # first: a clear error for an InferenceData that bp.fit did not make
    post = idata.posterior
    return model_from_posterior(post) if name == "auto" else fitted_model(name, post.attrs.get("model_settings"))


def pair_data(idata) -> PairData:
    """Return the distinct (n, c) pairs of the fitted counts."""
    n = idata.constant_data["n"].values.astype(np.int64)
    c = idata.observed_data["c"].values.astype(np.int64)
    return PairData.from_table(pair_table(n, c))


def thin(post: xr.Dataset, max_draws: int | None) -> xr.Dataset:
    """At most ``max_draws`` evenly spaced draws per chain."""
    if max_draws is not None and post.sizes["draw"] > max_draws:
        post = post.isel(draw=np.linspace(0, post.sizes["draw"] - 1, max_draws).astype(int))
    return post


def _config_q(model, theta_j, n, c, k):
    """Q per (chain, draw, pair, k) for one config's theta (chain, draw, P) and its pairs (U,)."""
    return model.q(theta_j[..., None, :], n, c, k)


_BLOCK_CELLS = BLOCK_CELLS  # (draws x pairs x k) cells computed at once


def _pair_blocks(model, theta, data, k, *, with_2k: bool = True):
    """Per config: a generator of (q_k, q_2k, weights, n) over blocks of its distinct pairs (q_2k None without 2k)."""
    n_draws = theta.shape[0] * theta.shape[1]
    size = max(1, _BLOCK_CELLS // max(1, n_draws * 2 * k.size))
    ks = np.concatenate([k, 2 * k]) if with_2k else k  # k and 2k in one call

    def blocks(j, sel):
        nn, cc, ww = data.n[j, sel], data.c[j, sel], data.w[j, sel]
        for s in range(0, nn.size, size):
            sl = slice(s, s + size)
            q = _config_q(model, theta[:, :, j], nn[sl], cc[sl], ks)
            yield q[..., :k.size], (q[..., k.size:] if with_2k else None), ww[sl], nn[sl]

    return [(j, blocks(j, data.w[j] > 0)) for j in range(data.n_config) if (data.w[j] > 0).any()]


def _task_moments(per_config, shape, *, with_var: bool = True, short_k=None):
    """Per config, the mean over its tasks of ``1 - q_k`` per draw and (``with_var``) the variance of that mean.

    ``per_config`` is ``[(j, blocks)]`` with blocks of ``(q_k, q_2k, weights[, n])`` (q_2k unused, and may be
    None, without ``with_var``); both results have ``shape`` (chain, draw, config, K), NaN for a config
    with no observed task.  With ``short_k`` (the k, blocks with their pairs' n) two more: the parts of the
    mean and of the variance that the tasks with fewer than k samples make up (0 where there are none).
    """
    mean = np.full(shape, np.nan)
    var = np.full(shape, np.nan) if with_var else None
    short = [np.zeros(shape), np.zeros(shape)] if short_k is not None else None

    def one(item):  # a config's sums, its blocks in order: the same numbers whatever the threads
        j, blocks = item
        m_sum, v_sum, tot, ms_sum, vs_sum = 0.0, 0.0, 0.0, 0.0, 0.0
        for qk, q2k, w, *nn in blocks:  # memory bounded by one block of pairs
            tot += w.sum()
            m_sum = m_sum + np.tensordot(1.0 - qk, w, axes=([2], [0]))
            v = np.clip(q2k - qk**2, 0.0, None) if with_var else None
            if with_var:
                v_sum = v_sum + np.tensordot(v, w, axes=([2], [0]))
            if short is not None:
                ws = w[:, None] * (nn[0][:, None] < short_k[None, :])  # (U, K): the pairs short of each k
                ms_sum = ms_sum + np.einsum("cduk,uk->cdk", 1.0 - qk, ws)
                vs_sum = vs_sum + np.einsum("cduk,uk->cdk", v, ws)
        mean[:, :, j] = m_sum / tot
        if with_var:
            var[:, :, j] = v_sum / tot**2
        if short is not None:
            short[0][:, :, j], short[1][:, :, j] = ms_sum / tot, vs_sum / tot**2

    thread_map(one, per_config)  # the configs in threads: the models' q is NumPy or a compiled loop without the GIL
    return (mean, var) if short is None else (mean, var, *short)


def _n_range(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the smallest and the largest n of each config's observed tasks, each (config,).

    ``n`` is (config, task); a config without an observed task gets the int64 maximum and 0.
    """
    seen = n > 0
    return (np.where(seen, n, np.iinfo(np.int64).max).min(1).astype(np.int64),
            np.where(seen, n, 0).max(1).astype(np.int64))


def passk_mean_draws(model, theta: np.ndarray, data: PairData, k) -> np.ndarray:
    """Rao-Blackwellised dataset pass@k per draw of a per-config model, shape ``(chain, draw, config, K)``.

    The ``passk_mean`` of :func:`passk_draws`, from theta draws ``(chain, draw, config, P)``
    and the fitted pairs, without an InferenceData (the fit's convergence gate uses it).
    """
    k = as_k(k)
    blocks = _pair_blocks(model, theta, data, k, with_2k=False)
    return _task_moments(blocks, theta.shape[:3] + (k.size,), with_var=False)[0]


def passk_draws(idata, k, *, max_draws: int | None = None, seed=0) -> xr.Dataset:
    """Dataset-level pass@k per posterior draw, dims ``(chain, draw, config, k)``.

    Two variables:

    ``passk_mean``
        Rao-Blackwellised: per draw, the mean over observed tasks of the
        closed-form ``E[1 - (1-p_i)^k | c_i, theta]``.  Its average over draws
        is the posterior mean.
    ``passk``
        A draw of the dataset pass@k itself: ``passk_mean`` plus the spread of
        the per-task probabilities around their conditional means, from the
        exact conditional variance ``sum_i (q_{2k,i} - q_{k,i}^2) / T^2`` with
        ``q_{k,i} = E[(1-p_i)^k | c_i, theta]`` (normal over tasks, clipped to
        [0, 1]; one normal deviate per draw and config, shared by every k).
        Intervals use this, so they cover the finite-task truth.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`bayespass.fit`, or a run (``bp.load_run``; its main fit).
    k : int or sequence of int
        Any positive k (also beyond the samples drawn).
    max_draws : int, optional
        Thin to at most this many draws per chain (evenly spaced).
    seed : int
        Seed of the task-spread noise.
    """
    from ..simulate import rng as _rng

    if is_run_with_fits(idata):  # a run (bp.load_run): its main fit
        idata = as_fit(idata, what="passk_draws")
    k = as_k(k)
    model = _model(idata)
    if hasattr(model, "passk_draws"):  # a model that draws its own (e.g. shared task difficulty)
        return model.passk_draws(idata, k, max_draws=max_draws, seed=seed)
    post = thin(idata.posterior, max_draws)
    n_cfg = idata.observed_data.sizes["config"]
    shape = (post.sizes["chain"], post.sizes["draw"], n_cfg, k.size)
    if model.joint:
        n = idata.constant_data["n"].values.astype(np.int64)
        c = idata.observed_data["c"].values.astype(np.int64)
        q_k, w, cfg = model.task_q(post, n, c, k)
        q_2k, _, _ = model.task_q(post, n, c, 2 * k)
        per_config = [(j, [(q_k[:, :, cfg == j], q_2k[:, :, cfg == j], w[cfg == j])]) for j in range(n_cfg)]
    else:
        data = pair_data(idata)
        theta = theta_of(post).values  # (chain, draw, config, P)
        per_config = _pair_blocks(model, theta, data, k)
    stack = hasattr(model, "components") and not model.joint  # a stacked fit (per-config)
    if stack:
        n = idata.constant_data["n"].transpose("config", "task").values
        n_lo, n_hi = _n_range(n)
    # a stack's draws carry their short tasks' part where some k splits a config's observed tasks (elsewhere it
    # is 0 or all of passk, and the band the mixture's or the hull's, as "hull-beyond" draws it without it)
    ragged = stack and bool(((n_lo[:, None] < k[None, :]) & (k[None, :] <= n_hi[:, None])).any())
    mean, var, *short = _task_moments(per_config, shape, short_k=k if ragged else None)
    # one normal deviate per draw and config, shared by every k: the same tasks' p decide pass@k at every k,
    # so a draw's finite-task spread moves together along k (bands smooth in k, not jagged by fresh noise)
    noise = _rng(seed).standard_normal(shape[:3] + (1,))
    full = np.clip(mean + np.sqrt(var) * noise, 0.0, 1.0)
    dims = ("chain", "draw", "config", "k")
    coords = {"chain": post.chain.values, "draw": post.draw.values,
              "config": idata.observed_data.config.values, "k": k}
    out = xr.Dataset({"passk": (dims, full), "passk_mean": (dims, mean)}, coords=coords)
    if stack:  # which candidate each draw came from (its bands need it)
        out["component"] = (dims[:3], theta[..., 0].astype(np.int64))  # a stack is per-config: theta is set
        # and the part of each draw that the tasks with fewer than k samples make up, with their share of the
        # finite-task spread (the same deviate): the band rule "hull-short" widens the mixture's band by how far
        # the candidates disagree on that part alone (it is all of ``passk`` where every task is short of k)
        if ragged:
            out["passk_short"] = (dims, np.clip(short[0] + np.sqrt(short[1]) * noise, 0.0, 1.0))
        _add_identified(out, n, idata.observed_data["c"].transpose("config", "task").values, k, n_lo)
        # coordinates, not variables: arviz.summary and arviz.rhat of the draws (and of the fit's passk group)
        # then read the draws alone; the band rules (stats.curve) read them back as variables
        out = out.set_coords([v for v in out.data_vars if "draw" not in out[v].dims or v == "component"])
    return out


def _add_identified(out: xr.Dataset, n: np.ndarray, c: np.ndarray, k: np.ndarray, n_lo: np.ndarray) -> None:
    """Add to a stack's draws ``out`` what its band rules need to know of what the counts identify (in place)."""
    # up to which k the data identify pass@k (every task has n >= k): band rules "hull-short", "hull-beyond"
    out["n_min"] = ("config", n_lo)
    # and what a band valid under any spread of p needs where the data identify pass@1 only (n_min = 1):
    # the observed pass@1 and its effective number of Bernoulli trials (stats.curve.identified_band)
    from ..data.counts import identified_k, pass1_rate_trials, single_sample_share
    from ..stats.kernels import unbiased_passk_moments

    rate, trials = pass1_rate_trials(n, c)
    out["pass1_rate"], out["pass1_trials"] = ("config", rate), ("config", trials)
    # and how many of its tasks have one sample only: the tasks with two or more identify the spread
    out["single_share"] = ("config", single_sample_share(n))
    # and up to which k the band rule treats pass@k as identified: n_min, unless a task or two of many fall
    # short of the rest (data.counts.IDENTIFIED_SHARE)
    out["k_identified"] = ("config", identified_k(n))
    # and, where every observed task has n >= 2k, the unbiased pass@k with its variance about the tasks' own,
    # which hold whatever the shape of p: the default's band holds their normal band (stats.curve.passk_bands)
    u, v = unbiased_passk_moments(n, c, k)
    out["unbiased_mean"], out["unbiased_var"] = (("config", "k"), u), (("config", "k"), v)


def replicate_counts(idata, *, seed=0, max_draws: int | None = 1000) -> xr.DataArray:
    """Replicated counts ``c_rep`` per draw for posterior predictive checks.

    For per-config models each replicate is a *new* task with the same n (p
    drawn from the fitted population, then ``Binomial(n, p)``): the mixed
    replication that checks the population model, e.g. its fraction of zeros.
    For ``hier`` the task difficulty d_i is kept and the overdispersion redrawn.
    Large data get fewer draws, then a random subset of the tasks (:data:`REPLICATE_CELLS`).
    """
    from ..simulate import rng as _rng

    g = _rng(seed)
    model = _model(idata)
    post = thin(idata.posterior, max_draws)
    n = idata.constant_data["n"].values.astype(np.int64)
    tasks = idata.observed_data.task.values
    subset = None
    chains = post.sizes["chain"]
    # large data: fewer draws first.  A joint model replicates all configs' tasks together and keeps every task
    # (at least 20 draws per chain); a per-config model keeps REPLICATE_DRAWS (a p-value's Monte Carlo error then
    # is at most 0.025, 0.008 near the 0.025 that flags a misfit), then replicates a subset of the tasks
    cap, floor = (JOINT_REPLICATE_CELLS, 20) if model.joint else (REPLICATE_CELLS, -(-REPLICATE_DRAWS // chains))
    if chains * post.sizes["draw"] * n.size > cap:
        post = thin(post, max(floor, cap // (chains * n.size)))
    n_draws = chains * post.sizes["draw"]
    size = max(10_000, cap // (n_draws * n.shape[0]))  # tasks kept at the floor's draws (10,000 at least)
    if n_draws * n.size > cap and not model.joint and size < n.shape[1]:
        # a random subset of the tasks (new tasks are exchangeable; the checked statistics are averages over
        # tasks, estimated here from the subset)
        subset = np.sort(g.choice(n.shape[1], size=size, replace=False))
        n, tasks = n[:, subset], tasks[subset]
    if model.joint:
        p = model.replicate_p(post, g, n_tasks=n.shape[1])
    else:
        theta = theta_of(post).values
        p = np.stack([model.draw_p(theta[:, :, j], n.shape[1], g) for j in range(n.shape[0])], axis=2)
    c_rep = g.binomial(np.broadcast_to(n, p.shape), p)
    out = xr.DataArray(c_rep, dims=("chain", "draw", "config", "task"),
                       coords={"chain": post.chain.values, "draw": post.draw.values,
                               "config": idata.observed_data.config.values, "task": tasks}, name="c")
    if subset is not None:
        out.attrs["note"] = (f"replicated {subset.size} of {idata.observed_data.sizes['task']} tasks (a random "
                             "subset; PPC statistics are averages over tasks)")
    return out


#: above this many (draw x config x task) cells, replicated counts use fewer draws (down to REPLICATE_DRAWS), then
#: a random subset of the tasks.  400 tasks x 34 configs at 1,600 draws were 22 million cells: 175 MB, 70% of the
#: fit's memory, and 4.7 s of the default's 30 (benchmarks/RESULTS.md, "Replicated counts of large data")
REPLICATE_CELLS = 6_000_000
#: the fewest draws replicated counts are thinned to before the tasks are subset
REPLICATE_DRAWS = 400
#: a joint model's replicates keep every task; above this many cells they use fewer draws (at least 20 per chain)
JOINT_REPLICATE_CELLS = 4_000_000
