"""The flex prior: simulation-based calibration of its posterior (fast sampler and PyMC NUTS),
recovery of a known population, and agreement of the two samplers."""

import warnings

import numpy as np
import pytest
from scipy import stats

import bayespass as bp
from bayespass.models.base import get_model


def _sbc_data(n_sets, tasks, m, seed):
    """Datasets drawn from the flex prior: true theta per set, counts with one config per set."""
    flex = get_model("flex")
    rng = np.random.default_rng(seed)
    theta = flex.sample_prior(n_sets, rng)
    p = flex.draw_p(theta, tasks, rng)  # (sets, tasks)
    counts = bp.make_counts(np.full(p.shape, m), rng.binomial(m, p), config=[f"s{i}" for i in range(n_sets)])
    return flex, theta, counts


def _ranks(flex, theta_true, idata, k=(1, 10)):
    """Rank of each true population pass@k among the posterior draws (per set and k)."""
    post = idata.posterior["theta"].values  # (chain, draw, set, P)
    draws = post.reshape(-1, post.shape[2], post.shape[3])[::4]  # thinned: nearly independent draws
    true = flex.population_passk(theta_true, k)  # (set, K)
    est = flex.population_passk(draws, k)  # (D, set, K)
    return (est < true[None]).sum(0), est.shape[0]


def _uniform_pvalue(ranks, n_draws, bins=10):
    counts = np.histogram(ranks.ravel() / (n_draws + 1), bins=bins, range=(0, 1))[0]
    return stats.chisquare(counts).pvalue


@pytest.mark.slow
def test_sbc_fast_sampler():
    """200 data sets from the prior (60 tasks, m = 4): ranks of the true pass@1 and pass@10 are uniform."""
    flex, theta, counts = _sbc_data(200, 60, 4, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "flex", "eb", seed=3)
    ranks, n = _ranks(flex, theta, idata)
    for j in range(ranks.shape[1]):
        assert _uniform_pvalue(ranks[:, j], n) > 0.001, np.histogram(ranks[:, j], 10)[0]
    # and the central 90% intervals cover the truth about 90% of the time
    frac = ranks / n
    cover = ((frac > 0.05) & (frac < 0.95)).mean()
    assert 0.84 <= cover <= 0.96, cover


@pytest.mark.slow
def test_sbc_pymc_nuts():
    """100 data sets from the prior fitted in one PyMC model (independent configs) by NUTS."""
    flex, theta, counts = _sbc_data(100, 60, 4, seed=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, "flex", "mcmc", draws=300, tune=400, chains=2, seed=4, progressbar=False,
                       sampler="pymc")
    ranks, n = _ranks(flex, theta, idata)
    for j in range(ranks.shape[1]):
        assert _uniform_pvalue(ranks[:, j], n) > 0.001, np.histogram(ranks[:, j], 10)[0]


