"""benchmarks/hull_draws_check.py: each candidate's band from all its draws in a stacked fit is its own fit's band."""

import warnings

import numpy as np
import pytest

import bayespass as bp


@pytest.fixture(scope="module")
def hull_check(load_benchmark):
    return load_benchmark("hull_draws_check")


@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")
def test_hull_from_all_draws_is_the_hull_of_the_candidates_own_fits(hull_check):
    rng = np.random.default_rng(2)
    p = 1 / (1 + np.exp(-rng.normal([[-1.0], [0.5]], 2.0, (2, 150))))
    counts = bp.make_counts(np.full(p.shape, 5), rng.binomial(5, p))
    ks = [10, 100]
    stacked = bp.fit(counts, "auto", "eb", k=ks, progressbar=False)
    names = str(stacked.posterior.attrs["stack_components"]).split(",")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = np.stack([bp.passk_curve(bp.fit(counts, name, "eb", k=ks, progressbar=False), ks)["eti"]
                        .transpose("config", "k", "ci_bound").values for name in names])  # (cand, config, K, 2)
    comp = stacked.posterior["component"].values
    share = np.stack([(comp == j).mean((0, 1)) for j in range(len(names))])  # (cand, config)
    # every candidate in the hull: exactly the extremes of the own fits' bands (the stack keeps each candidate's
    # draws whole; a band from the mixture's share of them would differ by Monte Carlo noise)
    lo, hi, at_lo, at_hi = hull_check.hull_from_full_draws(stacked, ks, min_share=0.0)
    np.testing.assert_allclose(lo, own[..., 0].min(0), atol=1e-12)
    np.testing.assert_allclose(hi, own[..., 1].max(0), atol=1e-12)
    np.testing.assert_array_equal(at_lo, own[..., 0].argmin(0))
    np.testing.assert_array_equal(at_hi, own[..., 1].argmax(0))
    # a floor between the two smallest shares of config 0 leaves its smallest candidate out, as the product does
    order = np.argsort(share[:, 0])
    floor = share[order[:2], 0].mean()
    lo, hi, _, _ = hull_check.hull_from_full_draws(stacked, ks, min_share=floor)
    kept = share[:, 0] >= floor
    assert not kept[order[0]] and kept.sum() == len(names) - 1
    np.testing.assert_allclose(lo[0], own[kept, 0, :, 0].min(0), atol=1e-12)
    np.testing.assert_allclose(hi[0], own[kept, 0, :, 1].max(0), atol=1e-12)
