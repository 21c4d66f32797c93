import numpy as np
import pytest
from scipy import stats

import bayespass as bp
from bayespass.execution import engine
from bayespass.generate.mutants import mutants, variants
from bayespass.generate.synthetic import SyntheticCoder


@pytest.fixture(scope="module")
def coder():
    return SyntheticCoder(bp.load_suite("humaneval"), seed=0)


def test_mutants_and_variants_are_programs():
    prog = "def f(xs):\n    return [x + 1 for x in xs if x > 0]\n"
    ms = mutants(prog, "f", max_n=10)
    assert len(ms) >= 3 and all(m != prog for m in ms)
    for m in ms + variants(prog, "f"):
        compile(m, "<m>", "exec")


@pytest.mark.slow
def test_executed_correctness_matches_truth(coder):
    suite = coder.suite
    recs = coder.generate(k=200, temperature=0.8, seed=1)
    ds = engine.execute(recs, suite, out=coder.run_dir, progress=False)
    truth = coder.truth(0.8)["p_true"].sel(task=ds.task.values).values
    c = ds.correct.sum("sample").values[0]
    n = ds.exists.sum("sample").values[0]
    assert (n == 200).all()
    inner = (truth > 0) & (truth < 1)
    assert np.all(c[truth == 0] == 0) and np.all(c[truth == 1] == 200)
    z2 = (c[inner] - n[inner] * truth[inner]) ** 2 / (n[inner] * truth[inner] * (1 - truth[inner]))
    pval = stats.chi2.sf(z2.sum(), df=inner.sum())
    assert pval > 1e-3, pval
    # every executed sample's correctness equals the coder's ground truth
    table = engine.read_samples(recs)
    got = ds.correct.values[0][[list(ds.task.values).index(t) for t in table.task], table["sample"].values]
    assert np.array_equal(got, table["correct_true"].values)


def test_pool_mutants_wrong_on_gold_half_and_behaviour_diversity(coder):
    suite = coder.suite
    n_behaviours = np.array([len(coder.pools[t]["wrong"]) for t in coder.tasks])
    assert np.mean(n_behaviours >= 3) >= 0.8
    recs = [{"task_id": t, "solution": code, "config": "w"} for t in coder.tasks[:40]
            for cluster in coder.pools[t]["wrong"] for code in cluster[:1]]
    ds = engine.execute(recs, suite, out=coder.run_dir, progress=False)
    table = engine.read_samples(recs)
    for t, s in zip(table.task, table["sample"], strict=True):
        _, gold = suite.split(t)
        v = ds.verdict.sel(config="w", task=t, sample=s).values
        assert not np.all(v[gold] == 1), t


def test_temperature_and_determinism(coder):
    a = coder.generate(k=5, temperature=0.8, seed=3)
    b = coder.generate(k=5, temperature=0.8, seed=3)
    assert [r["solution"] for r in a] == [r["solution"] for r in b]
    p_lo, p_hi = coder.truth(0.4)["p_true"].values, coder.truth(1.6)["p_true"].values
    inner = (coder.p_base > 0) & (coder.p_base < 1)
    assert np.all(np.abs(p_hi[inner] - 0.5) <= np.abs(p_lo[inner] - 0.5) + 1e-12)
    lp = np.array([r["mean_logprob"] for r in a])
    ok = np.array([r["correct_true"] for r in a])
    assert lp[ok].mean() > lp[~ok].mean()
    with pytest.raises(ValueError, match="temperature must be > 0"):
        coder.generate(k=1, temperature=0)


def test_tasks_asked_one_at_a_time_are_independent(coder):
    # one random stream per call made a task's j-th sample pass together with every other task's j-th wherever
    # tasks were asked for one at a time (the --until-width rounds, `bayespass generate`): correctness was
    # comonotone across tasks, and the dataset's pass rate off its truth by 0.10 on 30 tasks x 5 samples
    tasks = coder.tasks[:60]
    whole = coder.generate(k=3, temperature=0.8, seed=5, tasks=tasks)
    one_by_one = [r for t in tasks for r in coder.generate(k=3, temperature=0.8, seed=5, tasks=[t])]
    assert whole == one_by_one  # a task's samples do not depend on which tasks are asked with it
    p = coder.truth(0.8)["p_true"].sel(task=tasks).values
    solved = np.array([[coder.generate(k=1, temperature=0.8, seed=s, tasks=[t])[0]["correct_true"] for t in tasks]
                       for s in range(40)])
    # the number of tasks solved by the s-th draw: independent tasks give it the Poisson-binomial variance
    # (the sample variance over 40 draws has a relative sd of about 0.23); comonotone ones gave over 10x it
    assert solved.sum(1).var(ddof=1) / (p * (1 - p)).sum() < 2.0
