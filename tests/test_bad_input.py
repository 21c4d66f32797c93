"""Bad input gets a clear error naming the parameter, the value and what is allowed, before any work."""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import bayespass as bp
from bayespass.cli import app

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "data" / "examples" / "counts_small.csv"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_read_counts_of_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is a directory, not a file, and holds no counts.nc"):
        bp.read_counts(tmp_path)
    res = cli("estimate", tmp_path)
    assert res.exit_code == 2 and "is a directory" in res.output and "Traceback" not in res.output
    # a run directory (what 'bayespass execute' writes) reads as its counts.nc
    counts = bp.read_counts(EXAMPLE)
    bp.write_counts(counts, tmp_path / "counts.nc")
    got = bp.read_counts(tmp_path)
    assert np.array_equal(got.n.values, counts.n.values) and np.array_equal(got.c.values, counts.c.values)
    with pytest.raises(ValueError, match=r"correctness='base'.*no samples.nc"):
        bp.read_counts(tmp_path, correctness="base")
    res = cli("estimate", tmp_path, "--k", "1")
    assert res.exit_code == 0, res.output
    res = cli("curve", tmp_path)
    assert res.exit_code == 2 and f"'bayespass fit {tmp_path}'" in res.output


def test_fit_out_in_a_missing_directory_fails_before_fitting(tmp_path):
    res = cli("fit", EXAMPLE, "--out", tmp_path / "missing" / "f.nc")
    assert res.exit_code == 2 and "does not exist" in res.output and "wrote" not in res.output


def test_generate_out_is_a_directory(tmp_path):
    """generate --out DIR ended in an IsADirectoryError traceback after the suite's expected outputs were made."""
    from bayespass.generate.hf import generate_to_jsonl

    res = cli("generate", "--model", "synthetic", "--tasks", "2", "--k", "2", "--out", tmp_path)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"error: --out '{tmp_path}' is a directory; pass a file path" in res.output
    with pytest.raises(ValueError, match=r"out='.*' is a directory; pass a file path"):
        generate_to_jsonl(object(), object(), tmp_path, k=1, temperature=0.8)


def test_out_is_checked_without_making_it(tmp_path):
    """The command line checks --out before any work, and a command refused later leaves no empty directory."""
    res = cli("execute", tmp_path / "missing.jsonl", "--out", tmp_path / "a" / "b")
    assert res.exit_code == 2 and "do not exist" in res.output and not (tmp_path / "a").exists()
    (tmp_path / "f").write_text("x")
    res = cli("run", "--quick", "--out", tmp_path / "f" / "r")
    assert res.exit_code == 2 and f"--out '{tmp_path}/f/r': the directory '{tmp_path}/f/r' cannot be made" in res.output


def test_execute_out_is_an_existing_file(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return True\n"}) + "\n")
    out = tmp_path / "file.txt"
    out.write_text("x")
    res = cli("execute", f, "--out", out)
    assert res.exit_code == 2 and "is a file" in res.output


def test_execute_checks_the_samples_before_loading_expected_outputs(tmp_path, monkeypatch):
    from bayespass.execution import groundtruth

    def no_ground_truth(*args, **kwargs):
        raise AssertionError("expected outputs were loaded before the samples were checked")

    monkeypatch.setattr(groundtruth, "ground_truth", no_ground_truth)
    res = cli("execute", tmp_path / "missing.jsonl", "--out", tmp_path / "run")
    assert res.exit_code == 2 and "missing.jsonl' do not exist" in res.output, res.output
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"task_id": "Mbpp/2", "solution": "x = 1\n"}) + "\n")
    res = cli("execute", f, "--out", tmp_path / "run")
    assert res.exit_code == 2 and "none of the 1 task id(s) is in suite 'humaneval'" in res.output, res.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--k", "0"], "--k must be a positive integer; got 0"),
    (["--temperature", "0"], "--temperature must be > 0 for coder 'some/checkpoint', which samples; 0 (greedy) needs an "
                             "endpoint (--endpoint); got 0.0"),
    (["--temperature", "-0.5", "--endpoint", "http://127.0.0.1:9/v1"],
     "--temperature must be a non-negative number (0: greedy, with an endpoint); got -0.5"),
    (["--temperature", "nan"], "--temperature must be a non-negative number"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1]; got 1.5"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be a positive integer"),
    (["--tasks", "0"], "--tasks must be a positive integer"),
    (["--timeout", "0", "--endpoint", "http://127.0.0.1:9/v1"], "--timeout must be > 0 seconds"),
    (["--device", "gpu"], "--device must be 'auto', 'cpu', 'cuda', 'cuda:N' (N the GPU's index) or 'mps'; got 'gpu'"),
    (["--dtype", "half"], "--dtype must be one of 'auto', 'float32', 'bfloat16', 'float16'; got 'half'"),
    (["--dtype", "float16", "--endpoint", "http://127.0.0.1:9/v1"],
     "--dtype 'float16' applies only to a transformers model run here"),
])
def test_generate_options_are_checked_before_a_suite_or_model_is_loaded(tmp_path, monkeypatch, args, needle):
    from bayespass.execution import groundtruth

    def no_loading(*a, **kw):
        raise AssertionError("the suite was loaded before the options were checked")

    monkeypatch.setattr(groundtruth, "load_suite", no_loading)
    res = cli("generate", "--model", "some/checkpoint", "--out", tmp_path / "s.jsonl", *args)
    assert res.exit_code == 2 and needle in res.output, res.output
    assert not (tmp_path / "s.jsonl").exists()


