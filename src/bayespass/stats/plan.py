"""How many samples to draw next: the pass@k band width to expect from more samples per task.

:func:`plan` answers "how many samples per task until the band of pass@k is W wide" by preposterior
simulation: it draws plausible per-task success probabilities from the current fit (a posterior draw of
the hyperparameters, then each task's p given its counts), adds simulated samples up to each candidate
n per task, refits the same model and measures the band.  The expected width at each n, averaged over
the simulations, is returned with the smallest n that reaches the target.
"""

from __future__ import annotations

import numbers
import warnings
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from .._run import own
from ..data.counts import samples_to_identify
from ..defaults import rcParams
from ..models.stack import theta_of
from ..validate import as_fit, as_k, check_positive_int, check_prob, check_seed, split_pair
from .panels import config_panel, label_panels, panels_of

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["allocate", "plan", "plot_plan"]


def _plannable_model(idata, *, what: str):
    """Return the fit's model, with a clear error for a joint model that cannot draw its tasks' p (``hier``)."""
    from ..models.predictive import _model

    model = _model(idata)
    if model.joint and not hasattr(model, "task_candidates"):
        raise ValueError(f"{what}() supports the per-config models, their stack and 'shared'; model {model.name!r} "
                         f"is joint: fit the counts with one of those first (bp.fit(counts), 'bayespass fit COUNTS')")
    return model


def _refit_spec(model) -> tuple:
    """Return ``(model, candidates)`` that refit simulated futures as the fit of ``model`` (a fit's) was made.

    A stack is refitted with its own candidates (not ``rcParams["stats.candidates"]``); a candidate fitted with
    settings of its own cannot be refitted by name, and is a clear error.
    """
    from ..models.base import get_model

    if not hasattr(model, "components"):
        return model, None  # the model instance: a Flex(K=8) fit is refitted as Flex(K=8)
    custom = [m.name for m in model.components if getattr(m, "settings", None) != getattr(get_model(m.name),
                                                                                          "settings", None)]
    names = [m.name for m in model.components]
    if custom or len(set(names)) < len(names):
        raise ValueError(f"plan() refits a stack with its candidates by name; this stack's candidates {names} "
                         f"include {'settings of their own' if custom else 'one model twice'}: plan a fit of one "
                         "model, or a stack of registered models")
    return "auto", names


def _posterior_p(idata, model, rng, pool: int = 4000) -> np.ndarray:
    """One draw of every task's p (config, task) from the fit of ``model``: hyperparameters, then p given the counts."""
    post = idata.posterior
    n = idata.constant_data["n"].transpose("config", "task").values
    c = idata.observed_data["c"].transpose("config", "task").values
    if model.joint:  # 'shared': the tasks' difficulties tie the configs' p
        return model.posterior_p(post, n, c, rng)
    ch, dr = rng.integers(post.sizes["chain"]), rng.integers(post.sizes["draw"])
    packed = theta_of(post)
    theta = packed.isel(chain=ch, draw=dr).transpose("config", "param").values
    out = np.zeros(n.shape)
    for j in range(n.shape[0]):
        if getattr(model, "components", None):  # a stack: its candidates' populations, mixed task by task
            draws = packed.isel(config=j).stack(s=("chain", "draw")).transpose("s", "param").values
            cand = _stack_population(model, draws, pool, rng)
        else:
            cand = model.draw_p(theta[j], pool, rng)  # the fitted population
        cand = np.clip(cand, 0.0, 1.0)
        cdf = np.cumsum(_weights_on(cand, n[j], c[j]), axis=1)  # (task, pool)
        u = rng.random(n.shape[1]) * cdf[:, -1]
        out[j] = cand[np.minimum((cdf < u[:, None]).sum(1), cand.size - 1)]
    return out


def _stack_population(model, draws: np.ndarray, pool: int, rng) -> np.ndarray:
    """Candidate p's of a stack for one config: one posterior draw of each candidate, pooled by their weights.

    Stacking weighs the candidates' predictive distributions observation by observation, so a simulated
    future mixes them task by task; drawing every task from one candidate (one draw of the stack's
    posterior) makes futures that one candidate fits and the others do not, and the planned band too wide.
    """
    comp = draws[:, 0].astype(int)
    parts = []
    for i in np.unique(comp):
        rows = np.flatnonzero(comp == i)
        size = max(1, int(round(pool * rows.size / comp.size)))
        parts.append(model.draw_p(draws[rng.choice(rows)], size, rng))
    return np.concatenate(parts)


