"""One object per model: priors, marginal likelihood, predictive pass@k and replication.

A model of per-task success probability ``p`` is a :class:`Model` subclass in a
file of its own, registered with :func:`register`.  Everything else is generic:

* the PyMC builder (:func:`bayespass.build_model`) turns ``logprior`` and
  ``loglik``, written once for both NumPy and PyTensor (the ``xp`` argument,
  :data:`NP` or :func:`pt_backend`), into a PyMC model over the unconstrained
  vector ``theta`` of each config (NUTS, ``method="mcmc"``);
* the fast path (``method="eb"``) maximises the same log density from an
  empirical-Bayes start and samples it with a vectorised HMC in NumPy
  (:mod:`bayespass.models.hmc`), using ``logp_grad``;
* ``q`` gives the Rao-Blackwellised posterior predictive ``E[(1-p)^k | n, c,
  theta]`` of a task for pass@k curves at any k; ``draw_p`` replicates new
  tasks for posterior predictive checks; ``loglik`` per (n, c) pair serves LOO
  and cross-validation.

Per-config models see their data as distinct ``(n, c)`` pairs (:class:`PairData`):
the likelihood of a task depends on it only through its pair, so the work
scales with distinct pairs, not with tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._xp import NP, betaln, log_binom, pt_backend

__all__ = ["Model", "PairData", "NP", "pt_backend", "register", "get_model", "fitted_model", "MODELS", "betaln",
           "log_binom", "BLOCK_CELLS"]

#: The memory budget of the predictive, in float64 cells of one working array: the predictive calls
#: :meth:`Model.q` on blocks of pairs of at most this many (draw x pair x k) cells, and a model whose
#: ``q`` holds more per (draw, pair, k) (quadrature nodes) splits its pairs to keep within it.
BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class PairData:
    """Distinct (n, c) pairs of each config, padded to a common length.

    ``n``, ``c``, ``w`` have shape (config, U): the pair's counts and how many
    tasks have it (0 for padding); ``table`` maps tasks to pairs.
    """

    n: np.ndarray
    c: np.ndarray
    w: np.ndarray
    table: object = None

    @classmethod
    def from_counts(cls, counts) -> PairData:
        """Pairs of the observed tasks (n > 0) of a counts dataset."""
        from ..stats.pairs import pair_table

        table = pair_table(counts.n.values, counts.c.values)
        return cls.from_table(table)

    @classmethod
    def from_table(cls, table) -> PairData:
        """Pairs from a :class:`bayespass.stats.pairs.PairTable`."""
        obs = table.observed
        n_cfg = table.n_config
        per = np.bincount(table.cfg[obs], minlength=n_cfg)
        u = max(1, int(per.max()) if per.size else 1)
        n = np.ones((n_cfg, u))
        c = np.zeros((n_cfg, u))
        w = np.zeros((n_cfg, u))
        slot = np.zeros(n_cfg, int)
        for i in np.flatnonzero(obs):
            j = table.cfg[i]
            n[j, slot[j]], c[j, slot[j]], w[j, slot[j]] = table.n[i], table.c[i], table.weight[i]
            slot[j] += 1
        return cls(n, c, w, table)

    @property
    def n_config(self) -> int:
        """Number of configs."""
        return self.n.shape[0]

    def task_slots(self) -> np.ndarray:
        """Return (config, task): the column of ``n``, ``c``, ``w`` holding each task's pair; -1 for n = 0."""
        table = self.table
        slot = np.full(table.cfg.size, -1)
        counter = np.zeros(table.n_config, int)
        for i in np.flatnonzero(table.observed):  # in from_table's order
            slot[i] = counter[table.cfg[i]]
            counter[table.cfg[i]] += 1
        return slot[table.inverse]


