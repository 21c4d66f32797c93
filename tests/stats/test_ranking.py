"""compare_configs: known truth (identical configs, a clearly better config, simulated calibration),
closed forms of the baselines, the leaderboard, plots and the CLI."""

import io
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import integrate, stats

import bayespass as bp
from bayespass.simulate import simulate_counts, true_passk
from bayespass.stats import ranking
from bayespass.stats.ranking import prob_better_table


def _counts(p, n, seed=0, names=None):
    return simulate_counts(p, n, seed=seed, **({} if names is None else {"model": names}))


@pytest.fixture(scope="module")
def three():
    g = np.random.default_rng(3)
    base = g.beta(2, 2, 120)
    p = np.stack([np.clip(base + 0.25, 0, 1), base, base * 0.5])
    counts = _counts(p, 8, seed=4, names=["strong", "mid", "weak"])
    return counts, bp.compare_configs(counts, k=(1, 5, 50), model="bb", method="eb")


def test_identical_configs_give_one_half():
    g = np.random.default_rng(0)
    c = g.binomial(6, g.beta(1, 1.5, 90))
    counts = bp.make_counts(np.full((2, 90), 6), np.stack([c, c]), config=["a", "b"])
    cmp = bp.compare_configs(counts, k=(1, 10), model="bb", method="eb")
    assert np.all(np.abs(cmp["diff"].sel(config="a", config_b="b")) < 0.005)  # same data: same posterior
    pb = cmp["prob_better"].sel(config="a", config_b="b").values
    assert np.all(np.abs(pb - 0.5) < 0.06)  # independent draws of one posterior: a coin
    assert np.all(np.abs(cmp["rank_prob"].sel(rank=1).values - 0.5) < 0.06)


@pytest.mark.parametrize("seed", [0, 1])
def test_identical_configs_give_one_half_under_the_default_joint_model(seed):
    """The default comparison (``shared``): two configs with the same counts get P(better) near 1/2 and the same
    band.  With five parameter draws per chain behind the pass@k draws, fits of these counts gave P(better)
    0.30-0.70 and lower ends of pass@10 0.18 apart, from the few draws each fit took."""
    g = np.random.default_rng(3)
    c = g.binomial(4, g.beta(1, 1, 100))
    cmp, _ = _as_narrow_as_one_config(np.stack([c, c]), 4, seed)
    pb = cmp["prob_better"].sel(config="a", config_b="b").values
    assert np.all(np.abs(pb - 0.5) < 0.06), pb
    band = cmp["passk_eti"].transpose("k", "ci_bound", "config").values
    width = band[:, 1] - band[:, 0]
    assert np.all(np.abs(band[:, :, 0] - band[:, :, 1]) < 0.25 * width.mean(-1)[:, None]), band


@pytest.mark.parametrize("tasks, n", [(100, 4), (164, 10)])
def test_a_near_copy_of_a_config_does_not_widen_the_bands(tasks, n):
    """A config and one that differs from it on a single task (a rerun after a flaky test was fixed, greedy decoding
    run twice).  The rule for identical counts did not apply, and the scores' outer product had almost no curvature
    along their difference: the pass@1 band came out 2.6x (n = 4) and 6.6x (n = 10) as wide as one config's, and
    the band of the difference 0.37 wide where independent samples of the same tasks give 0.04."""
    g = np.random.default_rng(1)
    c = g.binomial(n, g.beta(0.5, 0.5, tasks))
    other = c.copy()
    other[int(np.argmax((c > 0) & (c < n)))] -= 1
    cmp, one = _as_narrow_as_one_config(np.stack([c, other]), n, 0)
    d = cmp["diff_eti"].sel(config="a", config_b="b", k=1).values
    assert d[0] < 1 / (tasks * n) < d[1] and d[1] - d[0] < 2 * one, (d, one)  # independent configs: about 1.4x
    assert 0.5 <= cmp["prob_better"].sel(config="a", config_b="b", k=1) < 0.95


def _as_narrow_as_one_config(c, n, seed):
    """``compare_configs`` of counts ``c`` (configs a, b; n samples per task), checked: a's pass@1 band is as narrow
    as its own counts allow (the Laplace curvature along a - b is the observed one; before, for a copy: 0.43 wide,
    one config's bb band 0.07).  Returns the comparison and the width of a's own bb band of pass@1."""
    counts = bp.make_counts(np.full(c.shape, n), c, config=["a", "b"])
    cmp = bp.compare_configs(counts, k=(1, 10), seed=seed)
    assert cmp.attrs["model"] == "shared"
    width = cmp["passk_eti"].sel(k=1, config="a").values
    one = bp.passk_curve(bp.fit(counts.isel(config=[0]), "bb", "eb", progressbar=False), [1])["eti"].values.ravel()
    assert width[1] - width[0] < 1.5 * (one[1] - one[0]), (width, one)
    return cmp, one[1] - one[0]


def test_a_clearly_better_config_is_found_and_the_outputs_are_coherent(three):
    counts, cmp = three
    for kk in (1, 5):  # (at k = 50 both are near 1: not clearly apart)
        c = cmp.sel(k=kk)
        assert c["prob_better"].sel(config="strong", config_b="weak") > 0.99
        assert c["rank_prob"].sel(config="strong", rank=1) > 0.95
        assert c["rank_prob"].sel(config="weak", rank=3) > 0.99
    pb = cmp["prob_better"].transpose("config", "config_b", "k").values
    assert np.allclose(pb + pb.transpose(1, 0, 2), 1.0)  # ties count half: P(a>b) + P(b>a) = 1
    d = cmp["diff"].transpose("config", "config_b", "k").values
    assert np.allclose(d, -d.transpose(1, 0, 2))
    rp = cmp["rank_prob"]
    assert np.allclose(rp.sum("rank"), 1) and np.allclose(rp.sum("config"), 1)
    assert np.allclose((rp * rp["rank"]).sum("rank"), cmp["expected_rank"])
    band = cmp["diff_eti"].sel(config="strong", config_b="mid")
    assert (band.sel(ci_bound="lower") < cmp["diff"].sel(config="strong", config_b="mid")).all()


