"""Fits against known truth. MCMC fits are kept small; compiled models are cached by pytensor."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose

import bayespass as bp
from bayespass.testing import draw_zoib, simulate_counts, true_passk

MCMC = dict(draws=500, tune=500, chains=4, progressbar=False, sampler="pymc")


@pytest.fixture(scope="module")
def data400():
    p = draw_zoib(400, 0.6, 1.4, seed=11)
    return simulate_counts(p, 20, seed=12)


@pytest.fixture(scope="module")
def bb_mcmc(data400):
    return bp.fit(data400, "bb", "mcmc", seed=1, **MCMC)


def test_layout(bb_mcmc):
    groups = set(bb_mcmc.groups())
    assert {"posterior", "posterior_predictive", "log_likelihood", "observed_data", "constant_data",
            "sample_stats", "passk"} <= groups
    assert bb_mcmc.log_likelihood["c"].dims == ("chain", "draw", "config", "task")
    assert bb_mcmc.posterior_predictive["c"].dims == ("chain", "draw", "config", "task")
    assert bb_mcmc.posterior.attrs["convergence"] == "ok"
    assert bb_mcmc.passk.k.max() >= 200


def test_mcmc_and_eb_agree_on_pass10(data400, bb_mcmc):
    eb = bp.fit(data400, "bb", "eb", seed=1)
    m_mcmc = bp.passk_curve(bb_mcmc, [10])["mean"].item()
    m_eb = bp.passk_curve(eb, [10])["mean"].item()
    assert abs(m_mcmc - m_eb) < 0.01
    # and both equal the closed-form EB plug-in to the same precision
    assert abs(bp.passk(data400, 10, method="bb").item() - m_eb) < 0.01


def test_marginal_loglik_matches_scipy(bb_mcmc, data400):
    from scipy.stats import betabinom

    post = bb_mcmc.posterior
    a, b = post.a.values[0, 0, 0], post.b.values[0, 0, 0]
    expect = betabinom(data400.n.values[0], a, b).logpmf(data400.c.values[0])
    assert_allclose(bb_mcmc.log_likelihood["c"].values[0, 0, 0], expect, rtol=1e-6)


def test_eb_zoibb_recovers_and_covers_truth():
    p = draw_zoib((3, 500), 0.8, 1.6, 0.25, 0.1, seed=5)
    ds = simulate_counts(p, 10, seed=6)
    idata = bp.fit(ds, "zoibb", "eb", seed=0)
    post = idata.posterior
    for name, truth in (("pi0", 0.25), ("pi1", 0.1)):
        lo, hi = np.quantile(post[name].values[0], [0.02, 0.98], axis=0)
        assert np.all((lo < truth + 0.03) & (hi > truth - 0.03)), (name, lo, hi)
    cur = bp.passk_curve(idata, [1, 5, 50])
    truth = true_passk(p, [1, 5, 50])
    inside = (cur.eti.sel(ci_bound="lower").values <= truth) & (truth <= cur.eti.sel(ci_bound="upper").values)
    assert inside.mean() >= 2 / 3


def test_loo_prefers_zoibb_with_structural_zeros_and_bb_on_beta():
    p_z = draw_zoib(600, 1.5, 1.5, 0.3, 0.0, seed=21)
    ds_z = simulate_counts(p_z, 20, seed=22)
    fits = {m: bp.fit(ds_z, m, "eb", seed=0) for m in ("bb", "zoibb")}
    table = bp.compare(fits)
    assert table.xs(ds_z.config.item()).index[0] == "zoibb"
    p_b = draw_zoib(600, 2.0, 3.0, seed=23)
    ds_b = simulate_counts(p_b, 20, seed=24)
    fits = {m: bp.fit(ds_b, m, "eb", seed=0) for m in ("bb", "zoibb")}
    table = bp.compare(fits).xs(ds_b.config.item())
    # zoibb nests bb, so on pure Beta data the preference is weak (about one dse) by nature
    assert table.index[0] == "bb"
    assert table["n_bad_k"].sum() == 0
    cv = bp.cv_elpd(ds_z, folds=10, seed=0)
    assert cv.best.item() == "zoibb"
    assert cv.elpd.dims == ("config", "candidate") and list(cv.candidate.values) == ["bb", "zoibb"]
    assert float(cv.elpd_diff.sel(candidate="zoibb").item()) == 0.0
    # extend_inferencedata: the same numbers attached to the fits / the fit they were computed from
    again = bp.compare(fits, extend_inferencedata=True)
    for d in fits.values():
        got = d["loo_compare"].sel(config=ds_b.config.item())
        for m in ("bb", "zoibb"):
            assert float(got["elpd_loo"].sel(candidate=m)) == again.loc[(ds_b.config.item(), m), "elpd_loo"]
    fit_z = bp.fit(ds_z, "bb", "eb", seed=0)
    cv2 = bp.cv_elpd(fit_z, folds=10, seed=0, extend_inferencedata=True)  # a fit: its own counts
    np.testing.assert_array_equal(cv2.elpd.values, cv.elpd.values)
    np.testing.assert_array_equal(fit_z["cv_elpd"].elpd.values, cv.elpd.values)
    with pytest.raises(TypeError, match="extend_inferencedata=True needs"):
        bp.cv_elpd(ds_z, extend_inferencedata=True)
    with pytest.raises(TypeError, match="extend_inferencedata=True needs"):
        bp.compare({"a": ds_z, "b": ds_z}, extend_inferencedata=True)


def test_ppc_calm_when_well_specified_and_flags_structural_zeros():
    p = draw_zoib(500, 0.7, 1.3, seed=31)
    good = bp.ppc(bp.fit(simulate_counts(p, 20, seed=32), "bb", "eb", seed=0))
    assert not good.extreme.any()
    from bayespass.stats.ppc import misfit_note

    assert misfit_note(None, good) == ""
    # 800 tasks: with 500 the frac_zero p-value sat at 0.01-0.03, on the threshold, and moved across it with
    # the sampler's seed; here it is 0.004-0.011 over seeds 0-2
    p = draw_zoib(800, 3.0, 3.0, 0.4, 0.0, seed=33)
    bad = bp.ppc(bp.fit(simulate_counts(p, 20, seed=34), "bb", "eb", seed=0))
    assert bool(bad.extreme.sel(statistic="frac_zero").item())
    fixed = bp.ppc(bp.fit(simulate_counts(p, 20, seed=34), "zoibb", "eb", seed=0))
    assert not fixed.extreme.any()


def test_ppc_histogram_has_a_bin_per_count_and_flags_a_shape_the_default_cannot_follow():
    """p at four levels (0.02, 0.2, 0.5, 0.9), 300 tasks x 20 samples: the default's fit is good enough for the
    fractions and moments, not for the histogram of c. Its tasks at p = 0.02 pass 0 or 1 times of 20, which 10
    bins of c / n put together (p = 0.10 here; 0.06-0.63 on five other data seeds, where one bin per c gave
    0.002-0.56, under 0.05 on three); one bin per c flags it here (p = 0.003-0.007 over four sampler seeds).
    At p = 0.02 pass@100 is 0.87, where the default's band covered 4% of replicates (RESULTS, "The full grid
    again after the unbiased band"): the check is the user's warning that the shape near p = 0 is off."""
    from bayespass.stats.ppc import _stats, exact_levels

    g = np.random.default_rng(0)
    counts = simulate_counts(g.choice([0.02, 0.2, 0.5, 0.9], 300), 20, seed=100)
    fit = bp.fit(counts, seed=0)
    out = bp.ppc(fit)
    assert bool(out.extreme.sel(statistic="hist_distance").item())
    assert out.p_value.sel(statistic="hist_distance").item() < 0.01
    # what `bayespass fit` and a run's pass@k table then say
    from bayespass.stats.ppc import misfit_note

    note = misfit_note(fit, out)
    assert "config-0 (" in note and "hist_distance" in note and "bp.passk_bounds" in note
    # the histogram is the shares of c = 0..20
    n, c = counts.n.values, counts.c.values
    assert exact_levels(n).tolist() == [20]
    assert_allclose(_stats(c, n, exact_levels(n))["hist"][0], np.bincount(c[0], minlength=21) / 300)
    # ragged n, or n above EXACT_MAX_N: 10 bins of c / n
    assert exact_levels(np.array([[20, 10, 0], [30, 30, 30], [0, 5, 5]])).tolist() == [0, 0, 5]


