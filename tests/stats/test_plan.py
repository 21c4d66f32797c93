"""plan(): the band width it predicts for more samples per task is what drawing them gives."""

import re
import warnings

import numpy as np
import pytest
import xarray as xr

import bayespass as bp
from bayespass.models.base import get_model
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
    pl = bp.plan(fit, k=10, target_width=0.06, n_grid=[3, 8, 20], n_sims=12, seed=3)  # 4 futures: 0.049 +- 0.006 at n = 8
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
    with pytest.raises(ValueError, match="seed must be a non-negative integer; got -1"):  # before any refit
        bp.plan(fit, k=10, target_width=0.1, seed=-1)
    for bad in (True, float("nan"), "0.1"):
        with pytest.raises(ValueError, match="target_width must be in"):
            bp.plan(fit, k=10, target_width=bad)
    # a numpy number is a number
    assert bp.plan(fit, k=1, target_width=np.float32(0.5), n_grid=[3], n_sims=1, progressbar=False
                   ).attrs["target_width"] == 0.5


def test_a_band_already_narrow_enough_is_not_simulated(monkeypatch, tmp_path):
    g = np.random.default_rng(4)
    counts = simulate_counts(g.beta(1, 1, (2, 40)), 6, seed=2, model=["a", "b"]).drop_vars("p_true")
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    now = bp.passk_curve(fit, [1])["eti"].sel(k=1).diff("ci_bound").values.ravel()
    refits = []
    monkeypatch.setattr("bayespass.models.fit.fit", lambda *a, **kw: refits.append(1))
    pl = bp.plan(fit, k=1, target_width=float(now.max()) * 1.01, progressbar=False)
    assert not refits and not pl.attrs["simulated"] and pl.attrs["n_sims"] == 0
    assert pl["reached"].values.all() and (pl["n_needed"].values == 6).all()
    assert np.allclose(pl["current_width"].values, now) and pl.sizes["n"] == 1
    # one config narrow enough, the other not: simulated, the first needs what it has
    fit_b = bp.fit(counts, "bb", "eb", progressbar=False)
    monkeypatch.undo()
    pl = bp.plan(fit_b, k=1, target_width=float(now.min() + now.max()) / 2, n_grid=[6, 12], n_sims=1,
                 progressbar=False)
    first = int(np.argmin(now))
    assert pl.attrs["simulated"] and pl["reached"].values.tolist() == [i == first for i in range(2)]
    assert pl["n_needed"].values[first] == 6
    # the command line says so in words
    from typer.testing import CliRunner

    from bayespass.cli import app

    fit.to_netcdf(str(tmp_path / "fit.nc"))
    res = CliRunner().invoke(app, ["plan", str(tmp_path / "fit.nc"), "--k", "1", "--width", "0.9"])
    assert res.exit_code == 0 and "no more samples needed" in res.output and "nothing was simulated" in res.output


def test_plan_and_allocate_of_a_joint_fit_without_task_draws_say_so_before_any_work(capsys):
    """'hier' cannot draw its tasks' p given the others' counts: refused before any work ('shared' can: below)."""
    n = np.full((2, 30), 3)
    counts = bp.make_counts(n, np.random.default_rng(0).binomial(n, 0.4))
    fit = bp.fit(counts, "shared", "eb", progressbar=False)
    fit.posterior.attrs["bayespass_model"] = "hier"
    for call, what in ((lambda: bp.plan(fit, k=10, target_width=0.1, progressbar=True), "plan"),
                       (lambda: bp.allocate(fit, k=10, budget=5), "allocate")):
        with pytest.raises(ValueError, match=f"{what}\\(\\) supports the per-config models, their stack and 'shared'; "
                                             "model 'hier' is joint: fit the counts"):
            call()
    assert "refits" not in capsys.readouterr().err  # no progress bar was started