def plan(fit, *, k, target_width: float, n_grid=None, n_sims: int = 5, ci_prob: float | None = None,
         seed: int = 0, progressbar: bool = True) -> xr.Dataset:
    """Plan samples per task (uniform) for the pass@k band to reach ``target_width`` (preposterior simulation).

    Parameters
    ----------
    fit : arviz.InferenceData or xarray.DataTree
        A fit of a per-config model, ``"auto"`` or ``"shared"`` (:func:`bayespass.fit`), or a run
        (``bp.load_run``: its main fit, and its own ci_prob if not given); it is refitted, with the same
        model and method, once per simulation and candidate n.  A ``shared`` future draws each task's
        difficulty from its posterior given every config's counts, then each config's p given it and its
        own counts.
    k : int
        The pass@k whose band is planned.
    target_width : float
        Width of the ``ci_prob`` band to reach (in pass@k units, e.g. 0.05).
    n_grid : sequence of int, optional
        Candidate samples per task (default: :func:`default_n_grid`, 1, 1.5, 2, 3, 5, 8 times the most samples
        per task a config has, for the config with the fewest and the one with the most).
    n_sims : int
        Simulated futures per candidate.
    ci_prob : float, optional
        Band probability (default ``rcParams["stats.ci_prob"]``).
    seed : int
        Seed of the simulations.
    progressbar : bool
        Show a progress bar over the ``n_sims x len(n_grid)`` refits on stderr (each is a whole fit: with
        the default model a few seconds each).

    Returns
    -------
    xarray.Dataset
        Over ``(config, n)``: ``expected_width`` (mean over simulations) and ``width_sd``; over
        ``config``: ``current_width``, ``reached`` (the band is already at most ``target_width`` wide) and
        ``n_needed`` (the smallest n of the grid whose expected width is at most the target, NaN when none
        is; where ``reached``, the samples per task the config has, its largest on ragged counts).  Where
        every config has reached the target and ``n_grid`` is not given, nothing is refitted: ``n`` is the
        samples per task today, ``expected_width`` the current width and ``width_sd`` NaN
        (``attrs["simulated"]`` is False).
    """
    import sys

    from tqdm import tqdm

    from ..data.counts import make_counts
    from ..models.fit import fit as fit_model
    from ..models.predictive import method_of
    from .curve import passk_curve

    ci_prob = own(fit, ci_prob=ci_prob)["ci_prob"]  # a run's own: the band its tables have
    fit = as_fit(fit, what="plan")
    fitted = _plannable_model(fit, what="plan")  # before the bar and the refits
    kk, target_width, n_sims = _plan_args(k, target_width, n_sims)
    prob = check_prob(rcParams["stats.ci_prob"] if ci_prob is None else ci_prob, name="ci_prob")
    n_now = fit.constant_data["n"].transpose("config", "task").values.astype(np.int64)
    c_now = fit.observed_data["c"].transpose("config", "task").values.astype(np.int64)
    n_given = n_grid
    if n_grid is None:
        n_grid = default_n_grid(n_now)
    n_grid = np.asarray(sorted(int(check_positive_int(int(x), name="n_grid")) for x in n_grid))
    post = fit.posterior.attrs
    model, candidates = _refit_spec(fitted)
    method = method_of(fit) or "eb"
    configs, tasks = fit.observed_data.config.values, fit.observed_data.task.values
    rng = np.random.default_rng(check_seed(seed))

    def width(idata):
        band = passk_curve(idata, kk, ci_prob=prob)["eti"].sel(k=kk[0])
        return (band.sel(ci_bound="upper") - band.sel(ci_bound="lower")).values

    now = width(fit)
    reached = now <= target_width
    attrs = {"k": int(kk[0]), "target_width": target_width, "ci_prob": prob, "n_sims": n_sims,
             "model": str(getattr(model, "name", model)), "method": str(method), "simulated": True}
    if reached.all() and n_given is None:  # no future to simulate: the band is narrow enough today
        return _plan_result(now[:, None], np.full((configs.size, 1), np.nan), now, reached, n_now.max(1),
                            configs, np.array([n_now.max()]), attrs | {"n_sims": 0, "simulated": False})
    bar = tqdm(total=n_sims * n_grid.size, desc=f"plan: refits of simulated futures ({post.get('bayespass_model')})",
               unit="fit", file=sys.stderr, disable=not progressbar, mininterval=0.5)

    def refit_width(n, c, seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = fit_model(make_counts(n, c, task=tasks, config=configs), model, method, seed=seed,
                              progressbar=False, candidates=candidates)
        bar.update()
        return width(idata)

    widths = np.stack([_future_widths(_posterior_p(fit, fitted, rng), n_now, c_now, n_grid, rng, refit_width)
                       for _ in range(n_sims)])
    bar.close()
    mean = widths.mean(0)
    ok = mean <= target_width
    needed = np.where(ok.any(1), n_grid[np.argmax(ok, axis=1)], np.nan)
    needed = np.where(reached, n_now.max(1), needed)
    return _plan_result(mean, widths.std(0), now, reached, needed, configs, n_grid, attrs)


def default_n_grid(n_now: np.ndarray) -> np.ndarray:
    """Return the candidate samples per task :func:`plan` tries by default, from the counts' n (config, task).

    1, 1.5, 2, 3, 5 and 8 times a config's most samples per task, for the config with the fewest and the one
    with the most (at most 12 candidates): where configs were drawn with 10 and 50 samples per task, the
    multiples of 50 alone planned 50 samples for a 10-sample config whose band reached its target at 15.
    """
    tops = np.unique(n_now.max(axis=1))
    tops = tops[tops > 0][[0, -1]] if (tops > 0).any() else np.array([1])
    return np.unique(np.round(np.outer(tops, [1, 1.5, 2, 3, 5, 8])).astype(int).ravel())


def _future_widths(p, n_now, c_now, n_grid, rng, refit_width) -> np.ndarray:
    """One simulated future's band widths (config, n) at every n of ``n_grid`` (ascending).

    The future is one sequence of samples per task, cut at each n: the counts at a larger n extend those at a
    smaller one, and every refit takes the same seed. So the widths of one future differ across n by the samples
    added, not by fresh noise, and their mean over futures falls with n as the band does (independent futures
    per n made :func:`plan`'s table non-monotone in n with a few simulations).
    """
    seed = int(rng.integers(1 << 30))
    out = np.full((n_now.shape[0], n_grid.size), np.nan)
    added, c = np.zeros_like(n_now), c_now.copy()
    for g_i, n_target in enumerate(n_grid):
        extra = np.where(n_now > 0, np.maximum(n_target - n_now, 0), 0)
        c = c + rng.binomial(extra - added, p)
        added = extra
        out[:, g_i] = refit_width(n_now + extra, c, seed)
    return out


def plot_plan(plan_ds: xr.Dataset, *, ax=None) -> Axes | np.ndarray:
    """Plot a plan: each config's expected band width against samples per task, the target and the n needed.

    Parameters
    ----------
    plan_ds : xarray.Dataset
        What :func:`plan` returns.
    ax : matplotlib.axes.Axes or sequence of them, optional
        Where to draw: one Axes, or one per config (default: a new figure; above ten configs a panel each).

    Returns
    -------
    matplotlib.axes.Axes, or numpy.ndarray of them (one per config)
        One line per config (the mean width over simulated futures, shaded +- one standard deviation over
        them), the target width dashed, and a marker where each config first reaches it (``n_needed``).
    """
    need = {"expected_width", "width_sd", "n_needed"}
    if not isinstance(plan_ds, xr.Dataset) or not need <= set(plan_ds.data_vars) or "target_width" not in \
            plan_ds.attrs:
        raise TypeError(f"plot_plan needs what bp.plan returns (a Dataset with {sorted(need)}); got "
                        f"{type(plan_ds).__name__}")
    panels = panels_of(ax, plan_ds.sizes["config"], most_on_one=10, one_size=(6.5, 4))
    n = plan_ds.n.values
    for i, cfg in enumerate(plan_ds.config.values):
        a = config_panel(panels, i, str(cfg))
        row = plan_ds.sel(config=cfg)
        mean, sd = row["expected_width"].values, np.nan_to_num(row["width_sd"].values)
        line, = a.plot(n, mean, "o-", ms=3, label=str(cfg), color=None if panels.size == 1 else "C0")
        a.fill_between(n, mean - sd, mean + sd, color=line.get_color(), alpha=0.15, lw=0)
        needed = float(row["n_needed"])
        if np.isfinite(needed) and needed in n:
            a.plot(needed, float(row["expected_width"].sel(n=needed)), "*", ms=12, color=line.get_color())
    target = float(plan_ds.attrs["target_width"])
    for a in panels:
        a.axhline(target, color="k", ls="--", lw=1, label=f"target {target:g}")
        a.set_xscale("log")
        a.grid(alpha=0.3, which="both")
    what = "simulated futures, refitted" if plan_ds.attrs.get("simulated", True) else "today's band"
    label_panels(panels, "samples per task", f"width of the {plan_ds.attrs.get('ci_prob', 0.9):.0%} band",
                 f"Band of pass@{plan_ds.attrs.get('k', '?')} against samples per task ({what}; * = n needed)",
                 fontsize=10)
    if panels.size > 1:
        panels[0].legend(handles=panels[0].lines[-1:], fontsize=7)  # the target; the titles name the configs
        return panels
    panels[0].legend(fontsize=7, ncol=2 if plan_ds.sizes["config"] > 6 else 1)
    return panels[0]


def _plan_args(k, target_width, n_sims):
    """:func:`plan`'s k (one value), target width and number of simulations, checked."""
    kk = as_k(k)
    if kk.size != 1:
        raise ValueError(f"k must be one value for plan(); got {k!r}")
    if isinstance(target_width, bool) or not isinstance(target_width, numbers.Real) or not 0 < target_width < 1:
        raise ValueError(f"target_width must be in (0, 1); got {target_width!r}")
    return kk, float(target_width), check_positive_int(n_sims, name="n_sims")


def _plan_result(mean, sd, now, reached, needed, configs, n_grid, attrs) -> xr.Dataset:
    """:func:`plan`'s dataset."""
    return xr.Dataset({"expected_width": (("config", "n"), mean), "width_sd": (("config", "n"), sd),
                       "current_width": ("config", now), "reached": ("config", reached),
                       "n_needed": ("config", np.asarray(needed, float))},
                      coords={"config": configs, "n": n_grid}, attrs=attrs)


def _candidate_sets(fit, theta, model, j: int, n, c, rng, n_draws: int, pool: int) -> list:
    """``[(cand, w)]`` of config ``j``'s tasks whose variance reductions :func:`allocate` averages.

    One set for a model; for a stack, one per candidate, each under its own posterior (its draws of the stack's),
    weighed equally: beyond the samples drawn the stack's band is the hull of its candidates' bands, which
    shrinks only as each of them does, and the stacked mixture's variance is low where a candidate of high
    weight is sure (a task that never passed is p = 0 to zoibb) while another, inside the hull, is not.
    """
    if model.joint:  # per task: given the other configs' counts, weighed by its own
        cand = model.task_candidates(fit.posterior, n, c, j, rng, n_draws, pool)
        return [(cand, _weights_on(cand, n[j], c[j]))]
    flat = theta.isel(config=j).stack(s=("chain", "draw")).transpose("s", "param").values
    if not getattr(model, "components", None):
        return [_task_weights(flat, model, n[j], c[j], rng, n_draws, pool)]
    comp = flat[:, 0].astype(int)
    return [_task_weights(flat[comp == i], model, n[j], c[j], rng, n_draws, pool) for i in np.unique(comp)]


def _config_reduction(sets: list, k: int, units: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Each task's posterior variance of pass@k and its reductions (task, units + 1), averaged over the sets.

    The reductions are those of 0, 1, ..., ``units`` units of ``step`` more samples.
    """
    var, vr = 0.0, 0.0
    for cand, w in sets:
        f = _passk_of(cand, k)
        var = var + (_wmean(w, f**2) - _wmean(w, f) ** 2) / len(sets)
        vr = vr + np.column_stack([np.zeros(w.shape[0])] + [_variance_reduction(cand, w, k, u * step)
                                                            for u in range(1, units + 1)]) / len(sets)
    return var, vr


def _task_weights(flat: np.ndarray, model, n: np.ndarray, c: np.ndarray, rng, n_draws: int, pool: int):
    """Candidate p's (hyperparameter draws x population draws) and each task's posterior weights on them.

    ``flat``: one config's posterior draws (draw, param), packed as :func:`~bayespass.models.stack.theta_of` packs.
    """
    pick = flat[rng.choice(flat.shape[0], size=min(n_draws, flat.shape[0]), replace=False)]
    cand = np.clip(model.draw_p(pick, pool, rng).ravel(), 0.0, 1.0)
    return cand, _weights_on(cand, n, c)


def _weights_on(cand: np.ndarray, n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each task's posterior weights (task, pool) on candidate p's drawn from its prior: the binomial likelihood.

    ``cand``: one set for every task (pool,), or one per task (task, pool).
    """
    return _normalised(_binom_loglik(n[:, None], c[:, None], cand))


def _binom_loglik(n: np.ndarray, c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``c log p + (n - c) log(1 - p)``, exact at p = 0 and 1: a term whose count is 0 is 0 (0 log 0 = 0).

    Written as the products it made NaN there, and NaN was read as impossible: a task that never passed gave no
    weight to p = 0, the atom of zoibb, flex, lnorm and their stack that says "never".
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, c * np.log(p), 0.0) + np.where(n - c > 0, (n - c) * np.log1p(-p), 0.0)


def _normalised(lw: np.ndarray) -> np.ndarray:
    """Weights ``exp(lw)`` normalised over the last axis."""
    w = np.exp(lw - lw.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def _binom_pmf(y: np.ndarray, m: int, p: np.ndarray) -> np.ndarray:
    """Binomial(m, p) pmf at y in log space, exact at p = 0 and 1 (scipy's raises OverflowError at p ~ 1e-47)."""
    from scipy.special import gammaln

    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.where(y > 0, y * np.log(p), 0.0) + np.where(m - y > 0, (m - y) * np.log1p(-p), 0.0)
    return np.exp(gammaln(m + 1) - gammaln(y + 1) - gammaln(m - y + 1) + log_p)


def _passk_of(cand: np.ndarray, k: int) -> np.ndarray:
    """``1 - (1 - p)^k`` at the candidate p's (exactly 1 at p = 1)."""
    with np.errstate(divide="ignore"):
        return -np.expm1(k * np.log1p(-cand))


def _variance_reduction(cand: np.ndarray, w: np.ndarray, k: int, m: int) -> np.ndarray:
    """Return each task's expected reduction of posterior variance of pass@k from ``m`` more samples.

    ``sum_y P(y) (E[f | y] - E[f])^2`` with ``f(p) = 1 - (1 - p)^k`` and y ~ Binomial(m, p) under the
    task's posterior: exact over the candidate set, two matrix products.  ``cand``: one set for every task
    (pool,), or one per task (task, pool), as ``w``.
    """
    f = _passk_of(cand, k)
    if cand.ndim == 2:  # candidates of their own per task ('shared'): (task, pool), in blocks of tasks
        y, step = np.arange(m + 1), max(1, 2_000_000 // (cand.shape[1] * (m + 1)))
        out = np.empty(cand.shape[0])
        for lo in range(0, cand.shape[0], step):
            sl = slice(lo, lo + step)
            pmf = _binom_pmf(y[None, None, :], m, cand[sl, :, None])  # (task, pool, y)
            p_y = np.einsum("tp,tpy->ty", w[sl], pmf)
            ef_y = np.einsum("tp,tpy->ty", w[sl] * f[sl], pmf) / np.maximum(p_y, 1e-300)
            out[sl] = (p_y * (ef_y - _wmean(w[sl], f[sl])[:, None]) ** 2).sum(1)
        return out
    pmf = _binom_pmf(np.arange(m + 1)[None, :], m, cand[:, None])  # (pool, y)
    p_y = w @ pmf
    ef_y = (w * f) @ pmf / np.maximum(p_y, 1e-300)
    return (p_y * (ef_y - (w @ f)[:, None]) ** 2).sum(1)


def _wmean(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each task's weighted mean of ``x`` at the candidates: one set for all (pool,) or one per task (task, pool)."""
    return w @ x if x.ndim == 1 else (w * x).sum(-1)


def allocate(fit, *, k, budget: int, step: int = 1, pair=None, max_n=None, n_draws: int = 20, pool: int = 500,
             seed: int = 0) -> xr.Dataset:
    """Say which tasks (and configs) to sample next so the pass@k band, or the one of A - B, shrinks fastest.

    Each (config, task) is scored by the expected reduction of the posterior variance of the
    dataset-level pass@k (the mean over a config's tasks) from ``step`` more samples, computed exactly
    by preposterior analysis over the task's posterior (hyperparameter draws x the fitted population,
    reweighted by the task's counts; for a stack, the mean of its candidates' reductions, each under its own
    posterior, as its band beyond the samples is the hull of theirs).  ``budget`` samples are given out
    greedily in units of ``step``,
    each unit to the largest marginal reduction (the reduction of a task's next unit given those it
    already has), so sure tasks (all pass at large n) get nothing and the tasks that decide the band
    (e.g. all-fail tasks at large k: is p tiny or zero?) get most.  A task a config never ran (n = 0) is not
    part of that config's pass@k (the mean over the tasks it ran) and gets none.

    Parameters
    ----------
    fit : arviz.InferenceData or xarray.DataTree
        A fit of a per-config model, ``"auto"`` or ``"shared"`` (:func:`bayespass.fit`), or a run
        (``bp.load_run``: its main fit).  With ``shared`` a task's candidate p's are drawn given the other
        configs' counts (its difficulty) and weighed by its own; a pair's variance is the sum of the two
        configs' (their covariance through the shared tasks is not counted).
    k : int
        The pass@k whose band should shrink.
    budget : int
        Samples to give out.
    step : int
        Samples per unit (a task gets a multiple of it).
    pair : (str, str), optional
        Shrink the uncertainty of pass@k[A] - pass@k[B] (only those configs get samples); default: every
        config's band.
    max_n : int or xarray.DataArray, optional
        Most samples a (config, task) can have in all (e.g. the replayed samples on disk): one integer for
        every task, or an array over ``(config, task)``; units beyond it are never given, so fewer than
        ``budget`` samples may be given out.
    n_draws, pool : int
        Hyperparameter draws and population draws per hyperparameter draw (the candidate p's).
    seed : int
        Seed of the candidate draws.

    Returns
    -------
    xarray.Dataset
        Over ``(config, task)``: ``n_more`` (samples to draw next) and ``gain`` (expected reduction of
        the variance of the config's dataset pass@k from the first unit); over ``config``: ``to_identify``,
        the fewest samples after which pass@k is within the samples drawn
        (:func:`bayespass.data.counts.samples_to_identify`; 0 where it is already).  Beyond them a stack's band
        is the hull of its candidates' bands, which the allocation shrinks; within them it is the narrower
        band of their mixture (``rcParams["stats.stack_band"]``).  Topping every task up to k samples once the
        mixture's band is narrow enough saved fewer samples in simulation than going on with this allocation
        (``benchmarks/RESULTS.md``, "`allocate` of the default on all four families").  ``attrs``: ``k``, ``budget``,
        ``step``, ``expected_variance_reduction`` (of the allocation, summed over configs) and
        ``task_variance``, what it reduces: the part of the posterior variance of pass@k (summed over the
        configs given samples: of A - B with a pair) that comes from the tasks' own p, given the
        hyperparameters (their share is not counted; for a stack, the mean of its candidates').
    """
    fit = as_fit(fit, what="allocate")
    kk = as_k(k)
    if kk.size != 1:
        raise ValueError(f"k must be one value for allocate(); got {k!r}")
    budget, step = check_positive_int(budget, name="budget"), check_positive_int(step, name="step")
    check_seed(seed)
    model = _plannable_model(fit, what="allocate")
    configs = [str(x) for x in fit.observed_data.config.values]
    chosen = _check_pair(pair, configs)
    n = fit.constant_data["n"].transpose("config", "task").values.astype(np.int64)
    c = fit.observed_data["c"].transpose("config", "task").values.astype(np.int64)
    rng = np.random.default_rng(seed)
    units = max(1, min(budget // step, 16))
    gains = np.full(n.shape + (units,), -1.0)  # marginal reduction of the u-th unit (-1: never given)
    now = 0.0  # the tasks' part of the posterior variance of pass@k (of A - B with a pair), before
    theta = None if model.joint else theta_of(fit.posterior)  # packed once for every config
    for j in chosen:
        scale = 1.0 / max(int((n[j] > 0).sum()), 1) ** 2  # pass@k of a config is the mean over its tasks
        var, vr = _config_reduction(_candidate_sets(fit, theta, model, j, n, c, rng, n_draws, pool), int(kk[0]),
                                    units, step)
        now += float((var * (n[j] > 0)).sum()) * scale
        gains[j] = np.maximum(np.diff(vr, axis=1), 0.0) * scale * (n[j] > 0)[:, None]
    if max_n is not None:
        cap = _cap(max_n, configs, fit.observed_data.task.values)
        gains[n[:, :, None] + step * np.arange(1, units + 1) > cap[:, :, None]] = -1.0
    order = np.argsort(-gains, axis=None, kind="stable")[: budget // step]
    order = order[gains.ravel()[order] >= 0]
    jj, tt, _ = np.unravel_index(order, gains.shape)
    n_more = np.zeros(n.shape, np.int64)
    np.add.at(n_more, (jj, tt), step)
    return xr.Dataset({"n_more": (("config", "task"), n_more),
                       "gain": (("config", "task"), np.maximum(gains[..., 0], 0.0)),
                       "to_identify": ("config", samples_to_identify(n, int(kk[0])))},
                      coords={"config": configs, "task": fit.observed_data.task.values},
                      attrs={"k": int(kk[0]), "budget": int(budget), "step": int(step),
                             "pair": "" if pair is None else f"{pair[0]} - {pair[1]}",
                             "expected_variance_reduction": float(gains.ravel()[order].sum()),
                             "task_variance": now})


def identify_note(fit, k: int) -> str | None:
    """Say, for a stacked fit, which configs' pass@k is beyond the samples drawn and what topping up to k costs.

    Beyond them the stack's band spans its candidates' disagreement (``rcParams["stats.stack_band"]``:
    "hull-short", on the tasks with fewer than k samples; "hull-beyond", the hull of their bands); once every
    task but the 1% furthest short has k samples it is their mixture's band, narrower
    (:func:`bayespass.data.counts.samples_to_identify`).  None for any other fit, or where every config's
    pass@k is within its samples.
    """
    idata = as_fit(fit, what="identify_note")
    rule = rcParams["stats.stack_band"]
    if "stack_components" not in idata.posterior.attrs or rule not in ("hull-beyond", "hull-short"):
        return None
    n = idata.constant_data["n"].transpose("config", "task")
    need = samples_to_identify(n.values, int(k))
    if not need.any():
        return None
    each = ", ".join(f"{c} {int(v)}" for c, v in zip(n.config.values, need, strict=True) if v > 0)
    what = ("widened by its candidates' disagreement on the tasks with fewer than {k} samples, which narrows "
            "as tasks are topped up to {k}" if rule == "hull-short" else
            "the hull of its candidates' bands, which adaptive allocation shrinks").format(k=k)
    return (f"pass@{k} is beyond the samples drawn for {int((need > 0).sum())} config(s): there the stacked fit's "
            f"band is {what}. Once 99% of a config's tasks (all, under 100 tasks) have {k} samples it is their "
            f"mixture's band; samples that takes, per config: {each}")


def _cap(max_n, configs, tasks) -> np.ndarray:
    """Return ``max_n`` as a (config, task) array aligned with the fit (one integer: the same cap everywhere)."""
    if isinstance(max_n, int | np.integer) and not isinstance(max_n, bool) and max_n >= 0:
        return np.full((len(configs), len(tasks)), int(max_n), np.int64)
    if not isinstance(max_n, xr.DataArray) or set(max_n.dims) != {"config", "task"}:
        got = f"dims {max_n.dims}" if isinstance(max_n, xr.DataArray) else \
            repr(max_n) if isinstance(max_n, int | float | str) else type(max_n).__name__
        raise ValueError(f"max_n must be a non-negative integer or an xarray.DataArray over (config, task); got {got}")
    try:
        return max_n.sel(config=configs, task=tasks).transpose("config", "task").values
    except KeyError as err:
        raise ValueError(f"max_n must cover every config and task of the fit: {err}") from None


def _check_pair(pair, configs: list) -> list[int]:
    """Return the indices of the configs that get samples: both of ``pair``, or all."""
    if pair is None:
        return list(range(len(configs)))
    pair = split_pair(pair, configs)
    if not (isinstance(pair, list | tuple) and len(pair) == 2) or any(p not in configs for p in pair) \
            or pair[0] == pair[1]:
        raise ValueError(f"pair must be two different configs of the fit, e.g. ({configs[0]!r}, "
                         f"{configs[-1]!r}); got {pair!r}")
    return [configs.index(p) for p in pair]
