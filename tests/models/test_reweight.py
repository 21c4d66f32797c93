"""Importance resampling of the fast path's draws (``bayespass.models.reweight``): it recovers a posterior that
brute-force quadrature knows from chains that saw only part of it, and it leaves draws alone when it cannot."""

import warnings

import numpy as np
import pytest

import bayespass as bp
from bayespass.models.base import PairData, get_model
from bayespass.models.reweight import MAX_DIM, reweight


@pytest.fixture(scope="module")
def bb_posterior():
    """bb's log posterior on one config, and its posterior on a fine grid of (logit mu, log kappa)."""
    rng = np.random.default_rng(5)
    p = rng.beta(0.6, 0.9, 120)
    counts = bp.make_counts(np.full(120, 6), rng.binomial(6, p))
    m = get_model("bb")
    data = PairData.from_counts(counts)
    aux = m.prepare(data)

    def logp_grad(th):
        return m.logp_grad(th, aux, data.w)

    g0, g1 = np.meshgrid(np.linspace(-3, 3, 241), np.linspace(-3, 5, 321), indexing="ij")
    grid = np.stack([g0.ravel(), g1.ravel()], -1)
    lp = logp_grad(grid[:, None, :])[0][:, 0]
    w = np.exp(lp - lp.max())
    w /= w.sum()
    assert w.reshape(g0.shape)[[0, -1]].sum() + w.reshape(g0.shape)[:, [0, -1]].sum() < 1e-6  # grid holds it
    return logp_grad, grid, w


def test_reweight_recovers_the_quadrature_posterior_from_chains_with_the_wrong_weights(bb_posterior):
    logp_grad, grid, w = bb_posterior
    mean = w @ grid
    sd = np.sqrt(w @ (grid - mean) ** 2)
    rng = np.random.default_rng(0)
    # chains that cover the posterior with the wrong weights (as slowly mixing chains along a ridge do):
    # the posterior tilted by exp(-0.8 z) in logit mu (mean off by about 0.8 sd), jittered off the grid
    tilt = w * np.exp(-0.8 * (grid[:, 0] - mean[0]) / sd[0])
    pick = rng.choice(grid.shape[0], 1600, p=tilt / tilt.sum())
    stuck = (grid[pick] + rng.uniform(-0.0125, 0.0125, (1600, 2))).reshape(16, 100, 1, 2)
    assert abs(stuck[..., 0].mean() - mean[0]) > 0.6 * sd[0]  # the input is badly wrong
    out = reweight(logp_grad, stuck, rng=1)
    assert out.used[0] and out.khat[0] <= 0.7 and out.ess[0] >= 200
    got = out.draws[:, :, 0].reshape(-1, 2)
    se = sd * np.sqrt(1 / out.ess[0] + 1 / got.shape[0])  # the weights' error plus the resample's
    assert np.all(np.abs(got.mean(0) - mean) < 4 * se + 0.02 * sd)
    assert np.all(np.abs(got.std(0) / sd - 1) < 0.15)
    # equal-tailed 90% interval of logit mu against the quadrature's
    cdf = np.cumsum(np.bincount(np.searchsorted(np.unique(grid[:, 0]), grid[:, 0]), weights=w))
    lo, hi = np.unique(grid[:, 0])[np.searchsorted(cdf, [0.05, 0.95])]
    assert np.allclose(np.quantile(got[:, 0], [0.05, 0.95]), [lo, hi], atol=0.3 * sd[0])


def test_reweight_keeps_the_draws_when_its_proposal_cannot_cover_the_posterior(bb_posterior):
    logp_grad, grid, w = bb_posterior
    mean = w @ grid
    # chains collapsed onto a point far from the posterior: the weights are degenerate, the draws stay
    far = np.broadcast_to(mean + [2.0, 2.5], (16, 100, 1, 2)) + 1e-3 * np.random.default_rng(2).standard_normal(
        (16, 100, 1, 2))
    out = reweight(logp_grad, far, rng=3)
    assert not out.used[0]
    assert out.khat[0] > 0.7 or out.ess[0] < 200
    assert np.array_equal(out.draws, far)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")  # flex's short chains may fail the gate
def test_fit_records_the_correction_and_gates_on_its_effective_sample_size():
    rng = np.random.default_rng(8)
    # near-deterministic configs (most tasks all-pass or all-fail): where lnorm's short chains mix slowly
    p = np.where(rng.random((2, 200)) < 0.6, 1.0, np.where(rng.random((2, 200)) < 0.6, 0.0, rng.random((2, 200))))
    counts = bp.make_counts(np.full(p.shape, 5), rng.binomial(5, p))
    fit = bp.fit(counts, "lnorm", "eb", seed=1, progressbar=False)
    attrs = fit.posterior.attrs
    assert len(attrs["reweight_khat"]) == 2 and all(attrs["reweight_used"])
    assert attrs["convergence_ess_bulk_min"] <= min(attrs["reweight_ess"]) + 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flex = bp.fit(counts, "flex", "eb", seed=1, progressbar=False)
    assert get_model("flex").n_params > MAX_DIM and "reweight_khat" not in flex.posterior.attrs
    with bp.rc_context({"eb.reweight": False}):
        raw = bp.fit(counts, "lnorm", "eb", seed=1, progressbar=False)
    assert "reweight_khat" not in raw.posterior.attrs
    with pytest.raises(ValueError, match="eb.reweight must be True or False; got 'yes'"):
        bp.rcParams["eb.reweight"] = "yes"


