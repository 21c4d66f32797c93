"""The NumPy HMC sampler of method="eb" on targets with known moments."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from bayespass.models import hmc

# two configs with different scales and correlations: the sampler adapts a step size and mass matrix per config
MEAN = np.array([[1.0, -2.0], [0.0, 5.0]])
COV = np.array([[[1.0, 0.6], [0.6, 1.0]], [[0.01, -0.003], [-0.003, 4.0]]])
PREC = np.linalg.inv(COV)


def gaussian(th):
    """Log density and gradient of each config's Gaussian, for theta (chains, config, 2)."""
    d = th - MEAN
    g = -np.einsum("cij,...cj->...ci", PREC, d)
    return 0.5 * np.sum(d * g, -1), g


def test_draws_have_the_target_mean_and_covariance():
    res = hmc.sample(gaussian, MEAN + 3.0, chains=8, warmup=300, draws=400, rng=1)
    assert res.draws.shape == (8, 400, 2, 2)
    assert_allclose(res.mode, MEAN, atol=1e-4)  # the MAP start
    x = res.draws.reshape(-1, 2, 2)
    for j in range(2):
        sd = np.sqrt(np.diag(COV[j]))
        # 3200 correlated draws: allow ~5 Monte-Carlo standard errors at an ESS of ~600
        assert np.all(np.abs(x[:, j].mean(0) - MEAN[j]) < 5 * sd / np.sqrt(600)), j
        assert_allclose(np.cov(x[:, j].T), COV[j], rtol=0.2, atol=0.2 * np.outer(sd, sd).max())
    assert np.all(res.divergences == 0)
    assert np.all((res.acceptance > 0.6) & (res.acceptance < 0.97))  # dual averaging towards 0.8


def test_bounds_keep_the_map_start_inside():
    bounds = np.array([[-0.5, 0.5], [-10.0, 10.0]])
    mode = hmc.map_point(gaussian, np.zeros((2, 2)), bounds=bounds)
    assert np.all(mode[:, 0] <= 0.5 + 1e-12) and np.all(mode[:, 0] >= -0.5 - 1e-12)
    assert_allclose(mode[0, 0], 0.5, atol=1e-6)  # the unconstrained optimum (1.0) is outside: at the bound


def test_a_draw_outside_the_support_is_rejected_not_kept():
    def half_normal(th):  # support x > 0 only
        lp = np.where(th[..., 0] > 0, -0.5 * th[..., 0] ** 2, -np.inf)
        return lp, np.where(th > 0, -th, 0.0)

    res = hmc.sample(half_normal, np.array([[1.0]]), chains=4, warmup=200, draws=300, rng=0)
    x = res.draws.ravel()
    assert np.all(x > 0)
    assert abs(x.mean() - np.sqrt(2 / np.pi)) < 0.1  # the half-normal mean


def _normal(cov):
    prec = np.linalg.inv(cov)

    def logp_grad(th):  # one config, (chains, 1, P)
        g = -th @ prec
        return 0.5 * np.sum(th * g, -1), g

    return logp_grad


def test_steps_choices_pick_short_trajectories_for_a_normal_and_long_ones_along_a_ridge():
    """The warm-up trial keeps the range with the larger squared jump per gradient; sampling then uses it."""
    choices = ((2, 4), (16, 24))
    iso = hmc.sample(_normal(np.eye(6)), np.zeros((1, 6)), chains=4, warmup=300, draws=200, rng=0, use_map=False,
                     steps_choices=choices)
    rho = 0.999  # a ridge the diagonal mass matrix cannot straighten: the step size is set by its narrow side
    ridge_cov = np.array([[1.0, rho], [rho, 1.0]])
    ridge = hmc.sample(_normal(ridge_cov), np.zeros((1, 2)), chains=4, warmup=300, draws=400, rng=0, use_map=False,
                       steps_choices=choices)
    assert iso.steps == (2, 4) and ridge.steps == (16, 24)
    x = ridge.draws.reshape(-1, 2)
    assert_allclose(np.cov(x.T), ridge_cov, atol=0.25)  # and it samples the ridge
    assert hmc.sample(_normal(np.eye(2)), np.zeros((1, 2)), rng=0, use_map=False, warmup=50, draws=10).steps == (4, 16)


