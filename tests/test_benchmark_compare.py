"""The scores of benchmarks/compare.py (issue 18's ranking benchmark) against brute force."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "compare.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("bench_compare", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _every_tie_break(x):
    """Every strict order of ``x`` that keeps its untied pairs: offsets within each group of equal values."""
    groups = [np.flatnonzero(x == v) for v in np.unique(x)]
    for perms in itertools.product(*(itertools.permutations(range(g.size)) for g in groups)):
        xx = x.astype(float).copy()
        for g, p in zip(groups, perms, strict=True):
            xx[g] += np.array(p) * 1e-3
        yield xx


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tau_untied_is_the_mean_over_every_tie_break(compare, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, 8).astype(float)  # several groups of ties
    y = rng.random(8)
    brute = np.mean([kendalltau(xx, y).statistic for xx in _every_tie_break(x)])
    assert compare.tau_untied(x, y) == pytest.approx(brute, abs=1e-12)
    assert abs(compare.tau_untied(x, y)) < abs(kendalltau(x, y).statistic)  # tau-b credits the ties


def test_tau_untied_counts_values_equal_to_twelve_decimals_as_ties(compare):
    y = np.array([0.1, 0.3, 0.2, 0.5])
    x = np.array([0.1 + 0.2, 0.3, 0.5, 0.7])  # 0.30000000000000004 and 0.3: the same number of tasks passed
    assert compare.tau_untied(x, y) == pytest.approx(compare.tau_untied(np.array([3, 3, 5, 7.0]), y))


def test_flips_counts_the_pairs_ordered_otherwise(compare):
    ref = np.array([1.0, 2.0, 2.0, 3.0])
    assert compare.flips(ref + [0, 0.5, 0, 0], ref) == 0  # only a tie of ref broken
    assert compare.flips(np.array([2.0, 1.0, 1.5, 3.0]), ref) == 2  # (0, 1) and (0, 2) reversed
    assert compare.flips(np.array([1.0, 1.0, 2.0, 3.0]), ref) == 1  # (0, 1) tied where ref orders it
