import numpy as np
import pytest

from bayespass.stats.behaviour import behaviour
from bayespass.stats.gating import CRCGate, crc_threshold, gate, gate_diagnostics, gate_table, risk_coverage
from bayespass.stats.reliability import hoeffding_stop, reliability, wilson

P, F = 1, 2


def test_behaviour_clusters_by_hand(make_samples):
    # one task, 4 tests (probe = 0,1; gold = 2,3), 5 samples
    v = np.array([[[[P, P, P, P],    # correct
                    [P, F, F, F],    # wrong A
                    [P, P, P, F],    # passes probe, fails gold: same cluster as the correct ones
                    [P, F, F, F],    # wrong A
                    [F, P, P, P]]]])  # wrong-on-probe B, right on gold
    b = behaviour(make_samples(v)).isel(config=0, task=0)
    assert int(b.n) == 5 and int(b.n_clusters) == 3
    assert list(b.cluster.values) == [0, 1, 0, 1, 2]  # tie of size 2 broken by the earliest member
    assert float(b.f_max) == pytest.approx(0.4) and float(b.f_pass) == pytest.approx(0.4)
    assert int(b.dominant) == 0 and bool(b.dominant_correct) and bool(b.first_correct)
    assert list(b.gold_correct.values) == [True, False, False, False, True]
    # coarse signature merges everything that fails some probe test
    bc = behaviour(make_samples(v), signature="coarse").isel(config=0, task=0)
    assert int(bc.n_clusters) == 2
    # digest signature splits same-verdict programs that return different values
    d = np.zeros(v.shape, np.int64)
    d[0, 0, 3, 1] = 7
    assert int(behaviour(make_samples(v, digest=d), signature="digest").n_clusters[0, 0]) == 4


def test_stable_wrong_fragile_and_missing_samples(make_samples):
    is_plus = np.array([[0, 1, 0, 1]])  # probe: tests 0,1 (base, plus); gold: 2 (base), 3 (plus)
    v = np.array([[[[P, F, P, F]] * 3 + [[-1, -1, -1, -1]]]])
    b = behaviour(make_samples(v, is_plus=is_plus)).isel(config=0, task=0)
    assert int(b.n) == 3 and float(b.f_max) == 1.0
    assert bool(b.stable_wrong) and bool(b.fragile)


def _brute_crc(s, w, alpha, variant):
    n = len(s)
    for lam in sorted(set(s[np.isfinite(s)])):
        r = np.mean((s >= lam) & w)
        if (n / (n + 1) * r + 1 / (n + 1) <= alpha) if variant == "crc" else (r <= alpha - 1 / n):
            return lam
    return np.inf


@pytest.mark.parametrize("variant", ["crc", "conservative"])
def test_crc_threshold_matches_definition(variant):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = rng.integers(5, 60)
        s = rng.integers(1, 9, n) / 8.0
        w = rng.random(n) < 0.6 * (1 - s)
        s[rng.random(n) < 0.1] = -np.inf
        alpha = rng.uniform(0.05, 0.4)
        assert crc_threshold(s, w, alpha, variant=variant) == _brute_crc(s, w, alpha, variant)


@pytest.mark.parametrize("variant", ["crc", "conservative"])
def test_crc_controls_risk_over_repeated_draws(variant):
    """Known truth: P(wrong | s) = 0.8 (1 - s); E[test risk] <= alpha over many calibration draws."""
    rng = np.random.default_rng(1)
    alpha, n, risks = 0.1, 100, []
    for _ in range(2000):
        s = rng.random(n + 1)
        w = rng.random(n + 1) < 0.8 * (1 - s)
        lam = crc_threshold(s[:n], w[:n], alpha, variant=variant)
        risks.append((s[n] >= lam) & w[n])
    m = np.mean(risks)
    assert m <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / len(risks)), m
    assert m >= 0.05  # and it is not trivially conservative


