"""Assumption-free bounds on dataset pass@k (``bp.passk_bounds``): closed forms, exact thinning, coverage."""

import numpy as np
import pytest
from scipy.stats import beta, binom

import bayespass as bp
from bayespass.stats.bounds import thinned_histogram


def test_one_sample_per_task_gives_the_identified_set_in_closed_form():
    """m = 1: the counts tell only mean p, so the bounds are [mu_lo, 1 - (1 - mu_hi)^k] (all-or-nothing tasks
    at the lower end, equally hard ones at the upper), mu's box Clopper-Pearson at 1 - alpha / 2."""
    rng = np.random.default_rng(0)
    n = np.ones((2, 250), int)
    c = rng.binomial(1, [[0.3], [0.8]], size=n.shape)
    ks = [1, 3, 10, 50]
    got = bp.passk_bounds(bp.make_counts(n, c), ks, ci_prob=0.9)
    for j in range(2):
        x = c[j].sum()
        lo, hi = beta.ppf(0.025, x, 250 - x + 1), beta.ppf(0.975, x + 1, 250 - x)
        # up to the grid's margin (a p between two grid points): at most 2e-4 outward, never inward
        assert ((got.values[j, :, 0] <= lo + 1e-9) & (got.values[j, :, 0] >= lo - 2e-4)).all()
        upper = 1 - (1 - hi) ** np.array(ks)
        assert ((got.values[j, :, 1] >= upper - 1e-9) & (got.values[j, :, 1] <= upper + 2e-4)).all()


def test_thinned_histogram_is_unbiased_for_the_binomial_of_m_samples():
    """E over c ~ Binom(n, p) of P(c' | n, c, m) is Binom(c' | m, p) for any p (exact, by summation)."""
    for n, m, p in [(5, 2, 0.3), (10, 4, 0.05), (7, 7, 0.9)]:
        cs = np.arange(n + 1)
        each = np.stack([thinned_histogram(np.array([n]), np.array([c]), m) for c in cs])
        np.testing.assert_allclose(binom.pmf(cs, n, p) @ each, binom.pmf(np.arange(m + 1), m, p), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["levels", "equal"])
def test_bounds_cover_shapes_the_default_misses(shape):
    """p on four levels (a quarter at 0.02, just below 1 / m) and every task equally hard: the default's band
    missed pass@100 in most replicates on the first (benchmarks/RESULTS.md); the bounds cover >= 0.9 of the
    time at every k, and contain the unbiased estimate where k <= m."""
    rng = np.random.default_rng(1)
    ks = np.array([1, 5, 50, 100])
    m, reps, tasks = 10, 60, 200
    if shape == "levels":
        p = rng.choice([0.02, 0.2, 0.5, 0.9], size=(reps, tasks))
    else:
        p = np.full((reps, tasks), 0.1)
    c = rng.binomial(m, p)
    got = bp.passk_bounds(bp.make_counts(np.full(p.shape, m), c), ks).values
    truth = (1 - (1 - p[:, :, None]) ** ks).mean(1)
    cover = (got[..., 0] <= truth + 1e-9) & (truth <= got[..., 1] + 1e-9)
    assert (cover.mean(0) >= 0.9).all(), cover.mean(0)
    unbiased = bp.passk(bp.make_counts(np.full(p.shape, m), c), [1, 5], method="unbiased").values
    assert ((got[:, :2, 0] <= unbiased + 1e-9) & (unbiased <= got[:, :2, 1] + 1e-9)).all()
    assert (got[:, -1, 1] - got[:, -1, 0]).mean() < 0.5  # informative: not [0, 1]


def test_ragged_counts_skip_unobserved_tasks():
    rng = np.random.default_rng(2)
    n = rng.integers(3, 9, size=(1, 120))
    n[0, :5] = 0
    c = rng.binomial(n, 0.4)
    got = bp.passk_bounds(bp.make_counts(n, c), [1, 10])
    assert got.attrs["m"] == [3]
    assert np.isfinite(got.values).all() and (got.values[..., 0] <= got.values[..., 1]).all()
    lone = bp.passk_bounds(bp.make_counts(n[:, 5:], c[:, 5:]), [1, 10])
    np.testing.assert_allclose(got.values, lone.values, atol=1e-9)


