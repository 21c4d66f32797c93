"""benchmarks/calibration.py: the real-data sets it calibrates on, and the draws of a real cell."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def calibration(load_benchmark):
    return load_benchmark("calibration")


def test_the_hard_set_is_the_tuning_configs_on_the_tasks_they_pass_least(calibration):
    tuning, hard = calibration.real_counts("tuning"), calibration.real_counts("hard")
    if tuning is None:
        pytest.skip("data/real_mbpp/counts.csv is absent")
    rate = (tuning.c / tuning.n).groupby(tuning.task).mean()
    kept = set(hard.task)
    assert kept and kept < set(tuning.task)
    assert (rate[list(kept)] < calibration.HARD_RATE).all()
    assert (rate.drop(list(kept)) >= calibration.HARD_RATE).all()
    # the same configs, each on every kept task with its own counts
    assert hard.groupby(["model", "temperature"]).ngroups == tuning.groupby(["model", "temperature"]).ngroups
    assert (hard.groupby(["model", "temperature"]).size() == len(kept)).all()
    merged = hard.merge(tuning, on=["model", "temperature", "task"], suffixes=("", "_all"))
    assert len(merged) == len(hard) and (merged.c == merged.c_all).all() and (merged.n == 50).all()
    # a low pass rate benchmark: far below the tuning set's pass@1
    assert (hard.c / hard.n).mean() < 0.5 < (tuning.c / tuning.n).mean()
    with pytest.raises(ValueError, match="allowed"):
        calibration.real_counts("easy")


def test_a_real_cell_draws_m_of_each_tasks_samples_and_keeps_the_full_reference(calibration):
    hard = calibration.real_counts("hard")
    if hard is None:
        pytest.skip("data/real_mbpp/counts.csv is absent")
    counts, ref, n_cfg = calibration.real_cell(hard, m=5, reps=3, seed=0)
    assert n_cfg == 12 and counts.sizes["config"] == 36
    assert (counts.n.values == 5).all() and (counts.c.values >= 0).all() and (counts.c.values <= 5).all()
    # a task never solved in its 50 samples is never solved in 5 of them, one always solved always is
    first = hard.groupby(["model", "temperature"]).get_group(next(iter(hard.groupby(["model", "temperature"]).groups)))
    c5 = counts.c.values[:3]  # the first config's three replicates, tasks in its row order
    assert (c5[:, first.c.to_numpy() == 0] == 0).all() and (c5[:, first.c.to_numpy() == 50] == 5).all()
    full = calibration.full_reference(first.n.to_numpy(), first.c.to_numpy(), calibration.REAL_KS)
    np.testing.assert_allclose(ref[:3], np.tile(full, (3, 1)))
    np.testing.assert_allclose(full[0], (first.c / first.n).mean())
