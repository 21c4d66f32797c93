"""The PyMC model of any registered model (one builder for all of them).

A per-config model's PyMC graph is its own ``logprior`` and ``loglik`` (see
:mod:`bayespass.models.base`) evaluated with the PyTensor backend on an
unconstrained ``theta`` (dims config x param), so NUTS samples exactly the
density that the fast path (``method="eb"``) samples in NumPy.  Joint models
(``hier``) build their own graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:  # pragma: no cover
    import pymc as pm

from .base import MODELS, PairData, get_model, pt_backend

__all__ = ["MODELS", "build_model"]


def build_model(counts: xr.Dataset, model="bb", *, initval: np.ndarray | None = None) -> pm.Model:
    """Return the ``pm.Model`` of ``model`` on a validated counts dataset.

    Parameters
    ----------
    counts : xarray.Dataset
        Validated counts dataset.
    model : str or Model
        A registered model name (``bayespass.models.base.MODELS``).
    initval : ndarray, optional
        Starting point of ``theta`` (config, param); default the model's ``start``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    m = get_model(model)
    if m.joint:
        return m.build_pymc(counts)
    data = PairData.from_counts(counts)
    aux = {k: pt.as_tensor_variable(np.asarray(v, float)) for k, v in m.prepare(data).items()}
    xp = pt_backend()
    coords = {"config": counts.config.values.tolist(), "param": list(m.coords)}
    with pm.Model(coords=coords) as pm_model:
        theta = pm.Flat("theta", dims=("config", "param"),
                        initval=m.start(data) if initval is None else np.asarray(initval, float))
        pm.Potential("logprior", pt.sum(m.logprior(theta, xp)))
        ll = m.loglik(theta[:, None, :], aux, xp)
        w = pt.as_tensor_variable(data.w)
        pm.Potential("loglik", pt.sum(pt.switch(pt.gt(w, 0), w * ll, 0.0)))
    return pm_model


MODELS = MODELS  # re-exported; filled as model modules register