@pytest.mark.slow
def test_hier_borrows_strength():
    """6 configs x 164 tasks, m = 5, shared task difficulty: hier beats per-config bb."""
    rng = np.random.default_rng(41)
    d = rng.normal(0, 2.0, 164)
    alpha = np.linspace(-1.5, 1.5, 6)
    logit = alpha[:, None] - d[None, :] + rng.normal(0, 0.5, (6, 164))
    p = 1 / (1 + np.exp(-logit))
    ds = simulate_counts(p, 5, seed=42)
    k = [10, 50]
    truth = true_passk(p, k)
    hier = bp.passk_curve(bp.fit(ds, "hier", "mcmc", seed=3, progressbar=False), k)["mean"].values
    bb = bp.passk_curve(bp.fit(ds, "bb", "eb", seed=3), k)["mean"].values
    err_h, err_b = np.abs(hier - truth).mean(), np.abs(bb - truth).mean()
    assert err_h < err_b, (err_h, err_b)


@pytest.mark.slow
def test_loo_of_shared_by_eb_is_biased_low_and_compare_says_so():
    """Where ``shared`` does not hold (independent p per config), its EB draws fit worse than the exact posterior's.

    The Laplace covariance (outer product of the per-task scores) spreads the draws, and the per-config
    log-likelihood with them: elpd_loo 11 nats below MCMC's here, 54-71 on real MBPP.  ``bp.compare`` warns.
    """
    import arviz as az

    rng = np.random.default_rng(1)
    counts = simulate_counts(rng.beta(0.5, 0.5, (3, 80)), 4, seed=2, model=["a", "b", "c"]).drop_vars("p_true")
    eb = bp.fit(counts, "shared", "eb", progressbar=False)
    mcmc = bp.fit(counts, "shared", "mcmc", progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert az.loo(eb).elpd_loo < az.loo(mcmc).elpd_loo - 5
    bb = bp.fit(counts, "bb", "eb", progressbar=False)
    with pytest.warns(UserWarning, match=r"fit\(s\) \['shared'\] of model 'shared' by EB"):
        bp.compare({"shared": eb, "bb": bb})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        bp.compare({"shared": mcmc, "bb": bb}, per_config=False)


@pytest.mark.slow
def test_hier_config_with_one_sample_per_task_borrows_the_others_dispersion(one_and_ten):
    """Four configs of one truth (phi = 0.7), two at ten samples per task and two at one (as for ``shared``).

    One sample per task does not tell a config's dispersion.  With independent priors (log phi ~ N(log 5, 1.5))
    the one-sample configs kept log phi near 1.6 against the others' -0.4, their pass@10 came out 0.865 against a
    truth of 0.750 and P(better at pass@10) against an identical ten-sample config was 0.84-0.86.
    """
    counts, p = one_and_ten
    fit = bp.fit(counts, "hier", "mcmc", seed=1, progressbar=False)
    assert fit.posterior.attrs["convergence"] == "ok"
    log_phi = fit.posterior["log_phi"].mean(("chain", "draw"))
    assert np.all(np.abs(log_phi.sel(config=["x", "y"]).values - log_phi.sel(config=["a", "b"]).values.mean()) < 1.2)
    with pytest.warns(UserWarning, match="one sample on most of their tasks"):
        cmp = bp.compare_configs(fit, k=[1, 10], progressbar=False)
    truth = true_passk(p, [10])[:, 0]
    assert np.all(np.abs(cmp["passk"].sel(k=10).values - truth) < 0.06), (cmp["passk"].sel(k=10).values, truth)
    for one, ten in (("x", "a"), ("y", "b")):
        assert 0.2 < float(cmp["prob_better"].sel(config=one, config_b=ten, k=10)) < 0.8


@pytest.mark.slow
def test_zoibb_mcmc_matches_eb_for_every_config():
    """Several configs with different truths: each config's data must inform its own parameters
    (regression test: pm.CustomDist used only the first row of (config, 1) parameters)."""
    p = np.vstack([draw_zoib(300, 0.8, 1.2, 0.2, 0.1, seed=51), draw_zoib(300, 2.0, 0.5, 0.05, 0.3, seed=53),
                   draw_zoib(300, 0.3, 3.0, 0.5, 0.0, seed=54)])
    ds = simulate_counts(p, 10, seed=52)
    mc = bp.fit(ds, "zoibb", "mcmc", seed=2, progressbar=False, sampler="pymc")
    eb = bp.fit(ds, "zoibb", "eb", seed=2)
    diff = bp.passk_curve(mc, [10])["mean"].values - bp.passk_curve(eb, [10])["mean"].values
    assert np.all(np.abs(diff) < 0.01), diff
    # boundary masses: agree to within half a posterior sd (pi0 is confounded with a Beta whose
    # a is small in the third config, so its posterior is wide)
    gap = np.abs(mc.posterior.pi0.mean(("chain", "draw")).values - eb.posterior.pi0.mean(("chain", "draw")).values)
    sd = mc.posterior.pi0.std(("chain", "draw")).values
    assert np.all(gap < np.maximum(0.03, 0.5 * sd)), (gap, sd)
    assert mc.log_likelihood["c"].dims == ("chain", "draw", "config", "task")


def test_layout_and_gate_of_the_default_mcmc(data400, bb_mcmc):
    """``method="mcmc"`` samples by bayespass's HMC by default: same layout as NUTS, same posterior."""
    hmc = bp.fit(data400, "bb", "mcmc", seed=1, progressbar=False)
    assert hmc.posterior.attrs["sampler"] == "bayespass-hmc" and bb_mcmc.posterior.attrs["sampler"] == "pymc-nuts"
    assert hmc.posterior.attrs["convergence"] == "ok"
    assert hmc.posterior.sizes["chain"] == 8 and hmc.posterior.sizes["draw"] == 500
    assert set(bb_mcmc.groups()) <= set(hmc.groups())
    for name in ("mu", "kappa"):
        a, b = hmc.posterior[name], bb_mcmc.posterior[name]
        assert abs(float(a.mean() - b.mean())) < 0.2 * float(b.std()), name
        assert abs(float(a.std() / b.std()) - 1) < 0.15, name


def test_fit_for_k_without_the_gates_k_is_gated_on_the_same_pass_at_k(data400):
    """``fit(k=[50])`` stores pass@k only at 50: the gate computes pass@1, 10, 100 from the draws (it crashed)."""
    from bayespass.models.fit import GATE_K, convergence_report

    full = bp.fit(data400, "bb", "eb", seed=2, progressbar=False)
    assert np.isin(GATE_K, full.passk.k).all()
    for k in ([50], [2, 3], [1, 50]):
        idata = bp.fit(data400, "bb", "eb", k=k, seed=2, progressbar=False)
        assert list(idata.passk.k.values) == k and idata.posterior.attrs["convergence"] == "ok"
        # the same draws: the gate on pass@k from the draws agrees with the gate on the stored (thinned) draws
        assert_allclose(idata.posterior.attrs["convergence_r_hat_max"], convergence_report(full)["r_hat_max"],
                        rtol=0.02)
        assert np.isfinite(bp.passk_curve(idata, k)["eti"].values).all()


def test_mcmc_shows_its_progress(capsys):
    counts = simulate_counts(np.full((2, 40), 0.4), 5, seed=3)
    bp.fit(counts, "bb", "mcmc", seed=1)
    assert "bb by HMC (8 chains x 2 configs)" in capsys.readouterr().err
    bp.fit(counts, "bb", "mcmc", seed=1, progressbar=False)
    assert "HMC" not in capsys.readouterr().err


def test_the_default_shows_one_bar_over_its_candidates_and_the_stack(capsys, monkeypatch):
    from bayespass.models import fit as fit_mod

    monkeypatch.setattr(fit_mod, "EB_BAR_DELAY", 0.0)  # a slow fit's bar, without waiting for one
    counts = simulate_counts(np.full((1, 40), 0.4), 5, seed=3)
    for cores in (2, 1):  # the candidates in forked workers, and one after another here
        bp.fit(counts, candidates=["bb", "zoibb"], cores=cores)
        err = capsys.readouterr().err
        assert "model auto by eb" in err and "3/3" in err and "done: " in err and "stack" in err, err
    bp.fit(counts, candidates=["bb", "zoibb"], progressbar=False)
    assert "model auto" not in capsys.readouterr().err
    # a single model by eb (no sampler's bar of its own): its clock
    bp.fit(counts, "bb")
    assert "model bb by eb: 00:" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("model", ["zoibb", "lnorm"])
def test_hmc_and_nuts_agree(model):
    """The default MCMC (bayespass HMC) and PyMC's NUTS sample the same posterior (pass@k and named parameters)."""
    p = np.where(np.random.default_rng(7).random(200) < 0.2, 0.0, np.random.default_rng(8).beta(0.6, 1.2, 200))
    counts = simulate_counts(p, 8, seed=9)
    hmc = bp.fit(counts, model, "mcmc", seed=3, progressbar=False)
    nuts = bp.fit(counts, model, "mcmc", seed=3, progressbar=False, sampler="pymc", draws=800, tune=800,
                  chains=4, cores=2)
    k = [1, 10, 100]
    a, b = bp.passk_curve(hmc, k), bp.passk_curve(nuts, k)
    assert_allclose(a["mean"], b["mean"], atol=0.01)
    assert_allclose(a["eti"].diff("ci_bound"), b["eti"].diff("ci_bound"), rtol=0.2)
    for name in ("pi0", "pi1"):
        gap = abs(float(hmc.posterior[name].mean() - nuts.posterior[name].mean()))
        assert gap < max(0.005, 0.25 * float(nuts.posterior[name].std())), (name, gap)


def test_bad_arguments(data400):
    with pytest.raises(ValueError, match="model='gp' is not supported"):
        bp.fit(data400, "gp")
    with pytest.raises(ValueError, match="supports method='mcmc' only"):
        bp.fit(data400, "hier", "eb")
    with pytest.raises(ValueError, match="sampler='stan' is not supported"):
        bp.fit(data400, "bb", sampler="stan")
    with pytest.raises(TypeError, match="draws must be a positive integer"):
        bp.fit(data400, "bb", "eb", draws=1.5)


def test_bad_candidates_are_clear_errors_before_any_work(data400, monkeypatch):
    from bayespass.models import fit as fit_module

    class Reached(Exception):
        pass

    def reached(*a, **k):
        raise Reached

    monkeypatch.setattr(fit_module, "_fit_auto", reached)  # any work at all would reach it
    monkeypatch.setattr(fit_module, "_fit_model", reached)
    for candidates, match in ((["bb"], "at least two distinct candidates; got candidates=\\['bb'\\]"),
                              (["bb", "bb"], "at least two distinct"),
                              (["shared", "bb"], "holds the joint model 'shared'"),
                              (["hier", "bb"], "holds the joint model 'hier'"),
                              (["bb", "gp"], "candidates=\\['bb', 'gp'\\]: 'gp' is not a model; model='auto' stacks per-config models \\(bb, ")):
        with pytest.raises(ValueError, match=match):
            bp.fit(data400, candidates=candidates)
    with pytest.raises(ValueError, match="candidates=.* are the models that model='auto' stacks; got model='bb'"):
        bp.fit(data400, "bb", candidates=["bb", "zoibb"])  # was silently ignored
    with bp.rc_context({"stats.candidates": ("bb", "shared")}), pytest.raises(ValueError, match="joint model"):
        bp.fit(data400)
    with pytest.raises(Reached):  # a comma-separated string, as the CLI's lists, is a list of names
        bp.fit(data400, candidates="bb, zoibb")
    with pytest.raises(Reached):
        bp.fit(data400, "bb")


def test_a_nuts_sampler_not_installed_is_a_clear_error_before_any_work(data400, monkeypatch):
    import importlib.util
    import time

    from bayespass.models import fit as fit_module

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("jax", "nutpie") else real(name, *a))
    for sampler, missing in (("numpyro", "jax"), ("blackjax", "jax"), ("nutpie", "nutpie")):
        start = time.process_time()
        with pytest.raises(ImportError, match=f"sampler='{sampler}' needs {missing}.*pip install.*sampler='hmc'"):
            bp.fit(data400, "bb", "mcmc", sampler=sampler)
        assert time.process_time() - start < 1.0  # raised before any model was built or sampled
    class Reached(Exception):
        pass

    def reached(*a, **k):
        raise Reached

    monkeypatch.setattr(fit_module, "_fit_model", reached)
    with pytest.raises(Reached):  # method eb never asks for the sampler's packages: the fit goes on
        bp.fit(data400, "bb", "eb", sampler="numpyro")
    with pytest.raises(ValueError, match="not produced by bayespass.fit"):
        import arviz as az

        bp.passk_curve(az.from_dict({"a": np.zeros((1, 10))}), [1])


