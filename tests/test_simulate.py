"""oracle_passk: the exact Bayes posterior of dataset pass@k under a known prior (the simulation studies' noise
floor) against brute-force quadrature, and its coverage over data sets drawn from that prior."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate, stats

from bayespass.testing import oracle_passk, true_passk

X = np.linspace(-12, 8, 2001)
PTS = 1 / (1 + np.exp(-X))
PW = stats.norm(-2, 2).pdf(X)
PW /= PW.sum()
#: a structural zero, a Beta and a discretised logit-normal: every kind of component
PRIOR = [("atom", 0.2, 0.0), ("beta", 0.5, 0.5, 2.0), ("grid", 0.3, PTS, PW)]


def _draw(g, size):
    comp = g.choice(3, size, p=[0.2, 0.5, 0.3])
    return np.where(comp == 0, 0.0, np.where(comp == 1, g.beta(0.5, 2.0, size), PTS[g.choice(PTS.size, size, p=PW)]))


@pytest.mark.parametrize(("n", "c"), [(3, 0), (3, 1), (5, 5), (1, 0)])
def test_posterior_mean_equals_quadrature(n, c):
    ks = [1, 10, 100]
    mean, lo, hi = oracle_passk(PRIOR, [n], [c], ks, draws=4000, seed=1)

    def dens(p):  # the continuous part of the prior times the likelihood (the grid as its logit-normal density)
        ln = 0.3 * stats.norm(-2, 2).pdf(np.log(p / (1 - p))) / (p * (1 - p))
        return (0.5 * stats.beta(0.5, 2.0).pdf(p) + ln) * stats.binom.pmf(c, n, p)

    pts = [1e-6, 1e-3, 0.1]
    z = integrate.quad(dens, 0, 1, limit=500, points=pts)[0] + 0.2 * (c == 0)
    want = [integrate.quad(lambda p, k=k: dens(p) * (1 - (1 - p) ** k), 0, 1, limit=500, points=pts)[0] / z
            for k in ks]
    assert_allclose(mean, want, rtol=2e-4, atol=1e-6)
    assert ((lo <= mean + 1e-6) & (mean <= hi + 1e-6)).all()


def test_coverage_over_data_sets_drawn_from_the_prior_is_nominal_and_a_wrong_prior_misses():
    g = np.random.default_rng(7)
    t, m, ks = 60, 3, [1, 10, 100]
    right, wrong = [], []
    for r in range(200):
        p = _draw(g, t)
        c = g.binomial(m, p)
        truth = true_passk(p, ks)
        for prior, out in ((PRIOR, right), ([("beta", 1.0, 0.5, 2.0)], wrong)):
            _, lo, hi = oracle_passk(prior, np.full(t, m), c, ks, draws=1000, seed=r)
            out.append((lo <= truth) & (truth <= hi))
    cov = np.mean(right, 0)
    assert ((cov > 0.85) & (cov < 0.95)).all(), cov  # 200 data sets: a standard error of 0.021
    assert np.mean(wrong, 0)[-1] < 0.5  # the Beta alone has no structural zeros: pass@100 far too high


def test_atoms_at_one_and_ragged_n():
    prior = [("atom", 0.5, 1.0), ("beta", 0.5, 2.0, 2.0)]
    mean, lo, hi = oracle_passk(prior, [4, 2], [4, 1], [1, 3], draws=2000)
    # task 1: P(atom | c = n = 4) = 0.5 / (0.5 + 0.5 BB(4 | 4, 2, 2)); task 2 is Beta(3, 3) after c = 1 of 2
    w = 0.5 / (0.5 + 0.5 * stats.betabinom.pmf(4, 4, 2, 2))
    e1 = w + (1 - w) * np.array([6 / 8, 1 - stats.beta(6, 2).expect(lambda p: (1 - p) ** 3)])
    e2 = np.array([0.5, 1 - stats.beta(3, 3).expect(lambda p: (1 - p) ** 3)])
    assert_allclose(mean, (e1 + e2) / 2, rtol=1e-10)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"prior": [("beta", 0.5, 1.0, 1.0)]}, "sum to 1"),
    ({"prior": [("gauss", 1.0, 0.0)]}, "is not one of"),
    ({"prior": [("beta", 1.0, 0.0, 1.0)]}, "a > 0"),
    ({"prior": [("atom", 1.0, 1.5)]}, r"p0=1.5"),
    ({"prior": []}, "non-empty"),
    ({"c": [4]}, "0 <= c <= n"),
    ({"k": [0]}, "k must hold positive integers"),
    ({"ci_prob": 1.5}, "ci_prob"),
    ({"prior": [("atom", 1.0, 0.0)], "c": [1]}, "impossible under the prior"),
])
def test_bad_input_is_named(kwargs, match):
    args = {"prior": PRIOR, "n": [3], "c": [1], "k": [1]} | kwargs
    with pytest.raises(ValueError, match=match):
        oracle_passk(args.pop("prior"), args.pop("n"), args.pop("c"), args.pop("k"), **args)


def test_simulators_name_a_bad_seed_and_take_generators_and_none():
    from bayespass.simulate import rng, simulate_counts

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=f"seed must be a non-negative integer; got {bad!r}"):
            simulate_counts(np.full(5, 0.4), 3, seed=bad)
    g = np.random.default_rng(4)
    assert rng(g) is g and isinstance(rng(None), np.random.Generator)
    assert rng(np.int64(7)).integers(1 << 30) == np.random.default_rng(7).integers(1 << 30)
    assert rng([1, 2]).integers(1 << 30) == np.random.default_rng([1, 2]).integers(1 << 30)