def test_crc_bad_input():
    with pytest.raises(ValueError, match="alpha must be in"):
        crc_threshold([0.5], [True], 1.5)
    with pytest.raises(ValueError, match="NaN"):
        crc_threshold([np.nan], [True], 0.1)
    with pytest.raises(ValueError, match="variant"):
        crc_threshold([0.5], [True], 0.1, variant="ltt")
    with pytest.raises(TypeError, match="samples"):
        gate({"verdict": 1})
    import bayespass as bp

    counts = bp.make_counts([[5, 5]], [[1, 4]])
    for f in (lambda: gate(counts, alpha=0.1), lambda: reliability(counts)):
        with pytest.raises(ValueError, match=r"these are counts .* needs the executed samples"):
            f()


def test_collapse_guard_and_risk_coverage(make_samples):
    rng = np.random.default_rng(2)
    t, k = 60, 6
    v = np.where(rng.random((1, t, k, 4)) < 0.5, P, F)
    v[0, :30] = F  # half the tasks: one wrong program emitted K times (collapsed)
    prog = rng.integers(0, 10**9, (1, t, k))
    prog[0, :30] = 5
    ds = make_samples(v, program=prog, logprob=rng.normal(size=(1, t, k)))
    diag = gate_diagnostics(ds)
    assert diag.loc[0, "collapsed"] == pytest.approx(0.5)
    assert diag.loc[0, "stable_wrong"] >= 0.5
    g = gate(ds, alpha=0.2, n_splits=20, diversity_floor=0.5)
    assert np.all(g.sel(rule="behaviour-CRC").silent.values <= 0.5)
    rc = risk_coverage(ds)
    cov = rc.coverage.sel(rule="behaviour-CRC").values[0]
    cov = cov[np.isfinite(cov)]
    assert cov[0] == 1.0 and cov[-1] == 0.0 and np.all(np.diff(cov) <= 0)
    tab = gate_table(g)
    assert set(tab.rule) == {"pass@1", "best-of-K", "logprob-CRC", "behaviour-CRC"}
    assert (tab.to_dataframe()["alpha"] == 0.2).all() and "alpha" not in tab.to_text().splitlines()[1].split()


def test_crc_gate_estimator_calibrates_on_some_tasks_and_evaluates_on_others(make_samples):
    rng = np.random.default_rng(8)
    t, k = 80, 8
    p = rng.beta(0.7, 0.7, (2, t, 1, 1))
    v = np.where(rng.random((2, t, k, 6)) < p, P, F)
    ds = make_samples(v, logprob=rng.normal(size=(2, t, k)))
    beh = behaviour(ds)
    calib, test = list(ds.task.values[:50]), list(ds.task.values[50:])
    g = CRCGate(alpha=0.2)
    with pytest.raises(ValueError, match="not calibrated yet"):
        g.predict(ds)
    assert g.calibrate(ds, tasks=calib) is g and "threshold_=" in repr(g)
    for c in range(2):  # the learned threshold is CRC's on the calibration tasks only
        sc = beh.f_max.values[c, :50]
        assert g.threshold_.values[c] == crc_threshold(sc, ~beh.dominant_correct.values[c, :50], 0.2)
        assert int(g.n_calib_.values[c]) == 50
    pred = g.predict(ds, tasks=test)
    assert not pred.accept.values[:, :50].any()  # only the tasks asked for
    accept = beh.f_max.values[:, 50:] >= g.threshold_.values[:, None]
    np.testing.assert_array_equal(pred.accept.values[:, 50:], accept)
    ev = g.evaluate(ds, tasks=test)
    wrong = ~beh.dominant_correct.values[:, 50:]
    np.testing.assert_allclose(ev.silent.values, (accept & wrong).sum(1) / 30)
    np.testing.assert_allclose(ev.abstention.values, 1 - accept.sum(1) / 30)
    # a behaviour dataset is read as is; the logprob score deploys sample 0
    assert CRCGate(alpha=0.2).calibrate(beh, calib).threshold_.equals(g.threshold_)
    lp = CRCGate(alpha=0.2, score="logprob").calibrate(ds, calib)
    assert lp.threshold_.values[0] == crc_threshold(ds.mean_logprob.values[0, :50, 0],
                                                    ~beh.first_correct.values[0, :50], 0.2)
    with pytest.raises(ValueError, match="tasks not in the samples"):
        g.evaluate(ds, tasks=["nope"])
    with pytest.raises(ValueError, match="score='x' is not supported"):
        CRCGate(score="x")
    with pytest.raises(ValueError, match="needs samples with mean_logprob"):
        CRCGate(score="logprob").calibrate(make_samples(v))


