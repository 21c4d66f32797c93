"""benchmarks/ragged_band.py: which tasks stay short, and real subsamples drawn without replacement."""

from argparse import Namespace

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def ragged(load_benchmark):
    return load_benchmark("ragged_band")


def test_designs_keep_short_the_tasks_they_name(ragged):
    rng = np.random.default_rng(0)
    n = np.full((2, 5), 2)
    c = np.array([[0, 1, 2, 2, 0], [2, 2, 2, 1, 0]])
    np.testing.assert_array_equal(ragged.top_up(n, c, "all-pass", 0.3, 10, rng), c < 2)
    np.testing.assert_array_equal(ragged.top_up(n, c, "none-pass", 0.3, 10, rng), c > 0)
    share = 1 - ragged.top_up(np.full((40, 500), 2), np.zeros((40, 500)), "random", 0.3, 10, rng).mean()
    assert abs(share - 0.3) < 0.01
    with pytest.raises(ValueError, match="design='some'"):
        ragged.top_up(n, c, "some", 0.3, 10, rng)


def test_real_subsamples_are_drawn_without_replacement(ragged):
    """A task with c of 50 passing: its first 2 and next 8 samples are hypergeometric draws from the 50, so the 10
    hold at most c passes, and on average 10 c / 50 of them (short tasks: 2 c / 50)."""
    df = pd.DataFrame({"model": ["m"] * 4, "temperature": [0.2] * 4, "task": list("abcd"),
                       "n": [50] * 4, "c": [0, 3, 25, 50]})
    args = Namespace(real_reps=3000, n_short=2, n_long=10, short_share=0.0)
    counts, ref, short = ragged.real_cell(df, "random", args, [1, 10], seed=1)
    n, c = counts.n.values, counts.c.values
    assert short == 0.0 and (n == 10).all()
    assert (c[:, 0] == 0).all() and (c[:, 3] == 10).all() and c[:, 1].max() <= 3
    np.testing.assert_allclose(c.mean(0), [0, 0.6, 5.0, 10], atol=0.1)
    # hypergeometric, not binomial: the variance of 10 draws from 50 with 25 passes is 10 * 0.25 * 40 / 49
    assert abs(c[:, 2].var() - 10 * 0.25 * 40 / 49) < 0.15
    assert ref[0, 0] == pytest.approx((0 + 3 + 25 + 50) / 200)  # the reference: pass@1 on all 50 samples
    args.short_share = 1.0
    counts, _, short = ragged.real_cell(df, "random", args, [1], seed=2)
    assert short == 1.0 and (counts.n.values == 2).all() and counts.c.values.max() <= 2


def test_real_allocation_paths_never_draw_past_a_tasks_samples(load_benchmark):
    """allocate_real.py: the uniform round tops up the half of the tasks with the fewest samples, skipping tasks
    that have used all of theirs."""
    mod = load_benchmark("allocate_real")
    n = np.array([50, 3, 2, 50, 2, 4])
    extra = mod.next_round("uniform", None, n, 50, 10, np.random.default_rng(0))
    np.testing.assert_array_equal(extra, [0, 1, 1, 0, 1, 0])
    assert (mod.next_round("uniform", None, np.full(4, 50), 50, 10, None) == 0).all()