def test_sample_groups_depend_on_n_alone_and_split_off_the_few_one_sample_tasks():
    from bayespass.stats.bounds import sample_groups

    few = np.r_[np.ones(6, int), np.full(114, 10)]
    np.testing.assert_array_equal(sample_groups(few), few)  # 1 and 10: two groups, nothing thinned
    np.testing.assert_array_equal(sample_groups(np.array([8, 9, 10, 10, 9])), 8)  # thinning loses little
    np.testing.assert_array_equal(sample_groups(np.array([3000, 60, 51])), 50)  # MAX_M
    mixed = np.random.default_rng(0).integers(1, 60, 300)
    got = sample_groups(mixed)
    assert (got <= np.minimum(mixed, 50)).all() and 2 <= np.unique(got).size <= 4


def test_a_few_one_sample_tasks_leave_the_bounds_of_the_others():
    """5% of tasks at n = 1: the bounds beyond k = 1 are those of 10 samples on the rest, widened by 5%.

    Before, the whole config was thinned to one sample per task, and pass@10's bounds were the identified
    set of the mean, [mu, 1 - (1 - mu)^10], about 0.6 wide here.
    """
    rng = np.random.default_rng(4)
    t, ks = 400, np.array([1, 10, 100])
    hits, widths = [], []
    for _ in range(6):
        p = rng.beta(0.4, 0.6, t)
        n = np.full(t, 10)
        n[:20] = 1
        got = bp.passk_bounds(bp.make_counts(n[None], rng.binomial(n, p)[None]), ks)
        assert got.attrs["m"] == [1] and got.attrs["m_levels"] == [[1, 10]]
        lo, hi = got.values[0].T
        truth = (1 - (1 - p[:, None]) ** ks).mean(0)
        hits.append((lo <= truth) & (truth <= hi))
        widths.append(hi - lo)
        mu = p.mean()
        assert hi[1] - lo[1] < 0.5 * (1 - (1 - mu) ** 10 - mu)
    assert np.mean(hits) >= 0.9 and np.mean(widths, 0)[1] < 0.3


def test_bounds_at_a_million_and_beyond_stay_informative_and_do_not_depend_on_the_other_k():
    """At k in the millions the grid's first gap (0 to 1e-6) made the bounds [0, 1]; they now rise with k (up
    to the grid's margin) and stay above pass@1's, and the bounds at one k do not depend on which others are asked.
    """
    rng = np.random.default_rng(5)
    p = rng.beta(0.5, 0.5, 300)
    n = np.full((1, 300), 10)
    ks = np.array([10**12, 1, 10, 1000, 10**6, 10**9])  # unsorted on purpose
    got = bp.passk_bounds(bp.make_counts(n, rng.binomial(n, p)), ks).values[0]
    order = np.argsort(ks)
    assert (np.diff(got[order, 0]) >= -0.003).all() and (np.diff(got[order, 1]) >= -0.003).all()
    assert got[0, 0] >= got[1, 0]  # pass@1e12's lower bound at least pass@1's: not 0
    truth = (1 - (1 - p[:, None]) ** ks.astype(float)).mean(0)
    assert ((got[:, 0] <= truth) & (truth <= got[:, 1])).all()
    counts = bp.make_counts(n, rng.binomial(n, p))
    np.testing.assert_allclose(bp.passk_bounds(counts, [10, 10**9]).values[0, 0],
                               bp.passk_bounds(counts, [10]).values[0, 0], atol=1e-12)


def test_bad_arguments_are_named():
    counts = bp.make_counts(np.full(10, 3), np.ones(10, int))
    with pytest.raises(ValueError, match="ci_prob"):
        bp.passk_bounds(counts, [1], ci_prob=1.5)
    with pytest.raises(ValueError, match="k must hold positive integers"):
        bp.passk_bounds(counts, [0])
    with pytest.raises(TypeError, match="counts must be a counts Dataset, a fit .* got DataArray"):
        bp.passk_bounds(counts.n, [1])


def test_a_fit_and_a_run_give_the_bounds_of_their_counts(tmp_path):
    rng = np.random.default_rng(3)
    counts = bp.make_counts(np.full((2, 40), 4), rng.binomial(4, rng.beta(0.5, 0.7, (2, 40))), config=["A", "B"])
    want = bp.passk_bounds(counts, [1, 10])
    fit = bp.fit(counts, "bb", "eb", draws=100, progressbar=False)
    np.testing.assert_array_equal(bp.passk_bounds(fit, [1, 10]).values, want.values)
    import xarray as xr

    tree = xr.DataTree.from_dict({"counts": counts})  # what bp.load_run gives
    np.testing.assert_array_equal(bp.passk_bounds(tree, [1, 10]).values, want.values)


