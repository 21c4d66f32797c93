"""plan(): the band width it predicts for more samples per task is what drawing them gives."""

import warnings

import numpy as np
import pytest

import bayespass as bp
from bayespass.simulate import simulate_counts


def _width(counts, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        band = bp.passk_curve(bp.fit(counts, "bb", "eb", progressbar=False), [k])["eti"].sel(k=k)
    return float((band.sel(ci_bound="upper") - band.sel(ci_bound="lower")).values[0])


@pytest.mark.slow
def test_predicted_width_is_reached_when_the_planned_samples_are_drawn():
    g = np.random.default_rng(2)
    p = g.beta(0.8, 1.2, 150)
    start = simulate_counts(p, 3, seed=1).drop_vars("p_true")
    fit = bp.fit(start, "bb", "eb", progressbar=False)
    pl = bp.plan(fit, k=10, target_width=0.06, n_grid=[3, 8, 20], n_sims=4, seed=3)
    w_now = float(pl["current_width"].values[0])
    pred = pl["expected_width"].values[0]
    assert pred[0] == pytest.approx(w_now, rel=0.25)  # no new samples: about today's width
    assert pred[2] < pred[1] < pred[0]  # more samples, narrower
    # draw the planned samples from the truth (on top of the 3 we had) and measure
    for i, n in enumerate([8, 20]):
        real = []
        for rep in range(3):
            extra = simulate_counts(p, n - 3, seed=100 + 10 * i + rep)
            counts = start.copy(data={"n": start.n.values + extra.n.values, "c": start.c.values + extra.c.values})
            real.append(_width(counts, 10))
        assert np.mean(real) == pytest.approx(pred[i + 1], rel=0.2), (n, real, pred)
    if np.isfinite(pl["n_needed"].values[0]):
        assert pl["expected_width"].sel(n=pl["n_needed"].values[0]).values[0] <= 0.06


def test_plan_refuses_bad_input():
    counts = simulate_counts(np.full(30, 0.4), 3, seed=0)
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    with pytest.raises(ValueError, match="target_width"):
        bp.plan(fit, k=10, target_width=2.0)
    with pytest.raises(ValueError, match="one value"):
        bp.plan(fit, k=[1, 10], target_width=0.1)
    with pytest.raises(ValueError, match="n_sims"):
        bp.plan(fit, k=10, target_width=0.1, n_sims=0)