def test_binary_samples_file_names_the_file_and_line(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_bytes(b'{"task_id": "HumanEval/0", "completion": "x"}\n\xff\xfe\x00binary\n')
    from bayespass.execution.samples_io import read_samples

    with pytest.raises(ValueError, match=r"s\.jsonl, line 2: not UTF-8 text"):
        read_samples(f)


def test_a_byte_order_mark_is_read_past_and_a_cut_last_line_is_named_as_cut(tmp_path):
    # Windows editors write a UTF-8 byte order mark; json.loads refused the first record for it.
    from bayespass.data.io import read_counts
    from bayespass.execution.samples_io import read_samples

    recs = [json.dumps({"task_id": f"HumanEval/{i}", "completion": "    return 1\n"}) for i in range(2)]
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + "\n".join(recs).encode() + b"\n")
    assert read_samples(f)["task"].tolist() == ["HumanEval/0", "HumanEval/1"]
    c = tmp_path / "c.jsonl"
    c.write_bytes(b'\xef\xbb\xbf{"task": "t0", "n": 3, "c": 1}\n')
    assert int(read_counts(c)["c"].sum()) == 1
    e = tmp_path / "eval_results.json"
    e.write_bytes(b'\xef\xbb\xbf{"eval": {"HumanEval/0": [{"base_status": "pass", "plus_status": "fail"}]}}')
    assert int(read_counts(e, correctness="base")["c"].sum()) == 1
    f.write_text(recs[0] + "\n" + recs[1][:20])  # an interrupted write: the last line cut, no newline
    with pytest.raises(ValueError, match=r"s\.jsonl, line 2: invalid JSON \(.*\); it is the file's last line and "
                                         r"has no newline at its end: its writing was most likely cut short"):
        read_samples(f)
    f.write_text(recs[0][:20] + "\n" + recs[1] + "\n")  # bad JSON elsewhere: no guess about a cut
    with pytest.raises(ValueError, match=r"s\.jsonl, line 1: invalid JSON \([^)]*\)$"):
        read_samples(f)


def test_a_lone_surrogate_in_a_program_names_the_file_line_and_field(tmp_path):
    # JSON escapes a lone surrogate ("\\udcff"); neither a UTF-8 table nor CPython's compile can hold it,
    # and it used to surface as a bare UnicodeEncodeError from pandas, naming no file or sample.
    from bayespass.execution.samples_io import read_samples

    f = tmp_path / "s.jsonl"
    good = json.dumps({"task_id": "HumanEval/0", "completion": "    return 1\n"})
    f.write_text(good + "\n" + '{"task_id": "HumanEval/1", "completion": "    return \'\\udcff\'\\n"}\n')
    with pytest.raises(ValueError, match=r"s\.jsonl, line 2 \(task 'HumanEval/1'\): 'completion' is not valid "
                                         r"Unicode text: it holds a lone surrogate '\\udcff' at character 12"):
        read_samples(f)
    with pytest.raises(ValueError, match=r"sample record 0 .*'model' is not valid Unicode"):
        read_samples([{"task_id": "HumanEval/0", "completion": "x", "model": "q\udcffwen"}])
    assert read_samples([json.loads(good)])["task"].tolist() == ["HumanEval/0"]