def test_baselines_match_closed_forms(three):
    counts, cmp = three
    naive = bp.passk(counts, [1, 5], method="unbiased")
    assert np.allclose(cmp["naive_passk"].sel(k=[1, 5]).transpose("config", "k"), naive.transpose("config", "k"))
    assert np.isnan(cmp["naive_passk"].sel(k=50)).all()  # n = 8 < 50: no unbiased estimate
    est = bp.passk(counts, [5], method="unbiased", per_task=True).sel(k=5).transpose("config", "task").values
    d = est[0] - est[2]
    assert np.isclose(cmp["paired_diff"].sel(config="strong", config_b="weak", k=5), d.mean())
    assert np.isclose(cmp["paired_se"].sel(config="strong", config_b="weak", k=5), d.std(ddof=1) / np.sqrt(d.size))
    # scorio-style: mean over tasks of E[1 - (1-p)^k] under Beta(1 + c, 1 + n - c), by quadrature
    n, c = counts.n.values[1], counts.c.values[1]
    quad = np.mean([integrate.quad(lambda p, a=1 + ci, b=1 + ni - ci: (1 - (1 - p) ** 5) * stats.beta.pdf(p, a, b),
                                   0, 1)[0] for ni, ci in zip(n, c, strict=True)])
    assert np.isclose(cmp["beta_passk"].sel(config="mid", k=5), quad, atol=1e-6)


def test_the_baselines_are_over_the_tasks_a_config_saw_and_the_paired_one_undefined_where_one_has_n_below_k():
    """As the naive estimate: a task where a config has 0 < n < k leaves the pair's paired difference undefined
    (it once averaged the other tasks, those that happened to have more samples); a task one config never ran
    is left out of that pair only."""
    g = np.random.default_rng(5)
    T = 60
    n = np.array([[10] * 40 + [50] * 20, [50] * T, [50] * 30 + [0] * 30])
    c = g.binomial(n, g.beta(1, 1, (3, T)))
    counts = bp.make_counts(n, c, config=["ragged", "full", "half"])
    with pytest.warns(UserWarning, match="not all evaluated on the same tasks"):
        cmp = bp.compare_configs(counts, k=(5, 20), model="bb", method="eb")
    est = bp.passk(counts, [5, 20], method="unbiased", per_task=True).transpose("config", "task", "k").values
    pd_ = cmp["paired_diff"].sel(config_b="full")
    # k = 5 <= every n: the mean over all tasks; k = 20: "ragged" has n = 10 on 40 tasks, so undefined
    assert np.isclose(pd_.sel(config="ragged", k=5), np.mean(est[0, :, 0] - est[1, :, 0]))
    assert np.isnan(pd_.sel(config="ragged", k=20)) and np.isnan(cmp["naive_passk"].sel(config="ragged", k=20))
    for var in ("paired_se", "paired_prob_better"):
        assert np.isnan(cmp[var].sel(config="ragged", config_b="full", k=20))
    # "half" ran 30 tasks, each with n = 50 >= 20: its pair with "full" is over those 30, at either k
    for j, kk in enumerate((5, 20)):
        d = est[2, :30, j] - est[1, :30, j]
        assert np.isclose(pd_.sel(config="half", k=kk), d.mean())
        assert np.isclose(cmp["paired_se"].sel(config="half", config_b="full", k=kk), d.std(ddof=1) / np.sqrt(30))
    # with "ragged" at k = 20: undefined (its short tasks include 10 of the 30 that "half" saw)
    assert np.isnan(cmp["paired_diff"].sel(config="half", config_b="ragged", k=20))
    # the scorio-style baseline is over a config's own tasks too, not a Beta(1, 1) guess (k / (k + 1)) for the others
    own = (1 + c[2, :30]) / (2 + n[2, :30])  # E[p] under Beta(1 + c, 1 + n - c): pass@1
    with pytest.warns(UserWarning, match="not all evaluated on the same tasks"):
        two = bp.compare_configs(counts.isel(config=[1, 2]), k=1, model="bb", method="eb")
    assert np.isclose(two["beta_passk"].sel(config="half", k=1), own.mean())


def test_pairs_restrict_and_bad_input_is_refused(three):
    counts, cmp = three
    sub = bp.compare_configs(counts, k=5, model="bb", method="eb", pairs=[("strong", "mid"), ("strong", "weak")])
    assert list(sub.config.values) == ["strong"] and list(sub.config_b.values) == ["mid", "weak"]
    assert np.isclose(sub["prob_better"].sel(config="strong", config_b="mid", k=5),
                      cmp["prob_better"].sel(config="strong", config_b="mid", k=5), atol=0.05)
    with pytest.raises(ValueError, match="'nope'"):
        bp.compare_configs(counts, k=5, model="bb", method="eb", pairs=[("strong", "nope")])
    # counts are checked against the pairs before they are fitted
    import bayespass.models.fit as fit_module

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the pairs were checked")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fit_module, "fit", no_fit)
        with pytest.raises(ValueError, match="'nope', which is not among the configs"):
            bp.compare_configs(counts, k=5, pairs=[("nope", "strong")])
    with pytest.raises(ValueError, match="at least two configs"):
        bp.compare_configs(counts.isel(config=[0]), k=5, model="bb", method="eb")
    with pytest.raises(TypeError, match="data must be"):
        bp.compare_configs([1, 2, 3], k=5)
    with pytest.raises(ValueError, match="ci_prob"):
        bp.compare_configs(counts, k=5, ci_prob=1.5)
    with pytest.raises(ValueError, match=r"two different configs; got \('mid', 'mid'\)"):
        bp.compare_configs(counts, k=5, pairs=[("mid", "mid")])


