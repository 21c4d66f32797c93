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


def brute(n, c, m, s, k=0):
    """``int Binom(c | n, sigmoid x) Normal(x | m, s) (1 - sigmoid x)^k dx`` by the trapezoid rule."""
    lf = (gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1) + c * GRID - n * np.logaddexp(0, GRID)
          - 0.5 * ((GRID - m) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi)))
    if k:
        lf = lf - k * np.logaddexp(0, GRID)
    top = lf.max()
    return np.exp(top) * np.trapezoid(np.exp(lf - top), GRID)


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