def test_chains_that_go_on_are_the_chains_of_one_longer_run():
    """``more`` continues the same chains (step size, mass matrix, random stream): 2 rounds of D are one run of 2D."""
    seen = []

    def more(z):
        seen.append(z.shape)
        return len(seen) < 2  # go on once, then stop

    once = hmc.sample(gaussian, MEAN + 3.0, chains=4, warmup=100, draws=60, rng=5, more=more, max_rounds=3)
    long = hmc.sample(gaussian, MEAN + 3.0, chains=4, warmup=100, draws=180, rng=5)
    assert seen == [(4, 60, 2, 2), (4, 120, 2, 2)] and once.rounds == 2
    assert once.draws.shape == (4, 120, 2, 2)
    assert_allclose(once.draws, long.draws[:, :120])
    assert_allclose(once.step_size, long.step_size)
    # max_rounds caps it whatever ``more`` says
    capped = hmc.sample(gaussian, MEAN + 3.0, chains=4, warmup=100, draws=60, rng=5, more=lambda z: True,
                        max_rounds=3)
    assert capped.rounds == 3 and capped.draws.shape[1] == 180
    assert_allclose(capped.draws, long.draws)


def test_a_direction_the_diagonal_metric_misses_restarts_the_chains_in_a_dense_one():
    """Chains still missing after ``after_rounds`` restart in the draws' covariance, and sample the same target.

    The target (10 dimensions, variance 10 along the diagonal, 1 across) has variances 1.9 on every axis, so the
    diagonal metric sees 10 / 1.9 = 5.3 along the diagonal; a threshold above that keeps today's rounds.
    """
    v = np.ones(10) / np.sqrt(10)
    cov = np.eye(10) + 9 * np.outer(v, v)
    asked = []

    def more(z):
        asked.append(z.shape[1])
        return len(asked) < 3  # the first two ends say go on, the third stops

    kw = dict(chains=4, warmup=200, draws=300, rng=3, use_map=False, steps_choices=((2, 5), (6, 16)), more=more,
              max_rounds=5, more_draws=100)
    res = hmc.sample(_normal(cov), np.zeros((1, 10)), **kw,
                     restart=hmc.DenseRestart(threshold=3.0, after_rounds=1, steps_choices=((2, 5),)))
    assert res.restarted is not None and res.restarted[0] == 300 and 4.0 < res.restarted[1] < 7.0
    assert asked == [300, 300, 400] and res.rounds == 3  # one round drawn afresh, then one more: the cap left 4
    assert res.steps == (2, 5) and res.draws.shape == (4, 400, 1, 10)
    x = res.draws.reshape(-1, 10)
    assert abs(x @ v).mean() > 1.5  # the draws are the target's, mapped back: sd sqrt(10) along v, 1 across
    assert_allclose(np.var(x @ v), 10.0, rtol=0.3)
    assert_allclose(np.cov(x.T), cov, atol=0.6)
    asked.clear()
    kept = hmc.sample(_normal(cov), np.zeros((1, 10)), **kw, restart=hmc.DenseRestart(threshold=8.0, after_rounds=1))
    asked.clear()
    plain = hmc.sample(_normal(cov), np.zeros((1, 10)), **kw)
    assert kept.restarted is None and plain.restarted is None
    assert_allclose(kept.draws, plain.draws)  # below the threshold the rounds are today's, draw for draw


def test_steps_trial_scores_the_change_of_distance_from_the_centre_not_the_jump():
    """ChEES: a move to the mirror image across the centre (half a period) leaves the spread unmixed and scores 0.

    By squared jump per gradient it would win here, at half the gradients of the other range (4 |x|^2 against
    2 |x|^2 for a fresh draw); a quarter-period move (a fresh draw) scores E (|p|^2 - |x|^2)^2 > 0 and wins.
    """
    g = np.random.default_rng(0)
    trial = hmc._StepsTrial(((6, 6), (3, 3)), warmup=30)
    trial.centre = np.full((1, 4), 2.0)
    minv = np.ones((1, 4))
    for it in range(trial.start, 30):
        th = trial.centre + g.standard_normal((8, 1, 4))
        quarter, mirror = trial.centre + g.standard_normal((8, 1, 4)), 2 * trial.centre - th
        x = (quarter, mirror)[(it - trial.start) % 2]
        trial.record(it, th, x, np.ones((8, 1)), minv, trial.steps(it)[0])
    assert trial.jump[1] == pytest.approx(0.0, abs=1e-9) and trial.jump[0] > 0
    assert trial.best() == (6, 6)