def test_a_sample_with_an_empty_config_or_task_id_is_refused_before_execution(tmp_path):
    from bayespass.execution.samples_io import read_samples

    f = tmp_path / "s.jsonl"
    ok = {"task_id": "HumanEval/0", "completion": "    return 1\n", "config": "a"}
    for bad, what in ((dict(ok, config=""), "config"), (dict(ok, config="  "), "config"),
                      (dict(ok, task_id=" "), "task_id")):
        f.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(ValueError, match=rf"s\.jsonl, line 2: the sample's {what} is empty"):
            read_samples(f)


def test_gzipped_samples_read_as_their_jsonl_and_name_their_config_without_suffixes(tmp_path):
    import gzip

    from bayespass.execution.samples_io import read_samples

    lines = [json.dumps({"task_id": f"HumanEval/{i}", "completion": "    return 1\n"}) for i in range(3)]
    (tmp_path / "qwen_T0.8.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    table = read_samples(tmp_path / "qwen_T0.8.jsonl.gz")
    assert table["task"].tolist() == [f"HumanEval/{i}" for i in range(3)]
    assert set(table["config"]) == {"qwen_T0.8"}
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(lines[0].encode() + b"\n\xff\xfe\n"))
    with pytest.raises(ValueError, match=r"bad\.jsonl\.gz, line 2: not UTF-8 text"):
        read_samples(tmp_path / "bad.jsonl.gz")


def test_layer_bwrap_without_bubblewrap(tmp_path):
    if shutil.which("bwrap"):
        pytest.skip("bubblewrap is installed here")
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return True\n"}) + "\n")
    res = cli("execute", f, "--out", tmp_path / "run", "--layer", "bwrap")
    assert res.exit_code == 2 and "needs bubblewrap" in res.output and "Errno" not in res.output
    res = cli("execute", f, "--out", tmp_path / "run", "--layer", "seccomp")
    assert res.exit_code == 2 and "--layer 'seccomp' is not supported" in res.output


@pytest.mark.parametrize("args,needle", [(["--tasks", "-5"], "--tasks must be a positive integer; got -5"),
                                         (["--alpha", "2"], "--alpha must be in (0, 1); got 2"),
                                         (["--workers", "0"], "--workers must be a positive integer; got 0"),
                                         (["--k", "0"], "--k must be a positive integer; got 0"),
                                         (["--width-k", "0", "--until-width", "0.1"], "--width-k must be a positive"),
                                         (["--top-p", "2"], "--top-p must be in (0, 1]; got 2.0"),
                                         (["--fuzz-n", "-1"], "--fuzz-n must be a non-negative integer"),
                                         (["--temperatures", "0.4,x"], "--temperatures must be comma-separated "
                                                                       "numbers; got '0.4,x'"),
                                         (["--temperatures", "0.5,0"], "--temperatures must be > 0 for coder "
                                                                       "'synthetic', which samples"),
                                         (["--device", "cuda:x"], "--device must be 'auto', 'cpu', 'cuda', 'cuda:N'"),
                                         (["--dtype", "fp16"], "--dtype must be one of 'auto', 'float32', "),
                                         (["--device", "cpu"], "--device 'cpu' applies only to a transformers model "
                                                               "run here (--model ID_OR_PATH without --endpoint); "
                                                               "this run's coder is 'synthetic'")])
def test_run_settings_are_validated_before_any_work(tmp_path, args, needle):
    res = cli("run", "--out", tmp_path / "r", *args)
    assert res.exit_code == 2 and needle in res.output, res.output
    assert not (tmp_path / "r").exists()


