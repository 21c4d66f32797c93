"""The two array backends evaluate each formula alike: NumPy against scipy, PyTensor against NumPy."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import betaln, gammaln, logsumexp, softmax

from bayespass._xp import NP, log_binom, pt_backend

X = np.array([[-np.inf, 0.0, 2.0], [1e3, 1e3 - 1.0, -5.0], [-np.inf, -np.inf, -np.inf]])


def test_numpy_backend_matches_scipy_including_infinities():
    assert_allclose(NP.logsumexp(X[:2]), logsumexp(X[:2], axis=-1), rtol=1e-14)
    assert NP.logsumexp(X)[2] == -np.inf  # all terms -inf: -inf, not NaN
    assert_allclose(NP.softmax(X[:2]), softmax(X[:2], axis=-1), rtol=1e-14)
    n, c = np.array([10.0, 50.0, 3.0]), np.array([0.0, 17.0, 3.0])
    assert_allclose(log_binom(n, c), gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1))
    assert_allclose(np.exp(log_binom(np.array(50.0), np.array(17.0))), 9847379391150.0, rtol=1e-12)


def test_pytensor_backend_evaluates_the_same_formulas():
    pytest.importorskip("pytensor")
    import pytensor

    pt = pt_backend()
    x = pytensor.tensor.matrix("x")
    f = pytensor.function([x], [pt.logsumexp(x, axis=-1), pt.softmax(x, axis=-1)])
    lse, sm = f(X[:2])
    assert_allclose(lse, NP.logsumexp(X[:2]), rtol=1e-12)
    assert_allclose(sm, NP.softmax(X[:2]), rtol=1e-12)
    a, b = pytensor.tensor.vector("a"), pytensor.tensor.vector("b")
    g = pytensor.function([a, b], pt.betaln(a, b))
    av, bv = np.array([0.3, 2.0, 150.0]), np.array([0.7, 5.0, 400.0])
    assert_allclose(g(av, bv), betaln(av, bv), rtol=1e-10)
