"""benchmarks/leaderboard_low.py: its summary counts coverage, width and bias as defined, on known numbers."""

import numpy as np
import pytest


def test_summary_of_known_replicates(load_benchmark):
    bench = load_benchmark("leaderboard_low")
    one = {"truth": [[0.1, 0.5, 0.8]],
           "shared": {"mean": [[0.1, 0.4, 0.6]], "band": [[[0.0, 0.2], [0.45, 0.6], [0.5, 0.7]]]},
           "auto": {"mean": [[0.2, 0.5, 0.8]], "band": [[[0.1, 0.1], [0.4, 0.6], [0.7, 0.9]]]}}
    two = {"truth": [[0.3, 0.5, 0.8]],
           "shared": {"mean": [[0.3, 0.5, 0.9]], "band": [[[0.2, 0.4], [0.4, 0.6], [0.85, 1.0]]]},
           "auto": one["auto"]}
    s = bench.summarise([one, two])
    assert s["shared"]["coverage"] == [[1.0, 1.0, 0.0]]  # k = 50: 0.8 above 0.7, then below 0.85
    assert s["auto"]["coverage"] == [[0.5, 1.0, 1.0]]  # a band [0.1, 0.1] holds 0.1 (closed), not 0.3
    assert s["shared"]["width"][0] == pytest.approx([0.2, 0.175, 0.175])
    assert s["shared"]["bias"][0] == pytest.approx([0.0, -0.05, -0.05])
    assert s["truth_mean"][0] == pytest.approx([0.2, 0.5, 0.8])


def test_a_replicate_holds_its_own_truth(load_benchmark):
    bench = load_benchmark("leaderboard_low")
    r = bench.replicate(np.random.default_rng(0), [-1.0, 0.0], m=3, tasks=30)
    truth = np.array(r["truth"])
    assert truth.shape == (2, len(bench.K)) and (np.diff(truth, axis=1) >= 0).all()
    assert (truth[1] > truth[0]).all()  # the higher ability's pass@k, in expectation and on 30 tasks here
    for name in ("shared", "auto"):
        band = np.array(r[name]["band"])
        assert band.shape == (2, len(bench.K), 2) and (band[..., 0] <= band[..., 1]).all()
