"""``shared``: the joint model with task difficulty integrated out (gradients, quadrature, recovery)."""

import warnings

import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import approx_fprime
from scipy.special import expit, logsumexp

import bayespass as bp
from bayespass.models.shared import KNOTS, _Data, _hat, _log_g, _log_prior, _split, log_marginal
from bayespass.simulate import true_passk
from bayespass.stats.kernels import bb_logpmf


@pytest.mark.parametrize("m", [3, 30])  # small and larger n (rising-factorial tables up to max n)
def test_gradient_matches_finite_differences(m):
    g = np.random.default_rng(m)
    n = np.full((3, 40), m)
    n[1, :5] = 0  # a config without samples of some tasks
    c = g.binomial(n, g.beta(1, 1, (1, 40)))
    d = _Data(n.astype(float), c.astype(float))
    th = np.concatenate([g.normal(0, 1, 3), g.normal(2, 0.5, 3), g.normal(0, 1, KNOTS.size), g.normal(0, 0.5, 2)])

    def f(t):
        return log_marginal(t, d)[0] + _log_prior(t, 3)[0]

    grad = log_marginal(th, d)[1] + _log_prior(th, 3)[1]
    num = approx_fprime(th, f, 1e-6)
    assert np.max(np.abs(num - grad)) < 1e-3 * max(1.0, np.max(np.abs(num)))


def test_compiled_table_sums_equal_the_per_task_gathers():
    """The fit's path (compiled tables per count value, in blocks of nodes) against the per-task one (the scores')."""
    g = np.random.default_rng(7)
    n = g.integers(1, 12, (4, 60))  # unequal n per task and config
    n[2, :8] = 0
    c = g.binomial(n, g.beta(0.7, 0.9, (1, 60)))
    d = _Data(n.astype(float), c.astype(float))
    th = np.concatenate([g.normal(0, 1, 4), g.normal(2, 0.5, 4), g.normal(0, 1, KNOTS.size), g.normal(0, 0.5, 3)])
    total, grad = log_marginal(th, d)
    total_s, scores = log_marginal(th, d, scores=True)
    assert total == pytest.approx(total_s, rel=1e-12)
    np.testing.assert_allclose(grad, d.w @ scores, rtol=1e-9, atol=1e-9)
    for workers in (1, 3):  # blocks of nodes in threads: the same numbers
        t_w, g_w = log_marginal(th, d, workers=workers)
        assert t_w == pytest.approx(total, rel=1e-13)
        np.testing.assert_allclose(g_w, grad, rtol=1e-12, atol=1e-12)
        assert log_marginal(th, d, grad=False, workers=workers)[0] == pytest.approx(total, rel=1e-13)


@pytest.mark.parametrize("eta", [None, 0.6])  # without slopes (fits before them) and with
def test_marginal_likelihood_matches_quadrature(eta):
    """The grid sum against scipy's adaptive quadrature of g(x) prod_j BB(c_j | n_j, x) dx per task."""
    from bayespass.models.shared import _basis

    g = np.random.default_rng(1)
    n = np.array([[4, 4, 4], [2, 0, 6]])
    c = np.array([[0, 4, 2], [1, 0, 6]])
    d = _Data(n.astype(float), c.astype(float))
    beta = -0.5 * (KNOTS / 3.0) ** 2 + g.normal(0, 1.0, KNOTS.size)  # a density that fades at the ends
    alpha, log_phi = np.array([0.5, -1.0]), np.array([1.0, 2.5])
    slope = np.ones(2) if eta is None else np.exp(_basis(2) @ [eta])
    got, _ = log_marginal(np.concatenate([alpha, log_phi, beta, [] if eta is None else [eta]]), d, grad=False)
    z = integrate.quad(lambda x: np.exp(np.interp(x, KNOTS, beta)), KNOTS[0], KNOTS[-1], limit=200)[0]
    alpha = alpha - alpha.mean()  # the likelihood sees the abilities centred
    want = 0.0
    for i in range(n.shape[1]):
        def integrand(x, i=i):
            mu = expit(alpha - slope * x)
            phi = np.exp(log_phi)
            ll = sum(bb_logpmf(c[j, i], n[j, i], mu[j] * phi[j], (1 - mu[j]) * phi[j]) for j in range(2)
                     if n[j, i] > 0)
            return np.exp(np.interp(x, KNOTS, beta) + ll) / z
        want += np.log(integrate.quad(integrand, KNOTS[0], KNOTS[-1], limit=200, points=KNOTS[1:-1])[0])
    # log_marginal leaves out the binomial coefficients (constant in the parameters)
    from scipy.special import gammaln

    const = np.sum(np.where(n > 0, gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1), 0.0))
    assert abs(got + const - want) < 1e-3
    assert abs(logsumexp(_log_g(beta, d.hat)) - 0.0) < 1e-12  # g is normalised on the grid


def _simulate(rng, J=3, T=250, m=3):
    x = np.where(rng.random(T) < 0.25, 8.0, np.where(rng.random(T) < 0.25, -8.0, rng.normal(0, 1.5, T)))
    alpha = np.array([0.8, 0.0, -0.6])[:J]
    mu = expit(alpha[:, None] - x[None, :])
    p = rng.beta(mu * 6.0, (1 - mu) * 6.0)
    return bp.simulate.simulate_counts(p, m, seed=int(rng.integers(1 << 30))), p


def test_pymc_model_is_the_same_density():
    """``build_pymc`` (for NUTS) and the NumPy log marginal with the prior differ by a constant only.

    Both centre the abilities: the PyMC model samples the free ``alpha_free`` and records ``alpha`` centred.
    """
    import xarray as xr

    from bayespass.models.shared import Shared

    g = np.random.default_rng(0)
    J, T = 3, 30
    n = np.full((J, T), 4)
    c = g.binomial(4, np.clip(g.beta(1, 1, T)[None] + g.normal(0, 0.1, (J, T)), 0, 1))
    counts = xr.Dataset({"n": (("config", "task"), n), "c": (("config", "task"), c)},
                        coords={"config": ["a", "b", "c"], "task": np.arange(T)})
    np.testing.assert_allclose(*_pymc_gaps(Shared().build_pymc(counts), counts, g), atol=1e-8)