def test_tables_and_plots_name_what_they_were_given(three):
    """The leaderboard, the P(better) table and the plots check their comparison and its k before any work."""
    counts, cmp = three
    for f in (bp.leaderboard, prob_better_table, bp.plot_forest, bp.plot_prob_better):
        with pytest.raises(ValueError, match=r"k=7 is not in the comparison; it has k = \[1, 5, 50\]"):
            f(cmp, k=7)
        with pytest.raises(TypeError, match=f"{f.__name__} needs a comparison.*these are counts"):
            f(counts)
    with pytest.raises(TypeError, match="plot_diff_curve needs a comparison"):
        bp.plot_diff_curve(counts, "strong", "mid")
    with pytest.raises(ValueError, match="one value for plot_prob_better"):
        bp.plot_prob_better(cmp, k=[1, 5])
    assert list(bp.leaderboard(cmp, k=np.int64(5))["k"].unique()) == [5]  # a numpy k is a k


def test_extend_inferencedata(three):
    counts, _ = three
    idata = bp.fit(counts.drop_vars("p_true"), "bb", "eb", progressbar=False)
    cmp = bp.compare_configs(idata, k=5, extend_inferencedata=True)
    assert "config_comparison" in idata.groups()
    assert np.allclose(idata["config_comparison"]["prob_better"].values, cmp["prob_better"].values)
    with pytest.raises(TypeError, match="extend_inferencedata=True needs"):
        bp.compare_configs(counts, k=5, model="bb", method="eb", extend_inferencedata=True)


def test_leaderboard_and_pair_table(three):
    _, cmp = three
    lb = bp.leaderboard(cmp)
    assert list(lb[lb.k == 1].config) == ["strong", "mid", "weak"]
    assert (lb.rank_lo <= lb.expected_rank.round()).all() and (lb.expected_rank.round() <= lb.rank_hi).all()
    assert np.allclose(lb[["P(rank=1)", "P(rank=2)", "P(rank=3)"]].sum(axis=1), 1)
    assert np.allclose(lb.p_best, lb["P(rank=1)"])
    assert "P(rank=1)" not in bp.leaderboard(cmp, rank_probs=False)
    with pytest.raises(ValueError, match="k=7"):
        bp.leaderboard(cmp, k=7)
    tab = prob_better_table(cmp)
    assert len(tab) == 3 * 2 * 3 and (tab.config != tab.config_b).all()  # 3 configs: every pair by default


def test_tables_and_plots_order_configs_by_posterior_mean_not_expected_rank(three):
    """Where the expected rank and the posterior mean disagree (skewed posteriors), the mean orders."""
    import matplotlib.pyplot as plt

    _, cmp = three
    flipped = cmp.copy()
    flipped["expected_rank"] = 4 - cmp["expected_rank"]  # the expected ranks of strong and weak swapped
    lb = bp.leaderboard(flipped)
    for kk in (1, 5):
        assert list(lb[lb.k == kk].config) == ["strong", "mid", "weak"]
        assert list(lb[lb.k == kk].expected_rank) == sorted(lb[lb.k == kk].expected_rank, reverse=True)
    tab = prob_better_table(flipped, pairs="neighbours")
    assert list(tab[tab.k == 1].config) == ["strong", "mid"] and list(tab[tab.k == 1].config_b) == ["mid", "weak"]
    ax = bp.plot_prob_better(flipped, k=1)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["strong", "mid", "weak"]
    (ax,) = bp.plot_forest(flipped, k=1)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["weak", "mid", "strong"]  # best on top
    plt.close("all")
    tied = cmp.copy()
    tied["passk"] = xr.zeros_like(cmp["passk"])  # all means equal: the expected rank breaks the tie
    assert list(bp.leaderboard(tied)[lambda d: d.k == 1].config) == ["strong", "mid", "weak"]


def test_pair_table_lists_neighbours_in_the_ranking_above_four_configs():
    g = np.random.default_rng(8)
    base = g.beta(2, 2, 80)
    shift = [0.3, -0.1, 0.2, 0.0, -0.3, 0.1]  # ranking: c0, c2, c5, c3, c1, c4
    p = np.stack([np.clip(base + s, 0, 1) for s in shift])
    counts = _counts(p, 6, seed=5, names=[f"c{i}" for i in range(6)])
    cmp = bp.compare_configs(counts, k=(1, 10), model="bb", method="eb")
    tab = bp.prob_better_table(cmp)
    assert len(tab) == 2 * 5 and list(tab["rank"][:5]) == [1, 2, 3, 4, 5]
    for kk in (1, 10):
        order = [str(c) for c in cmp.config.values[np.argsort(-cmp["passk"].sel(k=kk).values)]]
        rows = tab[tab.k == kk]
        assert list(rows.config) == order[:-1] and list(rows.config_b) == order[1:]
        for r in rows.itertuples():  # the numbers of the comparison, not recomputed
            sel = cmp.sel(k=kk, config=r.config, config_b=r.config_b)
            assert r.prob_better == pytest.approx(float(sel["prob_better"]))
            assert (r.diff_lower, r.diff_upper) == pytest.approx(tuple(sel["diff_eti"].values))
            assert r.prob_better >= 0.5  # the better-ranked config first
    assert order[0] == "c0" and order[-1] == "c4"
    assert len(bp.prob_better_table(cmp, pairs="all")) == 2 * 6 * 5
    with pytest.raises(ValueError, match="pairs='every'"):
        bp.prob_better_table(cmp, pairs="every")
    sub = bp.compare_configs(counts, k=1, model="bb", method="eb", pairs=[("c0", "c1")])
    assert len(bp.prob_better_table(sub)) == 1
    with pytest.raises(ValueError, match="neighbours"):
        bp.prob_better_table(sub, pairs="neighbours")


