"""Designs shared by the tests of the models."""

import numpy as np
import pytest
from scipy.special import expit

import bayespass as bp


def _one_and_ten(phi: float = 0.7):
    """Four configs of one truth (dispersion ``phi``), a and b with 10 samples per task, x and y with one.

    Returns ``(counts, p)``: 300 tasks of shared difficulty (logit N(0.3, 1.5)), p (4, 300) the truth.
    """
    rng = np.random.default_rng(4)
    T = 300
    mu = expit(rng.normal(0.3, 1.5, T))
    p = rng.beta(mu * phi, (1 - mu) * phi, (4, T))
    n = np.repeat([[10], [10], [1], [1]], T, axis=1)
    counts = bp.make_counts(n, rng.binomial(n, p), task=[f"t{i}" for i in range(T)], config=["a", "b", "x", "y"])
    return counts, p


@pytest.fixture(scope="module")
def one_and_ten():
    """:func:`_one_and_ten` with p spread to 0 and 1 about each task's mean (phi = 0.7), as real code models'."""
    return _one_and_ten(0.7)


@pytest.fixture(scope="module")
def one_and_ten_design():
    """The one-and-ten design as a function of the truth's dispersion phi (:func:`_one_and_ten`)."""
    return _one_and_ten


@pytest.fixture
def random_pairs():
    """:func:`_random_pairs`, for the compiled loops' tests."""
    return _random_pairs


def _random_pairs(model, rng):
    """Random pairs: 1-4 configs of 2-24 pairs, ``model.prepare``d.

    Up to 2,000 samples per task, a pair with c = 0 and one with c = n in every config, zero weights among them.
    Returns ``(aux, w, n_config)``.
    """
    from bayespass.models.base import PairData

    cfg, u = rng.integers(1, 5), rng.integers(2, 25)
    n = rng.choice([1, 2, 5, 10, 50, 2000], (cfg, u)).astype(float)
    c = np.floor(rng.random((cfg, u)) * (n + 1))
    c[:, 0], c[:, 1] = 0.0, n[:, 1]
    w = rng.integers(0, 4, (cfg, u)).astype(float)
    return model.prepare(PairData(n, c, w)), w, int(cfg)
