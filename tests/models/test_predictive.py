"""Rao-Blackwellised pass@k draws and replicated counts against brute force on the raw tasks."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import betaln
from scipy.stats import betabinom

import bayespass as bp
from bayespass.models import predictive
from bayespass.models.base import get_model
from bayespass.simulate import draw_zoib, simulate_counts


@pytest.fixture(scope="module")
def bb_fit():
    # two configs, uneven n per task (so the pair table has many distinct (n, c))
    rng = np.random.default_rng(5)
    p = draw_zoib((2, 150), 0.6, 1.2, 0.1, 0.05, seed=6)
    n = rng.integers(1, 15, size=p.shape)
    counts = bp.make_counts(n, rng.binomial(n, p), config=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return counts, bp.fit(counts, "bb", "eb", seed=2, draws=60, chains=4)


def _brute_q(a, b, n, c, k):
    """E[(1 - p)^k | n, c] under Beta(a, b), per task: B(a + c, b + n - c + k) / B(a + c, b + n - c)."""
    return np.exp(betaln(a + c, b + n - c + k) - betaln(a + c, b + n - c))


def _ab(idata):
    named = get_model("bb").named(idata.posterior["theta"].values)
    return named["a"], named["b"]  # (chain, draw, config)


def test_passk_mean_and_its_task_spread_equal_brute_force_per_draw(bb_fit):
    counts, idata = bb_fit
    ks = [1, 7, 100]
    d = predictive.passk_draws(idata, ks, seed=3)
    a, b = _ab(idata)
    n, c = counts.n.values, counts.c.values
    for j in range(2):
        resids = []
        for i, k in enumerate(ks):
            qk = _brute_q(a[..., j, None], b[..., j, None], n[j], c[j], k)  # (chain, draw, task)
            q2k = _brute_q(a[..., j, None], b[..., j, None], n[j], c[j], 2 * k)
            assert_allclose(d["passk_mean"].values[:, :, j, i], (1 - qk).mean(-1), rtol=1e-9, atol=1e-12)
            var = np.clip(q2k - qk**2, 0, None).sum(-1) / n.shape[1] ** 2
            resid = (d["passk"].values[:, :, j, i] - d["passk_mean"].values[:, :, j, i]) / np.sqrt(var)
            # the spread is normal with exactly that variance (240 draws: the sd of a sd estimate is ~5%)
            assert 0.8 < resid.std() < 1.2 and abs(resid.mean()) < 0.25
            full = d["passk"].values[:, :, j, i]
            resids.append(np.where((full > 0) & (full < 1), resid, np.nan))  # clipped draws left out
        # one deviate per draw, shared by every k (the same tasks decide pass@k at every k): bands smooth in k
        assert np.isfinite(resids[0]).mean() > 0.9
        for r in resids[1:]:
            both = np.isfinite(resids[0]) & np.isfinite(r)
            assert_allclose(r[both], resids[0][both], rtol=1e-6, atol=1e-9)


def test_blocks_of_pairs_do_not_change_the_draws(bb_fit, monkeypatch):
    _, idata = bb_fit
    whole = predictive.passk_draws(idata, [1, 50], seed=1)
    monkeypatch.setattr(predictive, "_BLOCK_CELLS", 50)  # forces many small blocks of pairs
    blocked = predictive.passk_draws(idata, [1, 50], seed=1)
    assert_allclose(blocked["passk_mean"].values, whole["passk_mean"].values, rtol=1e-12)
    assert_allclose(blocked["passk"].values, whole["passk"].values, rtol=1e-12)
    thinned = predictive.passk_draws(idata, [1], max_draws=10)
    assert thinned.sizes["draw"] == 10 and thinned.sizes["chain"] == idata.posterior.sizes["chain"]


def test_replicated_counts_follow_the_fitted_beta_binomial(bb_fit):
    counts, idata = bb_fit
    rep = predictive.replicate_counts(idata, seed=4)
    assert rep.dims == ("chain", "draw", "config", "task") and rep.shape[2:] == counts.n.shape
    assert (rep <= counts.n.values).all() and (rep >= 0).all()
    a, b = _ab(idata)
    n = counts.n.values
    for j in range(2):
        # P(c_rep = 0) per task, averaged over draws and tasks, against the Beta-Binomial pmf
        expected = betabinom.pmf(0, n[j][None, None], a[..., j, None], b[..., j, None]).mean()
        observed = float((rep.values[:, :, j] == 0).mean())
        se = np.sqrt(expected * (1 - expected) / rep.values[:, :, j].size)
        assert abs(observed - expected) < 5 * se + 0.01, (observed, expected)


def test_replicates_of_large_data_use_a_random_subset_of_tasks(monkeypatch):
    counts = simulate_counts(draw_zoib((1, 12_000), 0.6, 1.2, seed=8), 5, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "bb", "eb", seed=0, draws=20, chains=4)
    monkeypatch.setattr(predictive, "REPLICATE_CELLS", 1000)  # the subset is then its floor, 10,000 tasks
    rep = predictive.replicate_counts(idata, seed=0)
    assert rep.sizes["task"] == 10_000 and "10000 of 12000 tasks" in rep.attrs["note"]
    assert set(rep.task.values) <= set(idata.observed_data.task.values)
    # the subset is random, and its zero fraction still estimates the population's
    full = predictive.replicate_counts(idata, seed=0, max_draws=20)
    assert abs(float((rep == 0).mean()) - float((full == 0).mean())) < 0.01


def test_replicates_of_large_data_use_fewer_draws_before_fewer_tasks(monkeypatch):
    counts = simulate_counts(draw_zoib((2, 500), 0.6, 1.2, seed=3), 5, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "bb", "eb", seed=0, draws=100, chains=4)
    full = predictive.replicate_counts(idata, seed=0)
    assert full.sizes["draw"] == 100 and "note" not in full.attrs  # 400,000 cells: under the cap
    monkeypatch.setattr(predictive, "REPLICATE_CELLS", 150_000)
    monkeypatch.setattr(predictive, "REPLICATE_DRAWS", 40)
    rep = predictive.replicate_counts(idata, seed=0)
    # the most draws per chain that fit the cap (150,000 // (4 chains x 1,000 cells) = 37), evenly spaced; every task
    assert rep.sizes["draw"] == 37 and rep.sizes["task"] == 500 and "note" not in rep.attrs
    assert rep.sizes["chain"] * rep.sizes["draw"] * 1000 <= 150_000
    assert rep.draw.values[0] == 0 and rep.draw.values[-1] == 99
    # the thinned replicates check the same population: the zero fraction agrees with the full set's
    assert abs(float((rep == 0).mean()) - float((full == 0).mean())) < 0.01
    monkeypatch.setattr(predictive, "REPLICATE_CELLS", 20_000)  # below the draws' floor: 10 per chain, then tasks
    few = predictive.replicate_counts(idata, seed=0)
    # the task subset's floor (10,000) holds all 500 tasks: every task, and no note of a subset
    assert few.sizes["draw"] == 10 and few.sizes["task"] == 500 and "note" not in few.attrs
    np.testing.assert_array_equal(few.task.values, idata.observed_data.task.values)


def test_default_k_grid():
    g = predictive.default_k_grid(10)
    assert g[0] == 1 and g[-1] == 200 and np.all(np.diff(g) > 0)
    assert {1, 2, 5, 10, 20, 50, 100, 200} <= set(g.tolist())
    assert predictive.default_k_grid(300)[-1] == 1200


def test_passk_draws_refuses_an_idata_not_from_fit():
    import arviz as az

    with pytest.raises(ValueError, match="not produced by bayespass.fit"):
        predictive.passk_draws(az.InferenceData(posterior=__import__("xarray").Dataset()), [1])


def test_passk_draws_are_the_same_numbers_in_one_thread_and_in_two():
    """The configs' pass@k moments run in threads (``_task_moments``): each config's sums keep their order."""
    rng = np.random.default_rng(5)
    n = np.full((3, 80), 8)
    counts = bp.make_counts(n, rng.binomial(n, rng.beta(0.6, 0.8, n.shape)), config=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "lnorm", "eb", seed=0, progressbar=False)
    k = [1, 5, 40, 300]
    with bp.rc_context({"eb.cores": 1}):
        one = predictive.passk_draws(idata, k, seed=2)
    with bp.rc_context({"eb.cores": 2}):
        two = predictive.passk_draws(idata, k, seed=2)
    for v in ("passk", "passk_mean"):
        assert np.isfinite(one[v].values).all()
        np.testing.assert_array_equal(one[v].values, two[v].values)