def test_run_takes_several_samples_files_after_one_option(tmp_path, monkeypatch):
    """'--samples a b' was 'Got unexpected extra argument (b)' though 'execute a b' takes both."""
    from bayespass import pipeline

    files = [tmp_path / f"{name}.jsonl" for name in ("a", "b", "c")]
    for f in files:
        f.write_text('{"task_id": "HumanEval/0", "solution": "x = 1"}\n')
    seen = []
    monkeypatch.setattr(pipeline, "run", lambda out, cfg, echo=None: seen.append(cfg.samples) or {})
    monkeypatch.setattr("bayespass.cli._print_run", lambda tables, out: None)
    for args in (["--samples", files[0], files[1], files[2]], ["--samples", files[0], "--samples", files[1],
                                                               "--samples", files[2]]):
        res = cli("run", "--out", tmp_path / "r", *args)
        assert res.exit_code == 0, res.output
    assert seen == [[str(f) for f in files]] * 2
    res = cli("run", "--out", tmp_path / "r", files[0])  # an argument without --samples: said, nothing run
    assert res.exit_code == 2 and "run takes no arguments; got" in res.output and "--samples FILE" in res.output
    # mixed forms lost the order the files were given in (a, c, b): refused, nothing run
    res = cli("run", "--out", tmp_path / "r", "--samples", files[0], files[1], "--samples", files[2])
    assert res.exit_code == 2 and "either after one --samples" in res.output, res.output
    assert len(seen) == 2


def test_workers_zero_in_python():
    from bayespass.execution.harness import SlotPool

    with pytest.raises(ValueError, match="workers must be a positive integer; got 0"):
        SlotPool(0)


@pytest.mark.skipif(os.getuid() != 0, reason="only root gives each slot a uid of its own")
def test_more_workers_than_sandbox_uids_are_refused_before_any_work(tmp_path):
    # 3000 used to claim all 2000 uids, then fail with "claimed by other evaluators"
    from bayespass.execution.harness import SlotPool
    from bayespass.execution.sandbox import _UID_COUNT

    said = rf"workers must be at most {_UID_COUNT} \(each slot runs its programs as a uid of its own"
    with pytest.raises(ValueError, match=said):
        SlotPool(_UID_COUNT + 1)
    with pytest.raises(ValueError, match=said):
        bp.RunConfig(workers=_UID_COUNT + 1)
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"task_id": "HumanEval/0", "solution": "x = 1"}\n')
    res = cli("execute", samples, "--out", tmp_path / "r", "--workers", str(_UID_COUNT + 1))
    assert res.exit_code == 2 and f"error: workers must be at most {_UID_COUNT}" in res.output, res.output
    assert not (tmp_path / "r").exists()


def test_correctness_is_checked_for_every_format(tmp_path):
    with pytest.raises(ValueError, match="correctness='foo' is not supported; choose one of"):
        bp.read_counts(EXAMPLE, correctness="foo")
    res = cli("estimate", EXAMPLE, "--correctness", "foo")
    assert res.exit_code == 2 and "--correctness 'foo' is not supported" in res.output


def test_make_counts_rejects_booleans():
    with pytest.raises(ValueError, match="not booleans"):
        bp.make_counts([True], [True])


@pytest.mark.parametrize("c", [[True, False], np.array([True, False], dtype=object)])
def test_a_table_of_booleans_is_refused_as_counts(c):
    df = pd.DataFrame({"task": ["a", "b"], "n": [5, 5], "c": c})
    with pytest.raises(ValueError, match="column 'c' must hold integer counts, not booleans"):
        bp.counts_from_frame(df)
    assert int(bp.counts_from_frame(df.assign(c=[1, 0]))["c"].sum()) == 1


@pytest.mark.parametrize("bad", [dict(cpu_s=0), dict(nofile=-1), dict(memory_mb=10), dict(timeout_budget=0)])
def test_limits_are_validated(bad):
    with pytest.raises(ValueError, match="Limits\\."):
        bp.Limits(**bad)