def _pymc_gaps(model, counts, g, alpha_prec=None):
    """The PyMC model's log density minus the NumPy log marginal and prior at three random points, and the first."""
    n, c = counts.n.values.astype(float), counts.c.values.astype(float)
    J = n.shape[0]
    logp = model.compile_logp(sum=True, jacobian=True)
    d = _Data(n, c, slope=np.full(J, 2.0))  # the PyMC model's grid
    gaps = []
    for _ in range(3):
        th = np.concatenate([g.normal(0, 1, J), g.normal(0.5, 0.5, J), -0.5 * (KNOTS / 3) ** 2 + g.normal(0, 0.3, KNOTS.size),
                             g.normal(0, 0.3, J - 1)])
        point = {"alpha_free": th[:J], "log_phi": th[J:2 * J], "beta": th[2 * J:2 * J + KNOTS.size],
                 "eta": th[2 * J + KNOTS.size:]}
        gaps.append(logp(point) - log_marginal(th, d, grad=False)[0] - _log_prior(th, J, alpha_prec)[0])
    return gaps, gaps[0]


def test_fit_by_eb_records_a_converged_posterior_and_predicts():
    counts, p = _simulate(np.random.default_rng(5))
    idata = bp.fit(counts, "shared", "eb", progressbar=False)
    assert idata.posterior.attrs["convergence"] == "ok"
    assert {"alpha", "phi", "beta"} <= set(idata.posterior.data_vars)
    assert idata.log_likelihood["c"].shape[2:] == counts.n.shape
    cur = bp.passk_curve(idata, [1, 10, 100])
    truth = true_passk(p, [1, 10, 100])
    assert np.all(np.abs(cur["mean"].transpose("config", "k").values - truth) < 0.08)
    # the impossible quarter of the tasks is learnt: pass@100 stays well below 1 as in the truth
    assert np.all(cur["mean"].sel(k=100).values < 0.85)