def test_curve_any_k_and_plot(tmp_path, data400):
    idata = bp.fit(data400, "zoibb", "eb", seed=0)
    cur = bp.passk_curve(idata, [3, 777, 5000])
    assert np.all(np.diff(cur["mean"].values[0]) > 0)
    assert np.all(cur.eti.sel(ci_bound="lower") <= cur["mean"]) and np.all(cur["mean"] <= cur.eti.sel(ci_bound="upper"))
    ax = bp.plot_passk_curve(bp.passk_curve(idata), counts=data400)
    ax.figure.savefig(tmp_path / "c.png")
    for fn in (bp.curve_table, bp.plot_passk_curve):  # a fit where its curve belongs: the call to make (was KeyError)
        with pytest.raises(TypeError, match="needs a curve from bp.passk_curve.*this is a fit: make its curve first"):
            fn(idata)
        with pytest.raises(TypeError, match="needs a curve from bp.passk_curve\\(...\\); got Dataset$"):
            fn(data400)
    axes = bp.plot_ppc(idata)
    axes[0].figure.savefig(tmp_path / "p.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    # the assumption-free bounds, dotted: two more lines per config, at the bounds' values
    ks = [1, 10, 100]
    free = bp.passk_bounds(data400, ks)
    ax = bp.plot_passk_curve(bp.passk_curve(idata, ks), bounds=free)
    dotted = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
    assert len(dotted) == 2 * data400.sizes["config"] and "no-prior bounds" in ax.get_title()
    np.testing.assert_allclose(dotted[0].get_ydata(), free.isel(config=0).sel(ci_bound="lower"))
    imp = bp.improvability(idata)
    assert imp.dpass_eti.sel(ci_bound="lower").item() < imp.dpass.item() < imp.dpass_eti.sel(ci_bound="upper").item()


@pytest.mark.slow
def test_hyperparameter_interval_coverage_replicates():
    """True (mu, kappa) inside the 90% interval in >= 80% of replicates (one MCMC fit, one config each).

    The issue asks for 30 replicates; with 30 the coverage estimate itself has sd 0.055, so a
    0.8 threshold fails ~3-7% of the time for a perfectly calibrated method.  60 replicates
    (sd 0.039) make the check meaningful rather than lucky.
    """
    a, b, reps = 0.7, 1.5, 60
    p = draw_zoib((reps, 150), a, b, seed=61)
    ds = simulate_counts(p, 10, seed=62)
    idata = bp.fit(ds, "bb", "mcmc", seed=4, progressbar=False)
    hits = []
    for name, truth in (("mu", a / (a + b)), ("kappa", a + b)):
        lo, hi = np.quantile(idata.posterior[name].values.reshape(-1, reps), [0.05, 0.95], axis=0)
        hits.append((lo <= truth) & (truth <= hi))
    assert np.mean(hits[0]) >= 0.8 and np.mean(hits[1]) >= 0.8, [h.mean() for h in hits]


def test_ppc_plot_when_every_replicate_fills_a_bin_alike():
    # a bin with the same fraction in every replicate has a mean a rounding error outside its own quantiles;
    # matplotlib refused the negative error bar and the run stopped at its figures stage
    import arviz as az
    import matplotlib.pyplot as plt

    n = np.full((1, 3), 10)
    c = np.array([[0, 5, 10]])
    rep = np.broadcast_to(c, (2, 500, 1, 3))  # every replicate as observed: each bin holds 1/3 of the tasks
    dims = {"c": ["config", "task"]}
    coords = {"config": ["a"], "task": ["t0", "t1", "t2"]}
    idata = az.from_dict(posterior_predictive={"c": rep}, observed_data={"c": c}, constant_data={"n": n},
                         dims=dims, coords=coords)
    axes = bp.plot_ppc(idata)
    assert len(axes) == 1
    plt.close("all")


def test_ppc_plot_has_a_bar_per_count_when_n_is_the_same_on_every_task():
    # n = 10 in ten bins of c / n put c = 9 and c = 10 (all pass) in one bar; now a bar per c, and a ragged
    # config keeps the bins of c / n
    import arviz as az
    import matplotlib.pyplot as plt

    n = np.array([[10, 10, 10, 10, 0], [3, 5, 5, 8, 8]])
    c = np.array([[9, 10, 10, 0, 0], [1, 5, 0, 8, 4]])
    rep = np.broadcast_to(c, (2, 50, 2, 5))
    coords = {"config": ["same", "ragged"], "task": [f"t{i}" for i in range(5)]}
    idata = az.from_dict(posterior_predictive={"c": rep}, observed_data={"c": c}, constant_data={"n": n},
                         dims={"c": ["config", "task"]}, coords=coords)
    axes = bp.plot_ppc(idata)
    heights = [b.get_height() for b in axes[0].patches]
    np.testing.assert_allclose(heights, [0.25] + [0] * 8 + [0.25, 0.5])  # of the 4 observed tasks: c = 0, 9, 10
    assert axes[0].get_xlabel() == "c, successes of n = 10" and axes[1].get_xlabel() == "c / n"
    assert len(axes[1].patches) == 10
    plt.close("all")


def test_a_named_model_warns_where_most_tasks_have_one_sample():
    """bb at one sample per task: pass@k beyond k = 1 is its prior's guess, and bp.fit says so (the default
    widens its band instead, and a few n = 1 tasks among many with more leave the spread identified)."""
    rng = np.random.default_rng(0)
    n = np.array([[1] * 60, [1] * 3 + [5] * 57])
    counts = bp.make_counts(n, rng.binomial(n, 0.4), config=["one", "ragged"])
    with pytest.warns(bp.FitWarning, match=r"\['one'\] have one sample on most of their tasks"):
        bp.fit(counts, "bb", "eb", progressbar=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", bp.FitWarning)
        bp.fit(counts.sel(config=["ragged"]), "bb", "eb", progressbar=False)
        bp.fit(counts, "auto", "eb", candidates=["bb", "zoibb"], progressbar=False)


def test_a_config_with_no_observed_task_is_named_and_gets_nan():
    """Every n of a config 0: bp.fit names it (FitWarning), its pass@k is NaN and the other config's is intact."""
    rng = np.random.default_rng(1)
    n = np.array([[5] * 40, [0] * 40])
    counts = bp.make_counts(n, rng.binomial(n, 0.4), config=["seen", "empty"])
    with pytest.warns(bp.FitWarning, match=r"\['empty'\] have no observed task") as rec:
        idata = bp.fit(counts, "bb", "eb", progressbar=False)
    assert len(rec) == 1  # and nothing else: the convergence gate skips the empty config
    assert idata.posterior.attrs["convergence"] == "ok"
    cur = bp.passk_curve(idata, [1, 10])
    assert np.isnan(cur["mean"].sel(config="empty")).all() and np.isnan(cur["eti"].sel(config="empty")).all()
    alone = bp.passk_curve(bp.fit(counts.sel(config=["seen"]), "bb", "eb", progressbar=False), [1, 10])
    assert_allclose(cur["mean"].sel(config="seen"), alone["mean"].sel(config="seen"), atol=0.01)
    # seven empty configs: five named and "2 more", and the code it suggests drops all seven (it dropped five)
    many = bp.make_counts(np.vstack([n[:1]] + [n[1:]] * 7), np.vstack([rng.binomial(5, 0.4, (1, 40))] + [n[1:]] * 7),
                          config=["seen", *(f"e{i}" for i in range(7))])
    with pytest.warns(bp.FitWarning, match=r"\['e0', 'e1', 'e2', 'e3', 'e4'\] and 2 more have no observed task") as rec:
        bp.fit(many, "bb", "eb", progressbar=False)
    code = str(rec[0].message).split("drop them with ")[1]
    assert list(eval(code, {"counts": many}).config.values) == ["seen"]  # noqa: S307 (the warning's own snippet)