def test_estimate_on_an_executed_samples_file(tmp_path):
    """A samples.nc from 'bayespass execute' is read as counts (once crashed with ModuleNotFoundError)."""
    import xarray as xr

    ds = xr.Dataset({"exists": (("config", "task", "sample"), np.ones((1, 2, 3), bool)),
                     "correct": (("config", "task", "sample"), np.array([[[1, 0, 1], [0, 0, 0]]], bool)),
                     "base_correct": (("config", "task", "sample"), np.ones((1, 2, 3), bool))},
                    coords={"config": ["m"], "task": ["a", "b"], "sample": [0, 1, 2]})
    ds.to_netcdf(tmp_path / "samples.nc", engine="h5netcdf")
    counts = bp.read_counts(tmp_path / "samples.nc")
    assert counts.c.values.tolist() == [[2, 0]] and counts.n.values.tolist() == [[3, 3]]
    res = cli("estimate", tmp_path / "samples.nc", "--k", "1")
    assert res.exit_code == 0, res.output


def test_unknown_model_method_and_candidates():
    counts = bp.make_counts([4, 4], [1, 3])
    with pytest.raises(ValueError, match="model='beta' is not supported"):
        bp.fit(counts, "beta")
    with pytest.raises(ValueError, match="method='nuts' is not supported; choose one of"):
        bp.fit(counts, "bb", "nuts")
    with pytest.raises(ValueError, match="stats.model='beta' is not supported"):
        bp.rcParams["stats.model"] = "beta"
    with pytest.raises(ValueError, match=r"target_accept must be in \(0, 1\); got 1.5"):
        bp.fit(counts, "shared", "mcmc", target_accept=1.5)
    for seed in ("x", -1, 1.5, True):
        with pytest.raises(ValueError, match=rf"seed must be a non-negative integer; got {seed!r}"):
            bp.fit(counts, "bb", seed=seed)


@pytest.mark.parametrize("args", [("--k", "0"), ("--budget", "0"), ("--step", "-1"), ("--pair", "nope:coder-small|T=0.8")])
def test_allocate_refuses_bad_options_before_fitting_counts(monkeypatch, args):
    import bayespass.models.fit as fit_module

    def no_fit(*a, **kw):
        raise AssertionError("fitted before the options were checked")

    monkeypatch.setattr(fit_module, "fit", no_fit)
    res = cli("allocate", EXAMPLE, *args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert args[0] in res.output or "nope" in res.output, res.output


@pytest.mark.parametrize(("command", "args", "needle"), [
    *[(c, ("--k", "0"), "--k must hold positive integers (k >= 1)") for c in ("compare", "curve", "estimate", "plan",
                                                                             "allocate")],
    *[(c, ("--k", "1,x"), "--k must hold positive integers") for c in ("compare", "curve", "estimate")],
    *[(c, ("--ci-prob", "1.5"), "--ci-prob must be in (0, 1); got 1.5") for c in ("compare", "curve")]])
def test_bad_k_or_ci_prob_is_refused_before_a_fit_is_read_or_made(tmp_path, command, args, needle):
    """'compare' fitted the joint model first (about 5 s) and then said "k must ..."; 'curve' read the fit first."""
    missing = tmp_path / "nothing_here.csv"  # read or fitted before the check, it would be "does not exist"
    extra = ("--width", "0.05") if command == "plan" else ()
    res = cli(command, missing, *args, *extra)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert needle in " ".join(res.output.split()), res.output


def test_k_may_be_written_in_scientific_notation():
    assert bp.passk(bp.read_counts(EXAMPLE), "1,1e2", method="unbiased").k.values.tolist() == [1, 100]
    res = cli("estimate", EXAMPLE, "--k", "1,1e2", "--method", "naive")
    assert res.exit_code == 0 and "pass@100" in res.output, res.output


@pytest.mark.parametrize(("args", "needle"), [(("--k", "0"), "--k must hold positive integers (k >= 1)"),
                                              (("--k", "1,x"), "--k must hold positive integers"),
                                              (("--ci-prob", "1.5"), "--ci-prob must be in (0, 1); got 1.5")])
def test_fit_refuses_bad_table_options_before_fitting(monkeypatch, args, needle):
    import bayespass.models.fit as fit_module

    def no_fit(*a, **kw):
        raise AssertionError("fitted before the options were checked")

    monkeypatch.setattr(fit_module, "fit", no_fit)
    res = cli("fit", EXAMPLE, *args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert needle in " ".join(res.output.split()), res.output


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"top_p": 0}, "top_p must be in (0, 1]; got 0"),
    ({"top_p": True}, "top_p must be in (0, 1]; got True"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer; got 0"),
    ({"temperature": (0.4, -1.0)}, "temperatures must be non-negative numbers (0: greedy, with an endpoint)"),
    ({"temperature": ()}, "temperatures must be non-negative numbers"),
    ({"temperature": (0.4, 0)}, "temperatures must be > 0 for coder 'm', which samples"),
    ({"temperature": float("nan")}, "temperatures must be a non-negative number"),
])
def test_generate_and_run_share_one_decoding_check(kwargs, needle):
    """One rule for `bayespass generate` and RunConfig (`bayespass run`): each value refused with its name."""
    from bayespass.pipeline.config import RunConfig
    from bayespass.validate import check_decoding

    good = {"top_p": 0.95, "max_new_tokens": 16, "temperature": (0.4,), "greedy_ok": False, "coder": "m"}
    with pytest.raises((ValueError, TypeError), match=re.escape(needle)):
        check_decoding(**{**good, **kwargs})
    check_decoding(**good)
    check_decoding(**{**good, "temperature": (0.0, 0.4), "greedy_ok": True})  # greedy with an endpoint
    if "temperature" in kwargs and isinstance(kwargs["temperature"], tuple):  # RunConfig says the same
        with pytest.raises(ValueError, match=re.escape(needle.replace("'m'", "'synthetic'"))):
            RunConfig(temperatures=kwargs["temperature"])


