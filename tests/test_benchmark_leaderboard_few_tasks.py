"""benchmarks/leaderboard_few_tasks.py: its summary scores the configs cut to few samples as defined."""

import numpy as np
import pytest


def _rep(truth, low, lb_mean, lb_band, prob_better):
    band = [[[lo, hi] for lo, hi in row] for row in lb_band]
    return {"truth": truth, "naive": truth, "low": low, "lb_mean": lb_mean, "lb_band": band,
            "curve_mean": truth, "curve_band": [[[t - 0.01, t + 0.01] for t in row] for row in truth],
            "prob_better": prob_better}


def test_summary_of_known_replicates(load_benchmark):
    bench = load_benchmark("leaderboard_few_tasks")
    truth = [[0.5, 0.7, 0.8], [0.6, 0.8, 0.9]]  # config 1 better at every k
    pb = np.zeros((2, 2, 3))
    pb[1, 0], pb[0, 1] = 0.9, 0.1  # right and sure: the bin of 0.9 holds outcomes 1, of 0.1 outcomes 0
    one = _rep(truth, [True, False], [[0.5, 0.75, 0.8], [0.6, 0.8, 0.9]],
               [[(0.4, 0.6), (0.6, 0.72), (0.7, 0.9)], [(0.5, 0.7), (0.7, 0.9), (0.8, 1.0)]], pb.tolist())
    two = _rep(truth, [False, True], [[0.5, 0.7, 0.8], [0.55, 0.8, 0.9]],
               [[(0.4, 0.6), (0.6, 0.8), (0.7, 0.9)], [(0.5, 0.7), (0.85, 0.9), (0.8, 1.0)]], pb.tolist())
    s = bench.summarise([one, two])
    assert s["configs_cut"] == 2
    assert s["lb"]["coverage"] == [1.0, 0.5, 1.0]  # replicate two's config 1 misses 0.8 at k = 5 (0.85-0.9)
    assert s["lb"]["width"] == pytest.approx([0.2, (0.12 + 0.05) / 2, 0.2])
    assert s["lb"]["bias"] == pytest.approx([-0.025, 0.025, 0.0])
    assert s["lb"]["mae"] == pytest.approx([0.025, 0.025, 0.0])
    assert s["curve"]["coverage"] == [1.0, 1.0, 1.0] and s["naive"]["mae"] == [0.0, 0.0, 0.0]
    assert s["prob_better_ece"] == pytest.approx([0.1, 0.1, 0.1])  # |0.9 - 1| and |0.1 - 0|, half the pairs each