def test_hoeffding_stop_and_wilson():
    assert hoeffding_stop([0] * 10, 0.1) == 10  # never stops this early
    t = hoeffding_stop([0] * 100, 0.1)
    # smallest t with 1 > 2 sqrt(log(2 * pi^2 t^2 / (6 * 0.1)) / (2t))
    brute = next(t for t in range(1, 100) if 1 > 2 * np.sqrt(np.log(2 * np.pi**2 * t**2 / 0.6) / (2 * t)))
    assert t == brute
    assert hoeffding_stop([0, 1] * 50, 0.1) == 100
    # published 95% Wilson interval for 30/100 (z = 1.96)
    lo, hi = wilson(30, 100, z=1.959964)
    assert lo == pytest.approx(0.2189, abs=1e-3) and hi == pytest.approx(0.3958, abs=1e-3)
    # the default follows rcParams["stats.ci_prob"] (0.9: z = 1.6449)
    from scipy.stats import norm

    from bayespass.defaults import rc_context

    with rc_context({"stats.ci_prob": 0.95}):
        assert wilson(30, 100)[0] == pytest.approx(0.2189, abs=1e-3)
    z90 = norm.ppf(0.95)
    lo, hi = wilson(30, 100)
    mid, half = (0.3 + z90**2 / 200) / (1 + z90**2 / 100), z90 / (1 + z90**2 / 100) * np.sqrt(0.21 / 100 + z90**2 / 40000)
    assert (lo, hi) == pytest.approx((mid - half, mid + half), abs=1e-9)


def test_reliability_by_hand(make_samples):
    # 20 tasks, 4 samples each; tasks 0-11: mode correct; 12-15: second class correct; 16-19: none correct
    v = np.full((1, 20, 4, 2), F)
    v[0, :12, :3] = P
    v[0, 12:16, 3] = P
    r = reliability(make_samples(v), alpha=0.2, n_splits=50, calib_fraction=0.5)
    assert list(r.score.values[0, :12]) == [1.0] * 12
    assert np.all(r.score.values[0, 12:16] == 2) and np.all(np.isinf(r.score.values[0, 16:]))
    assert float(r.level[0]) == pytest.approx(12 / 21)


def test_the_reliability_table_says_when_sequential_stopping_cannot_stop(make_samples):
    from bayespass.stats.reliability import reliability_table

    assert hoeffding_stop(["a"] * 18, 0.1) == 18 and hoeffding_stop(["a"] * 40, 0.1) == 19  # its soonest stop
    for k, saved in ((10, False), (30, True)):  # every task's samples alike: from 19 of them on it stops
        v = np.full((1, 20, k, 2), P)
        v[0, ::5] = F
        r = reliability(make_samples(v), alpha=0.3, n_splits=5)
        note = " ".join(reliability_table(r).note.split())
        assert (float(r.saved[0]) > 0) is saved
        said = "saved nothing: at delta = 0.1 it cannot stop a task before 19 of its samples (all alike), and no " \
               f"task has more than {k}"
        assert (said in note) is not saved, note
    assert list(reliability_table(r).to_dataframe()["alpha"]) == [0.3]  # a row says its target (the title: the text)
    r = reliability(make_samples(np.full((1, 20, 10, 2), P)), alpha=0.3, n_splits=5, delta=0.5)
    assert "at delta = 0.5 it cannot stop a task before 15 of" in " ".join(reliability_table(r).note.split())


