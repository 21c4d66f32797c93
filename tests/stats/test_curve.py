"""pass@k curves: the equal-tailed band is monotone in k, as pass@k is."""

import warnings

import numpy as np
import pytest
import xarray as xr

import bayespass as bp
from bayespass.stats.curve import monotone_band


def _band(lo, hi, k, bounds=("lower", "upper")):
    ends = {"lower": lo, "upper": hi}
    return xr.DataArray(np.stack([np.asarray(ends[b], float) for b in bounds], -1), dims=("config", "k", "ci_bound"),
                        coords={"config": ["a", "b"][: len(lo)], "k": k, "ci_bound": list(bounds)})


def test_a_monotone_band_raises_lower_ends_and_lowers_upper_ends_in_k_order():
    k = [50, 1, 10, 100]
    lo = [[0.80, 0.70, 0.805, 0.79], [np.nan, 0.5, 0.6, 0.65]]
    hi = [[0.95, 0.73, 0.96, 0.97], [0.9, 0.55, 0.7, 0.85]]
    for bounds in (("lower", "upper"), ("upper", "lower")):
        out = monotone_band(_band(lo, hi, k, bounds))
        assert list(out["ci_bound"].values) == list(bounds) and list(out["k"].values) == k
        # lower: the largest lower end at a k no larger (k = 50 and 100 take k = 10's 0.805); NaN stays NaN
        np.testing.assert_array_equal(out.sel(ci_bound="lower").values,
                                      [[0.805, 0.70, 0.805, 0.805], [np.nan, 0.5, 0.6, 0.65]])
        # upper: the smallest upper end at a k no smaller (k = 10 takes k = 50's 0.95; b's 0.9 at k = 50 stays,
        # k = 100's 0.85 lowers it)
        np.testing.assert_array_equal(out.sel(ci_bound="upper").values,
                                      [[0.95, 0.73, 0.95, 0.97], [0.85, 0.55, 0.7, 0.85]])
    monotone = _band([[0.1, 0.2, 0.3, 0.4]], [[0.5, 0.6, 0.7, 0.8]], [1, 2, 3, 4])
    xr.testing.assert_equal(monotone_band(monotone), monotone)  # nothing to change: nothing changed


