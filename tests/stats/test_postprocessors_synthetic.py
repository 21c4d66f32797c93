"""Acceptance of the post-processors on synthetic-coder runs with known truth (real execution)."""

import numpy as np
import pytest

import bayespass as bp
from bayespass.execution.fuzz import fuzzed_suite
from bayespass.generate.synthetic import SyntheticCoder
from bayespass.stats.gating import gate, gate_table
from bayespass.stats.incoherence import incoherence
from bayespass.stats.metrics import metric_table
from bayespass.stats.passk import cons_at_k
from bayespass.stats.reliability import reliability, reliability_table


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    suite = bp.load_suite("humaneval")
    coder = SyntheticCoder(suite, seed=0)
    recs = [r for T in (0.4, 0.8, 1.2) for r in coder.generate(k=10, temperature=T, seed=1)]
    out = tmp_path_factory.mktemp("run")
    ds = bp.execute(recs, suite, out=out, reuse=[coder.run_dir], progress=False)
    return suite, coder, recs, ds


def test_crc_silent_failure_controlled_over_200_splits(run):
    *_, ds = run
    g = gate(ds, alpha=0.1, n_splits=200, seed=0)
    sil = g.silent.sel(rule="behaviour-CRC").mean("split").values
    assert np.all(sil <= 0.1 + 0.02), sil
    lp = g.silent.sel(rule="logprob-CRC").mean("split").values
    assert np.all(lp <= 0.1 + 0.02), lp
    tab = gate_table(g)
    # the baselines: pass@1 answers always; best-of-K is an upper bound on pass@1's effective rate
    p1 = tab[tab.rule == "pass@1"].effective.values
    bk = tab[tab.rule == "best-of-K"].effective.values
    assert np.all(bk >= p1) and np.all(tab[tab.rule == "pass@1"].abstention == 0)


def test_reliability_level_coverage(run):
    *_, ds = run
    r = reliability(ds, alpha=0.1, n_splits=200, seed=0)
    tab = reliability_table(r).to_dataframe()
    # 20-30% of the tasks have no correct sample at K = 10: no set covers 90%, and the table says so (it printed
    # coverage 1.0, counting a task without a correct class as covered by the set of every class)
    unsolved = np.isinf(r.score.values).mean(1)
    assert np.all(unsolved > 0.1) and np.all(np.isinf(tab.qhat))
    np.testing.assert_allclose(tab.coverage, 1 - unsolved, atol=0.02)
    assert "qhat inf: no set of the sampled classes covers 1 - alpha = 0.9" in reliability_table(r).note
    alpha = float(unsolved.max()) + 0.05  # above the share without a correct sample: a set size covers 1 - alpha
    r = reliability(ds, alpha=alpha, n_splits=200, seed=0)
    tab = reliability_table(r)
    assert np.all(np.isfinite(tab.qhat)) and np.all(tab.coverage >= 1 - alpha - 0.02) and "qhat inf" not in tab.note
    # at confidence = the calibration reliability level, the mode alone covers
    gap = (r.mode_coverage - r.reliability).mean("split").values
    assert np.all(gap >= -0.02), gap
    assert np.all((tab.level_lo <= tab.level) & (tab.level <= tab.level_hi))


def test_sequential_stopping_saves_samples_and_keeps_coverage(run, tmp_path):
    suite, coder, *_ = run
    recs = coder.generate(k=60, temperature=0.4, seed=2)
    ds = bp.execute(recs, suite, out=tmp_path, reuse=[coder.run_dir], progress=False)
    alpha = float(np.isinf(reliability(ds, n_splits=1).score.values).mean()) + 0.05  # a set size can cover 1 - alpha
    r = reliability(ds, alpha=alpha, n_splits=100, seed=0)
    assert float(r.saved[0]) > 0.2
    assert float(r.coverage_seq.mean()) >= 1 - alpha - 0.02
    assert float((r.mode_coverage_seq - r.reliability_seq).mean()) >= -0.02


def test_incoherence_bound_on_every_task(run, tmp_path):
    suite, coder, recs, ds = run
    fz = fuzzed_suite(suite, 300)
    tasks = [t for t in coder.tasks if t in fz.tasks][:25]
    sub = [r for r in recs if r["task_id"] in set(tasks)]
    fds = bp.execute(sub, fz, out=tmp_path, progress=False, max_timeouts=3)
    inc = incoherence(fds, samples=ds, n_mc=500, n_repeats=20, seed=0)
    ok = np.isfinite(inc.I.values)
    assert ok.sum() == 3 * len(tasks)
    assert bool(inc.bound_holds.all())
    assert float((np.abs(inc.I_mc - inc.I) <= inc.attrs["eps"]).mean()) >= 0.95
    # tasks whose every sample matches the canonical solution everywhere have I = E = 0
    assert np.all(inc.I.values[inc.E.values == 0] == 0)


