import warnings
from pathlib import Path

import pytest

import bayespass as bp
from bayespass.data.suites import Suite, Task
from bayespass.execution import fuzz

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "evalplus"


def test_humaneval_loads_offline_with_expected_outputs():
    s = bp.load_suite("humaneval")
    assert len(s) == 164
    assert all(len(e["values"]) == len(s.tasks[t].inputs) > 0 for t, e in s.expected.items())
    probe, gold = s.split("HumanEval/0")
    assert probe.size + gold.size == len(s.tasks["HumanEval/0"].inputs) and probe.max() < gold.min()
    single = next(t for t, task in s.tasks.items() if len(task.inputs) == 1)
    assert [list(x) for x in s.split(single)] == [[0], [0]]


@pytest.mark.skipif(not SHARED.exists(), reason="shared evalplus data not present")
def test_evalplus_suites_load():
    he = bp.load_suite("humaneval+", SHARED / "HumanEvalPlus.jsonl.gz", expected=False)
    mb = bp.load_suite("mbpp+", SHARED / "MbppPlus.jsonl.gz", expected=False)
    assert (len(he), len(mb)) == (164, 378)
    assert all(t.inputs and 0 < t.n_base <= len(t.inputs) for t in he.tasks.values())


def test_missing_dataset_error(monkeypatch, tmp_path):
    import evalplus.data.utils

    monkeypatch.delenv("MBPP_OVERRIDE_PATH", raising=False)
    monkeypatch.setattr(evalplus.data.utils, "CACHE_DIR", str(tmp_path))  # an empty evalplus cache
    with pytest.raises(FileNotFoundError, match=r"mbpp\+ needs its evalplus dataset file: none was given, "
                                                r"MBPP_OVERRIDE_PATH is not set, and evalplus's cache has none "
                                                rf"\({tmp_path}\)\. Give it: --dataset \.\.\./MbppPlus\.jsonl\.gz"):
        bp.load_suite("mbpp+")
    with pytest.raises(ValueError, match="suite='apps' is not supported"):
        bp.load_suite("apps")


@pytest.mark.skipif(not SHARED.exists(), reason="shared evalplus data not present")
def test_a_suite_is_read_from_evalplus_cache_when_no_file_is_given(monkeypatch, tmp_path):
    """A user who has run evalplus has its datasets in evalplus's cache, named by release; bayespass reads the
    release the installed evalplus reads by default (MBPP+ v0.2.0), else the newest full release, and never a
    -Mini or -NoExtreme file. A given file or the override variable still comes first."""
    import gzip

    import evalplus.data.mbpp
    import evalplus.data.utils

    monkeypatch.delenv("MBPP_OVERRIDE_PATH", raising=False)
    monkeypatch.setattr(evalplus.data.utils, "CACHE_DIR", str(tmp_path))
    default = evalplus.data.mbpp.MBPP_PLUS_VERSION  # v0.2.0 for evalplus 0.3.1
    real = gzip.decompress((SHARED / "MbppPlus.jsonl.gz").read_bytes())
    first = real.split(b"\n", 1)[0] + b"\n"  # one task
    (tmp_path / f"MbppPlus-Mini-{default}.jsonl").write_bytes(first)
    (tmp_path / "MbppPlus-v0.1.0.jsonl").write_bytes(first)
    (tmp_path / "MbppPlus-v0.100.0.jsonl").write_bytes(first + first)
    s = bp.load_suite("mbpp+", expected=False)  # no default release: the newest (0.100 > 0.1, by number)
    assert (len(s), s.source) == (1, str(tmp_path / "MbppPlus-v0.100.0.jsonl"))
    (tmp_path / f"MbppPlus-{default}.jsonl").write_bytes(real)
    s = bp.load_suite("mbpp+", expected=False)  # the installed evalplus's default release wins
    assert (len(s), s.source) == (378, str(tmp_path / f"MbppPlus-{default}.jsonl"))
    given = bp.load_suite("mbpp+", SHARED / "MbppPlus.jsonl.gz", expected=False)
    assert given.source == str(SHARED / "MbppPlus.jsonl.gz") and given.source_hash != s.source_hash
    monkeypatch.setenv("MBPP_OVERRIDE_PATH", str(tmp_path / "MbppPlus-v0.1.0.jsonl"))
    assert len(bp.load_suite("mbpp+", expected=False)) == 1