def test_conformal_reliability_estimator_by_hand(make_samples):
    from bayespass.stats.reliability import ConformalReliability, conformal_qhat

    # tasks 0-11: mode correct (score 1); 12-15: second class correct (score 2); 16-19: none (inf)
    v = np.full((1, 20, 4, 2), F)
    v[0, :12, :3] = P
    v[0, 12:16, 3] = P
    ds = make_samples(v)
    tasks = list(ds.task.values)
    cal = tasks[:8] + tasks[12:14] + tasks[16:17]  # 11 tasks: scores 1 x8, 2 x2, inf x1
    r = ConformalReliability(alpha=0.2)
    with pytest.raises(ValueError, match="not calibrated yet"):
        r.evaluate(ds)
    assert r.calibrate(ds, tasks=cal) is r
    # ceil(12 * 0.8) = 10th smallest of [1]*8 + [2, 2] + [inf] is 2
    assert float(r.qhat_[0]) == 2.0 == conformal_qhat(np.array([1.0] * 8 + [2, 2, np.inf]), 0.2)
    assert float(r.level_[0]) == pytest.approx(8 / 12) and int(r.n_calib_[0]) == 11
    lo, hi = wilson(8, 11)
    assert float(r.level_lower_[0]) == pytest.approx(lo) and float(r.level_upper_[0]) == pytest.approx(hi)
    test = [t for t in tasks if t not in cal]  # 4 mode-correct, 2 second-class, 3 unsolvable
    ev = r.evaluate(ds, tasks=test)
    assert float(ev.coverage[0]) == pytest.approx(6 / 9) and float(ev.cond_coverage[0]) == 1.0
    assert float(ev.mode_coverage[0]) == pytest.approx(4 / 9)
    pred = r.predict(ds, tasks=test)
    # set size = min(qhat, classes): 2 classes everywhere here (3 x P + 1 x F, or all F = 1 class)
    want = np.array([min(2, int(behaviour(ds).n_clusters.sel(task=t)[0])) for t in test])
    np.testing.assert_array_equal(pred.set_size.sel(task=test).values[0], want)
    assert float(ev.set_size[0]) == pytest.approx(want.mean())
    # alpha so small that the quantile is beyond the calibration set: every class is in the set, and it holds a
    # correct class only on the 6 of 9 test tasks that have one (the unsolvable 3 were counted covered: inf <= inf)
    r01 = ConformalReliability(alpha=0.01).calibrate(ds, tasks=cal)
    assert np.isinf(float(r01.qhat_[0]))
    assert float(r01.evaluate(ds, tasks=test).coverage[0]) == pytest.approx(6 / 9)
    assert r01.predict(ds, tasks=test).covered.sel(task=test).values[0].tolist() == [True] * 6 + [False] * 3


def test_gate_table_says_why_behaviour_crc_answers_nothing(make_samples):
    t, k = 40, 5
    v = np.full((1, t, k, 3), P)
    v[0, ::2] = F  # every task's samples behave alike; half of the tasks are wrong all the same
    g = gate(make_samples(v), alpha=0.1, n_splits=5)
    assert np.all(g.sel(rule="behaviour-CRC").abstention.values == 1.0)
    tab = gate_table(g)
    assert "Behaviour-CRC abstains on every task for" in tab.note and "stable_wrong" in tab.note
    assert "abstains" not in tab.title  # the title stays one short line; the why is in the note
    # two of the five splits find a threshold: the mean abstention falls below 1, the median threshold stays inf
    part = g.copy(deep=True)
    beh = {"rule": "behaviour-CRC", "split": [0, 1]}
    part["threshold"].loc[beh], part["abstention"].loc[beh] = 0.6, 0.5
    note = gate_table(part).note
    assert "abstains on every task for" not in note
    assert f"threshold_median inf ({g.config.values[0]})" in note and "more than half of the splits" in note
    # one split answers a few tasks: nearly every task, and said so (it read 'every task')
    near = g.copy(deep=True)
    near["abstention"].loc[{"rule": "behaviour-CRC", "split": 0}] = 0.96  # mean over the 5 splits 0.992
    note = gate_table(near).note
    assert "abstains on every task" not in note
    assert f"abstains on 99% or more of the test tasks (mean over the splits) for {g.config.values[0]}" in note
    v[0, ::2] = P  # all right: it answers, and the note says nothing more
    note = gate_table(gate(make_samples(v), alpha=0.1, n_splits=5)).note
    assert "abstains" not in note and "threshold_median inf" not in note
    # no log-probabilities: logprob-CRC's row is blank, and the note says why; with them it is filled
    assert f"logprob-CRC is blank for {g.config.values[0]}: not every sample carries its log-probability" in note
    lp = -np.random.default_rng(0).random(v.shape[:3])
    tab = gate_table(gate(make_samples(v, logprob=lp), alpha=0.1, n_splits=5))
    assert "logprob-CRC is blank" not in tab.note
    # many configs: the note counts them rather than naming every one (34 real configs named 34 twice)
    many = gate_table(gate(make_samples(np.repeat(v, 6, axis=0)), alpha=0.1, n_splits=5)).note
    assert "logprob-CRC is blank for all 6 configs: not every sample" in many
    assert tab.loc[tab["rule"] == "logprob-CRC", "abstention"].notna().all()