def test_plots(three):
    import matplotlib.pyplot as plt

    _, cmp = three
    axes = bp.plot_forest(cmp)
    assert len(axes) == cmp.sizes["k"] and len({a.figure for a in axes}) == 1  # a panel per k, one figure
    first = cmp.isel(k=0)
    best_first = [str(x) for x in first.config.values[np.argsort(first["passk"].values)]]  # bottom to top
    assert [t.get_text() for t in axes[0].get_yticklabels()] == best_first
    for kk, ax in zip(cmp.k.values, axes, strict=True):
        assert list(ax.get_yticks()) == [0, 1, 2]
        lo, hi = ax.get_ylim()  # rows from the first to the last, a short margin each end (not 5% of all of them)
        assert -1 < lo < 0 and 2 < hi < 3
        c = cmp.sel(k=kk)  # each k on its own x axis: the bands fill the panel
        band_lo, band_hi = float(c["passk_eti"].min()), float(c["passk_eti"].max())
        x0, x1 = ax.get_xlim()
        assert x0 <= band_lo and band_hi <= x1 and x1 - x0 < 1.2 * (band_hi - band_lo)
        rows = {round(float(y)): (seg[0][0], seg[1][0]) for seg in ax.collections[0].get_segments()
                for y in [seg[0][1]]}  # each row's band is its config's at this k
        for y, name in enumerate(best_first):
            assert rows[y] == pytest.approx(tuple(c["passk_eti"].sel(config=name).values))
    with pytest.raises(ValueError, match="one Axes per k"):
        bp.plot_forest(cmp, ax=axes[0])
    ax2 = bp.plot_prob_better(cmp, k=5)
    assert ax2.images[0].get_array().shape == (3, 3)
    ax3 = bp.plot_diff_curve(cmp, "strong", "weak")
    assert len(ax3.lines) >= 2
    with pytest.raises(ValueError, match="'zzz'"):
        bp.plot_diff_curve(cmp, "zzz", "weak")
    plt.close("all")


@pytest.mark.slow
def test_prob_better_is_calibrated_in_simulation():
    """Configs close in ability, tasks of shared difficulty, m = 3: P(better) against the finite-task truth."""
    g = np.random.default_rng(11)
    preds, truth, covered = [], [], []
    for rep in range(30):
        d = g.normal(0, 1.6, 150)
        ability = g.normal(0, 0.12, 4)
        p = 1 / (1 + np.exp(-(d[None, :] + ability[:, None] + g.normal(0, 0.5, (4, 150)))))
        counts = _counts(p, 3, seed=rep)
        cmp = bp.compare_configs(counts, k=(1, 10), model="shared", method="eb", max_draws=250, seed=rep)
        tp = true_passk(p, [1, 10])
        off = ~np.eye(4, dtype=bool)
        for j, kk in enumerate((1, 10)):
            preds.append(cmp["prob_better"].sel(k=kk).values[off])
            truth.append((tp[:, None, j] > tp[None, :, j])[off])
            td = (tp[:, None, j] - tp[None, :, j])[off]
            band = cmp["diff_eti"].sel(k=kk).transpose("config", "config_b", "ci_bound").values[off]
            covered.append((band[:, 0] <= td) & (td <= band[:, 1]))
    p, y = np.concatenate(preds), np.concatenate(truth).astype(float)
    bins = np.clip((p * 5).astype(int), 0, 4)
    ece = sum((bins == b).mean() * abs(p[bins == b].mean() - y[bins == b].mean()) for b in range(5) if (bins == b).any())
    # measured: 0.060 with the joint model, 0.097 with independent bb fits (benchmarks/RESULTS.md); the
    # target is 0.05: the extremes are over-confident (predicted 0.92, true 0.84)
    assert ece < 0.09, ece
    assert np.concatenate(covered).mean() > 0.8  # the 90% band of the difference covers the finite-task truth
    decided = (p > 0.9) | (p < 0.1)
    assert ((p[decided] > 0.5) == y[decided].astype(bool)).mean() > 0.85