def _shared_fit(seed=0, tasks=60):
    """Two configs on shared tasks: A with 2 samples per task, B with 12; one unseen task."""
    g = np.random.default_rng(seed)
    x = g.normal(0, 1.5, tasks)
    p = 1 / (1 + np.exp(-(np.array([0.5, 0.0])[:, None] - x[None, :])))
    n = np.vstack([np.full(tasks, 2), np.full(tasks, 12)])
    n[:, -1] = 0
    counts = bp.make_counts(n, g.binomial(n, p), config=["A", "B"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return counts, bp.fit(counts, "shared", "eb", progressbar=False, seed=seed)


def _shared_task_posterior(fit, j, k):
    """At the fit's first draw: each task's exact posterior mean of p_j and of pass@k_j, by quadrature over the
    difficulty grid (the Beta integrated in closed form at each node)."""
    from scipy.special import logsumexp

    from bayespass.models import shared as S
    from bayespass.stats.kernels import passk_bb_predictive

    post = fit.posterior.isel(chain=[0], draw=[0])
    alpha, phi, beta, slope = (x[0, 0] for x in S.Shared._params(post))
    n = fit.constant_data["n"].transpose("config", "task").values.astype(float)
    c = fit.observed_data["c"].transpose("config", "task").values.astype(float)
    x = np.linspace(S.KNOTS[0], S.KNOTS[-1], 4001)
    mu = 1 / (1 + np.exp(-np.clip(alpha[:, None] - slope[:, None] * x[None, :], -30, 30)))  # (J, G)
    a, b = mu * phi[:, None], (1 - mu) * phi[:, None]
    from bayespass.stats.kernels import bb_loglik

    ll = np.where(n[:, :, None] > 0, bb_loglik(a[:, None, :], b[:, None, :], n[:, :, None], c[:, :, None]), 0.0)
    s = ll.sum(0) + S._log_g(beta, S._hat(x))[None, :]  # (T, G)
    w = np.exp(s - logsumexp(s, axis=1, keepdims=True))
    mean_p = (w * (a[j] + c[j][:, None]) / (phi[j] + n[j][:, None])).sum(1)
    q = passk_bb_predictive(n[j][:, None, None], c[j][:, None, None], np.array([k]), a[j][None, :, None],
                            b[j][None, :, None])[..., 0]  # (T, G)
    return post, n, c, mean_p, (w * q).sum(1)


def test_shared_task_candidates_are_each_task_s_posterior_given_every_count():
    """'shared' draws a config's p per task given the other configs' counts; weighed by its own counts, the
    candidates' mean of p and of pass@10 is the exact posterior mean (quadrature over the difficulty) at that draw."""
    from bayespass.stats.plan import _weights_on

    _, fit = _shared_fit()
    model = get_model("shared")
    for j in (0, 1):
        post, n, c, mean_p, mean_q = _shared_task_posterior(fit, j, 10)
        cand = model.task_candidates(post, n, c, j, np.random.default_rng(1), n_draws=1, pool=40_000)
        w = _weights_on(cand, n[j], c[j])
        assert cand.shape == (60, 40_000)
        np.testing.assert_allclose((w * cand).sum(1), mean_p, atol=0.01)
        np.testing.assert_allclose((w * (1 - (1 - cand) ** 10)).sum(1), mean_q, atol=0.01)


def test_shared_posterior_p_draws_each_task_s_p_from_its_posterior():
    """plan's simulated futures of a 'shared' fit: p per (config, task) from its posterior at a draw; over many
    draws the mean is the exact posterior mean by quadrature, and the two configs' p are tied by the task."""
    _, fit = _shared_fit()
    model = get_model("shared")
    post, n, c, mean_a, _ = _shared_task_posterior(fit, 0, 1)
    mean_b = _shared_task_posterior(fit, 1, 1)[3]
    rng = np.random.default_rng(2)
    draws = np.stack([model.posterior_p(post, n, c, rng) for _ in range(1500)])  # (draw, config, task)
    np.testing.assert_allclose(draws[:, 0].mean(0), mean_a, atol=0.035)
    np.testing.assert_allclose(draws[:, 1].mean(0), mean_b, atol=0.035)
    # the unseen task's difficulty is g's: A's and B's p there rise and fall together
    assert np.corrcoef(draws[:, 0, -1], draws[:, 1, -1])[0, 1] > 0.5


def test_allocate_and_plan_of_a_shared_fit():
    """allocate() of a 'shared' fit sends a pair's samples to the config whose band is wider (2 samples per task
    against 12), never to the unseen task; plan() refits its futures with 'shared'."""
    counts, fit = _shared_fit()
    a = bp.allocate(fit, k=10, budget=60, pair=("A", "B"), seed=1)
    more = a.n_more.transpose("config", "task").values
    assert more.sum() == 60 and more[0].sum() > 3 * more[1].sum() and more[:, -1].sum() == 0
    assert 0 < a.attrs["expected_variance_reduction"] < a.attrs["task_variance"]
    pl = bp.plan(fit, k=10, target_width=0.05, n_grid=[2, 12], n_sims=2, progressbar=False)
    assert pl.attrs["model"] == "shared"
    width = pl.expected_width.sel(config="A").values
    assert width[1] < width[0]  # A from 2 to 12 samples per task: a narrower band
def test_plan_refits_futures_with_the_model_and_candidates_the_fit_was_made_with(monkeypatch):
    """A Flex(K=8) fit was refitted as the default flex, and a stack of bb and zoibb with all four candidates."""
    from bayespass.models import fit as fit_module
    from bayespass.models.flex import Flex

    counts = simulate_counts(np.full(40, 0.4), 3, seed=0)
    own = Flex(K=8)
    with bp.rc_context({"eb.draws": 100, "eb.warmup": 100}):
        fits = [bp.fit(counts, own, "eb", progressbar=False),
                bp.fit(counts, candidates=["bb", "zoibb"], progressbar=False)]
    real, seen = fit_module.fit, []

    def recording(counts, model=None, method=None, **kw):
        seen.append((model, kw.get("candidates")))
        with bp.rc_context({"eb.draws": 100, "eb.warmup": 100}):
            return real(counts, model, method, **kw)

    monkeypatch.setattr(fit_module, "fit", recording)
    for f in fits:
        bp.plan(f, k=10, target_width=0.1, n_grid=[3], n_sims=1, progressbar=False)
    (m0, c0), (m1, c1) = seen
    assert m0.settings == own.settings and c0 is None
    assert m1 == "auto" and c1 == ["bb", "zoibb"]
    with pytest.raises(ValueError, match="plan\\(\\) refits a stack .*settings of their own"):
        bp.plan(bp.stack({"mine": fits[0], "bb": bp.fit(counts, "bb", progressbar=False)}), k=10, target_width=0.1)


def test_a_future_s_counts_at_a_larger_n_extend_those_at_a_smaller_one(monkeypatch):
    """Each simulated future is one sequence of samples per task cut at every n, refitted with one seed.

    With independent futures per n, the mean width over a few simulations was not monotone in n (real MBPP,
    5 futures: 0.0851 at n = 15, 0.0858 at n = 20). Nested futures differ across n by the samples added only.
    """
    from bayespass.models import fit as fit_module

    counts = simulate_counts(np.random.default_rng(0).beta(0.5, 0.5, 60), 3, seed=0).drop_vars("p_true")
    n_now = counts.n.values.copy()
    n_now[0, :5] = 0  # tasks without samples stay without
    counts = counts.copy(data={"n": n_now, "c": np.minimum(counts.c.values, n_now)})
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    real, seen = fit_module.fit, []

    def recording(counts, model=None, method=None, **kw):
        seen.append((counts.n.values.copy(), counts.c.values.copy(), kw["seed"]))
        return real(counts, model, method, **kw)

    monkeypatch.setattr(fit_module, "fit", recording)
    grid = [2, 5, 12, 30]
    pl = bp.plan(fit, k=10, target_width=0.01, n_grid=grid, n_sims=3, seed=1, progressbar=False)
    assert len(seen) == 3 * len(grid)
    for s in range(3):
        future = seen[s * len(grid):(s + 1) * len(grid)]
        assert len({seed for *_, seed in future}) == 1  # one seed per future
        for (n0, c0, _), (n1, c1, _) in zip(future[:-1], future[1:], strict=True):
            assert (n1 >= n0).all() and (c1 >= c0).all() and (c1 - c0 <= n1 - n0).all()
        np.testing.assert_array_equal(future[0][1], counts.c.values)  # n = 2 < 3 adds nothing
        np.testing.assert_array_equal(future[-1][0][0, :5], 0)
    assert len({seed for *_, seed in seen}) == 3  # the futures differ
    w = pl["expected_width"].values[0]
    assert (np.diff(w[1:]) < 0).all(), w  # more samples, narrower, with 3 futures


def test_the_default_candidates_cover_configs_drawn_with_fewer_samples():
    """Configs with 4 and 20 samples per task: multiples of 20 alone planned 20 samples for the 4-sample config
    wherever 4 were not enough. The default tries multiples of each end's samples, so that config's n needed
    can be 6 or 8; with one n for every config it is the grid it always was."""
    from bayespass.stats.plan import default_n_grid

    assert list(default_n_grid(np.array([[5, 5, 0], [5, 3, 5]]))) == [5, 8, 10, 15, 25, 40]
    assert list(default_n_grid(np.array([[4, 4], [12, 12], [20, 0]]))) == [4, 6, 8, 12, 20, 30, 32, 40, 60, 100,
                                                                             160]
    g = np.random.default_rng(4)
    p = g.beta(2, 1, (2, 150))
    n = np.stack([np.full(150, 4), np.full(150, 20)])
    counts = bp.make_counts(n, g.binomial(n, p), config=["four", "twenty"])
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    width_now = float(np.diff(bp.passk_curve(fit, k=[2])["eti"].sel(config="four").values).item())
    pl = bp.plan(fit, k=2, target_width=0.8 * width_now, n_sims=2, seed=0, progressbar=False)
    assert {4, 6, 8, 12} <= set(pl.n.values.tolist())
    four = pl.sel(config="four")
    assert not bool(four["reached"]) and float(four["n_needed"]) < 20, four  # 20 was the smallest it could say
    np.testing.assert_allclose(four["expected_width"].sel(n=4), width_now, rtol=0.15)  # n = 4: today's samples


def test_plan_shows_its_progress_over_the_refits(capsys):
    counts = simulate_counts(np.full(30, 0.4), 3, seed=0)
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    bp.plan(fit, k=10, target_width=0.1, n_grid=[3, 6], n_sims=2, progressbar=True)
    err = capsys.readouterr().err
    assert "plan: refits of simulated futures (bb)" in err and "4/4" in err
    bp.plan(fit, k=10, target_width=0.1, n_grid=[3, 6], n_sims=2, progressbar=False)
    assert "plan:" not in capsys.readouterr().err


def test_variance_reduction_matches_brute_force_bayes():
    """The preposterior variance reduction equals enumerating outcomes and applying Bayes' rule by hand."""
    from scipy.stats import binom

    from bayespass.stats.plan import _variance_reduction

    cand = np.array([0.0, 0.01, 0.2, 0.5, 0.9, 1.0])
    w = np.array([[0.3, 0.1, 0.2, 0.2, 0.1, 0.1], [0.0, 0.0, 0.0, 0.0, 0.5, 0.5]])
    k, m = 7, 3
    f = 1 - (1 - cand) ** k
    for t in range(2):
        prior_mean = (w[t] * f).sum()
        expected = 0.0
        for y in range(m + 1):
            like = binom.pmf(y, m, cand)
            p_y = (w[t] * like).sum()
            if p_y > 0:
                post = w[t] * like / p_y
                expected += p_y * ((post * f).sum() - prior_mean) ** 2
        # equals the prior variance minus the expected posterior variance (law of total variance)
        assert _variance_reduction(cand, w[t:t + 1], k, m)[0] == pytest.approx(expected, rel=1e-10, abs=1e-15)
    assert _variance_reduction(cand, w[1:], k, m)[0] < 1e-3  # p in {0.9, 1}: pass@7 is ~1 either way
    # endless samples tell p, so they remove the whole posterior variance of f: what allocate reports as the tasks'
    # variance (task_variance) is the ceiling of every reduction
    var = (w * f**2).sum(1) - (w * f).sum(1) ** 2
    np.testing.assert_allclose(_variance_reduction(cand, w, k, 4000), var, rtol=1e-9, atol=1e-13)


def _counts_of(n, c, configs=("a",)):
    return bp.make_counts(np.atleast_2d(n), np.atleast_2d(c), task=[f"t{i}" for i in range(np.shape(n)[-1])],
                          config=list(configs))


def test_allocate_sends_samples_where_the_band_is_decided():
    g = np.random.default_rng(4)
    p = np.where(g.random(120) < 0.3, 0.0, g.beta(0.6, 0.8, 120))
    n = np.where(np.arange(120) < 60, 3, 30)
    c = g.binomial(n, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(_counts_of(n, c), "bb", "eb", progressbar=False)
    a = bp.allocate(fit, k=50, budget=60, seed=1)
    more = a.n_more.values[0]
    assert more.sum() == 60 and (more >= 0).all()
    # at k = 50 the band is decided by the tasks that never passed (tiny p or zero?), most of all those seen
    # only 3 times; a task that passed every one of 30 samples has pass@50 ~ 1 and gets nothing
    assert more[(n == 3) & (c == 0)].mean() > 2 * more[(n == 30) & (c == 0)].mean()
    assert more[(n == 30) & (c == 30)].sum() == 0
    assert more[(c == 0)].sum() > more[(c > 0)].sum()
    assert a.gain.values[0][(n == 30) & (c == 30)].max() < a.gain.values[0][(n == 3) & (c == 0)].min()
    # the variance it removes is part of what is there; ten times the samples remove more, never all of it
    big = bp.allocate(fit, k=50, budget=600, seed=1)
    assert big.attrs["task_variance"] == a.attrs["task_variance"]
    assert 0 < a.attrs["expected_variance_reduction"] < big.attrs["expected_variance_reduction"] \
        < a.attrs["task_variance"]


def test_allocate_pair_and_errors():
    g = np.random.default_rng(5)
    n = np.full((3, 40), 4)
    c = g.binomial(n, g.beta(1, 1, (3, 40)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(_counts_of(n, c, ("a", "b", "z")), "bb", "eb", progressbar=False)
    a = bp.allocate(fit, k=5, budget=30, step=3, pair=("a", "z"))
    assert a.n_more.sel(config="b").sum() == 0 and int(a.n_more.sum()) == 30
    assert set(np.unique(a.n_more.values)) <= {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30}
    big = bp.allocate(fit, k=5, budget=5000, pair=("a", "z"))  # more than the units the pair can take
    assert big.n_more.sel(config="b").sum() == 0 and big.n_more.sel(config=["a", "z"]).sum() > 30
    cap = fit.constant_data["n"] + xr.where(fit.constant_data["task"] == fit.constant_data["task"][0], 0, 2)
    capped = bp.allocate(fit, k=5, budget=5000, max_n=cap)
    assert (capped.n_more + fit.constant_data["n"] <= cap).all()
    assert int(capped.n_more.sum()) == 3 * 39 * 2 and (capped.n_more.isel(task=0) == 0).all()
    one = bp.allocate(fit, k=5, budget=5000, max_n=6)  # one cap for every task: 2 more samples each
    assert (one.n_more == 2).all()
    for bad, shown in ((np.ones((3, 40)), "ndarray"), (-1, "-1"), (True, "True"), (2.5, "2.5")):
        with pytest.raises(ValueError, match=f"max_n must be a non-negative integer or an xarray.DataArray over "
                                             f"\\(config, task\\); got {shown}"):
            bp.allocate(fit, k=5, budget=10, max_n=bad)
    with pytest.raises(ValueError, match="pair must be two different configs"):
        bp.allocate(fit, k=5, budget=10, pair=("a", "nope"))
    with pytest.raises(ValueError, match="budget"):
        bp.allocate(fit, k=5, budget=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer; got 1.5"):
        bp.allocate(fit, k=5, budget=10, seed=1.5)
    with pytest.raises(ValueError, match="k must be one value"):
        bp.allocate(fit, k=[1, 5], budget=10)


def test_allocate_cli(tmp_path):
    from typer.testing import CliRunner

    from bayespass.cli import app

    g = np.random.default_rng(6)
    n = np.full((2, 40), 4)
    c = g.binomial(n, g.beta(1, 1, (2, 40)))
    bp.write_counts(_counts_of(n, c, ("A", "B")), tmp_path / "counts.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(_counts_of(n, c, ("A", "B")), "bb", "eb", progressbar=False)
    fit.to_netcdf(str(tmp_path / "fit.nc"))
    res = CliRunner().invoke(app, ["allocate", str(tmp_path / "fit.nc"), "--k", "10", "--budget", "24", "--pair",
                                   "A:B", "--out", str(tmp_path / "next.csv")])
    assert res.exit_code == 0, res.output
    assert re.search(r"the tasks' part of its standard deviation from 0\.\d{4} to 0\.\d{4}", res.output)
    import pandas as pd

    df = pd.read_csv(tmp_path / "next.csv")
    assert len(df) == 80 and df.n_more.sum() == 24 and set(df.columns) >= {"config", "task", "n", "c", "gain"}
    expected = bp.allocate(fit, k=10, budget=24, pair=("A", "B")).n_more.values.ravel()
    assert (df.n_more.values == expected).all()
    bad = CliRunner().invoke(app, ["allocate", str(tmp_path / "counts.csv"), "--pair", "A:Q"])
    assert bad.exit_code == 2 and "pair must be two different configs" in bad.output
    # --max-n (bp.allocate's max_n): no task beyond 6 samples in all, so at most 2 more each; --seed its draws
    res = CliRunner().invoke(app, ["allocate", str(tmp_path / "fit.nc"), "--k", "10", "--budget", "500",
                                   "--max-n", "6", "--seed", "3", "--out", str(tmp_path / "capped.csv")])
    assert res.exit_code == 0, res.output
    capped = pd.read_csv(tmp_path / "capped.csv")
    want = bp.allocate(fit, k=10, budget=500, max_n=6, seed=3).n_more.values.ravel()
    assert (capped.n_more.values == want).all() and capped.n_more.max() == 2 and capped.n_more.sum() < 500
    for args, said in ((["--max-n", "-1"], "--max-n must be a non-negative integer; got -1"),
                       (["--seed", "-2"], "--seed must be a non-negative integer; got -2")):
        bad = CliRunner().invoke(app, ["allocate", str(tmp_path / "counts.csv"), *args])
        assert bad.exit_code == 2 and said in bad.output and "Traceback" not in bad.output, bad.output


def test_binomial_pmf_of_the_preposterior_is_scipys_and_survives_tiny_p():
    from scipy.stats import binom

    from bayespass.stats.plan import _binom_pmf

    y, p = np.arange(6)[None, :], np.array([0.0, 1e-9, 0.3, 0.999, 1.0])[:, None]
    np.testing.assert_allclose(_binom_pmf(y, 5, p), binom.pmf(y, 5, p), rtol=1e-12, atol=1e-300)
    # a fitted population's candidate p can be 1e-47; scipy's pmf raised OverflowError on such a batch in a real
    # `bayespass run --until-width`: here it is exact (all mass at y = 0)
    tiny = _binom_pmf(np.arange(2)[None, :], 1, np.array([[1.7e-47]]))
    np.testing.assert_allclose(tiny, [[1.0, 1.7e-47]], rtol=1e-12)


def test_a_stacks_futures_mix_its_candidates_by_their_weights():
    """plan() on the default fit: each simulated task comes from a candidate in the proportion of its weight."""
    from bayespass.models.stack import StackModel
    from bayespass.stats.plan import _stack_population

    model = StackModel(["bb", "zoibb"])
    bb_row = [0.0, 0.0, 0.0, np.nan, np.nan]  # Beta(0.5, 0.5): no exact zeros
    zoibb_row = [1.0, 0.0, 0.0, 20.0, -20.0]  # all its mass on the atom at 0
    draws = np.array([bb_row] * 700 + [zoibb_row] * 300)
    pop = _stack_population(model, draws, 4000, np.random.default_rng(0))
    assert pop.size == 4000
    assert np.mean(pop == 0.0) == pytest.approx(0.3, abs=0.005)
    assert np.all((pop[pop > 0] > 0) & (pop[pop > 0] < 1))


def test_task_weights_are_the_binomial_likelihood_also_at_p_0_and_1():
    """A task that never passed gives p = 0 the largest weight, one that always passed p = 1 (the atoms of zoibb,
    flex, lnorm and their stack); 0 log 0 was NaN and read as impossible, so plans and allocations of those models
    never saw 'never' or 'always'."""
    from scipy.stats import binom

    from bayespass.stats.plan import _posterior_p, _weights_on

    cand = np.array([0.0, 1e-3, 0.1, 0.5, 0.99, 1.0])
    n, c = np.array([3, 3, 3, 5, 0]), np.array([0, 1, 3, 5, 0])
    want = binom.pmf(c[:, None], n[:, None], cand[None, :])
    np.testing.assert_allclose(_weights_on(cand, n, c), want / want.sum(1, keepdims=True), rtol=1e-12)
    # zoibb's simulated futures: tasks that never passed in 20 samples are mostly 'never' (an exact 0)
    g = np.random.default_rng(3)
    p = np.where(g.random(200) < 0.4, 0.0, g.beta(2, 2, 200))
    counts = _counts_of(np.full(200, 20), g.binomial(20, p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(counts, "zoibb", "eb", progressbar=False)
    from bayespass.models.predictive import _model

    draw = _posterior_p(fit, _model(fit), np.random.default_rng(4))[0]
    never = counts.c.values[0] == 0
    assert (draw[never] == 0).mean() > 0.8 and (draw[~never] == 0).sum() == 0


@pytest.mark.slow
def test_shared_plan_predicts_the_width_reached_when_the_planned_samples_are_drawn():
    """The acceptance check of plan() for the joint model: two configs on 150 tasks of shared difficulty, each p
    Beta about its task's mean with phi = 1 (real code models' dispersion), from 3 samples per task; the widths it
    forecasts for 8 and 16 are those that drawing them from the truth gives (mean of 3 draws, within 20%; they
    agree within 3% here).  Where p hugs the task's mean (phi = 5, or no spread at all) the forecast is wider than
    what is reached, by up to 45% for one config, as bb's is under such truth: the futures carry today's
    uncertainty about the dispersion."""
    g = np.random.default_rng(7)
    x = g.normal(0, 1.5, 150)
    mean = 1 / (1 + np.exp(-(np.array([0.8, 0.0])[:, None] - x[None, :])))
    p = g.beta(mean, 1 - mean)
    configs = ["A", "B"]

    def counts_at(n, seed):
        return bp.make_counts(np.full(p.shape, n), np.random.default_rng(seed).binomial(n, p), config=configs)

    def widths(counts):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            band = bp.passk_curve(bp.fit(counts, "shared", "eb", progressbar=False), [10])["eti"].sel(k=10)
        return (band.sel(ci_bound="upper") - band.sel(ci_bound="lower")).values.ravel()

    start = counts_at(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(start, "shared", "eb", progressbar=False)
    pl = bp.plan(fit, k=10, target_width=0.03, n_grid=[3, 8, 16], n_sims=4, seed=3, progressbar=False)
    pred = pl.expected_width.transpose("config", "n").values
    assert (pred[:, 2] < pred[:, 1]).all() and (pred[:, 1] < pred[:, 0]).all()
    for i, n in enumerate([8, 16]):
        # the planned samples drawn from the truth, on top of the 3 we had
        real = np.mean([widths(start.copy(data={"n": start.n.values + n - 3, "c": start.c.values
                                                + counts_at(n - 3, 100 + r).c.values}))
                        for r in range(3)], axis=0)
        np.testing.assert_allclose(real, pred[:, i + 1], rtol=0.2, err_msg=f"n = {n}")


def test_a_stacks_allocation_weighs_each_candidate_under_its_own_posterior():
    """Beyond the samples drawn the default's band is the hull of its candidates' bands, so allocate() scores a
    task by its candidates' own variance reductions, averaged: one candidate set per candidate of the stack, each
    from that candidate's draws only (bb's population has no exact zeros, zoibb's and flex's do), and the task's
    variance is the mean of theirs."""
    from bayespass.models.predictive import _model
    from bayespass.models.stack import theta_of
    from bayespass.stats.plan import _candidate_sets, _config_reduction, _passk_of

    g = np.random.default_rng(11)
    n = np.full((1, 150), 2)
    c = g.binomial(n, np.where(g.random(150) < 0.3, 0.0, g.beta(0.6, 0.8, 150)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bp.fit(_counts_of(n[0], c[0]), progressbar=False)
    model = _model(fit)
    sets = _candidate_sets(fit, theta_of(fit.posterior), model, 0, n, c, np.random.default_rng(0), 20, 500)
    assert len(sets) == len(model.components) == 4
    zeros = {m.name: float((cand == 0).mean()) for m, (cand, _) in zip(model.components, sets, strict=True)}
    assert zeros["bb"] < 0.01 and zeros["zoibb"] > 0.1 and zeros["flex"] > 0.1, zeros
    var, vr = _config_reduction(sets, 10, 2, 1)
    own = [(w * _passk_of(cand, 10) ** 2).sum(1) - (w * _passk_of(cand, 10)).sum(1) ** 2 for cand, w in sets]
    np.testing.assert_allclose(var, np.mean(own, axis=0), rtol=1e-9, atol=1e-15)
    assert vr.shape == (150, 3) and (vr[:, 0] == 0).all() and (vr[:, 2] >= vr[:, 1] - 1e-12).all()


@pytest.mark.parametrize("tasks", [40, 150, 350])
def test_samples_to_identify_are_the_fewest_that_bring_pass_at_k_within_the_samples(tasks):
    """to_identify: after topping up every task but the 1% (rounded down) that fall furthest short to k samples,
    identified_k reaches k, and with any one of those samples less it does not."""
    from bayespass.data.counts import IDENTIFIED_SHARE, identified_k, samples_to_identify

    g = np.random.default_rng(tasks)
    n = g.integers(0, 14, (3, tasks))
    n[2] = 12  # already identified at k = 10: nothing to add
    k = 10
    need = samples_to_identify(n, k)
    assert need[2] == 0
    for j in range(2):
        seen = np.flatnonzero(n[j] > 0)
        drop = int(np.floor(IDENTIFIED_SHARE * seen.size))  # 0 under 100 tasks, as identified_k
        keep = seen[np.argsort(n[j, seen], kind="stable")[drop:]]  # all but the furthest short
        top = np.zeros(tasks, int)
        top[keep] = np.maximum(k - n[j, keep], 0)
        assert top.sum() == need[j] > 0
        assert identified_k((n[j] + top)[None])[0] >= k
        for t in np.flatnonzero(top):
            less = top.copy()
            less[t] -= 1
            assert identified_k((n[j] + less)[None])[0] < k
        # the closed form: the shortfalls summed, less the largest `drop` of them
        short = np.sort(np.maximum(k - n[j, seen], 0))
        assert need[j] == short.sum() - short[short.size - drop:].sum()


def test_allocate_of_a_stack_says_what_topping_up_to_k_would_take(tmp_path):
    """Beyond the samples drawn a stack's band is the hull of its candidates'; allocate() returns, and the CLI
    says, how many samples would bring pass@k within them. Not said for bb, whose band has no such rule."""
    from typer.testing import CliRunner

    from bayespass.cli import app

    g = np.random.default_rng(12)
    n = np.where(np.arange(60) < 30, 2, 6)[None]
    c = g.binomial(n, g.beta(0.8, 0.8, (1, 60)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {m: bp.fit(_counts_of(n, c), m, "eb", progressbar=False) for m in ("auto", "bb")}
    for m, fit in fits.items():
        fit.to_netcdf(str(tmp_path / f"{m}.nc"))
    assert int(bp.allocate(fits["auto"], k=8, budget=10).to_identify.sel(config="a")) == 30 * 6 + 30 * 2
    assert int(bp.allocate(fits["auto"], k=2, budget=10).to_identify.sel(config="a")) == 0
    res = CliRunner().invoke(app, ["allocate", str(tmp_path / "auto.nc"), "--k", "8", "--budget", "10",
                                   "--out", str(tmp_path / "next.csv")])
    assert res.exit_code == 0, res.output
    assert "beyond the samples drawn for 1 config(s)" in res.output and "samples that takes, per config: a 240" in res.output
    import pandas as pd

    assert "to_identify" not in pd.read_csv(tmp_path / "next.csv").columns
    res = CliRunner().invoke(app, ["allocate", str(tmp_path / "bb.nc"), "--k", "8", "--budget", "10"])
    assert res.exit_code == 0 and "hull" not in res.output, res.output
    # the same note from the fit alone, and from the rounds of `bayespass run --until-width` when they stop short
    from types import SimpleNamespace

    from bayespass.pipeline.adaptive import _say_unreached
    from bayespass.stats.plan import identify_note

    assert identify_note(fits["auto"], 8).endswith("samples that takes, per config: a 240")
    assert identify_note(fits["auto"], 2) is None and identify_note(fits["bb"], 8) is None
    said = []
    ctx = SimpleNamespace(echo=said.append, cfg=SimpleNamespace(width_k=8))
    _say_unreached(ctx, fits["auto"], "reached")
    _say_unreached(ctx, fits["bb"], "max_samples (500) drawn")
    assert said == []
    _say_unreached(ctx, fits["auto"], "max_samples (500) drawn")
    assert len(said) == 1 and " ".join(said[0].split()).endswith("per config: a 240")  # wrapped for the terminal


def test_plot_plan_draws_each_config_s_width_the_target_and_the_n_needed(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from typer.testing import CliRunner

    from bayespass.cli import app

    counts = simulate_counts(np.random.default_rng(0).beta(0.8, 1.2, (2, 60)), 3, seed=0).drop_vars("p_true")
    fit = bp.fit(counts, "bb", "eb", progressbar=False)
    pl = bp.plan(fit, k=10, target_width=0.15, n_grid=[3, 10, 40], n_sims=2, progressbar=False)
    ax = bp.plot_plan(pl)
    lines = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    assert [ln.get_label() for ln in lines] == [str(c) for c in pl.config.values]
    for ln, cfg in zip(lines, pl.config.values, strict=True):
        np.testing.assert_allclose(ln.get_ydata(), pl.expected_width.sel(config=cfg).values)
    (target,) = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert target.get_ydata()[0] == 0.15
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert len(stars) == int(np.isfinite(pl.n_needed.values).sum()) >= 1
    plt.close(ax.figure)
    names = [f"m{i}" for i in range(12)]  # above ten configs: a panel each, its own line and star
    width = np.linspace(0.3, 0.05, 4)[None, :] * np.linspace(1, 2, 12)[:, None]
    many = xr.Dataset({"expected_width": (("config", "n"), width), "width_sd": (("config", "n"), 0.1 * width),
                       "n_needed": ("config", np.where(width[:, -1] <= 0.08, 40.0, np.nan))},
                      coords={"config": names, "n": [3, 10, 20, 40]}, attrs={"target_width": 0.08, "k": 10})
    axes = bp.plot_plan(many)
    assert [a.get_title() for a in axes] == names and len({a.figure for a in axes}) == 1
    for i, a in enumerate(axes):
        np.testing.assert_allclose(a.lines[0].get_ydata(), width[i])
        assert sum(ln.get_marker() == "*" for ln in a.lines) == int(width[i, -1] <= 0.08)
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["target 0.08"]
    plt.close("all")
    with pytest.raises(TypeError, match="plot_plan needs what bp.plan returns"):
        bp.plot_plan(counts)
    path = tmp_path / "fit.nc"
    fit.to_netcdf(str(path))
    res = CliRunner().invoke(app, ["plan", str(path), "--width", "0.15", "--n-grid", "3,10", "--sims", "2",
                                   "--plot", str(tmp_path / "plan.svg")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "plan.svg").read_text().lstrip().startswith("<?xml")
    res = CliRunner().invoke(app, ["plan", str(path), "--width", "0.15", "--n-grid", "3,10", "--sims", "2",
                                   "--format", "markdown"])  # for people: the two tables, as on screen
    assert res.exit_code == 0 and res.stdout.count("### ") == 2 and "| config | n | expected_width |" in res.stdout
    res = CliRunner().invoke(app, ["plan", str(path), "--width", "0.15", "--plot", str(tmp_path / "no" / "p.png")])
    assert res.exit_code == 2 and "does not exist" in res.output