def test_many_samples_per_task_are_thinned_to_max_m_without_overflow():
    """n = 3000: C(n, j) overflows a float, the log-space estimate does not; the bounds use MAX_M samples."""
    from scipy.special import comb

    from bayespass.stats.bounds import MAX_M, _unbiased_miss

    n, c, js = np.array([10, 10, 7, 3]), np.array([3, 10, 0, 1]), np.arange(1, 4)
    brute = np.array([[comb(a - b, j) / comb(a, j) for a, b in zip(n, c, strict=True)] for j in js])
    np.testing.assert_allclose(_unbiased_miss(n, c, js), brute, rtol=1e-12, atol=1e-15)
    rng = np.random.default_rng(3)
    p = rng.beta(0.5, 0.5, 150)
    big = np.full((1, 150), 3000)
    got = bp.passk_bounds(bp.make_counts(big, rng.binomial(big, p)), [1, 10, 100])
    assert got.attrs["m"] == [MAX_M] and np.isfinite(got.values).all()
    truth = (1 - (1 - p[:, None]) ** np.array([1, 10, 100])).mean(0)
    assert ((got.values[0, :, 0] <= truth) & (truth <= got.values[0, :, 1])).all()


def test_counts_no_binomial_sampling_can_give_warn_and_name_the_config():
    # every task exactly 2 of 5: a binomial mixture puts at most 0.35 on one count, so no spread of p fits
    counts = bp.make_counts([[5] * 60, [5] * 60], [[2] * 60, [0, 1, 2, 3, 4, 5] * 10], config=["flat", "ok"])
    with pytest.warns(UserWarning, match=r"config 'flat' has NaN bounds.*underdispersed"):
        b = bp.passk_bounds(counts, k=[1, 10])
    assert np.isnan(b.sel(config="flat")).all() and not np.isnan(b.sel(config="ok")).any()


def test_column_generation_gives_the_linear_program_over_the_whole_grid():
    """The bounds solve each k's programs on a few columns, adding those of negative reduced cost: the optimum
    must be that of one program over every column (HiGHS on the whole grid), for every k, in both directions.
    """
    from scipy.optimize import linprog

    from bayespass.stats.bounds import _ColumnLP

    rng = np.random.default_rng(11)
    grid = np.linspace(0.0, 1.0, 400)
    m = 4
    hist = np.bincount(rng.binomial(m, rng.beta(0.4, 0.7, 500)), minlength=m + 1) / 500
    mix = binom.pmf(np.arange(m + 1)[:, None], m, grid[None, :])
    a_ub, b_ub = np.vstack([mix, -mix]), np.concatenate([hist + 0.03, -(hist - 0.03)])
    lp = _ColumnLP(a_ub, b_ub)
    for k in (1, 3, 10, 100, 10**4):
        f = 1.0 - (1.0 - grid) ** k
        for sign in (1.0, -1.0):
            full = linprog(sign * f, A_ub=a_ub, b_ub=b_ub, A_eq=np.ones((1, grid.size)), b_eq=[1.0],
                           bounds=(0, None), method="highs")
            assert lp.solve(sign * f) == pytest.approx(full.fun, abs=1e-8), (k, sign)
    assert lp.cols.sum() < grid.size / 2  # it did work on a subset of the columns
    # constraints that no distribution meets: None, as the whole grid's program says
    assert _ColumnLP(a_ub, np.concatenate([hist - 0.1, -(hist + 0.1)])).solve(f) is None
    # constraints that only a point mass between the sparse subset's points meets (mean and second moment of p
    # pinned): the subset has no solution, the whole grid has one
    x0 = grid[5]
    assert 5 % _ColumnLP.STRIDE
    mom = np.vstack([grid, grid**2])
    pinned = _ColumnLP(np.vstack([mom, -mom]), np.array([x0, x0**2, -x0, -x0**2]) + 1e-12)
    assert pinned.solve(f) == pytest.approx(f[5], abs=1e-6)
    assert pinned.solve(-f) == pytest.approx(-f[5], abs=1e-6)