def test_a_fit_where_counts_are_passed_and_fits_of_other_counts_are_named():
    """passk_curve, plan, allocate, ppc and improvability on counts said AttributeError ('Dataset' object has no
    attribute 'groups'); stack and compare of fits made on other counts said numpy's "all input arrays must
    have the same shape"."""
    import warnings

    rng = np.random.default_rng(0)
    n = np.full((2, 60), 5)
    counts = bp.make_counts(n, rng.binomial(n, rng.beta(0.5, 0.5, (2, 60))))
    for call, what in ((lambda: bp.passk_curve(counts, [1]), "passk_curve"),
                       (lambda: bp.plan(counts, k=10, target_width=0.1), "plan"),
                       (lambda: bp.allocate(counts, k=10, budget=5), "allocate"),
                       (lambda: bp.ppc(counts), "ppc"), (lambda: bp.improvability(counts), "improvability"),
                       (lambda: bp.plot_ppc(counts), "plot_ppc")):
        with pytest.raises(TypeError, match=rf"^{what} needs a fit .*got Dataset; these are counts: fit them first"):
            call()
    # a path (the run directory a user has at hand): what to read it with
    with pytest.raises(TypeError, match=r"^passk_curve needs a fit .*got str 'runs/demo': read it first, "
                                        r"bp.load_run\(path\) for a run directory"):
        bp.passk_curve("runs/demo", [1])
    with pytest.raises(TypeError, match=r"got str 'runs/demo': read a run directory first, bp.load_run\(path\)"):
        bp.gate("runs/demo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = bp.fit(counts, "bb", "eb", seed=0, progressbar=False)
        b = bp.fit(counts.isel(task=slice(0, 30)), "zoibb", "eb", seed=0, progressbar=False)
        c = bp.fit(bp.make_counts(n, np.minimum(counts.c.values + 1, 5), task=counts.task.values,
                                  config=counts.config.values), "zoibb", "eb", seed=0, progressbar=False)
    with pytest.raises(ValueError, match=r"stacking needs fits of the same counts; 'b' \(2 configs x 30 tasks\)"):
        bp.stack({"a": a, "b": b})
    with pytest.raises(ValueError, match=r"compare needs fits of the same counts; 'c' .* other n or c"):
        bp.compare({"a": a, "c": c})


def test_to_counts_of_counts_says_they_are_counts_already():
    counts = bp.make_counts([4, 4], [1, 3])
    with pytest.raises(TypeError, match=r"^to_counts needs executed samples .*got Dataset; these are counts already"):
        bp.to_counts(counts)  # was KeyError 'exists'
    with pytest.raises(TypeError, match=r"to_counts needs executed samples .*got list$"):
        bp.to_counts([1, 2])


def test_plot_ppc_of_an_inferencedata_without_replicates_names_the_groups_it_lacks():
    import arviz as az

    with pytest.raises(ValueError, match=r"plot_ppc needs .* lacks \['constant_data', 'observed_data', 'posterior_predictive'\]"):
        bp.plot_ppc(az.from_dict(posterior={"a": np.zeros((1, 5))}))


@pytest.mark.parametrize(("rows", "needle"), [
    (["a,inf,1"], r"row 1 \(task 'a'\): n must be a non-negative integer; got inf"),  # was pandas' own message
    (["a,5,1,m,hot"], r"row 1 \(task 'a'\): temperature must be a non-negative number or empty; got 'hot'"),
    (["a,5,1,m,-0.5"], r"row 1 \(task 'a'\): temperature must be a non-negative number or empty; got -0.5"),
])
def test_counts_csv_names_the_row_of_an_infinite_count_or_a_bad_temperature(tmp_path, rows, needle):
    path = tmp_path / "counts.csv"
    header = "task,n,c,model,temperature" if rows[0].count(",") == 4 else "task,n,c"
    path.write_text("\n".join([header, *rows, "b,5,2" + (",m,0.2" if "model" in header else "")]) + "\n")
    with pytest.raises(ValueError, match=needle):
        bp.read_counts(path)
    res = cli("estimate", path)
    assert res.exit_code != 0 and re.search(needle, res.output.replace("\n", " ")), res.output


def test_counts_with_an_empty_temperature_cell_read():
    counts = bp.counts_from_frame(__import__("pandas").DataFrame(
        {"task": ["a", "b"], "n": [5, 5], "c": [1, 2], "model": ["m", "m"], "temperature": ["", 0.8]}))
    assert sorted(counts.config.values) == ["m", "m|T=0.8"]


def test_counts_with_more_samples_than_a_pair_key_holds():
    # n = 1e11 samples of one task made the (config, n, c) key overflow int64 (an OverflowError traceback)
    counts = bp.make_counts([[10**11, 5], [5, 5]], [[1, 2], [3, 4]])
    est = bp.passk(counts, k=[1])
    expect = np.array([(1e-11 + 2 / 5) / 2, (3 / 5 + 4 / 5) / 2])
    np.testing.assert_allclose(est.sel(method="naive").squeeze().values, expect, rtol=1e-12)


@pytest.mark.parametrize(("temp", "shown"), [("hot", "str 'hot'"), (-1, "int '-1'"), (True, "bool 'True'")])
def test_samples_temperature_must_be_a_number(tmp_path, temp, shown):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return 1\n", "model": "m",
                                "temperature": temp}) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"s.jsonl, line 1 (task 'HumanEval/0'): 'temperature' must be a "
                                                   f"non-negative number (or absent); got {shown}")):
        bp.execute(path, bp.load_suite("humaneval"), progress=False)


