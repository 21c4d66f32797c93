"""lnorm's adaptive quadrature against brute force, at the sample sizes users have (5 to 2,000 per task).

The first version integrated p out on Gauss-Hermite nodes centred on the prior: once the binomial
likelihood was narrower than the nodes' spacing it missed the peak (-7% at n = 50, -78% at n = 200, every
digit at n = 2000, where pass@k came back NaN).
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import expit, gammaln

import bayespass as bp
from bayespass.models.base import NP, PairData, get_model

GRID = np.linspace(-60.0, 60.0, 400_001)  # spacing 3e-4: resolves a likelihood of sd 0.02 (n = 10,000)


WIDE_GRID = np.linspace(-400.0, 400.0, 800_001)  # for priors of s up to 25 (n <= 200 below)


def brute(n, c, m, s, k=0, grid=GRID):
    """``int Binom(c | n, sigmoid x) Normal(x | m, s) (1 - sigmoid x)^k dx`` by the trapezoid rule."""
    lf = (gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1) + c * grid - n * np.logaddexp(0, grid)
          - 0.5 * ((grid - m) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi)))
    if k:
        lf = lf - k * np.logaddexp(0, grid)
    top = lf.max()
    return np.exp(top) * np.trapezoid(np.exp(lf - top), grid)


PAIRS = [(1, 0), (5, 0), (5, 2), (5, 5), (20, 1), (20, 10), (50, 3), (50, 25), (50, 49), (200, 0), (200, 5),
         (200, 100), (2000, 1), (2000, 1000), (2000, 1990)]
PRIORS = [(-4.0, 3.0), (-1.0, 2.5), (0.0, 1.5), (1.0, 0.5), (3.0, 2.0)]


def _theta(m, s):
    # atoms of mass e^-300: the interior is the whole likelihood (its smallest value here is 1e-35)
    return np.array([[m, np.log(s), -300.0, -300.0]])


@pytest.mark.parametrize("m,s", PRIORS)
def test_marginal_likelihood_equals_brute_force_at_every_sample_size(m, s):
    model = get_model("lnorm")
    n = np.array([[p[0] for p in PAIRS]], float)
    c = np.array([[p[1] for p in PAIRS]], float)
    data = PairData(n, c, np.ones_like(n))
    got = np.exp(model.loglik(_theta(m, s)[:, None, :], model.prepare(data), NP))[0]
    want = np.array([brute(nn, cc, m, s) for nn, cc in PAIRS])
    assert_allclose(got, want, rtol=2e-3)


@pytest.mark.parametrize("m,s", PRIORS)
def test_predictive_equals_brute_force_also_far_beyond_the_data(m, s):
    """E[(1 - p)^k | n, c] for k = 1, 10, 1000 (the curves' Rao-Blackwellised term)."""
    model = get_model("lnorm")
    n = np.array([p[0] for p in PAIRS], float)
    c = np.array([p[1] for p in PAIRS], float)
    ks = [1, 10, 1000]
    got = model.q(_theta(m, s)[:, None, :], n, c, ks)[0]
    for i, (nn, cc) in enumerate(PAIRS):
        den = brute(nn, cc, m, s)
        want = [brute(nn, cc, m, s, k) / den for k in ks]
        assert_allclose(got[i], want, atol=2e-3, err_msg=f"n={nn}, c={cc}")


# wide priors: lnorm's posterior s is 10-20 on near-deterministic configs (real MBPP), where the one-sided
# pairs (c = 0, c = n) are a wall times a flat prior, and Laplace's scale at the mode missed the prior's
# tail: E[1 - p | c = n = 5] came out half the truth at s = 16, biasing pass@1 up
WIDE_PAIRS = [(1, 0), (1, 1), (2, 0), (2, 2), (5, 0), (5, 5), (5, 2), (20, 0), (20, 20), (20, 1), (200, 0),
              (200, 200)]
WIDE_PRIORS = [(0.0, 2.0), (1.0, 3.3), (-2.0, 4.0), (3.0, 8.0), (-3.0, 16.0), (5.0, 16.0), (0.0, 25.0)]


@pytest.mark.parametrize("m,s", WIDE_PRIORS)
def test_one_sided_pairs_at_wide_priors_equal_brute_force(m, s):
    model = get_model("lnorm")
    n = np.array([p[0] for p in WIDE_PAIRS], float)
    c = np.array([p[1] for p in WIDE_PAIRS], float)
    data = PairData(n[None], c[None], np.ones((1, n.size)))
    got = model.loglik(_theta(m, s)[:, None, :], model.prepare(data), NP)[0]
    want = np.log([brute(nn, cc, m, s, grid=WIDE_GRID) for nn, cc in WIDE_PAIRS])
    assert_allclose(got, want, atol=1e-3)
    ks = [1, 3, 10, 1000]
    q = model.q(_theta(m, s)[:, None, :], n, c, ks)[0]
    for i, (nn, cc) in enumerate(WIDE_PAIRS):
        den = brute(nn, cc, m, s, grid=WIDE_GRID)
        want_q = np.array([brute(nn, cc, m, s, k, grid=WIDE_GRID) / den for k in ks])
        # relative where it matters for pass@k: 1 - q for c = 0, q for c = n
        assert_allclose(q[i], want_q, rtol=2e-3, atol=1e-6, err_msg=f"n={nn}, c={cc}")
        assert_allclose(1 - q[i], 1 - want_q, rtol=2e-3, atol=1e-6, err_msg=f"n={nn}, c={cc}")


@pytest.mark.parametrize("s", [2.0, 3.3, 10.0])
def test_wide_prior_likelihood_is_the_same_in_pytensor_and_its_gradient_exact(s):
    """Below, inside and above the band of s where the one-sided pairs move to their integral by parts."""
    import pytensor
    import pytensor.tensor as pt

    from bayespass._xp import pt_backend

    model = get_model("lnorm")
    n = np.array([[1.0, 5.0, 5.0, 5.0, 20.0, 20.0]])
    c = np.array([[0.0, 0.0, 5.0, 2.0, 20.0, 0.0]])
    w = np.array([[3.0, 1.0, 2.0, 1.0, 1.0, 4.0]])
    aux = model.prepare(PairData(n, c, w))
    theta = np.array([[0.7, np.log(s), -1.5, -2.5]])
    th = pt.dmatrix("th")
    aux_pt = {"n": pt.as_tensor_variable(n), "c": pt.as_tensor_variable(c)}
    f = pytensor.function([th], model.loglik(th[:, None, :], aux_pt, pt_backend()))
    assert_allclose(f(theta), model.loglik(theta[:, None, :], aux, NP), rtol=1e-10)
    lp, grad = model.logp_grad(theta, aux, w)
    assert_allclose(lp, np.sum(w * model.loglik(theta[:, None, :], aux, NP)) + model.logprior(theta, NP))
    assert_allclose(model.logp(theta, aux, w), lp, rtol=1e-12)  # the density alone (importance weights)
    num = [(model.logp_grad(theta + e, aux, w)[0] - model.logp_grad(theta - e, aux, w)[0]) / 2e-6
           for e in np.eye(4) * 1e-6]
    assert_allclose(grad[0], np.ravel(num), rtol=1e-5, atol=1e-6)


def test_predictive_of_many_draws_equals_that_of_each_draw():
    """Draws on either side of the by-parts band, batched in one call and in two batch axes."""
    model = get_model("lnorm")
    rng = np.random.default_rng(1)
    theta = np.column_stack([rng.normal(0, 3, 40), np.log(rng.uniform(1, 20, 40)), rng.normal(-2, 1, 40),
                             rng.normal(-2, 1, 40)])[:, None, :]
    n, c, k = np.array([5.0, 5, 5, 2, 2]), np.array([0.0, 5, 2, 0, 2]), np.array([1.0, 2, 10, 60])
    each = np.stack([model.q(theta[i:i + 1], n, c, k)[0] for i in range(40)])
    assert_allclose(model.q(theta, n, c, k), each, rtol=1e-12)
    assert_allclose(model.q(theta.reshape(4, 10, 1, 4), n, c, k).reshape(each.shape), each, rtol=1e-12)


def test_powers_of_the_predictive_equal_direct_exponentials_in_any_order_of_k():
    """k and 2k (the predictive's call), chains of doublings, repeats, k = 0 and an unsorted k."""
    from bayespass.models.lnorm import _mean_powers

    rng = np.random.default_rng(2)
    log_base = -rng.exponential(size=(6, 3, 32)) * rng.choice([1e-4, 1e-2, 1.0, 8.0], size=(6, 3, 32))
    r = rng.dirichlet(np.ones(32), size=(6, 3))
    for k in (np.array([1.0]), np.array([5.0, 1, 2, 10, 4, 8, 16, 0, 2, 1000, 2000, 3])):
        want = np.einsum("...q,...qk->...k", r, np.exp(log_base[..., None] * k))
        assert_allclose(_mean_powers(r, log_base, k), want, rtol=1e-13, atol=1e-300)


def test_predictive_mixes_the_atoms_on_the_same_scale_at_large_n():
    """With atoms at 0 and 1 and n = 2000 the interior's terms underflow alone: q stays a probability."""
    model = get_model("lnorm")
    theta = np.array([[0.0, np.log(1.5), -1.0, -1.0]])
    n = np.array([2000.0, 2000.0, 2000.0])
    c = np.array([0.0, 1000.0, 2000.0])
    q = model.q(theta[:, None, :], n, c, [1, 100])[0]
    assert np.isfinite(q).all() and (q >= 0).all() and (q <= 1).all()
    # c = 0 of 2000: nearly all posterior mass on the atom at 0 -> (1 - p)^k ~ 1; c = n: the atom at 1 -> 0
    assert q[0, 1] > 0.99 and q[2, 0] < 1e-3
    assert_allclose(q[1, 0], 0.5, atol=0.01)


def test_fit_at_two_thousand_samples_per_task_gives_finite_honest_curves():
    rng = np.random.default_rng(5)
    p = expit(rng.normal(-1.0, 1.5, 120))
    n = np.full(120, 2000)
    c = rng.binomial(n, p)
    counts = bp.make_counts(n[None], c[None])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fit = bp.fit(counts, "lnorm", "eb", seed=0, progressbar=False)
    curve = bp.passk_curve(fit, [1, 10, 100])
    mean = curve["mean"].values[0]
    assert np.isfinite(mean).all()
    # with 2,000 samples per task the data decide: the posterior mean is the unbiased estimate, to 0.005
    assert_allclose(mean, bp.passk(counts, [1, 10, 100], method="unbiased").values[0], atol=5e-3)


@pytest.mark.parametrize("batch", [(1,), (8,), (2, 3)])
def test_compiled_likelihood_and_gradient_equal_the_numpy_formulas(batch, monkeypatch, random_pairs):
    """The compiled loop (``models/_lnorm_kernel.py``) against the NumPy definition, to rounding.

    Random configs of 1-4 rows of pairs (one-sided pairs at every row, zero weights among them, up to 2,000
    samples per task) and draws of theta across the band of s where the one-sided pairs move to their
    integral by parts, atoms from negligible to dominant, and a few draws outside the bounds.
    """
    from bayespass.models import lnorm


    model = get_model("lnorm")
    rng = np.random.default_rng(len(batch) * 10 + batch[-1])
    for _ in range(6):
        aux, w, cfg = random_pairs(model, rng)
        size = int(np.prod(batch)) * cfg
        theta = np.column_stack([rng.normal(0, 5, size), rng.uniform(-1.0, 3.5, size),
                                 rng.normal(-3, 4, size), rng.normal(-3, 4, size)]).reshape(batch + (cfg, 4))
        theta.reshape(-1, 4)[0, 1] = 3.2  # above the bounds of log s: density -inf, gradient as computed
        got = {}
        for compiled in (True, False):
            monkeypatch.setattr(lnorm, "COMPILED", compiled)
            got[compiled] = (*model.logp_grad(theta, aux, w), model.loglik(theta[..., None, :], aux, NP))
        for a, b in zip(got[True], got[False], strict=True):
            assert a.shape == b.shape
            assert_allclose(a, b, rtol=1e-11, atol=1e-11)
        assert np.isneginf(got[True][0].reshape(-1)[0])


def test_compiled_predictive_equals_the_numpy_formulas(monkeypatch):
    """lnorm's compiled ``q`` against its NumPy definition, to rounding: one-sided pairs at wide priors (both
    integrals by parts), the atoms, k from 1 to 10,000 with their doubles (the squared powers), 1 to 2,000
    samples per task, draws in two batch axes."""
    from bayespass.models import lnorm

    model = get_model("lnorm")
    rng = np.random.default_rng(7)
    for _ in range(12):
        u = rng.integers(2, 20)
        n = rng.choice([1, 2, 5, 10, 50, 2000], u).astype(float)
        c = np.floor(rng.random(u) * (n + 1))
        c[0], c[1] = 0.0, n[1]
        k = np.unique(rng.choice([1, 2, 3, 5, 10, 50, 100, 1000, 10_000], rng.integers(1, 6)))
        k = np.concatenate([k, 2 * k])
        theta = np.column_stack([rng.normal(0, 5, 12), rng.uniform(-1.0, 3.2, 12), rng.normal(-3, 4, 12),
                                 rng.normal(-3, 4, 12)]).reshape(3, 4, 1, 4)
        got = {}
        for compiled in (True, False):
            monkeypatch.setattr(lnorm, "COMPILED", compiled)
            got[compiled] = model.q(theta, n, c, k)
        assert got[True].shape == got[False].shape == (3, 4, u, k.size)
        assert_allclose(got[True], got[False], rtol=1e-11, atol=1e-12)


def test_warm_loads_the_compiled_loops_before_the_candidates_fork():
    """``Model.warm`` (called before the stack forks its candidates) leaves the candidates' loops compiled."""
    import subprocess
    import sys

    code = (
        "from bayespass.models import _bb_kernel as bk, _flex_kernel as fk, _lnorm_kernel as lk\n"
        "from bayespass.models.base import get_model\n"
        "before = [callable(getattr(m, '_kernel')) and not hasattr(getattr(m, '_kernel'), 'signatures')"
        " for m in (lk, fk, bk)]\n"
        "for name in ('bb', 'zoibb', 'flex', 'lnorm'):\n"
        "    get_model(name).warm()\n"
        "after = [len(k.signatures) for k in (lk._kernel, lk._q_kernel, fk._kernel, bk._kernel, lk._rows,"
        " lk._modes_rows, lk._more_steps)]\n"
        "print(before, after)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True, True, True] [1, 1, 1, 1, 1, 1, 1]", out.stdout


def test_rows_in_threads_give_the_serial_kernels_numbers_bit_for_bit(monkeypatch, random_pairs):
    """``_lnorm_kernel.logp_grad`` splits large calls into blocks of (draw, config) rows run in threads.

    Each block finds its modes on its own and then takes the steps the slowest block took, so the modes, and so
    every number, are those of the serial loop (which steps all rows together until all have converged).  The
    draws here make the two blocks converge in different numbers of steps, so the extra steps are exercised.
    """
    from bayespass.models import _lnorm_kernel as kernel
    from bayespass.models.lnorm import _NEWTON_STEPS

    model = get_model("lnorm")
    rng = np.random.default_rng(17)
    aux, w, cfg = random_pairs(model, rng)
    while cfg < 2:
        aux, w, cfg = random_pairs(model, rng)
    draws = 60
    theta = np.column_stack([rng.normal(0, 5, draws * cfg), rng.uniform(-1.0, 3.5, draws * cfg),
                             rng.normal(-3, 4, draws * cfg), rng.normal(-3, 4, draws * cfg)]).reshape(draws, cfg, 4)
    theta[: draws // 2, :, 1] = -1.0  # narrow priors: their modes settle in fewer steps than the wide half's
    th = kernel.arg(theta)
    n, c = kernel.arg(aux["n"]), kernel.arg(aux["c"])
    fn = {name: kernel.compiled(vars(kernel), kernel._JITTED, name) for name in ("_scales", "_modes_rows")}
    sd, mode, half = fn["_scales"](th), np.empty(th.shape[:2] + (n.shape[1],)), draws * cfg // 2
    taken = [fn["_modes_rows"](th, sd, n, c, _NEWTON_STEPS, i0, i1, mode) for i0, i1 in ((0, half),
                                                                                        (half, draws * cfg))]
    assert taken[0] < taken[1], taken
    got = {}
    with bp.rc_context({"eb.cores": 2}):
        for threaded_from in (10**12, 1):
            monkeypatch.setattr(kernel, "THREADED_FROM", threaded_from)
            got[threaded_from] = (*model.logp_grad(theta, aux, w), model.loglik(theta[..., None, :], aux, NP))
    for serial, threaded in zip(got[10**12], got[1], strict=True):
        np.testing.assert_array_equal(serial, threaded)
