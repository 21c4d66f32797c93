import numpy as np
import pytest
from numpy.testing import assert_allclose

import bayespass as bp
from bayespass.testing import draw_zoib, simulate_counts


@pytest.mark.parametrize("a,b,m", [(0.4, 1.2, 20), (2.0, 3.0, 10), (0.8, 0.3, 50)])
def test_bb_recovers_hyperparameters_within_10pct(a, b, m):
    p = draw_zoib(5000, a, b, seed=7)
    fit = bp.fit_eb(simulate_counts(p, m, seed=8))
    assert fit.status.item() == "ok" and bool(fit.converged.item())
    assert_allclose(fit.a.item(), a, rtol=0.10)
    assert_allclose(fit.b.item(), b, rtol=0.10)


def test_zoibb_recovers_boundary_masses():
    p = draw_zoib(5000, 1.0, 1.5, 0.3, 0.1, seed=1)
    fit = bp.fit_eb(simulate_counts(p, 20, seed=2), "zoibb")
    assert_allclose(fit.pi0.item(), 0.3, atol=0.03)
    assert_allclose(fit.pi1.item(), 0.1, atol=0.03)
    assert_allclose(fit.a.item(), 1.0, rtol=0.2)
    assert_allclose(fit.b.item(), 1.5, rtol=0.2)


def test_zoibb_evidence_at_least_bb():
    p = draw_zoib(800, 0.5, 0.5, seed=4)
    ds = simulate_counts(p, 10, seed=5)
    bb, z = bp.fit_eb(ds, "bb"), bp.fit_eb(ds, "zoibb")
    assert z.log_marginal.item() >= bb.log_marginal.item() - 1e-6


def test_mean_only_is_reported_not_garbage():
    rng = np.random.default_rng(0)
    ds = bp.make_counts(np.ones(500, int), rng.binomial(1, 0.3, 500))
    with pytest.warns(bp.FitWarning, match="mean_only"):
        fit = bp.fit_eb(ds)
    assert fit.status.item() == "mean_only"
    assert np.isnan(fit.a.item()) and np.isnan(fit.kappa.item())
    assert_allclose(fit.mu.item(), ds.c.sum().item() / 500)


@pytest.mark.parametrize("value,status", [(0, "all_zero"), (1, "all_one")])
def test_degenerate_data_flagged(value, status):
    ds = bp.make_counts(np.full(50, 10), np.full(50, 10 * value))
    for prior in ("bb", "zoibb"):
        with pytest.warns(bp.FitWarning, match=status):
            fit = bp.fit_eb(ds, prior)
        assert fit.status.item() == status
        pk = bp.passk(ds, [1, 10], method=prior, fits={prior: fit}).values
        assert_allclose(pk, value, atol=1e-3)


def test_bad_prior():
    with pytest.raises(ValueError, match="prior='beta' is not supported"):
        bp.fit_eb(bp.make_counts([3], [1]), "beta")


def test_missing_tasks_ignored_in_fit():
    p = draw_zoib((2, 3000), 0.6, 1.4, seed=3)
    ds = simulate_counts(p, 20, seed=3)
    ds["n"][1, :1000] = 0
    ds["c"][1, :1000] = 0
    fit = bp.fit_eb(ds)
    assert list(fit.n_tasks.values) == [3000, 2000]
    assert_allclose(fit.a.values, 0.6, rtol=0.15)


def test_mean_only_gives_the_mean_at_k1_and_undefined_passk_beyond():
    rng = np.random.default_rng(1)
    c = rng.binomial(1, 0.6, 300)
    ds = bp.make_counts(np.ones(300, int), c)
    with pytest.warns(bp.FitWarning):
        out = bp.passk(ds, [1, 10], method=["bb", "zoibb", "linmix"]).values
    assert_allclose(out[:, 0, 0], c.mean(), rtol=1e-12)  # pass@1: the observed mean, whatever the prior's shape
    assert np.isnan(out[:, 0, 1]).all()  # pass@10 depends on the shape, which one sample per task cannot tell


@pytest.mark.parametrize("kappa", [0.05, 1.0, 30.0])
def test_dataset_pass1_with_one_sample_per_task_is_the_mean_under_any_spread(kappa):
    """Why the fill above is right: with n = 1, every Beta prior of mean c_bar gives dataset pass@1 = c_bar."""
    from bayespass.stats import kernels

    c = np.random.default_rng(2).binomial(1, 0.3, 200)
    a, b = c.mean() * kappa, (1 - c.mean()) * kappa
    per_task = kernels.passk_bb_predictive_grid(np.ones(200), c.astype(float), np.array([1, 10]), a, b)
    assert per_task[:, 0].mean() == pytest.approx(c.mean(), rel=1e-12)
    assert per_task[:, 1].std() > 0  # pass@10 per task does depend on kappa and c
