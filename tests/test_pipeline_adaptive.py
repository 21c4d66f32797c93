"""``bayespass run --until-width``: generation in rounds steered by :func:`bayespass.allocate`."""

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import bayespass as bp
from bayespass.pipeline import RunConfig, run

FAST = dict(models=("bb",), main_model="bb", methods=("eb",), fuzz_n=0, n_splits=10, max_mutants=10)


def _cells(path):
    from bayespass.execution.samples_io import _config_of

    recs = [json.loads(line) for line in path.read_text().splitlines()]
    return recs, Counter((_config_of(r, "samples"), r["task_id"]) for r in recs)


def _band(rundir, k):
    import arviz as az

    from bayespass.pipeline.adaptive import band_width

    return band_width(az.from_netcdf(str(rundir / "fits" / "bb-eb.nc")), k)


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("adaptive") / "run"
    cfg = RunConfig(k=3, temperatures=(0.6, 1.2), tasks=24, until_width=0.2, max_samples=600, width_k=10, **FAST)
    return out, cfg, run(out, cfg, echo=None)


def test_rounds_stop_when_the_band_is_narrow_enough(synthetic_run):
    out, cfg, tables = synthetic_run
    state = json.loads((out / "rounds.json").read_text())
    rounds = state["rounds"]
    assert len(rounds) >= 2 and rounds[-1]["stop"] == "reached"
    assert rounds[0]["widest"] > cfg.until_width >= rounds[-1]["widest"]
    assert all(r["stop"] is None for r in rounds[:-1]) and all(r["widest"] > cfg.until_width for r in rounds[:-1])
    # the run's own main fit (refitted by the fit stage) has the band the last round measured
    final = _band(out, cfg.width_k)
    assert max(final.values()) == pytest.approx(rounds[-1]["widest"], rel=1e-9)
    assert max(final.values()) <= cfg.until_width
    # every round's samples are in samples.jsonl and counted: n per (config, task) equals the targets
    recs, have = _cells(out / "samples.jsonl")
    targets = {tuple(key.split("\t")): n for key, n in state["targets"].items()}
    assert dict(have) == targets and rounds[-1]["samples"] == len(recs)
    counts = bp.read_counts(out / "counts.nc")
    for (conf, task), n in targets.items():
        assert int(counts.n.sel(config=conf, task=task)) == n
    assert list(tables["rounds"]["samples"]) == [r["samples"] for r in rounds]


def test_a_resumed_run_at_another_band_probability_measures_that_band(synthetic_run, tmp_path):
    import dataclasses
    import shutil

    out, cfg, _ = synthetic_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    before = json.loads((copy / "rounds.json").read_text())["rounds"]
    tables = run(copy, dataclasses.replace(cfg, ci_prob=0.5), echo=None)
    after = json.loads((copy / "rounds.json").read_text())["rounds"]
    assert after[:-1] == before and all(r["ci_prob"] == 0.9 for r in before)
    last = after[-1]  # the same samples measured at 50%: narrower, so the rounds stop there
    assert last["ci_prob"] == 0.5 and last["samples"] == before[-1]["samples"] and last["stop"] == "reached"
    assert last["widest"] < 0.8 * before[-1]["widest"]
    assert max(_band(copy, cfg.width_k).values()) > last["widest"]  # the helper measures at rcParams' 90%
    assert list(tables["rounds"]["ci_prob"]) == [0.9] * len(before) + [0.5]


def test_the_extra_samples_go_where_the_band_is_decided(synthetic_run):
    out, cfg, _ = synthetic_run
    counts = bp.read_counts(out / "counts.nc")
    n, c = counts.n.values, counts.c.values
    assert n.min() == cfg.k and n.max() > cfg.k  # not uniform
    # at k = 10, a task that passed every one of its first K samples decides little; the allocation
    # gives its samples to tasks with failures (the all-fail and mixed tasks)
    first_all_pass = n == c
    extra = n - cfg.k
    assert extra[~first_all_pass].mean() > extra[first_all_pass].mean()


def test_a_larger_budget_resumes_the_rounds_without_redrawing(synthetic_run, tmp_path):
    import shutil

    out, cfg, _ = synthetic_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    before = (copy / "samples.jsonl").read_text()
    narrower = RunConfig(**{**cfg.__dict__, "until_width": 0.12, "max_samples": 700})
    run(copy, narrower, echo=None)
    after = (copy / "samples.jsonl").read_text()
    assert after.startswith(before) and len(after) > len(before)  # earlier samples are kept, not redrawn
    rounds = json.loads((copy / "rounds.json").read_text())["rounds"]
    assert rounds[-1]["stop"] in ("reached", "max_samples (700) drawn")
    assert rounds[-1]["samples"] <= 700 + 48 and max(_band(copy, 10).values()) == pytest.approx(
        rounds[-1]["widest"], rel=1e-9)


def test_replayed_samples_are_drawn_in_a_random_order_until_they_run_out(tmp_path):
    from bayespass.generate.hf import write_samples
    from bayespass.generate.synthetic import SyntheticCoder

    suite = bp.load_suite("humaneval")
    tasks = list(suite.tasks)[:12]
    coder = SyntheticCoder(suite, tasks=tasks, max_mutants=10)
    pool = [{"task_id": r["task_id"], "solution": r["solution"], "model": "mine", "temperature": 0.8}
            for r in coder.generate(k=6, temperature=0.8, seed=5)]
    path = write_samples(pool, tmp_path / "mine.jsonl")
    cfg = RunConfig(coder="samples", samples=str(path), k=2, until_width=0.01, max_samples=500, **FAST)
    run(tmp_path / "r", cfg, echo=None)
    recs, have = _cells(tmp_path / "r" / "samples.jsonl")
    rounds = json.loads((tmp_path / "r" / "rounds.json").read_text())["rounds"]
    assert "exhausted" in rounds[-1]["stop"] and len(rounds) >= 2
    assert len(recs) == len(pool) and set(have.values()) == {6}  # the target is out of reach: all are drawn
    for task in tasks:  # all of a task's samples are drawn, each once
        drawn = [r["solution"] for r in recs if r["task_id"] == task]
        assert sorted(drawn) == sorted(r["solution"] for r in pool if r["task_id"] == task)