def test_configs_the_correction_cannot_take_get_full_length_chains(monkeypatch):
    import bayespass.models.fit as fit_module
    from bayespass.models.reweight import Reweighted

    calls, chains_run = [], []
    real, real_hmc = fit_module.reweight, fit_module._hmc

    def half_length_refuses_config_0(logp_grad, draws, **kw):
        out = real(logp_grad, draws, **kw)
        calls.append(draws.shape)
        if draws.shape[1] == 30:  # as if config 0's proposal always failed on the short chains (it is first in
            # the subset of a second stage too)
            out.draws[:, :, 0], out.used[0], out.khat[0] = np.nan, False, 1.5
        return Reweighted(out.draws, out.khat, out.ess, out.used)

    def spy_hmc(counts, m, warmup, draws, kw):
        chains_run.append((counts.sizes["config"], draws))
        return real_hmc(counts, m, warmup, draws, kw)

    monkeypatch.setattr(fit_module, "reweight", half_length_refuses_config_0)
    monkeypatch.setattr(fit_module, "_hmc", spy_hmc)
    rng = np.random.default_rng(4)
    counts = bp.make_counts(np.full((3, 80), 5), rng.binomial(5, rng.beta(1, 1, (3, 80))))
    with bp.rc_context({"eb.draws": 60, "eb.warmup": 80, "eb.chains": 8}):
        fit = bp.fit(counts, "bb", "eb", seed=2, progressbar=False)
    # half-length chains on all three configs, then full-length chains on config 0 only
    assert chains_run == [(3, 30), (1, 60)]
    # the first stage of the correction sees all three configs, a second (more proposals) only those short of
    # ESS, config 0 among them; the full-length chains are corrected again
    assert calls[0] == (8, 30, 3, 2) and calls[1][:2] == (8, 30) and 1 <= calls[1][2] <= 3
    assert all(c == (8, 60, 1, 2) for c in calls[2:]) and len(calls) >= 3
    theta = fit.posterior["theta"].values
    assert theta.shape == (8, 60, 3, 2) and np.isfinite(theta).all()
    attrs = fit.posterior.attrs
    # config 0: corrected again if its diagnostics allow, else its full-length chains are kept
    assert attrs["reweight_used"][0] == int(attrs["reweight_khat"][0] <= 0.7 and attrs["reweight_ess"][0] >= 200)
    assert attrs["reweight_used"][1:] == [1, 1]


# short chains keep this test fast; the gate's R-hat over them may fail and warn (what is checked is the rerun)
@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")
def test_chains_that_fail_the_rhat_gate_run_again_longer(monkeypatch):
    import bayespass.models.fit as fit_module

    calls, real_hmc, real_rhat = [], fit_module._hmc, fit_module._rhat_by_config

    def spy_hmc(counts, m, warmup, draws, kw):
        calls.append((counts.sizes["config"], warmup, draws))
        return real_hmc(counts, m, warmup, draws, kw)

    def config_1_fails(m, theta, configs, data):  # at every stage, whatever else is sampled with it
        return np.where(np.asarray(configs) == counts.config.values[1], 2.0, 1.0)

    monkeypatch.setattr(fit_module, "_hmc", spy_hmc)
    monkeypatch.setattr(fit_module, "_rhat_by_config", config_1_fails)
    rng = np.random.default_rng(4)
    counts = bp.make_counts(np.full((3, 80), 5), rng.binomial(5, rng.beta(1, 1, (3, 80))))
    with bp.rc_context({"eb.draws": 40, "eb.warmup": 60, "eb.chains": 8, "eb.reweight": False}):
        fit = bp.fit(counts, "bb", "eb", seed=2, progressbar=False)
    # config 1 alone, twice the warm-up and four times the draws; on the fast path it then stays
    assert calls == [(3, 60, 40), (1, 120, 160)]
    assert fit.posterior.attrs["rerun"] == [0, 1, 0] and np.isfinite(fit.posterior["theta"].values).all()
    # MCMC (gate 1.01) runs a config that fails again once more, 4x the warm-up and 16x the draws
    calls.clear()
    fit = bp.fit(counts, "bb", "mcmc", draws=40, tune=60, chains=8, seed=2, progressbar=False)
    assert calls == [(3, 60, 40), (1, 120, 160), (1, 240, 640)]
    assert fit.posterior.attrs["rerun"] == [0, 2, 0] and np.isfinite(fit.posterior["theta"].values).all()
    # the per-config R-hat sees a chain whose learnt shape differs (flex: named mean_p and dataset pass@k)
    flex = get_model("flex")
    theta = np.stack([flex.start(PairData.from_counts(counts))] * 40)[None].repeat(4, 0)
    theta = theta + 0.01 * rng.standard_normal(theta.shape)
    theta[0, :, 2, 4] += 3.0  # one chain far off in a spline coefficient only: a shape the others lack
    r = real_rhat(flex, theta, counts.config.values, PairData.from_counts(counts))
    assert r[2] > 1.05 and np.all(r[:2] < 1.05)


