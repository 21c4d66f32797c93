"""``hier``: configs that share task difficulty (a joint model over configs; MCMC only).

::

    d_i = sigma_d * z_i,  z ~ ZeroSumNormal(1)          (non-centred, sum_i d_i = 0)
    alpha_j ~ Normal(0, 2),  sigma_d ~ HalfNormal(2)
    m_ij = logistic(alpha_j - d_i)
    log phi_j ~ Normal(lambda, 1.5),  lambda ~ Normal(log 5, 1.5)   (overdispersion, a common level)
    c_ij ~ BetaBinomial(n_ij, m_ij phi_j, (1 - m_ij) phi_j)

A config with few samples borrows strength from the others through d, and a config
with one sample per task, whose counts do not tell its dispersion, borrows the others'
through lambda (as in ``shared``).  Its log-likelihood (for LOO) is conditional on the
shared d_i.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..stats import kernels
from .base import Model, register


@register
class Hier(Model):
    """Shared task difficulty across configs (logit-IRT with Beta-Binomial noise)."""

    name = "hier"
    joint = True
    coords = ()
    description = "logit m_ij = alpha_j - d_i (shared difficulty), BetaBinomial(n, m phi, (1-m) phi)"
    free = ("alpha", "sigma_d", "z", "log_phi_level", "log_phi")

    def build_pymc(self, counts):
        """Build the PyMC model on a counts dataset."""
        import pymc as pm
        import pytensor.tensor as pt

        n = counts.n.values.astype("int64")
        c = counts.c.values.astype("int64")
        coords = {"config": counts.config.values.tolist(), "task": counts.task.values.tolist()}
        with pm.Model(coords=coords) as model:
            n_data = pm.Data("n", n, dims=("config", "task"))
            alpha = pm.Normal("alpha", 0.0, 2.0, dims="config")
            sigma_d = pm.HalfNormal("sigma_d", 2.0)
            z = pm.ZeroSumNormal("z", sigma=1.0, dims="task")
            d = pm.Deterministic("d", sigma_d * z, dims="task")
            level = pm.Normal("log_phi_level", np.log(5.0), 1.5)
            log_phi = pm.Normal("log_phi", level, 1.5, dims="config")
            phi = pm.Deterministic("phi", pt.exp(log_phi), dims="config")
            mean = pm.math.sigmoid(alpha[:, None] - d[None, :])
            pm.BetaBinomial("c", n=n_data, alpha=mean * phi[:, None], beta=(1 - mean) * phi[:, None],
                            observed=c, dims=("config", "task"))
        return model

    @staticmethod
    def _ab(post):
        mean = expit(post["alpha"].values[..., :, None] - post["d"].values[..., None, :])
        phi = post["phi"].values[..., :, None]
        return mean * phi, (1 - mean) * phi

    def task_q(self, post, n, c, k):
        """``E[(1-p)^k]`` per observed (config, task): (chain, draw, obs, K), weights, config index."""
        a, b = self._ab(post)
        obs = n > 0
        cfg_idx, task_idx = np.nonzero(obs)
        a, b = a[..., cfg_idx, task_idx][..., None], b[..., cfg_idx, task_idx][..., None]
        pred = kernels.passk_bb_predictive(n[obs][:, None], c[obs][:, None], k, a, b)
        return 1.0 - pred, np.ones(obs.sum()), cfg_idx

    def replicate_p(self, post, rng, n_tasks=None):
        """Draw new p per (config, task) keeping d_i, for the posterior predictive."""
        a, b = self._ab(post)
        return rng.beta(a, b)

    def loglik_tasks(self, post, n, c):
        """Log-likelihood per (chain, draw, config, task), conditional on d."""
        a, b = self._ab(post)
        return np.where(n > 0, kernels.bb_logpmf(c, n, a, b), 0.0)
