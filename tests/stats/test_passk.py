import numpy as np
import pytest
import xarray as xr
from numpy.testing import assert_allclose

import bayespass as bp
from bayespass.stats import kernels as K


def test_known_values_from_issue():
    ds = bp.make_counts([3, 3, 3, 3], [2, 2, 1, 0])
    assert_allclose(bp.passk(ds, 3).item(), 0.75)
    assert_allclose(bp.avg_at_n(ds).item(), 5 / 12)
    assert_allclose(bp.cons_at_k(ds, 3).item(), 0.5)
    assert_allclose(bp.passk(bp.make_counts([5], [3]), 2).item(), 0.9)


def test_dataset_mean_matches_per_task_loop():
    rng = np.random.default_rng(3)
    n = rng.integers(0, 30, size=(3, 50))
    n[0, 0] = 0
    c = rng.binomial(n, 0.4)
    ds = bp.make_counts(n, c)
    k = [1, 5, 20]
    got = bp.passk(ds, k, method="naive").values
    for j in range(3):
        obs = n[j] > 0
        for ik, kk in enumerate(k):
            assert_allclose(got[j, ik], np.mean(K.passk_naive(n[j, obs], c[j, obs], kk)))
    per_task = bp.passk(ds, k, method=["naive", "bb"], per_task=True)
    assert per_task.dims == ("estimator", "config", "task", "k")
    assert np.isnan(per_task.sel(estimator="naive").values[0, 0]).all()
    assert np.isfinite(per_task.sel(estimator="bb").values[0, 0]).all()  # prior predictive


def test_unbiased_nan_at_dataset_level_when_any_task_short():
    ds = bp.make_counts([10, 3], [1, 0])
    out = bp.passk(ds, [1, 5], method="unbiased")
    assert np.isfinite(out.values[0, 0]) and np.isnan(out.values[0, 1])


def test_methods_dim_and_coords():
    ds = bp.make_counts([[5, 5], [5, 5]], [[1, 2], [3, 4]], model=["a", "b"], temperature=[0.2, 0.8],
                        benchmark=["he", "he"])
    out = bp.passk(ds, "1,2", method="naive,unbiased")
    assert out.dims == ("estimator", "config", "k")
    assert list(out.config.values) == ["a|T=0.2|he", "b|T=0.8|he"]
    assert list(out.temperature.values) == [0.2, 0.8]


def test_linmix_interpolates_bb_and_zoibb():
    rng = np.random.default_rng(0)
    n = np.full(300, 20)
    ds = bp.make_counts(n, rng.binomial(n, rng.beta(0.5, 0.8, 300)))
    res = bp.passk(ds, [10, 100], method=["bb", "zoibb", "linmix"], m_low=10, m_high=30).values
    assert_allclose(res[2], 0.5 * res[0] + 0.5 * res[1])
    low = bp.passk(ds, [10], method=["bb", "linmix"], m_low=20, m_high=30).values
    assert_allclose(low[0], low[1])


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 0}, "k must hold positive integers"),
    ({"k": [1, 1]}, "repeated"),
    ({"k": "a,b"}, "positive integers"),
    ({"method": "magic"}, "method='magic' is not supported; choose one of"),
    ({"method": "linmix", "m_low": 10, "m_high": 5}, "m_high must be > m_low"),
])
def test_bad_arguments(kwargs, match):
    ds = bp.make_counts([5], [1])
    with pytest.raises(ValueError, match=match):
        bp.passk(ds, **({"k": 1} | kwargs))


def test_cons_at_k_hypergeometric_generalisation():
    # n = 4, c = 3, k = 3: subsets of 3 from 4 with >= 2 correct: all 4 subsets -> 1.0
    assert_allclose(bp.cons_at_k(bp.make_counts([4], [3]), 3).item(), 1.0)
    # n = 4, c = 2, k = 3: subsets with >= 2 correct: 2 of 4
    assert_allclose(bp.cons_at_k(bp.make_counts([4], [2]), 3).item(), 0.5)
    assert np.isnan(bp.cons_at_k(bp.make_counts([2], [2]), 3).item())


def test_estimate_table_prints():
    ds = bp.make_counts([5, 5, 5], [0, 2, 5])
    df = bp.estimate_table(ds, [1, 5], method=["naive", "unbiased"])
    assert list(df.columns) == ["config", "method", "tasks", "avg@n", "pass@1", "pass@5"]
    assert_allclose(df["pass@5"].iloc[1], 2 / 3)
    assert isinstance(bp.passk(ds, 1), xr.DataArray)
