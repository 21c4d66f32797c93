"""Pointwise PSIS-LOO: smoothing each distinct log-likelihood row once gives arviz's numbers for every task."""

import warnings

import arviz as az
import numpy as np
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