def test_metric_table(run):
    *_, ds = run
    tab = metric_table(ds, k=(1, 5, 10))
    truth_like = ds.correct.where(ds.exists).mean(("task", "sample")).values
    assert np.allclose(tab["pass@1"].values, truth_like)
    assert np.all(tab["pass@10"] >= tab["pass@1"]) and "reading" in tab
    assert np.all((tab["maj@10"] >= 0) & (tab["maj@10"] <= 1))


def test_metric_table_extends_inferencedata(run):
    import arviz as az

    *_, ds = run
    idata = az.InferenceData(samples=ds)
    tab = metric_table(idata, k=(1, 10), extend_inferencedata=True)
    assert "metric_table" in idata.groups()
    got = idata["metric_table"]
    assert list(got.config.values) == list(tab.config)
    np.testing.assert_allclose(got["pass@10"].values, tab["pass@10"].values)
    assert list(got["reading"].values) == list(tab["reading"])
    with pytest.raises(TypeError, match="extend_inferencedata=True needs"):
        metric_table(ds, extend_inferencedata=True)


def test_metric_table_cons_at_the_fewest_samples_of_any_task(run):
    from itertools import combinations

    *_, ds = run
    cut = ds.copy(deep=True)
    first = cut.task.values[0]
    gone = dict(task=first, sample=cut.sample.values[7:])  # one task keeps 7 of its 10 samples
    for var in [v for v in cut.data_vars if cut[v].dtype == bool and {"task", "sample"} <= set(cut[v].dims)]:
        cut[var].loc[gone] = False
    tab = metric_table(cut, k=(1, 5))
    assert "cons@7" in tab and np.isfinite(tab["cons@7"]).all()
    counts = bp.to_counts(cut)
    for j, cfg in enumerate(counts.config.values):
        vals = []
        for t in counts.task.values:
            n, c = int(counts.n.sel(config=cfg, task=t)), int(counts.c.sel(config=cfg, task=t))
            if n == 0:
                continue
            ok = [1] * c + [0] * (n - c)  # brute force: every 7 of the n samples, majority correct
            combos = list(combinations(ok, 7))
            vals.append(sum(sum(x) > 3.5 for x in combos) / len(combos))
        assert tab["cons@7"].iloc[j] == pytest.approx(np.mean(vals), abs=1e-12)


def test_metric_table_takes_k_per_config_where_one_config_has_a_task_with_one_sample(run):
    """One task of one config with 1 sample set K = 1 for every config (cons@1 = pass@1, reading meaningless).

    Seen on real MBPP generations: ministral-8b had one task with 1 sample, so gpt-4o's 50 samples per task were
    read as cons@1. K is now each config's own where the configs differ, and maj is named by what it counts.
    """
    *_, ds = run
    cut = ds.copy(deep=True)
    cfg0, first = cut.config.values[0], cut.task.values[0]
    gone = dict(config=cfg0, task=first, sample=cut.sample.values[1:])
    for var in [v for v in cut.data_vars if cut[v].dtype == bool and {"task", "sample"} <= set(cut[v].dims)]:
        cut[var].loc[gone] = False
    tab = metric_table(cut, k=(1, 5)).to_dataframe()
    counts = bp.to_counts(cut)
    full_n = int(counts.n.isel(config=1).max())
    assert list(tab["K"]) == [1] + [full_n] * (counts.config.size - 1)
    assert "cons@1" not in tab and "maj@n" in tab  # config 0's tasks have different n
    assert tab["reading"].iloc[0].startswith("n/a")
    for j in range(1, counts.config.size):
        want = float(cons_at_k(counts.isel(config=[j]), full_n).values[0, 0])
        assert tab["cons@K"].iloc[j] == pytest.approx(want, abs=1e-12)
        assert tab["cons@K"].iloc[j] != pytest.approx(tab["pass@1"].iloc[j])
    even = metric_table(ds, k=(1,)).to_dataframe()  # every task n samples: columns named by n, as before
    assert f"cons@{full_n}" in even and f"maj@{full_n}" in even and "K" not in even


def test_set_size_legend_says_when_every_set_holds_all_classes():
    import matplotlib.pyplot as plt
    import xarray as xr

    from bayespass.stats.reliability import plot_set_size

    # config a: q infinite in most splits (more than alpha of its tasks had no correct class); b: q = 2
    rel = xr.Dataset({"qhat": (("config", "split"), [[np.inf, np.inf, 3.0], [2.0, 2.0, 1.0]]),
                      "n_classes": (("config", "task"), [[1, 2, 3], [1, 3, 4]]),
                      "entropy": (("config", "task"), [[0.0, 0.5, 1.0], [0.0, 0.9, 1.2]]),
                      "level": ("config", [0.5, 0.9])},
                     coords={"config": ["a", "b"]}, attrs={"alpha": 0.1})
    ax = plot_set_size(rel)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a (every set holds all classes, level 0.50)", "b (median q = 2, level 0.90)"]
    sizes = [np.round(col.get_offsets()[:, 1]) for col in ax.collections]  # jitter within +-0.12
    np.testing.assert_array_equal(sizes[0], [1, 2, 3])
    np.testing.assert_array_equal(sizes[1], [1, 2, 2])
    plt.close("all")