def test_replayed_samples_sorted_passes_first_are_drawn_at_random(tmp_path):
    # taken in file order, a file that lists each task's passing samples first gave the first round nothing but
    # passes wherever a task had K of them: pass@1 read 1.0 for a pool that passes half the time
    from bayespass.generate.hf import write_samples
    from bayespass.generate.synthetic import SyntheticCoder
    from bayespass.pipeline.adaptive import _order

    flags = [[_order(0, ("m|T=0.8", f"HumanEval/{t}"), 20)[j] < 10 for j in range(2)] for t in range(40)]
    assert 0.35 < np.mean(flags) < 0.65  # 80 draws from pools of 10 passes listed before 10 failures
    suite = bp.load_suite("humaneval")
    tasks = list(suite.tasks)[:12]
    coder = SyntheticCoder(suite, tasks=tasks, max_mutants=10)
    pool = sorted(({"task_id": r["task_id"], "solution": r["solution"], "model": "m", "temperature": 0.8,
                    "correct_true": r["correct_true"]} for r in coder.generate(k=6, temperature=0.8, seed=5)),
                  key=lambda r: (r["task_id"], not r["correct_true"]))  # each task's passes first
    path = write_samples(pool, tmp_path / "sorted.jsonl")
    cfg = RunConfig(coder="samples", samples=str(path), k=2, until_width=0.01, max_samples=24, **FAST)
    run(tmp_path / "r", cfg, echo=None)
    recs, _ = _cells(tmp_path / "r" / "samples.jsonl")
    assert len(recs) == 24
    for task in tasks:  # the first round's two: the sorted pool's samples at the cell's random order
        mine = [r for r in pool if r["task_id"] == task]
        want = [mine[j]["solution"] for j in _order(cfg.seed, ("m|T=0.8", task), len(mine))[:2]]
        assert [r["solution"] for r in recs if r["task_id"] == task] == want


def test_bad_round_settings_are_refused_before_any_work(tmp_path):
    for kw, msg in ((dict(until_width=1.5), "until_width must be a band width in \\(0, 1\\)"),
                    (dict(until_width=0.1, max_samples=0), "max_samples"),
                    (dict(until_width=0.1, width_k=0), "width_k"),
                    (dict(max_samples=500), "max_samples=500 applies only when generating in rounds"),
                    (dict(round_size=10), "round_size=10 applies only"),
                    (dict(max_new_tokens=0), "max_new_tokens must be a positive integer")):
        with pytest.raises(ValueError, match=msg):
            RunConfig(**kw)
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "run", "--until-width", "2", "--out",
                          str(tmp_path / "x")], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "--until-width must be a band width in (0, 1)" in res.stderr
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "run", "--max-samples", "50", "--out",
                          str(tmp_path / "x")], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "--max-samples 50 applies only when generating in rounds: give --until-width" \
        in res.stderr
    assert not (tmp_path / "x").exists()


def test_band_width_is_the_eti_width_of_passk_curve():
    from bayespass.pipeline.adaptive import band_width

    counts = bp.make_counts(np.full((2, 30), 5), np.tile(np.arange(6), (2, 5)), config=["a", "b"])
    idata = bp.fit(counts, "bb", "eb", seed=1)
    eti = bp.passk_curve(idata, [7])["eti"].sel(k=7)
    w = band_width(idata, 7)
    assert w["a"] == pytest.approx(float(eti.sel(config="a", ci_bound="upper") - eti.sel(config="a",
                                                                                        ci_bound="lower")))
    assert set(w) == {"a", "b"}


def test_each_task_draws_its_samples_with_a_seed_of_its_own():
    # the j-th sample of every task was drawn with one seed (run seed and j): a coder keeping one random
    # stream per call (the synthetic coder did) then drew every task's j-th sample from the same uniforms
    from bayespass.pipeline.adaptive import _Source

    class Recorder:
        name, seeds = "recorder", []

        def generate(self, suite, k, *, temperature, seed=0, tasks=None):
            self.seeds.append((tasks[0], seed))
            return [{"task_id": tasks[0], "solution": "pass"}] * k

    src = object.__new__(_Source)
    src.suite, src.seed, src.pool, src.coder = None, 7, None, Recorder()
    src.temperature = {"m|T=0.6": 0.6, "m|T=1.2": 1.2}
    for conf in src.temperature:
        for task in ("HumanEval/0", "HumanEval/1", "HumanEval/2"):
            for have in (0, 1, 2):
                src.more((conf, task), have, 1)
    seeds = [s for _, s in Recorder.seeds]
    assert len(set(seeds)) == len(seeds) == 18  # a seed per (config, task, j)
    again = object.__new__(_Source)
    again.__dict__.update(src.__dict__)
    again.more(("m|T=1.2", "HumanEval/1"), 2, 1)  # and the same again: a resumed run redraws the same samples
    assert Recorder.seeds[-1][1] == seeds[-4]
