"""The scores of benchmarks/compare.py (issue 18's ranking benchmark) against brute force."""

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau


@pytest.fixture(scope="module")
def compare(load_benchmark):
    return load_benchmark("compare")


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


def test_mixed_replicate_splits_the_configs_and_scores_every_ordered_pair_once(load_benchmark):
    """benchmarks/compare_mixed.py: half the configs at m_low, the rest at m_high; cross and same pairs partition."""
    import bayespass as bp

    mod = load_benchmark("compare_mixed")
    g = np.random.default_rng(0)
    J, T = 4, 40
    n = np.full((J, T), 20)
    counts = bp.make_counts(n, g.binomial(n, g.beta(0.5, 0.5, (J, T))), task=[f"t{i}" for i in range(T)],
                            config=list("abcd"))
    truth = bp.passk(counts, [1, 10], method="unbiased")
    with pytest.warns(UserWarning, match="have one sample on most of their tasks and the others more"):
        out = mod.replicate(counts, truth, 1, 5, [1, 10], np.random.default_rng(1), "shared", "eb", seed=0)
    for k in (1, 10):
        assert len(out[k]["cross"]["p"]) == 2 * (J // 2) ** 2 and len(out[k]["same"]["p"]) == J * (J - 1) - 8
        assert len(out[k]["band"]["low"]) == len(out[k]["band"]["high"]) == J // 2
        # each ordered pair's outcome is the truth's order, and its mirror is the opposite
        y = np.concatenate([out[k]["cross"]["y"], out[k]["same"]["y"]])
        assert y.sum() == J * (J - 1) // 2
    # the one-sample configs' leaderboard band at pass@10 is the identified set: wider than the others'
    assert min(out[10]["band"]["width_low"]) > max(out[10]["band"]["width_high"])


def _res(taus):
    """Replicates shaped as compare.replicate's: taus[name] is a list over replicates, for k = 1."""
    reps = len(next(iter(taus.values())))
    return [{"tau": {1: {name: v[r] for name, v in taus.items()}}} for r in range(reps)]


def test_gain_is_against_the_better_baseline_with_its_paired_standard_error(compare):
    bayes = [0.50, 0.60, 0.55, 0.70]
    naive = [0.45, 0.58, 0.57, 0.60]  # mean 0.55
    beta = [0.40, 0.50, 0.50, 0.55]   # mean 0.4875: worse, so not the reference
    out = compare.gain_against_best(_res({"bayespass": bayes, "naive_untied": naive, "beta_untied": beta}), 1)
    d = np.subtract(bayes, naive)
    assert out["best_baseline"] == "naive"
    assert out["gain"] == pytest.approx(d.mean())
    assert out["gain_se"] == pytest.approx(d.std(ddof=1) / 2)
    assert out["gain_reps"] == pytest.approx(d.tolist())


def test_pooled_gain_pairs_cells_of_one_m_and_adds_the_variances_of_different_m(compare):
    rows = [{"m": 1, "k": 1, "gain_reps": [0.0, 0.2]}, {"m": 1, "k": 10, "gain_reps": [0.2, 0.0]},
            {"m": 2, "k": 1, "gain_reps": [0.1, 0.3]}, {"m": 2, "k": 10, "gain_reps": [0.1, 0.3]}]
    mean, se = compare.pooled_gain(rows)
    assert mean == pytest.approx(0.15)
    # m = 1's two cells cancel per replicate (0.1, 0.1: no variance); m = 2's per-replicate means are 0.1, 0.3
    assert se == pytest.approx(np.sqrt(np.var([0.1, 0.3], ddof=1) / 2) / 2)
    assert compare.pooled_gain(rows[:3]) is None  # a cell missing


def test_library_estimate_is_the_exact_posterior_mean_over_shapes_and_shifts(load_benchmark):
    """benchmarks/compare_library.py: the posterior over (shape, shift) and pass@k against brute force."""
    from scipy.special import expit, logit
    from scipy.stats import binom

    lib = load_benchmark("compare_library")
    q = lib.shifted(np.array([0.0, 0.2, 1.0]), 1.0)
    assert q[0] == 0 and q[2] == 1 and q[1] == pytest.approx(expit(logit(0.2) + 1.0))  # atoms stay
    shapes = np.array([[0.0, 0.3, 0.6, 1.0], [0.1, 0.1, 0.5, 0.9]])
    m, ks = 3, [1, 10]
    logmarg, post = lib.tables(shapes, m, ks)
    cs = np.array([0, 1, 3, 3, 2])  # one config's counts on 5 tasks
    got = lib.estimate(np.bincount(cs, minlength=m + 1), logmarg, post, np.array([True, True]))
    # brute force: a uniform prior over (shape, shift); each task's p a uniform draw from the shifted shape
    num, den = np.zeros(len(ks)), 0.0
    for s in shapes:
        for d in lib.SHIFTS:
            p = lib.shifted(s, d)
            like = binom.pmf(cs[:, None], m, p[None])  # (tasks, atoms)
            evidence = np.prod(like.mean(1))
            per_task = [(like @ (1 - (1 - p) ** k)) / like.sum(1) for k in ks]
            num += evidence * np.array([v.mean() for v in per_task])
            den += evidence
    assert got == pytest.approx(num / den, rel=1e-9)
    # leaving a shape out is the posterior over the other alone
    only = lib.estimate(np.bincount(cs, minlength=m + 1), logmarg, post, np.array([False, True]))
    assert not np.allclose(only, got)


@pytest.fixture(scope="module")
def ranking_2pl(load_benchmark):
    return load_benchmark("ranking_2pl")


def test_the_rasch_prototype_ranks_as_the_totals_and_the_two_parameter_one_does_not(ranking_2pl):
    """At one sample per task a config's total is sufficient under the Rasch model (sd 0): its pass@1 is a
    strictly increasing function of the total.  With task discriminations it is not: two configs with the same
    total that passed other tasks (among those that separate the configs and those passed at random) differ."""
    rng = np.random.default_rng(0)
    J, T = 8, 60
    x = rng.normal(0, 1.5, T)
    a = np.where(np.arange(T) < 30, 3.0, 0.05)  # half the tasks separate the configs, half are coin flips
    alpha = np.linspace(-1, 1, J)
    c = (rng.random((J, T)) < 1 / (1 + np.exp(-a * (alpha[:, None] - x)))).astype(float)
    c[1] = c[0]
    c[1, :30], c[1, 30:] = np.roll(c[0, :30], 1), c[0, 30:]  # same total, other tasks
    c[1, 30:][c[0, 30:].argmin()], c[1, 30:][c[0, 30:].argmax()] = 1.0, 0.0  # one random-task pass moved
    tot = c.sum(1)
    rasch = ranking_2pl.fit_pass1(c, 1, 0.0)
    order = np.argsort(tot, kind="stable")
    strict = np.diff(tot[order]) > 0
    assert (np.diff(rasch[order])[strict] > 0).all()
    same = np.flatnonzero(tot == tot[0])
    assert np.ptp(rasch[same]) < 1e-6  # the optimiser's tolerance
    two = ranking_2pl.fit_pass1(c, 1, 0.8)
    assert np.ptp(two[same]) > 1e-3


def test_the_dispersion_pooling_prototype_nests_the_product_and_correlates_siblings(load_benchmark):
    """benchmarks/ranking_phi_pool.py's prior: at r = 1.5, sg = 0 it is the product's (the common level only), so
    its baseline run is the product; with r < 1.5 siblings' log phi are correlated by 1 - r^2 / 1.5^2 beyond the
    common level, and with sg > 0 configs at the same temperature are more alike than configs far apart."""
    import xarray as xr

    from bayespass.models import shared as S

    mod = load_benchmark("ranking_phi_pool")
    counts = xr.Dataset(coords={"config": np.arange(4), "model": ("config", ["a", "a", "b", "c"]),
                                "temperature": ("config", [0.2, 1.0, 0.6, 0.2])})
    np.testing.assert_allclose(mod.phi_precision(counts, 1.5, 0.0), S._phi_precision(4), rtol=1e-10, atol=1e-12)
    C = np.linalg.inv(mod.phi_precision(counts, 0.6, 0.0))
    t2 = S.PHI_LEVEL_SD**2
    np.testing.assert_allclose(np.diag(C), 1.5**2 + t2)
    np.testing.assert_allclose([C[0, 1], C[0, 2], C[2, 3]], [1.5**2 - 0.36 + t2, t2, t2])
    C = np.linalg.inv(mod.phi_precision(counts, 1.5, 2.0))
    np.testing.assert_allclose([C[0, 3], C[0, 1], C[0, 2]], [t2 + 4 * 0.16, t2 - 4 * 0.16, t2])


def test_the_no_slopes_variant_gives_one_slope_all_the_weight(compare, monkeypatch):
    """compare.py --no-slopes: configs whose success falls with difficulty at slopes 2 and 0.5 make the evidence
    choose a slope per config; the variant keeps one slope for all (weight 0), which moves pass@10 of the configs of slope 2 and 0.5."""
    import pandas as pd

    import bayespass as bp
    from bayespass.models import shared

    rng = np.random.default_rng(3)
    x = rng.normal(0, 1.5, 300)
    p = 1 / (1 + np.exp(-np.array([2.0, 0.5, 1.0])[:, None] * x[None, :]))
    c = rng.binomial(4, p)
    counts = bp.counts_from_frame(pd.DataFrame({"model": np.repeat(["a", "b", "c"], 300), "temperature": 0.6,
                                                "task": np.tile(np.arange(300), 3), "n": 4, "c": c.ravel()}))
    before = bp.compare_configs(counts, k=[1, 10], model="shared", method="eb", seed=0)
    monkeypatch.setattr(shared.Shared, "modes", shared.Shared.modes)  # restored after the test
    compare.without_slopes()
    after = bp.compare_configs(counts, k=[1, 10], model="shared", method="eb", seed=0)
    assert before.attrs["slopes_weight"] > 0.99 and after.attrs["slopes_weight"] == 0.0
    # pass@10 beyond the 4 samples moves most for the configs whose slope is not the common one (2 and 0.5)
    gap = np.abs(after["passk"].sel(k=10) - before["passk"].sel(k=10)).values
    assert min(gap[0], gap[1]) > max(gap[2], 0.005), gap


def test_leave_one_sample_out_predictive_against_brute_force(load_benchmark):
    """benchmarks/slopes_loso.py's score against a direct sum: every sample of every (config, task) with n >= 2
    predicted from the rest, as a ratio of the task column's sequence probabilities (Beta functions on the grid,
    scipy's betaln), the difficulty's grid weights g."""
    from scipy.special import betaln, expit
    from scipy.special import logsumexp as lse

    from bayespass.models import shared as S

    mod = load_benchmark("slopes_loso")
    n = np.array([[3, 2, 1, 4, 3], [2, 2, 3, 0, 3]], float)
    c = np.array([[1, 2, 0, 4, 3], [0, 1, 3, 0, 3]], float)  # the last column twice: multiplicity 2
    n, c = np.column_stack([n, n[:, -1]]), np.column_stack([c, c[:, -1]])
    J = 2
    theta = np.concatenate([[0.4, -0.3], [0.2, 1.1], np.random.default_rng(1).normal(0, 1, S.KNOTS.size), [0.3]])
    d = S._Data(n, c)
    got = mod.loso(theta, d, J)

    alpha, log_phi, beta, log_s = S._split(theta, J)
    logg = S._log_g(beta, d.hat)
    mu = expit(alpha[:, None] - np.exp(log_s)[:, None] * d.x[None, :])  # (J, G)
    A, B = mu * np.exp(log_phi)[:, None], (1 - mu) * np.exp(log_phi)[:, None]

    def seq(col_n, col_c):  # log sequence probability of a task column, the difficulty summed out on the grid
        per = sum(betaln(A[j] + col_c[j], B[j] + col_n[j] - col_c[j]) - betaln(A[j], B[j]) for j in range(J))
        return lse(logg + per)

    want = 0.0
    for t in range(n.shape[1]):
        for j in range(J):
            if n[j, t] < 2:
                continue
            for y in (1, 0):  # each success, then each failure, left out
                k = c[j, t] if y else n[j, t] - c[j, t]
                nn, cc = n[:, t].copy(), c[:, t].copy()
                nn[j] -= 1
                cc[j] -= y
                want += k * (seq(n[:, t], c[:, t]) - seq(nn, cc)) if k else 0.0
    assert got == pytest.approx(want, rel=1e-10, abs=1e-9)


def _three_slopes_counts():
    """Three configs whose success falls with difficulty at slopes 2, 0.5 and 1 (300 tasks, 4 samples each)."""
    import pandas as pd

    import bayespass as bp

    rng = np.random.default_rng(3)
    x = rng.normal(0, 1.5, 300)
    p = 1 / (1 + np.exp(-np.array([2.0, 0.5, 1.0])[:, None] * x[None, :]))
    return bp.counts_from_frame(pd.DataFrame({"config": np.repeat(["a", "b", "c"], 300),
                                              "task": np.tile(np.arange(300), 3), "n": 4,
                                              "c": rng.binomial(4, p).ravel()}))


def test_the_evidence_chosen_slopes_sd_variant_fits_at_the_grid_point_of_highest_evidence(load_benchmark, compare,
                                                                                        monkeypatch):
    """compare.py --eta-sd evidence: the fit's modes are those at the grid's sd of highest evidence (their log
    Bayes factor the grid's largest), and the product's prior is 0.5 again afterwards."""
    from bayespass.models import shared as S

    counts = _three_slopes_counts()
    rows = load_benchmark("slopes_loso").evidence_by_sd(counts, compare.ETA_SD_GRID)
    monkeypatch.setattr(S.Shared, "modes", S.Shared.modes)  # restored after the test
    compare.eta_sd_by_evidence()
    got = S.Shared().modes(counts)[3]
    assert got == pytest.approx(max(b for _, b, _ in rows), abs=1e-6)
    assert S._PRIOR["eta"] == (0.0, 0.5)


def test_the_evidence_of_the_slopes_prior_sd_vanishes_at_zero_and_peaks_at_the_true_spread(load_benchmark):
    """benchmarks/slopes_loso.py --eta-sds: the log Bayes factor of slopes as a function of their prior sd. As the
    sd goes to 0 the slopes' model becomes the one-slope model and the factor goes to 0 (its Laplace evidence,
    the slopes' own normalisation included, is consistent); with slopes 2, 0.5 and 1 (log-slope sd 0.57) it
    peaks about that spread, and the product's prior is left as it was."""
    from bayespass.models import shared as S

    mod = load_benchmark("slopes_loso")
    counts = _three_slopes_counts()
    saved = S._PRIOR["eta"]
    rows = mod.evidence_by_sd(counts, [1e-3, 0.05, 0.2, 0.5, 1.5, 4.0])
    assert S._PRIOR["eta"] == saved
    log_bf = np.array([b for _, b, _ in rows])
    assert abs(log_bf[0]) < 0.05, rows
    # rises steeply up to the true spread, then falls slowly (the Occam factor of a wider prior)
    assert np.argmax(log_bf) in (3, 4) and log_bf[3] > log_bf[2] + 3 and log_bf[3] > log_bf[5] + 1, rows
    assert rows[3][2] == pytest.approx(0.57, abs=0.15), rows  # the fitted log slopes' spread


def test_the_closed_form_slopes_sd_update_matches_the_scan_near_the_fitted_sd_and_not_far_below_it(load_benchmark):
    """benchmarks/slopes_loso.py --closed-form: the log evidence updated in closed form from the mode at the
    product's sd is that mode's there, within 0.2 nats of the exact scan (a mode search per sd) from sd 0.4 to 1.5,
    where the Laplace approximation at that mode still holds, and more than 2 nats off at sd 0.05 and below,
    where the one-slope limit sits far from that mode: the reason it cannot replace the scan."""
    from bayespass.models import shared as S

    mod = load_benchmark("slopes_loso")
    counts = _three_slopes_counts()
    sds = [1e-3, 0.05, 0.4, 0.5, 0.7, 1.5]
    exact = np.array([b for _, b, _ in mod.evidence_by_sd(counts, sds)])
    with_ = S.Shared().modes(counts)[0]
    closed = mod.closed_form_by_sd(with_, 3, sds) + exact[3]
    assert closed[3] == pytest.approx(exact[3], abs=1e-9)
    np.testing.assert_allclose(closed[2:], exact[2:], atol=0.2)
    assert np.all(np.abs(closed[:2] - exact[:2]) > 2), (closed, exact)
