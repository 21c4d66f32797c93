import itertools

import numpy as np
import pytest

from bayespass.stats.incoherence import (
    _exact,
    hoeffding_halfwidth,
    incoherence,
    incoherence_summary,
    pac_n_detect,
    pac_n_estimate,
)


def _brute(d, ref):
    k, m = d.shape
    pairs = [(i, j) for i, j in itertools.permutations(range(k), 2)]
    inc = np.mean([d[i, x] != d[j, x] for i, j in pairs for x in range(m)])
    err = np.mean(d != ref[None, :])
    return inc, err


def test_exact_matches_brute_force_and_bound_holds():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, m = rng.integers(2, 7), rng.integers(1, 12)
        d = rng.integers(0, rng.integers(1, 4), (k, m))
        ref = rng.integers(0, 3, m)
        inc, err = _exact(d, ref)
        bi, be = _brute(d, ref)
        assert inc == pytest.approx(bi) and err == pytest.approx(be)
        assert inc <= 2 * err + 1e-12


def test_pac_helpers():
    assert pac_n_estimate(0.05, 0.05) == 738  # ceil(log(40) / 0.005)
    assert pac_n_detect(0.01, 0.05) == 299  # ceil(log(0.05) / log(0.99))
    assert hoeffding_halfwidth(738, 0.05) <= 0.05
    with pytest.raises(ValueError, match="eps must be in"):
        pac_n_estimate(0, 0.1)


def test_monte_carlo_within_pac_bound_and_summary(make_samples):
    rng = np.random.default_rng(1)
    c, t, k, m = 2, 30, 6, 40
    ref = rng.integers(0, 5, (t, m))
    wrong = rng.random((c, t, k, 1)) < rng.random((1, t, 1, 1))  # per-task error propensity
    d = np.where(wrong & (rng.random((c, t, k, m)) < 0.5), rng.integers(5, 8, (c, t, k, m)), ref[None, :, None, :])
    v = np.where(d == ref[None, :, None, :], 1, 2)
    ds = make_samples(v, digest=d, ref=ref)
    inc = incoherence(ds, n_mc=300, delta=0.05, n_repeats=40, seed=3)
    assert bool(inc.bound_holds.all())
    within = np.abs(inc.I_mc - inc.I) <= inc.attrs["eps"]
    assert float(within.mean()) >= 0.95
    assert float((np.abs(inc.E_mc - inc.E) <= inc.attrs["eps"]).mean()) >= 0.95
    df = incoherence_summary(inc)
    assert set(df.columns) >= {"mean_error", "mean_incoherence", "spearman", "detection_rate", "undetected_error"}
    e, i = inc.E.values[0], inc.I.values[0]
    assert df.loc[0, "detection_rate"] == pytest.approx(np.mean(i[e > 0] > 0))
    assert df.loc[0, "mean_error"] == pytest.approx(e.mean())


def test_incoherence_needs_reference(make_samples):
    ds = make_samples(np.ones((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="reference_digest"):
        incoherence(ds)


def test_rank_agreement_undefined_when_constant(make_samples):
    import xarray as xr

    inc = xr.Dataset({"I": (("config", "task"), [[0.0, 0.1], [0.0, 0.2]]),
                      "E": (("config", "task"), [[0.1, 0.1], [0.1, 0.2]]),
                      "bound_holds": (("config", "task"), np.ones((2, 2), bool)),
                      "pass1": ("config", [0.4, 0.6])}, coords={"config": ["a", "b"]})
    df = incoherence_summary(inc)  # zero-incoherence rate is 0.5 for both: no warning, NaN
    assert np.isnan(df.attrs["rank_agreement"])
