"""benchmarks/passk_n_variance.py: the conservative variance of the unbiased pass@k for n/2 < k <= n."""

import numpy as np
import pytest
from scipy.special import comb
from scipy.stats import binom


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("passk_n_variance")


def test_the_exact_variance_is_the_bernoulli_variance_at_k_equal_n_and_matches_simulation(bench):
    s = np.linspace(0.0, 1.0, 11)
    q = 1 - s**10
    np.testing.assert_allclose(bench.var_u(10, 10, s), q * (1 - q), atol=1e-12)
    rng = np.random.default_rng(0)
    c = rng.binomial(10, 0.3, 400_000)
    u = 1 - comb(10 - c, 7) / comb(10, 7)
    assert bench.var_u(10, 7, np.array([0.7]))[0] == pytest.approx(u.var(), rel=0.01)


@pytest.mark.parametrize(("n", "k"), [(5, 5), (10, 8), (10, 10)])
def test_the_bound_is_conservative_non_negative_and_exact_at_p_0_and_1(bench, n, k):
    vhat = bench.bound_table(n, k)
    assert vhat.shape == (n + 1,)
    assert (vhat >= -1e-9).all() and (vhat <= 1 + 1e-9).all()
    assert vhat[0] == pytest.approx(0.0, abs=1e-9) and vhat[n] == pytest.approx(0.0, abs=1e-9)
    p = np.linspace(0.0, 1.0, 501)
    expect = binom.pmf(np.arange(n + 1)[None, :], n, p[:, None]) @ vhat
    var = bench.var_u(n, k, 1 - p)
    assert (expect >= var - 1e-7).all()  # conservative for every p
    # and not trivially so: within 1.4x of the variance where p is small (the tasks that matter beyond the data)
    small = (p > 0) & (p <= 0.05)
    assert (expect[small] <= 1.4 * var[small]).all()