def test_a_config_at_the_logistic_clip_keeps_every_task_weight():
    # 34 real configs on MBPP+'s first 25 tasks (a 'bayespass run --tasks 25' of ../shared/data/real): under
    # some parameter draws a config that passes a task 50 times in 50 is at the clip of its logistic, its Beta's
    # b under n's rounding; (b + n) - c read 0, the task's log-likelihood +inf, and its node weights NaN (a
    # RuntimeWarning, and that task's difficulty drawn from its first node whatever the counts said)
    from pathlib import Path

    from bayespass.models.predictive import passk_draws

    counts = bp.read_counts(Path(__file__).parents[2] / "data" / "real_mbpp" / "counts.csv")
    first = [f"Mbpp/{i}" for i in (2, 3, 4, 6, 7, 8, 9, 11, 12, 14, 16, 17, 18, 19, 20, 56, 57, 58, 59, 61, 62, 63, 64,
                                   65, 66)]
    fit = bp.fit(counts.sel(task=first), "shared", "eb", progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        draws = passk_draws(fit, [1, 5], seed=0)["passk"]
    assert bool(np.isfinite(draws).all()) and float(draws.min()) >= 0 and float(draws.max()) <= 1


@pytest.mark.slow
def test_eb_on_fewer_tasks_than_parameters_is_as_wide_as_the_exact_posterior():
    # 8 real configs on 12 MBPP+ tasks, half cut to 10 samples per task: 36 parameters, 12 tasks. The scores'
    # outer product (rank <= 12) left most directions to the prior, and EB's bands were up to 2.8x MCMC's (median
    # 1.45); the observed curvature there makes them the exact posterior's
    from pathlib import Path

    from bayespass.models.predictive import passk_draws
    from bayespass.stats.curve import passk_bands

    counts = bp.read_counts(Path(__file__).parents[2] / "data" / "real_mbpp" / "counts.csv")
    tasks = [f"Mbpp/{i}" for i in (2, 3, 4, 6, 7, 8, 9, 11, 12, 14, 16, 17)]
    sub = counts.sel(task=tasks, config=list(counts.config.values[::3][:8]))
    n, c = sub.n.values.copy(), sub.c.values.copy()
    c[:4] = np.random.default_rng(0).hypergeometric(c[:4], n[:4] - c[:4], np.full_like(n[:4], 10))
    n[:4] = 10
    sub = sub.copy(data={"n": n, "c": c})
    width = {}
    for method in ("eb", "mcmc"):
        fit = bp.fit(sub, "shared", method, progressbar=False, seed=1)
        band = passk_bands(passk_draws(fit, [1, 5], seed=0), 0.9, hdi=False)[0]
        width[method] = (band.sel(ci_bound="upper") - band.sel(ci_bound="lower")).values
    ratio = width["eb"] / width["mcmc"]
    assert np.median(ratio) < 1.2 and ratio.max() < 1.6 and ratio.min() > 0.7, ratio.round(2)


@pytest.mark.slow
def test_pass_at_k_bands_cover_in_simulation():
    rng = np.random.default_rng(7)
    hits = []
    for _ in range(16):
        counts, p = _simulate(rng)
        cmp = bp.compare_configs(counts, k=(1, 10), model="shared", method="eb", max_draws=200)
        truth = true_passk(p, [1, 10])
        band = cmp["passk_eti"].transpose("config", "k", "ci_bound").values
        hits.append((band[..., 0] <= truth) & (truth <= band[..., 1]))
        d_true = truth[0] - truth[2]
        d_band = cmp["diff_eti"].sel(config=counts.config.values[0], config_b=counts.config.values[2]).values
        hits.append(np.atleast_2d((d_band[:, 0] <= d_true) & (d_true <= d_band[:, 1])))
    cov = np.mean(np.concatenate([h.ravel() for h in hits]))
    assert cov >= 0.8, cov


def test_bands_at_many_samples_per_task_are_as_narrow_as_the_counts_allow():
    """50 samples per task: the dataset pass@1 is pinned by the counts, whatever the abilities' location.

    The abilities and the difficulties share a location the counts hardly fix; the draws of pass@k sat on
    nodes placed at the posterior's centre, and a parameter draw far along that ridge piled every task's
    weight on its extreme node.  The config with the least extra-binomial spread (phi = 100) got a band 4.5x
    the binomial scale (0.050, where its candidates' bands are 0.011); on three real MBPP configs 0.094.
    """
    rng = np.random.default_rng(3)
    t, n = 300, 50
    d = rng.normal(0, 1.5, t)
    alpha, phi = np.array([0.4, 0.1, 0.0]), np.array([0.5, 5.0, 100.0])
    mu = expit(alpha[:, None] - d[None])
    p = rng.beta(mu * phi[:, None], (1 - mu) * phi[:, None])
    counts = bp.make_counts(np.full((3, t), n), rng.binomial(n, p))
    fit = bp.fit(counts, "shared", "eb", seed=0, progressbar=False)
    band = bp.passk_curve(fit, [1])["eti"].values[:, 0]
    phat = counts.c.values / n
    scale = 3.29 * np.sqrt((phat * (1 - phat)).sum(1) / n) / t  # a 90% band of the mean of the tasks' p
    assert np.all(band[:, 1] - band[:, 0] < 1.3 * scale), (band, scale)
    truth = p.mean(1)
    assert np.all((band[:, 0] <= truth) & (truth <= band[:, 1])), (band, truth)


@pytest.mark.parametrize("differing", [0, 1, 3, 40])
def test_the_laplace_precision_is_raised_only_between_near_copies(differing):
    """The observed curvature enters along two configs' difference only where their counts (nearly) coincide.

    Independent samples of the same tasks (40 of 100 tasks differ) keep the scores' outer product as it was, as
    every pair of the real MBPP configs does (their smallest ratio of it to the observed curvature is 0.08;
    the floor acts below 0.05).  Toward identical counts the difference's sd approaches the exact posterior's,
    continuously, and never exceeds it by more than 1 / sqrt(0.05).
    """
    from bayespass.models import shared

    g = np.random.default_rng(1)
    n, p = 4, g.beta(1, 1, 100)
    c = g.binomial(n, p)
    other = c.copy()
    idx = np.flatnonzero((c > 0) & (c < n))[:differing] if differing < 40 else np.arange(100)
    other[idx] = c[idx] - 1 if differing < 40 else g.binomial(n, p)
    counts = bp.make_counts(np.full((2, 100), n), np.stack([c, other]), config=["a", "b"])
    res, neg, _, d = shared.Shared().mode(counts, slopes=False)
    plain, _ = shared._laplace_cov(res.x, d, 2, None)
    cov, _ = shared._laplace_cov(res.x, d, 2, neg)
    u = np.zeros(res.x.size)
    u[:2] = 1, -1
    vals, vecs = shared._observed_hessian(neg, res.x)
    exact = float(u @ (vecs / vals) @ vecs.T @ u)
    if differing == 40:
        assert not shared._concordant_pairs(d, 2)
        assert np.array_equal(cov, plain)
    else:
        assert float(u @ plain @ u) > 4 * exact  # the outer product alone: the difference's sd 2-9x the exact one
        assert exact * 0.9 < float(u @ cov @ u) < exact / shared.CONCORDANT_RATIO, (u @ cov @ u, exact)
    if differing <= 1:
        assert float(u @ cov @ u) < 1.5 * exact


def test_pointwise_loglik_and_threads():
    """``loglik_tasks`` against a direct grid sum per (draw, config, task); threads change no number."""
    from bayespass.models.shared import Shared
    from bayespass.stats.kernels import bb_loglik

    counts, _ = _simulate(np.random.default_rng(9), T=40, m=4)
    counts["n"][1, :3] = 0  # a config without samples of some tasks
    counts["c"][1, :3] = 0
    with bp.rc_context({"eb.cores": 1}):
        idata = bp.fit(counts, "shared", "eb", draws=200, chains=2, progressbar=False)
        pk1 = bp.passk_curve(idata, [1, 10])
        ll1 = Shared().loglik_tasks(idata.posterior, counts.n.values, counts.c.values)
    with bp.rc_context({"eb.cores": 2}):
        idata2 = bp.fit(counts, "shared", "eb", draws=200, chains=2, progressbar=False)
        pk2 = bp.passk_curve(idata2, [1, 10])
    np.testing.assert_array_equal(pk1["mean"].values, pk2["mean"].values)
    np.testing.assert_array_equal(idata.passk["passk"].values, idata2.passk["passk"].values)
    np.testing.assert_array_equal(idata.log_likelihood["c"].values, idata2.log_likelihood["c"].values)
    post = idata.posterior
    n, c = counts.n.values.astype(float), counts.c.values.astype(float)
    grid = np.linspace(KNOTS[0], KNOTS[-1], 81)
    for ch, dr in ((0, 0), (1, 199)):
        alpha, phi, slope = post.alpha.values[ch, dr], post.phi.values[ch, dr], post.slope.values[ch, dr]
        log_g = _log_g(post.beta.values[ch, dr], _hat(grid))
        mu = expit(alpha[:, None, None] - slope[:, None, None] * grid)  # (J, 1, G)
        ll = bb_loglik(mu * phi[:, None, None], (1 - mu) * phi[:, None, None], n[:, :, None], c[:, :, None])
        want = np.where(n > 0, logsumexp(ll + log_g, axis=-1), 0.0)
        np.testing.assert_allclose(ll1[ch, dr], want, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_mcmc_by_hmc_matches_importance_sampling_of_the_same_posterior():
    """``method="mcmc"`` (whitened NumPy HMC) against self-normalised importance sampling, on a small case."""
    from bayespass.models.shared import _basis

    counts, _ = _simulate(np.random.default_rng(11), J=2, T=40, m=3)
    idata = bp.fit(counts, "shared", "mcmc", draws=600, tune=300, seed=3, progressbar=False)
    post = idata.posterior
    assert post.attrs["sampler"] == "bayespass-hmc" and post.attrs["convergence"] == "ok"
    # reference: importance sampling from a Student-t with twice the draws' covariance (exact whatever the
    # proposal's centre and shape, as long as its tails cover the posterior's)
    d = _Data(counts.n.values.astype(float), counts.c.values.astype(float))
    # the model sampled is the one of higher evidence (here, on counts simulated with one slope: one slope);
    # with slopes, their free coordinate (the logs sum to 0)
    eta = post.log_slope.values @ _basis(2) if post.attrs["slopes_weight"] >= 0.5 else post.alpha.values[..., :0]
    draws = np.concatenate([post.alpha.values, post.log_phi.values, post.beta.values, eta], axis=-1)
    draws = draws.reshape(-1, draws.shape[-1])
    mode, cov = draws.mean(0), 2.0 * np.cov(draws.T)
    # the draws' abilities are centred; the free ones also move together, by their prior alone (sd 2.5 / sqrt(J))
    cov[:2, :2] += 2.0 * 2.5**2 / 2
    g = np.random.default_rng(0)
    nu, size = 5.0, 40_000
    z = g.standard_normal((size, mode.size)) * np.sqrt(nu / g.chisquare(nu, size))[:, None]
    x = mode + z @ np.linalg.cholesky(cov).T
    log_q = -0.5 * (nu + mode.size) * np.log1p(np.einsum("ij,jk,ik->i", x - mode, np.linalg.inv(cov), x - mode) / nu)
    with np.errstate(all="ignore"):
        log_p = np.array([log_marginal(t, d, grad=False, workers=1)[0] + _log_prior(t, 2)[0] for t in x])
    w = np.exp(log_p - log_q - np.nanmax(log_p - log_q))
    w = np.nan_to_num(w) / np.nansum(w)
    # the reference itself is precise enough: with an importance ESS of 200 its means carry a standard error of
    # 0.07 sd, against the tolerance of 0.25 sd below (the ESS was 270-1,700 from 20,000 proposals depending on
    # the draws' covariance, and 143 once the model chosen between one slope and per-config slopes moved the
    # grid; 40,000 now)
    assert 1.0 / np.sum(w**2) > 200
    alpha_is = _split(x, 2)[0]
    mean_is = w @ alpha_is
    sd_is = np.sqrt(w @ (alpha_is - mean_is) ** 2)
    diff_is = w @ (alpha_is[:, 0] - alpha_is[:, 1])
    mc = post.alpha.mean(("chain", "draw")).values
    np.testing.assert_allclose(mc, mean_is, atol=0.25 * sd_is.max())
    np.testing.assert_allclose(post.alpha.std(("chain", "draw")).values, sd_is, rtol=0.2)
    diff = (post.alpha.sel(config=post.config[0]) - post.alpha.sel(config=post.config[1])).mean().item()
    assert abs(diff - diff_is) < 0.1


def test_hmc_sampler_needs_integrated_task_parameters():
    counts, _ = _simulate(np.random.default_rng(2), J=2, T=20, m=2)
    with pytest.raises(ValueError, match="sampler='hmc' needs a model whose task-level parameters are integrated "
                       "out; got model='hier'"):
        bp.fit(counts, "hier", "mcmc", sampler="hmc")


def test_grid_from_the_dispersions_is_coarser_and_keeps_the_marginal():
    """MCMC's grid (from the dispersions at the mode) against a grid 10x finer than the default one."""
    from bayespass.models.shared import PHI_MARGIN

    rng = np.random.default_rng(3)
    J, T, m = 12, 60, 50
    x = np.where(rng.random(T) < 0.25, 8.0, rng.normal(0, 1.5, T))
    alpha = np.linspace(-1.0, 1.0, J)
    phi = np.full(J, 6.0)
    mu = expit(alpha[:, None] - x[None, :])
    n = np.full((J, T), m)
    c = rng.binomial(n, rng.beta(mu * phi[:, None], (1 - mu) * phi[:, None]))
    n, c = n.astype(float), c.astype(float)
    fine, coarse = _Data(n, c), _Data(n, c, phi=PHI_MARGIN * phi)
    assert coarse.x.size < 0.6 * fine.x.size
    ref = _Data(n, c)
    ref.x = np.linspace(KNOTS[0], KNOTS[-1], 10 * fine.x.size)
    ref.hat = _hat(ref.x)
    th = np.concatenate([alpha, np.log(phi), -0.5 * (KNOTS / 3.0) ** 2])
    for t in (th, th + rng.normal(0, 0.1, th.size)):
        want, g_want = log_marginal(t, ref)
        got, g_got = log_marginal(t, coarse)
        # the trapezoid sums of the three grids differ by a constant (the normalisation of g on each grid
        # enters every task alike); the parameters' log density, up to that constant, is what the sampler sees
        assert abs((got - want) - (log_marginal(th, coarse)[0] - log_marginal(th, ref)[0])) < 0.02
        assert np.max(np.abs(g_got - g_want)) < 0.01 * np.max(np.abs(g_want))


def test_gate_quantities_do_not_see_the_unidentified_shift():
    """A common shift of every ability and of g (one knot) leaves the gated quantities as they were."""
    import xarray as xr

    from bayespass.models.base import get_model

    rng = np.random.default_rng(0)
    h = KNOTS[1] - KNOTS[0]
    beta = np.concatenate([[-40.0, -40.0], rng.normal(0, 1, KNOTS.size - 4), [-40.0, -40.0]])
    alpha = rng.normal(0, 1, (1, 5, 3))
    log_s = np.array([0.5, -0.2, -0.3])  # the slopes: a shift of the difficulties by h moves alpha_j by s_j h

    def post(a, b):
        dims = ("chain", "draw", "config")
        return xr.Dataset({"alpha": (dims, a), "log_phi": (dims, np.zeros_like(a)),
                           "log_slope": (dims, np.broadcast_to(log_s, a.shape)),
                           "slope": (dims, np.broadcast_to(np.exp(log_s), a.shape)),
                           "beta": (("chain", "draw", "knot"), np.broadcast_to(b, (1, 5, KNOTS.size)))})

    m = get_model("shared")
    before = m.gated_quantities(post(alpha, beta))
    after = m.gated_quantities(post(alpha + np.exp(log_s) * h, np.roll(beta, 1)))
    for v in before.data_vars:
        np.testing.assert_allclose(after[v].values, before[v].values, atol=1e-6, err_msg=v)
    assert not np.allclose(after.alpha_rel.values, alpha + h)  # relative, not the raw abilities


def test_one_config_passes_the_gate_and_a_nan_draw_still_fails():
    """A joint fit of one config holds its ability relative to the mean at 0 in every draw: converged, not NaN.

    ArviZ's R-hat of a constant is NaN, which failed the gate: ``bp.fit(counts, "shared")`` on one config
    warned 'r_hat nan > 1.05' whatever the counts.  A draw that is NaN must still fail.
    """
    import pandas as pd

    from bayespass.models.fit import convergence_report

    rng = np.random.default_rng(3)
    counts = pd.DataFrame({"task": [f"t{i}" for i in range(30)], "n": 10, "c": rng.binomial(10, rng.random(30))})
    with warnings.catch_warnings():
        warnings.simplefilter("error", bp.FitWarning)
        idata = bp.fit(counts, "shared", seed=0)
    rep = convergence_report(idata)
    assert np.isfinite(rep["r_hat_max"]) and rep["r_hat_max"] < 1.05
    assert np.isfinite(rep["ess_bulk_min"]) and rep["ess_bulk_min"] > 100
    assert idata.posterior.attrs["convergence"] == "ok"
    post = idata.posterior.copy(deep=True)
    post["log_phi"][0, 3, 0] = np.nan
    idata.posterior = post
    assert np.isnan(convergence_report(idata)["r_hat_max"])


@pytest.mark.parametrize("misses, seen_draws, total, kept", [(1, [150, 225, 225], 225, slice(None)),
                                                             (2, [150, 225, 150, 150], 300, slice(1, None, 2))])
def test_mcmc_chains_go_on_when_they_miss_the_gate(monkeypatch, misses, seen_draws, total, kept):
    """Chains that miss the gate go on half the draws at a time and are thinned by the whole multiple of the draws
    they reached; the gate sees the draws returned."""
    from bayespass.models import fit as fit_mod

    counts, _ = _simulate(np.random.default_rng(11), J=2, T=40, m=3)
    real, seen = fit_mod.convergence_report, []

    def bad_first(idata, model=None):  # the first ``misses`` checks miss the gate, the others pass
        rep = real(idata, model)
        seen.append(idata.posterior.sizes["draw"])
        return rep | ({"r_hat_max": 1.5} if len(seen) <= misses else {"r_hat_max": 1.0, "ess_bulk_min": 1e4})

    monkeypatch.setattr(fit_mod, "convergence_report", bad_first)
    idata = bp.fit(counts, "shared", "mcmc", draws=150, tune=150, seed=3, progressbar=False)
    post = idata.posterior
    assert seen == seen_draws  # asked of the draws returned after each round, then by fit's own gate
    assert post.sizes["draw"] == seen_draws[-1] and f"went on to {total}" in post.attrs["rerun"]
    # 225 draws are all kept; 300 are thinned to the second of every pair: the draws of one run of ``total``
    monkeypatch.setattr(fit_mod, "convergence_report", real)
    from bayespass.models.shared import Shared

    long = Shared().fit_hmc(counts, draws=total, warmup=150, chains=post.sizes["chain"], seed=3)
    np.testing.assert_allclose(post["alpha"].values, long["alpha"].values[:, kept])


def test_mcmc_chains_that_still_miss_restart_in_a_dense_metric_and_sample_the_same_posterior(monkeypatch):
    """Chains still missing after ``RESTART.after_rounds`` rounds, with a slow direction, draw afresh in the draws'
    covariance; the draws mapped back are the posterior's (against a long run without the restart)."""
    from bayespass.models import fit as fit_mod
    from bayespass.models import hmc
    from bayespass.models import shared as shared_mod

    counts, _ = _simulate(np.random.default_rng(11), J=2, T=40, m=3)
    real, seen = fit_mod.convergence_report, []

    def bad_first(idata, model=None):  # the first check misses the gate, the others pass
        seen.append(idata.posterior.sizes["draw"])
        return real(idata, model) | ({"r_hat_max": 1.5} if len(seen) == 1 else {"r_hat_max": 1.0, "ess_bulk_min": 1e4})

    monkeypatch.setattr(fit_mod, "convergence_report", bad_first)
    monkeypatch.setattr(shared_mod, "RESTART", hmc.DenseRestart(threshold=0.0, after_rounds=1, steps_choices=((3, 8),)))
    post = bp.fit(counts, "shared", "mcmc", draws=300, tune=150, seed=3, progressbar=False).posterior
    assert "gate missed at 300 draws" in post.attrs["rerun"] and "restarted in a dense metric" in post.attrs["rerun"]
    assert post.attrs["leapfrog_steps"] == [3, 8] and post.sizes["draw"] == 300 and seen == [300, 300, 300]
    monkeypatch.setattr(fit_mod, "convergence_report", real)
    long = shared_mod.Shared().fit_hmc(counts, draws=1500, warmup=200, chains=4, seed=4)
    for v in ("alpha", "log_phi"):
        sd = long[v].std(("chain", "draw")).values
        np.testing.assert_allclose(post[v].mean(("chain", "draw")).values, long[v].mean(("chain", "draw")).values,
                                   atol=0.25 * sd.max(), err_msg=v)
        np.testing.assert_allclose(post[v].std(("chain", "draw")).values, sd, rtol=0.25, err_msg=v)


def test_mcmc_takes_the_target_acceptance_asked(monkeypatch):
    """``bp.fit(..., target_accept=)`` reaches shared's sampler (the gate's warning suggests raising it)."""
    from bayespass.models.shared import Shared

    counts, _ = _simulate(np.random.default_rng(5), J=2, T=40, m=3)
    steps = {}
    for accept in (0.6, 0.95):  # the sampler: smaller steps, accepted more often
        post = Shared().fit_hmc(counts, draws=100, warmup=150, chains=4, seed=1, target_accept=accept)
        steps[accept] = (post.attrs["step_size"], post.attrs["acceptance"])
    assert steps[0.95][0] < 0.8 * steps[0.6][0]
    assert steps[0.95][1] > steps[0.6][1] + 0.1
    asked = []

    class Asked(Exception):
        pass

    def spy(self, counts, **kw):  # what reaches the sampler is all this checks: no chains are run
        asked.append(kw["target_accept"])
        raise Asked

    monkeypatch.setattr(Shared, "fit_hmc", spy)
    for accept in (None, 0.95):  # bp.fit passes it on (0.8 by default)
        with pytest.raises(Asked):
            bp.fit(counts, "shared", "mcmc", draws=60, tune=60, seed=1, target_accept=accept, progressbar=False)
    assert asked == [0.8, 0.95]


def test_configs_of_different_slopes_fit_their_own_counts():
    """Sampling at temperature T turns logit p into logit p / T: each config has its own slope on the difficulty.

    With one slope for all (the model before), the flattest config's pass@10 at n = 10 came out 0.015-0.026 below
    the share of tasks it solved at least once (the demo's synthetic coder at T = 1.2: 0.800 [0.782, 0.812]
    against 0.835).
    """
    rng = np.random.default_rng(1)
    t, n, temps = 300, 10, np.array([0.4, 0.8, 1.2])
    base = rng.normal(1.0, 2.5, t)
    u = rng.random(t)
    base = np.where(u < 0.15, -np.inf, np.where(u > 0.85, np.inf, base))  # tasks never / always solved
    p = expit(base[None, :] / temps[:, None])
    counts = bp.make_counts(np.full((3, t), n), rng.binomial(n, p))
    fit = bp.fit(counts, "shared", "eb", seed=0, progressbar=False)
    slope = fit.posterior["slope"].mean(("chain", "draw")).values
    want = (1 / temps) / np.exp(np.mean(np.log(1 / temps)))  # the slopes' geometric mean is 1
    np.testing.assert_allclose(slope, want, rtol=0.2)  # seeds 0-3: within 7%
    got = bp.passk_curve(fit, [n])["mean"].values[:, 0]
    solved = (counts.c.values > 0).mean(1)  # pass@n's unbiased estimate at k = n
    np.testing.assert_allclose(got, solved, atol=0.012)  # seeds 0-3: 0.005-0.010; one slope: 0.015-0.026


@pytest.mark.parametrize("phi", [0.7, 20.0])
def test_a_config_with_one_sample_per_task_borrows_the_others_dispersion(one_and_ten_design, phi):
    """Four configs of one truth (dispersion phi), two with 10 samples per task and two with one.

    One sample per task does not tell a config's dispersion.  With independent priors the one-sample configs kept
    the prior's phi (then 20) while the counts put the others' near 0.7, so their p spread less, their pass@10
    came out inflated and P(better at pass@10) against an identical config with ten samples was about 1 (on real
    MBPP: ECE 0.45, the difference's band covering in 20% of pairs; benchmarks/compare_mixed.py).  phi = 0.7 is
    real code models' spread, near the prior's centre (log 0.6); phi = 20 is 3.5 logs above it, where a config
    that did not borrow would stay at the prior's.
    """
    counts, p = one_and_ten_design(phi)
    with pytest.warns(UserWarning, match=r"config\(s\) \['x', 'y'\] have one sample on most of their tasks"):
        cmp = bp.compare_configs(counts, k=[1, 10], progressbar=False)
    log_phi = bp.fit(counts, "shared", "eb", progressbar=False).posterior["log_phi"].median(("chain", "draw"))
    # the one-sample configs' dispersion moves from the prior's centre towards the others': with two informative
    # configs, two thirds of the way (the level and a config about it have equal sd)
    assert np.all(np.abs(log_phi.sel(config=["x", "y"]).values - log_phi.sel(config=["a", "b"]).values.mean()) < 1.5)
    truth = true_passk(p, [10])[:, 0]
    for one, ten in (("x", "a"), ("y", "b")):
        pb = float(cmp["prob_better"].sel(config=one, config_b=ten, k=10))
        assert 0.05 < pb < 0.95, pb
        lo, hi = cmp["diff_eti"].sel(config=one, config_b=ten, k=10).values
        true_diff = truth[["abxy".index(one)]] - truth["abxy".index(ten)]
        assert lo < true_diff[0] < hi, (lo, hi, true_diff)
    # the warning is for k > 1 only: at k = 1 one sample per task identifies pass@1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bp.compare_configs(counts, k=[1], progressbar=False)


def test_dispersion_prior_is_the_common_level_integrated_out():
    """log phi_j ~ N(lambda, 1.5), lambda ~ N(log 0.6, 1.5): the prior's log_phi part is that multivariate normal."""
    from scipy.stats import multivariate_normal

    from bayespass.models.shared import _PRIOR, PHI_LEVEL_SD, _phi_precision, _prior_precision

    J = 4
    s, t = _PRIOR["log_phi"][1], PHI_LEVEL_SD
    cov = s**2 * np.eye(J) + t**2 * np.ones((J, J))
    np.testing.assert_allclose(_phi_precision(J), np.linalg.inv(cov), rtol=1e-12)
    mvn = multivariate_normal(np.full(J, np.log(0.6)), cov)
    g = np.random.default_rng(0)
    base = np.concatenate([g.normal(0, 1, J), g.normal(1, 1, J), g.normal(0, 1, KNOTS.size), g.normal(0, 0.3, J - 1)])
    other = base.copy()
    other[J:2 * J] = g.normal(0, 2, J)  # only the dispersions differ
    assert _log_prior(other, J)[0] - _log_prior(base, J)[0] == pytest.approx(
        mvn.logpdf(other[J:2 * J]) - mvn.logpdf(base[J:2 * J]), abs=1e-10)
    # the Laplace approximation's prior curvature is the same block
    np.testing.assert_allclose(_prior_precision(J)[J:2 * J, J:2 * J], np.linalg.inv(cov), rtol=1e-12)


def test_a_fit_saved_before_the_centring_predicts_as_it_was_fitted():
    """Abilities recorded uncentred (fits saved before the forty-ninth session) with g where they put it.

    Emulated exactly: every ability and g shifted together by one knot, the draws and the Laplace mode alike,
    give the same pass@k curves at k outside the stored grid (computed from the posterior).  The mode's
    abilities were centred again before this was fixed, which put the curve's mean outside its own band
    (pass@3 0.939 in [0.951, 0.976] on such a file, against 0.965 from the code that saved it).  Shifting
    the abilities alone changes the curves.
    """
    import copy

    rng = np.random.default_rng(3)
    mu = expit(np.array([-2.5, -2.0, -1.0])[:, None] - rng.normal(0, 1.5, 150)[None, :])
    counts = bp.simulate.simulate_counts(rng.beta(mu * 8.0, (1 - mu) * 8.0), 4, seed=4)
    idata = bp.fit(counts, "shared", "eb", progressbar=False)
    J, h, post = 3, KNOTS[1] - KNOTS[0], idata.posterior
    post["beta"][..., -1] = -40.0  # g emptied at the last knot, which the shift would carry off the grid
    mode = np.asarray(post.attrs["laplace_mode"], float).copy()
    mode[2 * J + KNOTS.size - 1] = -40.0  # (the hardest tasks, 10 logits above the mean ability)
    post.attrs["laplace_mode"] = mode
    alpha_c, _, _, log_s = _split(mode, J)
    ks = [11, 37, 333]  # not in the stored passk group's grid: the curves are computed from the posterior
    assert not np.isin(ks, idata.passk.k.values).any()

    def shifted(with_g):
        other = copy.deepcopy(idata)
        other.posterior["alpha"] = post["alpha"] + post["slope"] * h
        m = mode.copy()
        m[:J] = alpha_c + np.exp(log_s) * h
        if with_g:  # g(x) -> g(x - h): every knot's log density moves one knot up
            other.posterior["beta"] = post["beta"].roll(knot=1, roll_coords=False)
            m[2 * J:2 * J + KNOTS.size] = np.roll(mode[2 * J:2 * J + KNOTS.size], 1)
        other.posterior.attrs["laplace_mode"] = m
        return bp.passk_curve(other, ks)

    cur, both, alone = bp.passk_curve(idata, ks), shifted(True), shifted(False)
    # the mean is computed at the centre; the band from draws at nodes on a fixed grid of difficulties, which
    # the shift moves by a knot, not by a whole number of grid points (bands 0.13-0.20 wide move by <= 0.008)
    np.testing.assert_allclose(both["mean"].values, cur["mean"].values, atol=2e-3)
    np.testing.assert_allclose(both["eti"].values, cur["eti"].values, atol=0.015)
    assert float(np.abs(alone["mean"] - cur["mean"]).max()) > 0.05


def test_siblings_are_one_model_at_known_temperatures_on_one_benchmark():
    import pandas as pd

    from bayespass.models.shared import sibling_groups

    rows = [("m1", 0.2, "b"), ("m1", 0.8, "b"), ("m2", 0.2, "b"), ("m1", 0.2, "other"), ("m3", 0.5, "b"),
            ("m3", 1.0, "b"), ("m3", 1.2, "b")]
    df = pd.DataFrame([{"model": m, "temperature": t, "benchmark": b, "task": task, "n": 2, "c": 1}
                       for m, t, b in rows for task in ("t1", "t2")])
    counts = bp.counts_from_frame(df)
    got = dict(zip(counts.config.values, sibling_groups(counts), strict=True))
    assert got["m1|T=0.2|b"] == got["m1|T=0.8|b"] >= 0  # one model, one benchmark
    assert got["m3|T=0.5|b"] == got["m3|T=1|b"] == got["m3|T=1.2|b"] >= 0
    assert got["m3|T=0.5|b"] != got["m1|T=0.2|b"]
    assert got["m2|T=0.2|b"] == got["m1|T=0.2|other"] == -1  # alone on their model and benchmark
    # configs named without a model, or at unknown temperatures, have no siblings
    plain = bp.make_counts(np.full((3, 4), 2), np.ones((3, 4), int))
    assert sibling_groups(plain) is None
    df["temperature"] = np.nan
    assert sibling_groups(bp.counts_from_frame(df.drop(columns="benchmark").drop_duplicates(["model", "task"]))) is None


def test_sibling_prior_is_the_common_ability_integrated_out():
    """alpha_j ~ N(A_g, sw^2), A_g ~ N(0, 2.5^2) per group, alone: N(0, 2.5^2); its precision and log det."""
    from bayespass.models.shared import _PRIOR, _alpha_precision, _prior_precision

    groups = np.array([0, 0, 0, -1, 1, 1])
    sw, t = 0.3, _PRIOR["alpha"][1]
    cov = np.diag(np.where(groups < 0, t**2, sw**2))
    for g in (0, 1):
        idx = np.flatnonzero(groups == g)
        cov[np.ix_(idx, idx)] += t**2
    P, logdet = _alpha_precision(groups, sw)
    np.testing.assert_allclose(P, np.linalg.inv(cov), rtol=1e-10, atol=1e-12)
    assert logdet == pytest.approx(-np.linalg.slogdet(cov)[1], rel=1e-12)
    J = groups.size
    g = np.random.default_rng(0)
    th = np.concatenate([g.normal(0, 1, J), g.normal(1, 1, J), g.normal(0, 1, KNOTS.size), g.normal(0, 0.3, J - 1)])
    other = th.copy()
    other[:J] = g.normal(0, 1, J)  # only the abilities differ
    assert _log_prior(other, J, P)[0] - _log_prior(th, J, P)[0] == pytest.approx(
        -0.5 * other[:J] @ P @ other[:J] + 0.5 * th[:J] @ P @ th[:J], abs=1e-10)
    np.testing.assert_allclose(_prior_precision(J, alpha_prec=P)[:J, :J], P)


def test_the_pooled_laplace_update_is_exact_for_a_gaussian_likelihood():
    """Abilities with a Gaussian likelihood N(y | alpha, V): the update per sw and sw's weights in closed form."""
    from scipy.stats import halfnorm, multivariate_normal

    from bayespass.models.shared import _PRIOR, POOL_GRID, POOL_SCALE, _alpha_precision, _pooled

    groups = np.array([0, 0, 0, 1, 1])
    J = groups.size
    g = np.random.default_rng(3)
    A = g.normal(0, 0.2, (J, J))
    V = 0.05 * np.eye(J) + A @ A.T * 0.01
    y = np.array([0.5, 0.55, 0.4, -0.3, -0.2])
    H = np.linalg.inv(V) + np.eye(J) / _PRIOR["alpha"][1] ** 2  # the independent prior's Laplace approximation
    mode = np.linalg.solve(H, np.linalg.solve(V, y))
    w, means, covs = _pooled(mode, np.linalg.inv(H), J, groups)
    logw = []
    for i, sw in enumerate(POOL_GRID):
        P = _alpha_precision(groups, sw)[0]
        post = np.linalg.inv(np.linalg.inv(V) + P)
        np.testing.assert_allclose(covs[i], post, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(means[i], post @ np.linalg.solve(V, y), rtol=1e-7, atol=1e-10)
        logw.append(multivariate_normal(np.zeros(J), V + np.linalg.inv(P)).logpdf(y)
                    + halfnorm(scale=POOL_SCALE).logpdf(sw) + np.log(sw))
    want = np.exp(np.array(logw) - max(logw))
    np.testing.assert_allclose(w, want / want.sum(), rtol=1e-6, atol=1e-12)


def _siblings(rng, alpha, T=300, m=2):
    """Counts of configs two models x two temperatures, abilities ``alpha`` (A@0.2, A@1.0, B@0.2, B@1.0)."""
    import pandas as pd

    x = np.where(rng.random(T) < 0.2, 8.0, rng.normal(0, 1.5, T))
    mu = expit(np.asarray(alpha)[:, None] - x[None, :])
    p = rng.beta(mu * 3.0, (1 - mu) * 3.0)
    c = rng.binomial(m, p)
    names = [("A", 0.2), ("A", 1.0), ("B", 0.2), ("B", 1.0)]
    df = pd.DataFrame([{"model": mo, "temperature": t, "task": i, "n": m, "c": c[j, i]}
                       for j, (mo, t) in enumerate(names) for i in range(T)])
    return bp.counts_from_frame(df), p


@pytest.mark.parametrize("alpha", [(0.9, -0.3, 0.2, 0.2), (0.5, 0.5, 0.0, 0.0)], ids=["differ", "alike"])
def test_siblings_that_differ_are_told_apart_and_alike_ones_pooled(monkeypatch, alpha):
    """Two models at two temperatures each: pooling moves siblings' pass@1 towards each other by what sw allows."""
    from bayespass.models import shared

    counts, p = _siblings(np.random.default_rng(11), alpha)
    truth = true_passk(p, [1])[:, 0]
    pooled = bp.compare_configs(counts, k=[1], progressbar=False)
    sd = bp.fit(counts, "shared", "eb", progressbar=False).posterior.attrs["sibling_sd_median"]
    assert pooled.attrs["sibling_sd"] == sd and f"{sd:.2f} logits" in bp.leaderboard(pooled).note
    monkeypatch.setattr(shared, "POOL_SIBLINGS", False)
    alone = bp.compare_configs(counts, k=[1], progressbar=False)
    gap = {name: c["diff"].sel(k=1).values[[0, 2], [1, 3]] for name, c in (("pooled", pooled), ("alone", alone))}
    a02, a10 = counts.config.values[:2]
    lo, hi = pooled["diff_eti"].sel(config=a02, config_b=a10, k=1).values
    assert lo < truth[0] - truth[1] < hi, (lo, hi, truth)
    if alpha[0] != alpha[1]:  # 1.2 logits apart: sw's posterior moves off 0, and the better sibling is known
        assert sd > 0.4, sd
        assert float(pooled["prob_better"].sel(config=a02, config_b=a10, k=1)) > 0.99
        assert gap["pooled"][0] > 0.9 * gap["alone"][0], gap  # hardly shrunk
    else:  # alike: sw stays small and both pairs' differences shrink towards 0
        assert sd < 0.3, sd
        assert np.all(np.abs(gap["pooled"]) < 0.9 * np.abs(gap["alone"])), gap


def test_siblings_by_mcmc_and_in_pymc_take_sw_at_the_eb_posterior_median():
    """MCMC (bayespass's HMC) and the PyMC model pool siblings with sw fixed at the median of EB's grid posterior."""
    from bayespass.models.shared import Shared

    counts, _ = _siblings(np.random.default_rng(5), (0.5, 0.5, 0.0, 0.0), T=120)
    eb = bp.fit(counts, "shared", "eb", progressbar=False)
    mc = bp.fit(counts, "shared", "mcmc", progressbar=False)
    assert mc.posterior.attrs["sibling_sd_median"] == eb.posterior.attrs["sibling_sd_median"]
    np.testing.assert_array_equal(mc.posterior.attrs["sibling_groups"], [0, 0, 1, 1])
    np.testing.assert_allclose(mc.posterior["alpha"].mean(("chain", "draw")), eb.posterior["alpha"].mean(("chain", "draw")),
                               atol=0.1)
    model = Shared()
    prec, attrs = model.sibling_prior(counts)
    assert attrs["sibling_sd_median"] == eb.posterior.attrs["sibling_sd_median"]
    gaps, first = _pymc_gaps(model.build_pymc(counts), counts, np.random.default_rng(1), prec)
    np.testing.assert_allclose(gaps, first, atol=1e-8)
