"""``model="auto"``: Bayesian stacking of candidate models (Yao, Vehtari, Simpson, Gelman 2018).

Each candidate is fitted; per config, stacking weights maximise the summed
PSIS-LOO log predictive density of the weighted mixture
(``arviz.compare(method="stacking")``), and the stacked posterior is a
mixture of the candidates' posterior draws in those proportions: every draw
keeps its model (``component``; :func:`theta_of` packs the draws for the
model's functions), so curves, LOO and predictive checks work on it like on
any other fit, and each candidate's own draws stay readable by name
(``bb_mu``, ``lnorm_s``, ...).  Its pass@k bands are the hull of
the candidates' own bands (:func:`bayespass.passk_curve`): on a few hundred
tasks the candidates' LOO densities differ by a nat or two, so the weights
cannot say which extrapolation beyond the samples drawn is right.  Where every
task of a config has one sample, LOO cannot weigh the candidates at all; their
weights there are fixed (:func:`single_sample_weights`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .base import Model, fitted_model, get_model

__all__ = ["StackModel", "stack", "stacking_weights", "single_sample_weights", "model_from_posterior", "theta_of"]


class StackModel(Model):
    """A mixture of fitted models; ``theta = (component, padded parameters of that component)``."""

    name = "auto"
    description = "stacking of candidate models by their LOO predictive density"

    def __init__(self, components):
        self.components = [get_model(c) for c in components]
        self.width = max(m.n_params for m in self.components)
        self.coords = ("component",) + tuple(f"p{i}" for i in range(self.width))

    def _dispatch(self, theta, fn, out_shape_tail, *args):
        comp = np.asarray(theta[..., 0]).astype(int)
        out = None
        for i, m in enumerate(self.components):
            sel = comp == i
            if not sel.any():
                continue
            res = fn(m, theta[sel][..., 1:1 + m.n_params], *args)
            if out is None:
                out = np.full(comp.shape + res.shape[1:], np.nan)
            out[sel] = res
        return out

    def q(self, theta, n, c, k):
        # theta (..., 1, P); evaluate per component on the flattened draws
        flat = theta.reshape(-1, theta.shape[-1])
        res = self._dispatch(flat, lambda m, t: m.q(t[:, None, :], n, c, k), None)
        return res.reshape(theta.shape[:-2] + res.shape[1:])

    def draw_p(self, theta, size, rng):
        flat = theta.reshape(-1, theta.shape[-1])
        res = self._dispatch(flat, lambda m, t: m.draw_p(t, size, rng), None)
        return res.reshape(theta.shape[:-1] + (size,))

    def loglik_pairs(self, theta, n, c):
        """Log-likelihood per pair for theta (..., P) and pairs (U,) of one config."""
        flat = theta.reshape(-1, theta.shape[-1])

        def one(m, t):
            aux = m.prepare(_one_config(n, c))
            return m.loglik(t[:, None, None, :], aux, _np())[:, 0]

        res = self._dispatch(flat, one, None)
        return res.reshape(theta.shape[:-1] + (n.size,))


def _np():
    from .base import NP

    return NP


def _one_config(n, c):
    from .base import PairData

    return PairData(np.asarray(n, float)[None], np.asarray(c, float)[None], np.ones((1, np.size(n))))


def theta_of(post: xr.Dataset) -> xr.DataArray:
    """Return the posterior's ``theta`` (chain, draw, config, param), which every model's functions take.

    A stack's posterior holds each candidate's own draws (``<name>_theta``) and the candidate each draw of
    the mixture takes (``component``); its theta packs them: ``(component, that candidate's parameters,
    NaN up to the widest candidate's)``, as :class:`StackModel` reads it.  Stacks saved before held it as is.
    """
    if "theta" in post:
        return post["theta"]
    names = str(post.attrs["stack_components"]).split(",")
    model = model_from_posterior(post)
    comp = post["component"].transpose("chain", "draw", "config").values
    theta = np.full(comp.shape + (1 + model.width,), np.nan)
    theta[..., 0] = comp
    for i, name in enumerate(names):
        src = post[f"{name}_theta"].transpose("chain", "draw", "config", ...).values
        sel = comp == i
        theta[..., 1:1 + src.shape[-1]][sel] = src[sel]
    return xr.DataArray(theta, dims=("chain", "draw", "config", "param"),
                        coords={"chain": post.chain.values, "draw": post.draw.values, "config": post.config.values,
                                "param": list(model.coords)}, name="theta")


def model_from_posterior(post: xr.Dataset) -> StackModel:
    """Return the :class:`StackModel` recorded in a stacked posterior's attrs.

    Each candidate is the model its fit was made with (``attrs["stack_models"]``: name and settings per
    candidate); stacks saved before that record read each candidate as the model registered under its label.
    """
    import ast

    labels = str(post.attrs["stack_components"]).split(",")
    made = ast.literal_eval(post.attrs["stack_models"]) if "stack_models" in post.attrs else {}
    return StackModel([fitted_model(*made[label]) if label in made else label for label in labels])


def stacking_weights(fits: dict) -> xr.DataArray:
    """Stacking weights per config (config x model) from the pointwise PSIS-LOO of each fit."""
    from ..stats.loo import pointwise_loo
    from ..stats.loo import stacking_weights as weights_of

    names = list(fits)
    pw = {name: pointwise_loo(f) for name, f in fits.items()}
    configs = fits[names[0]].observed_data.config.values
    out = np.stack([weights_of(np.stack([pw[m]["elpd"][j] for m in names]), pw[names[0]]["weight"][j])
                    for j in range(len(configs))])
    return xr.DataArray(out, dims=("config", "model"), coords={"config": configs, "model": names},
                        name="stacking_weight")


def single_sample_weights(names: list) -> np.ndarray:
    """Weights of the candidates ``names`` for a config whose tasks have at most one sample each.

    There each candidate's LOO density is its predicted P(c = 1) per task, which
    every candidate fits alike, so stacking returns the weights of its prior
    (equal) whichever candidate extrapolates right: pass@k beyond k = 1 is set by
    the candidates' priors on the spread of p.  The weights then come from
    ``rcParams["stats.stack_single_weights"]`` (default ``{"zoibb": 0.7}``,
    chosen on the calibration benchmark at m = 1, benchmarks/RESULTS.md): the
    candidates it names get their weight, the others share the rest equally,
    and every candidate keeps at least ``rcParams["stats.stack_min_share"]``
    (so the band, the hull of the candidates' bands, still holds every one).
    """
    from ..defaults import rcParams

    given = rcParams["stats.stack_single_weights"]
    w = np.array([given.get(n, np.nan) for n in names], float)
    free = np.isnan(w)
    rest = 1.0 - np.nansum(w)
    w[free] = rest / free.sum() if free.any() else 0.0
    if w.sum() <= 0:
        w[:] = 1.0
    w = np.maximum(w / w.sum(), 2 * rcParams["stats.stack_min_share"])  # twice: the draws' share is random
    return w / w.sum()


def stack(fits: dict, *, seed=0):
    """Stack fitted InferenceData objects (same counts, same method) into one mixture posterior.

    Configs whose tasks have at most one sample each take the weights of
    :func:`single_sample_weights` (recorded in ``attrs["stack_single_configs"]``).
    """
    import json

    import arviz as az

    names = list(fits)
    weights = stacking_weights(fits)
    single = fits[names[0]].constant_data["n"].max("task").values <= 1
    weights.values[single] = single_sample_weights(names)
    rng = np.random.default_rng(seed)
    posts = [fits[n].posterior for n in names]
    chains, draws = posts[0].sizes["chain"], posts[0].sizes["draw"]
    coords = {"chain": np.arange(chains), "draw": np.arange(draws), "config": posts[0].config.values}
    comp = np.stack([rng.choice(len(names), size=(chains, draws), p=weights.values[j])
                     for j in range(posts[0].sizes["config"])], axis=-1)
    # every candidate's own draws under its name (NaN-free: arviz's summaries and plots read them), and which
    # candidate each draw of the mixture takes; theta_of packs them into the mixture's theta. The latter is a
    # coordinate, not a variable: an index has no mean or R-hat, and arviz.summary lists variables only
    posterior = xr.Dataset(coords=coords | {"component": (("chain", "draw", "config"), comp.astype(np.int64))})
    for name, post in zip(names, posts, strict=True):
        own = post.isel(chain=slice(chains), draw=slice(draws)).assign_coords(chain=coords["chain"],
                                                                              draw=coords["draw"])
        posterior[f"{name}_theta"] = own["theta"].rename(param=f"{name}_param")
        for v in own.data_vars:
            if v != "theta":
                posterior[f"{name}_{v}"] = own[v]
    # which model (and settings) each candidate was fitted with: a label need not be a registered name, and a
    # candidate fitted with other settings (Flex(kappa_max=None)) is read back with them
    made = {name: (str(fits[name].posterior.attrs.get("bayespass_model", name)),
                   fits[name].posterior.attrs.get("model_settings")) for name in names}
    posterior.attrs.update(stack_components=",".join(names), stack_models=repr(made),
                           stack_single_configs=json.dumps([str(c) for c in posterior.config.values[single]]))
    # the weights have no (chain, draw): a group of their own, so that arviz.summary and friends read the posterior
    stacking = xr.Dataset({"stacking_weight": weights.reset_coords(drop=True)})
    idata = az.InferenceData(posterior=posterior, sample_stats=_sample_stats(fits, comp, coords))
    idata.add_groups({"stacking": stacking}, warn_on_custom_groups=False)
    return idata, weights


def _sample_stats(fits: dict, comp: np.ndarray, coords: dict) -> xr.Dataset:
    """Return the mixture's sampler statistics: each candidate's under its name, ``diverging`` of the draws taken.

    A draw of the mixture (chain, draw) is divergent where the draw of a candidate that some config takes there
    (``comp``, (chain, draw, config)) was.
    """
    chains, draws = comp.shape[:2]
    out = xr.Dataset(coords={"chain": coords["chain"], "draw": coords["draw"]})
    diverging = np.zeros((chains, draws), bool)
    for i, (name, f) in enumerate(fits.items()):
        if "sample_stats" not in f.groups():
            continue
        own = f.sample_stats.isel(chain=slice(chains), draw=slice(draws)).assign_coords(chain=coords["chain"],
                                                                                        draw=coords["draw"])
        for v in own.data_vars:
            out[f"{name}_{v}"] = own[v]
        if "diverging" in own:
            diverging |= own["diverging"].values.astype(bool) & (comp == i).any(-1)
    out["diverging"] = (("chain", "draw"), diverging)
    return out