def test_risk_coverage_plot_joins_the_thresholds_points_by_straight_lines(make_samples):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayespass.stats.gating import plot_risk_coverage

    # 10 tasks of 4 samples: 8 where every sample behaves alike (6 right, 2 wrong), 2 split 2-2 (wrong dominant)
    v = np.full((1, 10, 4, 2), P)
    v[0, 6:8] = F
    v[0, 8:, :2] = F
    ax = plot_risk_coverage(risk_coverage(make_samples(v)))
    xy = ax.get_lines()[0].get_path().vertices
    # achievable points: answer all (1.0, 0.4), answer the 8 unanimous tasks (0.8, 0.2), answer none (0, 0)
    assert np.allclose(sorted(map(tuple, xy)), [(0, 0), (0.8, 0.2), (1.0, 0.4)])
    # halfway to the unanimous tasks the risk is half theirs (a random half answered), not theirs
    order = np.argsort(xy[:, 0])
    assert np.interp(0.4, xy[order, 0], xy[order, 1]) == pytest.approx(0.1)
    plt.close("all")


def test_random_tie_break_answers_a_share_of_tied_tasks_and_keeps_the_guarantee():
    """Known truth: 70% of tasks tie at score 1 (a quarter of them wrong), the rest at 0.5 (half wrong). Without a
    tie-break no threshold qualifies at alpha = 0.1 and CRC abstains on everything; with one, it answers about
    half of the tied tasks and the test risk over many calibration draws stays at most alpha."""
    from bayespass.stats.gating import TIE_SCALE

    rng = np.random.default_rng(5)
    alpha, n, risks, answered, plain = 0.1, 100, [], [], []
    for _ in range(3000):
        s = np.where(rng.random(n + 1) < 0.7, 1.0, 0.5)
        w = rng.random(n + 1) < np.where(s == 1.0, 0.25, 0.5)
        plain.append(crc_threshold(s[:n], w[:n], alpha))
        st = s + rng.random(n + 1) * TIE_SCALE  # the tie-breakers: iid per task, calibration and test alike
        lam = crc_threshold(st[:n], w[:n], alpha)
        risks.append((st[n] >= lam) & w[n])
        answered.append(st[n] >= lam)
    assert np.mean(np.isinf(plain)) > 0.97  # all or nothing: nothing (but draws with few wrong among the tied)
    m = np.mean(risks)
    assert m <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / len(risks)), m
    assert m >= 0.07 and 0.25 < np.mean(answered) < 0.45  # near alpha, about half of the tied 70% answered


