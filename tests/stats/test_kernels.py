import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy import integrate, stats

from bayespass.stats import kernels as K


def brute_unbiased(n, c, k):
    """Fraction of k-subsets of n samples (c correct) containing a correct one."""
    items = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return np.mean([any(items[i] for i in s) for s in subsets])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_unbiased_equals_brute_force(nck):
    n, c, k = nck
    assert_allclose(K.passk_unbiased(n, c, k), brute_unbiased(n, c, k), atol=1e-12)


def test_known_value_n5_c3_k2():
    assert_allclose(K.passk_unbiased(5, 3, 2), 0.9)


def test_unbiased_nan_when_n_less_than_k_never_one():
    out = K.passk_unbiased([3, 3, 3], [0, 1, 3], 5)
    assert np.all(np.isnan(out))


def test_unbiased_stable_for_large_n():
    n = np.arange(1, 100_001)
    for k in (1, 10, 1000):
        for frac in (0.0, 1e-4, 0.01, 0.5, 1.0):
            c = np.floor(frac * n)
            out = K.passk_unbiased(n, c, k)
            defined = n >= k
            assert np.all(np.isfinite(out[defined]))
            assert np.all(np.isnan(out[~defined]))
            assert np.all((out[defined] >= 0) & (out[defined] <= 1))
    # closed form for c = 1: k / n
    assert_allclose(K.passk_unbiased(100_000, 1, 10), 10 / 100_000, rtol=1e-8)
    # c = 0 gives exactly 0
    assert K.passk_unbiased(100_000, 0, 10) == 0.0


def test_naive():
    assert_allclose(K.passk_naive(4, 1, 2), 1 - 0.75**2)
    assert np.isnan(K.passk_naive(0, 0, 1))


@pytest.mark.parametrize("a,b,n,c,k", [(0.5, 1.5, 10, 3, 5), (2.0, 0.3, 5, 5, 20),
                                       (0.1, 4.0, 20, 0, 100), (1.0, 1.0, 0, 0, 7)])
def test_bb_predictive_equals_quadrature(a, b, n, c, k):
    post = stats.beta(a + c, b + n - c)
    expect, _ = integrate.quad(lambda p: (1 - (1 - p) ** k) * post.pdf(p), 0, 1, limit=200)
    assert_allclose(K.passk_bb_predictive(n, c, k, a, b), expect, rtol=1e-6)


def test_bb_unconditional_product_form():
    a, b = 0.7, 2.3
    for k in (1, 2, 17):
        prod = np.prod([(b + j) / (a + b + j) for j in range(k)])
        assert_allclose(K.passk_bb_predictive(0, 0, k, a, b), 1 - prod)


def test_a_beta_with_a_vanishing_b_keeps_its_likelihood_of_all_passes():
    # a Beta mean of 1 - 1e-16 (the joint model's logistic at its clip) leaves b below n's rounding: (b + n) - c
    # was 0 for c = n, and the log-pmf log B(a + n, b) - log B(a, b) ~ 0 read +inf (the joint model's task
    # weights then NaN)
    a, n = 0.0377, 50
    for b in (3.5e-15, 1e-12, 1e-300):
        exact = sum(np.log(a + j) - np.log(a + b + j) for j in range(n))  # prod_j (a + j) / (a + b + j)
        assert_allclose(K.bb_loglik(np.array(a), np.array(b), np.array(50.0), np.array(50.0)), exact, atol=1e-12)
        assert np.isfinite(K.bb_loglik(np.array(a), np.array(b), np.array(50.0), np.array(49.0)))
        # given n = c passes, pass@k = 1 - prod_j (b + j) / (a + n + b + j): 1 - O(b)
        assert_allclose(K.passk_bb_predictive(n, n, 5, a, b), 1 - b * np.prod([(b + j) / (a + n + b + j)
                                                                             for j in range(1, 5)]) / (a + n + b),
                        rtol=1e-12)


def test_bb_logpmf_matches_scipy():
    n, a, b = 12, 0.4, 1.7
    c = np.arange(n + 1)
    assert_allclose(K.bb_logpmf(c, n, a, b), stats.betabinom(n, a, b).logpmf(c))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
       st.floats(0.05, 20), st.floats(0.05, 20), st.integers(1, 500))
def test_zoibb_reduces_to_bb(nc, a, b, k):
    n, c = nc
    assert_allclose(K.passk_zoibb_predictive(n, c, k, a, b, 0.0, 0.0),
                    K.passk_bb_predictive(n, c, k, a, b), atol=1e-12)
    if 0 < c < n:
        assert_allclose(K.passk_zoibb_predictive(n, c, k, a, b, 0.3, 0.2),
                        K.passk_bb_predictive(n, c, k, a, b), atol=1e-12)