def test_mutations_are_type_preserving_and_deterministic():
    import random

    for x in (3, 2.5, True, "hello", [1, 2, 3], (1, "a"), {1, 2}, {"a": 1}, [[1, 2], [3]]):
        for s in range(20):
            m1, m2 = fuzz.mutate(x, random.Random(s)), fuzz.mutate(x, random.Random(s))
            assert type(m1) is type(x) and m1 == m2


def test_fuzz_keeps_only_valid_inputs_and_is_deterministic():
    task = Task("toy/sqrt", "def f(x):\n", "f", "    assert x >= 0\n    return int(x ** 0.5)\n",
                inputs=[[4], [9], [16]], n_base=3)
    # a generous limit: an input whose canonical call times out is dropped, so on a busy machine the default
    # 0.2 s would make the two runs differ by load, not by seed
    a = fuzz.fuzz_inputs(task, 60, seed=1, time_limit=30.0)
    b = fuzz.fuzz_inputs(task, 60, seed=1, time_limit=30.0)
    assert a["inputs"] == b["inputs"] and len(a["inputs"]) > 20
    from bayespass.execution.child import decode

    assert all(decode(x)[0] >= 0 for x in a["inputs"])  # negatives raise in the canonical: dropped
    c = fuzz.fuzz_inputs(task, 60, seed=2, time_limit=30.0)
    assert c["inputs"] != a["inputs"]


def test_the_contract_goes_first_in_the_entry_points_body():
    mbpp = Task("toy/mbpp", '"""\nDouble it.\n"""\n', "f", "\ndef g(y):\n    return y\n\ndef f(x,\n      k=2):\n"
                "    return g(x) * k\n", contract='\n  assert isinstance(x, int), "invalid inputs"\n  assert x >= 0\n')
    assert mbpp.contracted_program == ('"""\nDouble it.\n"""\n\ndef g(y):\n    return y\n\ndef f(x,\n      k=2):\n'
                                       '    assert isinstance(x, int), "invalid inputs"\n    assert x >= 0\n'
                                       "    return g(x) * k\n")
    tabs = Task("toy/tabs", "", "f", "def f(x):\n\treturn x\n", contract="    assert x >= 0\n")
    assert tabs.contracted_program == "def f(x):\n\tassert x >= 0\n\treturn x\n"
    he = Task("toy/he", 'def f(x):\n    """Doc."""\n', "f", "    return x\n", contract="\n    assert x >= 0\n")
    ns = {}
    exec(compile(he.contracted_program, "he", "exec"), ns)  # noqa: S102 - our own toy program
    with pytest.raises(AssertionError):
        ns["f"](-1)
    for unchanged in (Task("a", "", "f", "def f(x): return x\n", contract="  assert x\n"),  # body on the def line
                      Task("b", "", "f", "def f(x):\n    return x\n"),  # no contract
                      Task("c", "", "h", "def f(x):\n    return x\n", contract="  assert x\n")):  # no entry point
        assert unchanged.contracted_program == unchanged.reference_program