@pytest.mark.slow
def test_fast_sampler_and_nuts_agree():
    p = np.where(np.random.default_rng(0).random(150) < 0.25, 0.0, np.random.default_rng(1).beta(0.5, 1.5, 150))
    counts = bp.make_counts(np.full(150, 6), np.random.default_rng(2).binomial(6, p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eb = bp.passk_curve(bp.fit(counts, "flex", "eb", seed=1), [1, 10, 100])
        mc = bp.passk_curve(bp.fit(counts, "flex", "mcmc", draws=500, tune=500, chains=2, seed=1,
                                   progressbar=False, sampler="pymc"), [1, 10, 100])
        hmc = bp.passk_curve(bp.fit(counts, "flex", "mcmc", seed=1), [1, 10, 100])
    np.testing.assert_allclose(eb["mean"], mc["mean"], atol=0.015)
    np.testing.assert_allclose(eb["eti"].diff("ci_bound"), mc["eti"].diff("ci_bound"), rtol=0.25)
    np.testing.assert_allclose(hmc["mean"], mc["mean"], atol=0.015)  # the default MCMC: bayespass's HMC
    np.testing.assert_allclose(hmc["eti"].diff("ci_bound"), mc["eti"].diff("ci_bound"), rtol=0.25)


def test_recovers_a_known_population_and_covers():
    """Truth from a ZOIB population the model nests: the 90% band of pass@k covers it at k = 1..100."""
    rng = np.random.default_rng(5)
    p = np.where(rng.random((4, 300)) < 0.2, 0.0, rng.beta(0.8, 1.2, (4, 300)))
    counts = bp.simulate_counts(p, 10, seed=6) if hasattr(bp, "simulate_counts") else None
    from bayespass.testing import simulate_counts, true_passk

    counts = simulate_counts(p, 10, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cur = bp.passk_curve(bp.fit(counts, "flex", "eb", seed=0), [1, 10, 100])
    truth = true_passk(p, [1, 10, 100])
    lo, hi = cur.eti.sel(ci_bound="lower").values, cur.eti.sel(ci_bound="upper").values
    inside = (lo <= truth) & (truth <= hi)
    assert inside.mean() >= 0.75, (lo, truth, hi)
    assert np.abs(cur["mean"].values - truth).max() < 0.06


def test_thousands_of_samples_per_task_leave_pass_at_1_its_sampling_width():
    """At 10,000 samples per task flex's band of pass@1 is about the normal band of the tasks' mean pass rate.

    A point value per grid point pinned each task to one point (0.35 apart in logit, where its likelihood is
    0.03 wide): the band was 0.17-0.28 of that width and missed the truth; each point's cell is integrated now.
    """
    rng = np.random.default_rng(0)
    p = rng.beta(0.3, 1.5, 60)
    p[:10] = 0.0
    n, c = 10_000, rng.binomial(10_000, p)
    rate = c / n
    normal = 2 * stats.norm.ppf(0.95) * np.sqrt(np.sum(rate * (1 - rate) / (n - 1))) / rate.size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        band = bp.passk_curve(bp.fit(bp.make_counts(np.full(60, n), c), "flex", seed=0), [1])["eti"].values.ravel()
    assert 0.8 < (band[1] - band[0]) / normal < 1.25, (band, normal)
    assert band[0] <= p.mean() <= band[1]


@pytest.mark.parametrize("batch", [(1,), (8,), (2, 3)])
def test_compiled_density_and_gradient_equal_the_numpy_formulas(batch, monkeypatch, random_pairs):
    """The compiled loop (``models/_flex_kernel.py``) against the NumPy definition, to rounding.

    Random configs of 1-4 rows of pairs (zero weights among them, up to 2,000 samples per task), prior draws
    of theta stretched up to twice their spread, and one draw outside the bounds.
    """
    from numpy.testing import assert_allclose

    from bayespass.models import flex


    model = get_model("flex")
    rng = np.random.default_rng(len(batch) * 10 + batch[-1])
    for _ in range(6):
        aux, w, cfg = random_pairs(model, rng)
        size = int(np.prod(batch)) * cfg
        theta = (model.sample_prior(size, rng) * rng.uniform(0.5, 2.0, (size, model.n_params))).reshape(
            batch + (cfg, model.n_params))
        theta.reshape(-1, model.n_params)[0, 0] = 16.0  # above the bounds of logit mu: density -inf
        got = {}
        for compiled in (True, False):
            monkeypatch.setattr(flex, "COMPILED", compiled)
            got[compiled] = model.logp_grad(theta, aux, w)
        for a, b in zip(got[True], got[False], strict=True):
            assert a.shape == b.shape
            assert_allclose(a, b, rtol=1e-10, atol=1e-10)
        assert np.isneginf(got[True][0].reshape(-1)[0])


@pytest.mark.parametrize("compiled", [True, False])
def test_the_concentration_saturates_and_its_gradient_is_the_derivative(compiled, monkeypatch):
    """kappa = 1 / (exp(-log_kappa) + 1 / kappa_max): exp(log_kappa) well below kappa_max, kappa_max far above.

    The gradient in log kappa carries the saturation's factor (1 - kappa / kappa_max), checked against central
    differences where the factor is far from 1 (log kappa 5-10), by the compiled loop and the NumPy formulas.
    """
    from numpy.testing import assert_allclose

    from bayespass.models import flex
    from bayespass.models.base import Model, PairData

    model = get_model("flex")
    assert model.settings["kappa_max"] == 400.0
    rng = np.random.default_rng(5)
    data = PairData(np.array([[5.0, 5, 5, 5, 5, 5]]), np.array([[0.0, 1, 2, 3, 4, 5]]),
                    np.array([[30.0, 8, 10, 12, 9, 25]]))
    aux = model.prepare(data)
    theta = model.start(data)[None] + 0.3 * rng.standard_normal((4, 1, model.n_params))
    theta[:, 0, 1] = [0.0, 5.0, 7.0, 10.0]
    kappa = model.named(theta)["kappa"][:, 0]
    assert_allclose(kappa, 1.0 / (np.exp(-theta[:, 0, 1]) + 1 / 400.0))
    assert kappa[0] == pytest.approx(1.0, rel=0.01) and kappa[3] == pytest.approx(400.0, rel=0.03)
    unsaturated = flex.Flex(kappa_max=None)
    assert_allclose(unsaturated.named(theta)["kappa"][:, 0], np.exp(theta[:, 0, 1]))
    monkeypatch.setattr(flex, "COMPILED", compiled)
    lp, grad = model.logp_grad(theta, aux, data.w)
    lp_num, num = Model.logp_grad(model, theta, aux, data.w)
    assert_allclose(lp, lp_num, rtol=1e-10)
    assert_allclose(grad, num, rtol=1e-4, atol=1e-4 * np.abs(num).max())
    with pytest.raises(ValueError, match="kappa_max=0 must be a positive number or None"):
        flex.Flex(kappa_max=0)
    for bad in (True, "400", -1.0, float("nan")):
        with pytest.raises(ValueError, match="must be a positive number or None"):
            flex.Flex(kappa_max=bad)
    assert flex.Flex(kappa_max=np.int64(400)).inv_kappa_max == 1 / 400  # NumPy numbers are numbers


def test_a_fit_is_read_with_the_settings_it_was_made_with(tmp_path):
    """A fit of flex with other settings (fewer spline coefficients, no saturation) is post-processed with them,
    after a round trip through netCDF and inside a stack whose label is not a model name."""
    import arviz as az

    from bayespass.models.base import fitted_model
    from bayespass.models.flex import Flex
    from bayespass.models.predictive import pair_data, passk_mean_draws

    rng = np.random.default_rng(3)
    counts = bp.make_counts(np.full((1, 80), 6), rng.binomial(6, rng.beta(0.5, 2.0, (1, 80))), config=["a"])
    own = Flex(K=8, kappa_max=None)
    fit = bp.fit(counts, own, progressbar=False)
    path = tmp_path / "fit.nc"
    fit.to_netcdf(path)
    back = az.from_netcdf(path)
    theta = fit.posterior["theta"].values
    assert theta.shape[-1] == own.n_params == 13  # the default flex has 21: it cannot read these draws
    k = [1, 10, 100]
    expected = passk_mean_draws(own, theta, pair_data(fit), k).mean((0, 1))
    for f in (fit, back):
        got = bp.passk_draws(f, k)["passk_mean"].mean(("chain", "draw")).values
        np.testing.assert_allclose(got, expected, rtol=1e-10)
    stacked = bp.stack({"mine": back, "bb": bp.fit(counts, "bb", progressbar=False)})
    assert np.isfinite(bp.passk_curve(stacked, k=k)["mean"].values).all()
    mine = [m for m in bp.models.predictive._model(stacked).components if m.name == "flex"][0]
    assert mine.settings == own.settings
    # a fit recorded before kappa_max existed was made without saturation; the default's own settings give it
    legacy = {key: v for key, v in Flex().settings.items() if key != "kappa_max"}
    assert fitted_model("flex", repr(legacy)).inv_kappa_max == 0.0
    assert fitted_model("flex", repr(Flex().settings)).inv_kappa_max == 1 / 400
    # a fit recorded before the cells were integrated took each interior point's value, and is read so
    before = fitted_model("flex", repr({key: v for key, v in Flex().settings.items() if key != "cells"}))
    assert not before.cells and fitted_model("flex", repr(Flex().settings)).cells
    lik = stats.binom.pmf(2, 7, before.support)
    np.testing.assert_allclose(before.lik_matrix(7.0, 2.0), lik, rtol=1e-10)
    g = before.weights(np.zeros(before.n_params))
    q = before.q(np.zeros((1, 1, before.n_params)), np.array([7.0]), np.array([2.0]), [3])[0, 0, 0]
    np.testing.assert_allclose(q, g @ (lik * (1 - before.support) ** 3) / (g @ lik), rtol=1e-10)
    with pytest.raises(ValueError, match="unknown flex settings"):
        fitted_model("flex", "{'J': 80, 'wiggle': 2}")
    with pytest.raises(ValueError, match="is not a dict literal"):
        fitted_model("flex", "J=80")