def test_zoibb_boundary_closed_form_by_simulation():
    """Posterior predictive for c = 0 and c = n against Bayes' rule by Monte Carlo."""
    rng = np.random.default_rng(1)
    a, b, pi0, pi1, n, k = 0.6, 0.9, 0.25, 0.15, 4, 8
    m = 2_000_000
    u = rng.random(m)
    p = np.where(u < pi0, 0.0, np.where(u < pi0 + pi1, 1.0, rng.beta(a, b, m)))
    c = rng.binomial(n, p)
    for c_obs in (0, n, 2):
        sel = c == c_obs
        mc = np.mean(1 - (1 - p[sel]) ** k)
        assert_allclose(K.passk_zoibb_predictive(n, c_obs, k, a, b, pi0, pi1), mc, atol=3e-3)
    # prior predictive (n = 0)
    assert_allclose(K.passk_zoibb_predictive(0, 0, k, a, b, pi0, pi1), np.mean(1 - (1 - p) ** k), atol=2e-3)


def test_zoibb_logpmf_sums_to_one():
    n = 7
    c = np.arange(n + 1)
    total = np.exp(K.zoibb_logpmf(c, n, 0.5, 2.0, 0.2, 0.1)).sum()
    assert_allclose(total, 1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
       st.floats(0.05, 10), st.floats(0.05, 10), st.floats(0, 0.45), st.floats(0, 0.45))
def test_all_estimators_monotone_in_k_and_bounded(nc, a, b, pi0, pi1):
    n, c = nc
    k = np.arange(1, 300)
    curves = [K.passk_naive(n, c, k), K.passk_unbiased(n, c, k)[: n],
              K.passk_bb_predictive(n, c, k, a, b),
              K.passk_zoibb_predictive(n, c, k, a, b, pi0, pi1)]
    for cur in curves:
        assert np.all(np.isfinite(cur))
        assert np.all((cur >= -1e-12) & (cur <= 1 + 1e-12))
        assert np.all(np.diff(cur) >= -1e-12)


def test_linmix_weight():
    assert_allclose(K.linmix_weight([1, 5, 27.5, 50, 80]), [0, 0, 0.5, 1, 1])
    assert_allclose(K.linmix_weight(10, 0, 20), 0.5)


def test_grid_kernels_equal_elementwise():
    rng = np.random.default_rng(5)
    n = rng.integers(0, 300, 200).astype(float)
    c = np.floor(rng.random(200) * (n + 1))
    a, b = rng.uniform(0.05, 5, 200), rng.uniform(0.05, 5, 200)
    pi0, pi1 = rng.uniform(0, 0.4, 200), rng.uniform(0, 0.4, 200)
    k = np.array([1, 2, 3, 7, 50, 299, 1000])
    N, C, KK = n[:, None], c[:, None], k[None, :]
    assert_allclose(K.passk_unbiased_grid(n, c, k), K.passk_unbiased(N, C, KK), rtol=1e-9, atol=1e-13)
    assert_allclose(K.passk_bb_predictive_grid(n, c, k, a, b),
                    K.passk_bb_predictive(N, C, KK, a[:, None], b[:, None]), rtol=1e-9, atol=1e-13)
    assert_allclose(K.passk_zoibb_predictive_grid(n, c, k, a, b, pi0, pi1),
                    K.passk_zoibb_predictive(N, C, KK, a[:, None], b[:, None], pi0[:, None], pi1[:, None]),
                    rtol=1e-9, atol=1e-13)