@pytest.mark.parametrize("model", ["auto", "bb"])
def test_the_band_of_all_or_nothing_tasks_never_falls_with_k(model):
    """Every task passes all 5 samples or none (a near-deterministic model on 24 tasks). The finite-task spread
    of each draw is a normal whose sd grows faster in k than its mean, so the band's lower end fell from
    0.4535 at k = 2 to 0.4424 at k = 100 (the default, seed 18); the truth's pass@k is at least its pass@2."""
    g = np.random.default_rng(18)
    c = np.where(g.random((1, 24)) < 0.6, 5, 0)
    counts = bp.make_counts(np.full((1, 24), 5), c, config=["a"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts, model, seed=0)
    k = [100, 1, 2, 5, 10, 1000]
    curve = bp.passk_curve(idata, k=k).sortby("k")
    lower, upper = (curve["eti"].sel(config="a", ci_bound=b).values for b in ("lower", "upper"))
    assert (np.diff(lower) >= 0).all() and (np.diff(upper) >= 0).all(), (lower, upper)
    assert (lower <= curve["mean"].sel(config="a").values).all()
    # the raise is no larger than the fall it removes: the band at k = 2 alone is the band at k = 2 here
    alone = bp.passk_curve(idata, k=[2])["eti"].sel(config="a", k=2)
    np.testing.assert_allclose(curve["eti"].sel(config="a", k=2), alone)


def test_the_default_band_holds_the_unbiased_band_wherever_every_task_has_2k_samples():
    """Half the tasks pass 5% of the time, half 95%: at k = 5 from 10 samples per task every candidate puts
    the unsolved tasks near p = 0, and the band's upper end fell short of the unbiased pass@5 by more than its
    standard error; the band now holds the unbiased estimate's normal band (which holds whatever the shape of p)
    where every task has n >= 2k, and stays the model's beyond."""
    from bayespass.stats.curve import unbiased_band
    from bayespass.stats.kernels import unbiased_passk_moments

    rng = np.random.default_rng(5)
    p = np.where(np.arange(200) % 2 == 0, 0.05, 0.95)
    counts = bp.make_counts(np.full((1, 200), 10), rng.binomial(10, p)[None])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bp.fit(counts)
    ks = [1, 2, 5, 10, 50]
    u, v = unbiased_passk_moments(counts["n"].values, counts["c"].values, ks)
    data = unbiased_band(xr.DataArray(u, dims=("config", "k")), xr.DataArray(v, dims=("config", "k")), 0.9)
    band = bp.passk_curve(idata, k=ks, ci_prob=0.9)["eti"]
    with bp.rc_context({"stats.unbiased_band": False}):
        before = bp.passk_curve(idata, k=ks, ci_prob=0.9)["eti"]
    lo, hi = (band.sel(ci_bound=b).values[0] for b in ("lower", "upper"))
    dlo, dhi = (data.sel(ci_bound=b).values[0] for b in ("lower", "upper"))
    assert np.isnan(dlo[3:]).all()  # k = 10, 50: no task has 2k samples
    assert (lo[:3] <= dlo[:3] + 1e-12).all() and (hi[:3] >= dhi[:3] - 1e-12).all()
    assert hi[2] > before.sel(ci_bound="upper").values[0, 2] + 0.005  # k = 5: it was short of the unbiased band
    np.testing.assert_array_equal(band.values[:, 3:], before.values[:, 3:])  # beyond: the model's band as before
    np.testing.assert_array_equal(monotone_band(band).values, band.values)


def test_a_fit_without_stored_draws_gives_the_curve_on_the_grid_a_fit_stores():
    """passk_curve(fit) of a fit without its passk group (a stack's candidate, a group deleted) was a TypeError."""
    rng = np.random.default_rng(5)
    n = np.full((1, 60), 8)
    counts = bp.make_counts(n, rng.binomial(n, rng.beta(0.5, 0.7, n.shape)))
    fit = bp.fit(counts, "bb", "eb", seed=2, progressbar=False)
    stored = bp.passk_curve(fit)
    del fit["passk"]
    again = bp.passk_curve(fit)
    np.testing.assert_array_equal(again["k"].values, stored["k"].values)
    np.testing.assert_allclose(again["mean"].values, stored["mean"].values, atol=0.01)


def test_the_table_names_configs_none_of_whose_samples_passed(tmp_path):
    """Beyond the samples drawn a config with no success has a mean set by the prior's shape near 0 (pass@100
    0.1-0.2 from 40 failures): the caption names it and says to report the band's upper end."""
    from typer.testing import CliRunner

    from bayespass.cli import app
    from bayespass.stats.curve import curve_table, none_passed_note

    g = np.random.default_rng(4)
    n = np.full((3, 30), 4)
    c = np.stack([np.zeros(30, int), g.binomial(4, 0.4, 30), np.r_[1, np.zeros(29, int)]])  # the third: 1 of 120
    counts = bp.make_counts(n, c, config=["never", "some", "once"])
    note = none_passed_note(counts)
    assert "No sample of 'never' passed (120 samples)" in note and "'once'" not in note and "'some'" not in note
    assert none_passed_note(counts.isel(config=[1, 2])) == "" and none_passed_note(None) == ""
    cur = bp.passk_curve(bp.fit(counts.isel(config=[0]), "bb", "eb", progressbar=False), [1, 100])
    assert cur["mean"].sel(k=100).item() > 0.02  # the prior's mean the caption warns of
    assert note in curve_table(cur, counts=counts.isel(config=[0])).note and "No sample" not in curve_table(cur).note
    bp.write_counts(counts, tmp_path / "c.csv")
    res = CliRunner().invoke(app, ["fit", str(tmp_path / "c.csv"), "--model", "bb", "--out", str(tmp_path / "f.nc")])
    assert res.exit_code == 0, res.output
    assert "No sample of 'never' passed (120 samples)" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["curve", str(tmp_path / "f.nc"), "--k", "1,100"])
    assert res.exit_code == 0 and "No sample of 'never' passed" in " ".join(res.output.split()), res.output


@pytest.mark.filterwarnings("ignore::bayespass.models.eb.FitWarning")
def test_the_table_says_when_few_tasks_leave_the_mean_to_the_priors():
    """On 10 tasks of a low pass rate model from 2 samples each the default's pass@10 mean was biased +0.09
    (benchmarks/RESULTS.md, "Ten and twenty tasks per config"): the caption names configs with fewer than 40 tasks."""
    from bayespass.stats.curve import FEW_TASKS, counts_notes, curve_table, few_tasks_note

    g = np.random.default_rng(5)
    n = np.full((2, 60), 2)
    n[0, 12:] = 0  # 12 observed tasks; the other config 60
    counts = bp.make_counts(n, g.binomial(n, 0.3), config=["smoke", "full"])
    note = few_tasks_note(counts)
    assert "'smoke' (12 tasks)" in note and "'full'" not in note and "read the band" in note
    assert few_tasks_note(counts.isel(config=[1])) == "" and few_tasks_note(None) == ""
    assert FEW_TASKS == 40 and few_tasks_note(counts.isel(task=slice(0, FEW_TASKS - 1), config=[1])) != ""
    assert few_tasks_note(counts.isel(task=slice(0, FEW_TASKS), config=[1])) == ""
    assert counts_notes(counts) == few_tasks_note(counts)  # every config passed some sample
    cur = bp.passk_curve(bp.fit(counts.isel(config=[0]), "bb", "eb", progressbar=False), [1, 10])
    assert "Few tasks: 'smoke' (12 tasks)" in curve_table(cur, counts=counts.isel(config=[0])).note