def test_fuzz_applies_an_mbpp_style_contract():
    # MBPP's prompt is a docstring and its contract is indented for the body of the def in the canonical
    # solution: prompt + contract + canonical is not Python, and fuzzing kept no input at all
    task = Task("toy/mbpp", '"""\nDouble a non-negative int.\n"""\n', "f", "\ndef f(x):\n    return 2 * x\n",
                inputs=[[4], [9], [16]], n_base=3, contract='\n  assert x >= 0, "invalid inputs" # $_CONTRACT_$\n')
    res = fuzz.fuzz_inputs(task, 60, seed=1, time_limit=30.0)
    from bayespass.execution.child import decode

    got = [decode(x)[0] for x in res["inputs"]]
    assert len(got) > 20 and min(got) >= 0  # the canonical accepts negatives: only the contract drops them
    assert [decode(v) for v in res["values"]] == [2 * x for x in got]


@pytest.mark.skipif(not SHARED.exists(), reason="shared evalplus data not present")
def test_evalplus_contracts_compile_and_mbpp_plus_fuzzes():
    he = bp.load_suite("humaneval+", SHARED / "HumanEvalPlus.jsonl.gz", expected=False)
    mb = bp.load_suite("mbpp+", SHARED / "MbppPlus.jsonl.gz", expected=False)
    for s in (he, mb):
        for t in s.tasks.values():
            assert t.contract.strip() and t.contracted_program != t.reference_program, t.task_id
            with warnings.catch_warnings():  # some tasks' own code has invalid escapes ("\\w")
                warnings.simplefilter("ignore")
                compile(t.contracted_program, t.task_id, "exec")
    some = ["Mbpp/2", "Mbpp/3", "Mbpp/100"]
    res = fuzz.fuzz_suite(mb, 60, seed=0, use_cache=False, tasks=some)
    assert all(len(res[t]["inputs"]) >= 30 for t in some), {t: len(res[t]["inputs"]) for t in some}


@pytest.mark.slow
def test_fuzz_humaneval_200_inputs_for_90pct_of_tasks():
    s = bp.load_suite("humaneval")
    res = fuzz.fuzz_suite(s, 300, seed=0)
    summ = fuzz.summary(res, 200)
    assert summ["tasks"] == 164 and summ["frac_ge_threshold"] >= 0.9, summ
    some = ["HumanEval/0", "HumanEval/12", "HumanEval/100"]
    again = fuzz.fuzz_suite(s, 300, seed=0, use_cache=False, tasks=some)  # recomputed, not the cache
    assert all(again[t]["inputs"] == res[t]["inputs"] and again[t]["values"] == res[t]["values"] for t in some)
    other = fuzz.fuzz_suite(s, 300, seed=1, use_cache=False, tasks=some)
    assert all(other[t]["inputs"] != res[t]["inputs"] for t in some)


def test_suite_repr():
    s = Suite("x", {"a": Task("a", "", "f", "", inputs=[[1]])}, "abc")
    assert "1 tasks" in repr(s)


def test_the_cache_directory_follows_bayespass_cache_then_xdg_cache_home(tmp_path, monkeypatch):
    from bayespass.data.suites import cache_dir

    monkeypatch.delenv("BAYESPASS_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "bayespass"
    assert (cache_dir().stat().st_mode & 0o777) == 0o700
    for unusable in ("", "relative/dir"):  # the XDG rule: ignore it, use ~/.cache
        monkeypatch.setenv("XDG_CACHE_HOME", unusable)
        assert cache_dir() == tmp_path / "home" / ".cache" / "bayespass"
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"


def test_a_cache_directory_that_cannot_be_made_is_a_clear_error(tmp_path, monkeypatch):
    from bayespass.data.suites import cache_dir

    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path / "afile"))
    with pytest.raises(ValueError, match=r"cache directory '.*afile' \(from \$BAYESPASS_CACHE\) cannot be used: "
                                         r"it is a file; set BAYESPASS_CACHE to a directory"):
        cache_dir()
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path / "afile" / "sub"))
    with pytest.raises(ValueError, match="cannot be used: Not a directory"):
        cache_dir()
    monkeypatch.delenv("BAYESPASS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    with pytest.raises(ValueError, match=r"from \$XDG_CACHE_HOME"):
        cache_dir()
