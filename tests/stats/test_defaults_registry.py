"""Every conformal post-processor reads its defaults from rcParams, and a bad value is a clear error."""

import pytest

import bayespass as bp
from bayespass.defaults import resolve


def test_resolve_reads_rcparams_and_validates_with_the_parameter_name():
    assert resolve(None, "gating.alpha") == 0.1
    assert resolve(0.2, "gating.alpha") == 0.2
    with bp.rc_context({"gating.calib_fraction": 0.7}):
        assert resolve(None, "gating.calib_fraction") == 0.7
    with pytest.raises(ValueError, match="alpha"):
        resolve(1.5, "reliability.alpha")
    with pytest.raises(ValueError, match="n_splits"):
        resolve(0, "gating.n_splits")
    with pytest.raises(ValueError, match="gating.alpha"):
        bp.rcParams["gating.alpha"] = -1


def test_gate_and_reliability_follow_rcparams(make_samples):
    import numpy as np

    g = np.random.default_rng(0)
    good = g.random((1, 30, 1, 1)) < 0.6
    verdict = np.where(good | (g.random((1, 30, 5, 6)) < 0.3), 1, 2)
    demo_samples = make_samples(verdict, logprob=g.normal(size=(1, 30, 5)))
    base = bp.gate(demo_samples, n_splits=3)
    assert base.attrs["alpha"] == pytest.approx(0.1)
    with bp.rc_context({"gating.alpha": 0.3, "gating.n_splits": 4, "reliability.alpha": 0.25,
                        "reliability.n_splits": 2}):
        g = bp.gate(demo_samples)
        r = bp.reliability(demo_samples)
    assert g.attrs["alpha"] == pytest.approx(0.3) and g.sizes["split"] == 4
    assert r.attrs["alpha"] == pytest.approx(0.25) and r.sizes["split"] == 2
    with pytest.raises(ValueError, match="calib_fraction"):
        bp.gate(demo_samples, calib_fraction=2.0)