def test_samples_temperature_as_a_numeric_string_labels_its_config():
    from bayespass.execution.samples_io import read_samples

    df = read_samples([{"task_id": "t", "completion": "x", "model": "m", "temperature": "0.8"}])
    assert df.config.tolist() == ["m|T=0.8"]


def test_fit_of_a_path_and_stack_of_a_list_say_what_to_pass():
    with pytest.raises(TypeError, match=r"got str 'counts.csv': read a counts file or run directory with "
                                        r"bp.read_counts\(path\)"):
        bp.fit("counts.csv")
    with pytest.raises(TypeError, match=r"fits must be a dict of model name -> fit.*; got list"):
        bp.stack([1, 2])  # used to print every InferenceData's repr as "names"


@pytest.mark.parametrize(("model", "method"), [("bb", "mcmc"), ("bb", "eb"), ("shared", "eb"), ("auto", "eb")])
def test_one_chain_is_refused_before_sampling(monkeypatch, model, method):
    """One chain has no R-hat: the gate failed every config, and MCMC reran each 4x and 16x as long, in vain."""
    import bayespass.models.fit as fit_module

    def no_sampling(*a, **kw):
        raise AssertionError("sampled before chains was checked")

    monkeypatch.setattr(fit_module, "_fit_model", no_sampling)
    monkeypatch.setattr(fit_module, "_fit_auto", no_sampling)
    with pytest.raises(ValueError, match=r"chains must be at least 2: the convergence gate compares chains \(R-hat\); "
                                         r"got 1"):
        bp.fit(bp.read_counts(EXAMPLE), model, method, chains=1)


