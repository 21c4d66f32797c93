"""Pointwise PSIS-LOO: smoothing each distinct log-likelihood row once gives arviz's numbers for every task."""

import warnings

import arviz as az
import numpy as np
import pytest
from scipy.special import logsumexp

import bayespass as bp
from bayespass.stats.loo import _distinct_rows, pointwise_loo


def test_distinct_rows_keeps_first_occurrences_in_order():
    a = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [5.0, 6.0], [3.0, 4.0], [0.0, 2.0], [-0.0, 2.0]])
    rows, inverse = _distinct_rows(a)
    # rows are equal by their bytes: 0.0 and -0.0 compare equal but are two rows (smoothed twice, never merged wrongly)
    np.testing.assert_array_equal(rows, a[[0, 1, 3, 5, 6]])
    np.testing.assert_array_equal(inverse, [0, 1, 0, 2, 1, 3, 4])
    np.testing.assert_array_equal(rows[inverse], a)


def test_pointwise_loo_equals_arviz_psis_on_every_task():
    rng = np.random.default_rng(3)
    n = np.full((2, 120), 6)
    n[1, :7] = 0  # unobserved tasks of the second config
    c = rng.binomial(n, rng.beta(0.7, 0.9, n.shape))
    counts = bp.make_counts(n, c, config=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "zoibb", "eb", seed=0, progressbar=False)
        ll = idata.log_likelihood["c"].transpose("chain", "draw", "config", "task").values
        s = ll.shape[0] * ll.shape[1]
        obs = np.moveaxis(ll.reshape(s, 2, 120), 0, -1)  # (config, task, S)
        lw, khat = az.psislw(-obs.reshape(-1, s))  # every task smoothed on its own
    got = pointwise_loo(idata)
    assert len(_distinct_rows(obs.reshape(-1, s))[0]) < 20  # the tasks share a few rows (7 pairs per config)
    seen = n > 0
    np.testing.assert_array_equal(got["weight"], seen.astype(float))
    np.testing.assert_array_equal(got["elpd"][seen], logsumexp(obs + lw.reshape(obs.shape), axis=-1)[seen])
    np.testing.assert_array_equal(got["lppd"][seen], (logsumexp(obs, axis=-1) - np.log(s))[seen])
    np.testing.assert_array_equal(got["pareto_k"][seen], np.asarray(khat).reshape(2, 120)[seen])
    assert np.isnan(got["pareto_k"][~seen]).all() and (got["elpd"][~seen] == 0).all()


def _ragged_fits():
    rng = np.random.default_rng(11)
    n = np.full((2, 80), 5)
    n[1, :6] = 0  # the second config has no samples of six tasks
    c = rng.binomial(n, rng.beta(0.6, 0.8, n.shape))
    counts = bp.make_counts(n, c, config=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return counts, {m: bp.fit(counts, m, "eb", seed=1, progressbar=False) for m in ("bb", "zoibb")}


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # arviz.compare's own call into pandas
def test_loo_of_one_fit_scores_tasks_with_samples_as_arviz_does():
    """az.loo(fit) scored a task a config has no samples of (log-likelihood 0) at Pareto k = inf."""
    counts, fits = _ragged_fits()
    fit = fits["bb"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = az.loo(fit, reff=1.0, pointwise=True)
    assert np.isinf(theirs.pareto_k.values).sum() == 6  # the empty cells, which bp.loo leaves out
    ours = bp.loo(fit)
    seen = counts.n.values > 0
    assert ours.n_data_points == seen.sum() == 154 and ours.n_samples == theirs.n_samples
    np.testing.assert_allclose(ours.elpd_loo, theirs.elpd_loo, rtol=1e-12)
    np.testing.assert_allclose(ours.p_loo, theirs.p_loo, rtol=1e-10)
    np.testing.assert_array_equal(ours.loo_i.values, theirs.loo_i.values[seen])
    np.testing.assert_array_equal(ours.pareto_k.values, theirs.pareto_k.values[seen])
    assert np.isclose(ours.se, np.sqrt(154 * np.var(theirs.loo_i.values[seen])))
    assert set(ours.loo_i["config"].values[:80].tolist()) == {"a"} and ours.loo_i["task"].values[80] == "task-6"
    one = bp.loo(fit, config="b")
    assert one.n_data_points == 74 and np.isclose(one.elpd_loo, theirs.loo_i.values[1, 6:].sum())
    # arviz.compare takes them, and agrees with bp.compare over all cells
    table = az.compare({m: bp.loo(f) for m, f in fits.items()})
    with bp.rc_context({"stats.stacking_concentration": 1.0}):  # plain stacking, as arviz's
        ref = bp.compare(fits, per_config=False).droplevel("config")
    for m in fits:
        assert np.isclose(table.loc[m, "elpd_loo"], ref.loc[m, "elpd_loo"])
        assert np.isclose(table.loc[m, "weight"], ref.loc[m, "weight"], atol=0.01)
    with pytest.raises(ValueError, match=r"config='z': not in this fit: \['z'\]"):
        bp.loo(fit, config="z")
    with pytest.raises(TypeError, match="loo needs a fit"):
        bp.loo(counts)


def test_loo_of_a_fit_stored_per_pair_counts_every_task(monkeypatch):
    """Large fits keep one log-likelihood term per distinct (n, c): az.loo refuses them, bp.loo expands them."""
    import bayespass.models.fit as fit_module

    counts, fits = _ragged_fits()
    monkeypatch.setattr(fit_module, "LL_TASK_CELLS", 0)
    _, paired = _ragged_fits()
    assert paired["bb"].log_likelihood.attrs["layout"] == "pair"
    with pytest.raises(TypeError, match="several log likelihood arrays"):
        az.loo(paired["bb"])
    for m in fits:
        a, b = bp.loo(fits[m]), bp.loo(paired[m])
        np.testing.assert_allclose(b.loo_i.values, a.loo_i.values, rtol=1e-12)
        np.testing.assert_array_equal(b.loo_i["task"].values, a.loo_i["task"].values)
        assert b.n_data_points == a.n_data_points == 154 and np.isclose(b.elpd_loo, a.elpd_loo, rtol=1e-12)


def test_loo_of_shared_by_eb_warns_that_its_laplace_draws_bias_elpd_low():
    counts, _ = _ragged_fits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shared = bp.fit(counts, "shared", "eb", seed=0, progressbar=False)
    with pytest.warns(UserWarning, match=r"fit\(s\) \['given'\] of model 'shared' by EB draw from a Laplace"):
        got = bp.loo(shared)
    assert got.n_data_points == 154 and np.isfinite(got.elpd_loo)