def test_grid_kernels_propagate_nan_parameters():
    out = K.passk_bb_predictive_grid(np.array([1.0, 5.0]), np.array([0.0, 2.0]), np.array([1, 10]),
                                     np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()


def test_bb_loglik_pair_rows_equals_bb_loglik():
    from bayespass.stats.kernels import bb_loglik, bb_loglik_pair_rows

    g = np.random.default_rng(3)
    a, b = g.gamma(1.5, 1.0, (3, 4, 7)), g.gamma(1.5, 1.0, (3, 4, 7))
    n = np.array([0, 1, 5, 5, 50, 200, 17])
    c = np.array([0, 1, 0, 5, 13, 199, 9])
    rows = bb_loglik_pair_rows(a, b, n, c)
    assert rows.shape == (7, 3, 4, 7)
    got = np.moveaxis(rows, 0, -2)
    want = bb_loglik(a[..., None, :], b[..., None, :], n[:, None].astype(float), c[:, None].astype(float))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # a Beta's concentration a + b constant over the last axis (a grid of means): its table on (3, 4, 1) only,
    # and the parts apart, the constant one summing to the log-pmf after a reduction over that axis
    phi = g.gamma(2.0, 3.0, (3, 4, 1))
    mu = g.random((3, 4, 7))
    a, b = mu * phi, (1 - mu) * phi
    want = bb_loglik(a[..., None, :], b[..., None, :], n[:, None].astype(float), c[:, None].astype(float))
    np.testing.assert_allclose(np.moveaxis(bb_loglik_pair_rows(a, b, n, c, ab=phi), 0, -2), want, rtol=1e-10,
                               atol=1e-10)
    varying, const = bb_loglik_pair_rows(a, b, n, c, ab=phi, split=True)
    assert varying.shape == (7, 3, 4, 7) and const.shape == (7, 3, 4, 1)
    np.testing.assert_allclose(np.moveaxis(varying + const, 0, -2), want, rtol=1e-10, atol=1e-10)
    # what the varying part leaves out is constant over that axis, while the part itself varies over it
    assert np.ptp(np.moveaxis(varying, 0, -2) - want, axis=-1).max() < 1e-9 < 1.0 < np.ptp(varying, axis=-1).max()


def test_rising_log_rows_matches_gammaln_and_digamma():
    from scipy.special import digamma, gammaln

    from bayespass.stats.kernels import rising_log_rows

    x = np.random.default_rng(4).gamma(1.2, 1.0, (3, 6))
    lg, dg = rising_log_rows(x, 40, digamma=True)
    m = np.arange(41)[:, None, None]
    np.testing.assert_allclose(lg, gammaln(x + m) - gammaln(x), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dg, digamma(x + m) - digamma(x), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(rising_log_rows(x, 40), lg)


def test_power_rows_equals_numpy_power():
    from bayespass.stats.kernels import power_rows

    g = np.random.default_rng(11)
    q = np.concatenate([[0.0, 1.0, 1e-12, 1 - 1e-12, 0.5], g.random(40)]).reshape(5, 9)
    k = np.array([0, 1, 2, 3, 5, 8, 13, 50, 51, 200, 1000, 1000, 1001])  # repeats and jumps above 64
    got = power_rows(q, k)
    assert got.shape == (k.size, 5, 9)
    want = np.power(q[None], k.astype(float)[:, None, None])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
    # k that are not ascending integers: the exp/log path, the same values
    k2 = np.array([10, 2.5, 1])
    np.testing.assert_allclose(power_rows(q, k2), np.power(q[None], k2[:, None, None]), rtol=1e-13, atol=1e-300)


def test_rising_log_rows_row_loop_equals_the_cumulative_sum():
    """Above the size where the rows are built one by one (large x), the same sums as below."""
    from scipy.special import gammaln

    from bayespass.stats.kernels import _ROW_LOOP_MIN, rising_log_rows

    x = np.random.default_rng(5).gamma(1.2, 3.0, (3, _ROW_LOOP_MIN // 3 + 7))
    lg, dg = rising_log_rows(x, 30, digamma=True)
    lg_small = np.stack([rising_log_rows(row, 30) for row in x], axis=1)  # each row below the threshold
    np.testing.assert_array_equal(lg, lg_small)
    m = np.arange(31)[:, None, None]
    np.testing.assert_allclose(lg, gammaln(x + m) - gammaln(x), rtol=1e-10, atol=1e-10)
    assert dg.shape == lg.shape


def test_the_unbiased_pass_at_k_and_its_variance_are_unbiased_by_enumeration():
    """Three tasks with their own n and p: the exact expectations over every outcome of the counts equal the
    finite-task pass@k and the variance of the estimate about it, for every k with 2k <= the smallest n."""
    from itertools import product

    from scipy.stats import binom

    from bayespass.stats.kernels import unbiased_passk_moments

    n, p = np.array([4, 6, 9]), np.array([0.1, 0.5, 0.93])
    ks = [1, 2]
    outcomes = list(product(*(range(m + 1) for m in n)))
    c = np.array(outcomes)
    w = np.prod([binom.pmf(c[:, i], n[i], p[i]) for i in range(3)], axis=0)
    u, v = unbiased_passk_moments(np.broadcast_to(n, c.shape), c, ks)
    assert np.isfinite(u).all() and (v >= 0).all()
    for j, k in enumerate(ks):
        truth = np.mean(1 - (1 - p) ** k)
        mean = w @ u[:, j]
        np.testing.assert_allclose(mean, truth, rtol=1e-12)
        np.testing.assert_allclose(w @ v[:, j], w @ (u[:, j] - mean) ** 2, rtol=1e-9)


def test_the_unbiased_pass_at_k_is_nan_where_a_task_has_fewer_than_2k_samples():
    from bayespass.stats.kernels import unbiased_passk_moments

    n = np.array([[4, 6, 0], [3, 6, 8]])  # the first config's third task is unobserved
    c = np.array([[1, 2, 0], [1, 1, 1]])
    u, v = unbiased_passk_moments(n, c, [1, 2, 3])
    # config 0: k = 1, 2 (4 >= 2k), not 3; config 1: k = 1 only (3 < 4)
    assert np.isfinite(u[0, :2]).all() and np.isnan(u[0, 2]) and np.isfinite(u[1, 0]) and np.isnan(u[1, 1:]).all()
    np.testing.assert_allclose(u[0, 0], (1 / 4 + 2 / 6) / 2)  # pass@1: the mean of c / n over observed tasks
    # pass@2 of a task with c of n: 1 - C(n - c, 2) / C(n, 2)
    np.testing.assert_allclose(u[0, 1], ((1 - 3 / 6) + (1 - 6 / 15)) / 2)
    np.testing.assert_array_equal(np.isnan(u), np.isnan(v))
