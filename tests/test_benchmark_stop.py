"""benchmarks/stop_bias.py: the band with the width-based stop and at fixed n, from recorded sampling paths."""

from argparse import Namespace

import numpy as np
import pytest


@pytest.fixture(scope="module")
def stop_bias(load_benchmark):
    return load_benchmark("stop_bias")


def test_stop_keeps_the_first_narrow_band_and_fixed_n_keeps_every_replicate(stop_bias):
    args = Namespace(width=0.05, tasks=4, n_fixed=[2, 3])
    # rows: (min n, total samples, lo, hi, posterior mean); 4 tasks, rounds of 2 samples
    runs = [
        (0.50, [(2, 8, 0.40, 0.60, 0.5), (2, 10, 0.45, 0.49, 0.48), (3, 12, 0.47, 0.51, 0.49)]),  # stops at 10, misses
        (0.50, [(2, 8, 0.48, 0.52, 0.51), (2, 10, 0.30, 0.70, 0.5), (3, 12, 0.45, 0.55, 0.5)]),  # stops at 8, covers
        (0.50, [(2, 8, 0.40, 0.60, 0.5), (2, 10, 0.40, 0.60, 0.5), (3, 12, 0.45, 0.55, 0.53)]),  # never narrow
    ]
    out = stop_bias.summarise(runs, args)
    stopped = np.array(out["stopped"], float)
    assert stopped[:, 0].tolist() == [10, 8]  # the first narrow round, the later narrow one not taken
    assert stopped[:, 1].tolist() == [0, 1]
    assert stopped[:, 2].tolist() == [0, 0]  # the miss is below the truth, not above
    np.testing.assert_allclose(stopped[:, 3], [-0.02, 0.01], atol=1e-12)  # the mean at the stop, minus the truth
    # at n = 2 only the round where every task has 2 samples (8 in all) counts, narrow or not
    assert [c[:2] for c in out["fixed"][2]] == [(False, True), (True, True), (False, True)]
    assert [c[:2] for c in out["fixed"][3]] == [(True, True), (False, True), (False, True)]
    np.testing.assert_allclose([c[4] for c in out["fixed"][3]], [-0.01, 0.0, 0.03], atol=1e-12)


def test_a_uniform_path_tops_up_the_fewest_and_fits_from_n_start(stop_bias, monkeypatch):
    seen = []

    def fake_bands(n, c, names, args):
        seen.append(n[0].copy())
        assert (c <= n).all()
        return np.array([0.0]), np.array([1.0]), [None]

    monkeypatch.setattr(stop_bias, "fit_bands", fake_bands)
    args = Namespace(n0=2, n_start=3, n_max=4, model="bb", k=10, ci_prob=0.9)
    rows = stop_bias.path(np.array([0.1, 0.5, 0.9, 0.0]), args, np.random.default_rng(0))
    # rounds add one sample to the half with fewest: n = 2222 -> 3322 -> 3333 -> 4433 -> 4444 -> 5544 -> 5555;
    # fitted from min n = 3 (not 3322) while min n <= 4
    assert [s.tolist() for s in seen] == [[3, 3, 3, 3], [4, 4, 3, 3], [4, 4, 4, 4], [5, 5, 4, 4]]
    assert [r[:2] for r in rows] == [(3, 12), (3, 14), (4, 16), (4, 18)]
    assert all(r[4] is None for r in rows)  # no fit, no posterior mean


def test_real_paths_draw_each_task_s_samples_without_replacement_in_a_uniform_order(stop_bias):
    c = np.array([0, 1, 7, 50, 25])
    draws = np.stack([stop_bias.sample_order(c, 50, np.random.default_rng(s)) for s in range(4000)])
    assert (draws.sum(axis=2) == c).all()  # exactly c passes among a task's 50, whatever the order
    rate = draws.mean(axis=0)  # (task, position): P(the j-th sample drawn passes) = c / n at every position
    sd = np.sqrt((c / 50) * (1 - c / 50) / 4000)[:, None]
    assert (np.abs(rate - (c / 50)[:, None]) <= 4.5 * sd + 1e-12).all()
    first10 = draws[:, 2, :10].sum(axis=1)  # passes among the first 10 of task 2: hypergeometric(50, 7, 10)
    from scipy.stats import hypergeom

    expect = hypergeom(50, 7, 10).pmf(np.arange(8)) * 4000
    seen = np.bincount(first10, minlength=8)[:8]
    assert np.abs(seen - expect).max() <= 4.5 * np.sqrt(expect).max()