class Model:
    """Base class of a per-config model of task success probability (see the module docstring).

    Subclasses set ``name`` and ``coords`` (names of the unconstrained
    coordinates of ``theta``) and implement :meth:`logprior`, :meth:`loglik`,
    :meth:`q`, :meth:`draw_p`, :meth:`named` and :meth:`start`; :meth:`logp_grad`
    defaults to central differences and is worth overriding for speed.  An
    override may write the density out for speed, but it must equal
    ``logprior + sum(w * loglik)`` (the specification): ``tests/models/test_specs.py``
    checks both its value and its gradient for every registered model, so a
    prior changed in one place cannot split the fast path from PyMC unnoticed.

    Shapes: ``theta`` is ``batch + (P,)``; :meth:`loglik` is called with
    ``theta[..., None, :]`` and the arrays of :meth:`prepare` (config, U[, ...]),
    which broadcast against the batch (NumPy batches are (chains, config)).
    """

    name: str = ""
    coords: tuple[str, ...] = ()
    description: str = ""
    joint: bool = False
    #: whether :meth:`logp` (the density alone) is cheaper than :meth:`logp_grad`: the importance
    #: weights of the fast path (thousands of proposals) then use it (measured per model, 400 x 34)
    cheap_logp: bool = False

    # -- the specification --------------------------------------------------------------
    def prepare(self, data: PairData) -> dict:
        """Data-dependent constants for :meth:`loglik` (default: ``n`` and ``c``)."""
        return {"n": data.n, "c": data.c}

    def logprior(self, theta, xp):
        """Log prior density of the unconstrained ``theta`` (Jacobian included), shape ``batch``."""
        raise NotImplementedError

    def loglik(self, theta, aux: dict, xp):
        """Marginal log-likelihood ``log P(c | n, theta)`` of each pair, shape ``batch + (U,)``."""
        raise NotImplementedError

    def q(self, theta, n, c, k) -> np.ndarray:
        """Posterior predictive ``E[(1-p)^k | n, c, theta]`` (NumPy); theta (..., 1, P), n/c (..., U) -> (..., U, K)."""
        raise NotImplementedError

    def draw_p(self, theta, size: int, rng) -> np.ndarray:
        """Success probabilities of ``size`` new tasks per draw: theta (..., P) -> (..., size)."""
        raise NotImplementedError

    def named(self, theta) -> dict[str, np.ndarray]:
        """Constrained, named quantities of ``theta`` (..., P) for the posterior group, each (...)."""
        raise NotImplementedError

    def start(self, data: PairData) -> np.ndarray:
        """Return a starting point per config, shape (config, P)."""
        raise NotImplementedError

    def sample_prior(self, size: int, rng) -> np.ndarray:
        """Draws of ``theta`` from the prior, shape (size, P) (for simulation-based calibration)."""
        raise NotImplementedError

    def as_fitted(self, settings: dict) -> Model:
        """Return this model with the settings a fit of it recorded (``posterior.attrs["model_settings"]``).

        A model without settings is always itself; a model with some (flex) returns itself when they are its
        own and a new instance with them otherwise, so a fit is read with the model it was made with.
        """
        return self

    def warm(self) -> None:
        """Load what the model compiles (its compiled loops), so that forked workers inherit it; no-op by default.

        A model with compiled loops makes one tiny call of each here (on :func:`warm_data`).
        """

    # -- generic ---------------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        """Number of unconstrained coordinates."""
        return len(self.coords)

    #: box outside which the NumPy path treats the density as 0 (a region of negligible prior mass
    #: where the likelihood loses floating-point precision, e.g. kappa > e^12)
    bound: float = 25.0

    def bounds(self) -> np.ndarray:
        """(P, 2) lower and upper bounds of ``theta`` for the NumPy samplers."""
        return np.tile([-self.bound, self.bound], (self.n_params, 1)).astype(float)

    def inside(self, theta) -> np.ndarray:
        """Mask of draws inside :meth:`bounds`, shape ``batch``."""
        b = self.__dict__.get("_bounds")
        if b is None:  # the samplers ask thousands of times: keep the (P, 2) array
            b = self.__dict__["_bounds"] = np.asarray(self.bounds(), float)
        return ((theta >= b[:, 0]) & (theta <= b[:, 1])).all(axis=-1)

    def logp(self, theta, aux: dict, w) -> np.ndarray:
        """Log posterior density (up to a constant), NumPy; theta (B, config, P) -> (B, config)."""
        with np.errstate(all="ignore"):
            return self.logp_of(theta, self.loglik(theta[..., None, :], aux, NP), w)

    def logp_of(self, theta, ll, w) -> np.ndarray:
        """Log posterior from the pointwise log-likelihood ``ll`` (B, config, U): the one place that weighs it."""
        with np.errstate(all="ignore"):
            out = self.logprior(theta, NP) + np.sum(np.where(w > 0, w * ll, 0.0), axis=-1)
        return np.where(np.isfinite(out) & self.inside(theta), out, -np.inf)

    def logprior_grad(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """Log prior and its gradient (NumPy); the default uses central differences."""
        lp = self.logprior(theta, NP)
        grad = np.zeros_like(theta)
        h = 1e-5
        for i in range(theta.shape[-1]):
            e = np.zeros(theta.shape[-1])
            e[i] = h
            grad[..., i] = (self.logprior(theta + e, NP) - self.logprior(theta - e, NP)) / (2 * h)
        return lp, grad

    def logp_grad(self, theta, aux: dict, w) -> tuple[np.ndarray, np.ndarray]:
        """Log posterior and its gradient (NumPy); the default uses central differences."""
        lp = self.logp(theta, aux, w)
        grad = np.zeros_like(theta)
        h = 1e-5
        for i in range(theta.shape[-1]):
            e = np.zeros(theta.shape[-1])
            e[i] = h
            grad[..., i] = (self.logp(theta + e, aux, w) - self.logp(theta - e, aux, w)) / (2 * h)
        return lp, np.where(np.isfinite(grad), grad, 0.0)

    def __repr__(self) -> str:
        return f"<bayespass model {self.name!r}: {self.description}>"


_REGISTRY: dict[str, type[Model]] = {}
#: registered model names (filled as model modules are imported)
MODELS: list[str] = []


def register(cls: type[Model]) -> type[Model]:
    """Class decorator: make a model available by its ``name`` (``bp.fit(counts, name)``)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    if cls.name not in MODELS:
        MODELS.append(cls.name)
    return cls


def get_model(name) -> Model:
    """Return the model registered under ``name`` (a :class:`Model` instance passes through).

    The built-in models register themselves when :mod:`bayespass.models` is imported.
    """
    if isinstance(name, Model):
        return name
    if name not in _REGISTRY:
        raise ValueError(f"model={name!r} is not supported; choose one of {sorted(_REGISTRY) + ['auto']}")
    return _REGISTRY[name]()


def is_joint(name) -> bool:
    """Whether the model ``name`` fits all configs jointly (``"auto"``, a stack of per-config models: no)."""
    return name != "auto" and get_model(name).joint


def fitted_model(name: str, settings=None) -> Model:
    """Return the model a fit was made with: ``name`` with the settings recorded on the fit.

    ``settings`` is a dict or its ``repr`` (as ``posterior.attrs["model_settings"]`` holds it), or None: the
    model as registered.  A fit of ``Flex(kappa_max=None)`` is then read with that model, not the default.
    """
    import ast

    m = get_model(name)
    if settings is None:
        return m
    if isinstance(settings, str):
        try:
            settings = ast.literal_eval(settings)
        except (ValueError, SyntaxError) as err:
            raise ValueError(f"model_settings={settings!r} recorded on a {name!r} fit is not a dict literal") from err
    if not isinstance(settings, dict):
        raise ValueError(f"model_settings={settings!r} recorded on a {name!r} fit is not a dict")
    return m.as_fitted(settings)


def warm_data() -> PairData:
    """Three pairs (c = 0, between, c = n) of one config: what :meth:`Model.warm` fits its compiled loops on."""
    return PairData(np.full((1, 3), 5.0), np.array([[0.0, 2.0, 5.0]]), np.ones((1, 3)))
