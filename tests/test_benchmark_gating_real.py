"""benchmarks/gating_real.py: the gate's and the reliability sets' rows per alpha, config and rule."""

import numpy as np
import pytest
import xarray as xr


@pytest.fixture(scope="module")
def gating_real(load_benchmark):
    return load_benchmark("gating_real")


def _samples(verdict):
    """An executed-samples dataset (config, task, sample, test) of verdicts (1 pass, 2 fail), one program each."""
    c, t, k, m = verdict.shape
    dims = ("config", "task", "sample", "test")
    return xr.Dataset({"verdict": (dims, verdict.astype(np.int8)), "digest": (dims, np.zeros(verdict.shape, np.int64)),
                       "exists": (dims[:3], np.ones((c, t, k), bool)),
                       "program": (dims[:3], np.arange(c * t * k).reshape(c, t, k)),
                       "is_plus": (("task", "test"), np.zeros((t, m), np.int8)),
                       "correct": (dims[:3], (verdict == 1).all(-1))},
                      coords={"config": ["tied", "split"], "task": [f"t{i}" for i in range(t)],
                              "sample": np.arange(k), "test": np.arange(m)})


def test_rows_per_rule_and_the_tables(gating_real, capsys):
    t, k = 160, 5
    v = np.ones((2, t, k, 3), int)
    v[0, ::4] = 2  # 'tied': every task's samples alike, a quarter of the tasks wrong: plain CRC answers none
    v[1, ::4, :2] = 2  # 'split': on a quarter of the tasks 2 of 5 samples wrong (f_max 0.6), sample 0 among them
    ds = _samples(v)
    rows = gating_real.measure(ds, [0.1], 100, 0)
    got = {(r["config"], r["rule"]): r for r in rows}
    rules = {"pass@1", "best-of-K", "behaviour-CRC", "behaviour-CRC/cons", "behaviour-CRC/random"}
    assert {r for c, r in got if c == "tied"} == rules | {"reliability-set"}  # logprob-CRC left out: no logprobs
    for cfg in ("tied", "split"):  # sample 0 is wrong on a quarter of the tasks: the test splits' mean share
        assert got[cfg, "pass@1"]["silent"] == pytest.approx(0.25, abs=0.02)
        assert got[cfg, "pass@1"]["abstention"] == 0
    assert got["tied", "behaviour-CRC"]["abstention"] == 1 and got["tied", "behaviour-CRC"]["silent"] == 0
    rnd = got["tied", "behaviour-CRC/random"]
    assert rnd["abstention"] < 0.9 and rnd["silent"] <= 0.1 + 3 * rnd["silent_se"]
    split = got["split", "behaviour-CRC"]  # the wrong tasks score lower: the gate answers the rest, all right
    assert split["silent"] == 0 and split["effective"] == pytest.approx(1 - split["abstention"])
    assert got["split", "best-of-K"]["silent"] == 0  # a right sample on every task
    assert got["tied", "reliability-set"]["coverage"] == pytest.approx(0.75, abs=0.02)  # no right class on 1/4
    assert got["split", "reliability-set"]["coverage"] >= 0.9 - 0.02
    gating_real.report(rows, ds)
    out = capsys.readouterr().out
    assert "| 0.1 | behaviour-CRC | 2 | 0.000 |" in out
    assert "| 0.1 | 2 | " in out and "2 configs x 160 tasks x 5 samples" in out


def test_samples_of_the_real_configs(gating_real):
    if not gating_real.REAL.exists():
        pytest.skip("the real MBPP generations (../shared/data/real) are not here")
    recs = gating_real.samples(1, ["Mbpp/2", "Mbpp/3"], 2)
    assert sorted(r["task_id"] for r in recs) == ["Mbpp/2", "Mbpp/2", "Mbpp/3", "Mbpp/3"]
    assert {r["config"] for r in recs} == {"claude_sonnet_4|T=0.2"}