# short chains keep this test fast; the gate's R-hat over them may fail and warn (what is checked is the rerun)
@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")
def test_chains_that_diverged_run_again_with_smaller_steps(monkeypatch):
    """flex on the real MBPP counts diverged once or twice at 2 of 6 seeds and bp.fit warned; such configs now run
    again at a target acceptance of at least 0.95, and the divergences reported are those of the draws kept."""
    import dataclasses

    import bayespass.models.fit as fit_module

    calls, real_hmc = [], fit_module._hmc

    def spy_hmc(counts, m, warmup, draws, kw):
        res, logp, data = real_hmc(counts, m, warmup, draws, kw)
        calls.append((counts.sizes["config"], warmup, draws, kw["target_accept"]))
        if len(calls) == 1:  # the first run: config 1 diverged three times
            res = dataclasses.replace(res, divergences=np.where(np.arange(counts.sizes["config"]) == 1, 3, 0))
        return res, logp, data

    monkeypatch.setattr(fit_module, "_hmc", spy_hmc)
    monkeypatch.setattr(fit_module, "_rhat_by_config", lambda m, theta, configs, data: np.ones(len(configs)))
    rng = np.random.default_rng(4)
    counts = bp.make_counts(np.full((3, 80), 5), rng.binomial(5, rng.beta(1, 1, (3, 80))))
    with bp.rc_context({"eb.draws": 40, "eb.warmup": 60, "eb.chains": 8, "eb.reweight": False}):
        fit = bp.fit(counts, "bb", "eb", seed=2, progressbar=False)
    assert calls == [(3, 60, 40, 0.8), (1, 120, 160, 0.95)]
    attrs = fit.posterior.attrs  # (the gate's R-hat over these short chains may still warn)
    assert attrs["rerun"] == [0, 1, 0] and attrs["divergences"] == [0, 0, 0]
    assert "divergence" not in attrs["convergence"]
    # MCMC asks 0.9 first; a config that diverged reruns at 0.95 (and its 1.01 gate then passes: no third run)
    calls.clear()
    bp.fit(counts, "bb", "mcmc", draws=40, tune=60, chains=8, seed=2, progressbar=False)
    assert calls == [(3, 60, 40, 0.9), (1, 120, 160, 0.95)]


@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")
def test_kept_chains_take_long_trajectories_and_half_the_warmup_from_two_samples_on(monkeypatch):
    import bayespass.models.fit as fit_module

    calls, real_hmc = [], fit_module._hmc

    def spy_hmc(counts, m, warmup, draws, kw):
        calls.append((kw.get("steps"), kw["target_accept"], warmup))
        return real_hmc(counts, m, warmup, draws, kw)

    monkeypatch.setattr(fit_module, "_hmc", spy_hmc)
    rng = np.random.default_rng(5)
    p = rng.beta(0.5, 0.5, (2, 120))
    long = fit_module.HMC_MCMC["steps"]
    with bp.rc_context({"eb.draws": 40, "eb.warmup": 60, "eb.chains": 4}):
        # (samples per task, tune passed) -> the first run's warm-up: one sample keeps all 60, two or more
        # take 30; a tune the user passes is kept as given
        for n, tune, warmup in ((1, None, 60), (2, None, 30), (2, 50, 50)):
            calls.clear()
            fit = bp.fit(bp.make_counts(np.full(p.shape, n), rng.binomial(n, p)), "flex", "eb", seed=1,
                         tune=tune, progressbar=False)
            assert calls and all(c[:2] == (long, 0.9) for c in calls), (n, calls)
            assert calls[0][2] == warmup, (n, tune, calls)
            assert all(c[2] == 2 * warmup for c in calls[1:]), calls  # a rerun doubles the first run's warm-up
            assert np.isfinite(fit.posterior["theta"].values).all()
        calls.clear()
        bp.fit(bp.make_counts(np.full(p.shape, 3), rng.binomial(3, p)), "bb", "eb", seed=1, progressbar=False)
        assert calls and all(c[:2] == (None, 0.8) for c in calls), calls  # the corrected path keeps 4-16 at 0.8