def test_gate_with_random_tie_break(make_samples):
    from bayespass.stats.gating import TIE_SCALE, CRCGate, tie_breakers

    t, k = 120, 5
    v = np.full((1, t, k, 3), P)
    v[0, ::4] = F  # every task's samples behave alike (f_max = 1); a quarter of them wrong all the same
    ds = make_samples(v)
    assert np.all(gate(ds, alpha=0.1, n_splits=20).sel(rule="behaviour-CRC").abstention.values == 1.0)
    g = gate(ds, alpha=0.1, n_splits=200, tie_break="random")
    crc = g.sel(rule="behaviour-CRC")
    assert float(crc.abstention.mean()) < 0.9  # answers a share of the tied tasks
    assert float(crc.silent.mean()) <= 0.1 + 3 * float(crc.silent.std()) / np.sqrt(200)
    assert g.attrs["tie_break"] == "random" and "ties broken at random" in gate_table(g).title
    note = gate_table(gate(ds, alpha=0.1, n_splits=5)).note
    assert "tie_break='random' ('bayespass gate RUN --tie-break random', or 'bayespass run --tie-break random')" \
        in " ".join(note.split())
    # the tie-breakers: below TIE_SCALE, fixed by the seed, the config and the task
    tb = tie_breakers(["a", "b"], ["t0", "t1", "t2"], 3)
    assert tb.shape == (2, 3) and (tb >= 0).all() and (tb < TIE_SCALE).all() and len(np.unique(tb)) == 6
    np.testing.assert_array_equal(tb, tie_breakers(["a", "b"], ["t0", "t1", "t2"], 3))
    assert not np.array_equal(tb, tie_breakers(["a", "b"], ["t0", "t1", "t2"], 4))
    a = CRCGate(alpha=0.1, tie_break="random", seed=3).calibrate(ds, tasks=list(ds.task.values[:80]))
    b = CRCGate(alpha=0.1, tie_break="random", seed=3).calibrate(ds, tasks=list(ds.task.values[:80]))
    assert a.threshold_.equals(b.threshold_) and np.isfinite(a.threshold_.values).all()
    assert "tie_break='random'" in repr(a) and "tie_break" not in repr(CRCGate(alpha=0.1))
    with pytest.raises(ValueError, match="tie_break='coin' is not supported"):
        CRCGate(tie_break="coin")


def test_figures_of_more_than_four_configs_draw_a_panel_each(make_samples):
    """Risk-coverage, conformal sets and incoherence drew every config on one Axes: 16 real configs were 33
    legend entries over the data, in ten repeating colours. Above four configs each has its own panel, showing
    its own numbers; up to four keep one Axes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayespass.stats.gating import plot_risk_coverage
    from bayespass.stats.incoherence import incoherence, plot_incoherence
    from bayespass.stats.reliability import plot_set_size

    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, (6, 30, 1, 1))
    v = np.where(rng.random((6, 30, 6, 4)) < p, P, F)
    ds = make_samples(v, digest=(v == P).astype(int) * 7 + rng.integers(0, 2, v.shape), logprob=rng.normal(size=v.shape[:3]),
                      ref=np.full((30, 4), 7))
    names = [f"c{i}" for i in range(6)]
    rc, g = risk_coverage(ds), gate(ds, alpha=0.2, n_splits=5)
    try:
        axes = plot_risk_coverage(rc, g)
        assert [a.get_title() for a in axes] == names and len({a.figure for a in axes}) == 1
        for name, a in zip(names, axes, strict=True):  # its own behaviour-CRC curve, nobody else's
            cell = rc.sel(config=name, rule="behaviour-CRC")
            keep = np.isfinite(cell["coverage"].values)
            drawn = [ln for ln in a.lines if ln.get_linestyle() == "-" and len(ln.get_xdata()) > 1][0]
            assert np.allclose(drawn.get_xdata(), cell["coverage"].values[keep])
        assert [t.get_text() for t in axes[0].get_legend().get_texts()][-1] == "alpha = 0.2"
        rel = reliability(ds, alpha=0.3, n_splits=5)
        axes = plot_set_size(rel)
        assert [a.get_title().split("\n")[0] for a in axes] == names
        for name, a in zip(names, axes, strict=True):
            assert np.allclose(a.collections[0].get_offsets()[:, 0], rel["entropy"].sel(config=name).values)
        inc = incoherence(ds, n_mc=50)
        axes = plot_incoherence(inc)
        assert [a.get_title() for a in axes] == names
        for name, a in zip(names, axes, strict=True):
            xy = a.collections[0].get_offsets()
            assert np.allclose(xy[:, 0], inc["E"].sel(config=name).values)
            assert np.allclose(xy[:, 1], inc["I"].sel(config=name).values)
        one = plot_set_size(rel.isel(config=slice(0, 4)))  # four: one Axes, a legend entry each
        assert len(one.get_legend().get_texts()) == 4
        _, two = plt.subplots(1, 2)
        with pytest.raises(ValueError, match="one per config"):
            plot_incoherence(inc, ax=two)
    finally:
        plt.close("all")