def test_cli_compare(tmp_path, three):
    counts, _ = three
    path = tmp_path / "counts.csv"
    bp.write_counts(counts.drop_vars("p_true"), path)
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "compare", str(path), "--model", "bb", "--method",
                          "eb", "--k", "1,5", "--plot", str(tmp_path / "cmp")], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "leaderboard (model bb; 90% bands" in res.stdout and "P(rank=1)" in res.stdout and "strong" in res.stdout
    for name in ("forest", "prob_better", "diff"):
        assert (tmp_path / f"cmp-{name}.png").stat().st_size > 5000
    svg = subprocess.run([sys.executable, "-m", "bayespass.cli", "compare", str(path), "--model", "bb", "--method",
                          "eb", "--k", "1,5", "--plot", str(tmp_path / "fig.svg")], capture_output=True, text=True,
                         timeout=600)  # a figure format's suffix: every file in it
    assert svg.returncode == 0, svg.stderr[-2000:]
    for name in ("forest", "prob_better", "diff"):
        assert (tmp_path / f"fig-{name}.svg").read_text().lstrip().startswith("<?xml")
    assert not list(tmp_path.glob("fig.svg*"))
    bad = subprocess.run([sys.executable, "-m", "bayespass.cli", "compare", str(path), "--pairs", "strong"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "--pairs" in bad.stderr


def test_pairs_of_one_fit_are_the_full_comparisons_entries(three):
    fit = bp.fit(three[0], "bb", "eb")
    full = bp.compare_configs(fit, k=(1, 5))
    sub = bp.compare_configs(fit, k=(1, 5), pairs=[("weak", "mid"), ("weak", "strong")])  # only that block computed
    for var in ("diff", "diff_eti", "prob_better", "paired_diff", "passk", "passk_eti", "expected_rank"):
        np.testing.assert_array_equal(sub[var].values, full[var].sel(config=["weak"], config_b=["mid", "strong"])
                                      .values if "config_b" in sub[var].dims else full[var].sel(config=["weak"])
                                      .values, err_msg=var)


def test_cli_compare_draws_the_difference_as_a_curve_over_k(tmp_path, three, monkeypatch):
    from typer.testing import CliRunner

    import bayespass.stats.ranking as ranking
    from bayespass.cli import app

    path = tmp_path / "counts.csv"
    bp.write_counts(three[0].drop_vars("p_true"), path)
    drawn = []
    real = ranking.plot_diff_curve
    monkeypatch.setattr(ranking, "plot_diff_curve", lambda cmp, a, b: (drawn.append((cmp, a, b)), real(cmp, a, b))[1])
    res = CliRunner().invoke(app, ["compare", str(path), "--model", "bb", "--method", "eb", "--k", "1,20",
                                   "--pairs", "mid:weak", "--plot", str(tmp_path / "cmp.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cmp-diff.png").exists() and not (tmp_path / "cmp.png-diff.png").exists()
    (cmp, a, b), = drawn
    assert (a, b) == ("mid", "weak") and {1, 20} < set(cmp.k.values.tolist()) and cmp.sizes["k"] >= 8
    assert cmp.k.max() == 20  # over the k asked for, not beyond


def test_configs_on_different_task_sets_are_warned_about(three):
    counts = three[0].copy(deep=True)
    counts["n"][2, :30] = 0  # "weak" ran 90 of the 120 tasks
    counts["c"][2, :30] = 0
    with pytest.warns(UserWarning, match=r"not all evaluated on the same tasks \('weak' on 90 of 120; 90 tasks"):
        bp.compare_configs(counts, k=(1,), model="bb", method="eb")
    common = counts.isel(task=(counts.n > 0).all("config").values)  # the fix the warning names
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cmp = bp.compare_configs(common, k=(1,), model="bb", method="eb")
    assert cmp.sizes["config"] == 3


def test_a_config_with_no_observed_task_is_left_out_of_the_comparison(three):
    """The joint model gave it pass@k 0 with a band of width 0 and the last rank with probability 1."""
    counts = three[0].copy(deep=True)
    counts["n"][2] = 0
    counts["c"][2] = 0
    left = str(counts.config.values[2])
    kept = [str(x) for x in counts.config.values[:2]]
    with pytest.warns(UserWarning, match=rf"config\(s\) \['{left}'\] have no observed task .*left out of the comparison"):
        cmp = bp.compare_configs(counts, k=(1, 10), progressbar=False)
    assert list(cmp.config.values) == kept and cmp.sizes["rank"] == 2
    with pytest.warns(UserWarning, match="no observed task"):  # the same from a fit as from counts
        fit = bp.fit(counts, "bb", "eb", progressbar=False)  # (its own FitWarning: pass@k NaN there)
        again = bp.compare_configs(fit, k=(1, 10))
    assert list(again.config.values) == kept
    np.testing.assert_allclose(again["rank_prob"].sum("rank"), 1.0)
    with pytest.warns(UserWarning, match="no observed task"), \
            pytest.raises(ValueError, match="at least two configs with observed tasks"):
        bp.compare_configs(counts.isel(config=[0, 2]), k=(1,), model="bb", method="eb")


def test_cli_compare_on_the_common_tasks(tmp_path, three):
    counts = three[0].drop_vars("p_true").copy(deep=True)
    counts["n"][2, :30] = 0  # "weak" ran 90 of the 120 tasks
    counts["c"][2, :30] = 0
    path = tmp_path / "counts.csv"
    bp.write_counts(counts, path)
    cli = [sys.executable, "-m", "bayespass.cli", "compare"]
    opts = ["--model", "bb", "--method", "eb", "--k", "1", "--format", "csv"]
    warned = subprocess.run([*cli, str(path), *opts], capture_output=True, text=True, timeout=600)
    assert warned.returncode == 0, warned.stderr[-2000:]
    assert "not all evaluated on the same tasks" in warned.stderr and "--common-tasks" in warned.stderr
    res = subprocess.run([*cli, str(path), *opts, "--common-tasks"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "--common-tasks: 90 of 120 tasks" in res.stderr and "not all evaluated" not in res.stderr
    # the same numbers as the API on the common tasks
    common = bp.compare_configs(counts.isel(task=slice(30, None)), k=(1,), model="bb", method="eb")
    board = pd.read_csv(io.StringIO(res.stdout.strip().split("\n\n")[0]))
    got = board.set_index("config")["passk"]
    want = common["passk"].sel(k=1).to_series()
    assert np.allclose(got.loc[want.index].values, want.values, atol=1e-4)
    fit = tmp_path / "fit.nc"
    assert subprocess.run([sys.executable, "-m", "bayespass.cli", "fit", str(path), "--model", "bb", "--out",
                           str(fit)], capture_output=True, timeout=600).returncode == 0
    bad = subprocess.run([*cli, str(fit), "--common-tasks"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "--common-tasks needs counts or a run directory" in bad.stderr


def test_cli_compare_fits_several_runs_or_counts_files_together(tmp_path, three):
    """Configs executed apart (a run per model, counts files from elsewhere) are compared on the union of tasks."""
    counts = three[0].drop_vars("p_true").copy(deep=True)
    counts["n"][2, :30] = 0  # "weak" was run on 90 of the 120 tasks, apart from the others
    counts["c"][2, :30] = 0
    a, b = tmp_path / "two.csv", tmp_path / "weak.csv"
    bp.write_counts(counts.isel(config=[0, 1]), a)
    bp.write_counts(counts.isel(config=[2], task=slice(30, None)), b)
    merged = bp.merge_counts([bp.read_counts(a), bp.read_counts(b)])
    assert list(merged.config.values) == ["strong", "mid", "weak"] and merged.sizes["task"] == 120
    for var in ("n", "c"):
        assert np.array_equal(merged[var].sel(task=counts.task).values, counts[var].values)
    cli = [sys.executable, "-m", "bayespass.cli", "compare"]
    opts = ["--model", "bb", "--method", "eb", "--k", "1", "--format", "csv"]
    res = subprocess.run([*cli, str(a), str(b), *opts], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    with pytest.warns(UserWarning, match="not all evaluated on the same tasks"):
        want = bp.compare_configs(counts, k=(1,), model="bb", method="eb")["passk"].sel(k=1).to_series()
    got = pd.read_csv(io.StringIO(res.stdout.strip().split("\n\n")[0])).set_index("config")["passk"]
    assert np.allclose(got.loc[want.index].values, want.values, atol=1e-4)
    res = subprocess.run([*cli, str(a), str(b), *opts, "--common-tasks"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "--common-tasks: 90 of 120 tasks" in res.stderr, res.stderr[-2000:]
    # one config from two inputs, or a fit among several: refused, naming them
    bad = subprocess.run([*cli, str(a), str(a), *opts], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and f"'{a}' and RUN_OR_COUNTS '{a}' both hold config 'strong'" in bad.stderr
    fit = tmp_path / "fit.nc"
    bp.fit(bp.read_counts(b), "bb", "eb", progressbar=False).to_netcdf(str(fit))
    bad = subprocess.run([*cli, str(a), str(fit), *opts], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "is a fit; several inputs must be run directories or counts files" in bad.stderr


def test_band_from_one_sample_per_task_holds_whatever_the_spread():
    """One sample per task: the joint model's band of pass@10 is its structure's guess; the band holds anyway.

    Equally hard tasks (p = 0.3 everywhere, pass@10 = 0.97) look, one sample each, like tasks that pass always
    or never (pass@10 = 0.3).  The joint model's own band sat near its spread of difficulties (on real MBPP
    it covered pass@10 in 16% of replicates); the band now reaches the identified set.
    """
    rng = np.random.default_rng(3)  # observed pass@1 0.293, 0.327
    t = 300
    p = np.vstack([np.full(t, 0.3), np.full(t, 0.35)])
    counts = bp.make_counts(np.ones((2, t), int), rng.binomial(1, p))
    cmp = bp.compare_configs(counts, k=(1, 10), model="shared", method="eb")
    truth = true_passk(p, [1, 10])  # (config, k)
    band = cmp["passk_eti"].transpose("config", "k", "ci_bound").values
    assert np.all((band[..., 0] <= truth) & (truth <= band[..., 1])), (band, truth)
    # two samples per task identify the spread: the model's band, not the identified set (whose top is
    # 1 - (1 - 0.33)^10 = 0.98 here)
    two = bp.make_counts(np.full((2, t), 2), rng.binomial(2, p))
    with bp.rc_context({"stats.model": "hier"}):  # the joint model's band alone (pass@10 is beyond 2 samples,
        cmp_two = bp.compare_configs(two, k=(10,), model="shared", method="eb")  # where the default's is joined)
    top = cmp_two["passk_eti"].sel(ci_bound="upper").values
    assert np.all(top < 0.99) and np.all(np.abs(top - true_passk(p, [10])[:, 0]) < 0.1), top
    # P(better)'s table says what one sample per task leaves P(better) at k > 1 resting on; not at k = 1, nor
    # from two samples per task
    assert cmp.attrs["single_sample_configs"] == 2 and cmp_two.attrs["single_sample_configs"] == 0
    said = "Every config has one sample on most of its tasks"
    assert said in prob_better_table(cmp, k=[1, 10]).note and "erred towards 0.5" in prob_better_table(cmp).note
    assert said not in prob_better_table(cmp, k=[1]).note
    assert said not in prob_better_table(cmp_two, k=[10]).note
    # nor where some compared config has more, also when pairs= picks only one-sample ones
    mixed = bp.make_counts(np.vstack([np.ones((2, t), int), np.full((1, t), 3)]),
                           np.vstack([counts.c.values, rng.binomial(3, p[:1])]), config=["a", "b", "m"])
    with warnings.catch_warnings():  # bb on one sample per task, and configs of unequal samples: both warned
        warnings.simplefilter("ignore")
        cmp_mixed = bp.compare_configs(mixed, k=(1, 10), model="bb", method="eb", pairs=[("a", "b")])
    assert cmp_mixed.attrs["single_sample_configs"] == 2 and said not in prob_better_table(cmp_mixed).note


def test_the_joint_models_band_beyond_the_samples_holds_the_per_config_fits_band():
    """Beyond the samples drawn the joint model's band is its structure's guess (on real MBPP it covered pass@50
    from 5 samples per task in 81% of replicates); the leaderboard's band there is the hull of it and the
    default per-config fit's band, and within the samples it is the joint model's own."""
    from bayespass.simulate import true_passk

    g = np.random.default_rng(11)
    t = 200
    kind = g.random(t)  # structural zeros, a cloud of tiny p, the rest spread: what fools a Beta's shape
    base = np.where(kind < 0.3, 0.0, np.where(kind < 0.5, g.uniform(1e-3, 1e-2, t), g.beta(2, 2, t)))
    p = np.stack([base, np.clip(base * 1.1, 0, 1), base * 0.8])
    counts = bp.make_counts(np.full((3, t), 4), g.binomial(4, p), config=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint = bp.fit(counts, "shared", "eb", seed=0, progressbar=False)
        auto = bp.fit(counts, "auto", "eb", seed=0, progressbar=False)
    k = (1, 4, 50, 200)
    cmp = bp.compare_configs(joint, k=k, band_fit=auto)
    with bp.rc_context({"stats.model": "hier"}):  # a joint default: nothing per-config to join
        own = bp.compare_configs(joint, k=k)
    assert cmp.attrs["band_beyond_samples"] == "auto" and own.attrs["band_beyond_samples"] == ""
    band, mine = (x["passk_eti"].transpose("config", "k", "ci_bound").values for x in (cmp, own))
    theirs = bp.passk_curve(auto, k=k, ci_prob=cmp.attrs["ci_prob"])["eti"].transpose("config", "k", "ci_bound")
    np.testing.assert_array_equal(band[:, :1], mine[:, :1])  # k = 1: the joint model's band (n >= 2k)
    # k = 4 = n (past half the samples: no unbiased variance) and beyond them: the hull of the two
    hull_lo = np.concatenate([mine[:, :1, 0], np.minimum(mine[:, 1:, 0], theirs.values[:, 1:, 0])], axis=1)
    # the hull's lower bound, never below a lower bound at a smaller k (pass@k does not decrease in k)
    np.testing.assert_allclose(band[:, 1:, 0], np.maximum.accumulate(hull_lo, axis=1)[:, 1:])
    assert (np.diff(band[..., 0], axis=1) >= 0).all() and (np.diff(band[..., 1], axis=1) >= 0).all()
    np.testing.assert_allclose(band[:, 1:, 1], np.maximum(mine[:, 1:, 1], theirs.values[:, 1:, 1]))
    np.testing.assert_array_equal(cmp["passk"], own["passk"])  # the means, P(better), ranks: the joint model's
    np.testing.assert_array_equal(cmp["prob_better"], own["prob_better"])
    truth = true_passk(p, list(k))
    inside = (band[..., 0] <= truth) & (truth <= band[..., 1])
    assert inside[:, 2:].all(), (band, truth)
    assert not ((mine[1, 3, 0] <= truth[1, 3]) & (truth[1, 3] <= mine[1, 3, 1]))  # the joint band alone missed
    note = bp.leaderboard(cmp).note
    assert "Beyond the samples drawn (and past half of them, k >= 2) a band also holds the per-config fit's (auto)" \
        in note
    assert "the point there stays the joint model's, which orders the configs (auto's own mean" in note
    # band_fit: a per-config fit of the same counts
    with pytest.raises(ValueError, match="band_fit must be a per-config fit .*; got model 'shared'"):
        bp.compare_configs(joint, k=k, band_fit=joint)
    other = counts.copy(data={"n": counts.n, "c": counts.c.where(counts.task != counts.task[0], counts.n)})
    assert (other.c != counts.c).any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = bp.fit(other, "bb", "eb", seed=0, progressbar=False)
    with pytest.raises(ValueError, match="band_fit must be a fit of the same counts as the comparison; its n or c"):
        bp.compare_configs(joint, k=k, band_fit=wrong)
    # counts fitted here: the default per-config fit is made here, and joined the same way
    fitted_here = bp.compare_configs(counts, k=k, seed=0)
    assert fitted_here.attrs["band_beyond_samples"] == "auto"


def test_the_joined_band_never_says_pass_at_k_could_fall_below_a_smaller_ks_lower_bound():
    """bayespass run on two real MBPP configs (10 samples per task) printed gpt-4o's pass@10 band from 0.805
    (the joint model's, within the samples) and its pass@50 band from 0.800 (the hull, beyond them). A lower
    bound holds at every larger k, so each is raised to the largest at a smaller k; NaN stays NaN, k in any
    order."""
    from bayespass.stats.curve import monotone_band

    k = [50, 1, 10, 100]
    lo = np.array([[0.800, 0.70, 0.805, 0.79], [np.nan, 0.5, 0.6, 0.65]])
    hi = np.array([[0.95, 0.73, 0.85, 0.97], [0.9, 0.55, 0.7, 0.95]])
    band = xr.DataArray(np.stack([lo, hi], -1), dims=("config", "k", "ci_bound"),
                        coords={"config": ["a", "b"], "k": k, "ci_bound": ["lower", "upper"]})
    out = monotone_band(band)
    np.testing.assert_array_equal(out.sel(ci_bound="lower").values, [[0.805, 0.70, 0.805, 0.805],
                                                                     [np.nan, 0.5, 0.6, 0.65]])
    xr.testing.assert_equal(out.sel(ci_bound="upper"), band.sel(ci_bound="upper"))


def test_cli_compare_fits_the_band_partner_once_and_says_so(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import bayespass.stats.ranking as ranking
    from bayespass.cli import app

    g = np.random.default_rng(2)
    p = np.stack([g.beta(1, 1, 120), g.beta(1, 2, 120)])
    path = tmp_path / "counts.csv"
    bp.write_counts(bp.make_counts(np.full((2, 120), 3), g.binomial(3, p), config=["a", "b"]), path)
    made = []
    real = ranking.default_band_fit
    bars = []  # the fit shows its bar (after 2 s; on 34 real configs it takes half a minute)
    import bayespass.models.fit as fit_mod

    monkeypatch.setattr(fit_mod, "EB_BAR_DELAY", 0.0)
    monkeypatch.setattr(ranking, "default_band_fit",
                        lambda *a, **kw: bars.append(kw.get("progressbar")) or made.append(real(*a, **kw)) or made[-1])
    res = CliRunner().invoke(app, ["compare", str(path), "--k", "1,30", "--plot", str(tmp_path / "cmp.png")])
    assert res.exit_code == 0, res.output
    assert len(made) == 1 and made[0] is not None  # made once, for the tables and the difference curve alike
    assert "bands past half the samples drawn also hold the auto fit's (EB)" in res.output
    assert bars == [True] and "model auto by eb" in res.output  # shown as a slow fit's is (no 2 s delay here)
    said = " ".join(res.output.split())
    assert "Beyond the samples drawn (and past half of them, k >= 2) a band also holds the per" in said
    assert "fit's (auto)" in said
    res = CliRunner().invoke(app, ["compare", str(path), "--k", "1"])  # within half the samples: nothing to join
    assert res.exit_code == 0 and "also hold" not in res.output and all(x is None for x in made[1:])
    res = CliRunner().invoke(app, ["compare", str(path), "--k", "1,3"])  # pass@3 from 3 samples: joined
    assert res.exit_code == 0 and "also hold" in res.output and made[-1] is not None


def test_the_leaderboards_band_holds_the_unbiased_band_where_every_task_has_2k_samples():
    """As the default per-config fit's band: within the samples drawn (2k <= n on every task) the leaderboard's
    band holds the normal band of the unbiased pass@k, which needs no prior; the joint model's shape (half the
    tasks at p = 0.05, half at 0.95) does not decide it there. P(better) and the means stay the model's."""
    from bayespass.stats.curve import unbiased_band
    from bayespass.stats.kernels import unbiased_passk_moments

    g = np.random.default_rng(8)
    t = 200
    p = np.stack([np.where(np.arange(t) % 2 == 0, 0.05, 0.95), np.where(np.arange(t) % 2 == 0, 0.04, 0.93)])
    counts = bp.make_counts(np.full((2, t), 10), g.binomial(10, p), config=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint = bp.fit(counts, "shared", "eb", seed=0, progressbar=False)
    k = (1, 2, 5, 10)
    cmp = bp.compare_configs(joint, k=k)
    with bp.rc_context({"stats.unbiased_band": False}):
        before = bp.compare_configs(joint, k=k)
    band, old = (x["passk_eti"].transpose("config", "k", "ci_bound").values for x in (cmp, before))
    u, v = unbiased_passk_moments(counts["n"].values, counts["c"].values, list(k))
    data = unbiased_band(xr.DataArray(u, dims=("config", "k")), xr.DataArray(v, dims=("config", "k")), 0.9).values
    assert np.isnan(data[:, 3]).all()  # k = 10: no task has 20 samples
    assert (band[:, :3, 0] <= data[:, :3, 0] + 1e-12).all() and (band[:, :3, 1] >= data[:, :3, 1] - 1e-12).all()
    assert not ((old[:, :3, 0] <= data[:, :3, 0] + 1e-12) & (old[:, :3, 1] >= data[:, :3, 1] - 1e-12)).all()
    np.testing.assert_array_equal(band[:, 3], old[:, 3])
    np.testing.assert_array_equal(cmp["prob_better"], before["prob_better"])
    np.testing.assert_array_equal(cmp["passk"], before["passk"])


def test_configs_of_benchmarks_that_share_task_names_are_warned_about():
    """HumanEval and HumanEval+ name their tasks alike: a config on each was ranked against the other without a
    word (the task-set warnings see one set of tasks), though HumanEval+'s version of a task is harder."""
    import warnings

    g = np.random.default_rng(4)
    p = g.beta(0.6, 0.4, 60)
    n = np.full((3, 60), 10)
    c = g.binomial(n, np.stack([p, 0.9 * p, p]))
    tasks = [f"HumanEval/{i}" for i in range(60)]
    mixed = bp.make_counts(n, c, model=["a", "b", "c"], temperature=[0.8] * 3,
                           benchmark=["humaneval", "humaneval+", "humaneval"], task=tasks)
    with pytest.warns(UserWarning, match=r"the configs come from different benchmarks that name tasks alike \(configs "
                                         r"per benchmark: humaneval: 2, humaneval\+: 1\).*bayespass compare "
                                         r"--benchmark NAME"):
        bp.compare_configs(mixed, k=1, model="bb", method="eb")
    one = mixed.assign_coords(benchmark=("config", ["humaneval"] * 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bp.compare_configs(one, k=1, model="bb", method="eb")  # one benchmark: no warning
    n2, c2 = np.zeros((3, 120), int), np.zeros((3, 120), int)
    n2[[0, 2], :60], c2[[0, 2], :60] = n[[0, 2]], c[[0, 2]]
    n2[1, 60:], c2[1, 60:] = n[1], c[1]  # the humaneval+ config on tasks of other names
    apart = bp.make_counts(n2, c2, model=["a", "b", "c"], temperature=[0.8] * 3,
                           benchmark=["humaneval", "humaneval+", "humaneval"], task=tasks + [f"U/{i}" for i in range(60)])
    with pytest.warns(UserWarning) as caught:  # no task in common: the groups' warning says it, not this one
        bp.compare_configs(apart, k=1, model="bb", method="eb")
    said = [str(w.message) for w in caught]
    assert any("groups with no task in common" in m for m in said) and not any("name tasks alike" in m for m in said)


def test_configs_of_two_benchmarks_are_named_as_groups_and_compare_benchmark_keeps_one(tmp_path):
    """Configs with no task in common (two benchmarks in one counts file) get a warning that names the groups, and
    'compare --benchmark' compares one benchmark's configs on its tasks, as the API on those counts does."""
    g = np.random.default_rng(3)
    n = np.zeros((4, 70), int)
    n[:2, :30], n[2:, 30:] = 10, 10  # a, b on humaneval's 30 tasks; a, b on mbpp's 40
    c = g.binomial(n, g.beta(1, 1, (4, 70)))
    counts = bp.make_counts(n, c, model=["a", "b", "a", "b"], temperature=[0.8] * 4,
                            benchmark=["humaneval", "humaneval", "mbpp", "mbpp"],
                            task=[f"humaneval/{i}" for i in range(30)] + [f"mbpp/{i}" for i in range(40)])
    with pytest.warns(UserWarning, match=r"2 groups with no task in common \(\{'a\|T=0.8\|humaneval', "
                      r"'b\|T=0.8\|humaneval'\}; \{'a\|T=0.8\|mbpp', 'b\|T=0.8\|mbpp'\}\)") as caught:
        bp.compare_configs(counts, k=1, model="bb", method="eb")
    assert not any("not all evaluated" in str(w.message) for w in caught)
    # three configs joined by shared tasks are one group: the general warning, not this one
    assert [len(x) for x in ranking._task_groups(np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0]]) > 0)] \
        == [3, 1]
    path = tmp_path / "counts.csv"
    bp.write_counts(counts, path)
    cli = [sys.executable, "-m", "bayespass.cli", "compare", str(path), "--model", "bb", "--method", "eb", "--k", "1",
           "--format", "csv"]
    res = subprocess.run([*cli, "--benchmark", "mbpp"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "groups" not in res.stderr and "not all evaluated" not in res.stderr
    board = pd.read_csv(io.StringIO(res.stdout.split("\n\n")[0])).set_index("config")
    want = bp.compare_configs(counts.isel(config=[2, 3], task=slice(30, None)), k=1, model="bb", method="eb")
    assert list(board.index) != [] and set(board.index) == {"a|T=0.8|mbpp", "b|T=0.8|mbpp"}
    assert np.allclose(board.loc[list(want.config.values), "passk"], want["passk"].sel(k=1).values, atol=1e-4)
    for opts, said in ((["--benchmark", "nope"], "'nope' is not a benchmark of"),
                       (["--common-tasks"], "its configs come from the benchmarks ['humaneval', 'mbpp']")):
        bad = subprocess.run([*cli, *opts], capture_output=True, text=True, timeout=600)
        assert bad.returncode != 0 and said in bad.stderr, bad.stderr[-2000:]
