"""Compress (config, task) counts to unique (config, n, c) pairs.

Every closed-form pass@k quantity of a task depends on its counts only
through ``(n, c)``, so estimators are evaluated once per distinct pair and
fanned back out (or averaged with weights).  With ``n`` fixed this turns
10^6 tasks into ``n + 1`` evaluations per config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["PairTable", "pair_table"]


@dataclass(frozen=True)
class PairTable:
    """Distinct ``(config, n, c)`` triples of a ``(config, task)`` counts array."""

    cfg: np.ndarray  #: config index of each unique pair, shape (U,)
    n: np.ndarray  #: n of each unique pair
    c: np.ndarray  #: c of each unique pair
    weight: np.ndarray  #: number of tasks with that pair
    inverse: np.ndarray  #: (config, task) -> unique pair index
    n_config: int

    @property
    def observed(self) -> np.ndarray:
        """Mask of pairs with ``n > 0``."""
        return self.n > 0

    def n_observed(self) -> np.ndarray:
        """Return the number of observed tasks per config, shape (config,)."""
        return np.bincount(self.cfg, weights=self.weight * self.observed, minlength=self.n_config)

    def dataset_mean(self, values: np.ndarray) -> np.ndarray:
        """Average per-pair ``values`` (U, ...) over observed tasks of each config.

        NaN in an observed pair propagates to its config (as it should: the
        estimator is undefined for that task); unobserved pairs are ignored.
        """
        values = np.asarray(values, dtype=float)
        flat = values.reshape(values.shape[0], -1)
        w = self.weight * self.observed
        flat = np.where(self.observed[:, None], flat, 0.0)
        mat = sp.csr_matrix((w, (self.cfg, np.arange(len(w)))), shape=(self.n_config, len(w)))
        total = mat @ flat
        nan_cfg = mat @ np.isnan(flat).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = total / self.n_observed()[:, None]
        out[nan_cfg > 0] = np.nan
        return out.reshape((self.n_config,) + values.shape[1:])

    def per_task(self, values: np.ndarray) -> np.ndarray:
        """Fan per-pair ``values`` (U, ...) out to (config, task, ...)."""
        return np.asarray(values)[self.inverse]


def pair_table(n: np.ndarray, c: np.ndarray) -> PairTable:
    """Build the :class:`PairTable` of integer arrays ``n``, ``c`` of shape (config, task)."""
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    n_config = n.shape[0]
    base = int(n.max(initial=0)) + 1
    cfg_of = np.broadcast_to(np.arange(n_config, dtype=np.int64)[:, None], n.shape)
    if n_config * base * base < 2**62:  # one integer key per row: the fast path
        key = (cfg_of * base + n) * base + c
        keys, inverse, weight = np.unique(key.ravel(), return_inverse=True, return_counts=True)
        cfg, rem = np.divmod(keys, base * base)
        un, uc = np.divmod(rem, base)
    else:  # n so large that the key would overflow int64: unique rows instead
        rows = np.stack([cfg_of.ravel(), n.ravel(), c.ravel()], axis=1)
        keys, inverse, weight = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        cfg, un, uc = keys.T
    return PairTable(cfg=cfg, n=un, c=uc, weight=weight.astype(float),
                     inverse=inverse.reshape(n.shape), n_config=n_config)