@pytest.mark.parametrize(("setting", "value", "error"), [("draws", 0, ValueError), ("tune", 0, ValueError),
                                                         ("cores", -1, ValueError), ("draws", 1.5, TypeError)])
def test_sampler_settings_are_refused_before_sampling(monkeypatch, setting, value, error):
    """draws=0 ran four candidates' MCMC fits before the stack failed on it."""
    import bayespass.models.fit as fit_module

    def no_sampling(*a, **kw):
        raise AssertionError(f"sampled before {setting} was checked")

    monkeypatch.setattr(fit_module, "_fit_model", no_sampling)
    monkeypatch.setattr(fit_module, "_fit_auto", no_sampling)
    with pytest.raises(error, match=rf"{setting} must be a positive integer; got {value}"):
        bp.fit(bp.read_counts(EXAMPLE), "auto", "mcmc", **{setting: value})


@pytest.mark.parametrize(("args", "said"), [
    (["fit", EXAMPLE, "--method", "mcmc", "--draws", "0"], "error: --draws must be a positive integer; got 0"),
    (["fit", EXAMPLE, "--method", "mcmc", "--chains", "1"], "error: --chains must be at least 2"),
    (["fit", EXAMPLE, "--model", "beta"], "error: --model 'beta' is not supported; choose one of"),
    (["compare", EXAMPLE, "--method", "nuts"], "error: --method 'nuts' is not supported; choose one of"),
    (["compare", EXAMPLE, "--pairs", "coder-large|T=0.8|humaneval:nope"],
     "error: --pairs ('coder-large|T=0.8|humaneval', 'nope') names config 'nope', which is not among the configs"),
    (["estimate", EXAMPLE, "--method", "magic"], "error: --method 'magic' is not supported; choose one of"),
    (["fit", EXAMPLE, "--model", "hier", "--method", "mcmc", "--sampler", "hmc"],
     "(use one of ['pymc', 'nutpie', 'numpyro', 'blackjax']: NUTS implementations, or --model 'shared')"),
])
def test_the_statistics_commands_name_their_options(args, said):
    """Their errors named bp.fit's parameters (model='beta', draws must ...), not the options a user typed."""
    res = cli(*args)
    assert res.exit_code == 2 and said in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("call", ["compare_configs", "passk_curve", "plan", "allocate"])
def test_an_inference_data_bayespass_did_not_make_is_refused_by_name(call):
    """compare_configs raised AttributeError ('InferenceData' object has no attribute 'constant_data')."""
    import arviz as az

    foreign = az.from_dict(posterior={"mu": np.zeros((2, 10))})
    kwargs = {"compare_configs": dict(k=[1]), "passk_curve": dict(k=[1]), "plan": dict(k=10, target_width=0.05),
              "allocate": dict(k=10, budget=5)}[call]
    with pytest.raises(ValueError, match=r"idata was not produced by bayespass.fit \(posterior.attrs has no "
                                         r"'bayespass_model'\)"):
        getattr(bp, call)(foreign, **kwargs)


def test_a_fit_selected_by_one_config_label_says_to_select_a_list():
    """fit.sel(config="a") drops the config dimension; passk_curve said "Dimensions {'config'} do not exist"."""
    rng = np.random.default_rng(0)
    counts = bp.make_counts(np.full((2, 40), 5), rng.binomial(5, 0.5, (2, 40)), config=["a", "b"])
    fit = bp.fit(counts, "bb", "eb", seed=1, progressbar=False)
    for call in (lambda f: bp.passk_curve(f, [1, 10]), bp.ppc, lambda f: bp.plan(f, k=10, target_width=0.5)):
        with pytest.raises(ValueError, match=r"selected by one label \(fit.sel\(config='a'\) drops the config "
                                             r"dimension\); select a list to keep it: fit.sel\(config=\['a'\]\)"):
            call(fit.sel(config="a"))
    np.testing.assert_allclose(bp.passk_curve(fit.sel(config=["a"]), [1, 10])["mean"].values,
                               bp.passk_curve(fit, [1, 10])["mean"].sel(config=["a"]).values, rtol=1e-12)
