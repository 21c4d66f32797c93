"""Every registered per-config model, checked generically: one specification serves NumPy and PyMC,
its analytic gradient is its own derivative, and its likelihood and predictive agree with brute force."""

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate, stats

import bayespass as bp
from bayespass.models.base import MODELS, NP, PairData, get_model, pt_backend

#: every registered per-config model (a new model file is checked here without editing this list)
PER_CONFIG = [name for name in MODELS if not get_model(name).joint]


def test_every_per_config_model_is_checked_here():
    assert {"bb", "zoibb", "flex", "lnorm"} <= set(PER_CONFIG)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 25, (2, 60))
    p = np.where(rng.random((2, 60)) < 0.2, 0.0, rng.beta(0.7, 1.3, (2, 60)))
    c = rng.binomial(n, p)
    c[:, :3] = n[:, :3]
    return PairData.from_counts(bp.make_counts(n, c))


def theta_at(model, data, rng, scale=0.7):
    return model.start(data)[None] + scale * rng.standard_normal((3, data.n_config, model.n_params))


@pytest.mark.parametrize("name", PER_CONFIG)
def test_numpy_and_pytensor_give_the_same_log_density(name, data):
    import pytensor
    import pytensor.tensor as pt

    m = get_model(name)
    th = theta_at(m, data, np.random.default_rng(1))[0]  # (config, P)
    aux = m.prepare(data)
    xp = pt_backend()
    t = pt.matrix("theta")
    lp_pt = pytensor.function([t], [m.logprior(t, xp), m.loglik(t[:, None, :], {k: pt.as_tensor_variable(v)
                                                                                 for k, v in aux.items()}, xp)])
    prior_pt, ll_pt = lp_pt(th)
    assert_allclose(prior_pt, m.logprior(th, NP), rtol=1e-10, atol=1e-10)
    assert_allclose(ll_pt, m.loglik(th[:, None, :], aux, NP), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", PER_CONFIG)
def test_analytic_gradient_is_the_derivative(name, data):
    m = get_model(name)
    th = theta_at(m, data, np.random.default_rng(2), scale=0.3)
    aux = m.prepare(data)
    lp, grad = m.logp_grad(th, aux, data.w)
    from bayespass.models.base import Model

    lp2, num = Model.logp_grad(m, th, aux, data.w)
    assert_allclose(lp, lp2, rtol=1e-10)
    assert_allclose(grad, num, rtol=1e-4, atol=1e-4 * np.abs(num).max())


@pytest.mark.parametrize("name", PER_CONFIG)
def test_likelihood_and_predictive_agree_with_monte_carlo_over_the_population(name):
    """P(c | n) = E_p[Binom(c | n, p)] and E[(1-p)^k | c] = E_p[(1-p)^k Binom] / P(c), p from draw_p."""
    m = get_model(name)
    rng = np.random.default_rng(3)
    d = PairData(np.array([[8.0, 8, 8, 3]]), np.array([[0.0, 3, 8, 1]]), np.ones((1, 4)))
    th = m.start(d) + 0.4 * rng.standard_normal((1, m.n_params))
    p = m.draw_p(th, 400_000, rng)[0]  # (size,)
    lik = stats.binom.pmf(d.c[0][:, None], d.n[0][:, None], p[None])  # (U, size)
    assert_allclose(np.exp(m.loglik(th[:, None, :], m.prepare(d), NP))[0], lik.mean(1), rtol=0.03, atol=2e-3)
    k = np.array([1, 5, 40])
    want = (lik[:, :, None] * (1 - p)[None, :, None] ** k).mean(1) / lik.mean(1)[:, None]
    assert_allclose(m.q(th[:, None, :], d.n[0], d.c[0], k)[0], want, rtol=0.05, atol=5e-3)


def test_bb_predictive_equals_quadrature():
    m = get_model("bb")
    th = np.array([[0.4, 1.1]])
    a, b = m.named(th)["a"][0], m.named(th)["b"][0]
    for n, c, k in [(10, 0, 100), (10, 4, 3), (1, 1, 1000)]:
        post = stats.beta(a + c, b + n - c)
        want = integrate.quad(lambda p, k=k, post=post: (1 - p) ** k * post.pdf(p), 0, 1, limit=200)[0]
        assert_allclose(m.q(th[:, None, :], np.array([n]), np.array([c]), [k])[0, 0, 0], want, rtol=1e-6)


@pytest.mark.parametrize("n, c, k", [(7, 2, 30), (7, 0, 5), (7, 7, 1), (40, 20, 3), (10_000, 3_000, 2), (500, 2, 10_000)])
def test_flex_predictive_equals_brute_force_over_its_cells(n, c, k):
    """Each interior point's weight is spread evenly in logit over its cell: quadrature over every cell."""
    from scipy.special import expit

    m = get_model("flex")
    rng = np.random.default_rng(4)
    th = m.start(PairData(np.ones((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))) + 0.5 * rng.standard_normal((1, m.n_params))
    g = m.weights(th)[0]
    h = m.x[1] - m.x[0]

    def cells(kk):
        f = lambda t: stats.binom.pmf(c, n, expit(t)) * (1 - expit(t)) ** kk  # noqa: E731
        inner = [integrate.quad(f, x - h / 2, x + h / 2, epsabs=1e-17, epsrel=1e-11, limit=200)[0] / h for x in m.x]
        return np.r_[float(c == 0), inner, float(c == n and kk == 0)]

    want = g @ cells(k) / (g @ cells(0))
    assert_allclose(m.q(th[:, None, :], np.array([n]), np.array([c]), [k])[0, 0, 0], want, rtol=1e-8)
    assert_allclose(np.exp(m.loglik(th[:, None, :], m.prepare(PairData(np.array([[n]]), np.array([[c]]),
                                                                       np.ones((1, 1)))), NP))[0, 0],
                    g @ cells(0), rtol=1e-8)
    assert g[0] > 0 and g[-1] > 0 and abs(g.sum() - 1) < 1e-12  # atoms at 0 and 1, a distribution


def test_flex_nests_zoibb():
    """With the spline at zero the flex population is the ZOIBB one (on its grid): at the same concentration
    below flex's saturation (log kappa_flex = -log(1 / kappa - 1 / kappa_max)), or at the same log kappa
    without it."""
    from bayespass.models.flex import Flex

    flex, zoibb = get_model("flex"), get_model("zoibb")
    th_z = np.array([[0.3, 1.2, -1.5, -2.0]])
    n, c = np.array([6.0, 6, 6]), np.array([0.0, 2, 6])
    aux_z = zoibb.prepare(PairData(n[None], c[None], np.ones((1, 3))))
    want = zoibb.loglik(th_z[:, None, :], aux_z, NP)
    for model, log_kappa in ((flex, -np.log(np.exp(-1.2) - 1 / 400)), (Flex(kappa_max=None), 1.2)):
        th_f = np.zeros((1, model.n_params))
        th_f[0, :4] = th_z[0]
        th_f[0, 1] = log_kappa
        aux_f = model.prepare(PairData(n[None], c[None], np.ones((1, 3))))
        assert_allclose(model.loglik(th_f[:, None, :], aux_f, NP), want, atol=2e-3)


def test_unknown_model_and_settings_are_clear_errors():
    with pytest.raises(ValueError, match="model='beta' is not supported; choose one of"):
        bp.fit(bp.make_counts([3], [1]), "beta")
    from bayespass.models.flex import Flex

    with pytest.raises(ValueError, match="unknown flex settings"):
        Flex(smoothness=2)
    # each out of its range is named (J = 1 was an IndexError, ridge_sd = 0 a ZeroDivisionError, K = 3 scipy's
    # 'Need at least 8 knots', and J = 2.5, tau_sd = -1 or alpha of two numbers were taken)
    for name, bad, allowed in [("J", 1, "an integer >= 2"), ("J", 2.5, "an integer >= 2"), ("K", 3, "an integer >= 4"),
                               ("ridge_sd", 0, "a positive number"), ("tau_sd", -1.0, "a positive number"),
                               ("alpha", (1.0, 2.0), "three positive numbers"), ("lo", 20.0, "a finite number below hi"),
                               ("cells", "yes", "True or False")]:
        with pytest.raises(ValueError, match=re.escape(f"flex setting {name}={bad!r} is not allowed; it must be {allowed}")):
            Flex(**{name: bad})
    assert Flex(J=np.int64(40), alpha=[3, 0.5, 0.5]).x.size == 40  # NumPy integers, a list read back from a fit


def test_beta_binomial_tables_equal_scipy_on_large_batches():
    """The fast path's rising-factorial tables (many pairs) against betaln and digamma per pair."""
    from scipy.special import betaln, digamma

    from bayespass.models.bb import bb_terms, pair_arrays

    rng = np.random.default_rng(3)
    n = rng.integers(1, 40, (5, 200))
    c = rng.binomial(n, 0.3)
    pairs = pair_arrays(PairData.from_counts(bp.make_counts(n, c)))
    assert "ni" in pairs
    # from near-0 to huge concentrations (kappa up to e^12, where betaln's differences cancel)
    a = np.exp(rng.uniform(-7, 11, (40, 5, 1)))
    b = np.exp(rng.uniform(-7, 11, (40, 5, 1)))
    ll, da, db = bb_terms(a, b, pairs)
    nn, cc = pairs["n"], pairs["c"]
    dab = digamma(a + b) - digamma(a + b + nn)
    assert ll.shape == (40, 5, nn.shape[1])
    assert_allclose(ll, pairs["lb"] + betaln(a + cc, b + nn - cc) - betaln(a, b), rtol=1e-9, atol=1e-9)
    assert_allclose(da, digamma(a + cc) - digamma(a) + dab, rtol=1e-7, atol=1e-9)
    assert_allclose(db, digamma(b + nn - cc) - digamma(b) + dab, rtol=1e-7, atol=1e-9)
    # non-integer counts take scipy's path
    frac = dict(pairs, n=nn + 0.5)
    frac.pop("ni")
    ll2, _, _ = bb_terms(a, b, frac)
    assert_allclose(ll2, pairs["lb"] + betaln(a + cc, b + nn + 0.5 - cc) - betaln(a, b), rtol=1e-12)


@pytest.mark.parametrize("name", PER_CONFIG)
def test_thousands_of_samples_per_task_give_finite_results_without_warnings(name):
    """n = 2000 per task (pass@k studies draw that many): no NaN and no floating-point warning leaks out."""
    import warnings

    m = get_model(name)
    n = np.full((1, 5), 2000.0)
    c = np.array([[0.0, 1, 1000, 1999, 2000]])
    d = PairData(n, c, np.ones_like(n))
    rng = np.random.default_rng(4)
    b = np.asarray(m.bounds(), float)  # near the start and anywhere in the box (where the optimiser goes)
    th = np.concatenate([m.start(d)[None] + 0.5 * rng.standard_normal((8, 1, m.n_params)),
                         rng.uniform(b[:, 0], b[:, 1], (24, 1, m.n_params))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        lp, grad = m.logp_grad(th, m.prepare(d), d.w)
        q = m.q(th[:8, :1][..., None, :], n[0], c[0], [1, 100, 1000])  # near the start: where draws are
    assert np.isfinite(grad).all() and not np.isnan(lp).any()
    assert np.isfinite(q).all() and (q >= -1e-12).all() and (q <= 1 + 1e-12).all()


@pytest.fixture(scope="module")
def ragged():
    """Counts whose configs have 11, about 40 and 2 distinct (n, c) pairs: PairData pads each to the longest."""
    rng = np.random.default_rng(5)
    n = np.stack([np.full(200, 10), rng.choice([20, 50], 200), np.full(200, 3)])
    p = np.where(rng.random((3, 200)) < 0.3, 0.0, rng.beta(0.5, 0.5, (3, 200)))
    c = rng.binomial(n, p)
    c[2] = np.where(c[2] > 0, 3, 0)  # two pairs: (3, 0) and (3, 3)
    return bp.make_counts(n, c)


def test_configs_are_grouped_by_their_number_of_pairs(ragged):
    from bayespass.models.fit import _pair_buckets

    data = PairData.from_counts(ragged)
    per = (data.w > 0).sum(1)
    assert per[0] == 11 and per[1] > 32 and per[2] == 2 and data.w.shape[1] == per.max()
    buckets = _pair_buckets(data)
    assert len(buckets) == 3 and sorted(int(i) for idx, _ in buckets for i in idx) == [0, 1, 2]
    for idx, sub in buckets:
        assert sub.w.shape[1] == per[idx].max()  # padded to the group's longest only
        for row, j in enumerate(idx):  # every real pair kept, in its slot
            assert_allclose(sub.n[row, :per[j]], data.n[j, :per[j]])
            assert_allclose(sub.c[row, :per[j]], data.c[j, :per[j]])
            assert_allclose(sub.w[row], np.pad(data.w[j, :per[j]], (0, sub.w.shape[1] - per[j])))


@pytest.mark.parametrize("name", PER_CONFIG)
def test_grouped_log_density_equals_the_padded_one(name, ragged):
    """The fast path evaluates each group of configs on its own pairs: the same density and gradient."""
    from bayespass.models.fit import _logp

    m = get_model(name)
    data = PairData.from_counts(ragged)
    th = theta_at(m, data, np.random.default_rng(3), scale=0.3)
    if "log_s" in m.coords:  # lnorm: wide priors too, where its one-sided pairs are integrated by parts
        th[0, :, m.coords.index("log_s")] = np.log(6.0)
    direct = m.logp_grad(th, m.prepare(data), data.w)
    lp_grad, weights_logp, _ = _logp(ragged, m)
    grouped = lp_grad(th)
    assert_allclose(grouped[0], direct[0], rtol=1e-10, atol=1e-8)
    assert_allclose(grouped[1], direct[1], rtol=1e-7, atol=1e-7)
    assert_allclose(weights_logp(th)[0], direct[0], rtol=1e-10, atol=1e-8)


def test_lnorm_integrates_only_the_real_one_sided_pairs(ragged):
    """Not the padding (n = 1, c = 0, weight 0): it made the by-parts integrals 10x the work on real MBPP."""
    data = PairData.from_counts(ragged)
    aux = get_model("lnorm").prepare(data)
    real = ((data.c == 0) | (data.c == data.n)) & (data.w > 0)
    assert_allclose(aux["edge_ok"].sum(1), real.sum(1))
    assert aux["edge_pos"].shape[1] == real.sum(1).max()


@pytest.mark.parametrize("name", ["bb", "zoibb"])
def test_compiled_bb_and_zoibb_equal_the_numpy_formulas(name, monkeypatch, random_pairs):
    """``models/_bb_kernel.py`` against the NumPy definition (its tables of rising factorials), to rounding.

    Draws spread by 2 around the start (kappa up to e^12, near-degenerate mu) and one outside the bounds; and
    the cases the loop leaves to NumPy (counts that are not integers) give NumPy's numbers.
    """
    from bayespass.models import bb

    monkeypatch.setattr(bb, "_TABLE_MIN_CELLS", 0)  # NumPy's tables too (scipy's betaln at small sizes)
    model = get_model(name)
    rng = np.random.default_rng(5)
    for _ in range(8):
        aux, w, cfg = random_pairs(model, rng)
        if np.max(aux["n"]) > 4 * aux["n"].shape[-1]:  # the loop leaves these to NumPy: make them its cases
            aux = model.prepare(PairData(np.minimum(aux["n"], 10.0), np.minimum(aux["c"], 10.0), w))
        theta = model.start(PairData(aux["n"], aux["c"], w))[None] + rng.normal(0, 2, (8, cfg, model.n_params))
        theta[0, 0, 1] = 13.0  # above the bounds of log kappa: density -inf
        got = {}
        for compiled in (True, False):
            monkeypatch.setattr(bb, "COMPILED", compiled)
            got[compiled] = model.logp_grad(theta, aux, w)
        for a, b in zip(got[True], got[False], strict=True):
            assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        assert np.isneginf(got[True][0][0, 0])
    half = model.prepare(PairData(np.array([[4.5, 3.0]]), np.array([[1.5, 3.0]]), np.ones((1, 2))))
    theta = model.start(PairData(np.array([[4.0, 3.0]]), np.array([[1.0, 3.0]]), np.ones((1, 2))))[None]
    monkeypatch.setattr(bb, "COMPILED", True)
    with_loop = model.logp_grad(theta, half, np.ones((1, 2)))
    monkeypatch.setattr(bb, "COMPILED", False)
    assert_allclose(with_loop[0], model.logp_grad(theta, half, np.ones((1, 2)))[0], rtol=1e-13)
